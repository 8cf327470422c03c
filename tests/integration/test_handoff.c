/*
 * test_handoff.c - no request waits behind a worker that cannot run
 * (issue 20): a request written to a stopped worker is taken back and
 * served by another worker of the sandbox, never twice; a stopped
 * worker's own request is answered when it resumes.  On one CPU, a
 * sandbox's requests go to one worker while its servlets do not block,
 * and to both once one did.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static th_daemon daemon_;

/* Clients in the load, each with one request in flight. */
#define CLIENTS 4
/* A request slower than this counts as a client timeout (issue 20). */
#define CLIENT_TIMEOUT_MS 2000

static int group_setup(void **state)
{
    (void)state;
    th_prepare();
    static char conf[2048];
    snprintf(conf, sizeof(conf),
             "status-page /sandlet-status;\n"
             "sandbox main { workers 2; }\n"
             "servlet /probe/* { library \"%s\"; sandbox main; }\n"
             /* Only fast requests: the probe servlet above also sleeps, and the pool
              * queues nothing behind a servlet it found slow. */
             "servlet /fast/* { library \"%s\"; sandbox main; }\n"
             "servlet /up/* { library \"%s\"; sandbox main; }\n"
             "sandbox solo { workers 1; timeout 1000; }\n"
             "servlet /solo/* { library \"%s\"; sandbox solo; }\n"
             "sandbox qa { workers 1; queue-timeout 400; }\n"
             "servlet /qa/* { library \"%s\"; sandbox qa; }\n"
             "sandbox qb { workers 1; }\n"
             "servlet /qb/* { library \"%s\"; sandbox qb; }\n"
             "sandbox iso2 { workers 2; }\n"
             "servlet /iso2 { library \"%s\"; sandbox iso2; }\n",
             th_fixture("probe"), th_fixture("probe"), th_fixture("upload"), th_fixture("probe"),
             th_fixture("probe"), th_fixture("probe"), th_fixture("isolation"));
    return th_start(&daemon_, conf, false);
}

static int group_teardown(void **state)
{
    (void)state;
    return th_stop(&daemon_) == 0 ? 0 : -1;
}

/* The pids of the sandbox's two workers: two requests that overlap in
 * time must be served by both. */
static void worker_pids(pid_t pid[2])
{
    for (int attempt = 0; attempt < 20; attempt++) {
        th_conn *a = th_connect(daemon_.port, false);
        th_conn *b = th_connect(daemon_.port, false);
        assert_non_null(a);
        assert_non_null(b);
        const char *rq = "GET /probe/sleep?ms=150 HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_int_equal(th_send_str(a, rq), 0);
        assert_int_equal(th_send_str(b, rq), 0);
        th_response ra, rb;
        assert_int_equal(th_read(a, &ra, false), 0);
        assert_int_equal(th_read(b, &rb, false), 0);
        assert_int_equal(ra.status, 200);
        assert_int_equal(rb.status, 200);
        pid[0] = (pid_t)atol(ra.body);
        pid[1] = (pid_t)atol(rb.body);
        th_response_free(&ra);
        th_response_free(&rb);
        th_close(a);
        th_close(b);
        if (pid[0] > 0 && pid[1] > 0 && pid[0] != pid[1])
            return;
        usleep(100000);
    }
    fail_msg("the two workers of sandbox main never answered side by side");
}

static long metric(const char *series)
{
    long v = th_metric(daemon_.port, "/sandlet-status?format=prometheus", series);
    assert_true(v >= -1);
    return v;
}

typedef struct load {
    unsigned requests, late, failed;
    unsigned long long worst_ms;
    unsigned by[2]; /* answered by pid[0], pid[1] */
} load;

/* Rounds of CLIENTS requests at once on kept-alive connections, for ms
 * milliseconds; each request's time counts from the round's start. */
static void run_load(unsigned ms, const pid_t pid[2], load *out)
{
    th_conn *c[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        c[i] = th_connect(daemon_.port, false);
        assert_non_null(c[i]);
    }
    unsigned long long end = th_now_ms() + ms;
    while (th_now_ms() < end) {
        unsigned long long start = th_now_ms();
        for (int i = 0; i < CLIENTS; i++)
            assert_int_equal(
                th_send_str(c[i], "GET /probe/sleep?ms=20 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
        for (int i = 0; i < CLIENTS; i++) {
            th_response r;
            int rc = th_read(c[i], &r, false);
            unsigned long long took = th_now_ms() - start;
            out->requests++;
            if (took > out->worst_ms)
                out->worst_ms = took;
            if (took > CLIENT_TIMEOUT_MS)
                out->late++;
            if (rc != 0 || r.status != 200) {
                out->failed++;
            } else {
                pid_t who = (pid_t)atol(r.body);
                out->by[0] += who == pid[0];
                out->by[1] += who == pid[1];
            }
            if (rc == 0)
                th_response_free(&r);
        }
    }
    for (int i = 0; i < CLIENTS; i++)
        th_close(c[i]);
}

/* A worker stopped while idle (SIGSTOP, as an operator's debugger does)
 * is handed a request it cannot start: the acceptor takes it back after
 * SANDLET_CLAIM_MS and the other worker serves it, and everything else,
 * with no client waiting anywhere near 2 s.  When the stopped worker
 * runs again it skips the request it lost (it never serves it: that
 * would be a RESPONSE for a request it does not hold, a protocol error
 * that kills it) and serves again. */
static void test_stopped_idle_worker(void **state)
{
    (void)state;
    pid_t pid[2];
    worker_pids(pid);
    long moved_before = metric("sandlet_requests_moved_total{sandbox=\"main\"} ");
    assert_int_equal(kill(pid[0], SIGSTOP), 0);
    load during = {0};
    run_load(5000, pid, &during);
    assert_int_equal(kill(pid[0], SIGCONT), 0);
    printf("stopped for 5 s: %u requests, worst %llu ms, %u late, %u failed, %u by the "
           "other worker\n",
           during.requests, during.worst_ms, during.late, during.failed, during.by[1]);
    assert_int_equal(during.failed, 0);
    assert_int_equal(during.late, 0);
    assert_int_equal(during.by[0], 0);
    assert_int_equal(during.by[1], during.requests);
    assert_true(during.requests > 50);
    assert_true(metric("sandlet_requests_moved_total{sandbox=\"main\"} ") > moved_before);
    assert_true(th_log_wait(&daemon_, "did not start", 2000));

    /* Resumed: it is the same process, it broke no protocol, and it
     * serves again. */
    load after = {0};
    run_load(1500, pid, &after);
    assert_int_equal(after.failed, 0);
    assert_int_equal(kill(pid[0], 0), 0);
    assert_true(after.by[0] > 0);
    assert_false(th_log_contains(&daemon_, "broke the frame protocol"));
}

/* A worker stopped in the middle of a request keeps that request (it has
 * started it: moving it could run it twice); it is answered when the
 * worker resumes, while the other worker serves everything else. */
static void test_stopped_busy_worker(void **state)
{
    (void)state;
    pid_t pid[2];
    worker_pids(pid);
    th_conn *x = th_connect(daemon_.port, false);
    assert_non_null(x);
    unsigned long long t0 = th_now_ms();
    assert_int_equal(th_send_str(x, "GET /probe/sleep?ms=300 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    usleep(100000);
    /* The idle worker answers this one: the busy one is the other. */
    th_response r;
    assert_int_equal(th_request(daemon_.port, "GET", "/probe/pid", NULL, NULL, 0, &r), 0);
    pid_t idle = (pid_t)atol(r.body);
    th_response_free(&r);
    pid_t busy = idle == pid[0] ? pid[1] : pid[0];
    assert_int_equal(kill(busy, SIGSTOP), 0);
    pid_t order[2] = {busy, idle};
    load during = {0};
    run_load(3000, order, &during);
    assert_int_equal(kill(busy, SIGCONT), 0);
    assert_int_equal(during.failed, 0);
    assert_int_equal(during.late, 0);
    assert_int_equal(during.by[0], 0);
    assert_int_equal(th_read(x, &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal((pid_t)atol(r.body), busy);
    assert_true(th_now_ms() - t0 >= 3000);
    th_response_free(&r);
    th_close(x);
    assert_false(th_log_contains(&daemon_, "broke the frame protocol"));
}

/* A request whose body streams (larger than the acceptor's 1 MiB window)
 * waits at the connection until a worker claims it; offered to a stopped
 * worker, it is taken back whole (nothing of its body went past the
 * REQUEST frame) and another worker reads every byte.  Each worker is
 * stopped in turn, as the acceptor offers the first request to the first
 * idle worker. */
static void test_streamed_body_moves_whole(void **state)
{
    (void)state;
    enum { SIZE = 8 << 20 };
    unsigned char *body = malloc(SIZE);
    assert_non_null(body);
    for (size_t i = 0; i < SIZE; i++)
        body[i] = (unsigned char)(i * 131 + (i >> 13));
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, body, SIZE);
    char want[crypto_hash_sha256_BYTES * 2 + 32];
    sodium_bin2hex(want, sizeof(want), digest, sizeof(digest));
    snprintf(want + strlen(want), sizeof(want) - strlen(want), " %d\n", SIZE);
    pid_t pid[2];
    worker_pids(pid);
    long moved_before = metric("sandlet_requests_moved_total{sandbox=\"main\"} ");
    for (int i = 0; i < 2; i++) {
        assert_int_equal(kill(pid[i], SIGSTOP), 0);
        th_conn *c = th_connect(daemon_.port, false);
        assert_non_null(c);
        char head[128];
        snprintf(head, sizeof(head),
                 "POST /up/read HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", SIZE);
        unsigned long long t0 = th_now_ms();
        assert_int_equal(th_send_str(c, head), 0);
        assert_int_equal(th_send(c, body, SIZE), 0);
        th_response r;
        assert_int_equal(th_read(c, &r, false), 0);
        unsigned long long took = th_now_ms() - t0;
        assert_int_equal(kill(pid[i], SIGCONT), 0);
        printf("8 MiB upload with worker %d of 2 stopped: %d in %llu ms\n", i + 1, r.status, took);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, want);
        assert_true(took < CLIENT_TIMEOUT_MS);
        th_response_free(&r);
        th_close(c);
    }
    assert_true(metric("sandlet_requests_moved_total{sandbox=\"main\"} ") > moved_before);
    assert_false(th_log_contains(&daemon_, "broke the frame protocol"));
    free(body);
}

/* A worker that never runs again holds nothing (its request was taken
 * back) but would hold its slot for ever: it is killed when the request
 * taken back from it would have timed out, and its replacement serves.
 * With one worker, that is the sandbox's only way back. */
static void test_stopped_worker_replaced(void **state)
{
    (void)state;
    th_response r;
    assert_int_equal(th_request(daemon_.port, "GET", "/solo/pid", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    pid_t stopped = (pid_t)atol(r.body);
    th_response_free(&r);
    static const char timeouts[] = "sandlet_request_timeouts_total{sandbox=\"solo\"} ";
    long timeouts_before = th_metric(daemon_.port, "/sandlet-status?format=prometheus", timeouts);
    assert_int_equal(kill(stopped, SIGSTOP), 0);
    unsigned long long t0 = th_now_ms();
    assert_int_equal(th_request(daemon_.port, "GET", "/solo/pid", NULL, NULL, 0, &r), 0);
    unsigned long long took = th_now_ms() - t0;
    printf("the only worker stopped: answered %d by a new worker after %llu ms\n", r.status, took);
    assert_int_equal(r.status, 200);
    assert_true((pid_t)atol(r.body) != stopped);
    assert_true(took >= 1000);
    th_response_free(&r);
    assert_true(th_log_contains(&daemon_, "has not run since a request was taken back"));
    kill(stopped, SIGCONT); /* killed already: a no-op, or a zombie's */
    /* No request ran past its timeout: the kill is a restart, not a
     * request timeout on the status page. */
    assert_int_equal(th_metric(daemon_.port, "/sandlet-status?format=prometheus", timeouts),
                     timeouts_before);
}

/* Sends target on n fresh connections while d's acceptor is stopped, so
 * that it reads them all and hands them out in one loop turn: requests
 * for a busy or stopped worker then queue in its channel. */
static void send_together_to(const th_daemon *d, th_conn **c, int n, const char *target)
{
    char req[256];
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", target);
    assert_int_equal(kill(d->pid, SIGSTOP), 0);
    for (int i = 0; i < n; i++) {
        c[i] = th_connect(d->port, false);
        assert_non_null(c[i]);
        assert_int_equal(th_send_str(c[i], req), 0);
    }
    assert_int_equal(kill(d->pid, SIGCONT), 0);
}

static void send_together(th_conn **c, int n, const char *target)
{
    send_together_to(&daemon_, c, n, target);
}

/* Requests queued in a stopped worker's channel (pipeline) are taken back
 * together once the first is not claimed in SANDLET_CLAIM_MS, and the
 * other worker runs each exactly once: its run counter goes up by one per
 * request, and the stopped worker, resumed, skips them all (running one
 * would be an answer where a SKIP is due: a protocol error that kills it)
 * and has run none. */
static void test_stalled_queue_moves_once(void **state)
{
    (void)state;
    enum { N = 8 };
    pid_t pid[2];
    worker_pids(pid);
    long moved = metric("sandlet_requests_moved_total{sandbox=\"main\"} ");
    long batched = metric("sandlet_requests_batched_total{sandbox=\"main\"} ");
    assert_int_equal(kill(pid[0], SIGSTOP), 0);
    th_conn *c[N];
    unsigned long long t0 = th_now_ms();
    send_together(c, N, "/fast/count");
    unsigned long runs[N];
    for (int i = 0; i < N; i++) {
        th_response r;
        assert_int_equal(th_read(c[i], &r, false), 0);
        assert_int_equal(r.status, 200);
        long who;
        assert_int_equal(sscanf(r.body, "%ld %lu", &who, &runs[i]), 2);
        assert_int_equal((pid_t)who, pid[1]);
        th_response_free(&r);
        th_close(c[i]);
    }
    /* The other worker's counter went up by exactly one per request. */
    unsigned long lo = runs[0], hi = runs[0];
    for (int i = 0; i < N; i++) {
        lo = runs[i] < lo ? runs[i] : lo;
        hi = runs[i] > hi ? runs[i] : hi;
        for (int j = 0; j < i; j++)
            assert_true(runs[i] != runs[j]);
    }
    assert_int_equal(hi - lo, N - 1);
    unsigned long long took = th_now_ms() - t0;
    long moved_now = metric("sandlet_requests_moved_total{sandbox=\"main\"} ");
    long batched_now = metric("sandlet_requests_batched_total{sandbox=\"main\"} ");
    printf("%d requests, %ld queued behind another, %ld taken back from the stopped worker, "
           "all answered in %llu ms\n",
           N, batched_now - batched, moved_now - moved, took);
    /* Several waited in the stopped worker's channel, and all moved. */
    assert_true(moved_now - moved >= 2);
    assert_true(batched_now - batched >= 2);
    assert_int_equal(kill(pid[0], SIGCONT), 0);
    usleep(300 * 1000); /* it runs, and skips what it lost */
    /* Resumed, it serves again (two at once: one is its) and has run
     * none of them. */
    for (int attempt = 0; attempt < 20; attempt++) {
        th_conn *two[2];
        send_together(two, 2, "/fast/count");
        bool its = false;
        for (int i = 0; i < 2; i++) {
            th_response r;
            assert_int_equal(th_read(two[i], &r, false), 0);
            long who;
            unsigned long n;
            assert_int_equal(sscanf(r.body, "%ld %lu", &who, &n), 2);
            th_response_free(&r);
            th_close(two[i]);
            if ((pid_t)who == pid[0]) {
                assert_int_equal(n, 1);
                its = true;
            }
        }
        if (its) {
            assert_false(th_log_contains(&daemon_, "broke the frame protocol"));
            return;
        }
    }
    fail_msg("the resumed worker %d never answered again", (int)pid[0]);
}

/* Fast requests queued in a worker's channel behind a slow one do not
 * wait for it: when the worker claims none of them for SANDLET_BEHIND_MS
 * they are taken back and the other worker serves them, each in well
 * under the slow request's second.  (Once a servlet is known to be slow,
 * nothing queues behind its requests at all: test_queue.) */
static void test_fast_behind_slow_moves(void **state)
{
    (void)state;
    enum { N = 8 };
    pid_t pid[2];
    worker_pids(pid);
    th_conn *slow = th_connect(daemon_.port, false);
    assert_non_null(slow);
    assert_int_equal(th_send_str(slow, "GET /fast/sleep?ms=1000 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    usleep(100 * 1000);
    long moved = metric("sandlet_requests_moved_total{sandbox=\"main\"} ");
    th_conn *c[N];
    unsigned long long t0 = th_now_ms();
    send_together(c, N, "/fast/pid");
    unsigned long long worst = 0;
    for (int i = 0; i < N; i++) {
        th_response r;
        assert_int_equal(th_read(c[i], &r, false), 0);
        assert_int_equal(r.status, 200);
        unsigned long long took = th_now_ms() - t0;
        if (took > worst)
            worst = took;
        th_response_free(&r);
        th_close(c[i]);
    }
    long moved_now = metric("sandlet_requests_moved_total{sandbox=\"main\"} ");
    printf("%d fast requests beside a 1 s one: worst %llu ms, %ld moved from behind it\n", N, worst,
           moved_now - moved);
    /* The fast servlet ran only fast requests before: the slow one was not known
     * to be slow, so the fast ones queued behind it and were moved. */
    assert_true(moved_now - moved >= 1);
    assert_true(worst < 500);
    th_response r;
    assert_int_equal(th_read(slow, &r, false), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    th_close(slow);
    assert_false(th_log_contains(&daemon_, "broke the frame protocol"));
}

/* A request taken back from a stopped worker is another client's: the
 * worker reads it when it resumes and skips it, and, as after a served
 * request, its bytes are gone from the worker's buffers before the next
 * client's servlet runs there (issue 13's rule, worker.c). */
static void test_skipped_request_wiped(void **state)
{
    (void)state;
    th_response r;
    /* All idle: the first worker of the pool takes it. */
    assert_int_equal(th_request(daemon_.port, "GET", "/iso2?do=scanin", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    pid_t stopped = (pid_t)atol(r.body);
    assert_non_null(strstr(r.body, "clean"));
    th_response_free(&r);
    assert_true(stopped > 1);

    assert_int_equal(kill(stopped, SIGSTOP), 0);
    char pad[1200];
    memset(pad, 'p', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    char headers[1600];
    snprintf(headers, sizeof(headers), "X-Pad: %s\r\nX-Secret: SECRET-0123456789abcdef\r\n", pad);
    int rc = th_request(daemon_.port, "GET", "/iso2?do=echo", headers, NULL, 0, &r);
    assert_int_equal(kill(stopped, SIGCONT), 0);
    assert_int_equal(rc, 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "echo SECRET-0123456789abcdef\n");
    th_response_free(&r);
    usleep(300 * 1000); /* it runs, reads the request and skips it */

    /* The next client's request, on the worker that skipped. */
    assert_int_equal(th_request(daemon_.port, "GET", "/iso2?do=scanin", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    printf("after the skip: %s", r.body);
    assert_int_equal((pid_t)atol(r.body), stopped);
    if (!strstr(r.body, "clean"))
        fail_msg("another client's request taken back from worker %d is still in its buffer",
                 (int)stopped);
    th_response_free(&r);
}

/* A request a timer hands to a worker is written at once, not when the
 * loop next wakes: here queue-timeout answers a pipelined request 503,
 * and the client's next request goes to an idle worker of another
 * sandbox from that timer.  Late, the claim check would take it back
 * from a worker that never saw it. */
static void test_timer_hands_over_at_once(void **state)
{
    (void)state;
    long moved = metric("sandlet_requests_moved_total{sandbox=\"qb\"} ");
    th_conn *busy = th_connect(daemon_.port, false);
    assert_non_null(busy);
    assert_int_equal(th_send_str(busy, "GET /qa/sleep?ms=1500 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    usleep(100000);
    th_conn *c = th_connect(daemon_.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /qa/pid HTTP/1.1\r\nHost: x\r\n\r\n"
                                    "GET /qb/pid HTTP/1.1\r\nHost: x\r\n\r\n"),
                     0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 503);
    th_response_free(&r);
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    th_close(c);
    assert_int_equal(th_read(busy, &r, false), 0);
    th_response_free(&r);
    th_close(busy);
    assert_int_equal(metric("sandlet_requests_moved_total{sandbox=\"qb\"} "), moved);
    assert_false(th_log_contains(&daemon_, "sandbox 'qb' did not start"));
}

/* The pids that answered n requests sent to d together (one loop turn
 * hands them all out: send_together_to). */
static void pids_together(const th_daemon *d, int n, const char *target, pid_t *pid)
{
    th_conn *c[16];
    assert_true(n <= 16);
    send_together_to(d, c, n, target);
    for (int i = 0; i < n; i++) {
        th_response r;
        assert_int_equal(th_read(c[i], &r, false), 0);
        assert_int_equal(r.status, 200);
        pid[i] = (pid_t)atol(r.body);
        th_response_free(&r);
        th_close(c[i]);
    }
}

static th_daemon one_cpu_;
static bool one_cpu_up;

/* Stops the one-CPU daemon even when its test failed half-way. */
static int one_cpu_teardown(void **state)
{
    (void)state;
    if (!one_cpu_up)
        return 0;
    one_cpu_up = false;
    return th_stop(&one_cpu_) == 0 ? 0 : -1;
}

/* A daemon on one CPU: two workers would only take turns on it, so a
 * sandbox's requests all go to one while its servlets do not block (with
 * the rule gone, a turn's requests are shared between both), and to both
 * while one blocks (with that signal gone, they all queue on one worker).
 * The sleeps are 0.2 ms, short of what makes a servlet "slow" (2 ms),
 * whose requests never have others queued behind them anyway. */
static void test_one_cpu_packs_until_blocking(void **state)
{
    (void)state;
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &all))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
    static char conf[512];
    snprintf(conf, sizeof(conf),
             "sandbox p { workers 2; }\n"
             "servlet /p/* { library \"%s\"; sandbox p; }\n"
             "servlet /s/* { library \"%s\"; sandbox p; }\n",
             th_fixture("probe"), th_fixture("probe"));
    th_daemon *d = &one_cpu_;
    int rc = th_start(d, conf, false);
    assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
    assert_int_equal(rc, 0);
    one_cpu_up = true;

    /* A servlet that sleeps: its worker notes it once it answered (from
     * its second request on: the first sets its counts), and four of
     * them handed out together then go to both workers (retried while
     * the second worker starts). */
    pid_t pid[8];
    bool apart = false;
    for (int attempt = 0; attempt < 20 && !apart; attempt++) {
        for (int i = 0; i < 3; i++) {
            th_response r;
            assert_int_equal(th_request(d->port, "GET", "/s/sleep?us=200", NULL, NULL, 0, &r), 0);
            assert_int_equal(r.status, 200);
            th_response_free(&r);
        }
        usleep(20 * 1000); /* its note follows its answer */
        pids_together(d, 4, "/s/sleep?us=200", pid);
        for (int i = 1; i < 4; i++)
            apart = apart || pid[i] != pid[0];
        if (!apart)
            usleep(100 * 1000);
    }
    assert_true(apart);

    /* Nothing blocked for a second and more: requests handed out in one
     * loop turn all go to one worker, round after round. */
    usleep(1500 * 1000);
    for (int round = 0; round < 10; round++) {
        pids_together(d, 8, "/p/pid", pid);
        for (int i = 1; i < 8; i++)
            assert_int_equal(pid[i], pid[0]);
    }
    one_cpu_up = false;
    assert_int_equal(th_stop(d), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stopped_idle_worker),
        cmocka_unit_test(test_stopped_busy_worker),
        cmocka_unit_test(test_streamed_body_moves_whole),
        cmocka_unit_test(test_stopped_worker_replaced),
        cmocka_unit_test(test_skipped_request_wiped),
        cmocka_unit_test(test_stalled_queue_moves_once),
        cmocka_unit_test(test_fast_behind_slow_moves),
        cmocka_unit_test(test_timer_hands_over_at_once),
        cmocka_unit_test_teardown(test_one_cpu_packs_until_blocking, one_cpu_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

/*
 * test_serve.c - end-to-end: sandletd on an ephemeral loopback port serves
 * servlets from sandboxed workers over real HTTP; crashes are contained;
 * SIGTERM stops everything and leaves no process behind.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static th_daemon daemon_;

static char *make_conf(void)
{
    static char conf[8192];
    snprintf(conf, sizeof(conf),
             "status-page /sandlet-status;\n"
             "sandbox main { workers 2; }\n"
             "sandbox crashy { workers 1; }\n"
             "servlet /hello { library \"%s\"; sandbox main; }\n"
             "servlet /probe/* { library \"%s\"; sandbox main; param greeting \"hi there\"; }\n"
             "servlet /crash { library \"%s\"; sandbox crashy; }\n"
             "sandbox broken { workers 1; queue-timeout 60000; }\n"
             "sandbox slow { workers 1; timeout 300; }\n"
             "servlet /slow/* { library \"%s\"; sandbox slow; }\n"
             "servlet /slower/* { library \"%s\"; sandbox slow; timeout 900; }\n"
             "sandbox recycle { workers 1; max-requests 3; syscall-violations log; }\n"
             "servlet /recycle/* { library \"%s\"; sandbox recycle; }\n"
             "sandbox learner { workers 1; syscall-violations log; }\n"
             "servlet /learn { library \"%s\"; sandbox learner; }\n"
             "servlet /broken { library \"/nonexistent/broken.so\"; sandbox broken; }\n",
             th_build_path("examples/hello/.libs/hello.so"),
             th_build_path("tests/fixtures/.libs/probe.so"),
             th_build_path("tests/fixtures/.libs/crash.so"),
             th_build_path("tests/fixtures/.libs/probe.so"),
             th_build_path("tests/fixtures/.libs/probe.so"),
             th_build_path("tests/fixtures/.libs/probe.so"),
             th_build_path("tests/fixtures/.libs/hostile.so"));
    return conf;
}

static int group_setup(void **state)
{
    (void)state;
    th_become_subreaper();
    signal(SIGPIPE, SIG_IGN);
    return th_start(&daemon_, make_conf(), true);
}

static int group_teardown(void **state)
{
    (void)state;
    return th_stop(&daemon_) == 0 ? 0 : -1;
}

static void get(const char *target, th_response *r)
{
    assert_int_equal(th_request(daemon_.port, "GET", target, NULL, NULL, 0, r), 0);
}

static void test_hello(void **state)
{
    (void)state;
    th_response r;
    get("/hello", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "<h1>Hello, world</h1>"));
    assert_non_null(strstr(r.body, "<p>request "));
    char v[128];
    assert_true(th_header(&r, "Content-Type", v, sizeof(v)));
    assert_string_equal(v, "text/html; charset=utf-8");
    assert_true(th_header(&r, "Date", v, sizeof(v)));
    assert_non_null(strstr(v, " GMT"));
    assert_true(th_header(&r, "Server", v, sizeof(v)));
    assert_true(th_header(&r, "Content-Length", v, sizeof(v)));
    assert_int_equal(atoi(v), (int)r.body_len);
    th_response_free(&r);

    get("/hello?name=%3Cb%3Eyou%26me", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "<h1>Hello, &lt;b&gt;you&amp;me</h1>"));
    th_response_free(&r);
}

/* Counts the daemon's processes below root (itself included) and fails
 * if one maps libpq: a configuration without a database must not pay for
 * its libraries (src/db/pq.h; about 5 MiB of RSS a process).  Nor may one
 * map an NSS module (libnss_systemd and what it pulls in, 0.7 MiB): users
 * and groups are looked up in a child that exits (identity.c). */
static int processes_without_libpq(pid_t root)
{
    pid_t todo[64];
    int n = 0, seen = 0;
    todo[n++] = root;
    while (n) {
        pid_t p = todo[--n];
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/maps", (int)p);
        char *maps = th_slurp(path, NULL);
        if (maps) {
            seen++;
            if (strstr(maps, "/libpq.so"))
                fail_msg("process %d of a daemon without a database maps libpq", (int)p);
            if (strstr(maps, "/libnss_"))
                fail_msg("process %d of the daemon maps an NSS module: a user or group lookup "
                         "ran in it",
                         (int)p);
            free(maps);
        }
        n += th_children_of(p, todo + n, (int)(sizeof(todo) / sizeof(todo[0])) - n);
    }
    return seen;
}

static void test_no_database_no_libpq(void **state)
{
    (void)state;
    th_response r;
    for (int i = 0; i < 4; i++) { /* both workers of main have served */
        get("/hello", &r);
        assert_int_equal(r.status, 200);
        th_response_free(&r);
    }
    /* acceptor, supervisor and at least main's two workers */
    assert_true(processes_without_libpq(daemon_.pid) >= 4);
}

/* True when pid maps a file whose path holds name. */
static bool maps_file(pid_t pid, const char *name)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    char *maps = th_slurp(path, NULL);
    assert_non_null(maps);
    bool found = strstr(maps, name) != NULL;
    free(maps);
    return found;
}

static void write_db_conf(const th_daemon *d, unsigned workers)
{
    FILE *f = fopen(d->conf, "w");
    assert_non_null(f);
    fprintf(
        f,
        "listen 127.0.0.1:0;\nspool-dir %s/spool;\n"
        "sandbox shop { workers %u; database \"host=127.0.0.1 port=1 dbname=shop user=shop\"; }\n"
        "servlet /shop { library \"%s\"; sandbox shop; }\n",
        d->dir, workers, th_build_path("examples/hello/.libs/hello.so"));
    assert_int_equal(fclose(f), 0);
}

/* A sandbox with a database: the process that becomes the acceptor parses
 * without libpq, and a child that exits checks the string (main.c), so the
 * process facing the network never maps libpq nor the libraries it brings,
 * at start or after a reload (the acceptor parses the new text again).
 * The supervisor, which derives the workers' ports from the string, does:
 * that is where this test sees libpq at all. */
static void test_database_acceptor_no_libpq(void **state)
{
    (void)state;
    th_daemon d;
    char body[1024];
    snprintf(
        body, sizeof(body),
        "sandbox shop { workers 1; database \"host=127.0.0.1 port=1 dbname=shop user=shop\"; }\n"
        "servlet /shop { library \"%s\"; sandbox shop; }\n",
        th_build_path("examples/hello/.libs/hello.so"));
    assert_int_equal(th_start(&d, body, false), 0);
    th_response r;
    /* hello never asks for its database: served though none listens. */
    assert_int_equal(th_request(d.port, "GET", "/shop", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    /* Failures are told once the daemon is stopped: the tests after this
     * one count the processes left behind. */
    bool at_start = maps_file(d.pid, "/libpq.so");
    pid_t kids[16];
    int n = th_children_of(d.pid, kids, 16);
    bool seen = false;
    for (int i = 0; i < n; i++)
        seen |= maps_file(kids[i], "/libpq.so");
    assert_true(seen); /* the supervisor checked the string */

    write_db_conf(&d, 2);
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    assert_true(th_log_wait(&d, " applied: ", 5000));
    assert_int_equal(th_request(d.port, "GET", "/shop", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    bool after_reload = maps_file(d.pid, "/libpq.so");
    assert_int_equal(th_stop(&d), 0);
    if (at_start)
        fail_msg("the acceptor maps libpq: a database string was parsed in it");
    if (after_reload)
        fail_msg("the acceptor maps libpq after a reload");
}

static void test_ipv6(void **state)
{
    (void)state;
    th_conn *c = th_connect(daemon_.port6, true);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "Hello, world"));
    th_response_free(&r);
    th_close(c);
}

static void test_keepalive_100(void **state)
{
    (void)state;
    th_conn *c = th_connect(daemon_.port, false);
    assert_non_null(c);
    for (int i = 0; i < 100; i++) {
        char req[128];
        snprintf(req, sizeof(req), "GET /probe/param?v=%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
        assert_int_equal(th_send_str(c, req), 0);
        th_response r;
        assert_int_equal(th_read(c, &r, false), 0);
        assert_int_equal(r.status, 200);
        char want[16];
        snprintf(want, sizeof(want), "%d", i);
        assert_string_equal(r.body, want);
        th_response_free(&r);
    }
    th_close(c);
}

static void test_pipelined_in_order(void **state)
{
    (void)state;
    th_conn *c = th_connect(daemon_.port, false);
    assert_non_null(c);
    /* All in one write, mixing servlet and acceptor answers. */
    char reqs[4096] = "";
    for (int i = 0; i < 20; i++) {
        char one[128];
        if (i % 5 == 4)
            snprintf(one, sizeof(one), "GET /missing%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
        else
            snprintf(one, sizeof(one), "GET /probe/param?v=%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
        strcat(reqs, one);
    }
    assert_int_equal(th_send_str(c, reqs), 0);
    for (int i = 0; i < 20; i++) {
        th_response r;
        assert_int_equal(th_read(c, &r, false), 0);
        if (i % 5 == 4) {
            assert_int_equal(r.status, 404);
        } else {
            assert_int_equal(r.status, 200);
            char want[16];
            snprintf(want, sizeof(want), "%d", i);
            assert_string_equal(r.body, want);
        }
        th_response_free(&r);
    }
    th_close(c);
}

/* A client that pipelines far more than the acceptor buffers, behind a
 * slow request: reading pauses when the buffer is full and resumes; every
 * request is answered, in order, and the connection stays up. */
static void test_pipelined_flood(void **state)
{
    (void)state;
    enum { N = 8000 };
    th_conn *c = th_connect(daemon_.port, false);
    assert_non_null(c);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *first = "GET /probe/sleep?ms=200 HTTP/1.1\r\nHost: x\r\n\r\n";
        if (write(c->fd, first, strlen(first)) < 0)
            _exit(1);
        char one[96];
        for (int i = 0; i < N; i++) {
            int n =
                snprintf(one, sizeof(one), "GET /probe/param?v=%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
            for (int off = 0; off < n;) {
                ssize_t k = write(c->fd, one + off, (size_t)(n - off));
                if (k <= 0)
                    _exit(1);
                off += (int)k;
            }
        }
        _exit(0);
    }
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    for (int i = 0; i < N; i++) {
        assert_int_equal(th_read(c, &r, false), 0);
        assert_int_equal(r.status, 200);
        if (atoi(r.body) != i)
            fail_msg("response %d carries %s", i, r.body);
        th_response_free(&r);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    th_close(c);
}

static void test_not_found_keeps_connection(void **state)
{
    (void)state;
    th_conn *c = th_connect(daemon_.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /no/such/thing HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 404);
    th_response_free(&r);
    assert_int_equal(th_send_str(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    th_close(c);
}

static void test_two_workers_answer(void **state)
{
    (void)state;
    /* Two slow requests at once must be served by two different workers. */
    th_conn *a = th_connect(daemon_.port, false);
    th_conn *b = th_connect(daemon_.port, false);
    assert_non_null(a);
    assert_non_null(b);
    const char *req = "GET /probe/sleep?ms=300 HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(th_send_str(a, req), 0);
    assert_int_equal(th_send_str(b, req), 0);
    th_response ra, rb;
    assert_int_equal(th_read(a, &ra, false), 0);
    assert_int_equal(th_read(b, &rb, false), 0);
    assert_int_equal(ra.status, 200);
    assert_int_equal(rb.status, 200);
    long pa = atol(ra.body), pb = atol(rb.body);
    assert_true(pa > 1);
    assert_true(pb > 1);
    assert_int_not_equal(pa, pb);
    assert_int_not_equal(pa, (long)daemon_.pid);
    th_response_free(&ra);
    th_response_free(&rb);
    th_close(a);
    th_close(b);
}

static void test_binary_body_round_trip(void **state)
{
    (void)state;
    static const char small[] = "a\0b\0\0c\r\n\0";
    th_response r;
    assert_int_equal(
        th_request(daemon_.port, "POST", "/probe/echo", NULL, small, sizeof(small), &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, sizeof(small));
    assert_memory_equal(r.body, small, sizeof(small));
    th_response_free(&r);

    /* 1 MiB + 1 of every byte value: spans several request frames and
     * streams back in several response frames. */
    size_t n = (1u << 20) + 1;
    unsigned char *big = malloc(n);
    assert_non_null(big);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        big[i] = (unsigned char)(x >> 16);
    }
    assert_int_equal(th_request(daemon_.port, "POST", "/probe/echo", NULL, big, n, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, n);
    assert_memory_equal(r.body, big, n);
    th_response_free(&r);
    free(big);
}

static void test_request_fields(void **state)
{
    (void)state;
    th_response r;
    assert_int_equal(th_request(daemon_.port, "GET", "/probe/header?name=x-test",
                                "X-Test: hello there\r\n", NULL, 0, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "hello there");
    th_response_free(&r);

    get("/probe/request?a=1&b=%20", &r);
    assert_string_equal(r.body, "GET|/probe/request|a=1&b=%20|11");
    th_response_free(&r);

    get("/probe/param?v=a%2Bb+c%zz", &r);
    assert_string_equal(r.body, "a+b c%zz");
    th_response_free(&r);

    get("/probe/greeting", &r);
    assert_string_equal(r.body, "hi there");
    th_response_free(&r);
}

static void test_header_injection_refused(void **state)
{
    (void)state;
    th_response r;
    get("/probe/badheader", &r);
    assert_int_equal(r.status, 200);
    char want[16];
    snprintf(want, sizeof(want), "%d", -EINVAL);
    assert_string_equal(r.body, want);
    assert_null(strstr(r.head, "X-Evil"));
    assert_null(strstr(r.head, "Set-Cookie"));
    th_response_free(&r);
}

static void test_status_and_head(void **state)
{
    (void)state;
    th_response r;
    get("/probe/status?code=201", &r);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
    /* Not a final status: the servlet's bug, answered 502. */
    get("/probe/status?code=42", &r);
    assert_int_equal(r.status, 502);
    th_response_free(&r);
    get("/probe/status?code=100", &r);
    assert_int_equal(r.status, 502);
    th_response_free(&r);

    assert_int_equal(th_request(daemon_.port, "HEAD", "/hello", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    char v[32];
    assert_true(th_header(&r, "Content-Length", v, sizeof(v)));
    assert_true(atoi(v) > 0);
    assert_int_equal(r.body_len, 0);
    th_response_free(&r);
}

static void test_streaming(void **state)
{
    (void)state;
    th_response r;
    get("/probe/flush", &r);
    assert_int_equal(r.status, 200);
    assert_true(r.chunked);
    assert_string_equal(r.body, "first;second");
    th_response_free(&r);

    /* 3 MiB: auto-flushed in pieces, chunked, byte-exact. */
    get("/probe/big?n=3145728", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 3145728);
    for (size_t i = 0; i < r.body_len; i += 4096)
        assert_int_equal(r.body[i], 'a');
    assert_int_equal(r.body[r.body_len - 1], (char)('a' + (3145727 % 4096) % 26));
    th_response_free(&r);
}

/* Answers of every size around the point where the acceptor stops
 * gathering head and body into one buffer for send(2) and hands the
 * kernel both pieces instead (http.c, SEND_GATHER), pipelined on one
 * connection so that a piece of one answer out of place shows in the
 * next: each arrives whole and byte-exact. */
static void test_answer_sizes_byte_exact(void **state)
{
    (void)state;
    th_conn *c = th_connect(daemon_.port, false);
    assert_non_null(c);
    char reqs[64 * 1024];
    size_t at = 0;
    int count = 0;
    for (long n = 1; n <= 1400; n += 13, count++) {
        int k = snprintf(reqs + at, sizeof(reqs) - at,
                         "GET /probe/big?n=%ld HTTP/1.1\r\nHost: t\r\n\r\n", n);
        assert_true(k > 0 && (size_t)k < sizeof(reqs) - at);
        at += (size_t)k;
    }
    assert_int_equal(th_send(c, reqs, at), 0);
    long n = 1;
    for (int i = 0; i < count; i++, n += 13) {
        th_response r;
        assert_int_equal(th_read(c, &r, false), 0);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.body_len, (size_t)n);
        for (size_t j = 0; j < r.body_len; j++)
            if (r.body[j] != (char)('a' + (j % 4096) % 26))
                fail_msg("answer of %ld bytes: byte %zu is %d", n, j, r.body[j]);
        th_response_free(&r);
    }
    th_close(c);
}

static void test_http10_closes(void **state)
{
    (void)state;
    th_conn *c = th_connect(daemon_.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /hello HTTP/1.0\r\n\r\n"), 0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.head, "HTTP/1.1 200"));
    th_response_free(&r);
    assert_true(th_eof(c));
    th_close(c);
}

/* Counts zombie processes among this test's descendants' children. */
static int zombies_of(pid_t parent)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "ps -o stat= --ppid %d 2>/dev/null | grep -c '^Z'", (int)parent);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int n = -1;
    if (fscanf(p, "%d", &n) != 1)
        n = -1;
    pclose(p);
    return n;
}

static void crash_once(const char *how, const char *log_needle)
{
    char target[64];
    snprintf(target, sizeof(target), "/crash?how=%s", how);
    th_response r;
    get(target, &r);
    assert_int_equal(r.status, 502);
    th_response_free(&r);
    char line[128];
    snprintf(line, sizeof(line), "while serving /crash: GET /crash?how=%s HTTP/1.1", how);
    assert_true(th_log_wait(&daemon_, line, 5000));
    assert_true(th_log_contains(&daemon_, log_needle));
    /* The next request is served by the restarted worker. */
    get("/crash", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "alive");
    th_response_free(&r);
}

static void test_crash_is_contained(void **state)
{
    (void)state;
    crash_once("segv", "killed by signal 11");
    crash_once("abort", "killed by signal 6");
    crash_once("exit", "exited with status 3");
    /* Frames that break the protocol are the worker's death, not ours. */
    crash_once("garbage", "broke the frame protocol (bad frame header)");
    crash_once("hugelen", "broke the frame protocol (frame length over the maximum)");
    /* The other sandbox never noticed. */
    th_response r;
    get("/hello", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    /* Every dead worker was reaped. */
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "pgrep -P %d", (int)daemon_.pid);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int sup = 0;
    assert_int_equal(fscanf(p, "%d", &sup), 1);
    pclose(p);
    assert_int_equal(zombies_of(daemon_.pid), 0);
    assert_int_equal(zombies_of(sup), 0);
}

static void test_sigterm_leaves_nothing(void **state)
{
    (void)state;
    th_daemon d;
    assert_int_equal(th_start(&d, make_conf(), false), 0);
    /* Make sure workers are up and remember their pids. */
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/probe/pid", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    pid_t worker = (pid_t)atol(r.body);
    th_response_free(&r);
    assert_true(worker > 1);
    assert_int_equal(kill(worker, 0), 0);

    /* A request in flight when SIGTERM arrives still gets its answer, even
     * when, as service managers do, every process of the daemon gets the
     * signal. */
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /probe/sleep?ms=400 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    usleep(100000);
    pid_t sup;
    assert_int_equal(th_children_of(d.pid, &sup, 1), 1);
    pid_t workers[16];
    int nw = th_children_of(sup, workers, 16);
    assert_true(nw >= 3); /* main 2, crashy 1, and broken while it retries */
    kill(d.pid, SIGTERM);
    kill(sup, SIGTERM);
    for (int i = 0; i < nw && i < 16; i++)
        kill(workers[i], SIGTERM);
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_true(th_eof(c));
    th_close(c);

    int st;
    assert_true(th_wait_exit(d.pid, 10000, &st));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* Nothing was orphaned to us (we are the subreaper) and the worker is
     * gone.  Anything reparented to us that is already dead is reaped;
     * anything still alive after a short grace is a leftover, named in the
     * failure. */
    pid_t kids[8];
    int n = 0;
    for (int i = 0; i < 200; i++) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        n = th_children_of(getpid(), kids, 8);
        if (n == 1)
            break;
        usleep(10000);
    }
    for (int i = 0; i < n && i < 8; i++) {
        if (kids[i] == daemon_.pid)
            continue;
        char path[64], comm[64] = "?";
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)kids[i]);
        FILE *f = fopen(path, "r");
        if (f) {
            size_t k = fread(comm, 1, sizeof(comm) - 1, f);
            comm[k] = '\0';
            fclose(f);
        }
        fail_msg("process %d (%s) outlived the stopped daemon", (int)kids[i], comm);
    }
    assert_int_equal(n, 1); /* only daemon_ of the group */
    assert_int_equal(kill(worker, 0), -1);
    assert_int_equal(errno, ESRCH);
    assert_true(th_log_contains(&d, "stopped"));
}

/* Init scripts and tests take the "listening on" line as the sign that
 * sandletd is up; a stop (or a log reopen) that follows at once must find
 * it ready for it: a clean exit, not a death by the signal. */
static void test_stop_right_after_start(void **state)
{
    (void)state;
    char dir[256], conf[300], log[300];
    assert_int_equal(th_tempdir(dir, sizeof(dir), "early", 0755), 0);
    snprintf(conf, sizeof(conf), "%s/sandlet.conf", dir);
    snprintf(log, sizeof(log), "%s/error.log", dir);
    FILE *f = fopen(conf, "w");
    assert_non_null(f);
    fprintf(f,
            "listen 127.0.0.1:0;\nspool-dir %s/spool;\nsandbox main { workers 1; }\n"
            "servlet /hello { library \"%s\"; sandbox main; }\n",
            dir, th_build_path("examples/hello/.libs/hello.so"));
    fclose(f);
    const char *exe = getenv("SANDLETD") ? getenv("SANDLETD") : "./sandletd";
    for (int round = 0; round < 12; round++) {
        int sig = round % 3 == 2 ? SIGUSR1 : SIGTERM;
        unlink(log); /* each round reads its own "listening on" */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                dup2(fd, STDERR_FILENO);
                dup2(fd, STDOUT_FILENO);
            }
            close_range(3, ~0U, 0);
            execl(exe, "sandletd", "-c", conf, (char *)NULL);
            _exit(127);
        }
        bool up = false;
        for (int waited = 0; waited < 10000 && !up; waited++) {
            char *s = th_slurp(log, NULL);
            up = s && strstr(s, "listening on");
            free(s);
            if (!up)
                usleep(1000);
        }
        assert_true(up);
        kill(pid, sig);
        if (sig == SIGUSR1) {
            /* Reopened its logs and went on serving. */
            usleep(200000);
            assert_int_equal(waitpid(pid, NULL, WNOHANG), 0);
            kill(pid, SIGTERM);
        }
        int st = 0;
        assert_true(th_wait_exit(pid, 10000, &st));
        if (!WIFEXITED(st))
            fail_msg("round %d: sandletd died by signal %d right after it started", round,
                     WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        assert_int_equal(WEXITSTATUS(st), 0);
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
    }
}

/* A stop while a worker still serves: after SANDLET_SHUTDOWN_MS the
 * acceptor answers 503 to the connections left and frees them, then
 * closes the workers' channels.  The worker's record of its client must
 * be gone by then (it was not: a use-after-free that ASan and valgrind
 * runs of this test catch), and the stop is clean. */
static void test_stop_with_busy_worker(void **state)
{
    (void)state;
    th_daemon d;
    char conf[512];
    snprintf(conf, sizeof(conf),
             "sandbox slow { workers 1; timeout 60000; }\n"
             "servlet /slow/* { library \"%s\"; sandbox slow; }\n",
             th_build_path("tests/fixtures/.libs/probe.so"));
    assert_int_equal(th_start(&d, conf, false), 0);
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    /* And one queued behind it, which the stop must let go of too. */
    th_conn *q = th_connect(d.port, false);
    assert_non_null(q);
    assert_int_equal(th_send_str(c, "GET /slow/sleep?ms=14000 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    usleep(200 * 1000);
    assert_int_equal(th_send_str(q, "GET /slow/pid HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    usleep(100 * 1000);
    assert_int_equal(kill(d.pid, SIGTERM), 0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 503);
    th_response_free(&r);
    assert_int_equal(th_read(q, &r, false), 0);
    assert_int_equal(r.status, 503);
    th_response_free(&r);
    th_close(c);
    th_close(q);
    int st = 0;
    if (!th_wait_exit(d.pid, 20000, &st))
        fail_msg("sandletd did not stop within 20 s of SIGTERM");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("sandletd stopped with %s %d (see %s)", WIFEXITED(st) ? "exit status" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), d.log);
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* A service manager may send SIGTERM again while sandletd stops (and a
 * reload may come): each must find a handler or be held, up to the last
 * instruction, so that the stop stays a clean exit.  Here a SIGTERM every
 * fraction of a millisecond until the process is gone. */
static void test_stop_signal_storm(void **state)
{
    (void)state;
    for (int round = 0; round < 5; round++) {
        th_daemon d;
        assert_int_equal(th_start(&d, "sandbox main { workers 1; }\n", false), 0);
        th_response r;
        assert_int_equal(th_request(d.port, "GET", "/nothing-here", NULL, NULL, 0, &r), 0);
        th_response_free(&r);
        int st = 0;
        pid_t got = 0;
        for (int i = 0; i < 400000 && got != d.pid; i++) {
            kill(d.pid, i % 7 == 6 ? SIGHUP : SIGTERM);
            got = waitpid(d.pid, &st, WNOHANG);
            if (got != d.pid)
                usleep(20);
        }
        if (got != d.pid) {
            kill(d.pid, SIGKILL);
            waitpid(d.pid, &st, 0);
            fail_msg("round %d: sandletd did not stop under repeated SIGTERM", round);
        }
        if (!WIFEXITED(st))
            fail_msg("round %d: sandletd died by signal %d while it stopped", round,
                     WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        assert_int_equal(WEXITSTATUS(st), 0);
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
    }
}

static void test_sandbox_that_cannot_start(void **state)
{
    (void)state;
    /* Its requests get 503 with Retry-After at once, not after the
     * minute of queue-timeout; the log says why the sandbox is down. */
    th_response r;
    unsigned long long t0 = th_now_ms();
    get("/broken", &r);
    assert_int_equal(r.status, 503);
    assert_true(th_now_ms() - t0 < 5000);
    char v[16];
    assert_true(th_header(&r, "Retry-After", v, sizeof(v)));
    th_response_free(&r);
    assert_true(th_log_contains(&daemon_, "sandbox 'broken' cannot start: servlet /broken: "
                                          "cannot load /nonexistent/broken.so"));
    assert_true(th_log_contains(&daemon_, "answering 503 until a worker starts"));
    /* Again while its restart backs off: still at once. */
    t0 = th_now_ms();
    get("/broken", &r);
    assert_int_equal(r.status, 503);
    assert_true(th_now_ms() - t0 < 5000);
    th_response_free(&r);
    /* Everyone else is unaffected. */
    get("/hello", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

static void test_timeout_kills_worker(void **state)
{
    (void)state;
    th_response r;
    get("/slow/sleep?ms=3000", &r);
    assert_int_equal(r.status, 504);
    th_response_free(&r);
    assert_true(th_log_wait(&daemon_, "ran past its timeout", 3000));
    assert_true(th_log_contains(&daemon_, "serving /slow/*: GET /slow/sleep?ms=3000 HTTP/1.1"));
    /* The sandbox comes back for the next request. */
    get("/slow/param?v=back", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "back");
    th_response_free(&r);
    /* A servlet's own timeout overrides its sandbox's. */
    get("/slower/sleep?ms=500", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

/* Requests waiting for a worker behind one that hangs are not failed with
 * it: once the hung one is killed they go to the restarted worker.  And
 * each request's timeout runs from when the worker starts it (requests
 * wait in the acceptor's queue, never on the worker's socketpair). */
static void test_pipelined_behind_a_hang(void **state)
{
    (void)state;
    th_conn *a = th_connect(daemon_.port, false);
    assert_non_null(a);
    assert_int_equal(th_send_str(a, "GET /slow/sleep?ms=3000 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    usleep(50000);
    th_conn *b = th_connect(daemon_.port, false);
    th_conn *c = th_connect(daemon_.port, false);
    assert_non_null(b);
    assert_non_null(c);
    assert_int_equal(th_send_str(b, "GET /slow/sleep?ms=100 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    assert_int_equal(th_send_str(c, "GET /slow/param?v=c HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    th_response r;
    assert_int_equal(th_read(a, &r, false), 0);
    assert_int_equal(r.status, 504);
    th_response_free(&r);
    assert_int_equal(th_read(b, &r, false), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "c");
    th_response_free(&r);
    th_close(a);
    th_close(b);
    th_close(c);

    /* Three 200 ms requests on the sandbox's single worker take 600 ms
     * together, past its 300 ms timeout, yet each is within it. */
    th_conn *k[3];
    for (int i = 0; i < 3; i++) {
        k[i] = th_connect(daemon_.port, false);
        assert_non_null(k[i]);
        assert_int_equal(th_send_str(k[i], "GET /slow/sleep?ms=200 HTTP/1.1\r\nHost: x\r\n\r\n"),
                         0);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(th_read(k[i], &r, false), 0);
        assert_int_equal(r.status, 200);
        th_response_free(&r);
        th_close(k[i]);
    }
}

/* Learning mode names each call it lets through once, with the line that
 * would allow it, then what the sandbox's block needs (issue 19): the
 * kernel's record alone names a pid and a number. */
static void test_learning_report(void **state)
{
    (void)state;
    if (th_unconfined())
        return;
    char logged[64] = "";
    FILE *f = fopen("/proc/sys/kernel/seccomp/actions_logged", "r");
    if (f) {
        if (!fgets(logged, sizeof(logged), f))
            logged[0] = '\0';
        fclose(f);
    }
    if (!strstr(logged, "log") || access("/dev/kmsg", R_OK) != 0) {
        printf("SKIP: this kernel does not log seccomp's learning mode to /dev/kmsg\n");
        return;
    }
    th_response r;
    get("/learn?do=read&arg=/etc/passwd", &r);
    assert_int_equal(r.status, 200);
    /* Let through by seccomp, refused by Landlock. */
    assert_non_null(strstr(r.body, "read /etc/passwd: -13"));
    th_response_free(&r);
    if (!th_log_wait(&daemon_, "made system call openat (257), which its allowlist refuses",
                     5000)) {
        char *log = th_slurp(daemon_.log, NULL);
        fail_msg("no report of openat; log:\n%s", log ? log : "");
    }
    assert_true(th_log_contains(&daemon_, "sandbox 'learner' (learning mode): for what its "
                                          "servlets did so far, its block needs: syscalls files;"));
}

static void test_max_requests_recycles(void **state)
{
    (void)state;
    /* Its learning mode was announced loudly at start. */
    assert_true(th_log_contains(&daemon_, "sandbox 'recycle': syscall-violations log is ON"));
    /* And its workers say what their servlets may open: Landlock's
     * refusals are otherwise silent (issue 19). */
    if (!th_unconfined())
        assert_true(th_log_wait(&daemon_,
                                "sandbox 'recycle' (learning mode): its servlets may open their "
                                "libraries and nothing else",
                                5000));
    long pids[7];
    for (int i = 0; i < 7; i++) {
        th_response r;
        get("/recycle/pid", &r);
        assert_int_equal(r.status, 200);
        pids[i] = atol(r.body);
        th_response_free(&r);
    }
    assert_int_equal(pids[0], pids[1]);
    assert_int_equal(pids[1], pids[2]);
    assert_int_not_equal(pids[2], pids[3]);
    assert_int_equal(pids[3], pids[4]);
    assert_int_equal(pids[4], pids[5]);
    assert_int_not_equal(pids[5], pids[6]);
    /* Each recycled worker ran its servlet's destroy on the way out. */
    for (int i = 2; i <= 5; i += 3) {
        char line[64];
        snprintf(line, sizeof(line), "probe: destroy ran in worker %ld", pids[i]);
        assert_true(th_log_wait(&daemon_, line, 3000));
    }
}

/* The value of one Prometheus sample line, or -1. */
static long sample(const char *body, const char *series)
{
    const char *p = strstr(body, series);
    return p ? atol(p + strlen(series)) : -1;
}

static void test_status_page(void **state)
{
    (void)state;
    th_response r;
    get("/sandlet-status", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "sandbox"));
    assert_non_null(strstr(r.body, "crashy"));
    th_response_free(&r);
    get("/sandlet-status?format=prometheus", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "# TYPE sandlet_worker_crashes_total counter"));
    /* The crash test killed crashy's worker five times and each came back. */
    assert_true(sample(r.body, "sandlet_worker_crashes_total{sandbox=\"crashy\"} ") >= 5);
    assert_true(sample(r.body, "sandlet_worker_restarts_total{sandbox=\"crashy\"} ") >= 5);
    assert_int_equal(sample(r.body, "sandlet_worker_crashes_total{sandbox=\"main\"} "), 0);
    assert_true(sample(r.body, "sandlet_requests_served_total{sandbox=\"main\"} ") > 100);
    assert_true(sample(r.body, "sandlet_request_timeouts_total{sandbox=\"slow\"} ") >= 1);
    assert_true(sample(r.body, "sandlet_requests_rejected_total{sandbox=\"broken\"} ") >= 1);
    assert_int_equal(sample(r.body, "sandlet_workers{sandbox=\"main\"} "), 2);
    /* The requests main served are in its duration histogram. */
    assert_true(sample(r.body, "sandlet_request_duration_seconds_count{sandbox=\"main\"} ") > 100);
    assert_true(
        sample(r.body, "sandlet_request_duration_seconds_bucket{sandbox=\"main\",le=\"+Inf\"} ") >
        100);
    /* The slow sandbox's sleeps (100 ms and more, and its timeouts) are
     * above 50 ms; main's hellos mostly under 10 ms. */
    long slow_all = sample(r.body, "sandlet_request_duration_seconds_count{sandbox=\"slow\"} ");
    long slow_fast =
        sample(r.body, "sandlet_request_duration_seconds_bucket{sandbox=\"slow\",le=\"0.05\"} ");
    assert_true(slow_all >= 3);
    assert_true(slow_fast >= 0 && slow_fast <= slow_all - 3);
    /* And the whole page parses with Prometheus's own parser. */
    char in[160], cmd[512];
    snprintf(in, sizeof(in), "%s/metrics.txt", daemon_.dir);
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(r.body, 1, r.body_len, f), r.body_len);
    fclose(f);
    th_response_free(&r);
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/integration/prom_check.py < %s 2>&1",
             getenv("SANDLET_SRCDIR"), in);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    unlink(in);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("prom_check.py (scripts/install-deps installs python3-prometheus-client): %s",
                 out);
    static const char *const families[] = {"sandlet_workers gauge",
                                           "sandlet_busy_workers gauge",
                                           "sandlet_queued_requests gauge",
                                           "sandlet_requests_served counter",
                                           "sandlet_worker_restarts counter",
                                           "sandlet_worker_crashes counter",
                                           "sandlet_request_timeouts counter",
                                           "sandlet_seccomp_kills counter",
                                           "sandlet_request_duration_seconds histogram"};
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        if (!strstr(out, families[i]))
            fail_msg("the parser found no family '%s' in:\n%s", families[i], out);
}

static void test_config_check(void **state)
{
    (void)state;
    char cmd[1024];
    /* This daemon's file names a library that does not exist (/broken):
     * it serves, with 503s there, but -t says what a start cannot load. */
    snprintf(cmd, sizeof(cmd),
             "%s -t -c %s 2>&1 | grep -q \"servlet /broken: library "
             "'/nonexistent/broken.so' does not exist\"",
             getenv("SANDLETD"), daemon_.conf);
    assert_int_equal(WEXITSTATUS(system(cmd)), 0);
    snprintf(cmd, sizeof(cmd), "%s -t -c %s >/dev/null 2>&1", getenv("SANDLETD"), daemon_.conf);
    assert_int_equal(WEXITSTATUS(system(cmd)), 1);
    char bad[128];
    snprintf(bad, sizeof(bad), "%s/bad.conf", daemon_.dir);
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("listen 127.0.0.1:0;\nsandbox x {\n  workers 0;\n}\n", f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "%s -t -c %s 2>&1", getenv("SANDLETD"), bad);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[512] = "";
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    assert_int_equal(WEXITSTATUS(st), 1);
    char want[160];
    snprintf(want, sizeof(want), "%s:3:11:", bad);
    assert_non_null(strstr(out, want));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello),
        cmocka_unit_test(test_no_database_no_libpq),
        cmocka_unit_test(test_database_acceptor_no_libpq),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_keepalive_100),
        cmocka_unit_test(test_pipelined_in_order),
        cmocka_unit_test(test_pipelined_flood),
        cmocka_unit_test(test_not_found_keeps_connection),
        cmocka_unit_test(test_two_workers_answer),
        cmocka_unit_test(test_binary_body_round_trip),
        cmocka_unit_test(test_request_fields),
        cmocka_unit_test(test_header_injection_refused),
        cmocka_unit_test(test_status_and_head),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_answer_sizes_byte_exact),
        cmocka_unit_test(test_http10_closes),
        cmocka_unit_test(test_crash_is_contained),
        cmocka_unit_test(test_sandbox_that_cannot_start),
        cmocka_unit_test(test_stop_right_after_start),
        cmocka_unit_test(test_stop_with_busy_worker),
        cmocka_unit_test(test_stop_signal_storm),
        cmocka_unit_test(test_timeout_kills_worker),
        cmocka_unit_test(test_pipelined_behind_a_hang),
        cmocka_unit_test(test_learning_report),
        cmocka_unit_test(test_max_requests_recycles),
        cmocka_unit_test(test_status_page),
        cmocka_unit_test(test_config_check),
        cmocka_unit_test(test_sigterm_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

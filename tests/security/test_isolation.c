/*
 * test_isolation.c - what a servlet can learn about, or do to, the other
 * clients of its sandbox and the connections it shares with other
 * sandboxes (issue 13): no unstarted request is in a worker's memory, no
 * previous client's data survives in its buffers, arena or stack, a
 * non-final status never desynchronises a connection, and a worker that
 * floods empty frames is killed while its neighbour keeps answering fast.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static th_daemon d;

static int group_setup(void **state)
{
    (void)state;
    if (th_unconfined())
        return 0;
    th_prepare();
    const char *iso = th_fixture("isolation");
    char conf[2048];
    /* No "timeout" for iso: the default applies (a flood that survived
     * would end there, well after the test's bounds). */
    snprintf(conf, sizeof(conf),
             "status-page /sandlet-status;\n"
             "sandbox good { workers 1; }\n"
             "servlet /good/* { library \"%s\"; sandbox good; }\n"
             "sandbox iso { workers 1; }\n"
             "servlet /iso { library \"%s\"; sandbox iso; }\n",
             th_fixture("probe"), iso);
    return th_start(&d, conf, false);
}

static int group_teardown(void **state)
{
    (void)state;
    return th_stop_group(&d);
}

static void get(const char *target, const char *headers, th_response *r)
{
    assert_int_equal(th_request(d.port, "GET", target, headers, NULL, 0, r), 0);
}

/* The neighbour sandbox answers, and fast. */
static void assert_good_fast(void)
{
    unsigned long long t0 = th_now_ms();
    th_response r;
    get("/good/param?v=fine", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "fine");
    th_response_free(&r);
    assert_true(th_now_ms() - t0 < 1000);
}

/* Statuses that are not final, returned by the handler or forced into
 * the head behind the API's back, answer 502; the request pipelined
 * behind each on the same connection gets its own answer. */
static void test_non_final_status(void **state)
{
    (void)state;
    if (th_unconfined())
        return;
    /* 0 last: for "interim" it means no status set (200), so skipped. */
    static const char *const statuses[] = {"100", "101", "103", "199", "99", "600", "0"};
    static const char *const ops[] = {"status", "interim"};
    for (size_t o = 0; o < 2; o++) {
        for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]) - o; i++) {
            th_conn *c = th_connect(d.port, false);
            assert_non_null(c);
            char req[512];
            snprintf(req, sizeof(req),
                     "GET /iso?do=%s&s=%s HTTP/1.1\r\nHost: x\r\n\r\n"
                     "GET /good/param?v=next%zu HTTP/1.1\r\nHost: x\r\n\r\n",
                     ops[o], statuses[i], i);
            assert_int_equal(th_send_str(c, req), 0);
            th_response r;
            assert_int_equal(th_read(c, &r, false), 0);
            if (r.status != 502)
                fail_msg("do=%s s=%s: status %d, expected 502", ops[o], statuses[i], r.status);
            th_response_free(&r);
            assert_int_equal(th_read(c, &r, false), 0);
            assert_int_equal(r.status, 200);
            char want[32];
            snprintf(want, sizeof(want), "next%zu", i);
            assert_string_equal(r.body, want);
            th_response_free(&r);
            th_close(c);
        }
    }
    /* The acceptor names the sandbox, the servlet and the status. */
    assert_true(th_log_wait(&d, "sandbox 'iso': servlet /iso answered", 3000));
    assert_true(th_log_contains(&d, "with status 100, which is not a final HTTP status"));
    /* The library tells the servlet's author. */
    assert_true(th_log_wait(&d, "a handler returned status 101", 3000));
    /* Neither killed the worker. */
    assert_false(th_log_contains(&d, "broke the frame protocol"));
    assert_good_fast();
}

/* Requests queued for a worker wait in its lane (lane.h), never in its
 * own buffers: with several clients' requests written to the one worker of a
 * sandbox in one go (the acceptor is stopped while they arrive, so that
 * it reads and hands them over in one loop turn), each servlet that scans
 * the worker's input buffer past its own frame finds no other client's
 * mark.  A worker that read ahead (64 KiB at a time, as it once did)
 * finds the next request's headers there.  The batch counter shows the
 * requests really were queued together. */
static void test_queue_stays_in_lane(void **state)
{
    (void)state;
    if (th_unconfined())
        return;
    enum { N = 6 };
    const char *series = "sandlet_requests_batched_total{sandbox=\"iso\"} ";
    long before = th_metric(d.port, "/sandlet-status?format=prometheus", series);
    assert_true(before >= 0);
    for (int round = 0; round < 5; round++) {
        th_conn *c[N];
        assert_int_equal(kill(d.pid, SIGSTOP), 0);
        for (int i = 0; i < N; i++) {
            c[i] = th_connect(d.port, false);
            assert_non_null(c[i]);
            char req[256];
            snprintf(req, sizeof(req),
                     "GET /iso?do=scanin HTTP/1.1\r\nHost: x\r\n"
                     "X-Secret: SECRET-victim-%d-%d\r\n\r\n",
                     round, i);
            assert_int_equal(th_send_str(c[i], req), 0);
        }
        assert_int_equal(kill(d.pid, SIGCONT), 0);
        for (int i = 0; i < N; i++) {
            th_response r;
            assert_int_equal(th_read(c[i], &r, false), 0);
            assert_int_equal(r.status, 200);
            if (!strstr(r.body, " clean\n"))
                fail_msg("round %d request %d: another client's request was in the worker's "
                         "buffer: %s",
                         round, i, r.body);
            th_response_free(&r);
            th_close(c[i]);
        }
    }
    long after = th_metric(d.port, "/sandlet-status?format=prometheus", series);
    if (after - before < 5)
        fail_msg("only %ld of the requests were queued behind another: nothing was tested",
                 after - before);
}

/* What one client's request and response left in the worker is gone
 * when the next client's request runs. */
static void test_no_leftovers(void **state)
{
    (void)state;
    if (th_unconfined())
        return;
    /* Padding puts the secret deep in the input buffer, past where the
     * (shorter) scanning request would overwrite it. */
    char pad[1200];
    memset(pad, 'p', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    char headers[1600];
    snprintf(headers, sizeof(headers), "X-Pad: %s\r\nX-Secret: SECRET-0123456789abcdef\r\n", pad);
    th_response r;
    get("/iso?do=leave", headers, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "kept SECRET-0123456789abcdef\n");
    th_response_free(&r);
    get("/iso?do=scan", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "clean\n");
    th_response_free(&r);
    /* Deep in the stack too, where the worker wipes only what a request
     * touched (worker.c, wipe_stack): each time, and after requests that
     * did not go there; in the worker's first requests and after them,
     * once the part it zeroes every time may grow (STACK_SETTLED). */
    for (int round = 0; round < 6; round++) {
        if (round == 3)
            for (int i = 0; i < 70; i++) {
                get("/iso?do=scan", NULL, &r);
                assert_int_equal(r.status, 200);
                assert_string_equal(r.body, "clean\n");
                th_response_free(&r);
            }
        get("/iso?do=leavedeep", "X-Secret: SECRET-deep-0123456789\r\n", &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "left deep\n");
        th_response_free(&r);
        for (int i = 0; i <= round % 3; i++) {
            get("/iso?do=scandeep", NULL, &r);
            assert_int_equal(r.status, 200);
            assert_string_equal(r.body, "clean\n");
            th_response_free(&r);
        }
    }
}

/* Occurrences of needle in the daemon's log. */
static int log_count(const char *needle)
{
    FILE *f = fopen(d.log, "r");
    if (!f)
        return -1;
    int n = 0;
    char line[4096];
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Waits up to ms for needle's count in the log to pass before. */
static bool log_count_wait(const char *needle, int before, int ms)
{
    for (int waited = 0; waited <= ms; waited += 20) {
        if (log_count(needle) > before)
            return true;
        usleep(20 * 1000);
    }
    return false;
}

/* Empty BODY frames without END make no progress: the worker is killed
 * at the first, whether its client waits or has left, and the neighbour
 * sandbox stays fast meanwhile. */
static void test_empty_frame_flood(void **state)
{
    (void)state;
    if (th_unconfined())
        return;
    static const char needle[] = "empty BODY frame that does not end the response";
    for (int left = 0; left < 2; left++) {
        int before = log_count(needle);
        unsigned long long t0 = th_now_ms();
        th_conn *c = th_connect(d.port, false);
        assert_non_null(c);
        assert_int_equal(th_send_str(c, "GET /iso?do=flood HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
        if (left) {
            usleep(100 * 1000);
            th_close(c);
        } else {
            /* The head went out: a cut connection is the only signal
             * left, so the response never completes. */
            th_response r;
            assert_int_equal(th_read(c, &r, false), -1);
            th_close(c);
        }
        assert_true(log_count_wait(needle, before, 3000));
        assert_true(th_now_ms() - t0 < 3000);
        assert_good_fast();
        /* The sandbox serves again. */
        th_response r;
        get("/iso?do=echo", "X-Secret: SECRET-again\r\n", &r);
        assert_int_equal(r.status, 200);
        th_response_free(&r);
    }
}

/* A worker that says SKIP for a request it was never asked to skip (it
 * holds its request; nothing was taken back) broke the protocol: it is
 * killed, its client gets 502, and the sandbox serves again. */
static void test_unasked_skip(void **state)
{
    (void)state;
    if (th_unconfined())
        return;
    static const char needle[] = "broke the frame protocol";
    int before = log_count(needle);
    th_response r;
    get("/iso?do=skip&id=0", NULL, &r);
    assert_int_equal(r.status, 502);
    th_response_free(&r);
    assert_true(log_count_wait(needle, before, 3000));
    get("/iso?do=echo", "X-Secret: SECRET-again\r\n", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

/* Discarded frames count with their header toward the discard bound: a
 * million one-byte frames to a client that left (1 MB of payload, 13 MB
 * with headers) end in a recycle; counting payload alone they never
 * reached the 4 MiB bound. */
static void test_tiny_frames_discarded(void **state)
{
    (void)state;
    if (th_unconfined())
        return;
    static const char needle[] = "of sandbox 'iso' recycled";
    int before = log_count(needle);
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /iso?do=drip&n=1000000 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    usleep(50 * 1000);
    th_close(c);
    assert_true(log_count_wait(needle, before, 10000));
    assert_good_fast();
    th_response r;
    get("/iso?do=echo", "X-Secret: SECRET-again\r\n", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

/* The ABORT flag of streamed request bodies goes from the acceptor to a
 * worker only: a worker that sends it (on an empty last REQBODY, which
 * parses, or on a BODY, which does not) is killed, its client hears 502,
 * and the neighbour stays fast. */
static void test_abort_flag_from_worker(void **state)
{
    (void)state;
    if (th_unconfined())
        return;
    static const char *const kinds[] = {"reqbody", "body"};
    for (size_t i = 0; i < 2; i++) {
        int before = log_count("broke the frame protocol");
        char target[64];
        snprintf(target, sizeof(target), "/iso?do=abortframe&kind=%s", kinds[i]);
        unsigned long long t0 = th_now_ms();
        th_response r;
        get(target, NULL, &r);
        assert_int_equal(r.status, 502);
        th_response_free(&r);
        assert_true(th_now_ms() - t0 < 1500);
        assert_true(log_count_wait("broke the frame protocol", before, 3000));
        assert_good_fast();
        get("/iso?do=echo", "X-Secret: SECRET-again\r\n", &r);
        assert_int_equal(r.status, 200);
        th_response_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_non_final_status),       cmocka_unit_test(test_queue_stays_in_lane),
        cmocka_unit_test(test_no_leftovers),           cmocka_unit_test(test_empty_frame_flood),
        cmocka_unit_test(test_tiny_frames_discarded),  cmocka_unit_test(test_unasked_skip),
        cmocka_unit_test(test_abort_flag_from_worker),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

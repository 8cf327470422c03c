/*
 * test_http.c - the HTTP/1.1 front end against real clients and bad input,
 * over raw sockets: Host rules, methods, Expect, absolute-form targets,
 * request smuggling attempts, size limits and client timeouts.  After each
 * bad request the server must still serve the next client.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static th_daemon d;
/* The daemon the exchange helpers talk to: d, or one a test started with
 * a configuration of its own. */
static th_daemon *cur = &d;

static int group_setup(void **state)
{
    (void)state;
    th_become_subreaper();
    signal(SIGPIPE, SIG_IGN);
    char conf[2048];
    snprintf(conf, sizeof(conf),
             "header-timeout 500;\nbody-timeout 500;\nkeepalive-timeout 700;\n"
             "sandbox main { workers 2; }\n"
             "servlet /probe/* { library \"%s\"; sandbox main; }\n",
             th_build_path("tests/fixtures/.libs/probe.so"));
    return th_start(&d, conf, false);
}

static int group_teardown(void **state)
{
    (void)state;
    return th_stop(&d) == 0 ? 0 : -1;
}

/* Sends raw bytes on a new connection and reads one response. */
static int exchange(const char *raw, size_t len, th_response *r, th_conn **keep)
{
    th_conn *c = th_connect(cur->port, false);
    assert_non_null(c);
    assert_int_equal(th_send(c, raw, len), 0);
    int rc = th_read(c, r, false);
    if (keep)
        *keep = c;
    else
        th_close(c);
    return rc;
}

/* The server still answers a well-formed request from someone else. */
static void assert_still_serving(void)
{
    th_response r;
    assert_int_equal(th_request(cur->port, "GET", "/probe/param?v=ok", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok");
    th_response_free(&r);
}

/* A bad request gets `status` and the connection is closed after it. */
static void expect_rejected(const char *raw, int status)
{
    th_response r;
    th_conn *c;
    assert_int_equal(exchange(raw, strlen(raw), &r, &c), 0);
    assert_int_equal(r.status, status);
    char v[32];
    assert_true(th_header(&r, "Connection", v, sizeof(v)));
    assert_string_equal(v, "close");
    th_response_free(&r);
    assert_true(th_eof(c));
    th_close(c);
    assert_still_serving();
}

/* Form fields sent as a urlencoded POST body are parameters too, decoded
 * like the query; other body types are not parsed as forms. */
static void test_form_body_params(void **state)
{
    (void)state;
    th_response r;
    const char form[] = "x=1&v=a+b%26c%3D";
    assert_int_equal(
        th_request(cur->port, "POST", "/probe/param",
                   "Content-Type: application/x-www-form-urlencoded; charset=UTF-8\r\n", form,
                   sizeof form - 1, &r),
        0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "a b&c=");
    th_response_free(&r);
    /* The query comes first when both carry the name. */
    assert_int_equal(th_request(cur->port, "POST", "/probe/param?v=q",
                                "Content-Type: application/x-www-form-urlencoded\r\n", "v=b", 3,
                                &r),
                     0);
    assert_string_equal(r.body, "q");
    th_response_free(&r);
    assert_int_equal(
        th_request(cur->port, "POST", "/probe/param", "Content-Type: text/plain\r\n", "v=b", 3, &r),
        0);
    assert_string_equal(r.body, "(none)");
    th_response_free(&r);
}

static void test_host_rules(void **state)
{
    (void)state;
    expect_rejected("GET /probe/param?v=1 HTTP/1.1\r\n\r\n", 400);
    expect_rejected("GET /probe/param?v=1 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
    /* HTTP/1.0 needs no Host. */
    th_response r;
    const char *ok = "GET /probe/param?v=10 HTTP/1.0\r\n\r\n";
    assert_int_equal(exchange(ok, strlen(ok), &r, NULL), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "10");
    th_response_free(&r);
}

static void test_unknown_method_501(void **state)
{
    (void)state;
    expect_rejected("FROBNICATE / HTTP/1.1\r\nHost: x\r\n\r\n", 501);
}

static void test_absolute_form(void **state)
{
    (void)state;
    th_response r;
    const char *req =
        "GET http://example.org/probe/request?q=1 HTTP/1.1\r\nHost: example.org\r\n\r\n";
    assert_int_equal(exchange(req, strlen(req), &r, NULL), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "GET|/probe/request|q=1|11");
    th_response_free(&r);
}

static void test_expect_continue(void **state)
{
    (void)state;
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "POST /probe/echo HTTP/1.1\r\nHost: x\r\n"
                                    "Expect: 100-continue\r\nContent-Length: 5\r\n\r\n"),
                     0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 100);
    th_response_free(&r);
    assert_int_equal(th_send_str(c, "hello"), 0);
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "hello");
    th_response_free(&r);
    th_close(c);

    expect_rejected("POST /probe/echo HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\n"
                    "Content-Length: 5\r\n\r\nhello",
                    417);
}

static void test_chunked_request_body(void **state)
{
    (void)state;
    th_response r;
    const char *req = "POST /probe/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n";
    assert_int_equal(exchange(req, strlen(req), &r, NULL), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "hello, world");
    th_response_free(&r);
}

static void test_smuggling_defences(void **state)
{
    (void)state;
    /* Both framings at once. */
    expect_rejected("POST /probe/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                    400);
    /* Differing repeated Content-Length. */
    expect_rejected("POST /probe/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                    "Content-Length: 6\r\n\r\nhello!",
                    400);
    /* obs-fold. */
    expect_rejected("GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400);
    /* Bare CR as a line end. */
    expect_rejected("GET /probe/pid HTTP/1.1\rHost: x\r\n\r\n", 400);
    /* Chunk size that is not hex. */
    expect_rejected("POST /probe/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "zz\r\nhello\r\n0\r\n\r\n",
                    400);
    /* A Content-Length that is not a number. */
    expect_rejected("POST /probe/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5x\r\n\r\nhello", 400);
}

static void test_size_limits(void **state)
{
    (void)state;
    /* Header section over the limit: 431. */
    size_t n = 70000;
    char *big = malloc(n + 128);
    assert_non_null(big);
    int k = snprintf(big, 128, "GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(big + k, 'a', n);
    memcpy(big + k + n, "\r\n\r\n", 5);
    expect_rejected(big, 431);
    /* Request target over the limit: 414. */
    k = snprintf(big, 128, "GET /probe/");
    memset(big + k, 'b', n);
    memcpy(big + k + n, " HTTP/1.1\r\nHost: x\r\n\r\n", 23);
    expect_rejected(big, 414);
    free(big);
    /* A declared body over the limit is refused before it is sent. */
    expect_rejected("POST /probe/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n",
                    413);
}

/* The limits are configurable, and a servlet's own body limit overrides
 * the global one on its paths only. */
static void test_configured_limits(void **state)
{
    (void)state;
    th_daemon small;
    char conf[768];
    const char *lib = th_build_path("tests/fixtures/.libs/probe.so");
    snprintf(conf, sizeof(conf),
             "max-header-size 2k;\nmax-target-length 256;\nmax-body-size 1k;\n"
             "sandbox main { workers 1; }\n"
             "servlet /probe/* { library \"%s\"; sandbox main; }\n"
             "servlet /upload/* { library \"%s\"; sandbox main; max-body-size 8k; }\n",
             lib, lib);
    assert_int_equal(th_start(&small, conf, false), 0);
    cur = &small;
    char big[12000];
    int k = snprintf(big, 128, "GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(big + k, 'a', 2100);
    memcpy(big + k + 2100, "\r\n\r\n", 5);
    expect_rejected(big, 431);
    /* A target just within the limit passes, one byte more does not. */
    k = snprintf(big, 128, "GET /probe/param?v=");
    memset(big + k, 'b', 4 + 256 - (size_t)k); /* "GET " + 256 */
    memcpy(big + 4 + 256, " HTTP/1.1\r\nHost: x\r\n\r\n", 23);
    th_response r;
    assert_int_equal(exchange(big, strlen(big), &r, NULL), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    k = snprintf(big, 128, "GET /probe/param?v=");
    memset(big + k, 'b', 4 + 257 - (size_t)k);
    memcpy(big + 4 + 257, " HTTP/1.1\r\nHost: x\r\n\r\n", 23);
    expect_rejected(big, 414);
    /* 2000 bytes: over the global 1k, within /upload's 8k. */
    expect_rejected("POST /probe/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n", 413);
    k = snprintf(big, 128, "POST /upload/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n");
    memset(big + k, 'c', 2000);
    big[k + 2000] = '\0';
    assert_int_equal(exchange(big, strlen(big), &r, NULL), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 2000);
    th_response_free(&r);
    /* A chunked body has no declared length: it is cut when it passes
     * the limit. */
    k = snprintf(big, 128,
                 "POST /upload/echo HTTP/1.1\r\nHost: x\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; i++) {
        k += snprintf(big + k, 16, "c00\r\n");
        memset(big + k, 'd', 0xc00);
        k += 0xc00;
        k += snprintf(big + k, 8, "\r\n");
    }
    k += snprintf(big + k, 8, "0\r\n\r\n");
    expect_rejected(big, 413);
    cur = &d;
    assert_int_equal(th_stop(&small), 0);
}

static void test_header_timeout(void **state)
{
    (void)state;
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    /* A slow client that never finishes its head. */
    assert_int_equal(th_send_str(c, "GET /probe/pid HTTP/1.1\r\nHo"), 0);
    usleep(300000);
    assert_int_equal(th_send_str(c, "st: x\r\n"), 0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 408);
    th_response_free(&r);
    assert_true(th_eof(c));
    th_close(c);
    assert_still_serving();
}

static void test_body_timeout(void **state)
{
    (void)state;
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(
        th_send_str(c, "POST /probe/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab"), 0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 408);
    th_response_free(&r);
    assert_true(th_eof(c));
    th_close(c);
}

static void test_keepalive_idle_timeout(void **state)
{
    (void)state;
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /probe/param?v=1 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    /* Still usable shortly after... */
    usleep(200000);
    assert_int_equal(th_send_str(c, "GET /probe/param?v=2 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    assert_int_equal(th_read(c, &r, false), 0);
    assert_string_equal(r.body, "2");
    th_response_free(&r);
    /* ...and closed, without a response, once idle past the timeout. */
    assert_true(th_eof(c));
    th_close(c);
}

static void test_max_connections(void **state)
{
    (void)state;
    th_daemon small;
    char conf[512];
    snprintf(conf, sizeof(conf),
             "max-connections 3;\nsandbox main { workers 1; }\n"
             "servlet /probe/* { library \"%s\"; sandbox main; }\n",
             th_build_path("tests/fixtures/.libs/probe.so"));
    assert_int_equal(th_start(&small, conf, false), 0);
    th_conn *c[4];
    th_response r;
    for (int i = 0; i < 3; i++) {
        c[i] = th_connect(small.port, false);
        assert_non_null(c[i]);
        assert_int_equal(th_send_str(c[i], "GET /probe/param?v=x HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
        assert_int_equal(th_read(c[i], &r, false), 0);
        assert_int_equal(r.status, 200);
        th_response_free(&r);
    }
    /* The fourth waits in the kernel's backlog, unanswered... */
    c[3] = th_connect(small.port, false);
    assert_non_null(c[3]);
    assert_int_equal(th_send_str(c[3], "GET /probe/param?v=4th HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    struct pollfd pfd = {.fd = c[3]->fd, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 400), 0);
    assert_true(th_log_wait(&small, "max-connections (3) reached", 2000));
    /* ...and is served as soon as another client leaves. */
    th_close(c[0]);
    assert_int_equal(th_read(c[3], &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "4th");
    th_response_free(&r);
    for (int i = 1; i < 4; i++)
        th_close(c[i]);
    assert_int_equal(th_stop(&small), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_form_body_params),       cmocka_unit_test(test_host_rules),
        cmocka_unit_test(test_unknown_method_501),     cmocka_unit_test(test_absolute_form),
        cmocka_unit_test(test_expect_continue),        cmocka_unit_test(test_chunked_request_body),
        cmocka_unit_test(test_smuggling_defences),     cmocka_unit_test(test_size_limits),
        cmocka_unit_test(test_header_timeout),         cmocka_unit_test(test_body_timeout),
        cmocka_unit_test(test_keepalive_idle_timeout), cmocka_unit_test(test_max_connections),
        cmocka_unit_test(test_configured_limits),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

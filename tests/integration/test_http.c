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
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static th_daemon d;
/* The daemon the exchange helpers talk to: d, or one a test started with
 * a configuration of its own. */
static th_daemon *cur = &d;
/* d's docroot, holding a.txt. */
static char root[64], afile[128], alog[128];

static int group_setup(void **state)
{
    (void)state;
    th_become_subreaper();
    signal(SIGPIPE, SIG_IGN);
    snprintf(root, sizeof(root), "/tmp/sandlet-http-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    chmod(root, 0755);
    snprintf(afile, sizeof(afile), "%s/a.txt", root);
    FILE *f = fopen(afile, "w");
    if (!f)
        return -1;
    fputs("0123456789", f);
    fclose(f);
    snprintf(alog, sizeof(alog), "%s/access.log", root);
    char conf[2048];
    snprintf(conf, sizeof(conf),
             "header-timeout 500;\nbody-timeout 500;\nkeepalive-timeout 700;\n"
             "docroot \"%s\";\nstatus-page /sandlet-status;\naccess-log \"%s\";\n"
             "sandbox main { workers 2; }\n"
             "servlet /probe/* { library \"%s\"; sandbox main; }\n",
             root, alog, th_build_path("tests/fixtures/.libs/probe.so"));
    return th_start(&d, conf, false);
}

static int group_teardown(void **state)
{
    (void)state;
    int rc = th_stop(&d);
    unlink(afile);
    unlink(alog);
    rmdir(root);
    return rc == 0 ? 0 : -1;
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
static void expect_rejected_n(const char *raw, size_t len, int status)
{
    th_response r;
    th_conn *c;
    assert_int_equal(exchange(raw, len, &r, &c), 0);
    assert_int_equal(r.status, status);
    char v[32];
    assert_true(th_header(&r, "Connection", v, sizeof(v)));
    assert_string_equal(v, "close");
    th_response_free(&r);
    assert_true(th_eof(c));
    th_close(c);
    assert_still_serving();
}

static void expect_rejected(const char *raw, int status)
{
    expect_rejected_n(raw, strlen(raw), status);
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

/* HTTP/1.0 keeps a connection only when the response says so: every kind
 * of answer (the status page, a file, a 404, a servlet's) to a 1.0 request
 * asking for keep-alive says "Connection: keep-alive" and the connection
 * then takes the next request; without the ask it is closed. */
static void test_http10_keep_alive(void **state)
{
    (void)state;
    const char *targets[] = {"/sandlet-status", "/a.txt", "/nothing-here", "/probe/param?v=k"};
    const int statuses[] = {200, 200, 404, 200};
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
        char req[256], conn[64];
        snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", targets[i]);
        th_response r;
        th_conn *c = NULL;
        assert_int_equal(exchange(req, strlen(req), &r, &c), 0);
        assert_int_equal(r.status, statuses[i]);
        assert_true(th_header(&r, "Connection", conn, sizeof(conn)));
        assert_string_equal(conn, "keep-alive");
        th_response_free(&r);
        /* Still usable: the second request is answered on it. */
        assert_int_equal(th_send(c, req, strlen(req)), 0);
        assert_int_equal(th_read(c, &r, false), 0);
        assert_int_equal(r.status, statuses[i]);
        th_response_free(&r);
        th_close(c);
        /* Without the ask, HTTP/1.0 closes after one response. */
        snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", targets[i]);
        assert_int_equal(exchange(req, strlen(req), &r, &c), 0);
        assert_int_equal(r.status, statuses[i]);
        assert_true(th_header(&r, "Connection", conn, sizeof(conn)));
        assert_string_equal(conn, "close");
        th_response_free(&r);
        assert_true(th_eof(c));
        th_close(c);
    }
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

/* ---- pipelining ---------------------------------------------------------- */

#define BURST 4000

typedef struct kind {
    const char *req;
    int status;
    const char *body; /* expected body, or a prefix when prefix is set */
    bool prefix;
    bool head; /* HEAD: no body follows */
} kind;

/* The ETag the server gives a.txt, for conditional requests. */
static void etag_of_a(char *etag, size_t len)
{
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/a.txt", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(th_header(&r, "ETag", etag, len));
    th_response_free(&r);
}

static void check_answer(const th_response *r, const kind *k, int i)
{
    if (r->status != k->status)
        fail_msg("answer %d to %.30s: status %d, expected %d", i, k->req, r->status, k->status);
    if (k->head)
        assert_int_equal(r->body_len, 0);
    else if (k->body && k->prefix)
        assert_memory_equal(r->body, k->body, strlen(k->body));
    else if (k->body)
        assert_string_equal(r->body, k->body);
}

/* n requests of the kinds in turn (kinds[i % nk]), in one write on one
 * connection; each answer must come back in order. */
static void burst(const kind *kinds, size_t nk, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += strlen(kinds[(size_t)i % nk].req);
    char *buf = malloc(total);
    assert_non_null(buf);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(kinds[(size_t)i % nk].req);
        memcpy(buf + at, kinds[(size_t)i % nk].req, l);
        at += l;
    }
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_draining(c, buf, total), 0);
    free(buf);
    for (int i = 0; i < n; i++) {
        const kind *k = &kinds[(size_t)i % nk];
        th_response r;
        if (th_read(c, &r, k->head) != 0)
            fail_msg("answer %d of %d (%.30s) did not come", i, n, k->req);
        check_answer(&r, k, i);
        th_response_free(&r);
    }
    th_close(c);
    assert_still_serving();
}

/* Every kind of answer the acceptor gives by itself completes within the
 * loop turn that read its request; thousands pipelined in one write must
 * be answered one after the other, not by a call nested per request
 * (which overflowed the stack of the whole daemon). */
static void test_pipelined_bursts(void **state)
{
    (void)state;
    char etag[128], inm[256];
    etag_of_a(etag, sizeof(etag));
    snprintf(inm, sizeof(inm), "GET /a.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: %s\r\n\r\n", etag);
    const kind kinds[] = {
        {"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", 200, "0123456789", false, false},
        {"HEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", 200, NULL, false, true},
        {"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n", 404, NULL, false, false},
        {inm, 304, NULL, false, false},
        {"GET /a.txt HTTP/1.1\r\nHost: x\r\n"
         "If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n\r\n",
         304, NULL, false, false},
        {"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 204, NULL, false, false},
        {"GET /sandlet-status HTTP/1.1\r\nHost: x\r\n\r\n", 200, "sandlet ", true, false},
        {"HEAD /sandlet-status HTTP/1.1\r\nHost: x\r\n\r\n", 200, NULL, false, true},
        {"POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab", 405, NULL, false, false},
        {"GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=50-60\r\n\r\n", 416, NULL, false, false},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        burst(&kinds[i], 1, BURST);
    /* All of them mixed, with servlet requests among them (answered by a
     * worker, later): the order still holds. */
    const kind mixed[] = {
        kinds[0], {"GET /probe/param?v=one HTTP/1.1\r\nHost: x\r\n\r\n", 200, "one", false, false},
        kinds[1], kinds[2],
        kinds[3], {"GET /probe/param?v=two HTTP/1.1\r\nHost: x\r\n\r\n", 200, "two", false, false},
        kinds[5], kinds[6],
        kinds[8], kinds[9],
    };
    burst(mixed, sizeof(mixed) / sizeof(mixed[0]), 2000);
}

/* A client that pipelines and does not read its answers: the acceptor
 * stops taking its requests while a megabyte waits for it, and goes on
 * once it reads; nothing is lost or reordered. */
static void test_pipelined_slow_reader(void **state)
{
    (void)state;
    char path[160];
    snprintf(path, sizeof(path), "%s/12k.bin", root);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < 12 * 1024; i++)
        fputc('a' + i % 26, f);
    fclose(f);
    enum { N = 600 };
    const char req[] = "GET /12k.bin HTTP/1.1\r\nHost: x\r\n\r\n";
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    for (int i = 0; i < N; i++)
        assert_int_equal(th_send(c, req, sizeof(req) - 1), 0);
    /* Several megabytes of answers are due; let the server fill what it
     * can before a byte is read. */
    usleep(300 * 1000);
    for (int i = 0; i < N; i++) {
        th_response r;
        if (th_read(c, &r, false) != 0)
            fail_msg("answer %d of %d did not come", i, N);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.body_len, 12 * 1024);
        assert_int_equal(r.body[12 * 1024 - 1], 'a' + (12 * 1024 - 1) % 26);
        th_response_free(&r);
    }
    th_close(c);
    unlink(path);
    assert_still_serving();
}

/* ---- input a worker could not decode -------------------------------------- */

/* A sample of the Prometheus status page, or -1. */
static long status_sample(const char *series)
{
    th_response r;
    assert_int_equal(
        th_request(d.port, "GET", "/sandlet-status?format=prometheus", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    long v = -1;
    const char *p = strstr(r.body, series);
    if (p)
        v = strtol(p + strlen(series), NULL, 10);
    th_response_free(&r);
    return v;
}

/* Requests llhttp lets through but a worker's frame decoder refuses (an
 * empty header name) or RFC 9112 forbids (blanks before the colon): the
 * front end answers 400 and no worker ever sees them, so no worker dies
 * and the sandbox stays as fast as before. */
static void test_no_request_kills_a_worker(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "GET /probe/pid HTTP/1.1\r\nHost: x\r\n: x\r\n\r\n",
        "GET /probe/pid HTTP/1.1\r\nHost: x\r\n:\r\n\r\n",
        "GET /probe/pid HTTP/1.1\r\n: x\r\nHost: x\r\n\r\n",
        "POST /probe/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n: x\r\n\r\nabc",
        "GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-A : y\r\n\r\n",
        /* The same in the trailer section of a chunked body. */
        ("POST /probe/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         "3\r\nabc\r\n0\r\n: x\r\n\r\n"),
    };
    const char *restarts = "sandlet_worker_restarts_total{sandbox=\"main\"} ";
    const char *crashes = "sandlet_worker_crashes_total{sandbox=\"main\"} ";
    long r0 = status_sample(restarts), c0 = status_sample(crashes);
    assert_true(r0 >= 0 && c0 >= 0);
    for (int round = 0; round < 60; round++)
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            th_response r;
            th_conn *c;
            assert_int_equal(exchange(bad[i], strlen(bad[i]), &r, &c), 0);
            if (r.status != 400)
                fail_msg("round %d, request %zu: %d, expected 400", round, i, r.status);
            th_response_free(&r);
            assert_true(th_eof(c));
            th_close(c);
        }
    assert_int_equal(status_sample(restarts), r0);
    assert_int_equal(status_sample(crashes), c0);
    unsigned long long t0 = th_now_ms();
    assert_still_serving();
    assert_true(th_now_ms() - t0 < 1000);
}

/* A head just under a max-header-size near its 1 MiB bound makes a
 * REQUEST frame over the frame maximum: 431 at the front end, not a
 * failure after routing. */
static void test_head_over_frame_max(void **state)
{
    (void)state;
    th_daemon big;
    char conf[512];
    snprintf(conf, sizeof(conf),
             "max-header-size 1m;\nsandbox main { workers 1; }\n"
             "servlet /probe/* { library \"%s\"; sandbox main; }\n",
             th_build_path("tests/fixtures/.libs/probe.so"));
    assert_int_equal(th_start(&big, conf, false), 0);
    /* c->head holds the target and every name and value, each with a NUL:
     * "/probe/pid" and "Host: x", then 98 headers "Xnn" filling it to 200
     * bytes under the limit. */
    size_t fill = 1024 * 1024 - 200 - 11 - 7;
    size_t each = fill / 98 - 5, last = fill - 97 * (each + 5) - 5;
    size_t cap = fill + 98 * 8 + 128;
    char *req = malloc(cap);
    assert_non_null(req);
    size_t at = (size_t)snprintf(req, cap, "GET /probe/pid HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 98; i++) {
        size_t vl = i == 97 ? last : each;
        at += (size_t)snprintf(req + at, cap - at, "X%02d: ", i);
        memset(req + at, 'v', vl);
        at += vl;
        memcpy(req + at, "\r\n", 2);
        at += 2;
    }
    memcpy(req + at, "\r\n", 2);
    at += 2;
    th_conn *c = th_connect(big.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_draining(c, req, at), 0);
    free(req);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 431);
    th_response_free(&r);
    th_close(c);
    assert_int_equal(th_stop(&big), 0);
}

/* Trailer fields are not merged into the headers a servlet sees (RFC 9110
 * 6.5.1): a trailing Host or Cookie would reach it unchecked. */
static void test_trailers_dropped(void **state)
{
    (void)state;
    const char *req = "POST /probe/headers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                      "X-Before: b\r\n\r\n3\r\nabc\r\n0\r\nX-After: a\r\nHost: evil\r\n\r\n";
    th_response r;
    assert_int_equal(exchange(req, strlen(req), &r, NULL), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "X-Before: b\n"));
    assert_null(strstr(r.body, "X-After"));
    assert_null(strstr(r.body, "evil"));
    th_response_free(&r);
}

/* ---- header values -------------------------------------------------------- */

/* Sends a request in two writes, far enough apart to be read apart. */
static int exchange_split(const char *a, const char *b, th_response *r)
{
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, a), 0);
    usleep(100 * 1000);
    assert_int_equal(th_send_str(c, b), 0);
    int rc = th_read(c, r, false);
    th_close(c);
    return rc;
}

/* An empty value is legal (RFC 9110 5.5) and real clients send them
 * ("Accept-Encoding:"): servlets see it, empty. */
static void test_empty_header_values(void **state)
{
    (void)state;
    static const char *const reqs[] = {
        "GET /probe/header?name=Accept-Encoding HTTP/1.1\r\nHost: x\r\nAccept-Encoding:\r\n\r\n",
        "GET /probe/header?name=Accept-Encoding HTTP/1.1\r\nAccept-Encoding:   \r\nHost: x\r\n\r\n",
        "GET /probe/header?name=Accept-Encoding HTTP/1.1\r\nHost: x\r\nAccept-Encoding:\t\r\n\r\n",
    };
    th_response r;
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        assert_int_equal(exchange(reqs[i], strlen(reqs[i]), &r, NULL), 0);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "");
        th_response_free(&r);
    }
    const char *many = "GET /probe/headers HTTP/1.1\r\nHost: x\r\nX-E1:\r\nX-B: b\r\nX-E2:\r\n\r\n";
    assert_int_equal(exchange(many, strlen(many), &r, NULL), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "X-E1: \nX-B: b\nX-E2: \n"));
    th_response_free(&r);
    const char *file = "GET /a.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding:\r\n\r\n";
    assert_int_equal(exchange(file, strlen(file), &r, NULL), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "0123456789");
    th_response_free(&r);
    /* An empty value at the end of one read. */
    assert_int_equal(exchange_split("GET /probe/header?name=X-E HTTP/1.1\r\nHost: x\r\nX-E:",
                                    "\r\nX-F: f\r\n\r\n", &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "");
    th_response_free(&r);
    assert_int_equal(exchange_split("GET /probe/header?name=X-F HTTP/1.1\r\nHost: x\r\nX-E:\r\n",
                                    "X-F: f\r\n\r\n", &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "f");
    th_response_free(&r);
}

/* obs-fold stays refused, however the continuation arrives. */
static void test_folded_headers_refused(void **state)
{
    (void)state;
    expect_rejected("GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400);
    expect_rejected("GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n", 400);
    /* A name whose value is all on the next line. */
    expect_rejected("GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-A:\r\n b\r\n\r\n", 400);
    expect_rejected("GET /probe/pid HTTP/1.1\r\nX-A:   \r\n  b\r\nHost: x\r\n\r\n", 400);
    /* The continuation in a later read. */
    static const char *const split[][2] = {
        {"GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-A: a\r\n", " b\r\n\r\n"},
        {"GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-A: a\r\n ", "b\r\n\r\n"},
        {"GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-A:\r\n", " b\r\n\r\n"},
        {"GET /probe/pid HTTP/1.1\r\nHost: x\r\nX-A:\r\n \t", " b\r\n\r\n"},
    };
    for (size_t i = 0; i < sizeof(split) / sizeof(split[0]); i++) {
        th_response r;
        assert_int_equal(exchange_split(split[i][0], split[i][1], &r), 0);
        if (r.status != 400)
            fail_msg("split fold %zu: %d, expected 400", i, r.status);
        th_response_free(&r);
    }
    assert_still_serving();
}

/* ---- methods ------------------------------------------------------------- */

/* 501 is for a well-formed method token the server does not know; bytes
 * that are no request line at all are a 400. */
static void test_garbage_is_400(void **state)
{
    (void)state;
    expect_rejected("G@T / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    expect_rejected("GET@ / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    static const char binary[] = "\x01\x02\xff\xfe\x00garbage\r\n\r\n";
    expect_rejected_n(binary, sizeof(binary) - 1, 400);
    /* The start of a TLS 1.2/1.3 ClientHello: handshake record, version
     * 3.1, length, ClientHello, version 3.3, random. */
    static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
                                "\x8a\x1f\x00\x42\x99\x13\x37\x00\xde\xad\xbe\xef\x10\x20\x30\x40"
                                "\x50\x60\x70\x80\x90\xa0\xb0\xc0\xd0\xe0\xf0\x01\x02\x03\x04\x05";
    expect_rejected_n(hello, sizeof(hello) - 1, 400);
    /* Tokens, but no method this server knows. */
    expect_rejected("FOO / HTTP/1.1\r\nHost: x\r\n\r\n", 501);
    expect_rejected("get / HTTP/1.1\r\nHost: x\r\n\r\n", 501);
    expect_rejected("GETX / HTTP/1.1\r\nHost: x\r\n\r\n", 501);
    /* Well-formed, but a version this server does not speak. */
    expect_rejected("GET /probe/pid HTTP/2.0\r\nHost: x\r\n\r\n", 505);
    expect_rejected("GET /probe/pid\r\n\r\n", 505);
}

/* The access log of a request refused in the middle of a header value
 * reads only fields that were complete (found by fuzz_http: the unfinished
 * User-Agent was read with strlen past its end, into stale bytes). */
static void test_access_log_of_cut_field(void **state)
{
    (void)state;
    char raw[512];
    int n =
        snprintf(raw, sizeof(raw),
                 "GET /a.txt HTTP/1.1\r\nHost: x\r\nReferer: /from\r\nUser-Agent: %0200d\x01", 7);
    assert_true(n > 0 && (size_t)n < sizeof(raw));
    expect_rejected_n(raw, (size_t)n, 400);
    /* The line is written when the response is queued; give it a moment
     * to reach the file. */
    char line[1024] = "";
    for (int tries = 0; tries < 50; tries++) {
        FILE *f = fopen(alog, "r");
        if (f) {
            char buf[1024];
            while (fgets(buf, sizeof(buf), f))
                if (strstr(buf, "\" 400 "))
                    snprintf(line, sizeof(line), "%s", buf);
            fclose(f);
        }
        if (strstr(line, "/from"))
            break;
        usleep(20000);
    }
    /* The complete Referer is logged; the cut User-Agent is not. */
    assert_non_null(strstr(line, "\"/from\" \"-\""));
    assert_null(strstr(line, "0000007"));
}

/* Whether r's head has a field called name. */
static bool has_header(const th_response *r, const char *name)
{
    char v[256];
    return th_header(r, name, v, sizeof(v));
}

/* RFC 9110 8.6: no Content-Length in a 204; in a 304 only the length a
 * 200 would have had (a.txt: 10 bytes). */
static void test_304_and_204_content_length(void **state)
{
    (void)state;
    th_response r;
    char etag[128], hdr[256], v[64];
    assert_int_equal(th_request(d.port, "GET", "/a.txt", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(th_header(&r, "ETag", etag, sizeof(etag)));
    th_response_free(&r);
    snprintf(hdr, sizeof(hdr), "If-None-Match: %s\r\n", etag);
    assert_int_equal(th_request(d.port, "GET", "/a.txt", hdr, NULL, 0, &r), 0);
    assert_int_equal(r.status, 304);
    if (th_header(&r, "Content-Length", v, sizeof(v))) {
        printf("  304 for a 10-byte file carries Content-Length: %s\n", v);
        assert_string_equal(v, "10");
    }
    th_response_free(&r);
    assert_int_equal(th_request(d.port, "OPTIONS", "/a.txt", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 204);
    bool length = has_header(&r, "Content-Length");
    if (length)
        printf("  204 carries a Content-Length\n");
    assert_false(length);
    th_response_free(&r);
}

/* RFC 9110 14.2: Range is defined for GET only; a server MUST ignore it
 * on other methods, so HEAD gets the 200 head a GET without Range gets. */
static void test_head_ignores_range(void **state)
{
    (void)state;
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "HEAD /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=2-4\r\n\r\n"),
                     0);
    th_response r;
    assert_int_equal(th_read(c, &r, true), 0);
    printf("  HEAD with Range: %d\n", r.status);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    th_close(c);
}

/* RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty
 * framing; the server MUST close the connection after answering it (an
 * HTTP/1.0 intermediary framed it some other way: smuggling). */
static void test_http10_chunked_closes(void **state)
{
    (void)state;
    static const char raw[] = "POST /probe/echo HTTP/1.0\r\nConnection: keep-alive\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
                              "GET /probe/param?v=smuggled HTTP/1.0\r\n"
                              "Connection: keep-alive\r\n\r\n";
    th_conn *c;
    th_response r;
    assert_int_equal(exchange(raw, sizeof(raw) - 1, &r, &c), 0);
    assert_int_equal(r.status, 200);
    char v[32] = "";
    th_header(&r, "Connection", v, sizeof(v));
    printf("  HTTP/1.0 chunked request answered with Connection: %s\n", v);
    th_response_free(&r);
    /* Nothing more may be read from this connection. */
    bool second = th_read(c, &r, false) == 0;
    if (second) {
        printf("  and the request after it was served too: %d %s\n", r.status, r.body);
        th_response_free(&r);
    }
    assert_false(second);
    th_close(c);
}

/* Requests received whole before the client's FIN (printf ... | nc) are
 * answered: the half-close ends the client's sending, not the requests. */
static void test_pipelined_then_fin(void **state)
{
    (void)state;
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    const char *one = "GET /probe/sleep?ms=100 HTTP/1.1\r\nHost: x\r\n\r\n";
    for (int i = 0; i < 3; i++)
        assert_int_equal(th_send_str(c, one), 0);
    shutdown(c->fd, SHUT_WR);
    int got = 0;
    th_response r;
    while (got < 3 && th_read(c, &r, false) == 0) {
        got++;
        th_response_free(&r);
    }
    printf("  3 pipelined requests, then FIN: %d answered\n", got);
    assert_int_equal(got, 3);
    th_close(c);
}

/* The docroot serves GET and HEAD only and reads no body: one sent there
 * is read and dropped before the 405, never held (it was held whole, up
 * to max-body-size, 16 MiB by default, a connection). */
static void test_static_body_memory(void **state)
{
    (void)state;
    enum { N = 8 };
    const size_t body = (size_t)12 << 20;
    long before = th_status_kb(d.pid, "VmRSS");
    th_conn *conns[N];
    static char block[64 * 1024];
    memset(block, 'b', sizeof(block));
    for (int i = 0; i < N; i++) {
        th_conn *c = th_connect(d.port, false);
        assert_non_null(c);
        char head[160];
        snprintf(head, sizeof(head),
                 "POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
                 body + 1); /* one byte is never sent: the body stays open */
        assert_int_equal(th_send_str(c, head), 0);
        for (size_t sent = 0; sent < body; sent += sizeof(block))
            assert_int_equal(th_send(c, block, sizeof(block)), 0);
        conns[i] = c; /* open: its body waits for the byte not sent */
    }
    usleep(300 * 1000);
    long grown = th_status_kb(d.pid, "VmRSS") - before;
    printf("  %d connections, each %zu MiB of body sent to a static file: acceptor +%ld MiB\n", N,
           body >> 20, grown / 1024);
    for (int i = 0; i < N; i++)
        th_close(conns[i]);
    /* Well under what holding the bodies took (12 MiB a connection). */
    assert_true(grown < (long)N * 2 * 1024 + 16 * 1024);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_form_body_params),
        cmocka_unit_test(test_host_rules),
        cmocka_unit_test(test_http10_keep_alive),
        cmocka_unit_test(test_unknown_method_501),
        cmocka_unit_test(test_absolute_form),
        cmocka_unit_test(test_expect_continue),
        cmocka_unit_test(test_chunked_request_body),
        cmocka_unit_test(test_smuggling_defences),
        cmocka_unit_test(test_size_limits),
        cmocka_unit_test(test_header_timeout),
        cmocka_unit_test(test_body_timeout),
        cmocka_unit_test(test_keepalive_idle_timeout),
        cmocka_unit_test(test_max_connections),
        cmocka_unit_test(test_configured_limits),
        cmocka_unit_test(test_pipelined_bursts),
        cmocka_unit_test(test_pipelined_slow_reader),
        cmocka_unit_test(test_no_request_kills_a_worker),
        cmocka_unit_test(test_head_over_frame_max),
        cmocka_unit_test(test_trailers_dropped),
        cmocka_unit_test(test_empty_header_values),
        cmocka_unit_test(test_folded_headers_refused),
        cmocka_unit_test(test_garbage_is_400),
        cmocka_unit_test(test_access_log_of_cut_field),
        cmocka_unit_test(test_304_and_204_content_length),
        cmocka_unit_test(test_head_ignores_range),
        cmocka_unit_test(test_http10_chunked_closes),
        cmocka_unit_test(test_pipelined_then_fin),
        cmocka_unit_test(test_static_body_memory),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

/*
 * test_api.c - the request/response servlet API through the real daemon:
 * multipart uploads (binary files), repeated parameters and headers,
 * binary-safe values, redirects, URL encoding, per-method dispatch with
 * HEAD, OPTIONS and 405, and the worker refusing a servlet without any
 * handler.  Everything crosses the acceptor and the frame codec, so these
 * prove what a client sees, not just what libsandlet computes.
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

static th_daemon d;

static int group_setup(void **state)
{
    (void)state;
    th_become_subreaper();
    signal(SIGPIPE, SIG_IGN);
    char conf[2048];
    snprintf(conf, sizeof(conf),
             "sandbox main { workers 2; }\n"
             "sandbox bad { workers 1; queue-timeout 300; }\n"
             "servlet /probe/* { library \"%s\"; sandbox main; }\n"
             "servlet /m/* { library \"%s\"; sandbox main; }\n"
             "servlet /none { library \"%s\"; sandbox bad; }\n",
             th_build_path("tests/fixtures/.libs/probe.so"),
             th_build_path("tests/fixtures/.libs/methods.so"),
             th_build_path("tests/fixtures/.libs/nohandler.so"));
    return th_start(&d, conf, false);
}

static int group_teardown(void **state)
{
    (void)state;
    return th_stop(&d) == 0 ? 0 : -1;
}

#define CRLF "\r\n"

/* A form as a browser sends it: a text field twice, a binary file with
 * NUL, CR LF and a boundary-like line inside, an empty file input. */
static const char upload[] =
    "--AaB03x" CRLF "Content-Disposition: form-data; name=\"tag\"" CRLF CRLF "red" CRLF
    "--AaB03x" CRLF "Content-Disposition: form-data; name=\"tag\"" CRLF CRLF "gr\0en" CRLF
    "--AaB03x" CRLF
    "Content-Disposition: form-data; name=\"pic\"; filename=\"../../etc/x.png\"" CRLF
    "Content-Type: image/png" CRLF CRLF "\x89PNG\r\n\x1a\n\0\0" CRLF "--AaB03xx" CRLF "--AaB03" CRLF
    "--AaB03x" CRLF "Content-Disposition: form-data; name=\"empty\"; filename=\"\"" CRLF
    "Content-Type: application/octet-stream" CRLF CRLF CRLF "--AaB03x--" CRLF;

static const char pic[] = "\x89PNG\r\n\x1a\n\0\0" CRLF "--AaB03xx" CRLF "--AaB03";

static void test_multipart_upload(void **state)
{
    (void)state;
    th_response r;
    const char *ct = "Content-Type: multipart/form-data; boundary=\"AaB03x\"\r\n";
    assert_int_equal(
        th_request(d.port, "POST", "/probe/form?q=1", ct, upload, sizeof(upload) - 1, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "q=1[1]\ntag=red[3]\ntag=gr[5]\n"
                                "file pic x.png image/png 30\n"
                                "file empty  application/octet-stream 0\n");
    th_response_free(&r);
    assert_int_equal(sizeof(pic) - 1, 30);
    /* The file's bytes arrive intact. */
    assert_int_equal(
        th_request(d.port, "POST", "/probe/file?field=pic", ct, upload, sizeof(upload) - 1, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, sizeof(pic) - 1);
    assert_memory_equal(r.body, pic, sizeof(pic) - 1);
    th_response_free(&r);
    /* A text part's NUL is reachable through sl_param_bytes. */
    assert_int_equal(
        th_request(d.port, "POST", "/probe/values?n=tag", ct, upload, sizeof(upload) - 1, &r), 0);
    assert_string_equal(r.body, "2:red|gr");
    th_response_free(&r);
    /* Truncated: the body contributes nothing, the query stays, and the
     * worker lives on. */
    assert_int_equal(th_request(d.port, "POST", "/probe/form?q=1", ct, upload, 150, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "q=1[1]\n");
    th_response_free(&r);
    /* No boundary at all. */
    assert_int_equal(th_request(d.port, "POST", "/probe/form",
                                "Content-Type: multipart/form-data\r\n", upload, sizeof(upload) - 1,
                                &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "");
    th_response_free(&r);
}

static void test_params_and_headers(void **state)
{
    (void)state;
    th_response r;
    assert_int_equal(th_request(d.port, "POST", "/probe/values?n=a&a=1&a=%32",
                                "Content-Type: application/x-www-form-urlencoded\r\n", "a=x+y&b=0",
                                9, &r),
                     0);
    assert_string_equal(r.body, "3:1|2|x y");
    th_response_free(&r);
    assert_int_equal(th_request(d.port, "GET", "/probe/bytes?v=a%00b%0D%0A%zz", NULL, NULL, 0, &r),
                     0);
    assert_int_equal(r.body_len, 8);
    assert_memory_equal(r.body, "a\0b\r\n%zz", 8);
    th_response_free(&r);
    /* Repeated headers, any case, one value per line. */
    assert_int_equal(th_request(d.port, "GET", "/probe/values?h=x-tag",
                                "X-Tag: one\r\nx-tag: two, three\r\nX-TAG: four\r\n", NULL, 0, &r),
                     0);
    assert_string_equal(r.body, "3:one|two, three|four");
    th_response_free(&r);
    assert_int_equal(
        th_request(d.port, "GET", "/probe/headers", "X-A: 1\r\nX-A: 2\r\n", NULL, 0, &r), 0);
    assert_non_null(strstr(r.body, "Host: test\n"));
    assert_non_null(strstr(r.body, "X-A: 1\nX-A: 2\n"));
    th_response_free(&r);
}

static void test_redirect_and_encode(void **state)
{
    (void)state;
    th_response r;
    char v[128];
    assert_int_equal(th_request(d.port, "GET",
                                "/probe/redirect?code=303&to=/done%3Fa%3D1%26b%3D%3C", NULL, NULL,
                                0, &r),
                     0);
    assert_int_equal(r.status, 303);
    assert_true(th_header(&r, "Location", v, sizeof(v)));
    assert_string_equal(v, "/done?a=1&b=<");
    assert_true(th_header(&r, "Content-Type", v, sizeof(v)));
    assert_string_equal(v, "text/html; charset=utf-8");
    assert_non_null(strstr(r.body, "href=\"/done?a=1&amp;b=&lt;\""));
    th_response_free(&r);
    /* Header splitting and wrong statuses are refused by the API. */
    assert_int_equal(th_request(d.port, "GET",
                                "/probe/redirect?code=302&to=/x%0D%0ASet-Cookie:+a=1", NULL, NULL,
                                0, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "refused -22");
    assert_false(th_header(&r, "Set-Cookie", v, sizeof(v)));
    assert_false(th_header(&r, "Location", v, sizeof(v)));
    th_response_free(&r);
    assert_int_equal(th_request(d.port, "GET", "/probe/redirect?code=200&to=/x", NULL, NULL, 0, &r),
                     0);
    assert_string_equal(r.body, "refused -22");
    th_response_free(&r);
    assert_int_equal(
        th_request(d.port, "GET", "/probe/urlencode?s=a+b%2Fc%26%C3%A9~", NULL, NULL, 0, &r), 0);
    assert_string_equal(r.body, "a%20b%2Fc%26%C3%A9~");
    th_response_free(&r);
}

static void test_method_dispatch(void **state)
{
    (void)state;
    th_response r;
    char v[128];
    assert_int_equal(th_request(d.port, "GET", "/m/x", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "get /m/x");
    th_response_free(&r);
    assert_int_equal(th_request(d.port, "POST", "/m/x",
                                "Content-Type: application/x-www-form-urlencoded\r\n", "v=7", 3,
                                &r),
                     0);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "post 7");
    th_response_free(&r);
    assert_int_equal(th_request(d.port, "DELETE", "/m/x", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 204);
    th_response_free(&r);
    /* HEAD runs get: same length, no body on the wire. */
    assert_int_equal(th_request(d.port, "HEAD", "/m/x", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    assert_true(th_header(&r, "Content-Length", v, sizeof(v)));
    assert_string_equal(v, "8");
    th_response_free(&r);
    /* Methods without a handler. */
    const char *no[] = {"PUT", "PATCH", "PROPFIND"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(th_request(d.port, no[i], "/m/x", NULL, NULL, 0, &r), 0);
        assert_int_equal(r.status, 405);
        assert_true(th_header(&r, "Allow", v, sizeof(v)));
        assert_string_equal(v, "GET, HEAD, POST, DELETE, OPTIONS");
        th_response_free(&r);
    }
    assert_int_equal(th_request(d.port, "OPTIONS", "/m/x", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 204);
    assert_int_equal(r.body_len, 0);
    assert_true(th_header(&r, "Allow", v, sizeof(v)));
    assert_string_equal(v, "GET, HEAD, POST, DELETE, OPTIONS");
    th_response_free(&r);
    /* A .service servlet still sees every method. */
    assert_int_equal(th_request(d.port, "PATCH", "/probe/request", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "PATCH|/probe/request||11");
    th_response_free(&r);
}

static void test_servlet_without_handler(void **state)
{
    (void)state;
    assert_true(th_log_wait(&d, "servlet /none: ", 3000));
    assert_true(th_log_contains(&d, "nohandler.so has no handler; set .service, or a per-method "
                                    "handler such as .get or .post, in its SL_SERVLET descriptor"));
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/none", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 503);
    th_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multipart_upload),        cmocka_unit_test(test_params_and_headers),
        cmocka_unit_test(test_redirect_and_encode),     cmocka_unit_test(test_method_dispatch),
        cmocka_unit_test(test_servlet_without_handler),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

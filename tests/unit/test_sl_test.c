/*
 * test_sl_test.c - the harness itself (libsandlet-test), with a servlet
 * defined in this file: init params, destroy on free, request fields,
 * binary bodies both ways, repeated Set-Cookie, the jar (set, send,
 * delete by Max-Age=0), sessions across requests, flush pieces, and the
 * worker-like reuse of one request across runs (big, then small, then
 * small allocations: the pattern that broke the arena's kept chunk).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sandlet/test.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int destroyed;
static char greeting[64];

static int fx_init(sl_context *ctx)
{
    const char *g = sl_context_param(ctx, "greeting", "none");
    snprintf(greeting, sizeof(greeting), "%s", g);
    return strcmp(g, "refuse") == 0 ? -EINVAL : 0;
}

static void fx_destroy(void)
{
    destroyed++;
}

static int fx_service(sl_request *rq, sl_response *rs)
{
    const char *op = sl_param(rq, "op", "echo");
    if (strcmp(op, "echo") == 0) {
        size_t len;
        const void *body = sl_body(rq, &len);
        const char *x = sl_header(rq, "X-Test"), *c = sl_cookie(rq, "c");
        sl_printf(rs, "%s %s %s peer=%s v=%d x=%s c=%s greeting=%s|", sl_method(rq), sl_path(rq),
                  sl_query(rq), sl_peer(rq), sl_http_version(rq), x ? x : "-", c ? c : "-",
                  greeting);
        sl_write(rs, body, len);
        return 200;
    }
    if (strcmp(op, "cookies") == 0) {
        sl_cookie_options o = {.path = "/", .http_only = true};
        sl_set_cookie(rs, "a", "1", &o);
        sl_set_cookie(rs, "b", "2", NULL);
        sl_add_header(rs, "X-Many", "one");
        sl_add_header(rs, "X-Many", "two");
        return 204;
    }
    if (strcmp(op, "forget") == 0) {
        sl_cookie_options o = {.has_max_age = true, .max_age = 0};
        sl_set_cookie(rs, "a", "", &o);
        return 200;
    }
    if (strcmp(op, "expire") == 0) {
        /* Expires alone: b in the past (deleted), f in 2100 (kept). */
        sl_cookie_options past = {.expires = 1}, future = {.expires = 4102444800LL};
        sl_set_cookie(rs, "b", "gone", &past);
        sl_set_cookie(rs, "f", "kept", &future);
        return 200;
    }
    if (strcmp(op, "count") == 0) {
        sl_session *s = sl_session_get(rq, rs, true);
        if (!s)
            return 500;
        const char *n = sl_session_str(s, "n");
        long v = (n ? strtol(n, NULL, 10) : 0) + 1;
        sl_session_set_str(s, "n", sl_sprintf(rq, "%ld", v));
        sl_session_set_bytes(s, "bin", "a\0b", 3);
        sl_printf(rs, "%ld", v);
        return 200;
    }
    if (strcmp(op, "logout") == 0) {
        sl_session *s = sl_session_get(rq, rs, false);
        return s && sl_session_invalidate(s) == 0 ? 200 : 404;
    }
    if (strcmp(op, "binary") == 0) {
        static const unsigned char bytes[] = {0, 1, 2, 0, 255, 0};
        sl_set_content_type(rs, "application/octet-stream");
        sl_write(rs, bytes, sizeof(bytes));
        sl_flush(rs);
        sl_write(rs, bytes, sizeof(bytes));
        return 200;
    }
    if (strcmp(op, "alloc") == 0) {
        size_t n = strtoul(sl_param(rq, "n", "1"), NULL, 10);
        unsigned char *p = sl_alloc(rq, n);
        if (!p)
            return 500;
        memset(p, 0xab, n);
        sl_printf(rs, "%zu", n);
        return 200;
    }
    return 999; /* out of range: 502 */
}

SL_SERVLET(fixture) = {.init = fx_init, .service = fx_service, .destroy = fx_destroy};

static void test_params_init_and_destroy(void **state)
{
    (void)state;
    const char *params[] = {"greeting", "hi there", NULL};
    int before = destroyed;
    sl_test *t = sl_test_new(&sl_servlet_descriptor, params);
    assert_non_null(t);
    assert_string_equal(greeting, "hi there");
    assert_int_equal(destroyed, before);
    sl_test_free(t);
    assert_int_equal(destroyed, before + 1);

    const char *refuse[] = {"greeting", "refuse", NULL};
    assert_null(sl_test_new(&sl_servlet_descriptor, refuse));
    assert_int_equal(errno, ECANCELED);
    assert_int_equal(destroyed, before + 1); /* no destroy without init */
    const char *odd[] = {"greeting", NULL};
    assert_null(sl_test_new(&sl_servlet_descriptor, odd));
    assert_null(sl_test_load("/nonexistent/servlet.so", NULL));
    assert_int_equal(errno, ENOENT);
    /* A library that loads but declares no servlet. */
    assert_null(sl_test_load("libm.so.6", NULL));
    assert_int_equal(errno, ENOENT);
}

/* sl_test_load opens a servlet through libsandlet's loader, as a worker
 * does, but loads one without a handler (a worker refuses it): what a
 * missing handler means shows in the run (405, as for any method the
 * servlet does not handle). */
static void test_load_without_handler(void **state)
{
    (void)state;
    const char *dir = getenv("SANDLET_BUILDDIR");
    char path[512];
    snprintf(path, sizeof(path), "%s/tests/fixtures/.libs/nohandler.so", dir ? dir : ".");
    sl_test *t = sl_test_load(path, NULL);
    assert_non_null(t);
    sl_test_response *rs = sl_test_get(t, "/");
    assert_non_null(rs);
    assert_int_equal(sl_test_status(rs), 405);
    sl_test_free(t);
    /* A bare file name is the file in the working directory. */
    char dirpath[512], cwd[512];
    snprintf(dirpath, sizeof(dirpath), "%s/tests/fixtures/.libs", dir ? dir : ".");
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(dirpath), 0);
    t = sl_test_load("nohandler.so", NULL);
    assert_int_equal(chdir(cwd), 0);
    assert_non_null(t);
    sl_test_free(t);
}

static void test_request_fields_and_binary_body(void **state)
{
    (void)state;
    sl_test *t = sl_test_new(&sl_servlet_descriptor, NULL);
    assert_non_null(t);
    sl_test_request *rq = sl_test_request_new(t, "PUT", "/p/q?op=echo&z=1");
    assert_int_equal(sl_test_request_header(rq, "X-Test", "yes"), 0);
    assert_int_equal(sl_test_request_header(rq, "X-Bad", "a\r\nb"), -EINVAL);
    assert_int_equal(sl_test_request_cookie(rq, "c", "cv"), 0);
    assert_int_equal(sl_test_request_cookie(rq, "c", "a;b"), -EINVAL);
    assert_int_equal(sl_test_request_peer(rq, "10.0.0.1:5"), 0);
    assert_int_equal(sl_test_request_version(rq, 10), 0);
    assert_int_equal(sl_test_request_body(rq, "x\0y", 3), 0);
    sl_test_response *r = sl_test_run(rq);
    assert_non_null(r);
    assert_int_equal(sl_test_status(r), 200);
    assert_int_equal(sl_test_result(r), 0);
    static const char want[] =
        "PUT /p/q op=echo&z=1 peer=10.0.0.1:5 v=10 x=yes c=cv greeting=none|x\0y";
    size_t len;
    const void *body = sl_test_body(r, &len);
    assert_int_equal(len, sizeof(want) - 1);
    assert_memory_equal(body, want, len);
    /* The same request again: the builder is reusable. */
    assert_int_equal(sl_test_body_len(sl_test_run(rq)), sizeof(want) - 1);

    r = sl_test_get(t, "/?op=binary");
    body = sl_test_body(r, &len);
    assert_int_equal(len, 12);
    assert_memory_equal(body, "\0\1\2\0\377\0\0\1\2\0\377\0", 12);
    assert_int_equal(sl_test_pieces(r), 2);
    assert_string_equal(sl_test_header(r, "content-type"), "application/octet-stream");

    r = sl_test_get(t, "/?op=nonsense");
    assert_int_equal(sl_test_status(r), 502);
    sl_test_free(t);
}

static void test_headers_and_cookie_jar(void **state)
{
    (void)state;
    sl_test *t = sl_test_new(&sl_servlet_descriptor, NULL);
    sl_test_response *r = sl_test_get(t, "/?op=cookies");
    assert_int_equal(sl_test_status(r), 204);
    assert_int_equal(sl_test_header_repeats(r, "Set-Cookie"), 2);
    assert_string_equal(sl_test_header_nth(r, "Set-Cookie", 0), "a=1; Path=/; HttpOnly");
    assert_string_equal(sl_test_header_nth(r, "Set-Cookie", 1), "b=2");
    assert_null(sl_test_header_nth(r, "Set-Cookie", 2));
    assert_string_equal(sl_test_header_nth(r, "X-Many", 1), "two");
    const char *attrs;
    assert_string_equal(sl_test_set_cookie(r, "a", &attrs), "1");
    assert_string_equal(attrs, "Path=/; HttpOnly");
    assert_null(sl_test_set_cookie(r, "zzz", NULL));
    const char *name, *value;
    assert_int_equal(sl_test_header_at(r, 0, &name, &value), 0);
    assert_string_equal(name, "Set-Cookie");
    assert_int_equal(sl_test_header_at(r, sl_test_header_count(r), &name, &value), -ERANGE);
    assert_string_equal(sl_test_cookie(t, "a"), "1");
    assert_string_equal(sl_test_cookie(t, "b"), "2");

    /* The jar is sent; a request's own cookie wins over it. */
    assert_int_equal(sl_test_jar_set(t, "c", "fromjar"), 0);
    r = sl_test_get(t, "/?op=echo");
    assert_non_null(strstr(sl_test_body_str(r), "c=fromjar"));
    sl_test_request *rq = sl_test_request_new(t, "GET", "/?op=echo");
    sl_test_request_cookie(rq, "c", "mine");
    assert_non_null(strstr(sl_test_body_str(sl_test_run(rq)), "c=mine"));

    /* Max-Age=0 deletes from the jar. */
    r = sl_test_get(t, "/?op=forget");
    assert_string_equal(sl_test_set_cookie(r, "a", NULL), "");
    assert_null(sl_test_cookie(t, "a"));
    assert_string_equal(sl_test_cookie(t, "b"), "2");
    assert_int_equal(sl_test_jar_set(t, "bad name", "x"), -EINVAL);
    r = sl_test_get(t, "/?op=expire");
    assert_non_null(strstr(sl_test_header_nth(r, "Set-Cookie", 0), "Expires=Thu, 01 Jan 1970"));
    assert_null(sl_test_cookie(t, "b"));
    assert_string_equal(sl_test_cookie(t, "f"), "kept");
    sl_test_free(t);
}

static void test_sessions_across_requests(void **state)
{
    (void)state;
    sl_test *t = sl_test_new(&sl_servlet_descriptor, NULL);
    assert_false(sl_test_session_exists(t));
    for (int i = 1; i <= 3; i++) {
        char want[8];
        snprintf(want, sizeof(want), "%d", i);
        assert_string_equal(sl_test_body_str(sl_test_get(t, "/?op=count")), want);
    }
    assert_true(sl_test_session_exists(t));
    assert_string_equal(sl_test_session_str(t, "n"), "3");
    size_t len;
    const void *bin = sl_test_session_bytes(t, "bin", &len);
    assert_int_equal(len, 3);
    assert_memory_equal(bin, "a\0b", 3);
    assert_null(sl_test_session_str(t, "missing"));

    /* A second sl_test has its own store and jar. */
    sl_test *u = sl_test_new(&sl_servlet_descriptor, NULL);
    assert_string_equal(sl_test_body_str(sl_test_get(u, "/?op=count")), "1");
    assert_string_equal(sl_test_body_str(sl_test_get(t, "/?op=count")), "4");
    sl_test_free(u);

    /* Invalidation deletes the cookie from the jar and the session. */
    char old[80];
    snprintf(old, sizeof(old), "%s", sl_test_session_id(t));
    assert_int_equal(sl_test_status(sl_test_get(t, "/?op=logout")), 200);
    assert_null(sl_test_session_id(t));
    sl_test_jar_set(t, SL_TEST_SESSION_COOKIE, old);
    assert_false(sl_test_session_exists(t));
    sl_test_free(t);
}

static void test_session_preset(void **state)
{
    (void)state;
    sl_test *t = sl_test_new(&sl_servlet_descriptor, NULL);
    /* No session yet: one is made and its cookie put in the jar. */
    assert_int_equal(sl_test_session_set_str(t, "n", "41"), 0);
    const char *id = sl_test_session_id(t);
    assert_non_null(id);
    assert_int_equal(strlen(id), 64);
    sl_test_response *r = sl_test_get(t, "/?op=count");
    assert_string_equal(sl_test_body_str(r), "42");
    assert_int_equal(sl_test_header_repeats(r, "Set-Cookie"), 0);
    /* The store's limits apply as in the daemon. */
    static char big[5000];
    memset(big, 'x', sizeof(big));
    assert_int_equal(sl_test_session_set_bytes(t, "big", big, sizeof(big)), -EMSGSIZE);
    char key[80];
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    assert_int_equal(sl_test_session_set_str(t, key, "v"), -EINVAL);
    assert_string_equal(sl_test_session_str(t, "n"), "42");
    sl_test_free(t);
}

static void test_request_reused_like_a_worker(void **state)
{
    (void)state;
    sl_test *t = sl_test_new(&sl_servlet_descriptor, NULL);
    /* Big, small, small, big, small: each run resets the same request. */
    static const char *const seq[] = {"/?op=alloc&n=100000", "/?op=alloc&n=10", "/?op=alloc&n=10",
                                      "/?op=alloc&n=70000",  "/?op=alloc&n=20", "/?op=alloc&n=30"};
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++)
        assert_int_equal(sl_test_status(sl_test_get(t, seq[i])), 200);
    assert_string_equal(sl_test_body_str(sl_test_get(t, "/?op=alloc&n=5")), "5");
    sl_test_free(t);
}

static int untyped(sl_request *rq, sl_response *rs)
{
    sl_puts(rs, sl_param(rq, "say", "hello"));
    return sl_param(rq, "empty", NULL) ? 204 : 200;
}

static int typed(sl_request *rq, sl_response *rs)
{
    (void)rq;
    sl_set_content_type(rs, "text/plain");
    sl_puts(rs, "plain");
    return 200;
}

/* A body without a type goes out as UTF-8 HTML; a type the servlet set
 * stays; a 204 gets none. */
static void test_default_content_type(void **state)
{
    (void)state;
    static const sl_servlet a = {.service = untyped}, b = {.service = typed};
    sl_test *t = sl_test_new(&a, NULL);
    assert_non_null(t);
    sl_test_response *r = sl_test_get(t, "/");
    assert_string_equal(sl_test_header(r, "Content-Type"), "text/html; charset=utf-8");
    sl_test_response_free(r);
    r = sl_test_get(t, "/?empty=1");
    assert_int_equal(sl_test_status(r), 204);
    assert_null(sl_test_header(r, "Content-Type"));
    sl_test_response_free(r);
    sl_test_free(t);
    t = sl_test_new(&b, NULL);
    r = sl_test_get(t, "/");
    assert_string_equal(sl_test_header(r, "Content-Type"), "text/plain");
    assert_null(sl_test_header_nth(r, "Content-Type", 1));
    sl_test_response_free(r);
    sl_test_free(t);
}

static int logging_init(sl_context *ctx)
{
    (void)ctx;
    sl_log(NULL, SL_LOG_INFO, "starting");
    return 0;
}

static int logging(sl_request *rq, sl_response *rs)
{
    (void)rs;
    errno = ENOENT;
    sl_log(rq, SL_LOG_WARNING, "name %s\nsecond", sl_param(rq, "name", "-"));
    /* errno is the servlet's, whatever logging did */
    return errno == ENOENT ? 200 : 500;
}

/* sl_log under the harness (issue 31): lines as a worker writes them,
 * kept for sl_test_log; a line feed repeats the prefix; a level out of
 * range is logged as an error, not lost. */
static void test_sl_log(void **state)
{
    (void)state;
    static const sl_servlet s = {.init = logging_init, .service = logging};
    sl_test *t = sl_test_new(&s, NULL);
    assert_non_null(t);
    assert_string_equal(sl_test_log(t), "info: starting\n");
    sl_test_log_clear(t);
    assert_string_equal(sl_test_log(t), "");
    sl_test_response *r = sl_test_get(t, "/app/x?name=a%25d");
    assert_int_equal(sl_test_status(r), 200);
    assert_string_equal(sl_test_log(t), "warning: GET /app/x: name a%d\n"
                                        "warning: GET /app/x: second\n");
    sl_test_response_free(r);
    sl_test_log_clear(t);
    sl_log(NULL, (sl_log_level)9, "outside"); /* not captured: no run */
    assert_string_equal(sl_test_log(t), "");
    sl_test_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params_init_and_destroy),
        cmocka_unit_test(test_default_content_type),
        cmocka_unit_test(test_sl_log),
        cmocka_unit_test(test_load_without_handler),
        cmocka_unit_test(test_request_fields_and_binary_body),
        cmocka_unit_test(test_headers_and_cookie_jar),
        cmocka_unit_test(test_sessions_across_requests),
        cmocka_unit_test(test_session_preset),
        cmocka_unit_test(test_request_reused_like_a_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_cookie.c - Cookie parsing (lenient, hostile input skipped safely)
 * and Set-Cookie formatting (strict: nothing that could split a response
 * or forge an attribute gets through).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/servlet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int null_sink(void *ctx, const sandlet_lib_output *out)
{
    (void)ctx;
    (void)out;
    return 0;
}

typedef struct fixture {
    sl_request rq;
    sl_response rs;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    sandlet_lib_request_init(&f->rq);
    sandlet_lib_response_init(&f->rs, &f->rq, null_sink, NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sandlet_lib_response_free(&f->rs);
    sandlet_lib_request_free(&f->rq);
    free(f);
    return 0;
}

static void test_parse(void **state)
{
    fixture *f = *state;
    sl_request *rq = &f->rq;
    assert_int_equal(sandlet_lib_request_add_header(rq, "Host", "x"), 0);
    assert_int_equal(sandlet_lib_request_add_header(
                         rq, "Cookie",
                         "a=1; b=\"two words\";c = 3 ;; =x; noeq; d=; e=\"open; f=a=b;\tg\t=\t7\t"),
                     0);
    assert_int_equal(sandlet_lib_request_add_header(rq, "cookie", "a=9; h=\"\""), 0);
    assert_string_equal(sl_cookie(rq, "a"), "1"); /* the first one wins */
    assert_string_equal(sl_cookie(rq, "b"), "two words");
    assert_string_equal(sl_cookie(rq, "c"), "3");
    assert_string_equal(sl_cookie(rq, "d"), "");
    assert_string_equal(sl_cookie(rq, "e"), "\"open");
    assert_string_equal(sl_cookie(rq, "f"), "a=b");
    assert_string_equal(sl_cookie(rq, "g"), "7");
    assert_string_equal(sl_cookie(rq, "h"), "");
    assert_null(sl_cookie(rq, "noeq"));
    assert_null(sl_cookie(rq, ""));
    assert_null(sl_cookie(rq, "A")); /* names are case-sensitive */
    assert_null(sl_cookie(rq, "missing"));
    assert_null(sl_cookie(rq, NULL));
}

static void test_parse_hostile(void **state)
{
    fixture *f = *state;
    sl_request *rq = &f->rq;
    /* Non-token names are skipped; a huge header is parsed without
     * trouble; semicolons alone are nothing. */
    size_t n = 100000;
    char *big = malloc(n + 1);
    assert_non_null(big);
    for (size_t i = 0; i < n; i++)
        big[i] = i % 4 == 3 ? ';' : 'x';
    big[n] = '\0';
    memcpy(big, "k=v;", 4);
    assert_int_equal(sandlet_lib_request_add_header(rq, "Cookie", big), 0);
    assert_int_equal(sandlet_lib_request_add_header(
                         rq, "Cookie", "x\x01y=1; sp ace=2; (p)=3; ;;;; \"q\"=4; ok=5; =; ="),
                     0);
    assert_string_equal(sl_cookie(rq, "k"), "v");
    assert_null(sl_cookie(rq, "x\x01y"));
    assert_null(sl_cookie(rq, "sp ace"));
    assert_null(sl_cookie(rq, "(p)"));
    assert_null(sl_cookie(rq, "\"q\""));
    assert_string_equal(sl_cookie(rq, "ok"), "5");
    free(big);
}

/* The one Set-Cookie value in the response, or NULL. */
static const char *set_cookie(const sl_response *rs, size_t i)
{
    size_t seen = 0;
    for (size_t j = 0; j < rs->nheaders; j++)
        if (strcmp(rs->headers[j].name, "Set-Cookie") == 0 && seen++ == i)
            return rs->headers[j].value;
    return NULL;
}

static void test_format(void **state)
{
    fixture *f = *state;
    sl_response *rs = &f->rs;
    assert_int_equal(sl_set_cookie(rs, "plain", "v1", NULL), 0);
    assert_string_equal(set_cookie(rs, 0), "plain=v1");
    sl_cookie_options o = {.has_max_age = true,
                           .max_age = 3600,
                           .expires = 784111777,
                           .path = "/shop",
                           .domain = "example.org",
                           .secure = true,
                           .http_only = true,
                           .same_site = SL_SAME_SITE_STRICT};
    assert_int_equal(sl_set_cookie(rs, "full", "\"quoted\"", &o), 0);
    assert_string_equal(set_cookie(rs, 1),
                        "full=\"quoted\"; Max-Age=3600; Expires=Sun, 06 Nov 1994 08:49:37 GMT; "
                        "Path=/shop; Domain=example.org; Secure; HttpOnly; SameSite=Strict");
    sl_cookie_options del = {.has_max_age = true, .max_age = -5, .same_site = SL_SAME_SITE_LAX};
    assert_int_equal(sl_set_cookie(rs, "gone", "", &del), 0);
    assert_string_equal(set_cookie(rs, 2), "gone=; Max-Age=0; SameSite=Lax");
    sl_cookie_options none = {.same_site = SL_SAME_SITE_NONE, .secure = true};
    assert_int_equal(sl_set_cookie(rs, "x", "y", &none), 0);
    assert_string_equal(set_cookie(rs, 3), "x=y; Secure; SameSite=None");
    /* Replacing: cookie_unset drops earlier ones of that name only. */
    sandlet_lib_cookie_unset(rs, "plain");
    assert_string_equal(set_cookie(rs, 0), "full=\"quoted\"; Max-Age=3600; Expires=Sun, 06 Nov "
                                           "1994 08:49:37 GMT; Path=/shop; Domain=example.org; "
                                           "Secure; HttpOnly; SameSite=Strict");
}

static void test_format_refuses(void **state)
{
    fixture *f = *state;
    sl_response *rs = &f->rs;
    static const char *const bad_names[] = {"",    "a b",   "a=b",  "a;b", "a\r\nX-Evil: 1",
                                            "a,b", "\"a\"", "a\x7f"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
        assert_int_equal(sl_set_cookie(rs, bad_names[i], "v", NULL), -EINVAL);
    static const char *const bad_values[] = {"a b",  "a;b",  "a,b",         "a\\b", "a\"b",
                                             "\"ab", "a\rb", "v\r\nX-E: 1", "\x80", "a\tb"};
    for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]); i++)
        assert_int_equal(sl_set_cookie(rs, "n", bad_values[i], NULL), -EINVAL);
    sl_cookie_options o = {.path = "/a; Domain=evil.example"};
    assert_int_equal(sl_set_cookie(rs, "n", "v", &o), -EINVAL);
    o.path = "/a\r\nSet-Cookie: x=1";
    assert_int_equal(sl_set_cookie(rs, "n", "v", &o), -EINVAL);
    o.path = NULL;
    o.domain = "evil.example; Secure";
    assert_int_equal(sl_set_cookie(rs, "n", "v", &o), -EINVAL);
    o.domain = "";
    assert_int_equal(sl_set_cookie(rs, "n", "v", &o), -EINVAL);
    o.domain = NULL;
    o.same_site = SL_SAME_SITE_NONE; /* without Secure: browsers drop it */
    assert_int_equal(sl_set_cookie(rs, "n", "v", &o), -EINVAL);
    o.same_site = (sl_same_site)42;
    assert_int_equal(sl_set_cookie(rs, "n", "v", &o), -EINVAL);
    assert_int_equal(sl_set_cookie(rs, NULL, "v", NULL), -EINVAL);
    assert_int_equal(sl_set_cookie(rs, "n", NULL, NULL), -EINVAL);
    /* Nothing refused was added. */
    assert_int_equal(rs->nheaders, 0);
}

/* The name a browser sends a Set-Cookie's cookie back under (RFC 6265bis
 * 5.6, 5.8.3), given as the value without a NUL after it. */
static void assert_sent_name(const char *set_cookie, const char *want)
{
    size_t len = strlen(set_cookie);
    char *v = malloc(len ? len : 1); /* no NUL: a read past len is caught */
    assert_non_null(v);
    memcpy(v, set_cookie, len);
    const char *n;
    size_t nl;
    sandlet_lib_set_cookie_sent_name(v, len, &n, &nl);
    assert_true(n >= v && n + nl <= v + len);
    if (nl != strlen(want) || memcmp(n, want, nl) != 0)
        fail_msg("Set-Cookie: %s: comes back as '%.*s', expected '%s'", set_cookie, (int)nl, n,
                 want);
    free(v);
}

static void test_sent_name(void **state)
{
    (void)state;
    assert_sent_name("sid=1; Path=/", "sid");
    assert_sent_name(" \tsid \t= 1", "sid");
    assert_sent_name("=SLSESSION_good=TOKEN; Path=/good", "SLSESSION_good");
    assert_sent_name("  =  SLSESSION_good  = TOKEN", "SLSESSION_good");
    assert_sent_name("SLSESSION_good", "SLSESSION_good");
    assert_sent_name("SLSESSION_good; Path=/", "SLSESSION_good");
    assert_sent_name("=SLSESSION_good", "SLSESSION_good");
    assert_sent_name("theme=SLSESSION_good=x", "theme");
    assert_sent_name("==SLSESSION_good=x", "");
    assert_sent_name("=", "");
    assert_sent_name("", "");
    assert_sent_name(";SLSESSION_good=x", "");
    assert_sent_name("a;b=c", "a");
}

static void test_foreign(void **state)
{
    (void)state;
    static const struct {
        const char *v;
        bool foreign;
    } cases[] = {
        {"=SLSESSION_good=TOKEN; Path=/good", true},
        {"SLSESSION_good=x", true},
        {"slsession_GOOD=x", true},
        {"SLSESSION_good", true},
        {"SLSESSION_nosuch=x", true},
        {"__Host-SLSESSION_good=x", true},
        {"__secure-__HOST-SLSESSION_good=x", true},
        {"=__Host-SLSESSION_good=x", true},
        {"SLSESSION_evil=x", false},
        {"=sLsEsSiOn_EVIL=x", false},
        {"__Host-SLSESSION_evil=x", false},
        {"SLSESSION_evilx=x", true},
        {"SLSESSION_=x", true},
        {"SLSESSION=x", false},
        {"SLSESSIONgood=x", false},
        {"theme=SLSESSION_good", false},
        {"__Host-=SLSESSION_good", false},
        {"", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *n;
        size_t nl;
        bool got = sandlet_lib_set_cookie_foreign(cases[i].v, strlen(cases[i].v), "SLSESSION_evil",
                                                  &n, &nl);
        if (got != cases[i].foreign)
            fail_msg("Set-Cookie: %s: judged %s", cases[i].v, got ? "foreign" : "allowed");
    }
    /* A sandbox without a session cookie owns none. */
    const char *n;
    size_t nl;
    assert_true(sandlet_lib_set_cookie_foreign("SLSESSION_evil=x", 16, NULL, &n, &nl));
    assert_int_equal(nl, 14);
    assert_memory_equal(n, "SLSESSION_evil", 14);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_parse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_hostile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_format_refuses, setup, teardown),
        cmocka_unit_test(test_sent_name),
        cmocka_unit_test(test_foreign),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

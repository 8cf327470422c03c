/*
 * test_request.c - the request/response servlet API driven directly
 * through libsandlet: parameters (query, urlencoded, multipart), files,
 * repeated headers, redirects, URL encoding and per-method dispatch.
 *
 * Multipart bodies are fed from exactly-sized heap copies (a streamed one
 * in pieces cut at every offset), and large file parts are spooled to a
 * temporary directory of the test's own, so that the
 * sanitizer builds catch any read past a body's end; this file must never
 * hand libsandlet a NUL-terminated body it could lean on.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/servlet.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the sink received for one response. */
typedef struct capture {
    int status;
    int heads; /* head deliveries: must be exactly 1 */
    int ends;
    const sandlet_lib_header *headers;
    size_t nheaders;
    char *body;
    size_t body_len;
} capture;

static int capture_sink(void *ctx, const sandlet_lib_output *out)
{
    capture *c = ctx;
    if (out->head) {
        c->heads++;
        c->status = out->status;
        c->headers = out->headers;
        c->nheaders = out->nheaders;
    }
    if (out->end)
        c->ends++;
    if (out->body_len) {
        char *p = realloc(c->body, c->body_len + out->body_len + 1);
        if (!p)
            return -ENOMEM;
        memcpy(p + c->body_len, out->body, out->body_len);
        c->body = p;
        c->body_len += out->body_len;
        c->body[c->body_len] = '\0';
    }
    return 0;
}

typedef struct fixture {
    sl_request rq;
    sl_response rs;
    capture cap;
    void *body; /* exact-size copy handed to the request */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    sandlet_lib_request_init(&f->rq);
    sandlet_lib_response_init(&f->rs, &f->rq, capture_sink, &f->cap);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sandlet_lib_response_free(&f->rs);
    sandlet_lib_request_free(&f->rq);
    free(f->cap.body);
    free(f->body);
    free(f);
    return 0;
}

/* Starts a new request on f: method, target, Content-Type, body. */
static void request(fixture *f, const char *method, const char *target, const char *ctype,
                    const void *body, size_t len)
{
    sandlet_lib_request_reset(&f->rq);
    sandlet_lib_response_reset(&f->rs);
    free(f->cap.body);
    memset(&f->cap, 0, sizeof(f->cap));
    free(f->body);
    f->body = malloc(len ? len : 1);
    assert_non_null(f->body);
    if (len)
        memcpy(f->body, body, len);
    assert_int_equal(
        sandlet_lib_request_set(&f->rq, method, target, strlen(target), "127.0.0.1:1", 11), 0);
    if (ctype)
        assert_int_equal(sandlet_lib_request_add_header(&f->rq, "Content-Type", ctype), 0);
    sandlet_lib_request_set_body(&f->rq, f->body, len);
}

static const char *resp_header(const capture *c, const char *name)
{
    for (size_t i = 0; i < c->nheaders; i++)
        if (strcasecmp(c->headers[i].name, name) == 0)
            return c->headers[i].value;
    return NULL;
}

/* ---- URL decoding and urlencoded parameters ------------------------- */

static void test_url_decoding(void **state)
{
    fixture *f = *state;
    request(f, "GET", "/p?a=x+y%41%62&b=%zz%4&c=%&d=100%25&e=%2B+&f", NULL, NULL, 0);
    assert_string_equal(sl_param(&f->rq, "a", NULL), "x yAb");
    assert_string_equal(sl_param(&f->rq, "b", NULL), "%zz%4"); /* invalid: kept */
    assert_string_equal(sl_param(&f->rq, "c", NULL), "%");
    assert_string_equal(sl_param(&f->rq, "d", NULL), "100%");
    assert_string_equal(sl_param(&f->rq, "e", NULL), "+ ");
    assert_string_equal(sl_param(&f->rq, "f", "fb"), ""); /* present, no '=' */
    assert_string_equal(sl_param(&f->rq, "nope", "fb"), "fb");
    assert_null(sl_param(&f->rq, NULL, NULL));
    /* Names are decoded too. */
    request(f, "GET", "/p?first+name=Ann&%61%62=2", NULL, NULL, 0);
    assert_string_equal(sl_param(&f->rq, "first name", NULL), "Ann");
    assert_string_equal(sl_param(&f->rq, "ab", NULL), "2");
}

static void test_param_bytes(void **state)
{
    fixture *f = *state;
    request(f, "GET", "/p?k=a%00b%00&plain=xy", NULL, NULL, 0);
    size_t len = 99;
    const char *v = sl_param_bytes(&f->rq, "k", &len);
    assert_non_null(v);
    assert_int_equal(len, 4);
    assert_memory_equal(v, "a\0b\0", 5);                   /* NUL-terminated as well */
    assert_string_equal(sl_param(&f->rq, "k", NULL), "a"); /* C string view */
    v = sl_param_bytes(&f->rq, "plain", &len);
    assert_int_equal(len, 2);
    assert_string_equal(v, "xy");
    len = 7;
    assert_null(sl_param_bytes(&f->rq, "missing", &len));
    assert_int_equal(len, 0);
}

static void test_repeated_params(void **state)
{
    fixture *f = *state;
    const char form[] = "t=3&t=4\0x&u=9";
    request(f, "POST", "/p?t=1&x=0&t=2", "application/x-www-form-urlencoded; charset=UTF-8", form,
            sizeof(form) - 1);
    const char *vals[8] = {0};
    /* Query first, then the body, in order. */
    assert_int_equal(sl_params(&f->rq, "t", vals, 8), 4);
    assert_string_equal(vals[0], "1");
    assert_string_equal(vals[1], "2");
    assert_string_equal(vals[2], "3");
    assert_string_equal(vals[3], "4"); /* the raw NUL ends the value's C string */
    assert_null(vals[4]);
    /* max bounds the stores, not the count. */
    const char *two[2] = {0};
    assert_int_equal(sl_params(&f->rq, "t", two, 1), 4);
    assert_string_equal(two[0], "1");
    assert_null(two[1]);
    assert_int_equal(sl_params(&f->rq, "t", NULL, 0), 4);
    assert_int_equal(sl_params(&f->rq, "zz", vals, 8), 0);
    assert_string_equal(sl_param(&f->rq, "u", NULL), "9");
    /* Every parameter in order through sl_param_at. */
    const char *names[] = {"t", "x", "t", "t", "t", "u"};
    size_t i = 0;
    const char *name, *value;
    size_t len;
    while ((name = sl_param_at(&f->rq, i, &value, &len)) != NULL) {
        assert_true(i < 6);
        assert_string_equal(name, names[i]);
        assert_int_equal(len, strlen(value) + (i == 4 ? 2 : 0)); /* "4\0x" */
        i++;
    }
    assert_int_equal(i, 6);
    assert_null(sl_param_at(&f->rq, 1000, NULL, NULL));
}

static void test_lazy(void **state)
{
    fixture *f = *state;
    request(f, "POST", "/p?a=1", "application/x-www-form-urlencoded", "b=2", 3);
    size_t used = f->rq.arena.used;
    assert_string_equal(sl_method(&f->rq), "POST");
    assert_string_equal(sl_header(&f->rq, "content-type"), "application/x-www-form-urlencoded");
    size_t blen;
    assert_memory_equal(sl_body(&f->rq, &blen), "b=2", 3);
    assert_false(f->rq.params_parsed);
    assert_int_equal(f->rq.arena.used, used); /* nothing allocated yet */
    assert_null(sl_file_at(&f->rq, 0));
    assert_true(f->rq.params_parsed);
    assert_string_equal(sl_param(&f->rq, "b", NULL), "2");
}

/* ---- headers ------------------------------------------------------------ */

static void test_headers(void **state)
{
    fixture *f = *state;
    request(f, "GET", "/", NULL, NULL, 0);
    sl_request *rq = &f->rq;
    assert_int_equal(sandlet_lib_request_add_header(rq, "Accept", "text/html"), 0);
    assert_int_equal(sandlet_lib_request_add_header(rq, "X-Forwarded-For", "1.1.1.1, 2.2.2.2"), 0);
    assert_int_equal(sandlet_lib_request_add_header(rq, "accept", "application/json"), 0);
    assert_int_equal(sandlet_lib_request_add_header(rq, "ACCEPT", ""), 0);
    assert_string_equal(sl_header(rq, "aCCept"), "text/html");
    const char *v[4] = {0};
    assert_int_equal(sl_headers(rq, "Accept", v, 4), 3);
    assert_string_equal(v[0], "text/html");
    assert_string_equal(v[1], "application/json");
    assert_string_equal(v[2], "");
    assert_null(v[3]);
    /* One line, one value: commas are not split. */
    assert_int_equal(sl_headers(rq, "x-forwarded-for", v, 4), 1);
    assert_string_equal(v[0], "1.1.1.1, 2.2.2.2");
    assert_int_equal(sl_headers(rq, "Missing", v, 4), 0);
    assert_int_equal(sl_headers(rq, NULL, v, 4), 0);
    assert_null(sl_header(rq, NULL));
    const char *names[] = {"Accept", "X-Forwarded-For", "accept", "ACCEPT"};
    const char *value = NULL;
    size_t i = 0;
    for (const char *n; (n = sl_header_at(rq, i, &value)) != NULL; i++)
        assert_string_equal(n, names[i]);
    assert_int_equal(i, 4);
    assert_string_equal(value, "");
}

/* ---- multipart ---------------------------------------------------------- */

#define CRLF "\r\n"

/* A browser-like form: two text fields, two files for one field (one
 * binary, one with a Windows path), a field name with a quote. */
static const char mp_body[] =
    "This is a preamble; ignore it." CRLF "--XyZ" CRLF
    "Content-Disposition: form-data; name=\"title\"" CRLF CRLF "Hello, world" CRLF "--XyZ" CRLF
    "content-disposition: form-data; name=\"up\"; filename=\"a.bin\"" CRLF
    "Content-Type: application/x-thing" CRLF CRLF "\x00\x01" CRLF "--XyZ no" CRLF
    "--XyZX\r\n\r\n\x00" CRLF "--XyZ   " CRLF
    "Content-Disposition: form-data; filename=\"C:\\docs\\b \\\"q\\\".txt\"; name=up" CRLF CRLF
    "second" CRLF "--XyZ" CRLF "Content-Disposition: form-data; name=\"title\"" CRLF CRLF CRLF
    "--XyZ" CRLF "Content-Disposition: form-data; name=\"we\\\"ird\"" CRLF CRLF "w" CRLF
    "--XyZ--" CRLF "epilogue";

static const char up0[] = "\x00\x01" CRLF "--XyZ no" CRLF "--XyZX\r\n\r\n\x00";

static void check_mp_form(fixture *f)
{
    sl_request *rq = &f->rq;
    assert_string_equal(sl_param(rq, "q", NULL), "1"); /* the query stands */
    const char *v[4] = {0};
    assert_int_equal(sl_params(rq, "title", v, 4), 2);
    assert_string_equal(v[0], "Hello, world");
    assert_string_equal(v[1], "");
    assert_string_equal(sl_param(rq, "we\"ird", NULL), "w");
    assert_null(sl_param(rq, "up", NULL)); /* files are not parameters */

    const sl_file *a = sl_file_get(rq, "up");
    assert_non_null(a);
    assert_ptr_equal(a, sl_file_at(rq, 0));
    assert_string_equal(a->name, "up");
    assert_string_equal(a->filename, "a.bin");
    assert_string_equal(a->content_type, "application/x-thing");
    assert_int_equal(a->len, sizeof(up0) - 1);
    assert_memory_equal(a->data, up0, sizeof(up0) - 1);
    const sl_file *b = sl_file_at(rq, 1);
    assert_non_null(b);
    assert_string_equal(b->name, "up");
    assert_string_equal(b->filename, "b \"q\".txt"); /* directories dropped */
    assert_string_equal(b->content_type, "application/octet-stream");
    assert_int_equal(b->len, 6);
    assert_memory_equal(b->data, "second", 6);
    assert_null(sl_file_at(rq, 2));
    assert_null(sl_file_get(rq, "title"));
    assert_null(sl_file_get(rq, NULL));
}

static void test_multipart(void **state)
{
    fixture *f = *state;
    request(f, "POST", "/u?q=1", "multipart/form-data; boundary=XyZ", mp_body, sizeof(mp_body) - 1);
    check_mp_form(f);
    /* Quoted boundary, other parameters around it, odd case and spaces. */
    request(f, "POST", "/u?q=1", "Multipart/Form-Data ; charset=utf-8;BOUNDARY = \"XyZ\" ; x=y",
            mp_body, sizeof(mp_body) - 1);
    check_mp_form(f);
}

static void test_multipart_text_binary(void **state)
{
    fixture *f = *state;
    /* No preamble, a NUL and CRLF inside a text field. */
    const char body[] =
        "--b" CRLF "Content-Disposition: form-data; name=t" CRLF CRLF "a\0" CRLF "b" CRLF "--b--";
    request(f, "POST", "/", "multipart/form-data; boundary=b", body, sizeof(body) - 1);
    size_t len;
    const char *v = sl_param_bytes(&f->rq, "t", &len);
    assert_non_null(v);
    assert_int_equal(len, 5);
    assert_memory_equal(v, "a\0\r\nb", 6);
    /* An empty form. */
    request(f, "POST", "/?z=1", "multipart/form-data; boundary=b", "--b--" CRLF, 7);
    assert_null(sl_param_at(&f->rq, 1, NULL, NULL));
    assert_string_equal(sl_param(&f->rq, "z", NULL), "1");
}

/* A body with no valid multipart reading contributes nothing, and the
 * query's parameters stay. */
static void expect_nothing(fixture *f, const char *ctype, const char *body, size_t len)
{
    request(f, "POST", "/?q=1", ctype, body, len);
    assert_string_equal(sl_param(&f->rq, "q", NULL), "1");
    assert_null(sl_param_at(&f->rq, 1, NULL, NULL));
    assert_null(sl_file_at(&f->rq, 0));
}

static void test_multipart_malformed(void **state)
{
    fixture *f = *state;
    const char *ok = "--b" CRLF "Content-Disposition: form-data; name=t" CRLF CRLF "v" CRLF "--b--";
    size_t oklen = strlen(ok);
    /* Sanity: the well-formed body does parse. */
    request(f, "POST", "/?q=1", "multipart/form-data; boundary=b", ok, oklen);
    assert_string_equal(sl_param(&f->rq, "t", NULL), "v");

    expect_nothing(f, "multipart/form-data", ok, oklen);               /* no boundary */
    expect_nothing(f, "multipart/form-data; boundary=", ok, oklen);    /* empty */
    expect_nothing(f, "multipart/form-data; boundary=\"b", ok, oklen); /* open quote */
    expect_nothing(f, "multipart/form-data; boundary=c", ok, oklen);   /* wrong one */
    expect_nothing(f, "multipart/form-datab; boundary=b", ok, oklen);  /* other type */
    expect_nothing(f, "multipart/mixed; boundary=b", ok, oklen);       /* other type */
    char longb[128] = "multipart/form-data; boundary=";
    memset(longb + strlen(longb), 'b', 71); /* > 70 */
    expect_nothing(f, longb, ok, oklen);
    /* No closing delimiter, bare CR in headers, header line without a
     * colon, unterminated quote in the disposition, nothing after the
     * first delimiter. */
    const char *trunc = "--b" CRLF "Content-Disposition: form-data; name=t" CRLF CRLF "v";
    expect_nothing(f, "multipart/form-data; boundary=b", trunc, strlen(trunc));
    const char *bad[] = {
        "--b" CRLF "Content-Disposition: form-data; name=t" CRLF CRLF "v" CRLF "--b",
        "--b" CRLF "Content-Disposition: form-data;\r name=t" CRLF CRLF "v" CRLF "--b--",
        "--b" CRLF "no colon here" CRLF CRLF "v" CRLF "--b--",
        "--b" CRLF "Content-Disposition: form-data; name=\"t" CRLF CRLF "v" CRLF "--b--",
        "--b",
        "--bX" CRLF CRLF "v" CRLF "--b--",
        "preamble without any delimiter",
        "--b" CRLF "Content-Disposition: form-data; name=t" CRLF "v" CRLF "--b--",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_nothing(f, "multipart/form-data; boundary=b", bad[i], strlen(bad[i]));
}

static void test_multipart_huge_headers(void **state)
{
    fixture *f = *state;
    size_t n = 64 * 1024;
    char *body = malloc(n);
    assert_non_null(body);
    const char *head = "--b" CRLF "Content-Disposition: form-data; name=t" CRLF "X-Pad: ";
    memcpy(body, head, strlen(head));
    memset(body + strlen(head), 'p', n - strlen(head));
    const char *tail = CRLF CRLF "v" CRLF "--b--";
    memcpy(body + n - strlen(tail), tail, strlen(tail));
    expect_nothing(f, "multipart/form-data; boundary=b", body, n);
    /* Just under the limit is fine. */
    size_t m = 6000;
    memcpy(body + m - strlen(tail), tail, strlen(tail));
    request(f, "POST", "/", "multipart/form-data; boundary=b", body, m);
    assert_string_equal(sl_param(&f->rq, "t", NULL), "v");
    free(body);
}

/* Every prefix and every single-byte corruption of a real form: never a
 * crash or an out-of-bounds read (ASan), and whatever parses keeps its
 * files inside the body. */
static void test_multipart_fuzz(void **state)
{
    fixture *f = *state;
    size_t n = sizeof(mp_body) - 1;
    const char *ct = "multipart/form-data; boundary=XyZ";
    for (size_t len = 0; len <= n; len++) {
        request(f, "POST", "/", ct, mp_body, len);
        size_t files = 0;
        for (const sl_file *fl; (fl = sl_file_at(&f->rq, files)) != NULL; files++)
            assert_true(fl->data && fl->len <= len);
        /* Only the whole body (up to the close) is a complete form. */
        if (len < n - strlen(CRLF "epilogue"))
            assert_int_equal(files, 0);
        else
            assert_int_equal(files, 2);
    }
    static const char junk[] = {'\0', '\r', '\n', '-', '"', ';', '=', ':', 'X', '\\', ' '};
    char *copy = malloc(n);
    assert_non_null(copy);
    unsigned seed = 12345;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < sizeof(junk); j += 1 + (seed = seed * 1103515245u + 12345u) % 3) {
            memcpy(copy, mp_body, n);
            copy[i] = junk[j];
            request(f, "POST", "/", ct, copy, n);
            for (size_t k = 0; k < 8; k++) {
                const sl_file *fl = sl_file_at(&f->rq, k);
                if (!fl)
                    break;
                assert_true(fl->data && fl->len <= n);
                assert_non_null(fl->filename);
                assert_non_null(fl->content_type);
            }
            (void)sl_param_at(&f->rq, 0, NULL, NULL);
        }
    }
    free(copy);
}

/* ---- escaping and redirects -------------------------------------------- */

static void test_url_encode(void **state)
{
    fixture *f = *state;
    request(f, "GET", "/", NULL, NULL, 0);
    assert_string_equal(sl_url_encode(&f->rq, "AZaz09-._~"), "AZaz09-._~");
    assert_string_equal(sl_url_encode(&f->rq, "a b&c=d/e?f#g+h%"),
                        "a%20b%26c%3Dd%2Fe%3Ff%23g%2Bh%25");
    assert_string_equal(sl_url_encode(&f->rq, "\xc3\xa9\x01\x7f"), "%C3%A9%01%7F");
    assert_string_equal(sl_url_encode(&f->rq, ""), "");
    assert_string_equal(sl_url_encode(&f->rq, NULL), "");
    assert_string_equal(sl_html(&f->rq, "<a href='x'>&\"</a>"),
                        "&lt;a href=&#39;x&#39;&gt;&amp;&#34;&lt;/a&gt;");
}

static void test_redirect(void **state)
{
    fixture *f = *state;
    static const int good[] = {301, 302, 303, 307, 308};
    for (size_t i = 0; i < 5; i++) {
        request(f, "GET", "/", NULL, NULL, 0);
        sl_puts(&f->rs, "discarded");
        assert_int_equal(sl_redirect(&f->rs, good[i], "/next?a=1&b=<2>"), good[i]);
        assert_int_equal(sandlet_lib_response_finish(&f->rs, 200), 0);
        assert_int_equal(f->cap.status, good[i]);
        assert_string_equal(resp_header(&f->cap, "Location"), "/next?a=1&b=<2>");
        assert_non_null(strstr(f->cap.body, "href=\"/next?a=1&amp;b=&lt;2&gt;\""));
        assert_null(strstr(f->cap.body, "discarded"));
    }
    request(f, "GET", "/", NULL, NULL, 0);
    static const int bad[] = {200, 300, 304, 305, 306, 309, 0, -1};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sl_redirect(&f->rs, bad[i], "/x"), -EINVAL);
    assert_int_equal(sl_redirect(&f->rs, 302, "/x\r\nSet-Cookie: a=1"), -EINVAL);
    assert_int_equal(sl_redirect(&f->rs, 302, "/x\nY"), -EINVAL);
    assert_int_equal(sl_redirect(&f->rs, 302, "/x\rY"), -EINVAL);
    assert_int_equal(sl_redirect(&f->rs, 302, ""), -EINVAL);
    assert_int_equal(sl_redirect(&f->rs, 302, NULL), -EINVAL);
    assert_int_equal(f->rs.nheaders, 0); /* refusals change nothing */
    assert_int_equal(f->rs.status, 0);
    /* After a flush the head is gone. */
    sl_puts(&f->rs, "x");
    assert_int_equal(sl_flush(&f->rs), 0);
    assert_int_equal(sl_redirect(&f->rs, 302, "/x"), -EALREADY);
}

/* ---- dispatch -------------------------------------------------------- */

static int calls;
static char last[16];

static int record(const char *what, sl_response *rs)
{
    calls++;
    snprintf(last, sizeof(last), "%s", what);
    sl_puts(rs, what);
    return 200;
}
static int h_get(sl_request *rq, sl_response *rs)
{
    (void)rq;
    return record("get", rs);
}
static int h_post(sl_request *rq, sl_response *rs)
{
    (void)rq;
    return record("post", rs);
}
static int h_delete(sl_request *rq, sl_response *rs)
{
    (void)rq;
    return record("delete", rs);
}
static int h_service(sl_request *rq, sl_response *rs)
{
    return record(sl_method(rq), rs);
}
static int h_nocontent(sl_request *rq, sl_response *rs)
{
    (void)rq;
    sl_puts(rs, "must not be sent");
    return 204;
}

static void run(fixture *f, const sl_servlet *s, const char *method)
{
    request(f, method, "/", NULL, NULL, 0);
    calls = 0;
    last[0] = '\0';
    assert_int_equal(sandlet_lib_run(s, &f->rq, &f->rs), 0);
    assert_int_equal(f->cap.heads, 1);
    assert_int_equal(f->cap.ends, 1);
}

static void test_dispatch(void **state)
{
    fixture *f = *state;
    const sl_servlet s = {.get = h_get, .post = h_post, .delete = h_delete};
    run(f, &s, "GET");
    assert_string_equal(last, "get");
    assert_int_equal(f->cap.status, 200);
    assert_null(resp_header(&f->cap, "Allow"));
    run(f, &s, "POST");
    assert_string_equal(last, "post");
    run(f, &s, "DELETE");
    assert_string_equal(last, "delete");
    /* HEAD runs get; the body goes to the sink for its length. */
    run(f, &s, "HEAD");
    assert_string_equal(last, "get");
    assert_int_equal(f->cap.status, 200);
    /* Unhandled: 405 with Allow, handler not run. */
    const char *unhandled[] = {"PUT", "PATCH", "TRACE", "BREW", "get"};
    for (size_t i = 0; i < 5; i++) {
        run(f, &s, unhandled[i]);
        assert_int_equal(calls, 0);
        assert_int_equal(f->cap.status, 405);
        assert_string_equal(resp_header(&f->cap, "Allow"), "GET, HEAD, POST, DELETE, OPTIONS");
    }
    /* OPTIONS without a handler: 204, Allow, no body. */
    run(f, &s, "OPTIONS");
    assert_int_equal(calls, 0);
    assert_int_equal(f->cap.status, 204);
    assert_int_equal(f->cap.body_len, 0);
    assert_string_equal(resp_header(&f->cap, "Allow"), "GET, HEAD, POST, DELETE, OPTIONS");
    /* A POST-only servlet offers no HEAD. */
    const sl_servlet p = {.post = h_post};
    run(f, &p, "GET");
    assert_int_equal(f->cap.status, 405);
    assert_string_equal(resp_header(&f->cap, "Allow"), "POST, OPTIONS");
    run(f, &p, "HEAD");
    assert_int_equal(f->cap.status, 405);
    /* service takes every method and wins over per-method handlers. */
    const sl_servlet all = {.service = h_service, .get = h_get};
    const char *methods[] = {"GET", "HEAD", "OPTIONS", "PROPFIND"};
    for (size_t i = 0; i < 4; i++) {
        run(f, &all, methods[i]);
        assert_int_equal(calls, 1);
        assert_string_equal(last, methods[i]);
        assert_int_equal(f->cap.status, 200);
    }
    /* A bodyless status drops what was written. */
    const sl_servlet nc = {.get = h_nocontent};
    run(f, &nc, "GET");
    assert_int_equal(f->cap.status, 204);
    assert_int_equal(f->cap.body_len, 0);
}

static void test_runnable(void **state)
{
    (void)state;
    const sl_servlet none = {.session = SL_SESSION_NONE};
    assert_false(sandlet_lib_servlet_runnable(&none));
    const sl_servlet svc = {.service = h_service};
    assert_true(sandlet_lib_servlet_runnable(&svc));
    const sl_servlet opt = {.options = h_get};
    assert_true(sandlet_lib_servlet_runnable(&opt));
    const sl_servlet pat = {.patch = h_get};
    assert_true(sandlet_lib_servlet_runnable(&pat));
    char allow[64];
    const sl_servlet every = {.get = h_get,
                              .head = h_get,
                              .post = h_get,
                              .put = h_get,
                              .delete = h_get,
                              .patch = h_get,
                              .options = h_get};
    sandlet_lib_allow(&every, allow, sizeof(allow));
    assert_string_equal(allow, "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS");
    /* Too small a buffer: a shorter list, never an overflow. */
    char tiny[10];
    sandlet_lib_allow(&every, tiny, sizeof(tiny));
    assert_string_equal(tiny, "GET, HEAD");
}

/* ---- streamed bodies (sl_body_read) ---------------------------------- */

/* A driver's pull over fixed pieces, then 0, or -1 when it aborts; the
 * piece handed out last is scribbled over at the next call, as a worker's
 * frame buffer is reused. */
typedef struct pieces {
    const char *const *piece;
    size_t n, next;
    bool abort;
    char scratch[64];
    unsigned calls_after_end;
} pieces;

static int pull_pieces(void *ctx, const void **data, size_t *len)
{
    pieces *p = ctx;
    memset(p->scratch, 'X', sizeof(p->scratch));
    if (p->next == p->n) {
        p->calls_after_end++;
        return p->abort ? -1 : 0;
    }
    size_t l = strlen(p->piece[p->next]);
    memcpy(p->scratch, p->piece[p->next++], l);
    *data = p->scratch;
    *len = l;
    return 1;
}

static void test_body_read(void **state)
{
    fixture *f = *state;
    static const char *const parts[] = {"llo, ", "", "wor", "ld"};
    /* Whole (not streamed): read in pieces, then sl_body gives the rest. */
    request(f, "POST", "/", NULL, "hello", 5);
    char buf[16];
    assert_int_equal(sl_body_read(&f->rq, buf, 2), 2);
    size_t len;
    const char *rest = sl_body(&f->rq, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(rest, "llo", 3);
    assert_int_equal(sl_body_read(&f->rq, buf, sizeof(buf)), 3);
    assert_int_equal(sl_body_read(&f->rq, buf, sizeof(buf)), 0);
    assert_int_equal(sl_body_read(&f->rq, buf, 0), 0);
    assert_int_equal(sl_body_read(&f->rq, NULL, 1), -1);
    assert_int_equal(errno, EINVAL);

    /* Streamed: the first part, then the driver's pieces (an empty one
     * among them), read 3 bytes at a time. */
    pieces p = {parts, 4, 0, false, {0}, 0};
    request(f, "POST", "/", NULL, "he", 2);
    sandlet_lib_request_set_body_pull(&f->rq, pull_pieces, &p);
    char got[32];
    size_t n = 0;
    ssize_t k;
    while ((k = sl_body_read(&f->rq, got + n, 3)) > 0)
        n += (size_t)k;
    assert_int_equal(k, 0);
    assert_int_equal(n, 12);
    assert_memory_equal(got, "hello, world", 12);
    assert_int_equal(p.calls_after_end, 1); /* not asked again after its end */
    assert_int_equal(sl_body_read(&f->rq, got, 3), 0);
    assert_int_equal(p.calls_after_end, 1);

    /* sl_body on a streamed body, after a partial read: the rest, whole,
     * in memory of its own (the driver's pieces are gone). */
    p = (pieces){parts, 4, 0, false, {0}, 0};
    request(f, "POST", "/", NULL, "he", 2);
    sandlet_lib_request_set_body_pull(&f->rq, pull_pieces, &p);
    assert_int_equal(sl_body_read(&f->rq, got, 1), 1);
    rest = sl_body(&f->rq, &len);
    assert_non_null(rest);
    assert_int_equal(len, 11);
    assert_memory_equal(rest, "ello, world", 11);
    assert_ptr_equal(sl_body(&f->rq, &len), rest);

    /* An aborted body: -1 ECONNABORTED, and sl_body never hands out the
     * part that arrived as if it were the whole. */
    p = (pieces){parts, 2, 0, true, {0}, 0};
    request(f, "POST", "/", NULL, "he", 2);
    sandlet_lib_request_set_body_pull(&f->rq, pull_pieces, &p);
    n = 0;
    while ((k = sl_body_read(&f->rq, got + n, 4)) > 0)
        n += (size_t)k;
    assert_int_equal(k, -1);
    assert_int_equal(errno, ECONNABORTED);
    assert_int_equal(n, 7);
    assert_int_equal(sl_body_read(&f->rq, got, 4), -1);
    p = (pieces){parts, 2, 0, true, {0}, 0};
    request(f, "POST", "/", NULL, "he", 2);
    sandlet_lib_request_set_body_pull(&f->rq, pull_pieces, &p);
    errno = 0;
    assert_null(sl_body(&f->rq, &len));
    assert_int_equal(len, 0);
    assert_int_equal(errno, ECONNABORTED);
}

/* A form body that streams: its parameters are there all the same. */
static void test_body_streamed_form(void **state)
{
    fixture *f = *state;
    static const char *const parts[] = {"=1&b", "=2", "&c=3"};
    pieces p = {parts, 3, 0, false, {0}, 0};
    request(f, "POST", "/?q=0", "application/x-www-form-urlencoded", "a", 1);
    sandlet_lib_request_set_body_pull(&f->rq, pull_pieces, &p);
    assert_string_equal(sl_param(&f->rq, "q", "-"), "0");
    assert_string_equal(sl_param(&f->rq, "a", "-"), "1");
    assert_string_equal(sl_param(&f->rq, "b", "-"), "2");
    assert_string_equal(sl_param(&f->rq, "c", "-"), "3");
    /* Aborted: the body adds nothing, the query stands. */
    p = (pieces){parts, 2, 0, true, {0}, 0};
    request(f, "POST", "/?q=0", "application/x-www-form-urlencoded", "a", 1);
    sandlet_lib_request_set_body_pull(&f->rq, pull_pieces, &p);
    assert_string_equal(sl_param(&f->rq, "q", "-"), "0");
    assert_string_equal(sl_param(&f->rq, "a", "-"), "-");
}

/* ---- a streamed multipart body, cut anywhere ---------------------------- */

/* Pulls an exactly-sized copy of each piece: step bytes at a time from at
 * (the first piece, before at, is the request's own body). */
typedef struct cuts {
    const char *b;
    size_t len, at, step;
    char *copy;
} cuts;

static int pull_cuts(void *ctx, const void **data, size_t *len)
{
    cuts *c = ctx;
    free(c->copy);
    c->copy = NULL;
    if (c->at == c->len)
        return 0;
    size_t n = c->len - c->at < c->step ? c->len - c->at : c->step;
    c->copy = malloc(n);
    assert_non_null(c->copy);
    memcpy(c->copy, c->b + c->at, n);
    c->at += n;
    *data = c->copy;
    *len = n;
    return 1;
}

static void streamed(fixture *f, const char *target, const char *ct, cuts *c, size_t first)
{
    request(f, "POST", target, ct, c->b, first);
    c->at = first;
    sandlet_lib_request_set_body_pull(&f->rq, pull_cuts, c);
}

/* The browser-like form through the incremental parser: cut once at every
 * offset, then cut into pieces of every size from 1 byte up. */
static void test_multipart_pieces(void **state)
{
    fixture *f = *state;
    const char *ct = "multipart/form-data; boundary=XyZ";
    size_t n = sizeof(mp_body) - 1;
    for (size_t first = 0; first <= n; first++) {
        cuts c = {mp_body, n, 0, n, NULL};
        streamed(f, "/u?q=1", ct, &c, first);
        check_mp_form(f);
        free(c.copy);
    }
    for (size_t step = 1; step <= n; step++) {
        cuts c = {mp_body, n, 0, step, NULL};
        streamed(f, "/u?q=1", ct, &c, 0);
        check_mp_form(f);
        free(c.copy);
    }
    /* Truncated anywhere: nothing, and never a crash. */
    for (size_t len = 0; len < n - strlen(CRLF "epilogue"); len++) {
        cuts c = {mp_body, len, 0, 3, NULL};
        streamed(f, "/u?q=1", ct, &c, 0);
        assert_null(sl_file_at(&f->rq, 0));
        assert_string_equal(sl_param(&f->rq, "q", NULL), "1");
        free(c.copy);
    }
}

static size_t dir_entries(const char *path)
{
    DIR *d = opendir(path);
    assert_non_null(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* The worker's spool file as the acceptor fills it: a file with no name
 * holding the first n bytes of body; returns a read-only descriptor of
 * it, as the worker gets. */
static int acceptor_copy(const char *dir, const char *body, size_t n)
{
    int w = open(dir, O_TMPFILE | O_WRONLY, 0600);
    assert_true(w >= 0);
    assert_int_equal(pwrite(w, body, n, 0), (ssize_t)n);
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", w);
    int r = open(self, O_RDONLY);
    assert_true(r >= 0);
    close(w);
    return r;
}

/* A streamed file part past the threshold is left where the acceptor
 * copied the body (the spool file): its range there is readable by
 * sl_file_read and through data, whatever the pieces; a small one stays in memory; nothing
 * is ever written by the worker (the descriptor is read-only); a copy
 * that lacks the part's bytes fails the form (EIO) rather than hand out
 * others; an empty one (the acceptor did not copy this body) keeps the
 * part in memory. */
static void test_multipart_spool(void **state)
{
    fixture *f = *state;
    char dir[] = "/tmp/sl-spool-XXXXXX";
    assert_non_null(mkdtemp(dir));

    size_t big = 3 * SANDLET_SPOOL_THRESHOLD + 123;
    static const char head[] =
        "--b" CRLF "Content-Disposition: form-data; name=t" CRLF CRLF "text" CRLF "--b" CRLF
        "Content-Disposition: form-data; name=big; filename=x" CRLF CRLF;
    static const char mid[] =
        CRLF "--b" CRLF "Content-Disposition: form-data; name=small; filename=y" CRLF CRLF
             "tiny" CRLF "--b--" CRLF;
    size_t hl = sizeof(head) - 1, ml = sizeof(mid) - 1, n = hl + big + ml;
    char *body = malloc(n);
    assert_non_null(body);
    memcpy(body, head, hl);
    for (size_t i = 0; i < big; i++) /* CRs and dashes, never a delimiter */
        body[hl + i] = "\r\n--a-\r\n-b"[i % 11];
    memcpy(body + hl + big, mid, ml);
    int fd = acceptor_copy(dir, body, n);
    sandlet_lib_spool_set(fd);
    static const size_t steps[] = {1, 7, 4093, 65536, 1 << 20};
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        cuts c = {body, n, 0, steps[s], NULL};
        streamed(f, "/", "multipart/form-data; boundary=b", &c, 100);
        assert_string_equal(sl_param(&f->rq, "t", NULL), "text");
        const sl_file *a = sl_file_get(&f->rq, "big");
        assert_non_null(a);
        assert_int_equal(a->len, big);
        assert_true(f->rq.files[0].spooled);
        assert_int_equal(f->rq.files[0].spool_off, hl);
        assert_non_null(a->data);
        assert_memory_equal(a->data, body + hl, big);
        char buf[5000];
        size_t at = 0;
        for (ssize_t r; (r = sl_file_read(&f->rq, a, buf, sizeof(buf), at)) > 0; at += (size_t)r)
            assert_memory_equal(buf, body + hl + at, (size_t)r);
        assert_int_equal(at, big);
        const sl_file *b = sl_file_get(&f->rq, "small");
        assert_non_null(b);
        assert_false(f->rq.files[1].spooled);
        assert_int_equal(sl_file_read(&f->rq, b, buf, sizeof(buf), 1), 3);
        assert_memory_equal(buf, "iny", 3);
        assert_int_equal(sl_file_read(&f->rq, b, buf, sizeof(buf), 4), 0);
        sl_file fake = *b;
        assert_int_equal(sl_file_read(&f->rq, &fake, buf, 1, 0), -1);
        assert_int_equal(errno, EINVAL);
        assert_int_equal(dir_entries(dir), 0);
        free(c.copy);
        sandlet_lib_request_reset(&f->rq);
        assert_int_equal(f->rq.spool_mapped, 0);
    }
    /* The same body whole (not streamed) is never spooled. */
    request(f, "POST", "/", "multipart/form-data; boundary=b", body, n);
    const sl_file *a = sl_file_get(&f->rq, "big");
    assert_non_null(a);
    assert_false(f->rq.files[0].spooled);
    sandlet_lib_request_reset(&f->rq);
    close(fd);

    /* A copy cut short inside the part: the form fails with EIO. */
    fd = acceptor_copy(dir, body, hl + big / 2);
    sandlet_lib_spool_set(fd);
    cuts c = {body, n, 0, 4096, NULL};
    streamed(f, "/", "multipart/form-data; boundary=b", &c, 0);
    assert_null(sl_file_get(&f->rq, "big"));
    assert_int_equal(errno, EIO);
    free(c.copy);
    sandlet_lib_request_reset(&f->rq);
    close(fd);

    /* An empty copy, or no spool at all: the part stays in memory. */
    for (int k = 0; k < 2; k++) {
        fd = k == 0 ? acceptor_copy(dir, body, 0) : -1;
        sandlet_lib_spool_set(fd);
        cuts e = {body, n, 0, 4096, NULL};
        streamed(f, "/", "multipart/form-data; boundary=b", &e, 0);
        a = sl_file_get(&f->rq, "big");
        assert_non_null(a);
        assert_false(f->rq.files[0].spooled);
        assert_memory_equal(a->data, body + hl, big);
        free(e.copy);
        sandlet_lib_request_reset(&f->rq);
        if (fd >= 0)
            close(fd);
    }
    sandlet_lib_spool_set(-1);
    free(body);
    assert_int_equal(rmdir(dir), 0);
}

/* The byte classes of header names and values (syntax.c's table) against
 * RFC 9110 written out another way: every byte, alone, among others, and
 * the empty cases. */
static void test_field_syntax(void **state)
{
    (void)state;
    for (unsigned b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        bool tchar = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                     (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
        bool value = c == '\t' || (c >= 0x20 && c != 0x7f);
        char s[3] = {'a', (char)c, 'b'};
        assert_int_equal(sandlet_lib_tchar(c), tchar);
        assert_int_equal(sandlet_lib_token(s, 3), tchar);
        assert_int_equal(sandlet_lib_token(s + 1, 1), tchar);
        assert_int_equal(sandlet_lib_field_value(s, 3), value);
        assert_int_equal(sandlet_lib_header_valid(s, 1, s, 3), value);
        assert_int_equal(sandlet_lib_header_valid(s, 3, "v", 1), tchar);
    }
    assert_false(sandlet_lib_token("", 0));
    assert_true(sandlet_lib_field_value("", 0));
    assert_false(sandlet_lib_header_valid("", 0, "v", 1));
    assert_false(sandlet_lib_field_value("a\r\nb", 4));
    /* The names a servlet may not set, whatever their case, and only those. */
    static const char *const reserved[] = {"Content-Length", "transfer-encoding", "CONNECTION",
                                           "Date",           "Keep-Alive",        "upgrade",
                                           "Trailer"};
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
        size_t n = strlen(reserved[i]);
        assert_true(sandlet_lib_header_reserved(reserved[i], n));
        assert_false(sandlet_lib_header_reserved(reserved[i], n - 1));
    }
    assert_false(sandlet_lib_header_reserved("Dates", 5));
    assert_false(sandlet_lib_header_reserved("Content-Type", 12));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_body_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_streamed_form, setup, teardown),
        cmocka_unit_test_setup_teardown(test_url_decoding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_param_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repeated_params, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lazy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart_text_binary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart_huge_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart_fuzz, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart_pieces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multipart_spool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_url_encode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redirect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dispatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_runnable, setup, teardown),
        cmocka_unit_test(test_field_syntax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_csp.c - the C Server Pages translator (src/csp/translate.c) and
 * the typed writers (src/lib/csp_out.c): every tag, translation errors
 * with their line and column, and, as the real proof, pages translated,
 * compiled with the system compiler ($SANDLET_CC) against include/,
 * loaded under the in-process harness and run: the response body is
 * checked byte for byte.  It must never need a running sandletd.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "csp/translate.h"
#include <sandlet/test.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/test_csp.XXXXXX";
static int pages;

static int translate(const char *src, size_t len, sandlet_buf *out, sandlet_csp_error *err)
{
    sandlet_buf_init(out, 0);
    return sandlet_csp_translate("page.csp", (const uint8_t *)src, len, out, err);
}

/* Writes the translation of the page to DIR/pN.c and compiles it into
 * DIR/pN.so; the compiler's messages go to DIR/pN.log.  Returns the
 * compiler's exit status, and the paths through so/log. */
static int compile_page(const char *src, size_t len, char *so, char *log)
{
    sandlet_buf out;
    sandlet_csp_error err;
    int rc = translate(src, len, &out, &err);
    if (rc != 0)
        fprintf(stderr, "translate: %lu:%lu: %s\n", err.line, err.col, err.msg);
    assert_int_equal(rc, 0);
    int n = ++pages;
    char c[512];
    snprintf(c, sizeof(c), "%s/p%d.c", dir, n);
    snprintf(so, 512, "%s/p%d.so", dir, n);
    snprintf(log, 512, "%s/p%d.log", dir, n);
    FILE *f = fopen(c, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(out.data, 1, out.len, f), out.len);
    assert_int_equal(fclose(f), 0);
    sandlet_buf_free(&out);
    const char *cc = getenv("SANDLET_CC");
    const char *srcdir = getenv("SANDLET_SRCDIR");
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "%s -std=c11 -Wall -Wextra -Werror -fPIC -shared -I%s/include -o %s %s 2>%s",
             cc && *cc ? cc : "cc", srcdir ? srcdir : ".", so, c, log);
    return system(cmd);
}

/* Translates, compiles, loads and GETs the page. */
static sl_test_response *run_page(const char *src, size_t len, sl_test **tp)
{
    char so[512], log[512];
    int rc = compile_page(src, len, so, log);
    if (rc != 0) {
        /* The compiler's messages, so that a failure says why. */
        FILE *f = fopen(log, "r");
        char line[512];
        while (f && fgets(line, sizeof(line), f))
            fputs(line, stderr);
        if (f)
            fclose(f);
    }
    assert_int_equal(rc, 0);
    sl_test *t = sl_test_load(so, NULL);
    assert_non_null(t);
    *tp = t;
    sl_test_response *r = sl_test_get(t, "/page");
    assert_non_null(r);
    return r;
}

static void assert_body(sl_test_response *r, const char *want, size_t wlen)
{
    size_t len;
    const void *body = sl_test_body(r, &len);
    assert_int_equal(len, wlen);
    assert_memory_equal(body, want, wlen);
}

static void test_every_tag_and_type(void **state)
{
    (void)state;
    static const char page[] =
        "<%@ include <stdint.h> %>\n"
        "<%@ include \"limits.h\" %>\n"
        "<%! static int counter; %>\n"
        "<%^ counter = 40; %>\n"
        "<script>a && b ?\?= '\\'</script>\n"
        "<%-- a comment <% with a tag %> --%>\n"
        "<% for (int i = 0; i < 3; i++) { %>[<%= i %>]<% } %>\n"
        "s=<%= (char *)\"a<b&\\\"c'd>\" %>|cs=<%= (const char *)\"<i>\" %>\n"
        "raw=<%== \"<b>\" %>|n=<%= (char *)NULL %>|nr=<%== (const char *)NULL %>|\n"
        "c=<%= (char)'<' %><%= (char)'x' %>|cr=<%== (char)'<' %>\n"
        "sc=<%= (signed char)-5 %> uc=<%= (unsigned char)250 %>\n"
        "sh=<%= (short)-300 %> us=<%= (unsigned short)65535 %>\n"
        "i=<%= INT_MIN %> u=<%= 7u %>\n"
        "l=<%= -1234567890123L %> ul=<%= 18446744073709551615UL %>\n"
        "ll=<%= (long long)INT64_MIN %> ull=<%= (unsigned long long)UINT64_MAX %>\n"
        "d=<%= 3.5 %> f=<%= 0.25f %> ld=<%= (long double)-2 %>\n"
        "b=<%= (bool)1 %>/<%= (_Bool)0 %>\n"
        "lit=<%% %> end=%>\n"
        "cnt=<%= ++counter %><%= ++counter %>\n";
    /* The directives' line ends are dropped; the declaration's and the
     * init section's are text. */
    static const char want[] = "\n\n"
                               "<script>a && b ?\?= '\\'</script>\n"
                               "\n"
                               "[0][1][2]\n"
                               "s=a&lt;b&amp;&#34;c&#39;d&gt;|cs=&lt;i&gt;\n"
                               "raw=<b>|n=|nr=|\n"
                               "c=&lt;x|cr=<\n"
                               "sc=-5 uc=250\n"
                               "sh=-300 us=65535\n"
                               "i=-2147483648 u=7\n"
                               "l=-1234567890123 ul=18446744073709551615\n"
                               "ll=-9223372036854775808 ull=18446744073709551615\n"
                               "d=3.5 f=0.25 ld=-2\n"
                               "b=true/false\n"
                               "lit=<% %> end=%>\n"
                               "cnt=4142\n";
    sl_test *t;
    sl_test_response *r = run_page(page, sizeof(page) - 1, &t);
    assert_int_equal(sl_test_status(r), 200);
    assert_non_null(strstr(sl_test_header(r, "Content-Type"), "text/html"));
    assert_body(r, want, sizeof(want) - 1);
    sl_test_response_free(r);
    /* init ran once per worker: the counter goes on from 42. */
    r = sl_test_get(t, "/page");
    assert_non_null(strstr(sl_test_body_str(r), "cnt=4344"));
    sl_test_response_free(r);
    sl_test_free(t);
}

static void test_request_and_status(void **state)
{
    (void)state;
    static const char page[] = "<% const char *who = sl_param(rq, \"who\", \"you\");\n"
                               "   if (strcmp(who, \"nobody\") == 0) return 404; %>"
                               "<%@ include <string.h> %>Hi <%= who %>!";
    char so[512], log[512];
    assert_int_equal(compile_page(page, sizeof(page) - 1, so, log), 0);
    sl_test *t = sl_test_load(so, NULL);
    assert_non_null(t);
    sl_test_response *r = sl_test_get(t, "/p?who=%3Cme%3E");
    assert_int_equal(sl_test_status(r), 200);
    assert_string_equal(sl_test_body_str(r), "Hi &lt;me&gt;!");
    sl_test_response_free(r);
    r = sl_test_get(t, "/p?who=nobody");
    assert_int_equal(sl_test_status(r), 404);
    sl_test_response_free(r);
    sl_test_free(t);
}

static void test_binary_text(void **state)
{
    (void)state;
    static const char page[] = "a\0b\r\n\xff\x01\x7f\"\\?<%= 1 %>\r\n\0";
    sl_test *t;
    sl_test_response *r = run_page(page, sizeof(page) - 1, &t);
    static const char want[] = "a\0b\r\n\xff\x01\x7f\"\\?1\r\n\0";
    assert_body(r, want, sizeof(want) - 1);
    sl_test_response_free(r);
    sl_test_free(t);
}

static void test_empty_page(void **state)
{
    (void)state;
    sl_test *t;
    sl_test_response *r = run_page("", 0, &t);
    assert_int_equal(sl_test_status(r), 200);
    assert_int_equal(sl_test_body_len(r), 0);
    sl_test_response_free(r);
    sl_test_free(t);
}

static void test_megabyte_page(void **state)
{
    (void)state;
    size_t n = (size_t)1 << 20;
    char *page = malloc(n + 16);
    assert_non_null(page);
    for (size_t i = 0; i < n; i++) {
        page[i] = (char)(i * 131 % 251);
        if (page[i] == '<')
            page[i] = '.';
    }
    memcpy(page + n, "<%= 9 %>", 8);
    sl_test *t;
    sl_test_response *r = run_page(page, n + 8, &t);
    size_t len;
    const char *body = sl_test_body(r, &len);
    assert_int_equal(len, n + 1);
    assert_memory_equal(body, page, n);
    assert_int_equal(body[n], '9');
    sl_test_response_free(r);
    sl_test_free(t);
    free(page);
}

/* The compiler names page.csp and the code's line for an error in it. */
static void test_line_directives(void **state)
{
    (void)state;
    static const char page[] = "<p>one</p>\n<p>two</p>\n"
                               "<p><% int x = no_such_name; %></p>\n"
                               "<%= also_missing %>\n";
    char so[512], log[512];
    assert_int_not_equal(compile_page(page, sizeof(page) - 1, so, log), 0);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    assert_non_null(strstr(text, "page.csp:3:"));
    assert_non_null(strstr(text, "page.csp:4:"));
    /* The column of the undeclared name is exact (the code is padded). */
    assert_non_null(strstr(text, "page.csp:3:15:"));
}

static void expect_error(const char *src, unsigned long line, unsigned long col, const char *what)
{
    sandlet_buf out;
    sandlet_csp_error err;
    int rc = translate(src, strlen(src), &out, &err);
    sandlet_buf_free(&out);
    if (rc == 0 || err.line != line || err.col != col || !strstr(err.msg, what))
        fprintf(stderr, "page %s: rc %d at %lu:%lu: %s\n", src, rc, err.line, err.col, err.msg);
    assert_int_equal(rc, -1);
    assert_int_equal(err.line, line);
    assert_int_equal(err.col, col);
    assert_non_null(strstr(err.msg, what));
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("ab\n  <%= x", 2, 3, "unclosed '<%=' tag: expected '%>'");
    expect_error("<% x", 1, 1, "unclosed '<%' tag");
    expect_error("\n<%!", 2, 1, "unclosed '<%!' tag");
    expect_error("<%^ x", 1, 1, "unclosed '<%^' tag");
    expect_error("<%== x", 1, 1, "unclosed '<%==' tag");
    expect_error("x<%-- y %>", 1, 2, "unclosed comment: expected '--%>'");
    expect_error("<% a;\n b <% c %>", 2, 4, "inside the '<%' tag opened at 1:1");
    expect_error("<%@ page x %>", 1, 1, "unknown directive 'page'");
    expect_error("<%@ %>", 1, 1, "empty directive");
    expect_error("<%@ include %>", 1, 1, "include without a file");
    expect_error("<%@ include foo.h %>", 1, 1, "expected <file.h>");
    expect_error("<%@ include <a.h> x %>", 1, 1, "nothing after it");
    expect_error("<%@ include <a\nb.h> %>", 1, 1, "invalid character");
    expect_error("<%@ include <> %>", 1, 1, "expected <file.h>");
    expect_error("q <%=  %>", 1, 3, "empty '<%=' tag: expected a C expression");
    expect_error("<%==%>", 1, 1, "empty '<%==' tag");
    /* Refused before reading a byte: the size is checked first. */
    sandlet_buf out;
    sandlet_csp_error err;
    sandlet_buf_init(&out, 0);
    assert_int_equal(sandlet_csp_translate("big.csp", (const uint8_t *)"x",
                                           SANDLET_CSP_MAX_INPUT + 1, &out, &err),
                     -1);
    assert_non_null(strstr(err.msg, "the limit is"));
    sandlet_buf_free(&out);
}

/* Text is never code: markup and C-looking text are written as is. */
static void test_text_is_literal(void **state)
{
    (void)state;
    sandlet_buf out;
    sandlet_csp_error err;
    static const char page[] = "\"); abort(); (\"%> */ #define";
    assert_int_equal(translate(page, sizeof(page) - 1, &out, &err), 0);
    sandlet_buf_put(&out, "", 1);
    assert_non_null(strstr((const char *)out.data,
                           "sl_write(rs, \"\\\"); abort(); (\\\"%> */ #define\", 28);"));
    assert_null(strstr((const char *)out.data, "SL_SERVLET(page) = {.init"));
    assert_non_null(strstr((const char *)out.data, "SL_SERVLET(page) = {.service"));
    sandlet_buf_free(&out);
}

/* The tool: GCC-style diagnostics and exit status 1 for a bad page, the
 * servlet's source in -o for a good one. */
/* A directive's line end is dropped, one and only one (issue 31: a blank
 * line before <!DOCTYPE>), LF or CRLF; the text after it keeps its own. */
static void test_directive_line_end(void **state)
{
    (void)state;
    static const struct {
        const char *page, *body;
    } cases[] = {
        {"<%@ include <string.h> %>\n<!DOCTYPE html>\n<p><%= (int)strlen(\"abc\") %></p>\n",
         "<!DOCTYPE html>\n<p>3</p>\n"},
        {"<%@ include <string.h> %>\r\n<%@ include <stdio.h> %>\r\n<!DOCTYPE html>",
         "<!DOCTYPE html>"},
        {"<%@ include <string.h> %>\n\nX", "\nX"},
        {"<%@ include <string.h> %> X\n", " X\n"},
        {"<%@ include <string.h> %>", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sl_test *t;
        sl_test_response *r = run_page(cases[i].page, strlen(cases[i].page), &t);
        assert_body(r, cases[i].body, strlen(cases[i].body));
        sl_test_free(t);
    }
}

static void test_tool(void **state)
{
    (void)state;
    const char *b = getenv("SANDLET_BUILDDIR");
    char path[600], cmd[2048];
    snprintf(path, sizeof(path), "%s/bad.csp", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("<p>\n  <%= x\n", f);
    assert_int_equal(fclose(f), 0);
    snprintf(cmd, sizeof(cmd), "cd %s && %s/sandlet-csp translate bad.csp -o bad.c 2>bad.log", dir,
             b ? b : ".");
    int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
    snprintf(path, sizeof(path), "%s/bad.log", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    char text[512];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    assert_string_equal(text, "bad.csp:2:3: error: unclosed '<%=' tag: expected '%>'\n");
    snprintf(path, sizeof(path), "%s/bad.c", dir);
    assert_int_not_equal(access(path, F_OK), 0);

    snprintf(path, sizeof(path), "%s/good.csp", dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("<p><%= 1 + 1 %></p>\n", f);
    assert_int_equal(fclose(f), 0);
    snprintf(cmd, sizeof(cmd), "cd %s && %s/sandlet-csp translate good.csp -o good.c", dir,
             b ? b : ".");
    rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    snprintf(path, sizeof(path), "%s/good.c", dir);
    f = fopen(path, "r");
    assert_non_null(f);
    char src[4096];
    n = fread(src, 1, sizeof(src) - 1, f);
    fclose(f);
    src[n] = '\0';
    assert_non_null(strstr(src, "#line 1 \"good.csp\""));
    assert_non_null(strstr(src, "SL_SERVLET(good) = {.service = csp_page_service};"));
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_text_is_literal),
        cmocka_unit_test(test_every_tag_and_type),
        cmocka_unit_test(test_request_and_status),
        cmocka_unit_test(test_binary_text),
        cmocka_unit_test(test_empty_page),
        cmocka_unit_test(test_megabyte_page),
        cmocka_unit_test(test_line_directives),
        cmocka_unit_test(test_directive_line_end),
        cmocka_unit_test(test_tool),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * test_pages.c - the example C Server Pages (the .csp files of examples/site) and the
 * benchmark's fortunes page, each translated with the built sandlet-csp,
 * compiled with the system compiler ($SANDLET_CC, -Werror) against
 * include/, and run under the in-process harness: the table's rows added
 * and removed through its form, the guestbook's hostile input shown as
 * text, the counter counting across requests through the session cookie,
 * and the fortunes page writing the very bytes of the hand-written
 * fortunes servlet.  It must never need a running sandletd (the daemon's
 * own page serving is tested through sandletd elsewhere).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sandlet/test.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/test_pages.XXXXXX";

/* Runs cmd through the shell; its output goes to the test's log. */
static int run(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "failed (%d): %s\n", rc, cmd);
    return rc;
}

/* Translates SRCDIR/page (e.g. "examples/site/table.csp") with the built
 * sandlet-csp and compiles it into DIR/name.so, as sandletd's page
 * compiler will: a servlet shared object that does not link libsandlet. */
static sl_test *load_page(const char *page, const char *name)
{
    const char *src = getenv("SANDLET_SRCDIR"), *build = getenv("SANDLET_BUILDDIR");
    const char *cc = getenv("SANDLET_CC");
    src = src ? src : ".";
    build = build ? build : ".";
    cc = cc && *cc ? cc : "cc";
    char cmd[8192], so[4096];
    int n = snprintf(cmd, sizeof(cmd), "'%s/sandlet-csp' translate '%s/%s' -o '%s/%s.c'", build,
                     src, page, dir, name);
    assert_true(n > 0 && (size_t)n < sizeof(cmd));
    assert_int_equal(run(cmd), 0);
    n = snprintf(cmd, sizeof(cmd),
                 "%s -std=c11 -Wall -Wextra -Werror -O2 -fPIC -shared -I'%s/include' "
                 "-o '%s/%s.so' '%s/%s.c'",
                 cc, src, dir, name, dir, name);
    assert_true(n > 0 && (size_t)n < sizeof(cmd));
    assert_int_equal(run(cmd), 0);
    n = snprintf(so, sizeof(so), "%s/%s.so", dir, name);
    assert_true(n > 0 && (size_t)n < sizeof(so));
    sl_test *t = sl_test_load(so, NULL);
    assert_non_null(t);
    return t;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* ---- table.csp ----------------------------------------------------------- */

static sl_test_response *post(sl_test *t, const char *target, const char *const *form)
{
    sl_test_request *r = sl_test_request_new(t, "POST", target);
    assert_non_null(r);
    for (size_t i = 0; form[i]; i += 2)
        assert_int_equal(sl_test_request_form(r, form[i], form[i + 1]), 0);
    sl_test_response *rs = sl_test_run(r);
    assert_non_null(rs);
    return rs;
}

static void test_table_add_remove(void **state)
{
    (void)state;
    sl_test *t = load_page("examples/site/table.csp", "table");
    sl_test_response *r = sl_test_get(t, "/table.csp");
    assert_int_equal(sl_test_status(r), 200);
    assert_string_equal(sl_test_header(r, "Content-Type"), "text/html; charset=utf-8");
    assert_non_null(sl_test_set_cookie(r, SL_TEST_SESSION_COOKIE, NULL));
    assert_non_null(strstr(sl_test_body_str(r), "The table is empty."));

    static const char *const add1[] = {"action", "add", "text", "first row", NULL};
    static const char *const add2[] = {"action", "add", "text", "<b>bold</b> & \"quoted\"", NULL};
    static const char *const add3[] = {"action", "add", "text", "third", NULL};
    r = post(t, "/table.csp", add1);
    assert_int_equal(sl_test_status(r), 303);
    assert_string_equal(sl_test_header(r, "Location"), "table.csp");
    assert_int_equal(sl_test_status(post(t, "/table.csp", add2)), 303);
    assert_int_equal(sl_test_status(post(t, "/table.csp", add3)), 303);
    assert_string_equal(sl_test_session_str(t, "table.rows"),
                        "first row\n<b>bold</b> & \"quoted\"\nthird");

    r = sl_test_get(t, "/table.csp");
    assert_int_equal(sl_test_status(r), 200);
    const char *body = sl_test_body_str(r);
    assert_null(strstr(body, "The table is empty."));
    assert_non_null(strstr(body, "<td>1</td><td>first row</td>"));
    assert_non_null(
        strstr(body, "<td>2</td><td>&lt;b&gt;bold&lt;/b&gt; &amp; &#34;quoted&#34;</td>"));
    assert_non_null(strstr(body, "<td>3</td><td>third</td>"));
    assert_null(strstr(body, "<b>bold"));
    assert_int_equal(count(body, "value=\"remove\""), 3);

    /* Removing the middle row keeps the others in order. */
    static const char *const rm[] = {
        "action", "remove", "row", "1", "text", "<b>bold</b> & \"quoted\"", NULL};
    assert_int_equal(sl_test_status(post(t, "/table.csp", rm)), 303);
    assert_string_equal(sl_test_session_str(t, "table.rows"), "first row\nthird");
    /* The same form again: row 1 now holds another string. */
    assert_int_equal(sl_test_status(post(t, "/table.csp", rm)), 409);
    static const char *const rm0[] = {"action", "remove", "row", "0", "text", "first row", NULL};
    assert_int_equal(sl_test_status(post(t, "/table.csp", rm0)), 303);
    r = sl_test_get(t, "/table.csp");
    body = sl_test_body_str(r);
    assert_non_null(strstr(body, "<td>1</td><td>third</td>"));
    assert_null(strstr(body, "first row"));
    static const char *const rm_last[] = {"action", "remove", "row", "0", "text", "third", NULL};
    assert_int_equal(sl_test_status(post(t, "/table.csp", rm_last)), 303);
    assert_non_null(strstr(sl_test_body_str(sl_test_get(t, "/table.csp")), "The table is empty."));

    /* Another visitor has a table of their own. */
    assert_int_equal(sl_test_status(post(t, "/table.csp", add1)), 303);
    sl_test_jar_clear(t);
    assert_non_null(strstr(sl_test_body_str(sl_test_get(t, "/table.csp")), "The table is empty."));
    sl_test_free(t);
}

static void test_table_refuses(void **state)
{
    (void)state;
    sl_test *t = load_page("examples/site/table.csp", "table_refuses");
    static const char *const empty[] = {"action", "add", "text", "", NULL};
    static const char *const newline[] = {"action", "add", "text", "a\nb", NULL};
    static const char *const bad_action[] = {"action", "drop", "text", "x", NULL};
    static const char *const bad_row[] = {"action", "remove", "row", "-1", "text", "x", NULL};
    assert_int_equal(sl_test_status(post(t, "/table.csp", empty)), 400);
    assert_int_equal(sl_test_status(post(t, "/table.csp", newline)), 400);
    assert_int_equal(sl_test_status(post(t, "/table.csp", bad_action)), 400);
    assert_int_equal(sl_test_status(post(t, "/table.csp", bad_row)), 409);
    char longer[200];
    memset(longer, 'x', 121);
    longer[121] = '\0';
    const char *const too_long[] = {"action", "add", "text", longer, NULL};
    assert_int_equal(sl_test_status(post(t, "/table.csp", too_long)), 400);
    assert_null(sl_test_session_str(t, "table.rows"));
    /* Twenty rows, then the table is full. */
    for (int i = 0; i < 20; i++) {
        char row[16];
        snprintf(row, sizeof(row), "row %d", i);
        const char *const add[] = {"action", "add", "text", row, NULL};
        assert_int_equal(sl_test_status(post(t, "/table.csp", add)), 303);
    }
    static const char *const one_more[] = {"action", "add", "text", "one more", NULL};
    assert_int_equal(sl_test_status(post(t, "/table.csp", one_more)), 409);
    assert_int_equal(count(sl_test_body_str(sl_test_get(t, "/table.csp")), "value=\"remove\""), 20);
    sl_test_request *r = sl_test_request_new(t, "DELETE", "/table.csp");
    sl_test_response *rs = sl_test_run(r);
    assert_int_equal(sl_test_status(rs), 405);
    assert_string_equal(sl_test_header(rs, "Allow"), "GET, HEAD, POST");
    sl_test_free(t);
}

/* ---- guestbook.csp --------------------------------------------------------- */

static void test_guestbook_escapes(void **state)
{
    (void)state;
    sl_test *t = load_page("examples/site/guestbook.csp", "guestbook");
    sl_test_response *r = sl_test_get(t, "/guestbook.csp");
    assert_int_equal(sl_test_status(r), 200);
    assert_non_null(strstr(sl_test_body_str(r), "Nobody has signed yet."));

    static const char *const hostile[] = {
        "name", "<script>alert(1)</script>", "text",
        "<img src=x onerror=\"alert('x')\"> & <script>document.cookie</script>", NULL};
    r = post(t, "/guestbook.csp", hostile);
    assert_int_equal(sl_test_status(r), 303);
    assert_string_equal(sl_test_header(r, "Location"), "guestbook.csp");
    static const char *const second[] = {"name", "Ada", "text", "Second entry", NULL};
    assert_int_equal(sl_test_status(post(t, "/guestbook.csp", second)), 303);

    r = sl_test_get(t, "/guestbook.csp");
    assert_int_equal(sl_test_status(r), 200);
    const char *body = sl_test_body_str(r);
    /* No tag the visitor sent survives: not one "<script" or "<img" in
     * the page, and the text is there, escaped. */
    assert_null(strstr(body, "<script"));
    assert_null(strstr(body, "<img"));
    assert_non_null(strstr(body, "<strong>&lt;script&gt;alert(1)&lt;/script&gt;</strong>"));
    assert_non_null(strstr(body,
                           "<blockquote>&lt;img src=x onerror=&#34;alert(&#39;x&#39;)&#34;&gt; "
                           "&amp; &lt;script&gt;document.cookie&lt;/script&gt;</blockquote>"));
    /* Newest first; the page's own raw footer is markup. */
    const char *ada = strstr(body, "<strong>Ada</strong>");
    assert_non_null(ada);
    assert_true(ada < strstr(body, "<strong>&lt;script&gt;alert(1)"));
    assert_non_null(strstr(body, "<p><small>Entries are kept in your session only.</small></p>"));
    assert_null(strstr(body, "Nobody has signed yet."));
    sl_test_free(t);
}

static void test_guestbook_bounds(void **state)
{
    (void)state;
    sl_test *t = load_page("examples/site/guestbook.csp", "guestbook_bounds");
    static const char *const no_name[] = {"name", "", "text", "hi", NULL};
    static const char *const tab[] = {"name", "a\tb", "text", "hi", NULL};
    assert_int_equal(sl_test_status(post(t, "/guestbook.csp", no_name)), 400);
    assert_int_equal(sl_test_status(post(t, "/guestbook.csp", tab)), 400);
    assert_null(sl_test_session_str(t, "guestbook.entries"));
    /* Twelve long entries: the newest that fit in the session stay (ten
     * at most), the oldest are dropped, nothing fails. */
    char text[401];
    for (int i = 0; i < 12; i++) {
        memset(text, 'a' + i, 400);
        text[400] = '\0';
        char name[16];
        snprintf(name, sizeof(name), "signer %d", i);
        const char *const form[] = {"name", name, "text", text, NULL};
        assert_int_equal(sl_test_status(post(t, "/guestbook.csp", form)), 303);
    }
    const char *body = sl_test_body_str(sl_test_get(t, "/guestbook.csp"));
    int kept = count(body, "class=\"entry\"");
    assert_true(kept >= 5 && kept <= 10);
    assert_non_null(strstr(body, "<strong>signer 11</strong>"));
    assert_null(strstr(body, "<strong>signer 0</strong>"));
    sl_test_free(t);
}

/* ---- counter.csp ------------------------------------------------------------ */

static void assert_visits(sl_test *t, const char *want)
{
    sl_test_response *r = sl_test_get(t, "/counter.csp");
    assert_int_equal(sl_test_status(r), 200);
    char tag[64];
    snprintf(tag, sizeof(tag), "<strong id=\"visits\">%s</strong>", want);
    if (!strstr(sl_test_body_str(r), tag))
        fprintf(stderr, "want %s in:\n%s\n", tag, sl_test_body_str(r));
    assert_non_null(strstr(sl_test_body_str(r), tag));
}

static void test_counter_counts_with_cookie(void **state)
{
    (void)state;
    sl_test *t = load_page("examples/site/counter.csp", "counter");
    sl_test_response *r = sl_test_get(t, "/counter.csp");
    assert_int_equal(sl_test_status(r), 200);
    const char *id = sl_test_set_cookie(r, SL_TEST_SESSION_COOKIE, NULL);
    assert_non_null(id);
    assert_non_null(strstr(sl_test_body_str(r), "<strong id=\"visits\">1</strong> time "));
    /* The session id is a credential: never on the page. */
    assert_null(strstr(sl_test_body_str(r), id));
    assert_visits(t, "2");
    assert_visits(t, "3");
    assert_string_equal(sl_test_session_str(t, "counter.visits"), "3");

    /* Without the cookie, another session starts at 1; with it back, the
     * first one goes on. */
    char saved[80];
    snprintf(saved, sizeof(saved), "%s", sl_test_session_id(t));
    sl_test_jar_clear(t);
    assert_visits(t, "1");
    assert_int_equal(sl_test_jar_set(t, SL_TEST_SESSION_COOKIE, saved), 0);
    assert_visits(t, "4");

    /* Reset: the session ends, its cookie is deleted, counting restarts. */
    static const char *const reset[] = {"action", "reset", NULL};
    r = post(t, "/counter.csp", reset);
    assert_int_equal(sl_test_status(r), 303);
    assert_string_equal(sl_test_header(r, "Location"), "counter.csp");
    assert_string_equal(sl_test_set_cookie(r, SL_TEST_SESSION_COOKIE, NULL), "");
    assert_null(sl_test_cookie(t, SL_TEST_SESSION_COOKIE));
    assert_visits(t, "1");
    sl_test_free(t);
}

/* ---- fortunes ------------------------------------------------------------------ */

/* TechEmpower's expected page, with sl_html's entities for " and '. */
static const char fortunes_html[] =
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
    "<tr><th>id</th><th>message</th></tr>"
    "<tr><td>11</td><td>&lt;script&gt;alert(&#34;This should not be displayed in a browser alert "
    "box.&#34;);&lt;/script&gt;</td></tr>"
    "<tr><td>4</td><td>A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1</td></tr>"
    "<tr><td>5</td><td>A computer program does what you tell it to do, not what you want it to "
    "do.</td></tr>"
    "<tr><td>2</td><td>A computer scientist is someone who fixes things that aren&#39;t "
    "broken.</td></tr>"
    "<tr><td>8</td><td>A list is only as strong as its weakest link. \xe2\x80\x94 Donald "
    "Knuth</td></tr>"
    "<tr><td>0</td><td>Additional fortune added at request time.</td></tr>"
    "<tr><td>3</td><td>After enough decimal places, nobody gives a damn.</td></tr>"
    "<tr><td>7</td><td>Any program that runs right is obsolete.</td></tr>"
    "<tr><td>10</td><td>Computers make very fast, very accurate mistakes.</td></tr>"
    "<tr><td>6</td><td>Emacs is a nice operating system, but I prefer UNIX. \xe2\x80\x94 Tom "
    "Christaensen</td></tr>"
    "<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>"
    "<tr><td>1</td><td>fortune: No such file or directory</td></tr>"
    "<tr><td>12</td><td>\xe3\x83\x95\xe3\x83\xac\xe3\x83\xbc\xe3\x83\xa0\xe3\x83\xaf\xe3\x83\xbc"
    "\xe3\x82\xaf\xe3\x81\xae\xe3\x83\x99\xe3\x83\xb3\xe3\x83\x81\xe3\x83\x9e\xe3\x83\xbc"
    "\xe3\x82\xaf</td></tr>"
    "</table></body></html>\n";

static void test_fortunes_page_matches_servlet(void **state)
{
    (void)state;
    sl_test *page = load_page("bench/fortunes.csp", "fortunes");
    const char *b = getenv("SANDLET_BUILDDIR");
    char so[4096];
    snprintf(so, sizeof(so), "%s/bench/.libs/fortunes_servlet.so", b ? b : ".");
    sl_test *servlet = sl_test_load(so, NULL);
    assert_non_null(servlet);
    /* Twice each: nothing carries over from one request to the next. */
    for (int i = 0; i < 2; i++) {
        sl_test_response *p = sl_test_get(page, "/fortunes.csp");
        sl_test_response *s = sl_test_get(servlet, "/fortunes");
        assert_int_equal(sl_test_status(p), 200);
        assert_int_equal(sl_test_status(s), 200);
        assert_string_equal(sl_test_header(p, "Content-Type"), sl_test_header(s, "Content-Type"));
        size_t plen, slen;
        const void *pb = sl_test_body(p, &plen), *sb = sl_test_body(s, &slen);
        assert_int_equal(slen, sizeof(fortunes_html) - 1);
        assert_memory_equal(sb, fortunes_html, slen);
        assert_int_equal(plen, slen);
        assert_memory_equal(pb, sb, slen);
    }
    sl_test_free(servlet);
    sl_test_free(page);
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
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_add_remove),
        cmocka_unit_test(test_table_refuses),
        cmocka_unit_test(test_guestbook_escapes),
        cmocka_unit_test(test_guestbook_bounds),
        cmocka_unit_test(test_counter_counts_with_cookie),
        cmocka_unit_test(test_fortunes_page_matches_servlet),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

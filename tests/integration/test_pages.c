/*
 * test_pages.c - C Server Pages through sandletd: the first request
 * compiles and serves, an edit is served by the next request, compile
 * errors in development and production, one compile for many first
 * requests, the source never served under any spelling, a page in a
 * sandbox of its own, precompiled pages with the compiler off, a crashing
 * page, and a page that includes a file outside the fence.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Longer than the acceptor's RECHECK_MS: the next request asks again. */
#define SETTLE_MS 150

static char root[64], cache[64];

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Writes a page through a temporary and rename, as editors do. */
static void put(const char *name, const char *text)
{
    char path[256], tmp[272];
    snprintf(path, sizeof(path), "%s/%s", root, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
    chmod(tmp, 0644);
    assert_int_equal(rename(tmp, path), 0);
}

static void mkdirs(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", root, name);
    assert_int_equal(mkdir(path, 0755), 0);
}

static int setup(void **state)
{
    (void)state;
    th_become_subreaper();
    signal(SIGPIPE, SIG_IGN);
    snprintf(root, sizeof(root), "/tmp/sandlet-pages-XXXXXX");
    snprintf(cache, sizeof(cache), "/tmp/sandlet-pcache-XXXXXX");
    if (!mkdtemp(root) || !mkdtemp(cache))
        return -1;
    chmod(root, 0755);
    chmod(cache, 0755);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", root, cache);
    return system(cmd) == 0 ? 0 : -1;
}

static void start(th_daemon *d, const char *extra)
{
    char conf[2048];
    snprintf(conf, sizeof(conf), "docroot \"%s\";\npage-cache \"%s\";\n%s", root, cache, extra);
    assert_int_equal(th_start(d, conf, false), 0);
}

static void get(const th_daemon *d, const char *target, th_response *r)
{
    assert_int_equal(th_request(d->port, "GET", target, NULL, NULL, 0, r), 0);
}

/* How many times needle is in the daemon's log. */
static int log_count(const th_daemon *d, const char *needle)
{
    size_t len;
    char *log = th_slurp(d->log, &len);
    int n = 0;
    for (char *p = log; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(log);
    return n;
}

static const char hello[] = "<%! static int visits; %>\n"
                            "<p>Hello <%= sl_param(rq, \"name\", \"you\") %>, visit <%= ++visits "
                            "%></p>\n";

static void test_first_request_and_edit(void **state)
{
    (void)state;
    put("hello.csp", hello);
    th_daemon d;
    start(&d, "pages / { }\n");
    th_response r;
    get(&d, "/hello.csp?name=%3Cb%3E", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "Hello &lt;b&gt;, visit 1"));
    char type[128];
    assert_true(th_header(&r, "Content-Type", type, sizeof(type)));
    assert_non_null(strstr(type, "text/html"));
    th_response_free(&r);
    assert_int_equal(log_count(&d, "page /hello.csp compiled"), 1);
    /* Edits, each served by the first request after it. */
    for (int i = 0; i < 3; i++) {
        char text[256];
        snprintf(text, sizeof(text), "<p>edit <%%= %d %%></p>\n", i);
        put("hello.csp", text);
        sleep_ms(SETTLE_MS);
        get(&d, "/hello.csp", &r);
        assert_int_equal(r.status, 200);
        char want[32];
        snprintf(want, sizeof(want), "edit %d", i);
        if (!strstr(r.body, want))
            fail_msg("edit %d not served: %s", i, r.body);
        th_response_free(&r);
    }
    /* An unchanged page is not compiled again. */
    sleep_ms(SETTLE_MS);
    get(&d, "/hello.csp", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(log_count(&d, "page /hello.csp compiled"), 4);
    assert_int_equal(th_stop(&d), 0);
}

static const char broken[] = "<p>before</p>\n"
                             "<% int fine = 1; (void)fine; %>\n"
                             "<% this_is_not_c <script>; %>\n";

static void test_compile_errors(void **state)
{
    (void)state;
    put("bad.csp", broken);
    th_daemon d;
    start(&d, "pages / { }\ndevelopment on;\n");
    th_response r;
    get(&d, "/bad.csp", &r);
    assert_int_equal(r.status, 500);
    /* The compiler's words, with the page's line, escaped. */
    if (!strstr(r.body, "bad.csp:3:"))
        fail_msg("no bad.csp:3: in %s", r.body);
    assert_null(strstr(r.body, "<script>"));
    th_response_free(&r);
    assert_int_equal(th_stop(&d), 0);

    /* Production: a plain 500, the log names the page and the line; the
     * failed page is not compiled again until it changes. */
    put("bad2.csp", broken);
    start(&d, "pages / { }\n");
    get(&d, "/bad2.csp", &r);
    assert_int_equal(r.status, 500);
    assert_null(strstr(r.body, "bad2.csp:3"));
    assert_null(strstr(r.body, "this_is_not_c"));
    th_response_free(&r);
    assert_true(th_log_wait(&d, "page /bad2.csp: compile failed", 2000));
    assert_true(th_log_contains(&d, "bad2.csp:3:"));
    sleep_ms(SETTLE_MS);
    get(&d, "/bad2.csp", &r);
    assert_int_equal(r.status, 500);
    th_response_free(&r);
    assert_int_equal(log_count(&d, "page /bad2.csp: compile failed"), 1);
    /* After a restart (issue 31): the start names the failed page, and
     * the first request for it too, then no more for a minute. */
    assert_int_equal(th_stop(&d), 0);
    start(&d, "pages / { }\n");
    assert_true(th_log_wait(&d,
                            "page /bad2.csp: its last compile, before this start, failed: "
                            "bad2.csp:3:",
                            2000));
    assert_int_equal(log_count(&d, "page /bad2.csp answers 500"), 0);
    for (int i = 0; i < 3; i++) {
        get(&d, "/bad2.csp", &r);
        assert_int_equal(r.status, 500);
        th_response_free(&r);
        sleep_ms(SETTLE_MS);
    }
    assert_true(th_log_contains(&d, "page /bad2.csp answers 500: its last compile failed: "
                                    "bad2.csp:3:"));
    assert_int_equal(log_count(&d, "page /bad2.csp answers 500"), 1);
    assert_int_equal(log_count(&d, "page /bad2.csp: compile failed"), 0);
    put("bad2.csp", "<p>fixed</p>\n");
    sleep_ms(SETTLE_MS);
    get(&d, "/bad2.csp", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "fixed"));
    th_response_free(&r);
    assert_int_equal(th_stop(&d), 0);
}

/* Twenty clients ask for a page nobody compiled yet: one compile, twenty
 * answers. */
static void test_one_compile_for_many(void **state)
{
    (void)state;
    put("many.csp", "<p>many <%= 6 * 7 %></p>\n");
    th_daemon d;
    start(&d, "pages / { }\n");
    enum { N = 20 };
    th_conn *c[N];
    for (int i = 0; i < N; i++) {
        c[i] = th_connect(d.port, false);
        assert_non_null(c[i]);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(th_send_str(c[i], "GET /many.csp HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    for (int i = 0; i < N; i++) {
        th_response r;
        assert_int_equal(th_read(c[i], &r, false), 0);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "many 42"));
        th_response_free(&r);
        th_close(c[i]);
    }
    assert_int_equal(log_count(&d, "page /many.csp compiled"), 1);
    assert_int_equal(th_stop(&d), 0);
}

/* No spelling of a page's name sends its source, with pages on or off. */
static void check_never_source(const th_daemon *d, bool pages_on)
{
    static const char *const targets[] = {
        "/src.csp",   "/src%2ecsp",     "/src%2Ecsp",      "/src.csp.", "//src.csp",
        "/./src.csp", "/x/../src.csp",  "/Upper.CSP",      "/link.txt", "/src.csp%00",
        "/src.csp/",  "/sub/inner.csp", "/sub//inner.csp", "/SRC.csp",
    };
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
        for (int head = 0; head < 2; head++) {
            th_response r;
            assert_int_equal(
                th_request(d->port, head ? "HEAD" : "GET", targets[i], NULL, NULL, 0, &r), 0);
            if (r.body && (strstr(r.body, "SECRET-SOURCE") || strstr(r.body, "<%")))
                fail_msg("%s %s sent the page's source: %s", head ? "HEAD" : "GET", targets[i],
                         r.body);
            if (!pages_on && r.status == 200)
                fail_msg("%s answered 200 with pages off", targets[i]);
            th_response_free(&r);
        }
    }
}

static void test_source_never_served(void **state)
{
    (void)state;
    static const char src[] = "<%-- SECRET-SOURCE --%><p>rendered</p>\n";
    put("src.csp", src);
    put("Upper.CSP", src);
    mkdirs("sub");
    put("sub/inner.csp", src);
    char link[128];
    snprintf(link, sizeof(link), "%s/link.txt", root);
    assert_int_equal(symlink("src.csp", link), 0);
    th_daemon d;
    start(&d, "pages / { }\n");
    check_never_source(&d, true);
    /* Served as pages, under the spellings that name them. */
    static const char *const pages[] = {"/src.csp", "/src%2ecsp", "/Upper.CSP", "/sub/inner.csp"};
    for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
        th_response r;
        get(&d, pages[i], &r);
        if (r.status != 200 || !strstr(r.body, "rendered"))
            fail_msg("%s: %d %s", pages[i], r.status, r.body);
        th_response_free(&r);
    }
    assert_int_equal(th_stop(&d), 0);
    /* Pages off: still never the source. */
    start(&d, "");
    check_never_source(&d, false);
    assert_int_equal(th_stop(&d), 0);
    /* A page no pages block covers is no static file either. */
    start(&d, "pages /sub/ { }\n");
    th_response r;
    get(&d, "/src.csp", &r);
    assert_int_equal(r.status, 404);
    th_response_free(&r);
    get(&d, "/sub/inner.csp", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(th_stop(&d), 0);
}

/* The configuration decides a page's sandbox: the cookie name tells which
 * sandbox ran it. */
static void test_page_sandbox(void **state)
{
    (void)state;
    mkdirs("admin");
    static const char who[] = "<p>sandbox <%= sl_session_cookie_name() %></p>\n";
    put("who.csp", who);
    put("admin/who.csp", who);
    th_daemon d;
    start(&d, "pages / { }\npages /admin/ { sandbox admin; }\nsandbox admin { workers 1; }\n");
    th_response r;
    get(&d, "/who.csp", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "sandbox SLSESSION_pages"));
    th_response_free(&r);
    get(&d, "/admin/who.csp", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "sandbox SLSESSION_admin"));
    th_response_free(&r);
    assert_int_equal(th_stop(&d), 0);
}

/* A restart recompiles nothing up to date; with the compiler off, the
 * compiled pages are served and a new one says how to compile it. */
static void test_precompiled(void **state)
{
    (void)state;
    put("pre.csp", "<p>precompiled <%= 1 + 1 %></p>\n");
    th_daemon d;
    start(&d, "pages / { }\n");
    th_response r;
    get(&d, "/pre.csp", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(th_stop(&d), 0);

    start(&d, "pages / { }\n");
    get(&d, "/pre.csp", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "precompiled 2"));
    th_response_free(&r);
    assert_int_equal(log_count(&d, "page /pre.csp compiled"), 0);
    /* Loaded by the first workers: its first request replaced none. */
    assert_true(th_log_contains(&d, "1 compiled pages are up to date"));
    assert_int_equal(log_count(&d, "was replaced"), 0);
    assert_int_equal(th_stop(&d), 0);

    put("fresh.csp", "<p>fresh</p>\n");
    start(&d, "pages / { }\npage-compiler off;\n");
    get(&d, "/pre.csp", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "precompiled 2"));
    th_response_free(&r);
    get(&d, "/fresh.csp", &r);
    assert_int_equal(r.status, 500);
    th_response_free(&r);
    assert_true(th_log_wait(&d, "sandlet-csp compile", 2000));
    assert_int_equal(th_stop(&d), 0);

    /* No compiler installed: the same, and the log says so at start. */
    start(&d, "pages / { }\npage-compiler /nonexistent/gcc;\n");
    assert_true(th_log_wait(&d, "is not installed", 2000));
    get(&d, "/pre.csp", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    get(&d, "/fresh.csp", &r);
    assert_int_equal(r.status, 500);
    th_response_free(&r);
    assert_true(
        th_log_wait(&d, "the page compiler is not installed; run 'sandlet-csp compile", 2000));
    assert_int_equal(th_stop(&d), 0);
}

/* Text is written as is: a page of 1 MiB of any bytes (NUL, CR, LF,
 * high bytes) comes back byte for byte. */
static void test_big_binary_page(void **state)
{
    (void)state;
    enum { BIG = 1024 * 1024 };
    unsigned char *text = malloc(BIG);
    assert_non_null(text);
    for (size_t i = 0; i < BIG; i++) {
        text[i] = (unsigned char)((i * 2654435761u) >> 11);
        if (i > 0 && text[i - 1] == '<' && text[i] == '%')
            text[i] = '!'; /* no tag opener in the text */
    }
    char path[256];
    snprintf(path, sizeof(path), "%s/big.csp", root);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, BIG, f), BIG);
    fclose(f);
    chmod(path, 0644);
    th_daemon d;
    start(&d, "pages / { }\n");
    th_response r;
    get(&d, "/big.csp", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, BIG);
    assert_memory_equal(r.body, text, BIG);
    th_response_free(&r);
    free(text);
    assert_int_equal(th_stop(&d), 0);
}

/* A page's body streams like a servlet's (issue 20): 8 MiB reach the
 * page through sl_body_read, the first request while the page is still
 * being compiled (the request waits with a full window meanwhile). */
static void test_streamed_body_page(void **state)
{
    (void)state;
    put("up.csp", "<% char buf[65536]; ssize_t k; unsigned long long n = 0; "
                  "unsigned h = 2166136261u;\n"
                  "while ((k = sl_body_read(rq, buf, sizeof(buf))) > 0) {\n"
                  "    for (ssize_t i = 0; i < k; i++)\n"
                  "        h = (h ^ (unsigned char)buf[i]) * 16777619u;\n"
                  "    n += (unsigned long long)k;\n"
                  "}\n"
                  "sl_printf(rs, \"got %llu %u %d\\n\", n, h, (int)k); %>");
    enum { BIG = 8 * 1024 * 1024 };
    unsigned char *body = malloc(BIG);
    assert_non_null(body);
    unsigned h = 2166136261u;
    for (size_t i = 0; i < BIG; i++) {
        body[i] = (unsigned char)((i * 2654435761u) >> 13);
        h = (h ^ body[i]) * 16777619u;
    }
    char want[64];
    snprintf(want, sizeof(want), "got %d %u 0\n", BIG, h);
    th_daemon d;
    start(&d, "max-body-size 64m;\npages / { }\n");
    for (int i = 0; i < 2; i++) {
        th_response r;
        assert_int_equal(th_request(d.port, "POST", "/up.csp", NULL, body, BIG, &r), 0);
        assert_int_equal(r.status, 200);
        if (!strstr(r.body, want))
            fail_msg("expected \"%s\" in %s", want, r.body);
        th_response_free(&r);
    }
    free(body);
    assert_int_equal(th_stop(&d), 0);
}

/* A page that crashes costs its request a 502; its worker comes back. */
static void test_crashing_page(void **state)
{
    (void)state;
    put("crash.csp", "<% if (sl_param(rq, \"crash\", NULL)) *(volatile int *)0 = 1; %>"
                     "<p>alive</p>\n");
    th_daemon d;
    start(&d, "pages / { }\n");
    th_response r;
    get(&d, "/crash.csp", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    get(&d, "/crash.csp?crash=1", &r);
    assert_int_equal(r.status, 502);
    th_response_free(&r);
    for (int i = 0; i < 3; i++) {
        get(&d, "/crash.csp", &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "alive"));
        th_response_free(&r);
    }
    assert_int_equal(th_stop(&d), 0);
}

/* A page's crash names its .csp file and line in the error log: a NULL
 * write (SIGSEGV), a division by zero (SIGFPE, x86 only: ARM does not
 * trap it), and abort() (SIGABRT, raised inside libc: the report names
 * the line that called it). */
static void test_crash_names_line(void **state)
{
    (void)state;
    put("crashline.csp", "<%\n"
                         "if (sl_param(rq, \"crash\", NULL))\n"
                         "    *(volatile int *)0 = 1;\n"
                         "%><p>alive</p>\n");
    put("divide.csp", "<%\n"
                      "volatile int zero = sl_param(rq, \"crash\", NULL) ? 0 : 1;\n"
                      "sl_printf(rs, \"%d\", 7 / zero);\n"
                      "%>\n");
    put("aborts.csp", "<%@ include <stdlib.h> %><%\n"
                      "if (sl_param(rq, \"crash\", NULL))\n"
                      "    abort();\n"
                      "%><p>alive</p>\n");
    put("deep.csp",
        "<%! static int deep(volatile int n)\n"
        "{\n"
        "    volatile char frame[512]; frame[0] = (char)n; return deep(n + 1) + frame[0];\n"
        "} %>\n"
        "<% if (sl_param(rq, \"crash\", NULL)) sl_printf(rs, \"%d\", deep(0)); %>\n");
    th_daemon d;
    start(&d, "pages / { }\n");
    th_response r;
    /* A stack overflow: the report runs on its own stack. */
    get(&d, "/deep.csp?crash=1", &r);
    assert_int_equal(r.status, 502);
    th_response_free(&r);
    assert_true(th_log_wait(&d, "page deep.csp:", 3000));
    /* At line 1, 2 or 3 (where deep()'s frame is pushed), never none. */
    assert_false(th_log_contains(&d, "page deep.csp: crashed"));
    assert_true(th_log_contains(&d, "crashed (SIGSEGV, address 0x"));
    get(&d, "/crashline.csp?crash=1", &r);
    assert_int_equal(r.status, 502);
    th_response_free(&r);
    assert_true(th_log_wait(&d, "page crashline.csp:3: crashed (SIG", 3000));
#if defined(__x86_64__)
    get(&d, "/divide.csp?crash=1", &r);
    assert_int_equal(r.status, 502);
    th_response_free(&r);
    assert_true(th_log_wait(&d, "page divide.csp:3: crashed (SIGFPE)", 3000));
#endif
    get(&d, "/aborts.csp?crash=1", &r);
    assert_int_equal(r.status, 502);
    th_response_free(&r);
    assert_true(th_log_wait(&d, "page aborts.csp:3: crashed (SIGABRT)", 3000));
    /* The worker died of the signal all the same, and came back. */
    get(&d, "/crashline.csp", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(th_stop(&d), 0);
}

/* A page that includes a file outside the compiler's fence fails to
 * compile, and nothing of the file reaches the answer or the log. */
static void test_include_outside(void **state)
{
    (void)state;
    if (th_confinement_off("the compiler's Landlock fence"))
        return;
    char secret[128];
    snprintf(secret, sizeof(secret), "%s.secret", cache);
    FILE *f = fopen(secret, "w");
    assert_non_null(f);
    fputs("int leaked_marker_QX7 = 1;\nTOPSECRET-LINE-QX7\n", f);
    fclose(f);
    chmod(secret, 0644);
    char page[256];
    snprintf(page, sizeof(page), "<%%@ include \"%s\" %%>\n<p>x</p>\n", secret);
    put("steal.csp", page);
    put("shadow.csp", "<%@ include \"/etc/shadow\" %>\n<p>x</p>\n");
    th_daemon d;
    start(&d, "pages / { }\ndevelopment on;\n");
    th_response r;
    get(&d, "/steal.csp", &r);
    assert_int_equal(r.status, 500);
    assert_null(strstr(r.body, "QX7"));
    th_response_free(&r);
    get(&d, "/shadow.csp", &r);
    assert_int_equal(r.status, 500);
    assert_null(strstr(r.body, "root:"));
    th_response_free(&r);
    assert_true(th_log_wait(&d, "page /shadow.csp: compile failed", 2000));
    assert_false(th_log_contains(&d, "QX7"));
    assert_false(th_log_contains(&d, "root:"));
    assert_int_equal(th_stop(&d), 0);
    unlink(secret);
}

/* A compile that never ends is cut off, and while it runs other pages
 * are served: the second client is answered while the first still waits. */
static void test_compile_blocks_nothing(void **state)
{
    (void)state;
    put("quick.csp", "<p>quick</p>\n");
    /* Seconds of optimising in moderate memory: cut off by the wall clock
     * (a runaway expansion would hit the memory limit first, at once). */
    put("endless.csp", "<%! #define A(x) x x x x\n#define B(x) A(A(A(x)))\n"
                       "static volatile int v;\nstatic int f(void) { int n = 0; "
                       "B(B(A(if (v) n += v * 3; else n ^= v;))) return n; } %>"
                       "<p><%= f() %></p>\n");
    th_daemon d;
    start(&d, "pages / { }\ndevelopment on;\npage-compile-timeout 3000;\n");
    th_response r;
    get(&d, "/quick.csp", &r); /* compiled before the endless one starts */
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    th_conn *slow = th_connect(d.port, false);
    assert_non_null(slow);
    assert_int_equal(th_send_str(slow, "GET /endless.csp HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    sleep_ms(SETTLE_MS);
    get(&d, "/quick.csp", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "quick"));
    th_response_free(&r);
    /* Answered while the endless compile still ran. */
    assert_true(th_log_contains(&d, "page /quick.csp compiled"));
    if (th_log_contains(&d, "page /endless.csp: compile failed")) {
        size_t len;
        char *log = th_slurp(d.log, &len);
        fail_msg("the endless compile ended early: %s", log ? log : "");
    }
    assert_int_equal(th_read(slow, &r, false), 0);
    assert_int_equal(r.status, 500);
    if (!strstr(r.body, "endless.csp"))
        fail_msg("no diagnostics for the endless page: %s", r.body);
    th_response_free(&r);
    th_close(slow);
    assert_true(th_log_wait(&d, "page /endless.csp: compile failed", 2000));
    assert_int_equal(th_stop(&d), 0);
}

/* A new version fails no request: one in flight on the old code finishes
 * on it, requests meanwhile all succeed, later ones get the new code. */
static void test_swap_fails_nothing(void **state)
{
    (void)state;
    static const char v[] = "<%%@ include <unistd.h> %%>"
                            "<%% if (sl_param(rq, \"slow\", NULL)) usleep(400000); %%>"
                            "<p>version <%%= %d %%></p>\n";
    char text[256];
    snprintf(text, sizeof(text), v, 1);
    put("swap.csp", text);
    th_daemon d;
    start(&d, "pages / { }\n");
    th_response r;
    get(&d, "/swap.csp", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    th_conn *inflight = th_connect(d.port, false);
    assert_non_null(inflight);
    assert_int_equal(th_send_str(inflight, "GET /swap.csp?slow=1 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    sleep_ms(50);
    snprintf(text, sizeof(text), v, 2);
    put("swap.csp", text);
    sleep_ms(SETTLE_MS);
    get(&d, "/swap.csp", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "version 2"));
    th_response_free(&r);
    assert_int_equal(th_read(inflight, &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "version 1"));
    th_response_free(&r);
    th_close(inflight);

    /* A client requesting all along while the page changes five times. */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        int bad = 0, n = 0;
        unsigned long long end = th_now_ms() + 2500;
        while (th_now_ms() < end) {
            th_response cr;
            if (th_request(d.port, "GET", "/swap.csp", NULL, NULL, 0, &cr) != 0 || cr.status != 200)
                bad++;
            else
                th_response_free(&cr);
            n++;
        }
        int out[2] = {bad, n};
        _exit(write(fds[1], out, sizeof(out)) == sizeof(out) ? 0 : 1);
    }
    close(fds[1]);
    for (int i = 3; i < 8; i++) {
        sleep_ms(300);
        snprintf(text, sizeof(text), v, i);
        put("swap.csp", text);
    }
    int out[2] = {-1, -1};
    assert_int_equal(read(fds[0], out, sizeof(out)), (ssize_t)sizeof(out));
    close(fds[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (out[0] != 0)
        fail_msg("%d of %d requests failed while the page changed", out[0], out[1]);
    assert_true(out[1] > 20);
    sleep_ms(SETTLE_MS);
    get(&d, "/swap.csp", &r);
    assert_non_null(strstr(r.body, "version 7"));
    th_response_free(&r);
    assert_int_equal(th_stop(&d), 0);
}

/* A symlinked docroot switched to another release (a deploy) is seen at
 * the next start: until then pages and files come from the release that
 * was current at start, and nothing is compiled over and over. */
static void test_docroot_switch(void **state)
{
    (void)state;
    mkdirs("rel1");
    mkdirs("rel2");
    put("rel1/p.csp", "<p>release 1</p>\n");
    put("rel2/p.csp", "<p>release 2</p>\n");
    char cur[128], conf[512];
    snprintf(cur, sizeof(cur), "%s/cur", root);
    assert_int_equal(symlink("rel1", cur), 0);
    snprintf(conf, sizeof(conf), "docroot \"%s\";\npage-cache \"%s\";\npages / { }\n", cur, cache);
    th_daemon d;
    assert_int_equal(th_start(&d, conf, false), 0);
    th_response r;
    get(&d, "/p.csp", &r);
    assert_non_null(strstr(r.body, "release 1"));
    th_response_free(&r);
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s/cur.new", root);
    assert_int_equal(symlink("rel2", tmp), 0);
    assert_int_equal(rename(tmp, cur), 0);
    put("rel1/p.csp", "<p>release 1, edited</p>\n");
    for (int i = 0; i < 5; i++) {
        sleep_ms(SETTLE_MS);
        get(&d, "/p.csp", &r);
        assert_int_equal(r.status, 200);
        if (!strstr(r.body, "release 1, edited"))
            fail_msg("request %d after the switch: %s", i, r.body);
        th_response_free(&r);
    }
    assert_int_equal(log_count(&d, "page /p.csp compiled"), 2);
    assert_int_equal(th_stop(&d), 0);
}

/* A page whose init section crashes its workers is left out of them: it
 * answers 500, and the sandbox's other pages keep being served. */
static void test_init_crash_isolated(void **state)
{
    (void)state;
    put("fine.csp", "<p>fine</p>\n");
    put("boom.csp", "<%^ { volatile int *p = 0; *p = 1; } %><p>boom</p>\n");
    th_daemon d;
    start(&d, "pages / { }\ndevelopment on;\n");
    th_response r;
    get(&d, "/fine.csp", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    get(&d, "/boom.csp", &r);
    assert_int_equal(r.status, 500);
    th_response_free(&r);
    assert_true(
        th_log_wait(&d, "page /boom.csp: workers of sandbox 'pages' died while loading it", 5000));
    for (int i = 0; i < 3; i++) {
        get(&d, "/fine.csp", &r);
        assert_int_equal(r.status, 200);
        th_response_free(&r);
        sleep_ms(SETTLE_MS);
        get(&d, "/boom.csp", &r);
        assert_int_equal(r.status, 500);
        if (!strstr(r.body, "init section"))
            fail_msg("no explanation in the development page: %s", r.body);
        th_response_free(&r);
    }
    put("boom.csp", "<p>mended</p>\n");
    sleep_ms(SETTLE_MS);
    get(&d, "/boom.csp", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "mended"));
    th_response_free(&r);
    assert_int_equal(th_stop(&d), 0);
}

static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* Editing a page many times grows neither the acceptor nor the
 * supervisor (workers are replaced, so they cannot grow either). */
static void test_edits_bounded(void **state)
{
    (void)state;
    put("grow.csp", "<p>grow 0</p>\n");
    th_daemon d;
    start(&d, "pages / { }\n");
    pid_t kids[8];
    int nk = 0;
    for (int i = 0; i < 100 && nk < 1; i++, sleep_ms(20))
        nk = th_children_of(d.pid, kids, 8);
    assert_true(nk >= 1);
    pid_t supervisor = kids[0];
    long acc0 = 0, sup0 = 0;
    for (int i = 1; i <= 40; i++) {
        char text[64], want[32];
        snprintf(text, sizeof(text), "<p>grow <%%= %d %%></p>\n", i);
        put("grow.csp", text);
        sleep_ms(110);
        th_response r;
        get(&d, "/grow.csp", &r);
        snprintf(want, sizeof(want), "grow %d", i);
        if (r.status != 200 || !strstr(r.body, want))
            fail_msg("edit %d: %d %s", i, r.status, r.body);
        th_response_free(&r);
        if (i == 10) {
            acc0 = rss_kib(d.pid);
            sup0 = rss_kib(supervisor);
        }
    }
    long acc1 = rss_kib(d.pid), sup1 = rss_kib(supervisor);
    /* A sanitizer build keeps freed memory in quarantine: its sizes say
     * nothing about leaks (ASan's own leak check does). */
    bool sanitized = th_confinement_off("the memory bound after edits (a sanitizer build)");
    if (!sanitized && (acc1 - acc0 > 1024 || sup1 - sup0 > 1024))
        fail_msg("after 30 edits the acceptor went %ld -> %ld KiB, the supervisor %ld -> %ld KiB",
                 acc0, acc1, sup0, sup1);
    assert_int_equal(th_stop(&d), 0);
}

int main(void)
{
    th_prepare();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_first_request_and_edit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compile_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_compile_for_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_source_never_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_page_sandbox, setup, teardown),
        cmocka_unit_test_setup_teardown(test_precompiled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_binary_page, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streamed_body_page, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crashing_page, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_names_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_include_outside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compile_blocks_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_swap_fails_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edits_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_docroot_switch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_init_crash_isolated, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

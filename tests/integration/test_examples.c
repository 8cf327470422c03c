/*
 * test_examples.c - the example applications through the real daemon,
 * started with the example configuration the build writes
 * (examples/sandlet.conf): its listen lines are replaced by the harness's
 * ephemeral port and the board's message directory by a fresh temporary
 * one, everything else (sandboxes, Landlock paths, params) is used as
 * shipped.  Checks what only the daemon can show: the cart's session
 * cookie working across requests served by two workers, the board
 * writing files from inside its confined sandbox, a PNG arriving intact
 * over HTTP, libcalc found by a confined worker, and the example C Server
 * Pages compiled on their first request and run in the pages sandbox
 * (their compiled copies go to a fresh temporary page cache).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../examples/libcall/calc.h"
#include "harness.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static th_daemon d;
static char msgdir[64], cachedir[64];

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n < sizeof(buf) - 1 ? buf : NULL;
}

/* The example config without listen lines, with the board's directory
 * and the page cache (every occurrence of the build tree's ones) moved to
 * msgdir and cachedir. */
static char *example_conf(void)
{
    const char *conf = read_file(th_build_path("examples/sandlet.conf"));
    const char *builddir = getenv("SANDLET_BUILDDIR");
    if (!conf || !builddir)
        return NULL;
    char old[2][4096];
    const char *repl[2] = {msgdir, cachedir};
    snprintf(old[0], sizeof(old[0]), "%s/examples/board/messages", builddir);
    snprintf(old[1], sizeof(old[1]), "%s/examples/page-cache", builddir);
    size_t cap = strlen(conf) * 2 + 4096, n = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    for (const char *line = conf; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line + 1) : strlen(line);
        if (strncmp(line, "listen ", 7) != 0) {
            for (size_t i = 0; i < len;) {
                size_t k = 0;
                while (k < 2 && strncmp(line + i, old[k], strlen(old[k])) != 0)
                    k++;
                if (k < 2) {
                    n += (size_t)snprintf(out + n, cap - n, "%s", repl[k]);
                    i += strlen(old[k]);
                } else {
                    out[n++] = line[i++];
                }
            }
        }
        line += len;
    }
    out[n] = '\0';
    return out;
}

static int group_setup(void **state)
{
    (void)state;
    th_prepare();
    /* Workers of a daemon started as root run as nobody. */
    if (th_tempdir(msgdir, sizeof(msgdir), "board", 01777) < 0 ||
        th_tempdir(cachedir, sizeof(cachedir), "pagecache", 0755) < 0)
        return -1;
    char *conf = example_conf();
    if (!conf || !strstr(conf, msgdir) || !strstr(conf, cachedir) || !strstr(conf, "servlet /cart"))
        return -1;
    int rc = th_start(&d, conf, false);
    free(conf);
    return rc;
}

static int group_teardown(void **state)
{
    (void)state;
    int rc = th_stop(&d);
    DIR *dir = opendir(msgdir);
    struct dirent *e;
    char path[512];
    while (dir && (e = readdir(dir)) != NULL) {
        snprintf(path, sizeof(path), "%s/%s", msgdir, e->d_name);
        if (e->d_name[0] != '.' || strncmp(e->d_name, ".new", 4) == 0)
            unlink(path);
    }
    if (dir)
        closedir(dir);
    rmdir(msgdir);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cachedir);
    if (system(cmd) != 0)
        rc = -1;
    return rc == 0 ? 0 : -1;
}

/* "Cookie: SLSESSION_<sandbox>=...\r\n" from a response's Set-Cookie: the
 * sandbox's own cookie name and a 64-hex-digit token (id and MAC). */
static void session_cookie(const th_response *r, char *out, size_t cap)
{
    char sc[256];
    assert_true(th_header(r, "Set-Cookie", sc, sizeof(sc)));
    assert_memory_equal(sc, "SLSESSION_", 10);
    size_t nlen = strcspn(sc, "=");
    assert_true(nlen > 10 && sc[nlen] == '=');
    size_t idlen = strcspn(sc + nlen + 1, ";");
    assert_int_equal(idlen, 64);
    snprintf(out, cap, "Cookie: %.*s\r\n", (int)(nlen + 1 + idlen), sc);
}

static int post(const char *target, const char *cookie, const char *form, th_response *r)
{
    char headers[512];
    snprintf(headers, sizeof(headers), "%sContent-Type: application/x-www-form-urlencoded\r\n",
             cookie ? cookie : "");
    return th_request(d.port, "POST", target, headers, form, strlen(form), r);
}

static void test_cart_session_across_requests(void **state)
{
    (void)state;
    th_response r;
    char cookie[128];
    assert_int_equal(th_request(d.port, "GET", "/cart", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    session_cookie(&r, cookie, sizeof(cookie));
    th_response_free(&r);

    /* Several adds: the two workers of sandbox "shop" take turns, and
     * each sees what the other stored. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(post("/cart", cookie, "action=add&item=cheese", &r), 0);
        assert_int_equal(r.status, 303);
        th_response_free(&r);
    }
    assert_int_equal(th_request(d.port, "GET", "/cart?action=show", cookie, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "<td>3</td><td>Cheese, 200 g</td>"));
    assert_non_null(strstr(r.body, "Total: 11.97"));
    char sc[64];
    assert_false(th_header(&r, "Set-Cookie", sc, sizeof(sc)));
    th_response_free(&r);

    for (int i = 0; i < 3; i++) {
        assert_int_equal(post("/cart", cookie, "action=remove&item=cheese", &r), 0);
        assert_int_equal(r.status, 303);
        th_response_free(&r);
    }
    assert_int_equal(th_request(d.port, "GET", "/cart?action=show", cookie, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 2048);
    assert_non_null(strstr(r.body, "Your cart is empty."));
    th_response_free(&r);
}

static int files_in(const char *dir)
{
    int n = 0;
    DIR *dp = opendir(dir);
    struct dirent *e;
    while (dp && (e = readdir(dp)) != NULL)
        n += e->d_name[0] != '.';
    if (dp)
        closedir(dp);
    return n;
}

static void test_board_create_read_delete(void **state)
{
    (void)state;
    th_response r;
    char cookie[128];
    assert_int_equal(post("/board", NULL,
                          "action=post&author=Ada&subject=From+the+sandbox&text=written+by+a+"
                          "confined+worker",
                          &r),
                     0);
    assert_int_equal(r.status, 201);
    char loc[128];
    assert_true(th_header(&r, "Location", loc, sizeof(loc)));
    assert_string_equal(loc, "/board?action=show&id=1");
    th_response_free(&r);
    assert_int_equal(files_in(msgdir), 1);
    char path[256];
    snprintf(path, sizeof(path), "%s/1.msg", msgdir);
    const char *stored = read_file(path);
    assert_non_null(stored);
    assert_string_equal(stored, "Ada\nFrom the sandbox\nwritten by a confined worker");

    assert_int_equal(th_request(d.port, "GET", "/board?action=read", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "#1 From the sandbox"));
    session_cookie(&r, cookie, sizeof(cookie));
    th_response_free(&r);
    /* The session remembers message 1 was read. */
    assert_int_equal(th_request(d.port, "GET", "/board?action=read", cookie, NULL, 0, &r), 0);
    assert_non_null(strstr(r.body, "No new messages."));
    th_response_free(&r);

    assert_int_equal(post("/board", cookie, "action=delete&id=..%2F..%2Fetc%2Fpasswd", &r), 0);
    assert_int_equal(r.status, 400);
    th_response_free(&r);
    assert_int_equal(post("/board", cookie, "action=delete&id=1", &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(files_in(msgdir), 0);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void test_mandelbrot_png(void **state)
{
    (void)state;
    th_response r;
    assert_int_equal(
        th_request(d.port, "GET", "/mandelbrot?width=300&height=200&format=png", NULL, NULL, 0, &r),
        0);
    assert_int_equal(r.status, 200);
    char ct[64];
    assert_true(th_header(&r, "Content-Type", ct, sizeof(ct)));
    assert_string_equal(ct, "image/png");
    const unsigned char *p = (const unsigned char *)r.body;
    assert_int_equal(r.body_len, 8 + 25 + 12 + 2 + 301 * 200 + 5 + 4 + 12);
    assert_memory_equal(p, "\x89PNG\r\n\x1a\n", 8);
    assert_memory_equal(p + 12, "IHDR", 4);
    assert_int_equal(be32(p + 16), 300);
    assert_int_equal(be32(p + 20), 200);
    assert_memory_equal(p + r.body_len - 8, "IEND", 4);
    th_response_free(&r);

    assert_int_equal(
        th_request(d.port, "GET", "/mandelbrot?width=100000&height=100000", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 400);
    th_response_free(&r);
}

static void test_libcall(void **state)
{
    (void)state;
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/libcall?n=5000&seed=7", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    uint32_t acc = 7;
    for (uint32_t i = 0; i < 5000; i++)
        acc = calc_step(acc, i);
    char want[96];
    snprintf(want, sizeof(want), "calc_step called 5000 times: %u\n", (unsigned)acc);
    assert_string_equal(r.body, want);
    th_response_free(&r);
}

/* The example pages as the example site serves them: compiled on their
 * first request, never sent as source, run in the pages sandbox whose
 * session (one cookie) all three pages share across its two workers. */
static void test_pages(void **state)
{
    (void)state;
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/table.csp", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_memory_equal(r.body, "<!DOCTYPE html>", 15);
    assert_non_null(strstr(r.body, "The table is empty."));
    assert_null(strstr(r.body, "<%"));
    char cookie[256];
    session_cookie(&r, cookie, sizeof(cookie));
    assert_non_null(strstr(cookie, "SLSESSION_pages="));
    th_response_free(&r);

    assert_int_equal(post("/table.csp", cookie, "action=add&text=%3Ci%3Eone%3C%2Fi%3E", &r), 0);
    assert_int_equal(r.status, 303);
    char loc[128];
    assert_true(th_header(&r, "Location", loc, sizeof(loc)));
    assert_string_equal(loc, "table.csp");
    th_response_free(&r);
    assert_int_equal(th_request(d.port, "GET", "/table.csp", cookie, NULL, 0, &r), 0);
    assert_non_null(strstr(r.body, "<td>1</td><td>&lt;i&gt;one&lt;/i&gt;</td>"));
    th_response_free(&r);

    assert_int_equal(
        post("/guestbook.csp", cookie, "name=%3Cscript%3Ealert(1)%3C%2Fscript%3E&text=hello", &r),
        0);
    assert_int_equal(r.status, 303);
    th_response_free(&r);
    assert_int_equal(th_request(d.port, "GET", "/guestbook.csp", cookie, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "<script"));
    assert_non_null(strstr(r.body, "<strong>&lt;script&gt;alert(1)&lt;/script&gt;</strong>"));
    th_response_free(&r);

    /* Enough requests that both workers serve some: the count goes on. */
    for (int i = 1; i <= 6; i++) {
        assert_int_equal(th_request(d.port, "GET", "/counter.csp", cookie, NULL, 0, &r), 0);
        assert_int_equal(r.status, 200);
        char want[64];
        snprintf(want, sizeof(want), "<strong id=\"visits\">%d</strong>", i);
        assert_non_null(strstr(r.body, want));
        th_response_free(&r);
    }
}

/* The front page a new user sees: styled, and every link on it answers. */
static void test_front_page(void **state)
{
    (void)state;
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "<link rel=\"stylesheet\" href=\"/site.css\">"));
    char *page = strdup(r.body);
    th_response_free(&r);
    assert_non_null(page);
    int links = 0;
    for (char *p = page; (p = strstr(p, "href=\"")) != NULL;) {
        p += 6;
        char *end = strchr(p, '"');
        assert_non_null(end);
        char target[256];
        size_t n = (size_t)(end - p);
        assert_true(n > 0 && n < sizeof(target));
        memcpy(target, p, n);
        target[n] = '\0';
        th_response t;
        assert_int_equal(th_request(d.port, "GET", target, NULL, NULL, 0, &t), 0);
        if (t.status != 200)
            fail_msg("the front page links to %s, which answers %d", target, t.status);
        if (strcmp(target, "/site.css") == 0) {
            char type[64];
            assert_true(th_header(&t, "Content-Type", type, sizeof(type)));
            assert_non_null(strstr(type, "text/css"));
        }
        th_response_free(&t);
        links++;
        p = end;
    }
    free(page);
    assert_true(links >= 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_front_page),
        cmocka_unit_test(test_cart_session_across_requests),
        cmocka_unit_test(test_board_create_read_delete),
        cmocka_unit_test(test_mandelbrot_png),
        cmocka_unit_test(test_libcall),
        cmocka_unit_test(test_pages),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

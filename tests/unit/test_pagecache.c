/*
 * test_pagecache.c - the page compile cache (src/csp/pagecache.c): keys,
 * page-path validation, the stamp format, the timestamp rule (a touch
 * without change stays READY by content hash, a changed page or included
 * header is STALE, a failed page stays FAILED until it changes) and the
 * installing of a work dir whose files are hostile.  Builds are simulated
 * by writing the work dir the way build.c does: no compiler runs here.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "csp/build.h"
#include "csp/pagecache.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static char base[] = "/tmp/test_pagecache.XXXXXX";
static char doc[256], cache[256];
static int docfd = -1;

/* a + "/" + b into out (asserting it fits). */
static void join(char *out, size_t cap, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    assert_true(la + 1 + lb < cap);
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
}

static void put(const char *dir, const char *rel, const char *text)
{
    char p[PATH_MAX];
    join(p, sizeof(p), dir, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static bool exists(const char *dir, const char *name)
{
    char p[PATH_MAX];
    struct stat sb;
    join(p, sizeof(p), dir, name);
    return lstat(p, &sb) == 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Writes a work dir as build.c would for rel (listing deps after the
 * page), then installs it with status. */
static int fake_build(const char *rel, int status, const char *const *deps, size_t ndeps,
                      const char *diag, sandlet_page_info *info)
{
    char wd[PATH_MAX], err[512];
    assert_int_equal(sandlet_page_workdir(cache, rel, getuid(), getgid(), wd, sizeof(wd)), 0);
    sandlet_page_stamp st = {0};
    st.rel = strdup(rel);
    st.ok = status == SANDLET_BUILD_OK;
    for (size_t i = 0; i <= ndeps; i++) {
        const char *p = rel;
        if (i > 0)
            p = deps[i - 1];
        struct stat sb;
        uint8_t h[32];
        int fd = sandlet_page_open_beneath(docfd, p, &sb);
        assert_true(fd >= 0);
        assert_int_equal(sandlet_page_hash_fd(fd, 1 << 20, h), 0);
        close(fd);
        assert_int_equal(sandlet_page_stamp_add(&st, p, &sb, h), 0);
    }
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    assert_int_equal(sandlet_page_stamp_format(&st, &b), 0);
    sandlet_page_stamp_free(&st);
    char text[8192];
    assert_true(b.len < sizeof(text));
    memcpy(text, b.data, b.len);
    text[b.len] = '\0';
    sandlet_buf_free(&b);
    put(wd, "stamp", text);
    put(wd, "diag", diag ? diag : "");
    put(wd, "page.c", "/* generated */\n");
    if (status == SANDLET_BUILD_OK)
        put(wd, "page.so", "not really ELF, but bytes to copy");
    int rc = sandlet_page_install(cache, wd, rel, status, info, err, sizeof(err));
    assert_false(exists(cache, strrchr(wd, '/') + 1)); /* the work dir is gone */
    return rc;
}

static enum sandlet_page_state check(const char *rel)
{
    sandlet_page_info info;
    assert_int_equal(sandlet_page_check(cache, docfd, rel, &info), 0);
    return info.state;
}

static void test_key(void **state)
{
    (void)state;
    char k1[SANDLET_PAGE_KEY_MAX], k2[SANDLET_PAGE_KEY_MAX];
    assert_int_equal(sandlet_page_key("shop/cart.csp", k1, sizeof(k1)), 0);
    assert_int_equal(sandlet_page_key("shop/cart.csp", k2, sizeof(k2)), 0);
    assert_string_equal(k1, k2); /* stable */
    assert_int_equal(strlen(k1), 5 + 16);
    assert_memory_equal(k1, "cart-", 5);
    for (size_t i = 5; i < strlen(k1); i++)
        assert_non_null(strchr("0123456789abcdef", k1[i]));
    /* The hash is of the whole path: same basename, other folder. */
    assert_int_equal(sandlet_page_key("cart.csp", k2, sizeof(k2)), 0);
    assert_memory_equal(k2, "cart-", 5);
    assert_string_not_equal(k1, k2);
    /* Sanitizing and the 40-character bound. */
    assert_int_equal(sandlet_page_key("a/My Page!\xc3\xa9.CSP", k1, sizeof(k1)), 0);
    assert_memory_equal(k1, "My_Page___-", 11);
    char longname[128];
    memset(longname, 'x', 100);
    strcpy(longname + 100, ".csp");
    assert_int_equal(sandlet_page_key(longname, k1, sizeof(k1)), 0);
    assert_int_equal(strlen(k1), 40 + 1 + 16);
    assert_int_equal(sandlet_page_key("cart.csp", k1, 20), -ENOSPC);
    /* Page-path validation. */
    static const char *const bad[] = {"",          "/a.csp", "../a.csp", "a/../b.csp", "a//b.csp",
                                      "./a.csp",   "a.txt",  ".csp",     "a/.csp",     "a\n.csp",
                                      "a/b.csp/.", "a.csp/", "a/./b.csp"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(sandlet_page_rel_check(bad[i]), -EINVAL);
        assert_int_equal(sandlet_page_key(bad[i], k1, sizeof(k1)), -EINVAL);
    }
    assert_int_equal(sandlet_page_rel_check("A.CSP"), 0);
    assert_int_equal(sandlet_page_rel_check("x/y z/p.Csp"), 0);
    sandlet_page_info info;
    assert_int_equal(sandlet_page_check(cache, docfd, "../etc/x.csp", &info), -EINVAL);
}

static void test_stamp_roundtrip(void **state)
{
    (void)state;
    sandlet_page_stamp st = {0}, back;
    st.rel = strdup("a b/p.csp");
    st.ok = true;
    struct stat sb = {0};
    sb.st_size = 1234;
    sb.st_mtim.tv_sec = 1700000000;
    sb.st_mtim.tv_nsec = 123456789;
    sb.st_ino = 42;
    uint8_t h[32];
    for (int i = 0; i < 32; i++)
        h[i] = (uint8_t)(i * 7);
    assert_int_equal(sandlet_page_stamp_add(&st, "a b/p.csp", &sb, h), 0);
    sb.st_ino = 43;
    assert_int_equal(sandlet_page_stamp_add(&st, "inc/h.h", &sb, h), 0);
    assert_int_equal(sandlet_page_stamp_add(&st, "../x.h", &sb, h), -EINVAL);
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    assert_int_equal(sandlet_page_stamp_format(&st, &b), 0);
    assert_int_equal(sandlet_page_stamp_parse((const char *)b.data, b.len, &back), 0);
    assert_string_equal(back.rel, "a b/p.csp");
    assert_true(back.ok);
    assert_true(back.version_matches);
    assert_int_equal(back.nfiles, 2);
    assert_string_equal(back.files[1].path, "inc/h.h");
    assert_int_equal(back.files[0].size, 1234);
    assert_int_equal(back.files[0].mtime_ns, 1700000000123456789ull);
    assert_int_equal(back.files[1].ino, 43);
    assert_memory_equal(back.files[0].hash, h, 32);
    sandlet_page_stamp_free(&back);

    /* Strictness: every mutilation is refused. */
    char *good = strndup((const char *)b.data, b.len);
    char text[4096];
    struct {
        const char *from, *to;
    } edits[] = {
        {"sandlet-page-stamp 1", "sandlet-page-stamp 2"},
        {"result ok", "result maybe"},
        {"file 1234", "file 01234"},
        {"file 1234", "file -1234"},
        {"file 1234", "file 99999999999999999999999"},
        {"end\n", "end\nmore\n"},
        {"end\n", "end"},
        {"end\n", ""},
        {"page a b/p.csp", "page a b/q.csp"}, /* the page must be listed first */
        {"page a b/p.csp", "page ../p.csp"},
        {" inc/h.h", " /etc/h.h"},
        {"1700000000123456789 42 00", "1700000000123456789 42 0g"},
        {"sandlet " PACKAGE_VERSION, "sandlet"},
    };
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        const char *at = strstr(good, edits[i].from);
        assert_non_null(at);
        snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - good), good, edits[i].to,
                 at + strlen(edits[i].from));
        assert_int_equal(sandlet_page_stamp_parse(text, strlen(text), &back), -EINVAL);
    }
    /* A NUL inside. */
    memcpy(text, good, b.len);
    text[10] = '\0';
    assert_int_equal(sandlet_page_stamp_parse(text, b.len, &back), -EINVAL);
    /* Another version parses, but does not match. */
    const char *v = strstr(good, "sandlet " PACKAGE_VERSION);
    snprintf(text, sizeof(text), "%.*ssandlet 0.0.0-other%s", (int)(v - good), good,
             v + strlen("sandlet " PACKAGE_VERSION));
    assert_int_equal(sandlet_page_stamp_parse(text, strlen(text), &back), 0);
    assert_false(back.version_matches);
    sandlet_page_stamp_free(&back);
    free(good);
    sandlet_buf_free(&b);
    sandlet_page_stamp_free(&st);
}

static void test_touch_copy_change(void **state)
{
    (void)state;
    put(doc, "t.csp", "<p>hello</p>\n");
    assert_int_equal(check("t.csp"), SANDLET_PAGE_STALE); /* never built */
    sandlet_page_info info;
    assert_int_equal(fake_build("t.csp", SANDLET_BUILD_OK, NULL, 0, NULL, &info), 0);
    assert_int_equal(info.state, SANDLET_PAGE_READY);
    assert_true(strstr(info.so, "/t-") && strstr(info.so, ".so"));
    assert_int_equal(check("t.csp"), SANDLET_PAGE_READY);

    /* A touch: new mtime, same bytes -> READY, and the stamp is refreshed. */
    char p[PATH_MAX], stamp[PATH_MAX], key[SANDLET_PAGE_KEY_MAX];
    join(p, sizeof(p), doc, "t.csp");
    assert_int_equal(sandlet_page_key("t.csp", key, sizeof(key)), 0);
    char sname[SANDLET_PAGE_KEY_MAX + 8];
    snprintf(sname, sizeof(sname), "%s.stamp", key);
    join(stamp, sizeof(stamp), cache, sname);
    char *before = strdup(slurp(stamp));
    assert_non_null(before);
    struct timespec ts[2] = {{1600000000, 5}, {1600000000, 5}};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
    assert_int_equal(check("t.csp"), SANDLET_PAGE_READY);
    assert_string_not_equal(slurp(stamp), before);
    assert_non_null(strstr(slurp(stamp), " 1600000000000000005 "));
    free(before);

    /* A copy over it (new inode, same bytes) -> READY. */
    put(doc, "t.csp.new", "<p>hello</p>\n");
    char np[PATH_MAX];
    join(np, sizeof(np), doc, "t.csp.new");
    assert_int_equal(rename(np, p), 0);
    assert_int_equal(check("t.csp"), SANDLET_PAGE_READY);

    /* Same size, other bytes -> STALE; other size -> STALE. */
    put(doc, "t.csp", "<p>hellO</p>\n");
    assert_int_equal(check("t.csp"), SANDLET_PAGE_STALE);
    put(doc, "t.csp", "<p>hello, world</p>\n");
    assert_int_equal(check("t.csp"), SANDLET_PAGE_STALE);

    /* Gone -> MISSING. */
    assert_int_equal(unlink(p), 0);
    assert_int_equal(check("t.csp"), SANDLET_PAGE_MISSING);
}

static void test_header_change(void **state)
{
    (void)state;
    assert_int_equal(mkdir(doc, 0755) == 0 || errno == EEXIST, 1);
    char d[PATH_MAX];
    join(d, sizeof(d), doc, "inc");
    assert_int_equal(mkdir(d, 0755) == 0 || errno == EEXIST, 1);
    put(doc, "h.csp", "<%@ include \"inc/h.h\" %><%= X %>\n");
    put(doc, "inc/h.h", "#define X 1\n");
    const char *deps[] = {"inc/h.h"};
    sandlet_page_info info;
    assert_int_equal(fake_build("h.csp", SANDLET_BUILD_OK, deps, 1, NULL, &info), 0);
    assert_int_equal(check("h.csp"), SANDLET_PAGE_READY);
    put(doc, "inc/h.h", "#define X 2\n");
    assert_int_equal(check("h.csp"), SANDLET_PAGE_STALE);
    assert_int_equal(fake_build("h.csp", SANDLET_BUILD_OK, deps, 1, NULL, &info), 0);
    assert_int_equal(check("h.csp"), SANDLET_PAGE_READY);
    char p[PATH_MAX];
    join(p, sizeof(p), doc, "inc/h.h");
    assert_int_equal(unlink(p), 0);
    assert_int_equal(check("h.csp"), SANDLET_PAGE_STALE);
}

static void test_failed_stays_failed(void **state)
{
    (void)state;
    put(doc, "f.csp", "<p>ok</p>\n");
    sandlet_page_info info;
    assert_int_equal(fake_build("f.csp", SANDLET_BUILD_OK, NULL, 0, NULL, &info), 0);
    put(doc, "f.csp", "<p><%= nope %></p>\n");
    assert_int_equal(check("f.csp"), SANDLET_PAGE_STALE);
    assert_int_equal(fake_build("f.csp", SANDLET_BUILD_FAILED, NULL, 0,
                                "f.csp:1:8: error: 'nope' undeclared\nmore\n", &info),
                     0);
    assert_int_equal(info.state, SANDLET_PAGE_FAILED);
    assert_string_equal(info.first, "f.csp:1:8: error: 'nope' undeclared");
    /* The previous good build is kept, but the page stays FAILED. */
    struct stat sb;
    assert_int_equal(stat(info.so, &sb), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sandlet_page_check(cache, docfd, "f.csp", &info), 0);
        assert_int_equal(info.state, SANDLET_PAGE_FAILED);
        assert_string_equal(info.first, "f.csp:1:8: error: 'nope' undeclared");
    }
    /* Until the page changes. */
    put(doc, "f.csp", "<p><%= 1 %></p>\n");
    assert_int_equal(check("f.csp"), SANDLET_PAGE_STALE);
    /* An ERROR (not the page's fault) installs the diagnostics only. */
    assert_int_equal(
        fake_build("f.csp", SANDLET_BUILD_ERROR, NULL, 0, "f.csp: error: no cc\n", &info), 0);
    assert_int_equal(info.state, SANDLET_PAGE_STALE);
    assert_string_equal(info.first, "f.csp: error: no cc");
    assert_int_equal(check("f.csp"), SANDLET_PAGE_STALE);
}

/* A work dir for h.csp holding a good stamp, diag and page.c; the caller
 * then spoils one file. */
static void good_workdir(const char *rel, char *wd, size_t cap)
{
    assert_int_equal(sandlet_page_workdir(cache, rel, getuid(), getgid(), wd, cap), 0);
    sandlet_page_stamp st = {0};
    st.rel = strdup(rel);
    st.ok = true;
    struct stat sb;
    uint8_t h[32];
    int fd = sandlet_page_open_beneath(docfd, rel, &sb);
    assert_true(fd >= 0);
    assert_int_equal(sandlet_page_hash_fd(fd, 1 << 20, h), 0);
    close(fd);
    assert_int_equal(sandlet_page_stamp_add(&st, rel, &sb, h), 0);
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    assert_int_equal(sandlet_page_stamp_format(&st, &b), 0);
    char *text = strndup((const char *)b.data, b.len);
    put(wd, "stamp", text);
    free(text);
    sandlet_buf_free(&b);
    sandlet_page_stamp_free(&st);
    put(wd, "diag", "");
    put(wd, "page.c", "/**/\n");
    put(wd, "page.so", "so");
}

/* The line table a crash report reads: strict rows, ascending offsets. */
static void test_lines_parse(void **state)
{
    (void)state;
    sandlet_page_line *t;
    size_t n;
    const char *good = "1110 0\n1123 3\n1130 0\nfffffff 2147483647\n";
    assert_int_equal(sandlet_page_lines_parse(good, strlen(good), &t, &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(t[0].offset, 0x1110);
    assert_int_equal(t[1].offset, 0x1123);
    assert_int_equal(t[1].line, 3);
    assert_int_equal(t[3].offset, 0xfffffff);
    assert_int_equal(t[3].line, 2147483647u);
    free(t);
    assert_int_equal(sandlet_page_lines_parse("", 0, &t, &n), 0);
    assert_int_equal(n, 0);
    assert_null(t);
    static const char *const bad[] = {
        "1123 3",             /* no newline */
        "1123 3\n1123 4\n",   /* not strictly ascending */
        "1130 3\n1123 4\n",   /* descending */
        "0x1123 3\n",         /* a prefix */
        "1A23 3\n",           /* upper case */
        "1123  3\n",          /* two spaces */
        "1123 -3\n",          /* a sign */
        "1123 3 \n",          /* trailing blank */
        "1123\n",             /* no line */
        " 1123 3\n",          /* leading blank */
        "10000000 1\n",       /* past the largest .so */
        "1123 2147483648\n",  /* line past 2^31 - 1 */
        "1123 3\n\n",         /* an empty row */
        "1123 99999999999\n", /* too many digits */
        "123456789abc 1\n",   /* too many hex digits */
        "1123 3\r\n",         /* CR */
        "1123\t3\n",          /* a tab */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t = (sandlet_page_line *)1;
        assert_int_equal(sandlet_page_lines_parse(bad[i], strlen(bad[i]), &t, &n), -EINVAL);
        assert_null(t);
        assert_int_equal(n, 0);
    }
    char *big = malloc(SANDLET_PAGE_MAX_LINES + 2);
    assert_non_null(big);
    memset(big, '\n', SANDLET_PAGE_MAX_LINES + 1);
    assert_int_equal(sandlet_page_lines_parse(big, SANDLET_PAGE_MAX_LINES + 1, &t, &n), -EINVAL);
    free(big);
}

/* Install copies a valid line table beside the .so, and an invalid or a
 * missing one removes the previous version's, which would name wrong
 * lines. */
static void test_lines_install(void **state)
{
    (void)state;
    put(doc, "l.csp", "<p>l</p>\n");
    char wd[PATH_MAX], err[512], key[SANDLET_PAGE_KEY_MAX], name[128], p[PATH_MAX];
    assert_int_equal(sandlet_page_key("l.csp", key, sizeof(key)), 0);
    snprintf(name, sizeof(name), "%s.lines", key);
    sandlet_page_info info;
    good_workdir("l.csp", wd, sizeof(wd));
    put(wd, "lines", "10 0\n20 3\n");
    assert_int_equal(
        sandlet_page_install(cache, wd, "l.csp", SANDLET_BUILD_OK, &info, err, sizeof(err)), 0);
    join(p, sizeof(p), cache, name);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    char text[64] = {0};
    assert_int_equal(fread(text, 1, sizeof(text) - 1, f), 10);
    fclose(f);
    assert_string_equal(text, "10 0\n20 3\n");

    good_workdir("l.csp", wd, sizeof(wd));
    put(wd, "lines", "20 0\n10 3\n");
    assert_int_equal(
        sandlet_page_install(cache, wd, "l.csp", SANDLET_BUILD_OK, &info, err, sizeof(err)), 0);
    assert_false(exists(cache, name));
    assert_int_equal(info.state, SANDLET_PAGE_READY);

    good_workdir("l.csp", wd, sizeof(wd));
    put(wd, "lines", "10 0\n");
    assert_int_equal(
        sandlet_page_install(cache, wd, "l.csp", SANDLET_BUILD_OK, &info, err, sizeof(err)), 0);
    assert_true(exists(cache, name));
    good_workdir("l.csp", wd, sizeof(wd));
    assert_int_equal(
        sandlet_page_install(cache, wd, "l.csp", SANDLET_BUILD_OK, &info, err, sizeof(err)), 0);
    assert_false(exists(cache, name));
}

static void test_hostile_workdir(void **state)
{
    (void)state;
    put(doc, "x.csp", "<p>x</p>\n");
    put(base, "secret", "TOP SECRET\n");
    char wd[PATH_MAX], p[PATH_MAX], secret[PATH_MAX], err[512], key[SANDLET_PAGE_KEY_MAX];
    join(secret, sizeof(secret), base, "secret");
    assert_int_equal(sandlet_page_key("x.csp", key, sizeof(key)), 0);
    char so_name[128], stamp_name[128];
    snprintf(so_name, sizeof(so_name), "%s.so", key);
    snprintf(stamp_name, sizeof(stamp_name), "%s.stamp", key);
    sandlet_page_info info;
    const char *victims[] = {"page.so", "diag", "stamp", "page.c"};

    for (int kind = 0; kind < 3; kind++) {
        for (size_t v = 0; v < sizeof(victims) / sizeof(victims[0]); v++) {
            good_workdir("x.csp", wd, sizeof(wd));
            join(p, sizeof(p), wd, victims[v]);
            assert_int_equal(unlink(p), 0);
            if (kind == 0) {
                assert_int_equal(symlink(secret, p), 0);
            } else if (kind == 1) {
                assert_int_equal(mkfifo(p, 0644), 0); /* must not block */
            } else {
                int fd = open(p, O_WRONLY | O_CREAT, 0644);
                assert_true(fd >= 0);
                assert_int_equal(ftruncate(fd, (off_t)SANDLET_PAGE_MAX_SO + 1), 0);
                close(fd);
            }
            err[0] = '\0';
            int rc =
                sandlet_page_install(cache, wd, "x.csp", SANDLET_BUILD_OK, &info, err, sizeof(err));
            assert_int_equal(rc, -EPERM);
            assert_non_null(strstr(err, "x.csp"));
            assert_non_null(strstr(err, "fix"));
            assert_int_not_equal(info.state, SANDLET_PAGE_READY);
            assert_false(exists(cache, so_name));
            assert_false(exists(cache, stamp_name));
            assert_false(exists(wd, ""));
            /* Nothing of the link's target made it into the cache. */
            char cmd[PATH_MAX + 64];
            snprintf(cmd, sizeof(cmd), "grep -rqs 'TOP SECRET' %s", cache);
            assert_int_not_equal(system(cmd), 0);
        }
    }
    /* A stamp that does not parse, or names another page, or claims a
     * failed build succeeded. */
    static const char *const stamps[] = {
        "garbage\n", "sandlet-page-stamp 1\nsandlet " PACKAGE_VERSION "\npage y.csp\nresult ok\n"
                     "file 1 1 1 "
                     "0000000000000000000000000000"
                     "000000000000000000000000000000000000 y.csp\n"
                     "end\n"};
    for (size_t i = 0; i < 2; i++) {
        good_workdir("x.csp", wd, sizeof(wd));
        put(wd, "stamp", stamps[i]);
        assert_int_equal(
            sandlet_page_install(cache, wd, "x.csp", SANDLET_BUILD_OK, &info, err, sizeof(err)),
            -EPERM);
        assert_false(exists(cache, so_name));
    }
    /* A work dir that is not the one for this page. */
    good_workdir("x.csp", wd, sizeof(wd));
    char other[PATH_MAX];
    join(other, sizeof(other), base, "elsewhere");
    assert_int_equal(
        sandlet_page_install(cache, other, "x.csp", SANDLET_BUILD_OK, &info, err, sizeof(err)),
        -EINVAL);
    /* And the good one installs. */
    assert_int_equal(
        sandlet_page_install(cache, wd, "x.csp", SANDLET_BUILD_OK, &info, err, sizeof(err)), 0);
    assert_int_equal(info.state, SANDLET_PAGE_READY);
    struct stat sb;
    assert_int_equal(stat(info.so, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0644);
    assert_int_equal(sb.st_uid, geteuid());
}

static void test_workdir(void **state)
{
    (void)state;
    char wd[PATH_MAX];
    assert_int_equal(sandlet_page_workdir(cache, "w.csp", getuid(), getgid(), wd, sizeof(wd)), 0);
    put(wd, "junk", "x");
    char sub[PATH_MAX + 8];
    join(sub, sizeof(sub), wd, "d");
    assert_int_equal(mkdir(sub, 0700), 0);
    put(sub, "junk", "x");
    assert_int_equal(sandlet_page_workdir(cache, "w.csp", getuid(), getgid(), wd, sizeof(wd)), 0);
    assert_false(exists(wd, "junk"));
    assert_false(exists(wd, "d"));
    struct stat sb;
    assert_int_equal(stat(wd, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0700);
    assert_int_equal(sb.st_uid, getuid());
    assert_int_equal(sandlet_page_workdir_remove(wd), 0);
    assert_int_equal(stat(wd, &sb), -1);
    assert_int_equal(sandlet_page_workdir(cache, "../w.csp", 0, 0, wd, sizeof(wd)), -EINVAL);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(base) || sodium_init() < 0)
        return -1;
    join(doc, sizeof(doc), base, "doc");
    join(cache, sizeof(cache), base, "cache");
    if (mkdir(doc, 0755) < 0 || mkdir(cache, 0755) < 0)
        return -1;
    docfd = open(doc, O_RDONLY | O_DIRECTORY);
    return docfd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
    close(docfd);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key),
        cmocka_unit_test(test_stamp_roundtrip),
        cmocka_unit_test(test_touch_copy_change),
        cmocka_unit_test(test_header_change),
        cmocka_unit_test(test_failed_stays_failed),
        cmocka_unit_test(test_lines_parse),
        cmocka_unit_test(test_lines_install),
        cmocka_unit_test(test_hostile_workdir),
        cmocka_unit_test(test_workdir),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

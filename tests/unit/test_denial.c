/*
 * test_denial.c - Landlock's denial records as the supervisor reads them
 * (audit.c) and reports them (denial.c): the record's fields parsed with
 * bounds (a path is the worker's: quoted or hex-encoded by the kernel),
 * a denial held until its domain's record names the worker, the line
 * that allows it ('readable' or 'writable', a file's folder for a
 * write), escaping, and the rate limit.  The records are the kernel's
 * text as Linux 6.18 sent it.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sandbox/audit.h"
#include "sandbox/denial.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char read_rec[] = "audit(1796591037.923:1): domain=1109a3578 blockers=fs.read_file "
                               "path=\"/etc/hostname\" dev=\"vda\" ino=733";
static const char alloc_rec[] = "audit(1796591037.923:1): domain=1109a3578 status=allocated "
                                "mode=enforcing pid=12440 uid=0 exe=\"/usr/sbin/sandletd\" "
                                "comm=\"pid=9\"";
static const char dealloc_rec[] =
    "audit(1796591037.971:2): domain=1109a3578 status=deallocated denials=1";

static void test_parse_denial(void **state)
{
    (void)state;
    static sandlet_denial d;
    assert_true(sandlet_audit_parse_denial(read_rec, strlen(read_rec), &d));
    assert_true(d.domain == 0x1109a3578ull);
    assert_string_equal(d.blockers, "fs.read_file");
    assert_string_equal(d.path, "/etc/hostname");
    assert_false(d.name_only);
    /* Hex, as the kernel writes a name with a space or a control byte. */
    static const char hex[] = "audit(1:4): domain=1109a3583 blockers=fs.read_file "
                              "path=2F746D702F6E6F2F776974682073706163650A dev=\"vda\" ino=1";
    assert_true(sandlet_audit_parse_denial(hex, strlen(hex), &d));
    assert_string_equal(d.path, "/tmp/no/with space\n");
    /* Several blockers; a name instead of a path. */
    static const char name[] = "audit(1:5): domain=a blockers=fs.write_file,fs.truncate "
                               "name=\"f.txt\" dev=\"vda\" ino=2";
    assert_true(sandlet_audit_parse_denial(name, strlen(name), &d));
    assert_string_equal(d.blockers, "fs.write_file,fs.truncate");
    assert_string_equal(d.path, "f.txt");
    assert_true(d.name_only);
    /* No file: a denial still, of nothing named. */
    static const char sig[] = "audit(1:6): domain=b blockers=scope.signal opid=1 ocomm=\"init\"";
    assert_true(sandlet_audit_parse_denial(sig, strlen(sig), &d));
    assert_string_equal(d.path, "");
    /* A path that does not decode (odd hex, a NUL, a quote inside) is a
     * denial of an unnamed file, never a half-read one. */
    static const char *const bad_paths[] = {
        "audit(1:7): domain=b blockers=fs.read_file path=2F7",
        "audit(1:7): domain=b blockers=fs.read_file path=2F0041",
        "audit(1:7): domain=b blockers=fs.read_file path=\"/a\"b\"",
        "audit(1:7): domain=b blockers=fs.read_file path=\"",
    };
    for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
        assert_true(sandlet_audit_parse_denial(bad_paths[i], strlen(bad_paths[i]), &d));
        assert_string_equal(d.path, "");
    }
    /* Not denials at all. */
    static const char *const not_denials[] = {
        "audit(1:8): blockers=fs.read_file path=\"/x\"",
        "audit(1:8): domain=0 blockers=fs.read_file path=\"/x\"",
        "audit(1:8): domain=zz blockers=fs.read_file path=\"/x\"",
        "audit(1:8): domain=1 path=\"/x\"",
        "audit(1:8): domain=1 blockers=fs.READ path=\"/x\"",
        "audit(1:8): domain=1 blockers=%s%s%n path=\"/x\"",
        "audit(1:8): comm=\"domain=1\" blockers=fs.read_file",
    };
    for (size_t i = 0; i < sizeof(not_denials) / sizeof(not_denials[0]); i++)
        if (sandlet_audit_parse_denial(not_denials[i], strlen(not_denials[i]), &d))
            fail_msg("record %zu was taken for a denial", i);
    /* Every prefix parses or is refused, never read past (ASan in CI). */
    for (size_t n = 0; n < sizeof(hex) - 1; n++) {
        char *cut = malloc(n ? n : 1);
        assert_non_null(cut);
        memcpy(cut, hex, n);
        (void)sandlet_audit_parse_denial(cut, n, &d);
        free(cut);
    }
    /* A path longer than PATH_MAX is not copied past the buffer. */
    size_t big = 2 * SANDLET_DENIAL_PATH_MAX + 64;
    char *longrec = malloc(big + 64);
    assert_non_null(longrec);
    int k = snprintf(longrec, 64, "audit(1:9): domain=1 blockers=fs.read_file path=");
    memset(longrec + k, 'A', big);
    assert_true(sandlet_audit_parse_denial(longrec, (size_t)k + big, &d));
    assert_string_equal(d.path, "");
    free(longrec);
}

static void test_parse_domain(void **state)
{
    (void)state;
    uint64_t dom = 0;
    pid_t pid = 0;
    assert_int_equal(sandlet_audit_parse_domain(alloc_rec, strlen(alloc_rec), &dom, &pid), 1);
    assert_true(dom == 0x1109a3578ull);
    assert_int_equal(pid, 12440);
    assert_int_equal(sandlet_audit_parse_domain(dealloc_rec, strlen(dealloc_rec), &dom, &pid), 2);
    static const char *const bad[] = {
        "audit(1:2): domain=1 status=allocated mode=enforcing",
        "audit(1:2): domain=1 status=allocated pid=0",
        "audit(1:2): domain=1 status=allocated pid=-5",
        "audit(1:2): domain=1 status=allocatedX pid=5",
        "audit(1:2): status=allocated pid=5",
        "audit(1:2): domain=1 comm=\"status=allocated\" pid=5",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sandlet_audit_parse_domain(bad[i], strlen(bad[i]), &dom, &pid), 0);
}

static pid_t got_pid;
static unsigned got;
static char got_path[64];

static bool wanted(pid_t pid)
{
    return pid == 12440;
}

static void denied(pid_t pid, const sandlet_denial *d)
{
    got_pid = pid;
    got++;
    snprintf(got_path, sizeof(got_path), "%.63s", d->path);
}

/* A domain's first denial comes before the record that names its pid;
 * later ones find the domain known; another process's domain is not
 * ours; a deallocated domain is forgotten. */
static void test_pairing(void **state)
{
    (void)state;
    sandlet_audit_handlers(NULL, wanted, denied);
    sandlet_audit_record(SANDLET_AUDIT_LANDLOCK_ACCESS, read_rec, strlen(read_rec));
    assert_int_equal(got, 0);
    sandlet_audit_record(SANDLET_AUDIT_LANDLOCK_DOMAIN, alloc_rec, strlen(alloc_rec));
    assert_int_equal(got, 1);
    assert_int_equal(got_pid, 12440);
    assert_string_equal(got_path, "/etc/hostname");
    sandlet_audit_record(SANDLET_AUDIT_LANDLOCK_ACCESS, read_rec, strlen(read_rec));
    assert_int_equal(got, 2);
    /* Not a worker's domain: its denials are nobody's here. */
    static const char other[] = "audit(1:3): domain=77 blockers=fs.read_file path=\"/x\"";
    static const char other_alloc[] = "audit(1:3): domain=77 status=allocated pid=99";
    sandlet_audit_record(SANDLET_AUDIT_LANDLOCK_ACCESS, other, strlen(other));
    sandlet_audit_record(SANDLET_AUDIT_LANDLOCK_DOMAIN, other_alloc, strlen(other_alloc));
    sandlet_audit_record(SANDLET_AUDIT_LANDLOCK_ACCESS, other, strlen(other));
    assert_int_equal(got, 2);
    sandlet_audit_record(SANDLET_AUDIT_LANDLOCK_DOMAIN, dealloc_rec, strlen(dealloc_rec));
    sandlet_audit_record(SANDLET_AUDIT_LANDLOCK_ACCESS, read_rec, strlen(read_rec));
    assert_int_equal(got, 2);
    /* Pending denials past PENDING are dropped, never overrun. */
    for (int i = 0; i < 100; i++)
        sandlet_audit_record(SANDLET_AUDIT_LANDLOCK_ACCESS, other, strlen(other));
    sandlet_audit_handlers(NULL, NULL, NULL);
}

static sandlet_denial denial(const char *blockers, const char *path)
{
    sandlet_denial d;
    memset(&d, 0, sizeof(d));
    d.domain = 1;
    snprintf(d.blockers, sizeof(d.blockers), "%s", blockers);
    snprintf(d.path, sizeof(d.path), "%s", path);
    return d;
}

static void test_describe(void **state)
{
    (void)state;
    static char line[4096];
    sandlet_denial_ctx ctx = {.sandbox = "shop",
                              .servlets = "servlet /cart",
                              .file = "/etc/sandlet/sandlet.conf",
                              .line = 12};
    static sandlet_denial d;
    d = denial("fs.read_file", "/srv/data/prices.csv");
    assert_int_equal(sandlet_denial_kind_of(&d), SANDLET_DENIAL_READABLE);
    sandlet_denial_describe(&d, &ctx, 4242, 0, line, sizeof(line));
    assert_string_equal(line, "/etc/sandlet/sandlet.conf:12: sandbox 'shop' (servlet /cart): "
                              "Landlock refused worker 4242 fs.read_file of "
                              "'/srv/data/prices.csv', which no 'readable' line of the sandbox "
                              "covers: to allow it, add 'readable \"/srv/data/prices.csv\";' (or "
                              "a folder above it) to its block and reload");
    /* A write to a file: its folder is what 'writable' takes. */
    d = denial("fs.write_file,fs.truncate", "/srv/data/out.txt");
    assert_int_equal(sandlet_denial_kind_of(&d), SANDLET_DENIAL_WRITABLE);
    sandlet_denial_describe(&d, &ctx, 1, 0, line, sizeof(line));
    assert_non_null(strstr(line, "add 'writable \"/srv/data\";' to its block and reload"));
    d = denial("fs.write_file", "/top");
    sandlet_denial_describe(&d, &ctx, 1, 0, line, sizeof(line));
    assert_non_null(strstr(line, "add 'writable \"/\";'"));
    /* Making a file: the record names the folder already. */
    d = denial("fs.make_reg", "/srv/uploads");
    sandlet_denial_describe(&d, &ctx, 1, 3, line, sizeof(line));
    assert_non_null(strstr(line, "fs.make_reg of '/srv/uploads', which no 'writable' line"));
    assert_non_null(strstr(line, "add 'writable \"/srv/uploads\";'"));
    assert_non_null(strstr(line, "(3 more since its last report)"));
    /* Read and write at once (O_RDWR): writable. */
    d = denial("fs.read_file,fs.write_file", "/srv/db/x");
    assert_int_equal(sandlet_denial_kind_of(&d), SANDLET_DENIAL_WRITABLE);
    /* Over the write-quota, the writable folders are read-only. */
    ctx.write_blocked = true;
    d = denial("fs.make_reg", "/srv/uploads");
    sandlet_denial_describe(&d, &ctx, 1, 0, line, sizeof(line));
    assert_non_null(strstr(line, "over its write-quota"));
    ctx.write_blocked = false;
    /* A worker's file name is data: escaped, whatever it holds. */
    d = denial("fs.read_file", "/tmp/a'b\"c\\d\n%s%n\x7f\xc3\xa9");
    sandlet_denial_describe(&d, &ctx, 1, 0, line, sizeof(line));
    assert_non_null(strstr(line, "'/tmp/a\\x27b\\x22c\\x5cd\\x0a%s%n\\x7f\\xc3\\xa9'"));
    assert_null(strchr(line, '\n'));
    /* The implicit sandbox has no block yet. */
    ctx.line = 0;
    ctx.sandbox = "default";
    d = denial("fs.read_dir", "/srv");
    sandlet_denial_describe(&d, &ctx, 1, 0, line, sizeof(line));
    assert_non_null(strstr(line, "/etc/sandlet/sandlet.conf: sandbox 'default'"));
    assert_non_null(strstr(line, "in a block 'sandbox default { ... }'"));
    /* Not a file: no directive. */
    d = denial("net.connect_tcp", "");
    assert_int_equal(sandlet_denial_kind_of(&d), SANDLET_DENIAL_OTHER);
    sandlet_denial_describe(&d, &ctx, 1, 0, line, sizeof(line));
    assert_non_null(strstr(line, "not a file access"));
    /* A path as long as a record holds: the line is cut, and says so. */
    static char longpath[SANDLET_DENIAL_PATH_MAX + 1];
    memset(longpath, '\x01', SANDLET_DENIAL_PATH_MAX);
    longpath[0] = '/';
    d = denial("fs.read_file", longpath);
    sandlet_denial_describe(&d, &ctx, 1, 0, line, sizeof(line));
    assert_true(strlen(line) < sizeof(line));
    assert_non_null(strstr(line, "..."));
    char small[40];
    sandlet_denial_describe(&d, &ctx, 1, 0, small, sizeof(small));
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_string_equal(small + sizeof(small) - 4, "...");
}

static void test_limit(void **state)
{
    (void)state;
    static sandlet_denial_limit l;
    static sandlet_denial d, e;
    d = denial("fs.read_file", "/a");
    e = denial("fs.write_file", "/a");
    unsigned more = 99;
    assert_true(sandlet_denial_limit_take(&l, 1, &d, 1000, &more));
    assert_int_equal(more, 0);
    assert_false(sandlet_denial_limit_take(&l, 1, &d, 1001, &more));
    assert_false(sandlet_denial_limit_take(&l, 1, &d, 30000, &more));
    /* Another access, another sandbox: their own first lines. */
    assert_true(sandlet_denial_limit_take(&l, 1, &e, 1002, &more));
    assert_true(sandlet_denial_limit_take(&l, 2, &d, 1003, &more));
    /* A minute on, again, with the count of those in between. */
    assert_true(sandlet_denial_limit_take(&l, 1, &d, 1000 + SANDLET_DENIAL_REPEAT_MS, &more));
    assert_int_equal(more, 2);
    /* At most so many lines a second in all. */
    static sandlet_denial_limit m;
    static sandlet_denial many;
    unsigned said = 0;
    for (int i = 0; i < 100; i++) {
        many = denial("fs.read_file", "");
        snprintf(many.path, sizeof(many.path), "/f%d", i);
        said += sandlet_denial_limit_take(&m, 1, &many, 5000, &more);
    }
    assert_int_equal(said, SANDLET_DENIAL_LINES_PER_SEC);
    /* One not said for the cap is said when it comes again. */
    assert_true(sandlet_denial_limit_take(&m, 1, &many, 6000, &more));
    /* More keys than the table: the oldest are forgotten, never overrun. */
    for (int i = 0; i < 3 * SANDLET_DENIAL_KEYS; i++) {
        snprintf(many.path, sizeof(many.path), "/g%d", i);
        (void)sandlet_denial_limit_take(&m, 1, &many, 10000 + (uint64_t)i * 1000, &more);
    }
}

/* Development mode's hint, judged against the sandbox's paths. */
static void test_hint(void **state)
{
    (void)state;
    static const char *const readable[] = {"/srv/data/", "/etc/app.conf"};
    static const char *const writable[] = {"/srv/up", "/var/spool/sandlet/a"};
    static const char *const sys[] = {"/usr/lib", "/lib"};
    sandlet_hint_ctx ctx = {.sandbox = "a",
                            .readable = readable,
                            .nreadable = 2,
                            .writable = writable,
                            .nwritable = 2,
                            .system = sys,
                            .nsystem = 2};
    static sandlet_filehint h;
    static char line[4096];
    memset(&h, 0, sizeof(h));
    h.call = "open";
    h.err = EACCES;
    /* No line covers it: Landlock, and the line to add. */
    snprintf(h.path, sizeof(h.path), "/etc/hostname");
    sandlet_denial_hint(&h, &ctx, line, sizeof(line));
    assert_non_null(strstr(line, "open('/etc/hostname') failed with EACCES, and no 'readable' "
                                 "line of sandbox 'a' covers it, so Landlock refused it"));
    assert_non_null(strstr(line, "add 'readable \"/etc/hostname\";' (or a folder above it)"));
    assert_non_null(strstr(line, "development mode's hint"));
    /* "/srv/database" is not under "/srv/data/". */
    snprintf(h.path, sizeof(h.path), "/srv/database/x");
    sandlet_denial_hint(&h, &ctx, line, sizeof(line));
    assert_non_null(strstr(line, "so Landlock refused it"));
    /* Covered (a folder, a file, the libraries): the file's permissions. */
    static const char *const covered[] = {"/srv/data/prices.csv", "/etc/app.conf",
                                          "/usr/lib/x86_64-linux-gnu/libm.so.6", "/srv/up/f"};
    for (size_t i = 0; i < sizeof(covered) / sizeof(covered[0]); i++) {
        snprintf(h.path, sizeof(h.path), "%s", covered[i]);
        sandlet_denial_hint(&h, &ctx, line, sizeof(line));
        if (!strstr(line, "though Landlock allows it") || !strstr(line, "refuse the sandbox's uid"))
            fail_msg("%s: %s", covered[i], line);
    }
    /* A write where only reading is granted: 'writable', its folder. */
    h.write = true;
    snprintf(h.path, sizeof(h.path), "/srv/data/out.csv");
    sandlet_denial_hint(&h, &ctx, line, sizeof(line));
    assert_non_null(strstr(line, "no 'writable' line"));
    assert_non_null(strstr(line, "add 'writable \"/srv/data\";' to its block"));
    /* A write in a writable folder, over the quota. */
    ctx.write_blocked = true;
    snprintf(h.path, sizeof(h.path), "/srv/up/f");
    sandlet_denial_hint(&h, &ctx, line, sizeof(line));
    assert_non_null(strstr(line, "over its write-quota"));
    ctx.write_blocked = false;
    /* Relative to a descriptor; EPERM; the others counted. */
    h.relative = true;
    h.err = EPERM;
    h.more = 2;
    snprintf(h.path, sizeof(h.path), "x\n");
    sandlet_denial_hint(&h, &ctx, line, sizeof(line));
    assert_non_null(strstr(line, "open('x\\x0a') failed with EPERM (relative to a descriptor"));
    assert_non_null(strstr(line, "2 more file calls of this request were refused"));
    assert_null(strchr(line, '\n'));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_denial), cmocka_unit_test(test_parse_domain),
        cmocka_unit_test(test_pairing),      cmocka_unit_test(test_describe),
        cmocka_unit_test(test_limit),        cmocka_unit_test(test_hint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

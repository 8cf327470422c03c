/*
 * test_static.c - unit tests of the static file logic (src/loop/static.c):
 * path resolution against a real temporary docroot (files, index, symlinks
 * inside and out, a FIFO, traversal attempts) with openat2 and with the
 * O_NOFOLLOW walk, MIME tables, ETag and HTTP-date, 304 and Range.  Every
 * fd that opens is read and must never be the secret kept outside the
 * docroot.  Nothing here needs the network or a daemon.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "loop/static.h"

#define SECRET "SECRET-OUTSIDE"

typedef struct fixture {
    char root[64];
    char outside[64];
    int rootfd;
    bool have_openat2;
    bool have_dev;
} fixture;

/* ---- fixture ------------------------------------------------------------ */

static void write_file(const char *dir, const char *name, const char *content)
{
    char p[PATH_MAX];
    int n = snprintf(p, sizeof(p), "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < sizeof(p));
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    size_t len = strlen(content);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static void make_dir(const char *dir, const char *name)
{
    char p[PATH_MAX];
    int n = snprintf(p, sizeof(p), "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < sizeof(p));
    assert_int_equal(mkdir(p, 0755), 0);
}

static void make_link(const char *dir, const char *name, const char *to)
{
    char p[PATH_MAX];
    int n = snprintf(p, sizeof(p), "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < sizeof(p));
    assert_int_equal(symlink(to, p), 0);
}

static void make_fifo(const char *dir, const char *name)
{
    char p[PATH_MAX];
    int n = snprintf(p, sizeof(p), "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < sizeof(p));
    assert_int_equal(mkfifo(p, 0644), 0);
}

static bool probe_openat2(void)
{
#ifdef SYS_openat2
    struct {
        uint64_t flags, mode, resolve;
    } how = {O_PATH | O_CLOEXEC, 0, 0};
    long r = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
    if (r >= 0) {
        assert_int_equal(close((int)r), 0);
        return true;
    }
#endif
    return false;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    strcpy(f->root, "/tmp/sandlet-static-root-XXXXXX");
    strcpy(f->outside, "/tmp/sandlet-static-out-XXXXXX");
    assert_non_null(mkdtemp(f->root));
    assert_non_null(mkdtemp(f->outside));

    write_file(f->outside, "secret.txt", SECRET);
    write_file(f->outside, "index.html", SECRET);

    const char *r = f->root;
    write_file(r, "a.txt", "hello");
    write_file(r, "Upper.HTML", "upper");
    write_file(r, "index.html", "root index");
    write_file(r, ".hidden", "dotfile");
    write_file(r, "noext", "noext");
    write_file(r, "plus+name.txt", "plus");
    write_file(r, "sp ace.txt", "space");
    write_file(r, "\xc3\xa9t\xc3\xa9.txt", "utf8");
    write_file(r, "%2e%2e", "literal percent");
    write_file(r, "long.abcdefghijklmnopqrstuvwxyz0123456789", "longext");
    make_dir(r, "sub");
    write_file(r, "sub/index.html", "sub index");
    write_file(r, "sub/page.css", "body{}");
    make_dir(r, "sub/inner");
    write_file(r, "sub/inner/deep.js", "deep");
    make_dir(r, "noindex");
    write_file(r, "noindex/x.txt", "x");
    make_dir(r, "idxdir");
    make_dir(r, "idxdir/index.html");
    make_dir(r, "idxfifo");
    make_fifo(r, "idxfifo/index.html");
    make_fifo(r, "fifo");

    char to[PATH_MAX];
    make_link(r, "link_in", "a.txt");
    make_link(r, "link_dir", "sub");
    make_link(r, "sub/link_up", "../a.txt");
    snprintf(to, sizeof(to), "%s/secret.txt", f->outside);
    make_link(r, "link_out", to);
    snprintf(to, sizeof(to), "../%s/secret.txt", f->outside + strlen("/tmp/"));
    make_link(r, "link_out_rel", to);
    make_link(r, "link_out_dir", f->outside);
    snprintf(to, sizeof(to), "%s/a.txt", f->root);
    make_link(r, "link_abs_in", to);
    make_link(r, "loop", "loop");
    make_link(r, "up", "..");
    make_link(r, "proc_self", "/proc/self/root");
    make_dir(r, "lnkidx");
    make_link(r, "lnkidx/index.html", "../index.html");
    make_dir(r, "badidx");
    snprintf(to, sizeof(to), "%s/index.html", f->outside);
    make_link(r, "badidx/index.html", to);

    char dev[PATH_MAX];
    snprintf(dev, sizeof(dev), "%s/dev_null", r);
    f->have_dev = mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0;

    f->rootfd = open(r, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->rootfd >= 0);
    f->have_openat2 = probe_openat2();
    sandlet_static_set_openat2(true);
    *state = f;
    return 0;
}

static int rm_tree(const char *dir)
{
    char cmd[PATH_MAX + 16];
    int n = snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (n < 0 || (size_t)n >= sizeof(cmd))
        return -1;
    return system(cmd);
}

static int teardown(void **state)
{
    fixture *f = *state;
    sandlet_static_set_openat2(true);
    int rc = close(f->rootfd);
    rc |= rm_tree(f->root);
    rc |= rm_tree(f->outside);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* ---- path helpers ------------------------------------------------------- */

/* Opens target; on success reads the content into buf (always checked
 * against the secret), closes the fd and returns 0. */
static int try_open(const fixture *f, const char *target, char *buf, size_t buflen, char *key,
                    size_t keylen)
{
    int fd = 12345;
    struct stat st;
    memset(&st, 0, sizeof(st));
    int rc =
        sandlet_static_open(f->rootfd, target, strlen(target), "index.html", &fd, &st, key, keylen);
    if (rc < 0) {
        assert_int_equal(fd, -1);
        if (key && keylen)
            assert_string_equal(key, "");
        return rc;
    }
    assert_int_equal(rc, 0);
    assert_true(fd >= 0);
    assert_true(S_ISREG(st.st_mode));
    int fl = fcntl(fd, F_GETFL);
    assert_true(fl >= 0);
    /* O_NONBLOCK may stay: it means nothing for a regular file. */
    assert_int_equal(fl & O_ACCMODE, O_RDONLY);
    int fdfl = fcntl(fd, F_GETFD);
    assert_true(fdfl >= 0 && (fdfl & FD_CLOEXEC));
    char tmp[256];
    ssize_t n = read(fd, tmp, sizeof(tmp) - 1);
    assert_true(n >= 0);
    tmp[n] = '\0';
    assert_int_equal((off_t)n, st.st_size);
    assert_null(strstr(tmp, SECRET));
    if (buf) {
        assert_true(buflen > (size_t)n);
        memcpy(buf, tmp, (size_t)n + 1);
    }
    assert_int_equal(close(fd), 0);
    return 0;
}

static void expect_content(const fixture *f, const char *target, const char *content,
                           const char *ext)
{
    char buf[256], key[SANDLET_STATIC_EXT_MAX];
    int rc = try_open(f, target, buf, sizeof(buf), key, sizeof(key));
    if (rc != 0)
        fail_msg("%s: expected success, got %d (%s)", target, rc, strerror(-rc));
    assert_string_equal(buf, content);
    assert_string_equal(key, ext);
}

static void expect_rc(const fixture *f, const char *target, int want)
{
    char key[SANDLET_STATIC_EXT_MAX];
    int rc = try_open(f, target, NULL, 0, key, sizeof(key));
    if (rc != want)
        fail_msg("%s: expected %d (%s), got %d (%s)", target, want, strerror(-want), rc,
                 rc < 0 ? strerror(-rc) : "opened");
}

/* ---- path resolution ---------------------------------------------------- */

static void check_plain_files(const fixture *f)
{
    expect_content(f, "/a.txt", "hello", "txt");
    expect_content(f, "/Upper.HTML", "upper", "html");
    expect_content(f, "/.hidden", "dotfile", "");
    expect_content(f, "/noext", "noext", "");
    expect_content(f, "/sub/page.css", "body{}", "css");
    expect_content(f, "/sub/inner/deep.js", "deep", "js");
    expect_content(f, "/noindex/x.txt", "x", "txt");
    expect_content(f, "/plus+name.txt", "plus", "txt");
    expect_content(f, "/plus%2Bname.txt", "plus", "txt");
    expect_content(f, "/sp%20ace.txt", "space", "txt");
    expect_content(f, "/%C3%A9t%c3%a9.txt", "utf8", "txt");
    expect_content(f, "/%61.txt", "hello", "txt");
    /* decoded once: "%252e%252e" is the file literally named "%2e%2e" */
    expect_content(f, "/%252e%252e", "literal percent", "");
    /* an extension too long for mime_key is reported as unknown */
    expect_content(f, "/long.abcdefghijklmnopqrstuvwxyz0123456789", "longext", "");

    expect_rc(f, "/missing", -ENOENT);
    expect_rc(f, "/missing/", -ENOENT);
    expect_rc(f, "/sub/missing.css", -ENOENT);
    expect_rc(f, "/a.txt/", -ENOENT);
    expect_rc(f, "/a.txt/x", -ENOENT);
    expect_rc(f, "/plus name.txt", -ENOENT); /* '+' is not decoded to a space */
    expect_rc(f, "/plus%20name.txt", -ENOENT);
}

static void check_directories(const fixture *f)
{
    expect_content(f, "/", "root index", "html");
    expect_content(f, "/sub/", "sub index", "html");
    expect_content(f, "/sub/index.html", "sub index", "html");
    expect_rc(f, "/sub", -EISDIR);
    expect_rc(f, "/sub/inner", -EISDIR);
    expect_rc(f, "/noindex", -EISDIR);
    expect_rc(f, "/noindex/", -ENOENT);
    expect_rc(f, "/sub/inner/", -ENOENT);
    expect_rc(f, "/idxdir/", -ENOENT); /* index.html is a directory */
    expect_rc(f, "/idxfifo/", -EACCES);
}

/* Requests that must be refused whatever the resolver. */
static void check_traversal(const fixture *f)
{
    static const struct {
        const char *target;
        int rc;
    } cases[] = {
        {"..", -EINVAL},
        {"", -EINVAL},
        {"a.txt", -EINVAL},
        {"/..", -EINVAL},
        {"/../", -EINVAL},
        {"/../x", -EINVAL},
        {"/a/../../x", -EINVAL},
        {"/sub/../a.txt", -EINVAL},
        {"/sub/..", -EINVAL},
        {"/.", -EINVAL},
        {"/./a.txt", -EINVAL},
        {"/a/./b", -EINVAL},
        {"/sub/.", -EINVAL},
        {"%2e%2e/", -EINVAL},
        {"/%2e%2e/", -EINVAL},
        {"/%2E%2e", -EINVAL},
        {"/%2e%2E/%2e%2e/etc/passwd", -EINVAL},
        {"/.%2e/x", -EINVAL},
        {"/%2e/a.txt", -EINVAL},
        {"%2f..%2f", -EINVAL},
        {"/%2f..%2f", -EINVAL},
        {"/%2Fetc/passwd", -EINVAL},
        {"/sub%2findex.html", -EINVAL},
        {"/..%5c", -EINVAL},
        {"/..%5C..%5Cx", -EINVAL},
        {"/\\..\\", -EINVAL},
        {"\\..\\", -EINVAL},
        {"/sub\\index.html", -EINVAL},
        {"/a.txt%00", -EINVAL},
        {"/a.txt%00.html", -EINVAL},
        {"/%00", -EINVAL},
        {"/%zz", -EINVAL},
        {"/%", -EINVAL},
        {"/%2", -EINVAL},
        {"/a%2", -EINVAL},
        {"/%g0", -EINVAL},
        {"/%+1", -EINVAL},
        {"/% 1", -EINVAL},
        {"/%c0%ae%c0%ae/", -EINVAL},               /* overlong '.' */
        {"/%c0%ae%c0%ae/%c0%ae%c0%ae/x", -EINVAL}, /* overlong '.' */
        {"/%c0%af", -EINVAL},                      /* overlong '/' */
        {"/%e0%80%ae", -EINVAL},                   /* overlong '.' (3 bytes) */
        {"/%f0%80%80%ae", -EINVAL},                /* overlong '.' (4 bytes) */
        {"/%ed%a0%80", -EINVAL},                   /* surrogate */
        {"/%f4%90%80%80", -EINVAL},                /* above U+10FFFF */
        {"/%c3", -EINVAL},                         /* truncated sequence */
        {"/%ff", -EINVAL},
        {"/\xc0\xae\xc0\xae/x", -EINVAL}, /* the same, raw */
        {"/a%0a", -EINVAL},
        {"/a%0d%0aX: y", -EINVAL},
        {"/a%7f", -EINVAL},
        {"/a\tb", -EINVAL},
        {"/a\x01", -EINVAL},
        {"//", -EINVAL},
        {"//etc/passwd", -EINVAL},
        {"/sub//index.html", -EINVAL},
        {"/sub///", -EINVAL},
        {"/%2e%2e%2f%2e%2e%2fetc%2fpasswd", -EINVAL},
        {"/.../", -ENOENT}, /* just a name */
        {"/..a", -ENOENT},  /* just a name */
        {"/a..", -ENOENT},  /* just a name */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_rc(f, cases[i].target, cases[i].rc);
}

/* Entries that are neither regular files nor directories. */
static void check_nonregular(const fixture *f)
{
    /* A FIFO opened for reading would block: the alarm fails the test. */
    alarm(10);
    expect_rc(f, "/fifo", -EACCES);
    expect_rc(f, "/fifo/", -ENOENT);
    expect_rc(f, "/idxfifo/", -EACCES);
    if (f->have_dev)
        expect_rc(f, "/dev_null", -EACCES);
    alarm(0);
}

static void test_open_openat2(void **state)
{
    const fixture *f = *state;
    if (!f->have_openat2)
        skip();
    sandlet_static_set_openat2(true);
    check_plain_files(f);
    check_directories(f);
    check_traversal(f);
    check_nonregular(f);
}

static void test_open_symlinks_openat2(void **state)
{
    const fixture *f = *state;
    if (!f->have_openat2)
        skip();
    sandlet_static_set_openat2(true);
    /* inside, relative: served */
    expect_content(f, "/link_in", "hello", "");
    expect_content(f, "/sub/link_up", "hello", "");
    expect_content(f, "/link_dir/page.css", "body{}", "css");
    expect_content(f, "/link_dir/", "sub index", "html");
    expect_rc(f, "/link_dir", -EISDIR);
    expect_content(f, "/lnkidx/", "root index", "html");
    /* leaving the docroot, or absolute: refused */
    expect_rc(f, "/link_out", -EACCES);
    expect_rc(f, "/link_out_rel", -EACCES);
    expect_rc(f, "/link_out_dir/secret.txt", -EACCES);
    expect_rc(f, "/link_out_dir/", -EACCES);
    expect_rc(f, "/link_abs_in", -EACCES);
    expect_rc(f, "/up/", -EACCES);
    expect_rc(f, "/up", -EACCES);
    expect_rc(f, "/proc_self/etc/passwd", -EACCES);
    expect_rc(f, "/badidx/", -EACCES);
    expect_rc(f, "/loop", -EACCES);
}

static void test_open_fallback(void **state)
{
    const fixture *f = *state;
    sandlet_static_set_openat2(false);
    check_plain_files(f);
    check_directories(f);
    check_traversal(f);
    check_nonregular(f);
    /* The walk follows no symlink at all, inside or out. */
    static const char *const links[] = {
        "/link_in",
        "/sub/link_up",
        "/link_dir/page.css",
        "/link_dir/",
        "/lnkidx/",
        "/link_out",
        "/link_out_rel",
        "/link_out_dir/secret.txt",
        "/link_abs_in",
        "/up/",
        "/proc_self/etc/passwd",
        "/badidx/",
        "/loop",
        "/link_out_dir/",
        "/up/sandlet-static-x/a.txt",
    };
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        int rc = try_open(f, links[i], NULL, 0, NULL, 0);
        if (rc != -EACCES && rc != -ENOENT)
            fail_msg("%s: expected -EACCES or -ENOENT, got %d", links[i], rc);
    }
    expect_rc(f, "/link_in", -EACCES);
    expect_rc(f, "/link_out", -EACCES);
    expect_rc(f, "/lnkidx/", -EACCES);
    sandlet_static_set_openat2(true);
}

static void test_open_arguments(void **state)
{
    const fixture *f = *state;
    int fd = 7;
    struct stat st;
    char key[8] = "junk";

    /* not NUL-terminated: only len bytes count */
    const char raw[] = "/a.txtJUNK";
    assert_int_equal(sandlet_static_open(f->rootfd, raw, 6, "index.html", &fd, &st, key, 8), 0);
    assert_string_equal(key, "txt");
    assert_int_equal(close(fd), 0);
    const char q[] = "/sub/?x=1";
    assert_int_equal(sandlet_static_open(f->rootfd, q, 5, "index.html", &fd, &st, key, 8), 0);
    assert_string_equal(key, "html");
    assert_int_equal(close(fd), 0);

    /* mime_key optional; too small for the extension gives "" */
    assert_int_equal(sandlet_static_open(f->rootfd, "/a.txt", 6, "index.html", &fd, &st, NULL, 0),
                     0);
    assert_int_equal(close(fd), 0);
    assert_int_equal(sandlet_static_open(f->rootfd, "/a.txt", 6, "index.html", &fd, &st, key, 3),
                     0);
    assert_string_equal(key, "");
    assert_int_equal(close(fd), 0);

    /* bad arguments */
    assert_int_equal(sandlet_static_open(f->rootfd, NULL, 0, "index.html", &fd, &st, key, 8),
                     -EINVAL);
    assert_int_equal(fd, -1);
    assert_int_equal(sandlet_static_open(f->rootfd, "/", 1, "index.html", NULL, &st, key, 8),
                     -EINVAL);
    assert_int_equal(sandlet_static_open(f->rootfd, "/", 1, "index.html", &fd, NULL, key, 8),
                     -EINVAL);
    assert_int_equal(sandlet_static_open(-1, "/", 1, "index.html", &fd, &st, key, 8), -EINVAL);
    assert_int_equal(sandlet_static_open(f->rootfd, "/", 0, "index.html", &fd, &st, key, 8),
                     -EINVAL);
    static const char *const bad_index[] = {NULL, "", ".", "..", "a/b", "/index.html"};
    for (size_t i = 0; i < sizeof(bad_index) / sizeof(bad_index[0]); i++)
        assert_int_equal(sandlet_static_open(f->rootfd, "/", 1, bad_index[i], &fd, &st, key, 8),
                         -EINVAL);

    /* a file as docroot: nothing beneath it */
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/a.txt", f->root);
    int filefd = open(p, O_RDONLY | O_CLOEXEC);
    assert_true(filefd >= 0);
    assert_int_equal(sandlet_static_open(filefd, "/x", 2, "index.html", &fd, &st, key, 8), -ENOENT);
    assert_int_equal(close(filefd), 0);

    /* lengths */
    static char big[SANDLET_STATIC_PATH_MAX + 64];
    big[0] = '/';
    for (size_t i = 1; i < sizeof(big); i++)
        big[i] = (i % 200 == 0) ? '/' : 'a';
    assert_int_equal(
        sandlet_static_open(f->rootfd, big, sizeof(big), "index.html", &fd, &st, key, 8),
        -ENAMETOOLONG);
    assert_int_equal(fd, -1);
    /* a segment over NAME_MAX */
    memset(big + 1, 'b', NAME_MAX + 1);
    assert_int_equal(
        sandlet_static_open(f->rootfd, big, NAME_MAX + 2, "index.html", &fd, &st, key, 8),
        -ENAMETOOLONG);
    /* exactly NAME_MAX: valid, just missing */
    assert_int_equal(
        sandlet_static_open(f->rootfd, big, NAME_MAX + 1, "index.html", &fd, &st, key, 8), -ENOENT);
    /* a real directory whose path fits, but not with the index name appended:
     * "/" + 20 segments of 199 bytes + one of 90, each with its '/' */
    char target[SANDLET_STATIC_PATH_MAX];
    size_t tl = 0;
    target[tl++] = '/';
    int dfd = dup(f->rootfd);
    assert_true(dfd >= 0);
    for (int level = 0; level < 21; level++) {
        char name[200];
        size_t nl = level < 20 ? 199 : 90;
        memset(name, 'd', nl);
        name[nl] = '\0';
        assert_int_equal(mkdirat(dfd, name, 0755), 0);
        int next = openat(dfd, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
        assert_true(next >= 0);
        assert_int_equal(close(dfd), 0);
        dfd = next;
        memcpy(target + tl, name, nl);
        tl += nl;
        target[tl++] = '/';
    }
    assert_int_equal(close(dfd), 0);
    assert_int_equal(tl, 4092);
    assert_true(tl + strlen("index.html") + 1 > SANDLET_STATIC_PATH_MAX);
    assert_int_equal(sandlet_static_open(f->rootfd, target, tl, "index.html", &fd, &st, key, 8),
                     -ENAMETOOLONG);
    assert_int_equal(sandlet_static_open(f->rootfd, target, tl, "i", &fd, &st, key, 8), -ENOENT);
    assert_int_equal(sandlet_static_open(f->rootfd, target, tl - 1, "index.html", &fd, &st, key, 8),
                     -EISDIR);
}

/* ---- MIME --------------------------------------------------------------- */

static void test_mime_builtin(void **state)
{
    (void)state;
    static const struct {
        const char *ext, *type;
    } cases[] = {
        {"html", "text/html; charset=utf-8"},
        {"HTML", "text/html; charset=utf-8"},
        {"htm", "text/html; charset=utf-8"},
        {"css", "text/css; charset=utf-8"},
        {"js", "text/javascript; charset=utf-8"},
        {"mjs", "text/javascript; charset=utf-8"},
        {"json", "application/json"},
        {"txt", "text/plain; charset=utf-8"},
        {"xml", "application/xml"},
        {"svg", "image/svg+xml"},
        {"png", "image/png"},
        {"jpg", "image/jpeg"},
        {"jpeg", "image/jpeg"},
        {"gif", "image/gif"},
        {"webp", "image/webp"},
        {"ico", "image/vnd.microsoft.icon"},
        {"pdf", "application/pdf"},
        {"wasm", "application/wasm"},
        {"woff", "font/woff"},
        {"woff2", "font/woff2"},
        {"mp4", "video/mp4"},
        {"avif", "image/avif"},
        {"bmp", "image/bmp"},
        {"csv", "text/csv; charset=utf-8"},
        {"gz", "application/gzip"},
        {"jsonld", "application/ld+json"},
        {"m4a", "audio/mp4"},
        {"map", "application/json"},
        {"md", "text/markdown; charset=utf-8"},
        {"mp3", "audio/mpeg"},
        {"oga", "audio/ogg"},
        {"ogg", "audio/ogg"},
        {"ogv", "video/ogg"},
        {"otf", "font/otf"},
        {"tar", "application/x-tar"},
        {"ttf", "font/ttf"},
        {"wav", "audio/wav"},
        {"webm", "video/webm"},
        {"webmanifest", "application/manifest+json"},
        {"xhtml", "application/xhtml+xml"},
        {"zip", "application/zip"},
        {"nosuchext", "application/octet-stream"},
        {"", "application/octet-stream"},
        {"h", "application/octet-stream"},
        {"abcdefghijklmnopqrstuvwxyz0123456789", "application/octet-stream"},
    };
    sandlet_mime empty;
    memset(&empty, 0, sizeof(empty));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_string_equal(sandlet_static_mime(NULL, cases[i].ext), cases[i].type);
        assert_string_equal(sandlet_static_mime(&empty, cases[i].ext), cases[i].type);
    }
    assert_string_equal(sandlet_static_mime(NULL, NULL), "application/octet-stream");
}

static void test_mime_file(void **state)
{
    const fixture *f = *state;
    char line[SANDLET_MIME_LINE_MAX + 64];
    memset(line, 'z', sizeof(line));
    memcpy(line, "text/long zzz", 13);
    line[sizeof(line) - 1] = '\0';

    char body[4096];
    int n = snprintf(body, sizeof(body),
                     "# a comment line\n"
                     "\n"
                     "application/x-foo\tfoo FOO2 # trailing comment bar\n"
                     "text/x-bar   bar\r\n"
                     "application/x-dup dup\n"
                     "application/x-dup2 dup dup3\n"
                     "html application/x-not-a-type\n"
                     "text/html htm html shtml\n"
                     "image/x-custom png\n"
                     "bad-type ext1\n"
                     "bad/ty\"pe ext2\n"
                     "/x ext3\n"
                     "x/ ext4\n"
                     "application/x-ok ok bad:ext b/ad ok2\n"
                     "application/x-empty\n"
                     "%s\n"
                     "application/x-last last",
                     line);
    assert_true(n > 0 && (size_t)n < sizeof(body));
    write_file(f->outside, "mime.types", body);

    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/mime.types", f->outside);
    sandlet_mime m;
    assert_int_equal(sandlet_static_mime_load(&m, p), 0);
    assert_string_equal(sandlet_static_mime(&m, "foo"), "application/x-foo");
    assert_string_equal(sandlet_static_mime(&m, "FoO"), "application/x-foo");
    assert_string_equal(sandlet_static_mime(&m, "foo2"), "application/x-foo");
    assert_string_equal(sandlet_static_mime(&m, "bar"), "text/x-bar; charset=utf-8");
    assert_string_equal(sandlet_static_mime(&m, "dup"), "application/x-dup");
    assert_string_equal(sandlet_static_mime(&m, "dup3"), "application/x-dup2");
    assert_string_equal(sandlet_static_mime(&m, "shtml"), "text/html; charset=utf-8");
    assert_string_equal(sandlet_static_mime(&m, "png"), "image/x-custom"); /* file wins */
    assert_string_equal(sandlet_static_mime(&m, "ok"), "application/x-ok");
    assert_string_equal(sandlet_static_mime(&m, "ok2"), "application/x-ok");
    assert_string_equal(sandlet_static_mime(&m, "last"), "application/x-last");
    /* not in the file: built-in, then octet-stream */
    assert_string_equal(sandlet_static_mime(&m, "css"), "text/css; charset=utf-8");
    assert_string_equal(sandlet_static_mime(&m, "woff2"), "font/woff2");
    static const char *const unknown[] = {"ext1", "ext2", "ext3", "ext4",   "zzz",
                                          "bad",  "b",    "ad",   "comment"};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
        assert_string_equal(sandlet_static_mime(&m, unknown[i]), "application/octet-stream");
    assert_int_equal(m.count, 12);
    sandlet_static_mime_free(&m);
    sandlet_static_mime_free(&m); /* idempotent */
    assert_null(m.arena);

    /* failures leave a usable empty table */
    snprintf(p, sizeof(p), "%s/no-such-file", f->outside);
    assert_int_equal(sandlet_static_mime_load(&m, p), -ENOENT);
    assert_string_equal(sandlet_static_mime(&m, "html"), "text/html; charset=utf-8");
    sandlet_static_mime_free(&m);
    assert_int_equal(sandlet_static_mime_load(&m, f->outside), -EINVAL); /* a directory */
    sandlet_static_mime_free(&m);
    assert_int_equal(sandlet_static_mime_load(&m, NULL), -EINVAL);
    sandlet_static_mime_free(&m);
    assert_int_equal(sandlet_static_mime_load(NULL, p), -EINVAL);

    /* an empty file, and one over the size bound */
    write_file(f->outside, "empty.types", "");
    snprintf(p, sizeof(p), "%s/empty.types", f->outside);
    assert_int_equal(sandlet_static_mime_load(&m, p), 0);
    assert_int_equal(m.count, 0);
    assert_string_equal(sandlet_static_mime(&m, "png"), "image/png");
    sandlet_static_mime_free(&m);
    snprintf(p, sizeof(p), "%s/big.types", f->outside);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)SANDLET_MIME_FILE_MAX + 1), 0);
    assert_int_equal(close(fd), 0);
    assert_int_equal(sandlet_static_mime_load(&m, p), -EFBIG);
    sandlet_static_mime_free(&m);

    /* the entry bound: SANDLET_MIME_ENTRIES_MAX + 100 distinct extensions */
    snprintf(p, sizeof(p), "%s/many.types", f->outside);
    FILE *fp = fopen(p, "we");
    assert_non_null(fp);
    for (int i = 0; i < SANDLET_MIME_ENTRIES_MAX + 100; i++)
        assert_true(fprintf(fp, "application/x-n%d e%d\n", i, i) > 0);
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(sandlet_static_mime_load(&m, p), 0);
    assert_int_equal(m.count, SANDLET_MIME_ENTRIES_MAX);
    assert_string_equal(sandlet_static_mime(&m, "e0"), "application/x-n0");
    assert_string_equal(sandlet_static_mime(&m, "e16383"), "application/x-n16383");
    assert_string_equal(sandlet_static_mime(&m, "e16384"), "application/octet-stream");
    sandlet_static_mime_free(&m);
}

static void test_mime_system(void **state)
{
    (void)state;
    if (access("/etc/mime.types", R_OK) != 0)
        skip(); /* Debian: apt-get install media-types */
    sandlet_mime m;
    assert_int_equal(sandlet_static_mime_load(&m, "/etc/mime.types"), 0);
    assert_true(m.count > 500);
    assert_string_equal(sandlet_static_mime(&m, "html"), "text/html; charset=utf-8");
    assert_string_equal(sandlet_static_mime(&m, "css"), "text/css; charset=utf-8");
    assert_string_equal(sandlet_static_mime(&m, "png"), "image/png");
    assert_string_equal(sandlet_static_mime(&m, "PDF"), "application/pdf");
    assert_string_equal(sandlet_static_mime(&m, "txt"), "text/plain; charset=utf-8");
    assert_string_equal(sandlet_static_mime(&m, "definitely-not-an-ext"),
                        "application/octet-stream");
    /* every type is a safe header value */
    for (size_t i = 0; i < m.nslots; i++) {
        if (m.slots[i].ext == UINT32_MAX)
            continue;
        for (const char *c = m.arena + m.slots[i].type; *c; c++)
            assert_true(*c >= 0x20 && *c < 0x7f);
    }
    sandlet_static_mime_free(&m);
}

/* ---- validators --------------------------------------------------------- */

static void test_etag(void **state)
{
    (void)state;
    struct stat st;
    memset(&st, 0, sizeof(st));
    st.st_mtim.tv_sec = 1700000000;
    st.st_mtim.tv_nsec = 123456789;
    st.st_size = 4096;
    st.st_ino = 42;
    char a[SANDLET_STATIC_ETAG_MAX], b[SANDLET_STATIC_ETAG_MAX];
    sandlet_static_etag(&st, a, sizeof(a));
    assert_string_equal(a, "\"6553f100-75bcd15-1000-2a\"");
    sandlet_static_etag(&st, b, sizeof(b));
    assert_string_equal(a, b);

    struct stat st2 = st;
    st2.st_mtim.tv_sec++;
    sandlet_static_etag(&st2, b, sizeof(b));
    assert_string_not_equal(a, b);
    st2 = st;
    st2.st_mtim.tv_nsec++;
    sandlet_static_etag(&st2, b, sizeof(b));
    assert_string_not_equal(a, b);
    st2 = st;
    st2.st_size++;
    sandlet_static_etag(&st2, b, sizeof(b));
    assert_string_not_equal(a, b);
    st2 = st;
    st2.st_ino++;
    sandlet_static_etag(&st2, b, sizeof(b));
    assert_string_not_equal(a, b);

    /* the largest values still fit */
    st2.st_mtim.tv_sec = -1;
    st2.st_mtim.tv_nsec = 999999999;
    st2.st_size = INT64_MAX;
    st2.st_ino = UINT64_MAX;
    sandlet_static_etag(&st2, b, sizeof(b));
    assert_true(strlen(b) > 50 && strlen(b) < SANDLET_STATIC_ETAG_MAX);
    assert_int_equal(b[0], '"');
    assert_int_equal(b[strlen(b) - 1], '"');

    /* too small a buffer gives "" */
    char small[SANDLET_STATIC_ETAG_MAX - 1];
    memset(small, 'x', sizeof(small));
    sandlet_static_etag(&st, small, sizeof(small));
    assert_string_equal(small, "");
    sandlet_static_etag(&st, small, 0); /* no write at all */
    sandlet_static_etag(NULL, a, sizeof(a));
    assert_string_equal(a, "");
}

static void test_http_date(void **state)
{
    (void)state;
    char d[SANDLET_STATIC_DATE_MAX];
    sandlet_static_http_date(784111777, d, sizeof(d));
    assert_string_equal(d, "Sun, 06 Nov 1994 08:49:37 GMT");
    sandlet_static_http_date(0, d, sizeof(d));
    assert_string_equal(d, "Thu, 01 Jan 1970 00:00:00 GMT");
    sandlet_static_http_date(951782400, d, sizeof(d));
    assert_string_equal(d, "Tue, 29 Feb 2000 00:00:00 GMT");
    sandlet_static_http_date(253402300799, d, sizeof(d));
    assert_string_equal(d, "Fri, 31 Dec 9999 23:59:59 GMT");
    sandlet_static_http_date(253402300800, d, sizeof(d)); /* year 10000 */
    assert_string_equal(d, "");
    char small[SANDLET_STATIC_DATE_MAX - 1];
    sandlet_static_http_date(0, small, sizeof(small));
    assert_string_equal(small, "");

    /* round trips over a wide range, leap days included */
    for (int64_t t = -2208988800; t < 4102444800; t += 86400 * 7 + 3601) {
        time_t back;
        sandlet_static_http_date((time_t)t, d, sizeof(d));
        assert_int_equal(strlen(d), 29);
        assert_int_equal(sandlet_static_parse_http_date(d, &back), 0);
        assert_int_equal((int64_t)back, t);
    }
}

static void test_parse_http_date(void **state)
{
    (void)state;
    static const char *const good[] = {
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "  Sun, 06 Nov 1994 08:49:37 GMT\t",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
        "Sun Nov 06 08:49:37 1994",
        "Mon, 06 Nov 1994 08:49:37 GMT", /* wrong weekday: tolerated */
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        time_t t = 0;
        if (sandlet_static_parse_http_date(good[i], &t) != 0)
            fail_msg("rejected '%s'", good[i]);
        assert_int_equal((int64_t)t, 784111777);
    }
    time_t t;
    assert_int_equal(sandlet_static_parse_http_date("Thu, 29 Feb 2024 12:00:00 GMT", &t), 0);
    assert_int_equal((int64_t)t, 1709208000);
    assert_int_equal(sandlet_static_parse_http_date("Wed, 31 Dec 2008 23:59:60 GMT", &t), 0);
    assert_int_equal((int64_t)t, 1230768000); /* a leap second rolls over */

    static const char *const bad[] = {
        "",
        " ",
        "0",
        "784111777",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37 gmt",
        "sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT",
        "Sun,  06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMTx",
        "Sun, 06 Nov 1994 08:49:37",
        "Sun, 06 Nov 1994 08:49:3a GMT",
        "Sun, 06 Nov 1994 08-49-37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 23:60:00 GMT",
        "Sun, 06 Nov 1994 23:59:61 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 31 Nov 1994 08:49:37 GMT",
        "Sun, 29 Feb 2023 08:49:37 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT",
        "Xyz, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Xyz 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994\r\n08:49:37 GMT",
        "Sun, 06 Nov +994 08:49:37 GMT",
        "Sun, 06 Nov -994 08:49:37 GMT",
        "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sunday, 06 Nov 94 08:49:37 GMT",
        "Sundae, 06-Nov-94 08:49:37 GMT",
        "Sun, 06-Nov-94 08:49:37 GMT",
        "Sunday,06-Nov-94 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 UTC",
        "Sun Nov  6 08:49:37 94",
        "Sun Nov 6 08:49:37 1994",
        "Sun Nov  6 08:49:37 1994 GMT",
        "Sun Nov 31 08:49:37 1994",
        "Sun Nov  0 08:49:37 1994",
        "Sun, 06 Nov 1994 08:49:37 GMT\xff",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t = 99;
        if (sandlet_static_parse_http_date(bad[i], &t) != -EINVAL)
            fail_msg("accepted '%s'", bad[i]);
        assert_int_equal((int64_t)t, 99);
    }
    assert_int_equal(sandlet_static_parse_http_date(NULL, &t), -EINVAL);
    assert_int_equal(sandlet_static_parse_http_date(good[0], NULL), -EINVAL);
    /* a long junk string is rejected without being scanned to the end */
    static char junk[100000];
    memset(junk, 'a', sizeof(junk) - 1);
    assert_int_equal(sandlet_static_parse_http_date(junk, &t), -EINVAL);
}

static void test_not_modified(void **state)
{
    (void)state;
    const char *etag = "\"abc-1\"";
    const time_t mtime = 784111777;
    const char *same = "Sun, 06 Nov 1994 08:49:37 GMT";
    const char *older = "Sun, 06 Nov 1994 08:49:36 GMT";
    const char *newer = "Sun, 06 Nov 1994 08:49:38 GMT";

    /* nothing conditional */
    assert_false(sandlet_static_not_modified(NULL, NULL, etag, mtime));
    /* If-None-Match */
    assert_true(sandlet_static_not_modified("\"abc-1\"", NULL, etag, mtime));
    assert_true(sandlet_static_not_modified("  \"abc-1\"  ", NULL, etag, mtime));
    assert_true(sandlet_static_not_modified("W/\"abc-1\"", NULL, etag, mtime));
    assert_true(sandlet_static_not_modified("\"abc-1\"", NULL, "W/\"abc-1\"", mtime));
    assert_true(sandlet_static_not_modified("\"x\", \"abc-1\"", NULL, etag, mtime));
    assert_true(sandlet_static_not_modified("\"x\",W/\"abc-1\" ,\"y\"", NULL, etag, mtime));
    assert_true(sandlet_static_not_modified(", ,\"abc-1\",", NULL, etag, mtime));
    assert_true(sandlet_static_not_modified("*", NULL, etag, mtime));
    assert_true(sandlet_static_not_modified(" * ", NULL, NULL, mtime));
    assert_false(sandlet_static_not_modified("\"abc-2\"", NULL, etag, mtime));
    assert_false(sandlet_static_not_modified("\"abc-1", NULL, etag, mtime));
    assert_false(sandlet_static_not_modified("abc-1", NULL, etag, mtime));
    assert_false(sandlet_static_not_modified("\"ABC-1\"", NULL, etag, mtime));
    assert_false(sandlet_static_not_modified("w/\"abc-1\"", NULL, etag, mtime));
    assert_false(sandlet_static_not_modified("\"x\" \"abc-1\"", NULL, etag, mtime));
    assert_false(sandlet_static_not_modified("\"abc-1\", junk", NULL, etag, mtime));
    assert_false(sandlet_static_not_modified("*, \"abc-1\"", NULL, etag, mtime));
    assert_false(sandlet_static_not_modified("\"abc-1\"", NULL, NULL, mtime));
    assert_false(sandlet_static_not_modified("\"abc-1\"", NULL, "", mtime));
    assert_false(sandlet_static_not_modified("", NULL, etag, mtime));
    assert_false(sandlet_static_not_modified("\"\"", NULL, etag, mtime));
    /* If-Modified-Since */
    assert_true(sandlet_static_not_modified(NULL, same, etag, mtime));
    assert_true(sandlet_static_not_modified(NULL, newer, etag, mtime));
    assert_false(sandlet_static_not_modified(NULL, older, etag, mtime));
    assert_false(sandlet_static_not_modified(NULL, "yesterday", etag, mtime));
    assert_false(sandlet_static_not_modified(NULL, "", etag, mtime));
    assert_true(sandlet_static_not_modified(NULL, "Sunday, 06-Nov-94 08:49:37 GMT", etag, mtime));
    /* If-None-Match present: If-Modified-Since is ignored */
    assert_false(sandlet_static_not_modified("\"other\"", same, etag, mtime));
    assert_false(sandlet_static_not_modified("\"other\"", newer, etag, mtime));
    assert_true(sandlet_static_not_modified("\"abc-1\"", older, etag, mtime));
    assert_false(sandlet_static_not_modified("junk", same, etag, mtime));
}

/* ---- Range -------------------------------------------------------------- */

typedef struct range_case {
    const char *range;
    const char *if_range;
    uint64_t size;
    int rc;
    uint64_t start, length;
} range_case;

static void test_range(void **state)
{
    (void)state;
    const char *etag = "\"abc-1\"";
    const time_t mtime = 784111777;
    static const range_case cases[] = {
        {NULL, NULL, 100, 0, 0, 0},
        {"bytes=0-0", NULL, 100, 1, 0, 1},
        {"bytes=0-", NULL, 100, 1, 0, 100},
        {"bytes=0-99", NULL, 100, 1, 0, 100},
        {"bytes=10-19", NULL, 100, 1, 10, 10},
        {"bytes=99-", NULL, 100, 1, 99, 1},
        {"bytes=99-99", NULL, 100, 1, 99, 1},
        {"bytes=-1", NULL, 100, 1, 99, 1},
        {"bytes=-100", NULL, 100, 1, 0, 100},
        {"bytes=-500", NULL, 100, 1, 0, 100},
        {"bytes=-0", NULL, 100, -ERANGE, 0, 0},
        {"bytes=-000", NULL, 100, -ERANGE, 0, 0},
        {"bytes=5-2", NULL, 100, 0, 0, 0},
        {"bytes=100-", NULL, 100, -ERANGE, 0, 0},
        {"bytes=100-200", NULL, 100, -ERANGE, 0, 0},
        {"bytes=1000-", NULL, 100, -ERANGE, 0, 0},
        {"bytes=50-1000", NULL, 100, 1, 50, 50},
        {"bytes=0-18446744073709551615", NULL, 100, 1, 0, 100},
        {"bytes=0-99999999999999999999999999", NULL, 100, 1, 0, 100},
        {"bytes=99999999999999999999999999-", NULL, 100, -ERANGE, 0, 0},
        {"bytes=99999999999999999999999999-99999999999999999999999999999", NULL, 100, -ERANGE, 0,
         0},
        {"bytes=18446744073709551615-18446744073709551615", NULL, UINT64_MAX, -ERANGE, 0, 0},
        {"bytes=18446744073709551614-", NULL, UINT64_MAX, 1, UINT64_MAX - 1, 1},
        {"bytes=0-", NULL, UINT64_MAX, 1, 0, UINT64_MAX},
        {"bytes=-99999999999999999999999999", NULL, 100, 1, 0, 100},
        {"bytes=99999999999999999999999999-5", NULL, 100, 0, 0, 0},
        {"bytes=0-0,5-6", NULL, 100, 0, 0, 0},
        {"bytes=0-0, -1", NULL, 100, 0, 0, 0},
        {"bytes=200-300,400-500", NULL, 100, 0, 0, 0},
        {"items=0-1", NULL, 100, 0, 0, 0},
        {"bytes 0-1", NULL, 100, 0, 0, 0},
        {"byte=0-1", NULL, 100, 0, 0, 0},
        {"bytesx=0-1", NULL, 100, 0, 0, 0},
        {"=0-1", NULL, 100, 0, 0, 0},
        {"BYTES=0-1", NULL, 100, 1, 0, 2},
        {"Bytes=0-1", NULL, 100, 1, 0, 2},
        {"  bytes=0-1  ", NULL, 100, 1, 0, 2},
        {"bytes= 0-1", NULL, 100, 1, 0, 2},
        {"bytes=0-1 ,", NULL, 100, 1, 0, 2},
        {"bytes=,0-1", NULL, 100, 1, 0, 2},
        {"bytes =0-1", NULL, 100, 0, 0, 0},
        {"bytes=0 -1", NULL, 100, 0, 0, 0},
        {"bytes=0- 1", NULL, 100, 0, 0, 0},
        {"bytes=", NULL, 100, 0, 0, 0},
        {"bytes=,", NULL, 100, 0, 0, 0},
        {"bytes=-", NULL, 100, 0, 0, 0},
        {"bytes=a-b", NULL, 100, 0, 0, 0},
        {"bytes=+1-2", NULL, 100, 0, 0, 0},
        {"bytes=0x10-20", NULL, 100, 0, 0, 0},
        {"bytes=1-2-3", NULL, 100, 0, 0, 0},
        {"bytes=--1", NULL, 100, 0, 0, 0},
        {"bytes=1", NULL, 100, 0, 0, 0},
        {"bytes=0-0;x", NULL, 100, 0, 0, 0},
        /* empty representation */
        {"bytes=0-", NULL, 0, -ERANGE, 0, 0},
        {"bytes=0-0", NULL, 0, -ERANGE, 0, 0},
        {"bytes=-1", NULL, 0, 0, 0, 0},
        {"bytes=-0", NULL, 0, -ERANGE, 0, 0},
        /* If-Range */
        {"bytes=0-0", "\"abc-1\"", 100, 1, 0, 1},
        {"bytes=0-0", " \"abc-1\" ", 100, 1, 0, 1},
        {"bytes=0-0", "\"abc-2\"", 100, 0, 0, 0},
        {"bytes=0-0", "W/\"abc-1\"", 100, 0, 0, 0},
        {"bytes=0-0", "\"abc-1\", \"x\"", 100, 0, 0, 0},
        {"bytes=0-0", "\"abc-1", 100, 0, 0, 0},
        {"bytes=0-0", "Sun, 06 Nov 1994 08:49:37 GMT", 100, 1, 0, 1},
        {"bytes=0-0", "Sun, 06 Nov 1994 08:49:38 GMT", 100, 0, 0, 0},
        {"bytes=0-0", "Sun, 06 Nov 1994 08:49:36 GMT", 100, 0, 0, 0},
        {"bytes=0-0", "junk", 100, 0, 0, 0},
        {"bytes=0-0", "", 100, 0, 0, 0},
        {"bytes=500-", "\"abc-2\"", 100, 0, 0, 0}, /* If-Range fails first: 200 */
        {"bytes=500-", "\"abc-1\"", 100, -ERANGE, 0, 0},
        {"items=0-1", "\"abc-1\"", 100, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const range_case *c = &cases[i];
        uint64_t start = 777, length = 777;
        int rc = sandlet_static_range(c->range, c->if_range, etag, mtime, c->size, &start, &length);
        if (rc != c->rc)
            fail_msg("Range '%s' If-Range '%s' size %" PRIu64 ": want %d, got %d",
                     c->range ? c->range : "(null)", c->if_range ? c->if_range : "(null)", c->size,
                     c->rc, rc);
        if (rc == 1) {
            assert_int_equal(start, c->start);
            assert_int_equal(length, c->length);
            assert_true(length > 0 && start + length >= start && start + length <= c->size);
        } else {
            assert_int_equal(start, 777);
            assert_int_equal(length, 777);
        }
    }
    /* a weak own etag never satisfies If-Range; neither does a missing one */
    uint64_t s, l;
    assert_int_equal(
        sandlet_static_range("bytes=0-0", "\"abc-1\"", "W/\"abc-1\"", mtime, 10, &s, &l), 0);
    assert_int_equal(sandlet_static_range("bytes=0-0", "\"abc-1\"", NULL, mtime, 10, &s, &l), 0);
    assert_int_equal(sandlet_static_range("bytes=0-0", NULL, NULL, mtime, 10, &s, &l), 1);
    assert_int_equal(sandlet_static_range("bytes=0-0", NULL, NULL, mtime, 10, NULL, &l), 0);
}

/* Validators computed from a real file agree with each other. */
static void test_validators_on_file(void **state)
{
    const fixture *f = *state;
    int fd;
    struct stat st;
    char key[SANDLET_STATIC_EXT_MAX];
    assert_int_equal(
        sandlet_static_open(f->rootfd, "/a.txt", 6, "index.html", &fd, &st, key, sizeof(key)), 0);
    assert_int_equal(close(fd), 0);
    char etag[SANDLET_STATIC_ETAG_MAX], date[SANDLET_STATIC_DATE_MAX];
    sandlet_static_etag(&st, etag, sizeof(etag));
    sandlet_static_http_date(st.st_mtime, date, sizeof(date));
    assert_true(sandlet_static_not_modified(etag, NULL, etag, st.st_mtime));
    assert_true(sandlet_static_not_modified(NULL, date, etag, st.st_mtime));
    uint64_t s, l;
    assert_int_equal(
        sandlet_static_range("bytes=1-", etag, etag, st.st_mtime, (uint64_t)st.st_size, &s, &l), 1);
    assert_int_equal(s, 1);
    assert_int_equal(l, 4);
    assert_int_equal(
        sandlet_static_range("bytes=1-", date, etag, st.st_mtime, (uint64_t)st.st_size, &s, &l), 1);
    assert_string_equal(sandlet_static_mime(NULL, key), "text/plain; charset=utf-8");

    /* a rewrite with another size changes the ETag */
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/changing.txt", f->root);
    write_file(f->root, "changing.txt", "one");
    struct stat a, b;
    assert_int_equal(stat(p, &a), 0);
    write_file(f->root, "changing.txt", "three");
    assert_int_equal(stat(p, &b), 0);
    char e1[SANDLET_STATIC_ETAG_MAX], e2[SANDLET_STATIC_ETAG_MAX];
    sandlet_static_etag(&a, e1, sizeof(e1));
    sandlet_static_etag(&b, e2, sizeof(e2));
    assert_string_not_equal(e1, e2);
    assert_int_equal(unlink(p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_openat2),       cmocka_unit_test(test_open_symlinks_openat2),
        cmocka_unit_test(test_open_fallback),      cmocka_unit_test(test_open_arguments),
        cmocka_unit_test(test_mime_builtin),       cmocka_unit_test(test_mime_file),
        cmocka_unit_test(test_mime_system),        cmocka_unit_test(test_etag),
        cmocka_unit_test(test_http_date),          cmocka_unit_test(test_parse_http_date),
        cmocka_unit_test(test_not_modified),       cmocka_unit_test(test_range),
        cmocka_unit_test(test_validators_on_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * test_compile.c - the confined page compiler (src/csp/build.c) for real:
 * sandlet_page_build in a forked child dropped to an unprivileged uid
 * (nobody), installed by sandlet_page_install, and sandlet-csp compile
 * over a small configuration.  A page compiles and its .so exports the
 * servlet descriptor; a compile error names REL:LINE; "/etc/shadow" and
 * "/etc/passwd" includes fail without a byte of them in the diagnostics;
 * a page that makes the compiler explode is cut off at the limit; a
 * compiler wrapper proves the uid, no_new_privs and the Landlock fence
 * (no reading /etc, no writing /tmp, the docroot or the cache); uid 0 is
 * refused.  It prints SKIP and passes only when not root or when
 * SANDLET_NO_CONFINEMENT is set.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "csp/build.h"
#include "csp/pagecache.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOBODY 65534

static char base[] = "/tmp/test_compile.XXXXXX";
static char doc[256], cache[256], include[1024];
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
static bool skip;

static bool skipped(void)
{
    if (skip)
        printf("SKIP: %s\n", getenv("SANDLET_NO_CONFINEMENT")
                                 ? "SANDLET_NO_CONFINEMENT is set"
                                 : "not root: compiles cannot run as another uid");
    return skip;
}

static void put(const char *dir, const char *rel, const char *text, size_t len)
{
    char p[PATH_MAX];
    join(p, sizeof(p), dir, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(p, 0644), 0);
}

static void puts_doc(const char *rel, const char *text)
{
    put(doc, rel, text, strlen(text));
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    assert_non_null(b);
    size_t r;
    while ((r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            cap *= 2;
            char *nb = realloc(b, cap + 1);
            assert_non_null(nb);
            b = nb;
        }
    }
    fclose(f);
    b[n] = '\0';
    if (len)
        *len = n;
    return b;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct opts {
    const char *cc;
    unsigned wall_ms, cpu, mib;
    bool as_root;
    /* Called in the parent while the build runs (the work dir exists). */
    void (*during)(const char *workdir);
} opts;

/* Builds rel as nobody and installs it; the build's status, info filled,
 * *secs the build's wall time. */
static int build(const char *rel, const opts *o, sandlet_page_info *info, double *secs)
{
    char wd[PATH_MAX], err[512];
    uid_t uid = o && o->as_root ? 0 : NOBODY;
    assert_int_equal(sandlet_page_workdir(cache, rel, uid, uid, wd, sizeof(wd)), 0);
    double t0 = now();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!(o && o->as_root) &&
            (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0))
            _exit(99);
        const char *incs[] = {include};
        sandlet_page_job job = {.docroot = doc,
                                .rel = rel,
                                .workdir = wd,
                                .compiler = o ? o->cc : NULL,
                                .includes = incs,
                                .nincludes = 1,
                                .wall_ms = o ? o->wall_ms : 0,
                                .cpu_seconds = o ? o->cpu : 0,
                                .memory_mib = o ? o->mib : 0};
        _exit(sandlet_page_build(&job));
    }
    if (o && o->during)
        o->during(wd);
    int st;
    /* The build's own limits must end it; this bound only keeps a broken
     * build from hanging make check. */
    for (int i = 0; i < 1200 && waitpid(pid, &st, WNOHANG) == 0; i++)
        usleep(100 * 1000);
    if (waitpid(pid, &st, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fail_msg("the build of %s did not end within 120 s", rel);
    }
    if (secs)
        *secs = now() - t0;
    assert_true(WIFEXITED(st));
    int status = WEXITSTATUS(st);
    assert_true(status <= SANDLET_BUILD_ERROR);
    int rc = sandlet_page_install(cache, wd, rel, status, info, err, sizeof(err));
    if (rc < 0)
        fail_msg("install %s: %s", rel, err);
    return status;
}

static char *diag_of(const sandlet_page_info *info)
{
    char *d = slurp(info->diag, NULL);
    assert_non_null(d);
    return d;
}

static void test_compiles_and_loads(void **state)
{
    (void)state;
    if (skipped())
        return;
    assert_int_equal(mkdir(doc, 0755) == 0 || errno == EEXIST, 1);
    char sub[PATH_MAX];
    join(sub, sizeof(sub), doc, "shop");
    assert_int_equal(mkdir(sub, 0755) == 0 || errno == EEXIST, 1);
    puts_doc("shop/two.h", "#define TWO 2\n");
    puts_doc("shop/hello.csp", "<%@ include \"two.h\" %><html><%= 40 + TWO %></html>\n");
    sandlet_page_info info;
    double secs;
    int status = build("shop/hello.csp", NULL, &info, &secs);
    if (status != SANDLET_BUILD_OK)
        fail_msg("build failed: %s", diag_of(&info));
    printf("first compile of a small page: %.3f s\n", secs);
    assert_int_equal(info.state, SANDLET_PAGE_READY);
    assert_int_equal(sandlet_page_check(cache, docfd, "shop/hello.csp", &info), 0);
    assert_int_equal(info.state, SANDLET_PAGE_READY);
    /* The worker has libsandlet loaded when it opens a page. */
    char lib[PATH_MAX];
    const char *bdir = getenv("SANDLET_BUILDDIR");
    join(lib, sizeof(lib), bdir ? bdir : ".", ".libs/libsandlet.so");
    void *libh = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!libh)
        fail_msg("dlopen %s: %s", lib, dlerror());
    void *h = dlopen(info.so, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fail_msg("dlopen %s: %s", info.so, dlerror());
    assert_non_null(dlsym(h, "sl_servlet_descriptor"));
    dlclose(h);
    dlclose(libh);
    /* The header under the docroot is a dependency: changing it makes the
     * page STALE. */
    char *stamp = strdup(info.so);
    strcpy(stamp + strlen(stamp) - 3, ".stamp");
    char *text = slurp(stamp, NULL);
    assert_non_null(strstr(text, " shop/two.h\n"));
    assert_null(strstr(text, "sandlet.h")); /* outside the docroot: not tracked */
    free(text);
    free(stamp);
    puts_doc("shop/two.h", "#define TWO 3\n");
    assert_int_equal(sandlet_page_check(cache, docfd, "shop/hello.csp", &info), 0);
    assert_int_equal(info.state, SANDLET_PAGE_STALE);

    /* A 1 MiB page. */
    size_t big = 1024 * 1024;
    char *page = malloc(big + 64);
    assert_non_null(page);
    for (size_t i = 0; i < big; i++)
        page[i] = "<p>lorem ipsum dolor sit amet</p>\n"[i % 34];
    strcpy(page + big, "<%= 1 %>\n");
    put(doc, "big.csp", page, strlen(page));
    free(page);
    status = build("big.csp", NULL, &info, &secs);
    if (status != SANDLET_BUILD_OK)
        fail_msg("1 MiB build failed: %s", diag_of(&info));
    printf("first compile of a 1 MiB page: %.3f s\n", secs);
}

static void test_error_lines(void **state)
{
    (void)state;
    if (skipped())
        return;
    puts_doc("err.csp", "<p>one</p>\n<p>two</p>\n<% int x = ; %>\n");
    sandlet_page_info info;
    assert_int_equal(build("err.csp", NULL, &info, NULL), SANDLET_BUILD_FAILED);
    assert_int_equal(info.state, SANDLET_PAGE_FAILED);
    char *d = diag_of(&info);
    if (!strstr(d, "err.csp:3:"))
        fail_msg("no err.csp:3: in: %s", d);
    assert_non_null(strstr(info.first, "err.csp:"));
    free(d);
    /* Translation errors have the same form. */
    puts_doc("unclosed.csp", "<p>\n  <%= 1 \n");
    assert_int_equal(build("unclosed.csp", NULL, &info, NULL), SANDLET_BUILD_FAILED);
    d = diag_of(&info);
    if (!strstr(d, "unclosed.csp:2:3: error: "))
        fail_msg("no unclosed.csp:2:3: in: %s", d);
    free(d);
    /* A header that is not there: the diagnostics say where it was
     * looked for (issue 31). */
    puts_doc("nohdr.csp", "<%@ include \"no-such-header.h\" %>\n<p>x</p>\n");
    assert_int_equal(build("nohdr.csp", NULL, &info, NULL), SANDLET_BUILD_FAILED);
    d = diag_of(&info);
    if (!strstr(d, "nohdr.csp: note: a header named as \"file.h\" is looked for beside the "
                   "page (") ||
        !strstr(d, "/include") || !strstr(d, "put the header under the docroot"))
        fail_msg("no note on where headers are looked for in: %s", d);
    free(d);
    /* Failed stays failed: the page is not rebuilt until it changes. */
    assert_int_equal(sandlet_page_check(cache, docfd, "unclosed.csp", &info), 0);
    assert_int_equal(info.state, SANDLET_PAGE_FAILED);
}

/* Every line of path (read here, as root) that is absent from text. */
static void assert_no_line_of(const char *path, const char *text)
{
    char *secret = slurp(path, NULL);
    assert_non_null(secret);
    char *save = NULL;
    for (char *l = strtok_r(secret, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (strlen(l) >= 4 && strstr(text, l))
            fail_msg("a line of %s reached the diagnostics: %s", path, l);
    free(secret);
}

static void test_outside_files_leak_nothing(void **state)
{
    (void)state;
    if (skipped())
        return;
    static const struct {
        const char *rel, *page, *file;
    } cases[] = {
        {"shadow.csp", "<%@ include \"/etc/shadow\" %>x\n", "/etc/shadow"},
        /* World-readable: only Landlock keeps it out. */
        {"passwd.csp", "<%@ include \"/etc/passwd\" %>x\n", "/etc/passwd"},
        {"dots.csp", "<%! #include \"../../../../../../etc/passwd\" %>x\n", "/etc/passwd"},
        {"embed.csp", "<%! static const char s[] = {\n#embed \"/etc/passwd\"\n}; %>x\n",
         "/etc/passwd"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        puts_doc(cases[i].rel, cases[i].page);
        sandlet_page_info info;
        assert_int_equal(build(cases[i].rel, NULL, &info, NULL), SANDLET_BUILD_FAILED);
        char *d = diag_of(&info);
        assert_true(strlen(d) > 0);
        assert_no_line_of(cases[i].file, d);
        assert_null(strstr(d, "root:"));
        /* Nor in the generated C or anything else the cache holds. */
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof(cmd), "grep -rqs '^root:' %s", cache);
        assert_int_not_equal(system(cmd), 0);
        free(d);
    }
}

static void test_explosions_are_cut_off(void **state)
{
    (void)state;
    if (skipped())
        return;
    /* 10^10 tokens from ten lines. */
    char page[2048] = "<%!\n#define A0 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,\n";
    for (int i = 1; i <= 10; i++) {
        char line[128];
        snprintf(line, sizeof(line), "#define A%d A%d A%d A%d A%d A%d A%d A%d A%d A%d A%d\n", i,
                 i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
        strcat(page, line);
    }
    strcat(page, "static int v[] = { A10 };\n%>x\n");
    puts_doc("boom.csp", page);
    sandlet_page_info info;
    opts o = {.wall_ms = 4000, .cpu = 3, .mib = 512};
    double secs;
    assert_int_equal(build("boom.csp", &o, &info, &secs), SANDLET_BUILD_FAILED);
    char *d = diag_of(&info);
    if (!strstr(d, "limit"))
        fail_msg("no clear limit error: %s", d);
    printf("%s", d);
    assert_true(secs < 15);
    free(d);
    /* The wall clock alone: a CPU limit larger than the wall limit. */
    o = (opts){.wall_ms = 1500, .cpu = 60, .mib = 512};
    assert_int_equal(build("boom.csp", &o, &info, &secs), SANDLET_BUILD_FAILED);
    d = diag_of(&info);
    if (!strstr(d, "stopped after 1500 ms"))
        fail_msg("no wall-clock error: %s", d);
    assert_true(secs < 10);
    free(d);
    /* A header that includes itself, without a guard. */
    puts_doc("self.h", "#include \"self.h\"\n");
    puts_doc("self.csp", "<%@ include \"self.h\" %>x\n");
    assert_int_equal(build("self.csp", &o, &info, &secs), SANDLET_BUILD_FAILED);
    assert_true(secs < 10);
}

static char fence_pid[32];

static void read_status_during(const char *wd)
{
    char p[PATH_MAX];
    join(p, sizeof(p), wd, "pid");
    fence_pid[0] = '\0';
    for (int i = 0; i < 200; i++) {
        char *s = slurp(p, NULL);
        if (s && strchr(s, '\n')) {
            snprintf(fence_pid, sizeof(fence_pid), "%.*s", (int)strcspn(s, "\n"), s);
            free(s);
            break;
        }
        free(s);
        usleep(50 * 1000);
    }
    assert_true(fence_pid[0] != '\0');
    snprintf(p, sizeof(p), "/proc/%s/status", fence_pid);
    char *st = slurp(p, NULL);
    assert_non_null(st);
    char want[64];
    snprintf(want, sizeof(want), "Uid:\t%d\t%d\t%d\t%d\n", NOBODY, NOBODY, NOBODY, NOBODY);
    if (!strstr(st, want))
        fail_msg("compiler not running as %d: %s", NOBODY, st);
    assert_non_null(strstr(st, "NoNewPrivs:\t1\n"));
    free(st);
    /* The attempts' results, before install removes the work dir. */
    join(p, sizeof(p), wd, "done");
    for (int i = 0; i < 200 && access(p, F_OK) < 0; i++)
        usleep(50 * 1000);
    static const char *const must_fail[] = {"passwd.rc", "tmp.rc", "doc.rc", "cache.rc", "dev.rc"};
    for (size_t i = 0; i < sizeof(must_fail) / sizeof(must_fail[0]); i++) {
        join(p, sizeof(p), wd, must_fail[i]);
        char *rc = slurp(p, NULL);
        assert_non_null(rc);
        if (strcmp(rc, "0\n") == 0)
            fail_msg("the compiler's %s attempt succeeded", must_fail[i]);
        free(rc);
    }
    join(p, sizeof(p), wd, "uid");
    char *uid = slurp(p, NULL);
    assert_non_null(uid);
    assert_string_equal(uid, "65534\n");
    free(uid);
}

static void test_fence(void **state)
{
    (void)state;
    if (skipped())
        return;
    /* Left by a run on a broken build, they would hide nothing here. */
    unlink("/tmp/test_compile_escape");
    unlink("/dev/shm/test_compile_escape");
    char wrapper[PATH_MAX], script[4096];
    join(wrapper, sizeof(wrapper), base, "cc-wrapper");
    snprintf(script, sizeof(script),
             "#!/bin/sh\n"
             "echo $$ > pid\n"
             "id -u > uid\n"
             "cat /etc/passwd > passwd.copy 2>/dev/null; echo $? > passwd.rc\n"
             "(echo x > /tmp/test_compile_escape) 2>/dev/null; echo $? > tmp.rc\n"
             "(echo x > %s/evil) 2>/dev/null; echo $? > doc.rc\n"
             "(echo x > %s/evil) 2>/dev/null; echo $? > cache.rc\n"
             "(echo x > /dev/shm/test_compile_escape) 2>/dev/null; echo $? > dev.rc\n"
             "touch done\n"
             "sleep 1\n"
             "exec cc \"$@\"\n",
             doc, cache);
    put(base, "cc-wrapper", script, strlen(script));
    assert_int_equal(chmod(wrapper, 0755), 0);
    puts_doc("fence.csp", "<p><%= 1 %></p>\n");
    sandlet_page_info info;
    opts o = {.cc = wrapper, .during = read_status_during};
    int status = build("fence.csp", &o, &info, NULL);
    if (status != SANDLET_BUILD_OK)
        fail_msg("the wrapped build failed: %s", diag_of(&info));
    struct stat sb;
    assert_int_equal(stat("/tmp/test_compile_escape", &sb), -1);
    assert_int_equal(stat("/dev/shm/test_compile_escape", &sb), -1);
    char p[PATH_MAX];
    join(p, sizeof(p), doc, "evil");
    assert_int_equal(stat(p, &sb), -1);
    join(p, sizeof(p), cache, "evil");
    assert_int_equal(stat(p, &sb), -1);
}

static void test_refuses_root(void **state)
{
    (void)state;
    if (skipped())
        return;
    puts_doc("root.csp", "<p>x</p>\n");
    sandlet_page_info info;
    opts o = {.as_root = true};
    assert_int_equal(build("root.csp", &o, &info, NULL), SANDLET_BUILD_ERROR);
    char *d = diag_of(&info);
    assert_non_null(strstr(d, "compiles never run as root"));
    free(d);
    assert_int_equal(info.state, SANDLET_PAGE_STALE);
}

/* Runs cmd with standard error into standard output; its exit status,
 * and the output into out. */
static int run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_ahead_of_time_tool(void **state)
{
    (void)state;
    if (skipped())
        return;
    char adoc[PATH_MAX], acache[PATH_MAX], conf[PATH_MAX], text[3 * PATH_MAX], p[PATH_MAX];
    join(adoc, sizeof(adoc), base, "aot");
    join(acache, sizeof(acache), base, "aotcache");
    join(conf, sizeof(conf), base, "aot.conf");
    assert_int_equal(mkdir(adoc, 0755), 0);
    join(p, sizeof(p), adoc, "admin");
    assert_int_equal(mkdir(p, 0755), 0);
    put(adoc, "index.csp", "<p><%= 1 %></p>\n", 16);
    put(adoc, "notes.txt", "not a page\n", 11);
    const char *bad = "<p>\n<% int x = ; %>\n";
    put(adoc, "admin/bad.csp", bad, strlen(bad));
    snprintf(text, sizeof(text),
             "docroot %s;\npage-cache %s;\npages / { }\npages /admin/ { sandbox admin; }\n"
             "sandbox admin { user nobody; }\n",
             adoc, acache);
    put(base, "aot.conf", text, strlen(text));
    const char *bdir = getenv("SANDLET_BUILDDIR");
    char cmd[3 * PATH_MAX], out[65536];
    snprintf(cmd, sizeof(cmd), "%s/sandlet-csp compile -c %s 2>&1", bdir ? bdir : ".", conf);
    /* One page fails: GCC-style diagnostics with the .csp line, exit 1. */
    int rc = run(cmd, out, sizeof(out));
    if (rc != 1 || !strstr(out, "admin/bad.csp:2:"))
        fail_msg("exit %d: %s", rc, out);
    assert_non_null(strstr(out, "index.csp: compiled for sandbox 'pages'"));
    assert_non_null(strstr(out, "1 compiled, 0 up to date, 1 failed"));
    /* Each page in its own sandbox's folder; the failed one has no .so. */
    char key[SANDLET_PAGE_KEY_MAX], name[PATH_MAX], dir[PATH_MAX];
    struct stat sb;
    assert_int_equal(sandlet_page_key("index.csp", key, sizeof(key)), 0);
    join(dir, sizeof(dir), acache, "pages");
    snprintf(name, sizeof(name), "%s.so", key);
    join(p, sizeof(p), dir, name);
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sandlet_page_key("admin/bad.csp", key, sizeof(key)), 0);
    join(dir, sizeof(dir), acache, "admin");
    snprintf(name, sizeof(name), "%s.so", key);
    join(p, sizeof(p), dir, name);
    assert_int_equal(stat(p, &sb), -1);
    snprintf(name, sizeof(name), "%s.diag", key);
    join(p, sizeof(p), dir, name);
    assert_int_equal(stat(p, &sb), 0);
    /* Again: nothing is rebuilt, the failure is repeated without a compile. */
    rc = run(cmd, out, sizeof(out));
    if (rc != 1 || !strstr(out, "0 compiled, 1 up to date, 1 failed") ||
        !strstr(out, "admin/bad.csp:2:"))
        fail_msg("exit %d: %s", rc, out);
    /* Fixed, and named on the command line (absolute or relative). */
    put(adoc, "admin/bad.csp", "<p>fixed</p>\n", 13);
    snprintf(cmd, sizeof(cmd), "%s/sandlet-csp compile -c %s %s/admin/bad.csp index.csp 2>&1",
             bdir ? bdir : ".", conf, adoc);
    rc = run(cmd, out, sizeof(out));
    if (rc != 0 || !strstr(out, "admin/bad.csp: compiled for sandbox 'admin'") ||
        !strstr(out, "1 compiled, 1 up to date, 0 failed"))
        fail_msg("exit %d: %s", rc, out);
    /* A path that is not a page of the docroot. */
    snprintf(cmd, sizeof(cmd), "%s/sandlet-csp compile -c %s ../x.csp /etc/x.csp 2>&1",
             bdir ? bdir : ".", conf);
    rc = run(cmd, out, sizeof(out));
    if (rc != 1 || !strstr(out, "not a page under the docroot"))
        fail_msg("exit %d: %s", rc, out);
}

static int setup(void **state)
{
    (void)state;
    skip = geteuid() != 0 || getenv("SANDLET_NO_CONFINEMENT");
    if (!mkdtemp(base) || chmod(base, 0755) < 0)
        return -1;
    join(doc, sizeof(doc), base, "doc");
    join(cache, sizeof(cache), base, "cache");
    const char *src = getenv("SANDLET_SRCDIR");
    join(include, sizeof(include), src ? src : ".", "include");
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
        cmocka_unit_test(test_compiles_and_loads),
        cmocka_unit_test(test_error_lines),
        cmocka_unit_test(test_outside_files_leak_nothing),
        cmocka_unit_test(test_explosions_are_cut_off),
        cmocka_unit_test(test_fence),
        cmocka_unit_test(test_refuses_root),
        cmocka_unit_test(test_ahead_of_time_tool),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * main.c - sandlet-csp(1): the C Server Pages tool.  "translate" reads a
 * page and writes the servlet's C source (to -o FILE or stdout), with
 * compiler-style diagnostics (page.csp:LINE:COL: error: ...).  "compile"
 * builds every page a configuration serves (or the named ones) into the
 * page cache ahead of time, exactly as sandletd would: each compile in a
 * child process as the page sandbox's user, confined by build.c, and
 * installed by pagecache.c.
 *
 * It must never compile as root (a child drops to the sandbox's user
 * first, and build.c refuses uid 0 anyway), never run a page, and never
 * follow a directory link while looking for pages.
 */
#define _GNU_SOURCE
#include "config.h"

#include "common/conf.h"
#include "common/log.h"
#include "csp/build.h"
#include "csp/pagecache.h"
#include "csp/translate.h"
#include "sandbox/identity.h"

#include <dirent.h>
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

#define DEFAULT_CONF SANDLET_SYSCONFDIR "/sandlet/sandlet.conf"
/* What one run of "compile" walks at most: a docroot bigger than this is
 * not a web site but a mistake in the configuration. */
#define MAX_WALK_ENTRIES 1000000
#define MAX_WALK_DEPTH   64
/* The child's own wall limit is the compile timeout; this is on top of
 * it, for the child itself. */
#define WALL_GRACE_MS 5000

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: sandlet-csp translate PAGE.csp [-o OUT.c]\n"
        "       sandlet-csp compile [-c sandlet.conf] [-f] [--cc CC] [-I DIR]... [PAGE.csp ...]\n"
        "  translate  write the C source of the servlet the page compiles into\n"
        "             (to OUT.c, or to standard output)\n"
        "  compile    build the pages the configuration serves (or only the named\n"
        "             ones, relative to the docroot) into the page cache, as\n"
        "             sandletd would; -f rebuilds pages that are up to date\n"
        "See sandlet-csp(1) and the page language in sandlet-csp(5).\n");
}

/* Reads a whole file, refusing more than the translator accepts. */
static int read_page(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "sandlet-csp: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 65536, n = 0;
    uint8_t *b = malloc(cap);
    if (!b) {
        fprintf(stderr, "sandlet-csp: cannot read %s: out of memory\n", path);
        fclose(f);
        return -1;
    }
    const char *why = NULL;
    for (;;) {
        if (n == cap) {
            uint8_t *nb = cap > SANDLET_CSP_MAX_INPUT ? NULL : realloc(b, cap * 2);
            if (!nb) {
                why = cap > SANDLET_CSP_MAX_INPUT ? "larger than a page may be (16 MiB)"
                                                  : "out of memory";
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    if (!why && ferror(f))
        why = strerror(errno);
    if (why) {
        fprintf(stderr, "sandlet-csp: cannot read %s: %s\n", path, why);
        free(b);
        fclose(f);
        return -1;
    }
    fclose(f);
    *data = b;
    *len = n;
    return 0;
}

static int translate(const char *page, const char *outpath)
{
    uint8_t *src;
    size_t len;
    if (read_page(page, &src, &len) < 0)
        return 1;
    sandlet_buf out;
    sandlet_buf_init(&out, 0);
    sandlet_csp_error err;
    int rc = sandlet_csp_translate(page, src, len, &out, &err);
    free(src);
    if (rc < 0) {
        fprintf(stderr, "%s:%lu:%lu: error: %s\n", page, err.line, err.col, err.msg);
        sandlet_buf_free(&out);
        return 1;
    }
    FILE *f = outpath ? fopen(outpath, "wb") : stdout;
    if (!f) {
        fprintf(stderr, "sandlet-csp: cannot create %s: %s\n", outpath, strerror(errno));
        sandlet_buf_free(&out);
        return 1;
    }
    bool ok = fwrite(out.data, 1, out.len, f) == out.len;
    ok = (f == stdout ? fflush(f) == 0 : fclose(f) == 0) && ok;
    sandlet_buf_free(&out);
    if (!ok) {
        fprintf(stderr, "sandlet-csp: cannot write %s: %s\n", outpath ? outpath : "standard output",
                strerror(errno));
        if (outpath)
            remove(outpath);
        return 1;
    }
    return 0;
}

/* ---- compile ---------------------------------------------------------------- */

typedef struct aot {
    const sandlet_conf *conf;
    const sandlet_id *ids; /* per sandbox; NULL when not root */
    int docfd;
    const char *cc;
    const char *incs[33];
    size_t nincs;
    bool force;
    unsigned built, uptodate;
} aot;

static bool is_page_name(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcasecmp(name + n - 4, ".csp") == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.csp file under the docroot (no directory link followed), as
 * docroot-relative paths, sorted.  A work list instead of recursion. */
static int find_pages(int docfd, char ***out, size_t *nout)
{
    char **dirs = NULL, **pages = NULL;
    size_t ndirs = 0, npages = 0, seen = 0;
    int rc = 0;
    char *root = strdup("");
    if (!root || !(dirs = malloc(sizeof(char *)))) {
        free(root);
        return -ENOMEM;
    }
    dirs[ndirs++] = root;
    while (ndirs && rc == 0) {
        char *dir = dirs[--ndirs];
        int fd = dir[0] ? openat(docfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                        : dup(docfd);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
            if (fd >= 0)
                close(fd);
            fprintf(stderr, "sandlet-csp: cannot list docroot folder '/%s': %s; skipped\n", dir,
                    strerror(errno));
            free(dir);
            continue;
        }
        size_t depth = 0;
        for (const char *c = dir; *c; c++)
            depth += *c == '/';
        struct dirent *e;
        while (rc == 0 && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            if (++seen > MAX_WALK_ENTRIES) {
                fprintf(stderr,
                        "sandlet-csp: more than %d entries under the docroot; name the "
                        "pages to compile instead\n",
                        MAX_WALK_ENTRIES);
                rc = -E2BIG;
                break;
            }
            struct stat sb;
            if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            bool is_dir = S_ISDIR(sb.st_mode);
            bool page = !is_dir && is_page_name(e->d_name);
            if (!is_dir && !page)
                continue;
            if (is_dir && depth + 1 >= MAX_WALK_DEPTH)
                continue;
            char *rel;
            if (asprintf(&rel, "%s%s%s", dir, dir[0] ? "/" : "", e->d_name) < 0) {
                rc = -ENOMEM;
                break;
            }
            char ***list = is_dir ? &dirs : &pages;
            size_t *n = is_dir ? &ndirs : &npages;
            char **grown = realloc(*list, (*n + 1) * sizeof(char *));
            if (!grown) {
                free(rel);
                rc = -ENOMEM;
                break;
            }
            *list = grown;
            (*list)[(*n)++] = rel;
        }
        closedir(d);
        free(dir);
    }
    for (size_t i = 0; i < ndirs; i++)
        free(dirs[i]);
    free(dirs);
    if (rc < 0) {
        for (size_t i = 0; i < npages; i++)
            free(pages[i]);
        free(pages);
        return rc;
    }
    if (npages)
        qsort(pages, npages, sizeof(char *), cmp_str);
    *out = pages;
    *nout = npages;
    return 0;
}

/* The page cache folder of a sandbox, made when missing: readable by the
 * sandbox's group (its workers), as sandletd makes it. */
static int box_dir(const aot *a, size_t sandbox, char *out, size_t cap)
{
    const sandlet_sandbox_conf *sb = &a->conf->sandboxes[sandbox];
    int n = snprintf(out, cap, "%s/%s", a->conf->page_cache, sb->name);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", a->conf->page_cache);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if ((mkdir(tmp, 0755) < 0 && errno != EEXIST) || (mkdir(out, 0750) < 0 && errno != EEXIST))
        return -errno;
    if (a->ids && a->ids[sandbox].gid != UINT32_MAX) {
        int fd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        int rc = fchown(fd, 0, (gid_t)a->ids[sandbox].gid) < 0 || fchmod(fd, 0750) < 0 ? -errno : 0;
        close(fd);
        return rc;
    }
    return 0;
}

static void print_diag(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, stderr);
    fclose(f);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for the build child, killing its group past the limit. */
static int wait_build(pid_t pid, unsigned wall_ms)
{
    long long deadline = now_ms() + wall_ms + WALL_GRACE_MS;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return SANDLET_BUILD_ERROR;
        if (now_ms() > deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
            return SANDLET_BUILD_ERROR;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(-pid, SIGKILL); /* anything the build left behind */
    if (!WIFEXITED(st) || WEXITSTATUS(st) > SANDLET_BUILD_ERROR)
        return SANDLET_BUILD_ERROR;
    return WEXITSTATUS(st);
}

static int compile_one(aot *a, const char *rel)
{
    const sandlet_pages_conf *map = sandlet_conf_pages_for(a->conf, rel);
    if (!map) {
        fprintf(stderr,
                "%s: error: no 'pages' block of %s covers this page; add one (see "
                "sandlet.conf(5))\n",
                rel, a->conf->file);
        return -1;
    }
    const char *sbname = a->conf->sandboxes[map->sandbox].name;
    char cachedir[PATH_MAX], wd[PATH_MAX], err[1024];
    int rc = box_dir(a, map->sandbox, cachedir, sizeof(cachedir));
    if (rc < 0) {
        fprintf(stderr, "sandlet-csp: page cache '%s/%s': %s; fix page-cache or its permissions\n",
                a->conf->page_cache, sbname, strerror(-rc));
        return -1;
    }
    sandlet_page_info info;
    rc = sandlet_page_check(cachedir, a->docfd, rel, &info);
    if (rc < 0 || info.state == SANDLET_PAGE_MISSING) {
        fprintf(stderr, "%s: error: %s\n", rel,
                rc < 0 ? strerror(-rc) : "no such page under the docroot");
        return -1;
    }
    if (!a->force && info.state == SANDLET_PAGE_READY) {
        a->uptodate++;
        return 0;
    }
    if (!a->force && info.state == SANDLET_PAGE_FAILED) {
        /* The timestamp rule: unchanged since it failed; say why again. */
        print_diag(info.diag);
        fprintf(stderr, "%s: note: unchanged since its last compile failed (use -f to retry)\n",
                rel);
        return -1;
    }
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (a->ids && a->ids[map->sandbox].uid != UINT32_MAX) {
        uid = (uid_t)a->ids[map->sandbox].uid;
        gid = (gid_t)a->ids[map->sandbox].gid;
    }
    rc = sandlet_page_workdir(cachedir, rel, uid, gid, wd, sizeof(wd));
    if (rc < 0) {
        fprintf(stderr, "sandlet-csp: %s: cannot make the work folder in %s: %s\n", rel, cachedir,
                strerror(-rc));
        return -1;
    }
    unsigned wall = a->conf->page_compile_timeout ? a->conf->page_compile_timeout
                                                  : SANDLET_BUILD_DEFAULT_WALL_MS;
    long long t0 = now_ms();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "sandlet-csp: fork: %s\n", strerror(errno));
        sandlet_page_workdir_remove(wd);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)) {
            fprintf(stderr, "sandlet-csp: cannot become uid %u gid %u: %s\n", (unsigned)uid,
                    (unsigned)gid, strerror(errno));
            _exit(SANDLET_BUILD_ERROR);
        }
        sandlet_page_job job = {.docroot = a->conf->docroot,
                                .rel = rel,
                                .workdir = wd,
                                .compiler = a->cc,
                                .includes = a->incs,
                                .nincludes = a->nincs,
                                .cpu_seconds = wall / 1000 + 1,
                                .wall_ms = wall};
        _exit(sandlet_page_build(&job));
    }
    setpgid(pid, pid);
    int status = wait_build(pid, wall);
    rc = sandlet_page_install(cachedir, wd, rel, status, &info, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "sandlet-csp: %s\n", err);
        return -1;
    }
    print_diag(info.diag);
    if (status != SANDLET_BUILD_OK || info.state != SANDLET_PAGE_READY) {
        if (status == SANDLET_BUILD_ERROR && !info.first[0])
            fprintf(stderr, "%s: error: the compile did not finish (killed after %u ms?)\n", rel,
                    wall + WALL_GRACE_MS);
        return -1;
    }
    printf("%s: compiled for sandbox '%s' in %lld ms\n", rel, sbname, now_ms() - t0);
    a->built++;
    return 0;
}

/* A named page: relative to the docroot, or an absolute path inside it. */
static const char *page_rel(const sandlet_conf *conf, const char *arg)
{
    if (arg[0] != '/')
        return arg;
    size_t n = strlen(conf->docroot);
    while (n > 1 && conf->docroot[n - 1] == '/')
        n--;
    if (strncmp(arg, conf->docroot, n) == 0 && arg[n] == '/')
        return arg + n + 1;
    return NULL;
}

static int compile_mode(int argc, char **argv)
{
    aot a = {0};
    const char *confpath = DEFAULT_CONF;
    const char **named = calloc((size_t)argc + 1, sizeof(char *));
    size_t nnamed = 0;
    if (!named) {
        fprintf(stderr, "sandlet-csp: out of memory\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        if ((strcmp(o, "-c") == 0 || strcmp(o, "--cc") == 0 || strcmp(o, "-I") == 0) &&
            i + 1 >= argc) {
            fprintf(stderr, "sandlet-csp: %s needs a value\n", o);
            free(named);
            return 2;
        }
        if (strcmp(o, "-c") == 0)
            confpath = argv[++i];
        else if (strcmp(o, "--cc") == 0)
            a.cc = argv[++i];
        else if (strcmp(o, "-I") == 0 && a.nincs < 32)
            a.incs[a.nincs++] = argv[++i];
        else if (strcmp(o, "-f") == 0)
            a.force = true;
        else if (o[0] != '-')
            named[nnamed++] = o;
        else {
            fprintf(stderr, "sandlet-csp: unexpected argument '%s'\n", o);
            usage(stderr);
            free(named);
            return 2;
        }
    }
    sandlet_log_set_role("sandlet-csp");
    sandlet_conf *conf = NULL;
    char err[1024];
    if (sandlet_conf_load(confpath, &conf, err, sizeof(err)) < 0) {
        fprintf(stderr, "sandlet-csp: %s\n", err);
        free(named);
        return 2;
    }
    a.conf = conf;
    a.docfd = -1;
    int ret = 0;
    sandlet_id acceptor, *ids = NULL;
    if (!conf->docroot || conf->npages == 0) {
        fprintf(stderr, "sandlet-csp: %s has %s; nothing serves pages\n", conf->file,
                !conf->docroot ? "no docroot" : "no 'pages' block");
        ret = 2;
        goto out;
    }
    if (!a.cc)
        a.cc = conf->page_compiler ? conf->page_compiler : SANDLET_DEFAULT_PAGE_COMPILER;
    /* The build tree's headers, when the installed ones are not there. */
    char hdr[PATH_MAX];
    snprintf(hdr, sizeof(hdr), "%s/sandlet/csp.h", SANDLET_INCLUDEDIR);
#ifdef SANDLET_SRC_INCLUDEDIR
    if (a.nincs < 32 && access(hdr, R_OK) < 0)
        a.incs[a.nincs++] = SANDLET_SRC_INCLUDEDIR;
#endif
    if (geteuid() == 0) {
        ids = calloc(conf->nsandboxes ? conf->nsandboxes : 1, sizeof(*ids));
        if (!ids || sandlet_identity_acceptor(conf, &acceptor) < 0 ||
            sandlet_identity_sandboxes(conf, &acceptor, ids) < 0) {
            fprintf(stderr, "sandlet-csp: cannot decide the sandboxes' users (see above)\n");
            ret = 2;
            goto out;
        }
        a.ids = ids;
    }
    a.docfd = open(conf->docroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (a.docfd < 0) {
        fprintf(stderr, "sandlet-csp: docroot '%s': %s\n", conf->docroot, strerror(errno));
        ret = 2;
        goto out;
    }
    unsigned bad = 0;
    if (nnamed) {
        for (size_t i = 0; i < nnamed; i++) {
            const char *rel = page_rel(conf, named[i]);
            if (!rel || sandlet_page_rel_check(rel) < 0) {
                fprintf(stderr,
                        "%s: error: not a page under the docroot %s (a path relative to "
                        "it, ending in .csp)\n",
                        named[i], conf->docroot);
                bad++;
            } else if (compile_one(&a, rel) < 0) {
                bad++;
            }
        }
    } else {
        char **pages = NULL;
        size_t npages = 0;
        if (find_pages(a.docfd, &pages, &npages) < 0) {
            ret = 2;
            goto out;
        }
        for (size_t i = 0; i < npages; i++) {
            /* Pages no "pages" block covers are not served: not ours. */
            if (sandlet_page_rel_check(pages[i]) == 0 && sandlet_conf_pages_for(conf, pages[i]) &&
                compile_one(&a, pages[i]) < 0)
                bad++;
            free(pages[i]);
        }
        free(pages);
    }
    printf("sandlet-csp: %u compiled, %u up to date, %u failed\n", a.built, a.uptodate, bad);
    ret = bad ? 1 : 0;
out:
    if (a.docfd >= 0)
        close(a.docfd);
    free(ids);
    free(named);
    sandlet_conf_free(conf);
    return ret;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "compile") == 0)
        return compile_mode(argc, argv);
    if (argc < 2 || strcmp(argv[1], "translate") != 0) {
        if (argc >= 2)
            fprintf(stderr, "sandlet-csp: unknown mode '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    const char *page = NULL, *out = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0) {
            if (i + 1 >= argc || out) {
                fprintf(stderr, "sandlet-csp: -o needs one output file\n");
                return 2;
            }
            out = argv[++i];
        } else if (!page && argv[i][0] != '-') {
            page = argv[i];
        } else {
            fprintf(stderr, "sandlet-csp: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!page) {
        fprintf(stderr, "sandlet-csp: translate needs a page\n");
        usage(stderr);
        return 2;
    }
    return translate(page, out);
}

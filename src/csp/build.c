/*
 * build.c - the confined page compiler (build.h): confinement, reading the
 * page beneath the docroot, translating, running the C compiler under a
 * wall-clock limit, and writing the work dir's diag, deps and stamp.
 *
 * Its input (the page, and the headers the page includes) is written by
 * whoever may edit the docroot, so the compiler is untrusted input's
 * neighbour: this file must confine the process before it reads a byte,
 * must never run as root, never write outside the work dir, never put a
 * byte of a file outside the fence into the diagnostics (the fence makes
 * the compiler fail before it can read one), and never pass the page's
 * content to a shell: the compiler is exec'd with a fixed argument vector.
 */
#define _GNU_SOURCE
#include "config.h"

#include "csp/build.h"
#include "common/landlock.h"

#include "csp/pagecache.h"
#include "csp/translate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/landlock.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SANDLET_INCLUDEDIR
#define SANDLET_INCLUDEDIR "/usr/include"
#endif

#define LL_READ_ONLY (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
/* Inside the work dir: regular files only (no links, fifos, devices or
 * directories that the cache would have to walk). */
#define LL_WORK                                                                                    \
    (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_WRITE_FILE |  \
     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_TRUNCATE)
#define MAX_DEPS_FILE    ((size_t)4 * 1024 * 1024)
#define FILE_SIZE_LIMIT  ((rlim_t)64 * 1024 * 1024)
#define OPEN_FILES_LIMIT 256
/* Processes the compile may add to its uid's count: the driver, cc1, as,
 * collect2, ld and a wrapper, with room to spare. */
#define NPROC_HEADROOM 32

typedef struct bjob {
    const sandlet_page_job *job;
    int wfd, docfd;
    sandlet_buf diag;
    char cc[PATH_MAX];
    char objdump[PATH_MAX]; /* "" when there is none: no line table */
    const char *incs[33];   /* at most 32 given, and the default */
    size_t nincs;
    unsigned cpu, mib, wall;
    sandlet_page_stamp st;
    const char *path; /* PATH the compiler was found in, and gets */
} bjob;

static void note(bjob *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(bjob *b, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
    if (b->diag.len + len + 1 <= SANDLET_BUILD_MAX_DIAG) {
        sandlet_buf_put(&b->diag, line, len);
        sandlet_buf_put(&b->diag, "\n", 1);
    }
}

/* Writes a work-dir file whole (never through a link). */
static int put_file(bjob *b, const char *name, const void *data, size_t len)
{
    int fd = openat(b->wfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = sandlet_page_write_all(fd, data, len);
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    return rc;
}

static int write_stamp(bjob *b, bool ok)
{
    b->st.ok = ok;
    sandlet_buf s;
    sandlet_buf_init(&s, SANDLET_PAGE_MAX_STAMP);
    int rc = sandlet_page_stamp_format(&b->st, &s);
    if (rc == 0)
        rc = put_file(b, "stamp", s.data, s.len);
    sandlet_buf_free(&s);
    if (rc < 0)
        note(b, "%s: error: cannot write the build stamp: %s", b->job->rel, strerror(-rc));
    return rc;
}

/* Writes diag and returns status (ERROR when even that fails). */
static int finish(bjob *b, int status)
{
    if (put_file(b, "diag", b->diag.data ? (const void *)b->diag.data : "", b->diag.len) < 0)
        status = SANDLET_BUILD_ERROR;
    return status;
}

/* ---- confinement ----------------------------------------------------------- */

/* Tasks (threads count) whose real uid is uid, from /proc: RLIMIT_NPROC
 * counts all of them, including the sandbox's workers that share it. */
static long tasks_of(uid_t uid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[64], line[256];
        snprintf(path, sizeof(path), "/proc/%.20s/status", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        unsigned long ruid = ~0ul;
        long threads = 1;
        while (fgets(line, sizeof(line), f)) {
            if (strncmp(line, "Uid:", 4) == 0)
                ruid = strtoul(line + 4, NULL, 10);
            else if (strncmp(line, "Threads:", 8) == 0)
                threads = strtol(line + 8, NULL, 10);
        }
        fclose(f);
        if (ruid == (unsigned long)uid && threads > 0)
            n += threads;
    }
    closedir(d);
    return n;
}

static int limit(bjob *b, int res, const char *name, rlim_t v)
{
    /* A lower hard limit than ours is stricter already (and cannot be
     * raised without privilege): keep it. */
    struct rlimit cur;
    if (getrlimit(res, &cur) == 0 && cur.rlim_max != RLIM_INFINITY && cur.rlim_max < v)
        v = cur.rlim_max;
    struct rlimit rl = {v, v};
    if (setrlimit(res, &rl) < 0) {
        note(b, "%s: error: setrlimit(%s, %llu): %s; the compile did not run", b->job->rel, name,
             (unsigned long long)v, strerror(errno));
        return -1;
    }
    return 0;
}

static int ll_rule(bjob *b, int rfd, const char *path, uint64_t access, uint64_t handled)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0
                               : (note(b, "%s: error: landlock path '%s': %s", b->job->rel, path,
                                       strerror(errno)),
                                  -1);
    struct stat sb;
    if (fstat(fd, &sb) == 0 && !S_ISDIR(sb.st_mode))
        access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                  LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | LL_FS_IOCTL_DEV;
    struct landlock_path_beneath_attr pb = {.allowed_access = access & handled, .parent_fd = fd};
    int rc = 0;
    if (pb.allowed_access &&
        syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
        note(b, "%s: error: landlock_add_rule('%s'): %s", b->job->rel, path, strerror(errno));
        rc = -1;
    }
    close(fd);
    return rc;
}

static int landlock(bjob *b)
{
    long abi = sandlet_landlock_abi();
    if (abi < 1) {
        note(b,
             "%s: warning: this kernel has no Landlock: the compile is fenced by its uid "
             "and rlimits only",
             b->job->rel);
        return 0;
    }
    uint64_t handled = 0;
    int rfd = sandlet_landlock_ruleset(abi, &handled);
    if (rfd < 0) {
        note(b, "%s: error: landlock_create_ruleset(ABI %ld): %s", b->job->rel, abi,
             strerror(-rfd));
        return -1;
    }
    static const char *const sys[] = {"/usr",    "/lib", "/lib64", "/lib32",
                                      "/libx32", "/bin", "/sbin"};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(sys) / sizeof(sys[0]); i++)
        rc = ll_rule(b, rfd, sys[i], LL_READ, handled);
    if (rc == 0)
        rc = ll_rule(b, rfd, "/etc/ld.so.cache", LANDLOCK_ACCESS_FS_READ_FILE, handled);
    /* The compiler the operator configured, wherever it lives. */
    if (rc == 0)
        rc = ll_rule(b, rfd, b->cc, LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE,
                     handled);
    if (rc == 0 && b->objdump[0])
        rc = ll_rule(b, rfd, b->objdump, LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE,
                     handled);
    if (rc == 0)
        rc = ll_rule(b, rfd, b->job->docroot, LL_READ_ONLY, handled);
    for (size_t i = 0; rc == 0 && i < b->nincs; i++)
        rc = ll_rule(b, rfd, b->incs[i], LL_READ_ONLY, handled);
    if (rc == 0)
        rc = ll_rule(b, rfd, b->job->workdir, LL_WORK, handled);
    if (rc == 0)
        rc = ll_rule(b, rfd, "/dev/null",
                     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                         LANDLOCK_ACCESS_FS_TRUNCATE | LL_FS_IOCTL_DEV,
                     handled);
    if (rc == 0 && syscall(SYS_landlock_restrict_self, rfd, 0) < 0) {
        note(b, "%s: error: landlock_restrict_self: %s", b->job->rel, strerror(errno));
        rc = -1;
    }
    close(rfd);
    return rc;
}

static int confine(bjob *b)
{
    long tasks = tasks_of(getuid());
    rlim_t nproc = tasks > 0 ? (rlim_t)tasks + NPROC_HEADROOM : 4096;
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG */
    /* RLIMIT_AS is the compiler's alone (set between fork and exec in
     * run_cc): this process's own memory is bounded by what it reads (a
     * page of at most 16 MiB, the translator's bounded output, 64 KiB of
     * diagnostics), and a sanitizer build of it reserves terabytes of
     * address space that no such limit would allow. */
    if (limit(b, RLIMIT_CPU, "RLIMIT_CPU", b->cpu) < 0 ||
        limit(b, RLIMIT_FSIZE, "RLIMIT_FSIZE", FILE_SIZE_LIMIT) < 0 ||
        limit(b, RLIMIT_NOFILE, "RLIMIT_NOFILE", OPEN_FILES_LIMIT) < 0 ||
        limit(b, RLIMIT_CORE, "RLIMIT_CORE", 0) < 0 ||
        limit(b, RLIMIT_NPROC, "RLIMIT_NPROC", nproc) < 0)
        return -1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        note(b, "%s: error: PR_SET_NO_NEW_PRIVS: %s", b->job->rel, strerror(errno));
        return -1;
    }
    return landlock(b);
}

/* ---- the compiler ------------------------------------------------------------ */

/* A program's absolute path into out (PATH lookup for a bare name). */
static int resolve_prog(char out[PATH_MAX], const char *cc, const char *path)
{
    if (strchr(cc, '/')) {
        if (!realpath(cc, out) || access(out, X_OK) < 0)
            return -1;
        return 0;
    }
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char cand[PATH_MAX];
        if (len > 0 && len + 1 + strlen(cc) < sizeof(cand)) {
            memcpy(cand, p, len);
            cand[len] = '/';
            strcpy(cand + len + 1, cc);
            if (access(cand, X_OK) == 0 && realpath(cand, out))
                return 0;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return -1;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct ccrun {
    int status;     /* wait status */
    bool timed_out; /* killed at the wall limit */
    size_t dropped; /* bytes of standard error past the bound */
} ccrun;

/* Runs argv in the work dir, its standard error (and output, unless
 * outname names a work-dir file for it) gathered into err, bounded. */
static int run_cc(bjob *b, char *const argv[], char *const envp[], const char *outname,
                  sandlet_buf *err, ccrun *res)
{
    memset(res, 0, sizeof(*res));
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = -errno;
        close(pfd[0]);
        close(pfd[1]);
        return e;
    }
    if (pid == 0) {
        /* Its own process group, so that the wall limit kills cc1, as
         * and ld with it. */
        setpgid(0, 0);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int out = outname ? openat(b->wfd, outname,
                                   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)
                          : pfd[1];
        if (null < 0 || out < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(pfd[1], 2) < 0)
            _exit(127);
        if (fchdir(b->wfd) < 0)
            _exit(127);
        struct rlimit as;
        if (getrlimit(RLIMIT_AS, &as) < 0)
            _exit(127);
        rlim_t want = (rlim_t)b->mib * 1024 * 1024;
        if (as.rlim_max == RLIM_INFINITY || as.rlim_max > want)
            as.rlim_max = want;
        as.rlim_cur = as.rlim_max;
        /* The compiler dies with us: a build killed at the supervisor's
         * wall clock leaves no compiler running in its own group. */
        if (setrlimit(RLIMIT_AS, &as) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
            _exit(127);
        execve(argv[0], argv, envp);
        static const char msg[] = "sandlet: cannot execute the compiler\n";
        (void)!write(2, msg, sizeof(msg) - 1);
        _exit(127);
    }
    setpgid(pid, pid); /* both sides, whichever runs first */
    close(pfd[1]);
    long long deadline = now_ms() + b->wall;
    bool eof = false;
    int rc = 0;
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0) {
            res->timed_out = true;
            break;
        }
        if (eof) {
            pid_t w = waitpid(pid, &res->status, WNOHANG);
            if (w == pid)
                break;
            if (w < 0 && errno != EINTR) {
                rc = -errno;
                break;
            }
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        int n = poll(&p, 1, left > 1000 ? 1000 : (int)left);
        if (n < 0 && errno != EINTR) {
            rc = -errno;
            break;
        }
        if (n <= 0)
            continue;
        char buf[8192];
        ssize_t r = read(pfd[0], buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            eof = true;
            continue;
        }
        size_t room =
            SANDLET_BUILD_MAX_DIAG > err->len + 1024 ? SANDLET_BUILD_MAX_DIAG - err->len - 1024 : 0;
        size_t take = (size_t)r < room ? (size_t)r : room;
        sandlet_buf_put(err, buf, take);
        res->dropped += (size_t)r - take;
    }
    close(pfd[0]);
    /* Whatever is left of the group (a driver that died leaves cc1). */
    kill(-pid, SIGKILL);
    if (res->timed_out || rc < 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &res->status, 0) < 0 && errno == EINTR)
            ;
    }
    return rc;
}

/* ---- dependencies ------------------------------------------------------------- */

/* The next file name of a make rule ("\ " is a space, "$$" a dollar, a
 * backslash-newline a blank) into out; false at the end. */
static bool next_dep(const char **p, const char *end, char *out, size_t cap, bool *too_long)
{
    const char *s = *p;
    for (;;) {
        while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
            s++;
        if (s + 1 < end && s[0] == '\\' && (s[1] == '\n' || s[1] == '\r')) {
            s += 2;
            continue;
        }
        break;
    }
    if (s >= end)
        return false;
    size_t n = 0;
    *too_long = false;
    while (s < end && *s != ' ' && *s != '\t' && *s != '\n' && *s != '\r') {
        char c = *s;
        if (c == '\\' && s + 1 < end && (s[1] == ' ' || s[1] == '\\' || s[1] == '#')) {
            c = s[1];
            s++;
        } else if (c == '\\' && s + 1 < end && (s[1] == '\n' || s[1] == '\r')) {
            break;
        } else if (c == '$' && s + 1 < end && s[1] == '$') {
            s++;
        }
        if (n + 1 < cap)
            out[n++] = c;
        else
            *too_long = true;
        s++;
    }
    out[n] = '\0';
    *p = s;
    return true;
}

/* Adds every dependency under the docroot from the work dir's deps file
 * to the stamp; files outside it (system and sandlet headers) are not
 * the page author's to change. */
static void add_deps(bjob *b)
{
    int fd = openat(b->wfd, "deps", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    char *data = malloc(MAX_DEPS_FILE + 1);
    size_t len = 0;
    ssize_t r;
    while (data && len < MAX_DEPS_FILE &&
           ((r = read(fd, data + len, MAX_DEPS_FILE - len)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            len += (size_t)r;
    close(fd);
    if (!data) {
        note(b,
             "%s: warning: out of memory reading the dependencies; a changed header will "
             "not trigger a rebuild",
             b->job->rel);
        return;
    }
    const char *end = data + len;
    const char *colon = memchr(data, ':', len);
    const char *p = colon ? colon + 1 : end;
    size_t dlen = strlen(b->job->docroot);
    while (dlen > 1 && b->job->docroot[dlen - 1] == '/')
        dlen--;
    char dep[PATH_MAX];
    bool too_long;
    while (next_dep(&p, end, dep, sizeof(dep), &too_long)) {
        if (too_long || strncmp(dep, b->job->docroot, dlen) != 0 || dep[dlen] != '/')
            continue;
        const char *rel = dep + dlen + 1;
        bool dup = false;
        for (size_t i = 0; i < b->st.nfiles && !dup; i++)
            dup = strcmp(b->st.files[i].path, rel) == 0;
        if (dup)
            continue;
        struct stat sb;
        int dfd = sandlet_page_open_beneath(b->docfd, rel, &sb);
        if (dfd < 0)
            continue; /* not a plain file beneath the docroot */
        uint8_t h[32];
        int rc = sandlet_page_hash_fd(dfd, SANDLET_CSP_MAX_INPUT * 4, h);
        close(dfd);
        if (rc == 0)
            rc = sandlet_page_stamp_add(&b->st, rel, &sb, h);
        if (rc == -E2BIG) {
            note(b,
                 "%s: warning: more than %d included files; later ones do not trigger a "
                 "rebuild",
                 b->job->rel, SANDLET_PAGE_MAX_DEPS);
            break;
        }
    }
    free(data);
}

/* ---- the line table ------------------------------------------------------------ */

/* Rows of the table the build keeps at most (each 8 bytes here, about 10
 * in the file, whose bound is SANDLET_PAGE_MAX_LINES). */
#define MAX_LINE_ROWS  ((size_t)400 * 1000)
#define MAX_DWARF_TEXT ((size_t)64 * 1024 * 1024)

typedef struct lrow {
    uint32_t offset, line, seq; /* seq: the row's order, the last at an offset wins */
} lrow;

static int lrow_cmp(const void *a, const void *b)
{
    const lrow *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* objdump, from binutils, beside the compiler or in PATH; none is fine:
 * the page then has no line table, and a crash names no line. */
static void find_objdump(bjob *b)
{
    char cand[PATH_MAX];
    const char *slash = strrchr(b->cc, '/');
    b->objdump[0] = '\0';
    if (slash && (size_t)(slash - b->cc) + sizeof("/objdump") <= sizeof(cand)) {
        memcpy(cand, b->cc, (size_t)(slash - b->cc));
        strcpy(cand + (slash - b->cc), "/objdump");
        if (resolve_prog(b->objdump, cand, b->path) == 0)
            return;
    }
    if (resolve_prog(b->objdump, "objdump", b->path) < 0)
        b->objdump[0] = '\0';
}

/* Does this block header of objdump's ("path:", "CU: " before it in
 * older binutils) name another file than the page with the page's base
 * name (a header under the docroot)?  Rows name files by base name only;
 * the first block is headed by the compile unit (page.c) whatever its
 * rows' file. */
static bool other_block(const char *h, size_t hlen, const char *rel, const char *base)
{
    if (hlen > 4 && memcmp(h, "CU: ", 4) == 0)
        h += 4, hlen -= 4;
    size_t rlen = strlen(rel), blen = strlen(base);
    if (hlen == rlen && memcmp(h, rel, rlen) == 0)
        return false;
    if (hlen > rlen && h[hlen - rlen - 1] == '/' && memcmp(h + hlen - rlen, rel, rlen) == 0)
        return false;
    return (hlen == blen || (hlen > blen && h[hlen - blen - 1] == '/')) &&
           memcmp(h + hlen - blen, base, blen) == 0;
}

/* Turns objdump's decoded line rows into the work dir's "lines": every
 * address row, the page's own with their .csp line and all others (the
 * generated glue, headers, the end of a sequence) with 0, so that a PC in
 * code not the page's is never blamed on the line before it. */
static void line_table(bjob *b, char *const envp[])
{
    if (!b->objdump[0])
        return;
    char *argv[] = {b->objdump, "--dwarf=decodedline", "page.so", NULL};
    sandlet_buf err;
    sandlet_buf_init(&err, SANDLET_BUILD_MAX_DIAG);
    ccrun res;
    int rc = run_cc(b, argv, envp, "dwarf", &err, &res);
    sandlet_buf_free(&err);
    if (rc < 0 || res.timed_out || !WIFEXITED(res.status) || WEXITSTATUS(res.status) != 0) {
        unlinkat(b->wfd, "dwarf", 0);
        return;
    }
    int fd = openat(b->wfd, "dwarf", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    unlinkat(b->wfd, "dwarf", 0);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return;
    }
    const char *base = strrchr(b->job->rel, '/');
    base = base ? base + 1 : b->job->rel;
    size_t blen = strlen(base);
    lrow *rows = NULL;
    size_t n = 0, cap = 0, total = 0;
    bool other = false, ok = true;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while (ok && (len = getline(&line, &lcap, f)) > 0) {
        if ((total += (size_t)len) > MAX_DWARF_TEXT) {
            ok = false;
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
            line[--len] = '\0';
        if (len > 0 && line[len - 1] == ':' && !strchr(line, '\t')) {
            other = other_block(line, (size_t)len - 1, b->job->rel, base);
            continue;
        }
        /* name, line (or "-"), 0xaddress, view and stmt (optional) */
        char *sp = strchr(line, ' ');
        if (!sp)
            continue;
        char *p = sp;
        while (*p == ' ')
            p++;
        char *lend;
        unsigned long ln = 0;
        if (*p == '-')
            lend = p + 1;
        else {
            if (*p < '0' || *p > '9')
                continue;
            errno = 0;
            ln = strtoul(p, &lend, 10);
            if (errno || ln >= 1UL << 31)
                continue;
        }
        p = lend;
        while (*p == ' ')
            p++;
        if (p[0] != '0' || p[1] != 'x' || lend == p)
            continue;
        char *aend;
        errno = 0;
        unsigned long long addr = strtoull(p + 2, &aend, 16);
        if (errno || aend == p + 2 || (*aend && *aend != ' ') || addr >= SANDLET_PAGE_MAX_SO)
            continue;
        bool own = !other && (size_t)(sp - line) == blen && memcmp(line, base, blen) == 0;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            lrow *nr = ncap <= MAX_LINE_ROWS ? realloc(rows, ncap * sizeof(*rows)) : NULL;
            if (!nr) {
                ok = false;
                break;
            }
            rows = nr;
            cap = ncap;
        }
        rows[n] = (lrow){(uint32_t)addr, own ? (uint32_t)ln : 0, (uint32_t)n};
        n++;
    }
    free(line);
    fclose(f);
    sandlet_buf out;
    sandlet_buf_init(&out, SANDLET_PAGE_MAX_LINES);
    if (ok && n) {
        qsort(rows, n, sizeof(*rows), lrow_cmp);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
            if (i + 1 < n && rows[i + 1].offset == rows[i].offset)
                continue; /* the last row at an address is the one in effect */
            if (kept && rows[kept - 1].line == rows[i].line)
                continue;
            rows[kept++] = rows[i];
        }
        char row[32];
        bool any = false;
        for (size_t i = 0; i < kept; i++) {
            int w = snprintf(row, sizeof(row), "%" PRIx32 " %" PRIu32 "\n", rows[i].offset,
                             rows[i].line);
            if (w > 0)
                sandlet_buf_put(&out, row, (size_t)w);
            any = any || rows[i].line;
        }
        /* Too big a table is no table (the cache refuses it anyway). */
        if (any && !out.error)
            (void)put_file(b, "lines", out.data, out.len);
    }
    sandlet_buf_free(&out);
    free(rows);
}

/* ---- the build ------------------------------------------------------------------ */

/* The compiler stopped at a limit rather than at an error of its own. */
static bool hit_limit(const ccrun *res, const sandlet_buf *err)
{
    if (res->timed_out || (WIFSIGNALED(res->status)))
        return true;
    static const char *const marks[] = {"signal terminated program", "out of memory",
                                        "memory exhausted", "Killed", "CPU time limit"};
    for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
        if (err->len && memmem(err->data, err->len, marks[i], strlen(marks[i])))
            return true;
    return false;
}

/* gcc: "fatal error: x.h: No such file or directory"; clang: "fatal
 * error: 'x.h' file not found". */
static bool missing_header(const sandlet_buf *err)
{
    return err->len && memmem(err->data, err->len, "fatal error: ", 13) &&
           (memmem(err->data, err->len, ": No such file or directory", 27) ||
            memmem(err->data, err->len, "' file not found", 16));
}

/* A header the compiler did not find: say where it looked (issue 31), in
 * the order it did.  Only folders the page compile may read are named:
 * a header anywhere else could not be read even when the path is right. */
static void where_headers(bjob *b, const char *pagedir)
{
    char dirs[1024];
    size_t n = 0;
    for (size_t i = 0; i < b->nincs && n < sizeof(dirs); i++) {
        int k = snprintf(dirs + n, sizeof(dirs) - n, "%s%s", i ? ", " : "", b->incs[i]);
        if (k < 0)
            break;
        n += (size_t)k;
    }
    if (n >= sizeof(dirs))
        snprintf(dirs + sizeof(dirs) - 5, 5, "...");
    note(b,
         "%s: note: a header named as \"file.h\" is looked for beside the page (%s), then, as "
         "<file.h> is, in %s%sand in the compiler's system folders (/usr/include); "
         "the page compile can read no other folder, so put the header under the docroot or "
         "install it there",
         b->job->rel, pagedir, b->nincs ? dirs : "", b->nincs ? ", " : "");
}

static int compile(bjob *b)
{
    const sandlet_page_job *job = b->job;
    /* -iquote: "file.h" includes are looked up beside the page (the C
     * file itself lives in the work dir). */
    char pagedir[PATH_MAX];
    const char *slash = strrchr(job->rel, '/');
    int n = slash ? snprintf(pagedir, sizeof(pagedir), "%s/%.*s", job->docroot,
                             (int)(slash - job->rel), job->rel)
                  : snprintf(pagedir, sizeof(pagedir), "%s", job->docroot);
    if (n < 0 || (size_t)n >= sizeof(pagedir)) {
        note(b, "%s: error: the page's folder is too long a path", job->rel);
        return SANDLET_BUILD_FAILED;
    }
    char *argv[96]; /* 17 flags, -iquote, 33 -I pairs, page.c, NULL */
    size_t a = 0;
    argv[a++] = b->cc;
    static const char *const flags[] = {
        "-std=gnu11", "-O2", "-g", "-fPIC", "-shared", "-pipe", "-Wall",
        /* A misspelt function is the page's
         * error now, not an undefined symbol
         * when the worker loads it. */
        "-Werror=implicit-function-declaration", "-Wno-unused-variable", "-Wno-unused-function",
        "-Wno-unused-but-set-variable", "-fdiagnostics-color=never", "-fmax-errors=50", "-MD",
        "-MF", "deps", "-o", "page.so"};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        argv[a++] = (char *)flags[i];
    argv[a++] = "-iquote";
    argv[a++] = pagedir;
    for (size_t i = 0; i < b->nincs; i++) {
        argv[a++] = "-I";
        argv[a++] = (char *)b->incs[i];
    }
    argv[a++] = "page.c";
    argv[a] = NULL;

    char pathenv[PATH_MAX + 8], tmpenv[PATH_MAX + 8];
    snprintf(pathenv, sizeof(pathenv), "PATH=%s", b->path);
    snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", job->workdir);
    char *envp[] = {pathenv, "LANG=C", "LC_ALL=C", tmpenv, NULL};

    sandlet_buf err;
    sandlet_buf_init(&err, SANDLET_BUILD_MAX_DIAG);
    ccrun res;
    long long t0 = now_ms();
    int rc = run_cc(b, argv, envp, NULL, &err, &res);
    long long took = now_ms() - t0;
    if (rc < 0) {
        sandlet_buf_free(&err);
        note(b, "%s: error: cannot run the compiler '%s': %s", job->rel, b->cc, strerror(-rc));
        return SANDLET_BUILD_ERROR;
    }
    if (err.len)
        sandlet_buf_put(&b->diag, err.data, err.len);
    if (err.len && err.data[err.len - 1] != '\n')
        sandlet_buf_put(&b->diag, "\n", 1);
    if (res.dropped)
        note(b, "%s: note: %zu more bytes of compiler messages were dropped", job->rel,
             res.dropped);
    int status = SANDLET_BUILD_OK;
    if (res.timed_out) {
        note(b,
             "%s: error: the compiler was stopped after %u ms (the page-compile wall-clock "
             "limit); a page that includes itself or expands a macro without end cannot be "
             "compiled",
             job->rel, b->wall);
        status = SANDLET_BUILD_FAILED;
    } else if (WIFEXITED(res.status) && WEXITSTATUS(res.status) == 127 && took < 5000 && err.len &&
               memmem(err.data, err.len, "cannot execute the compiler", 27)) {
        note(b, "%s: error: cannot execute the compiler '%s'; fix page-compiler", job->rel, b->cc);
        status = SANDLET_BUILD_ERROR;
    } else if (!WIFEXITED(res.status) || WEXITSTATUS(res.status) != 0) {
        if (hit_limit(&res, &err))
            note(b,
                 "%s: error: the compiler was stopped at a limit (%u CPU seconds, %u MiB of "
                 "memory, 64 MiB of output per process); a page that includes itself or "
                 "expands a macro without end cannot be compiled",
                 job->rel, b->cpu, b->mib);
        status = SANDLET_BUILD_FAILED;
    }
    if (status == SANDLET_BUILD_FAILED && missing_header(&err))
        where_headers(b, pagedir);
    sandlet_buf_free(&err);
    if (status == SANDLET_BUILD_OK) {
        struct stat sb;
        if (fstatat(b->wfd, "page.so", &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(sb.st_mode)) {
            note(b, "%s: error: the compiler succeeded but wrote no page.so; fix page-compiler",
                 job->rel);
            status = SANDLET_BUILD_ERROR;
        }
    }
    if (status != SANDLET_BUILD_ERROR)
        add_deps(b);
    if (status == SANDLET_BUILD_OK)
        line_table(b, envp);
    return status;
}

/* Reads and hashes the page, records it in the stamp, translates it to
 * page.c.  FAILED with a diagnostic when the page is wrong. */
static int translate(bjob *b)
{
    const char *rel = b->job->rel;
    struct stat sb;
    int fd = sandlet_page_open_beneath(b->docfd, rel, &sb);
    if (fd < 0) {
        note(b, "%s: error: cannot open the page beneath the docroot: %s", rel,
             fd == -EXDEV ? "it leaves the docroot" : strerror(-fd));
        return SANDLET_BUILD_ERROR;
    }
    if ((unsigned long long)sb.st_size > SANDLET_CSP_MAX_INPUT) {
        close(fd);
        note(b, "%s: error: the page is larger than a page may be (16 MiB)", rel);
        return SANDLET_BUILD_ERROR;
    }
    uint8_t *src = malloc((size_t)sb.st_size + 1);
    size_t len = 0;
    ssize_t r = 0;
    while (
        src && len <= (size_t)sb.st_size &&
        ((r = read(fd, src + len, (size_t)sb.st_size + 1 - len)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            len += (size_t)r;
    close(fd);
    if (!src || r < 0 || len > (size_t)sb.st_size) {
        free(src);
        note(b, "%s: error: cannot read the page (%s); try again", rel,
             !src    ? "out of memory"
             : r < 0 ? strerror(errno)
                     : "it grew while read");
        return SANDLET_BUILD_ERROR;
    }
    /* The stamp holds the hash of exactly the bytes translated: a write
     * racing with the read makes the next check see a change. */
    uint8_t h[32];
    crypto_generichash(h, 32, src, len, NULL, 0);
    sb.st_size = (off_t)len;
    int rc = sandlet_page_stamp_add(&b->st, rel, &sb, h);
    if (rc == 0)
        rc = write_stamp(b, false);
    if (rc < 0) {
        free(src);
        return SANDLET_BUILD_ERROR;
    }
    sandlet_buf out;
    sandlet_buf_init(&out, 0);
    sandlet_csp_error err;
    rc = sandlet_csp_translate(rel, src, len, &out, &err);
    free(src);
    if (rc < 0) {
        sandlet_buf_free(&out);
        if (rc == -ENOMEM) {
            note(b, "%s: error: out of memory translating the page", rel);
            return SANDLET_BUILD_ERROR;
        }
        note(b, "%s:%lu:%lu: error: %s", rel, err.line, err.col, err.msg);
        return SANDLET_BUILD_FAILED;
    }
    rc = put_file(b, "page.c", out.data, out.len);
    sandlet_buf_free(&out);
    if (rc < 0) {
        note(b, "%s: error: cannot write the generated C: %s", rel, strerror(-rc));
        return rc == -EFBIG ? SANDLET_BUILD_FAILED : SANDLET_BUILD_ERROR;
    }
    return SANDLET_BUILD_OK;
}

int sandlet_page_build(const sandlet_page_job *job)
{
    if (!job || !job->docroot || job->docroot[0] != '/' || !job->workdir ||
        job->workdir[0] != '/' || sandlet_page_rel_check(job->rel) < 0) {
        fprintf(stderr, "sandlet: page build: needs an absolute docroot and work dir and a page "
                        "path ending in .csp\n");
        return SANDLET_BUILD_ERROR;
    }
    bjob b;
    memset(&b, 0, sizeof(b));
    b.job = job;
    b.docfd = -1;
    sandlet_buf_init(&b.diag, SANDLET_BUILD_MAX_DIAG + 4096);
    b.cpu = job->cpu_seconds ? job->cpu_seconds : SANDLET_BUILD_DEFAULT_CPU_SECONDS;
    b.mib = job->memory_mib ? job->memory_mib : SANDLET_BUILD_DEFAULT_MEMORY_MIB;
    b.wall = job->wall_ms ? job->wall_ms : SANDLET_BUILD_DEFAULT_WALL_MS;
    b.wfd = open(job->workdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (b.wfd < 0) {
        fprintf(stderr, "sandlet: page build: work dir '%s': %s\n", job->workdir, strerror(errno));
        sandlet_buf_free(&b.diag);
        return SANDLET_BUILD_ERROR;
    }
    int status = SANDLET_BUILD_ERROR;
    if (getuid() == 0 || geteuid() == 0 || getgid() == 0 || getegid() == 0) {
        note(&b,
             "%s: error: compiles never run as root; run the compile as the page sandbox's "
             "user",
             job->rel);
        goto out;
    }
    if (sodium_init() < 0) {
        note(&b, "%s: error: libsodium failed to initialise", job->rel);
        goto out;
    }
    for (size_t i = 0; i < job->nincludes && b.nincs < 32; i++)
        if (job->includes[i] && job->includes[i][0])
            b.incs[b.nincs++] = job->includes[i];
    struct stat sb;
    bool dup = false;
    for (size_t i = 0; i < b.nincs; i++)
        dup = dup || strcmp(b.incs[i], SANDLET_INCLUDEDIR) == 0;
    if (!dup && stat(SANDLET_INCLUDEDIR, &sb) == 0)
        b.incs[b.nincs++] = SANDLET_INCLUDEDIR;
    const char *cc = job->compiler && job->compiler[0] ? job->compiler : "cc";
    const char *path = getenv("PATH");
    b.path = path && *path && strlen(path) < PATH_MAX ? path : "/usr/local/bin:/usr/bin:/bin";
    if (resolve_prog(b.cc, cc, b.path) < 0) {
        note(&b,
             "%s: error: no compiler '%s' (looked up in PATH); install a C compiler or set "
             "page-compiler",
             job->rel, cc);
        goto out;
    }
    find_objdump(&b);
    b.docfd = open(job->docroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (b.docfd < 0) {
        note(&b, "%s: error: docroot '%s': %s", job->rel, job->docroot, strerror(errno));
        goto out;
    }
    if (!(b.st.rel = strdup(job->rel))) {
        note(&b, "%s: error: out of memory", job->rel);
        goto out;
    }
    if (confine(&b) < 0)
        goto out;
    if ((status = translate(&b)) != SANDLET_BUILD_OK)
        goto out;
    status = compile(&b);
    if (status != SANDLET_BUILD_ERROR && write_stamp(&b, status == SANDLET_BUILD_OK) < 0)
        status = SANDLET_BUILD_ERROR;
out:
    status = finish(&b, status);
    sandlet_page_stamp_free(&b.st);
    sandlet_buf_free(&b.diag);
    if (b.docfd >= 0)
        close(b.docfd);
    close(b.wfd);
    return status;
}

static int num_arg(const char *s, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v == 0 || v > max || s[0] == '-')
        return -1;
    *out = (unsigned)v;
    return 0;
}

int sandlet_page_build_main(int argc, char **argv)
{
    sandlet_page_job job = {0};
    const char *incs[32];
    size_t ninc = 0;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "sandlet --compile-page: '%s' needs a value\n", o);
            return SANDLET_BUILD_ERROR;
        }
        i++;
        if (strcmp(o, "--docroot") == 0)
            job.docroot = v;
        else if (strcmp(o, "--page") == 0)
            job.rel = v;
        else if (strcmp(o, "--workdir") == 0)
            job.workdir = v;
        else if (strcmp(o, "--cc") == 0)
            job.compiler = v;
        else if (strcmp(o, "-I") == 0 && ninc < sizeof(incs) / sizeof(incs[0]))
            incs[ninc++] = v;
        else if (!(strcmp(o, "--cpu") == 0 && num_arg(v, 86400, &job.cpu_seconds) == 0) &&
                 !(strcmp(o, "--memory") == 0 && num_arg(v, 1u << 20, &job.memory_mib) == 0) &&
                 !(strcmp(o, "--wall") == 0 && num_arg(v, 86400000, &job.wall_ms) == 0)) {
            fprintf(stderr,
                    "sandlet --compile-page: bad option '%s' (or too many -I); usage: "
                    "--docroot DIR --page REL --workdir DIR [--cc CC] [-I DIR]... "
                    "[--cpu S] [--memory MIB] [--wall MS]\n",
                    o);
            return SANDLET_BUILD_ERROR;
        }
    }
    if (!job.docroot || !job.rel || !job.workdir) {
        fprintf(stderr, "sandlet --compile-page: --docroot, --page and --workdir are required\n");
        return SANDLET_BUILD_ERROR;
    }
    job.includes = incs;
    job.nincludes = ninc;
    return sandlet_page_build(&job);
}

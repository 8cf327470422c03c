/*
 * filehint.c - the file calls a servlet makes, passed through to the C
 * library, noting the first one a request was refused (EACCES, EPERM) in
 * a worker of development mode where the kernel records no Landlock
 * denial (filehint.h).  The worker explains it after the request
 * (worker.c, with sandlet_filehint_describe in denial.c).
 *
 * These definitions are the executable's: sandletd exports them
 * (Makefile.am, --dynamic-list filehint.sym), so a servlet's open()
 * resolves here before the C library's, as would an LD_PRELOAD'ed one.
 * Every process of the daemon and the libraries it loads call through
 * them, so outside a worker that started them they must be exactly the C
 * library's call: one relaxed load and a branch more, errno untouched.
 * They never log, allocate or make a system call of their own: a worker's
 * allowlist would kill it for one.
 */
#include "config.h"

#include "sandbox/filehint.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool on;             /* a worker started them: set before its servlets load */
static char start_dir[512]; /* its folder then, for relative paths (NUL-ended) */
_Static_assert(sizeof(start_dir) + 2 < sizeof(((sandlet_filehint *)0)->path),
               "a relative path's folder fits before it");
static int noted; /* 0: nothing since begin; 1: being written; 2: noted */
static unsigned more;
static sandlet_filehint first;

/* The C library's function name (the next definition after ours),
 * resolved once; the hint's start resolves them all while the worker
 * may still map and open what dlsym needs. */
#define REAL(type, name)                                                                           \
    static type real_##name;                                                                       \
    static type get_##name(void)                                                                   \
    {                                                                                              \
        type f = __atomic_load_n(&real_##name, __ATOMIC_RELAXED);                                  \
        if (!f) {                                                                                  \
            *(void **)&f = dlsym(RTLD_NEXT, #name);                                                \
            __atomic_store_n(&real_##name, f, __ATOMIC_RELAXED);                                   \
        }                                                                                          \
        return f;                                                                                  \
    }

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*creat_fn)(const char *, mode_t);
typedef FILE *(*fopen_fn)(const char *, const char *);
typedef DIR *(*opendir_fn)(const char *);
typedef int (*mkdir_fn)(const char *, mode_t);
typedef int (*path_fn)(const char *);
typedef int (*rename_fn)(const char *, const char *);
typedef int (*truncate_fn)(const char *, off_t);

REAL(open_fn, open)
REAL(openat_fn, openat)
#ifdef __LP64__
REAL(open_fn, open64)
REAL(openat_fn, openat64)
REAL(fopen_fn, fopen64)
#endif
REAL(creat_fn, creat)
REAL(fopen_fn, fopen)
REAL(opendir_fn, opendir)
REAL(mkdir_fn, mkdir)
REAL(path_fn, unlink)
REAL(path_fn, rmdir)
REAL(rename_fn, rename)
REAL(truncate_fn, truncate)

/* Notes a refused call on path, relative to dirfd, when errno says
 * Landlock may have refused it: the first of the request, and a count of
 * the others.  errno is left as it was. */
static void refused(const char *call, int dirfd, const char *path, bool write)
{
    int err = errno;
    if (!__atomic_load_n(&on, __ATOMIC_RELAXED) || (err != EACCES && err != EPERM) || !path)
        return;
    int expect = 0;
    if (!__atomic_compare_exchange_n(&noted, &expect, 1, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&more, 1, __ATOMIC_RELAXED);
        return;
    }
    first.call = call;
    first.write = write;
    first.err = err;
    first.relative = path[0] != '/' && dirfd != AT_FDCWD;
    size_t n = 0;
    if (path[0] != '/' && dirfd == AT_FDCWD) {
        n = strnlen(start_dir, sizeof(start_dir)); /* < sizeof(first.path) - 2 */
        memcpy(first.path, start_dir, n);
        if (n == 0 || first.path[n - 1] != '/')
            first.path[n++] = '/';
    }
    size_t k = strnlen(path, sizeof(first.path) - 1 - n);
    memcpy(first.path + n, path, k);
    first.path[n + k] = '\0';
    __atomic_store_n(&noted, 2, __ATOMIC_RELEASE);
}

/* A call the C library does not have (never on glibc): as the kernel
 * would answer one it does not know. */
static int missing(void)
{
    errno = ENOSYS;
    return -1;
}

static bool writes(int flags)
{
    return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) != 0;
}

/* fopen's mode writes unless it is "r" without "+". */
static bool mode_writes(const char *m)
{
    return m && (m[0] != 'r' || strchr(m, '+') != NULL);
}

/* Whether open's flags make a file, so that a mode follows them: as
 * glibc's own __OPEN_NEEDS_MODE (O_TMPFILE holds O_DIRECTORY's bit, so
 * only all of its bits count). */
static bool needs_mode(int flags)
{
    return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
}

/* Declares mode: open's third argument, there only when the flags make a
 * file.  flags is the variadic function's last named parameter. */
#define MODE_ARG(flags)                                                                            \
    mode_t mode = 0;                                                                               \
    if (needs_mode(flags)) {                                                                       \
        va_list ap;                                                                                \
        va_start(ap, flags); /* NOLINT(bugprone-macro-parentheses): a name */                      \
        mode = (mode_t)va_arg(ap, unsigned);                                                       \
        va_end(ap);                                                                                \
    }

/* A wrapper of an open-like call: name's real function, then the note. */
#define OPEN_AT(name, call, dirfd)                                                                 \
    MODE_ARG(flags)                                                                                \
    open_fn f = get_##name();                                                                      \
    int fd = f ? f(path, flags, mode) : missing();                                                 \
    if (fd < 0)                                                                                    \
        refused(call, dirfd, path, writes(flags));                                                 \
    return fd;

int open(const char *path, int flags, ...)
{
    OPEN_AT(open, "open", AT_FDCWD)
}

int openat(int dirfd, const char *path, int flags, ...)
{
    MODE_ARG(flags)
    openat_fn f = get_openat();
    int fd = f ? f(dirfd, path, flags, mode) : missing();
    if (fd < 0)
        refused("openat", dirfd, path, writes(flags));
    return fd;
}

#ifdef __LP64__
/* Separate symbols that servlets built with _FILE_OFFSET_BITS=64 or
 * _LARGEFILE64_SOURCE call (on 32-bit systems those redirect open
 * itself, and only the plain names are defined here). */
int open64(const char *path, int flags, ...)
{
    OPEN_AT(open64, "open", AT_FDCWD)
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    MODE_ARG(flags)
    openat_fn f = get_openat64();
    int fd = f ? f(dirfd, path, flags, mode) : missing();
    if (fd < 0)
        refused("openat", dirfd, path, writes(flags));
    return fd;
}

FILE *fopen64(const char *path, const char *m)
{
    fopen_fn f = get_fopen64();
    FILE *file = f ? f(path, m) : (missing(), NULL);
    if (!file)
        refused("fopen", AT_FDCWD, path, mode_writes(m));
    return file;
}
#endif

int creat(const char *path, mode_t mode)
{
    creat_fn f = get_creat();
    int fd = f ? f(path, mode) : missing();
    if (fd < 0)
        refused("creat", AT_FDCWD, path, true);
    return fd;
}

FILE *fopen(const char *path, const char *m)
{
    fopen_fn f = get_fopen();
    FILE *file = f ? f(path, m) : (missing(), NULL);
    if (!file)
        refused("fopen", AT_FDCWD, path, mode_writes(m));
    return file;
}

DIR *opendir(const char *path)
{
    opendir_fn f = get_opendir();
    DIR *d = f ? f(path) : (missing(), NULL);
    if (!d)
        refused("opendir", AT_FDCWD, path, false);
    return d;
}

int mkdir(const char *path, mode_t mode)
{
    mkdir_fn f = get_mkdir();
    int rc = f ? f(path, mode) : missing();
    if (rc < 0)
        refused("mkdir", AT_FDCWD, path, true);
    return rc;
}

int unlink(const char *path)
{
    path_fn f = get_unlink();
    int rc = f ? f(path) : missing();
    if (rc < 0)
        refused("unlink", AT_FDCWD, path, true);
    return rc;
}

int rmdir(const char *path)
{
    path_fn f = get_rmdir();
    int rc = f ? f(path) : missing();
    if (rc < 0)
        refused("rmdir", AT_FDCWD, path, true);
    return rc;
}

int rename(const char *from, const char *to)
{
    rename_fn f = get_rename();
    int rc = f ? f(from, to) : missing();
    if (rc < 0)
        refused("rename", AT_FDCWD, to, true);
    return rc;
}

int truncate(const char *path, off_t len)
{
    truncate_fn f = get_truncate();
    int rc = f ? f(path, len) : missing();
    if (rc < 0)
        refused("truncate", AT_FDCWD, path, true);
    return rc;
}

void sandlet_filehint_resolve(void)
{
    (void)get_open();
    (void)get_openat();
#ifdef __LP64__
    (void)get_open64();
    (void)get_openat64();
    (void)get_fopen64();
#endif
    (void)get_creat();
    (void)get_fopen();
    (void)get_opendir();
    (void)get_mkdir();
    (void)get_unlink();
    (void)get_rmdir();
    (void)get_rename();
    (void)get_truncate();
}

void sandlet_filehint_start(const char *cwd)
{
    sandlet_filehint_resolve();
    snprintf(start_dir, sizeof(start_dir), "%s", cwd && *cwd ? cwd : "/");
    __atomic_store_n(&on, true, __ATOMIC_RELEASE);
}

void sandlet_filehint_begin(void)
{
    __atomic_store_n(&more, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&noted, 0, __ATOMIC_RELEASE);
}

bool sandlet_filehint_end(sandlet_filehint *out)
{
    if (__atomic_load_n(&noted, __ATOMIC_ACQUIRE) != 2)
        return false;
    *out = first;
    /* A servlet's thread may have noted one while a request began. */
    out->path[sizeof(out->path) - 1] = '\0';
    out->more = __atomic_load_n(&more, __ATOMIC_RELAXED);
    return true;
}

/*
 * spool.c - where the file parts of a streamed multipart body go when
 * they outgrow memory: one temporary file per request, in the directory
 * the driver named (the worker's own spool directory, see
 * doc/architecture.md), and sl_file_read over them.
 *
 * The file has no name: O_TMPFILE, or (on a filesystem without it, and
 * only where the sandbox may unlink) a random name unlinked at once.  It
 * is closed, and so gone, when the request is reset.  This file must
 * never open anything but in the spool directory, nor keep a spool file
 * or a mapping of one past its request.
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

/* A path, not a descriptor: a worker holds no descriptor between
 * requests but its own (test_privsep checks), and openat by path is what
 * the base allowlist lets through with O_TMPFILE. */
static const char *spool_path;
static bool spool_named;

void sandlet_lib_spool_dir(const char *dir, bool named_ok)
{
    spool_path = dir && *dir ? dir : NULL;
    spool_named = named_ok;
}

bool sandlet_lib_spool_enabled(void)
{
    return spool_path != NULL;
}

/* A named file, unlinked at once: for filesystems without O_TMPFILE.
 * openat(O_CREAT) and unlinkat are the files group's calls. */
static int open_named(void)
{
    static const char hex[] = "0123456789abcdef";
    for (int tries = 0; tries < 8; tries++) {
        unsigned char r[8];
        if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
            return -EIO;
        char name[4 + 2 * sizeof(r) + 1] = ".sl-";
        for (size_t i = 0; i < sizeof(r); i++) {
            name[4 + 2 * i] = hex[r[i] >> 4];
            name[5 + 2 * i] = hex[r[i] & 15];
        }
        name[sizeof(name) - 1] = '\0';
        char path[PATH_MAX];
        int n = snprintf(path, sizeof(path), "%s/%s", spool_path, name);
        if (n < 0 || (size_t)n >= sizeof(path))
            return -ENAMETOOLONG;
        int fd = openat(AT_FDCWD, path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return -errno;
        if (unlinkat(AT_FDCWD, path, 0) < 0) {
            int err = -errno;
            close(fd);
            return err;
        }
        return fd;
    }
    return -EEXIST;
}

static int spool_open(void)
{
    if (!spool_path)
        return -ENOENT;
    /* O_TMPFILE: the worker's allowlist lets openat through with this
     * flag only, so the base confinement can spool. */
    int fd = openat(AT_FDCWD, spool_path, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    int err = errno;
    if (err != EOPNOTSUPP && err != EISDIR && err != EINVAL)
        return -err;
    if (!spool_named) {
        static bool said;
        if (!said)
            fprintf(stderr, "sandlet: the spool directory's filesystem has no O_TMPFILE, and "
                            "a named temporary file needs 'syscalls files;' in the sandbox's "
                            "block: large multipart file parts cannot be spooled\n");
        said = true;
        return -EOPNOTSUPP;
    }
    return open_named();
}

int sandlet_lib_spool_append(sl_request *rq, const void *p, size_t n)
{
    if (rq->spool_fd < 0) {
        int fd = spool_open();
        if (fd < 0)
            return fd;
        rq->spool_fd = fd;
        rq->spool_end = 0;
    }
    const uint8_t *b = p;
    while (n > 0) {
        /* Appends: nothing else moves the offset while a form is read
         * (sl_file_read runs only after the parse). */
        ssize_t w = write(rq->spool_fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno; /* EFBIG past max-file-size (SIGXFSZ is ignored), ENOSPC */
        if (w == 0)
            return -EIO;
        b += w;
        n -= (size_t)w;
        rq->spool_end += (uint64_t)w;
    }
    return 0;
}

uint64_t sandlet_lib_spool_end(const sl_request *rq)
{
    return rq->spool_end;
}

int sandlet_lib_spool_part(sl_request *rq, sandlet_lib_file *f, uint64_t off, uint64_t len)
{
    f->spooled = true;
    f->spool_off = off;
    f->pub.data = NULL;
    f->pub.len = (size_t)len;
    if (len > SIZE_MAX / 2)
        return 0;
    /* Mapped for servlets written against data: pages come in as they
     * are touched (and then count to RSS as file pages the kernel may
     * drop).  The mappings of a request take at most a quarter of the
     * worker's address-space limit (the sandbox's memory), so that they
     * never starve its malloc: past that, data is NULL. */
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t base = pg > 0 ? off - off % (uint64_t)pg : off;
    size_t mlen = (size_t)(len + (off - base));
    if (mlen == 0)
        return 0;
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY &&
        (mlen > as.rlim_cur / 4 || rq->spool_mapped > as.rlim_cur / 4 - mlen))
        return 0;
    void *m = mmap(NULL, mlen, PROT_READ, MAP_PRIVATE, rq->spool_fd, (off_t)base);
    if (m == MAP_FAILED)
        return 0;
    f->map = m;
    f->map_len = mlen;
    rq->spool_mapped += mlen;
    f->pub.data = (const uint8_t *)m + (off - base);
    return 0;
}

void sandlet_lib_spool_reset(sl_request *rq)
{
    for (size_t i = 0; i < rq->nfiles; i++) {
        sandlet_lib_file *f = &rq->files[i];
        if (f->map)
            munmap(f->map, f->map_len);
        f->map = NULL;
        f->pub.data = NULL;
    }
    if (rq->spool_fd >= 0)
        close(rq->spool_fd);
    rq->spool_fd = -1;
    rq->spool_end = 0;
    rq->spool_mapped = 0;
}

/* The library's own record of f, or NULL when f is not one of rq's. */
static const sandlet_lib_file *lib_file(const sl_request *rq, const sl_file *f)
{
    for (size_t i = 0; f && i < rq->nfiles; i++)
        if (&rq->files[i].pub == f)
            return &rq->files[i];
    return NULL;
}

ssize_t sl_file_read(sl_request *rq, const sl_file *f, void *buf, size_t n, size_t off)
{
    const sandlet_lib_file *lf = rq ? lib_file(rq, f) : NULL;
    if (!lf || (!buf && n)) {
        errno = EINVAL;
        return -1;
    }
    if (off >= f->len || n == 0)
        return 0;
    if (n > f->len - off)
        n = f->len - off;
    if (n > SSIZE_MAX)
        n = SSIZE_MAX;
    if (!lf->spooled) {
        memcpy(buf, (const uint8_t *)f->data + off, n);
        return (ssize_t)n;
    }
    /* lseek and read, not pread: both are in every worker's allowlist. */
    if (lseek(rq->spool_fd, (off_t)(lf->spool_off + off), SEEK_SET) < 0)
        return -1;
    ssize_t r;
    do
        r = read(rq->spool_fd, buf, n);
    while (r < 0 && errno == EINTR);
    return r;
}

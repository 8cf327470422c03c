/*
 * spool.c - the file parts of a streamed multipart body that outgrow
 * memory, as ranges of the acceptor's copy of that body, and sl_file_read
 * over them.
 *
 * The worker never writes a spool file.  The supervisor makes one unnamed
 * file per worker (O_TMPFILE in spool-dir/SANDBOX) and hands the worker a
 * read-only descriptor of it, the acceptor a writable one; the acceptor
 * writes a streamed multipart body into it as it sends the body's frames
 * (loop/stream.c), always before the frame that carries the same bytes,
 * and truncates it when the request ends.  So a file part here is an
 * offset and a length in that file, checked against the file's size.
 * This file must never open or write a file, nor keep a mapping past its
 * request.
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* The worker's spool file, read-only, or -1: large parts stay in memory. */
static int spool_fd = -1;

void sandlet_lib_spool_set(int fd)
{
    spool_fd = fd;
}

bool sandlet_lib_spool_enabled(void)
{
    return spool_fd >= 0;
}

/* Whether the acceptor's copy of the body holds its first end bytes.  The
 * acceptor writes a body there only when its sandbox's spool has room
 * (spool-size); otherwise the file stays empty, and this says no. */
bool sandlet_lib_spool_holds(uint64_t end)
{
    struct stat st;
    return spool_fd >= 0 && end > 0 && fstat(spool_fd, &st) == 0 && st.st_size >= 0 &&
           (uint64_t)st.st_size >= end;
}

int sandlet_lib_spool_part(sl_request *rq, sandlet_lib_file *f, uint64_t off, uint64_t len)
{
    /* The bytes were all in the file when the parser saw them; a file
     * that lost them (a write the acceptor could not make) fails the form
     * rather than hand out another request's bytes or zeros. */
    if (len > UINT64_MAX - off || !sandlet_lib_spool_holds(off + len))
        return -EIO;
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
    void *m = mmap(NULL, mlen, PROT_READ, MAP_PRIVATE, spool_fd, (off_t)base);
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
        f->spooled = false;
    }
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
    /* lseek and read, not pread: both are in every worker's allowlist.
     * The descriptor is the worker's alone, and one request at a time
     * uses it. */
    if (lseek(spool_fd, (off_t)(lf->spool_off + off), SEEK_SET) < 0)
        return -1;
    ssize_t r;
    do
        r = read(spool_fd, buf, n);
    while (r < 0 && errno == EINTR);
    return r;
}

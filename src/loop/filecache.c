/*
 * filecache.c - small static files kept in memory with their headers'
 * parts (type, ETag, Last-Modified), so that a hot page or icon costs one
 * fstatat per request instead of open, fstat, read and close.
 *
 * Every hit is checked against the file system: the cached path is
 * stat'ed again and device, inode, size, mtime and ctime must all match,
 * so a file replaced or rewritten is never served stale (files changed in
 * the last seconds are not cached at all, see sandlet_filecache_put).  An entry is
 * only ever made from a file static.c opened under the docroot fence, and
 * a hit means the path still names that very file.  The table is fixed
 * (direct-mapped), one loop thread uses it, and it never grows: at most
 * SANDLET_FILECACHE_SLOTS files of at most SANDLET_FILECACHE_MAX bytes.
 */
#include "config.h"

#include "loop/filecache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static sandlet_cached_file table[SANDLET_FILECACHE_SLOTS];

/* FNV-1a: cheap, and collisions only cost a miss. */
static size_t slot_of(const char *key, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 16777619u;
    }
    return h % SANDLET_FILECACHE_SLOTS;
}

static bool same_file(const sandlet_cached_file *e, const struct stat *st)
{
    return S_ISREG(st->st_mode) && st->st_dev == e->dev && st->st_ino == e->ino &&
           st->st_size == (off_t)e->size && st->st_mtim.tv_sec == e->mtim.tv_sec &&
           st->st_mtim.tv_nsec == e->mtim.tv_nsec && st->st_ctim.tv_sec == e->ctim.tv_sec &&
           st->st_ctim.tv_nsec == e->ctim.tv_nsec;
}

const sandlet_cached_file *sandlet_filecache_get(int docroot_fd, const char *key, size_t len)
{
    if (len >= sizeof(table[0].key))
        return NULL;
    sandlet_cached_file *e = &table[slot_of(key, len)];
    if (!e->data || e->key_len != len || memcmp(e->key, key, len) != 0)
        return NULL;
    struct stat st;
    if (fstatat(docroot_fd, e->rel, &st, 0) < 0 || !same_file(e, &st)) {
        e->key_len = 0; /* stale: the next miss refills it */
        return NULL;
    }
    return e;
}

void sandlet_filecache_put(const char *key, size_t len, const char *rel, int fd,
                           const struct stat *st, const char *mime, const char *etag,
                           const char *lastmod)
{
    if (len >= sizeof(table[0].key) || strlen(rel) >= sizeof(table[0].rel) ||
        strlen(mime) >= sizeof(table[0].mime) || strlen(etag) >= sizeof(table[0].etag) ||
        strlen(lastmod) >= sizeof(table[0].lastmod) || !S_ISREG(st->st_mode) || st->st_size < 0 ||
        (uint64_t)st->st_size > SANDLET_FILECACHE_MAX || rel[0] == '\0')
        return;
    /* File times have the kernel's coarse granularity (a few ms): a file
     * changed again within the same tick, with the same size, would look
     * unchanged.  So only files left alone for a while are cached (git's
     * "racy clean" rule); any later change then moves ctime visibly. */
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) < 0 ||
        st->st_ctim.tv_sec + SANDLET_FILECACHE_SETTLE > now.tv_sec ||
        st->st_mtim.tv_sec + SANDLET_FILECACHE_SETTLE > now.tv_sec)
        return;
    sandlet_cached_file *e = &table[slot_of(key, len)];
    e->key_len = 0;
    if (!e->data && !(e->data = malloc(SANDLET_FILECACHE_MAX)))
        return; /* no memory: serving goes on uncached */
    size_t size = (size_t)st->st_size;
    ssize_t got = size ? pread(fd, e->data, size, 0) : 0;
    if (got != (ssize_t)size)
        return;
    memcpy(e->key, key, len);
    memcpy(e->rel, rel, strlen(rel) + 1);
    memcpy(e->mime, mime, strlen(mime) + 1);
    memcpy(e->etag, etag, strlen(etag) + 1);
    memcpy(e->lastmod, lastmod, strlen(lastmod) + 1);
    e->dev = st->st_dev;
    e->ino = st->st_ino;
    e->size = (uint64_t)st->st_size;
    e->mtim = st->st_mtim;
    e->ctim = st->st_ctim;
    e->key_len = len;
}

void sandlet_filecache_free(void)
{
    /* Only slots that were filled are written: the supervisor calls this
     * right after its fork, and clearing every slot made the whole empty
     * table (50 KiB of zero pages) resident in it for nothing.  An unused
     * slot is all zeros already. */
    for (size_t i = 0; i < SANDLET_FILECACHE_SLOTS; i++) {
        if (!table[i].data && !table[i].key_len)
            continue;
        free(table[i].data);
        table[i].data = NULL;
        table[i].key_len = 0;
    }
}

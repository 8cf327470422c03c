/*
 * filecache.h - the acceptor's cache of small static files (filecache.c).
 */
#ifndef SANDLET_FILECACHE_H
#define SANDLET_FILECACHE_H

#include "loop/static.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define SANDLET_FILECACHE_SLOTS 64
/* Files up to this size are cached (and sent with their head in one
 * write when not cached). */
#define SANDLET_FILECACHE_MAX ((size_t)16 * 1024)
/* Seconds a file must have been left unchanged before it is cached. */
#define SANDLET_FILECACHE_SETTLE 2

typedef struct sandlet_cached_file {
    char key[256];  /* the request path as sent, before any '?' */
    size_t key_len; /* 0: empty slot */
    char rel[256];  /* the file relative to the docroot, as resolved */
    char mime[128];
    char etag[SANDLET_STATIC_ETAG_MAX];
    char lastmod[SANDLET_STATIC_DATE_MAX];
    dev_t dev;
    ino_t ino;
    uint64_t size;
    struct timespec mtim, ctim;
    uint8_t *data; /* SANDLET_FILECACHE_MAX bytes once used */
} sandlet_cached_file;

/* The cached file for this request path when the path still names the
 * very file cached (checked with one fstatat), else NULL.  The entry is
 * valid until the next put. */
const sandlet_cached_file *sandlet_filecache_get(int docroot_fd, const char *key, size_t len);
/* Remembers the small regular file open as fd (read with pread from 0)
 * for this request path; does nothing when anything does not fit. */
void sandlet_filecache_put(const char *key, size_t len, const char *rel, int fd,
                           const struct stat *st, const char *mime, const char *etag,
                           const char *lastmod);
void sandlet_filecache_free(void);

#endif

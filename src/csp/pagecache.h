/*
 * pagecache.h - the compile cache of C Server Pages: which build of a page
 * is current, and the installing of a finished build into the cache.
 *
 * Layout.  <cachedir> is one sandbox's folder (<page-cache>/<sandbox>, for
 * example /var/cache/sandlet/pages), created by the caller.  For a page
 * whose path relative to the docroot is REL ("shop/cart.csp"):
 *
 *   key          sanitized basename (alnum, '_' and '-', at most 40
 *                characters) + "-" + 16 hex digits of BLAKE2b(REL):
 *                "cart-3fa9c2e1d4b5a607"
 *   <key>.so     the last good build (what workers dlopen)
 *   <key>.c      the generated C of the last attempt
 *   <key>.diag   the diagnostics of the last attempt (empty when clean)
 *   <key>.stamp  what the last attempt was built from (format below)
 *   .build-<key>/  the work dir of a compile in progress
 *
 * Every file in <cachedir> is written by the caller's euid, mode 0644; the
 * work dir belongs to the compile's uid, and everything in it is treated
 * as hostile: it is read without following links, only from regular files
 * of bounded size, and copied (never renamed) into place.
 *
 * The stamp, text, one record a line, parsed strictly (any other byte,
 * order or count makes it invalid, and an invalid stamp means STALE):
 *
 *   sandlet-page-stamp 1
 *   sandlet VERSION                 the sandlet that built it
 *   page REL
 *   result ok|failed
 *   file SIZE MTIME_NS INODE HASH PATH   the page first, then each header
 *   ...                             it included from under the docroot
 *   end
 *
 * HASH is 64 hex digits of BLAKE2b-256 of the content, PATH relative to
 * the docroot (the rest of the line; no control characters).
 *
 * This module never compiles, never runs anything and never writes inside
 * the docroot; it reads the docroot only beneath a directory descriptor.
 */
#ifndef SANDLET_CSP_PAGECACHE_H
#define SANDLET_CSP_PAGECACHE_H

#include "common/buf.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Bounds on what a work dir may hand back. */
#define SANDLET_PAGE_MAX_STAMP ((size_t)1024 * 1024)
#define SANDLET_PAGE_MAX_DIAG  ((size_t)64 * 1024)
#define SANDLET_PAGE_MAX_SO    ((size_t)256 * 1024 * 1024)
#define SANDLET_PAGE_MAX_C     ((size_t)160 * 1024 * 1024)
#define SANDLET_PAGE_MAX_LINES ((size_t)4 * 1024 * 1024)
/* Files a stamp may list (the page and its headers). */
#define SANDLET_PAGE_MAX_DEPS 4096
/* The key: 40 + "-" + 16 + NUL. */
#define SANDLET_PAGE_KEY_MAX 58

enum sandlet_page_state {
    SANDLET_PAGE_MISSING, /* the page is not in the docroot (any more) */
    SANDLET_PAGE_STALE,   /* never built, or something it was built from changed */
    SANDLET_PAGE_READY,   /* so names the build of exactly this page */
    SANDLET_PAGE_FAILED,  /* the last attempt on exactly this page failed; diag says why */
};

typedef struct sandlet_page_info {
    enum sandlet_page_state state;
    char so[PATH_MAX];   /* <cachedir>/<key>.so   (exists when READY)  */
    char diag[PATH_MAX]; /* <cachedir>/<key>.diag (FAILED/READY)       */
    char first[512];     /* first diagnostic line, for the log ("" none) */
} sandlet_page_info;

/* Whether rel names a page: relative, no "..", no empty or "." segment,
 * no control character, ending in ".csp" in any case.  0 or -EINVAL. */
int sandlet_page_rel_check(const char *rel);

/* The cache key of the page rel into out.  0, -EINVAL (rel), -ENOSPC. */
int sandlet_page_key(const char *rel, char *out, size_t cap);

/*
 * The timestamp rule.  READY or FAILED only when the stamp matches the
 * page and every dependency it lists (equal size, mtime and inode, or else
 * equal content hash: a copied-but-unchanged page or a cache built ahead
 * of time elsewhere still counts, and the stamp is then refreshed);
 * STALE when anything changed, a dependency is gone, the stamp is missing
 * or invalid, or it is from another sandlet version; MISSING when the page
 * itself is gone.  Never compiles.  Returns 0, or -errno (-EINVAL for a
 * bad rel, other errors reading the docroot or the cache).
 */
int sandlet_page_check(const char *cachedir, int docroot_fd, const char *rel,
                       sandlet_page_info *out);

/* A fresh empty work dir <cachedir>/.build-<key> (an old one removed
 * first), owned by uid:gid, mode 0700; its path into out.  0 or -errno. */
int sandlet_page_workdir(const char *cachedir, const char *rel, uid_t uid, gid_t gid, char *out,
                         size_t cap);

/*
 * After the build process and all its children exited with build_status
 * (SANDLET_BUILD_* of build.h): copies the work dir's page.so (when OK),
 * page.c, diag and stamp into <key>.*, each through a temporary file and
 * rename(), owned by the caller, mode 0644; keeps the previous .so when the
 * build failed; on SANDLET_BUILD_ERROR (not the page's fault) installs only
 * the diagnostics, so that the page stays STALE.  Removes the work dir and
 * fills out like sandlet_page_check() would.  Returns 0, or -errno with
 * err filled ("...; fix ...").  A work dir that breaks the rules (a link,
 * a fifo, a file too big, an invalid stamp) is refused with -EPERM and
 * installs nothing but a diagnostic.
 */
int sandlet_page_install(const char *cachedir, const char *workdir, const char *rel,
                         int build_status, sandlet_page_info *out, char *err, size_t errlen);

/* ---- shared with build.c, which writes the stamp the cache reads ---- */

typedef struct sandlet_page_file {
    unsigned long long size, mtime_ns, ino;
    uint8_t hash[32];
    char *path; /* relative to the docroot */
} sandlet_page_file;

typedef struct sandlet_page_stamp {
    char *rel;
    bool ok;
    bool version_matches; /* written by this sandlet version */
    sandlet_page_file *files;
    size_t nfiles;
} sandlet_page_stamp;

/* Strict parse of a stamp; 0 or -EINVAL (-ENOMEM).  Free with _free. */
int sandlet_page_stamp_parse(const char *data, size_t len, sandlet_page_stamp *out);
/* Appends the stamp's text (this sandlet's version) to out; 0 or -errno. */
int sandlet_page_stamp_format(const sandlet_page_stamp *st, sandlet_buf *out);
/* Adds a file; path is copied.  0 or -ENOMEM/-E2BIG/-EINVAL. */
int sandlet_page_stamp_add(sandlet_page_stamp *st, const char *path, const struct stat *sb,
                           const uint8_t hash[32]);
void sandlet_page_stamp_free(sandlet_page_stamp *st);

/* Opens path beneath dirfd for reading (openat2 RESOLVE_BENEATH, no magic
 * links, non-blocking, a regular file only).  fd or -errno (-EXDEV when it
 * would leave the directory, -EINVAL when it is not a regular file). */
int sandlet_page_open_beneath(int dirfd, const char *path, struct stat *sb);
/* BLAKE2b-256 of everything fd holds from its offset, at most max bytes
 * (-EFBIG past that).  0 or -errno. */
int sandlet_page_hash_fd(int fd, size_t max, uint8_t hash[32]);
/* Writes all len bytes to fd, across short writes and EINTR.  0 or
 * -errno. */
int sandlet_page_write_all(int fd, const void *data, size_t len);
/* Writes len bytes atomically to dirfd/name (a temporary + rename), mode
 * 0644.  0 or -errno. */
int sandlet_page_write_atomic(int dirfd, const char *name, const void *data, size_t len);

/* One row of a page's line table (<key>.lines, "OFFSET LINE" per text
 * line, hex and decimal): code from offset on, up to the next row's, is
 * the page's line (0: not the page's own code, the generated glue or a
 * header).  Offsets are within the .so as loaded (the ELF vaddr). */
typedef struct sandlet_page_line {
    uint32_t offset;
    uint32_t line;
} sandlet_page_line;

/* Strict parse of a line table: each row lowercase hex, one space,
 * decimal, a newline; offsets strictly ascending and below
 * SANDLET_PAGE_MAX_SO, lines below 2^31; at most
 * SANDLET_PAGE_MAX_LINES bytes.  *out (free()) holds *n rows (none for an
 * empty table).  0, -EINVAL or -ENOMEM. */
int sandlet_page_lines_parse(const char *data, size_t len, sandlet_page_line **out, size_t *n);

/* Removes a work dir left behind (entries, then the dir), never following
 * a link.  0 or -errno; a missing dir is 0. */
int sandlet_page_workdir_remove(const char *workdir);

#endif /* SANDLET_CSP_PAGECACHE_H */

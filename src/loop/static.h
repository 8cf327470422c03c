/*
 * static.h - the pure logic of serving files from the docroot: safe path
 * resolution, MIME types, validators (ETag, Last-Modified, 304) and byte
 * ranges.  The acceptor (http.c) does the I/O (uv_fs_sendfile) with the fd
 * and numbers these functions hand back.
 *
 * Nothing here may ever open a file outside the docroot, follow a symlink
 * out of it, block on a FIFO or device, write HTTP, or allocate on the
 * per-request path (only sandlet_static_mime_load allocates, at startup).
 *
 * Status codes the caller should answer, by return value of
 * sandlet_static_open():
 *   0              200/206/304 (serve the fd; close it when done)
 *   -EINVAL        400  malformed path: bad escape, %00, %2F, %5C, "." or
 *                       "..", empty segment, control character, backslash,
 *                       invalid UTF-8 (404 is acceptable too)
 *   -ENAMETOOLONG  414  decoded path or a segment too long
 *   -EISDIR        301/308 to the same target + "/" (keep the query)
 *   -ENOENT        404  missing, not a directory, or directory without index
 *   -EACCES        403  symlink out of the docroot, non-regular file, no
 *                       permission (404 hides existence)
 *   -EAGAIN        503  replaced by a non-regular file while being opened
 *   -EMFILE, -ENFILE, -ENOMEM: 503; anything else: 500
 */
#ifndef SANDLET_STATIC_H
#define SANDLET_STATIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

/* Longest decoded path, index name included, with its NUL. */
#define SANDLET_STATIC_PATH_MAX 4096
/* Room for mime_key: longer extensions are reported as "" (unknown). */
#define SANDLET_STATIC_EXT_MAX 32
/* Room for sandlet_static_etag() and sandlet_static_http_date(), NUL included. */
#define SANDLET_STATIC_ETAG_MAX 64
#define SANDLET_STATIC_DATE_MAX 30

/* Bounds of a mime.types file: bigger files, longer lines or more
 * extensions than this are truncated (the rest is ignored). */
#define SANDLET_MIME_FILE_MAX    ((size_t)1 << 20)
#define SANDLET_MIME_LINE_MAX    1024
#define SANDLET_MIME_ENTRIES_MAX 16384
#define SANDLET_MIME_TYPE_MAX    127

typedef struct sandlet_mime_slot {
    uint32_t ext;  /* offset of the extension in arena; UINT32_MAX = empty */
    uint32_t type; /* offset of the full Content-Type in arena */
} sandlet_mime_slot;

/* Extension -> Content-Type table loaded from a mime.types file: open
 * addressing over a power-of-two slot array, strings in one arena. */
typedef struct sandlet_mime {
    char *arena;
    size_t arena_len;
    sandlet_mime_slot *slots;
    size_t nslots; /* 0 or a power of two, at least 2 * count */
    size_t count;
} sandlet_mime;

/*
 * Opens the file the request path names, beneath docroot_fd.
 *
 * target/len: the path part of the request-target (before '?'), raw and not
 * NUL-terminated.  It must start with '/'; it is percent-decoded once ('+'
 * stays '+').  A path ending in '/' names a directory, whose index_name
 * (e.g. "index.html", a single path segment) is served; a directory named
 * without the trailing '/' gives -EISDIR.  Symlinks are followed only while
 * they stay beneath the docroot and are relative (openat2 RESOLVE_BENEATH);
 * without openat2 (ENOSYS) every component is opened with O_NOFOLLOW, so
 * then no symlink is served at all.
 *
 * On success returns 0, *fd_out is an O_RDONLY|O_CLOEXEC fd of a regular
 * file (O_NONBLOCK may be set: it means nothing for a regular file), *st_out its fstat, and
 * mime_key (when not NULL) the lowercase extension, without the dot, of the name opened (the index
 * name for a directory, the link's name for a symlink -- except "csp"
 * for a link to a C Server Page, whose source is never a static file), "" when there is
 * none or it does not fit.  On failure returns a negative errno (see the
 * table above), *fd_out is -1 and mime_key is "".
 */
int sandlet_static_open(int docroot_fd, const char *target, size_t len, const char *index_name,
                        int *fd_out, struct stat *st_out, char *mime_key, size_t mime_key_len);
/* The same, and rel_out (when not NULL) receives the path opened relative
 * to the docroot, as resolved (index name included), or "" when it does
 * not fit in rel_size bytes. */
int sandlet_static_open_rel(int docroot_fd, const char *target, size_t len, const char *index_name,
                            int *fd_out, struct stat *st_out, char *mime_key, size_t mime_key_len,
                            char *rel_out, size_t rel_size);

/* Enables (default) or disables the use of openat2(2); disabling forces
 * the O_NOFOLLOW walk, e.g. under a seccomp policy that answers EPERM
 * instead of ENOSYS, and in tests.  Thread-safe. */
void sandlet_static_set_openat2(bool enabled);

/*
 * Loads a mime.types file ("type ext ext ...", '#' comments).  *m is
 * always initialised, even on failure (then it is empty and lookups use the
 * built-in table only); call sandlet_static_mime_free() in every case.  The
 * first mapping of an extension wins; types that are not a valid
 * "type/subtype" token pair and extensions that are not [A-Za-z0-9+._-]
 * are skipped.  Returns 0 or a negative errno (-ENOENT: no file, -EFBIG:
 * over SANDLET_MIME_FILE_MAX, -ENOMEM).
 */
int sandlet_static_mime_load(sandlet_mime *m, const char *path);
void sandlet_static_mime_free(sandlet_mime *m);

/* Content-Type for an extension (case-insensitive, without the dot): the
 * loaded table (m may be NULL), then the built-in one, then
 * "application/octet-stream".  "text/..." types carry "; charset=utf-8".  The
 * string lives as long as *m. */
const char *sandlet_static_mime(const sandlet_mime *m, const char *ext);

/* Strong ETag "\"<mtime sec>-<mtime nsec>-<size>-<ino>\"" in hex, quotes
 * included; "" when len < SANDLET_STATIC_ETAG_MAX. */
void sandlet_static_etag(const struct stat *st, char *out, size_t len);

/* IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), independent of the
 * locale; "" when len < SANDLET_STATIC_DATE_MAX or t is out of range. */
void sandlet_static_http_date(time_t t, char *out, size_t len);

/* Parses an HTTP-date: IMF-fixdate, RFC 850 and asctime formats, exactly,
 * with optional surrounding spaces/tabs.  The weekday must be a valid name
 * but is not checked against the date.  Returns 0 or -EINVAL. */
int sandlet_static_parse_http_date(const char *s, time_t *out);

/*
 * RFC 9110 13.1.1/13.1.3 for GET and HEAD (the caller must not use it for
 * other methods): true when a 304 must be answered.  if_none_match and
 * if_modified_since are the header values or NULL.  If-None-Match, when
 * present, decides alone ("*" or weak comparison against any listed tag;
 * a malformed list never matches); otherwise If-Modified-Since matches
 * when mtime is not later than the date (an invalid date is ignored).
 */
bool sandlet_static_not_modified(const char *if_none_match, const char *if_modified_since,
                                 const char *etag, time_t mtime);

/*
 * Evaluates Range and If-Range (RFC 9110 14.2, 13.1.5) for a representation
 * of size bytes.  Returns
 *   0       serve the whole representation (200): no Range, unknown unit,
 *           malformed or invalid range (e.g. "bytes=5-2"), If-Range not
 *           matching (strong comparison of etags, exact date), several
 *           ranges (not supported), or an empty representation;
 *   1       206 with Content-Range "bytes start-(start+length-1)/size";
 *   -ERANGE 416 with Content-Range "bytes *" immediately followed by "/size".
 * Numbers too big for 64 bits saturate, which keeps their meaning: a huge
 * first-pos is unsatisfiable, a huge last-pos or suffix-length means "to
 * the end" / "the whole".  *start and *length are set only when 1.
 */
int sandlet_static_range(const char *range, const char *if_range, const char *etag, time_t mtime,
                         uint64_t size, uint64_t *start, uint64_t *length);

#endif /* SANDLET_STATIC_H */

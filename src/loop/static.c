/*
 * static.c - the pure logic of static file serving for the acceptor:
 * request path -> open fd beneath the docroot, extension -> Content-Type,
 * ETag / HTTP-date / 304 evaluation, and Range / If-Range evaluation.
 *
 * It must never open anything outside the docroot (openat2 RESOLVE_BENEATH,
 * or an O_NOFOLLOW walk without it), never block (non-regular files are
 * found with fstatat and refused before any real open), never trust a
 * length it did not check, and never allocate on the per-request path:
 * only sandlet_static_mime_load() allocates, once, at startup.  It writes
 * no HTTP and does no I/O on file contents; http.c does that with libuv.
 */
#include "config.h"

#include "loop/static.h"
#include "lib/servlet.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Linux 5.6+ headers (Debian 12 ships 6.1); without the system call at
 * run time the O_NOFOLLOW walk takes over. */
#include <linux/openat2.h>

/* openat2 may fail with EAGAIN when a rename races with ".." resolution. */
#define OPENAT2_TRIES 4

static atomic_bool use_openat2 = true;

/* ---- small helpers ------------------------------------------------------ */

static unsigned char ascii_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Locale-independent ASCII case-insensitive comparison. */
static int ascii_casecmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned char x = ascii_lower((unsigned char)*a), y = ascii_lower((unsigned char)*b);
        if (x != y || x == '\0')
            return (int)x - (int)y;
    }
}

/* Narrows [*s, *e) by the optional whitespace around a field value. */
static void trim_ows(const char **s, const char **e)
{
    while (*s < *e && is_ows(**s))
        (*s)++;
    while (*e > *s && is_ows((*e)[-1]))
        (*e)--;
}

/* Closes an fd this file opened and no longer needs: the fds are read-only
 * or O_PATH, so close() cannot lose data and its result carries nothing. */
static void close_fd(int fd)
{
    if (fd >= 0)
        (void)close(fd);
}

/* ---- path decoding ------------------------------------------------------ */

/* Strict UTF-8 (RFC 3629): no overlong forms, surrogates or code points
 * above U+10FFFF, so that no alternative spelling of '.' or '/' exists. */
static bool valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            return false;
        }
        if (n - i - 1 < need)
            return false;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return false;
        for (size_t k = 2; k <= need; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return false;
        i += need + 1;
    }
    return true;
}

/*
 * Percent-decodes the raw path into out (cap bytes, NUL-terminated) and
 * checks it: starts with '/', no NUL, control character, backslash or
 * encoded '/', strict UTF-8, no empty (except a trailing one), "." or ".."
 * segment, segments of at most NAME_MAX bytes.
 */
static int decode_path(const char *t, size_t len, char *out, size_t cap, size_t *outlen)
{
    if (len == 0 || t[0] != '/')
        return -EINVAL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '%') {
            if (len - i < 3)
                return -EINVAL;
            int h = sandlet_lib_hexval((unsigned char)t[i + 1]),
                l = sandlet_lib_hexval((unsigned char)t[i + 2]);
            if (h < 0 || l < 0)
                return -EINVAL;
            c = (unsigned char)(h * 16 + l);
            if (c == '/')
                return -EINVAL; /* an encoded '/' would change the segments */
            i += 2;
        }
        if (c < 0x20 || c == 0x7F || c == '\\')
            return -EINVAL; /* includes NUL */
        if (o + 1 >= cap)
            return -ENAMETOOLONG;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    if (!valid_utf8((const unsigned char *)out, o))
        return -EINVAL;

    /* Segments after the leading '/'. */
    size_t s = 1;
    while (s <= o) {
        const char *slash = memchr(out + s, '/', o - s);
        size_t e = slash ? (size_t)(slash - out) : o;
        size_t n = e - s;
        if (n == 0 && e != o)
            return -EINVAL; /* "//" */
        if ((n == 1 && out[s] == '.') || (n == 2 && out[s] == '.' && out[s + 1] == '.'))
            return -EINVAL;
        if (n > NAME_MAX)
            return -ENAMETOOLONG;
        s = e + 1;
    }
    *outlen = o;
    return 0;
}

/* ---- opening beneath the docroot ---------------------------------------- */

void sandlet_static_set_openat2(bool enabled)
{
    atomic_store_explicit(&use_openat2, enabled, memory_order_relaxed);
}

static int map_open_errno(int e)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR: return -ENOENT;
    case EXDEV: /* RESOLVE_BENEATH: ".." or a symlink leaves the docroot */
    case ELOOP: /* a symlink under O_NOFOLLOW, a loop, or a magic link */
    case EACCES:
    case EPERM:
    case ENXIO: return -EACCES;
    default: return -e;
    }
}

/* Opens rel ("." or "a/b/c": no empty, "." or ".." segment, each at most
 * NAME_MAX) beneath dirfd with one component at a time and O_NOFOLLOW on
 * every one of them: no symlink is ever followed. */
static int walk_open(int dirfd, const char *rel, int flags, int *fd_out)
{
    char comp[NAME_MAX + 1];
    int cur = dirfd;
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || n > NAME_MAX) {
            if (cur != dirfd)
                close_fd(cur);
            return n == 0 ? -EINVAL : -ENAMETOOLONG;
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        int fl = slash ? O_PATH | O_DIRECTORY : flags;
        int next = openat(cur, comp, fl | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        if (cur != dirfd)
            close_fd(cur);
        if (next < 0)
            return map_open_errno(e);
        if (!slash) {
            *fd_out = next;
            return 0;
        }
        cur = next;
        p = slash + 1;
    }
}

/* Opens rel beneath dirfd with flags (plus O_CLOEXEC), following only
 * symlinks that stay beneath it. */
static int open_beneath(int dirfd, const char *rel, int flags, int *fd_out)
{
#if defined(SYS_openat2)
    if (atomic_load_explicit(&use_openat2, memory_order_relaxed)) {
        struct open_how how;
        memset(&how, 0, sizeof(how));
        how.flags = (uint64_t)(flags | O_CLOEXEC);
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
        for (int tries = 0; tries < OPENAT2_TRIES; tries++) {
            long r = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
            if (r >= 0) {
                *fd_out = (int)r;
                return 0;
            }
            if (errno == EAGAIN || errno == EINTR)
                continue;
            if (errno != ENOSYS)
                return map_open_errno(errno);
            atomic_store_explicit(&use_openat2, false, memory_order_relaxed);
            return walk_open(dirfd, rel, flags, fd_out);
        }
        return -EAGAIN;
    }
#endif
    return walk_open(dirfd, rel, flags, fd_out);
}

/* O_PATH probe: what rel is, without opening it for reading (a FIFO would
 * block, a device could react), resolved under the same fence as the real
 * open, so its errors are the authoritative answer. */
static int probe_strict(int dirfd, const char *rel, struct stat *st)
{
    int fd = -1;
    int rc = open_beneath(dirfd, rel, O_PATH, &fd);
    if (rc < 0)
        return rc;
    rc = fstat(fd, st) < 0 ? -errno : 0;
    close_fd(fd);
    return rc;
}

/* The common case, a regular file, costs one fstatat instead of an O_PATH
 * open, fstat and close.  fstatat may look through a symlink that leaves
 * the docroot, but only to decide to try the real open, which is fenced
 * (openat2 RESOLVE_BENEATH refuses the escape).  Anything else (missing,
 * directory, loop) is asked again under the fence for the right answer. */
static int probe(int dirfd, const char *rel, struct stat *st, bool *linked)
{
    /* Not following the last link: a regular file answers at once, and a
     * link is known to be one (see linked_to_page). */
    if (fstatat(dirfd, rel, st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISREG(st->st_mode))
            return 0;
        if (S_ISLNK(st->st_mode))
            *linked = true;
    }
    return probe_strict(dirfd, rel, st);
}

static void extension(const char *name, char *key, size_t keylen);

/* A C Server Page's source is never a static file, under any name: a link
 * "x.txt" to "page.csp" counts as a page (its target's name is asked of
 * the kernel, only for names that are links). */
static bool linked_to_page(int fd)
{
    char proc[32], target[PATH_MAX];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, target, sizeof(target) - 1);
    if (n <= 0)
        return true; /* cannot tell: refuse rather than risk it */
    target[n] = '\0';
    char ext[8];
    extension(target, ext, sizeof(ext));
    return strcmp(ext, "csp") == 0;
}

/* Lowercase extension of the last segment of name into key, "" if none. */
static void extension(const char *name, char *key, size_t keylen)
{
    if (!key || keylen == 0)
        return;
    key[0] = '\0';
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strrchr(base, '.');
    if (!dot || dot == base || dot[1] == '\0')
        return; /* no dot, a dotfile like ".profile", or "name." */
    size_t n = strlen(dot + 1);
    if (n >= keylen)
        return;
    for (size_t i = 0; i < n; i++)
        key[i] = (char)ascii_lower((unsigned char)dot[1 + i]);
    key[n] = '\0';
}

static bool valid_index_name(const char *s)
{
    size_t n = strnlen(s, NAME_MAX + 1);
    if (n == 0 || n > NAME_MAX || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    return true;
}

int sandlet_static_open(int docroot_fd, const char *target, size_t len, const char *index_name,
                        int *fd_out, struct stat *st_out, char *mime_key, size_t mime_key_len)
{
    return sandlet_static_open_rel(docroot_fd, target, len, index_name, fd_out, st_out, mime_key,
                                   mime_key_len, NULL, 0);
}

int sandlet_static_open_rel(int docroot_fd, const char *target, size_t len, const char *index_name,
                            int *fd_out, struct stat *st_out, char *mime_key, size_t mime_key_len,
                            char *rel_out, size_t rel_size)
{
    if (rel_out && rel_size > 0)
        rel_out[0] = '\0';
    if (mime_key && mime_key_len > 0)
        mime_key[0] = '\0';
    if (!fd_out || !st_out)
        return -EINVAL;
    *fd_out = -1;
    if (!target || !index_name || !valid_index_name(index_name) || docroot_fd < 0)
        return -EINVAL;

    char path[SANDLET_STATIC_PATH_MAX];
    size_t plen;
    int rc = decode_path(target, len, path, sizeof(path), &plen);
    if (rc < 0)
        return rc;

    /* rel: the path without its leading '/' and trailing '/'; "." for "/". */
    bool want_dir = path[plen - 1] == '/';
    if (want_dir)
        path[--plen] = '\0';
    char *rel = plen > 0 ? path + 1 : NULL;
    size_t rel_len = plen > 0 ? plen - 1 : 0;
    if (rel_len == 0)
        rel = NULL;

    struct stat st;
    bool linked = false;
    rc = probe(docroot_fd, rel ? rel : ".", &st, &linked);
    if (rc < 0)
        return rc;
    if (S_ISDIR(st.st_mode)) {
        if (!want_dir)
            return -EISDIR;
        /* rel becomes "dir/index" (or "index"), still in path[]. */
        size_t ilen = strlen(index_name);
        size_t at = rel_len ? 1 + rel_len + 1 : 1;
        if (at + ilen + 1 > sizeof(path))
            return -ENAMETOOLONG;
        if (rel_len)
            path[at - 1] = '/';
        memcpy(path + at, index_name, ilen + 1);
        rel = path + 1;
        linked = false;
        rc = probe(docroot_fd, rel, &st, &linked);
        if (rc < 0)
            return rc;
        if (S_ISDIR(st.st_mode))
            return -ENOENT; /* no listings, not even of "index.html/" */
    } else if (want_dir) {
        return -ENOENT; /* "file/" */
    }
    if (!S_ISREG(st.st_mode))
        return -EACCES;

    /* The real open.  The entry may have been replaced since the probe: a
     * new regular file (a deploy renaming files into place) is served; a
     * FIFO cannot block thanks to O_NONBLOCK and anything else is refused
     * with -EAGAIN. */
    int fd = -1;
    rc = open_beneath(docroot_fd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, &fd);
    if (rc < 0)
        return rc;
    struct stat st2;
    if (fstat(fd, &st2) < 0) {
        rc = -errno;
        close_fd(fd);
        return rc;
    }
    if (!S_ISREG(st2.st_mode)) {
        close_fd(fd);
        return -EAGAIN;
    }
    /* O_NONBLOCK stays: it means nothing for a regular file's reads or
     * sendfile, and clearing it would cost two more system calls. */
    extension(rel, mime_key, mime_key_len);
    if (linked && mime_key && mime_key_len > 3 && linked_to_page(fd))
        memcpy(mime_key, "csp", 4);
    if (rel_out && rel_size > strlen(rel))
        memcpy(rel_out, rel, strlen(rel) + 1);
    *st_out = st2;
    *fd_out = fd;
    return 0;
}

/* ---- MIME types --------------------------------------------------------- */

#define CHARSET      "; charset=utf-8"
#define OCTET_STREAM "application/octet-stream"
#define EMPTY_SLOT   UINT32_MAX

typedef struct builtin_type {
    const char *ext;
    const char *type;
} builtin_type;

/* Sorted by ext (strcmp order) for bsearch. */
static const builtin_type builtin[] = {
    {"avif", "image/avif"},
    {"bmp", "image/bmp"},
    {"css", "text/css" CHARSET},
    {"csv", "text/csv" CHARSET},
    {"gif", "image/gif"},
    {"gz", "application/gzip"},
    {"htm", "text/html" CHARSET},
    {"html", "text/html" CHARSET},
    {"ico", "image/vnd.microsoft.icon"},
    {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},
    {"js", "text/javascript" CHARSET},
    {"json", "application/json"},
    {"jsonld", "application/ld+json"},
    {"m4a", "audio/mp4"},
    {"map", "application/json"},
    {"md", "text/markdown" CHARSET},
    {"mjs", "text/javascript" CHARSET},
    {"mp3", "audio/mpeg"},
    {"mp4", "video/mp4"},
    {"oga", "audio/ogg"},
    {"ogg", "audio/ogg"},
    {"ogv", "video/ogg"},
    {"otf", "font/otf"},
    {"pdf", "application/pdf"},
    {"png", "image/png"},
    {"svg", "image/svg+xml"},
    {"tar", "application/x-tar"},
    {"ttf", "font/ttf"},
    {"txt", "text/plain" CHARSET},
    {"wasm", "application/wasm"},
    {"wav", "audio/wav"},
    {"webm", "video/webm"},
    {"webmanifest", "application/manifest+json"},
    {"webp", "image/webp"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"xhtml", "application/xhtml+xml"},
    {"xml", "application/xml"},
    {"zip", "application/zip"},
};

static int builtin_cmp(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const builtin_type *)elem)->ext);
}

static uint32_t hash_ext(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= ascii_lower((unsigned char)*s);
        h *= 16777619u;
    }
    return h;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static bool valid_ext_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' ||
           c == '.' || c == '_' || c == '-';
}

/* "type/subtype" made of tchars, at most SANDLET_MIME_TYPE_MAX bytes. */
static bool valid_type(const char *s, size_t n)
{
    if (n == 0 || n > SANDLET_MIME_TYPE_MAX)
        return false;
    const char *slash = memchr(s, '/', n);
    if (!slash || slash == s || slash == s + n - 1)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s + i != slash && !sandlet_lib_tchar((unsigned char)s[i]))
            return false;
    return true;
}

static bool valid_ext(const char *s, size_t n)
{
    if (n == 0 || n >= SANDLET_STATIC_EXT_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!valid_ext_char((unsigned char)s[i]))
            return false;
    return true;
}

static bool is_text_type(const char *s, size_t n)
{
    static const char text[] = "text/";
    if (n < sizeof(text) - 1)
        return false;
    for (size_t i = 0; i < sizeof(text) - 1; i++)
        if (ascii_lower((unsigned char)s[i]) != (unsigned char)text[i])
            return false;
    return true;
}

static const sandlet_mime_slot *mime_find(const sandlet_mime *m, const char *ext)
{
    if (!m || m->nslots == 0)
        return NULL;
    size_t mask = m->nslots - 1;
    for (size_t i = hash_ext(ext) & mask, probes = 0; probes < m->nslots;
         i = (i + 1) & mask, probes++) {
        const sandlet_mime_slot *s = &m->slots[i];
        if (s->ext == EMPTY_SLOT)
            return NULL;
        if (ascii_casecmp(m->arena + s->ext, ext) == 0)
            return s;
    }
    return NULL;
}

/* One pass over the file.  Without m->arena it only measures (entries and
 * arena bytes); with it, it fills the table.  Both passes see exactly the
 * same entries, so the measure bounds the fill. */
static void mime_pass(const char *buf, size_t n, sandlet_mime *m, size_t *entries, size_t *bytes)
{
    bool fill = m->arena != NULL;
    *entries = 0;
    *bytes = 0;
    size_t pos = 0;
    while (pos < n) {
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', n - pos);
        size_t ll = nl ? (size_t)(nl - line) : n - pos;
        pos += ll + (nl ? 1 : 0);
        if (ll > SANDLET_MIME_LINE_MAX)
            continue;
        const char *hash = memchr(line, '#', ll);
        if (hash)
            ll = (size_t)(hash - line);

        const char *type = NULL;
        size_t tlen = 0;
        uint32_t type_off = EMPTY_SLOT;
        size_t i = 0;
        while (i < ll) {
            while (i < ll && is_space(line[i]))
                i++;
            size_t s = i;
            while (i < ll && !is_space(line[i]) && line[i] != '\0')
                i++;
            if (i == s)
                break;
            if (!type) {
                if (!valid_type(line + s, i - s))
                    break;
                type = line + s;
                tlen = i - s;
                continue;
            }
            if (!valid_ext(line + s, i - s))
                continue;
            if (*entries == SANDLET_MIME_ENTRIES_MAX)
                return;
            (*entries)++;
            bool text = is_text_type(type, tlen);
            if (type_off == EMPTY_SLOT) {
                /* The line's type, stored once for all its extensions. */
                if (fill) {
                    type_off = (uint32_t)m->arena_len;
                    memcpy(m->arena + m->arena_len, type, tlen);
                    m->arena_len += tlen;
                    if (text) {
                        memcpy(m->arena + m->arena_len, CHARSET, sizeof(CHARSET) - 1);
                        m->arena_len += sizeof(CHARSET) - 1;
                    }
                    m->arena[m->arena_len++] = '\0';
                } else {
                    type_off = 0;
                }
                *bytes += tlen + (text ? sizeof(CHARSET) - 1 : 0) + 1;
            }
            *bytes += i - s + 1;
            if (!fill)
                continue;
            char *ext = m->arena + m->arena_len;
            for (size_t k = s; k < i; k++)
                ext[k - s] = (char)ascii_lower((unsigned char)line[k]);
            ext[i - s] = '\0';
            if (mime_find(m, ext))
                continue; /* first mapping wins; the bytes stay unused */
            uint32_t off = (uint32_t)m->arena_len;
            m->arena_len += i - s + 1;
            size_t mask = m->nslots - 1, h = hash_ext(ext) & mask;
            while (m->slots[h].ext != EMPTY_SLOT)
                h = (h + 1) & mask;
            m->slots[h].ext = off;
            m->slots[h].type = type_off;
            m->count++;
        }
    }
}

/* Reads a whole regular file of at most SANDLET_MIME_FILE_MAX bytes. */
static int read_small_file(const char *path, char **buf_out, size_t *len_out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    char *buf = NULL;
    size_t len = 0;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        goto out;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > SANDLET_MIME_FILE_MAX) {
        rc = -EFBIG;
        goto out;
    }
    /* One byte more than allowed, to notice a file that grew. */
    buf = malloc(SANDLET_MIME_FILE_MAX + 1);
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    while (len <= SANDLET_MIME_FILE_MAX) {
        ssize_t r = read(fd, buf + len, SANDLET_MIME_FILE_MAX + 1 - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            goto out;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    if (len > SANDLET_MIME_FILE_MAX) {
        rc = -EFBIG;
        goto out;
    }
out:
    close_fd(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *buf_out = buf;
    *len_out = len;
    return 0;
}

int sandlet_static_mime_load(sandlet_mime *m, const char *path)
{
    if (!m)
        return -EINVAL;
    memset(m, 0, sizeof(*m));
    if (!path)
        return -EINVAL;
    char *buf = NULL;
    size_t n = 0;
    int rc = read_small_file(path, &buf, &n);
    if (rc < 0)
        return rc;

    size_t entries, bytes;
    mime_pass(buf, n, m, &entries, &bytes);
    if (entries == 0) {
        free(buf);
        return 0;
    }
    size_t nslots = 16;
    while (nslots < 2 * entries)
        nslots *= 2;
    if (bytes >= EMPTY_SLOT) { /* cannot happen with a 1 MiB file */
        free(buf);
        return -EFBIG;
    }
    m->arena = malloc(bytes);
    m->slots = malloc(nslots * sizeof(*m->slots));
    if (!m->arena || !m->slots) {
        free(buf);
        sandlet_static_mime_free(m);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nslots; i++)
        m->slots[i].ext = m->slots[i].type = EMPTY_SLOT;
    m->nslots = nslots;
    size_t entries2, bytes2;
    mime_pass(buf, n, m, &entries2, &bytes2);
    free(buf);
    if (entries2 != entries || bytes2 != bytes || m->arena_len > bytes) {
        sandlet_static_mime_free(m);
        return -EIO; /* the two passes disagree: a bug, never reached */
    }
    return 0;
}

void sandlet_static_mime_free(sandlet_mime *m)
{
    if (!m)
        return;
    free(m->arena);
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

const char *sandlet_static_mime(const sandlet_mime *m, const char *ext)
{
    if (!ext || ext[0] == '\0')
        return OCTET_STREAM;
    size_t n = strnlen(ext, SANDLET_STATIC_EXT_MAX);
    if (n >= SANDLET_STATIC_EXT_MAX)
        return OCTET_STREAM;
    const sandlet_mime_slot *s = mime_find(m, ext);
    if (s)
        return m->arena + s->type;
    char lower[SANDLET_STATIC_EXT_MAX];
    for (size_t i = 0; i <= n; i++)
        lower[i] = (char)ascii_lower((unsigned char)ext[i]);
    const builtin_type *b = bsearch(lower, builtin, sizeof(builtin) / sizeof(builtin[0]),
                                    sizeof(builtin[0]), builtin_cmp);
    return b ? b->type : OCTET_STREAM;
}

/* ---- validators --------------------------------------------------------- */

static const char wkday[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const weekday_long[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                            "Thursday", "Friday", "Saturday"};
static const char month_name[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void sandlet_static_etag(const struct stat *st, char *out, size_t len)
{
    if (!out || len == 0)
        return;
    out[0] = '\0';
    if (!st || len < SANDLET_STATIC_ETAG_MAX)
        return;
    int r = snprintf(out, len, "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-%" PRIx64 "\"",
                     (uint64_t)st->st_mtim.tv_sec, (uint64_t)st->st_mtim.tv_nsec,
                     (uint64_t)st->st_size, (uint64_t)st->st_ino);
    if (r < 0 || (size_t)r >= len)
        out[0] = '\0';
}

void sandlet_static_http_date(time_t t, char *out, size_t len)
{
    if (!out || len == 0)
        return;
    out[0] = '\0';
    if (len < SANDLET_STATIC_DATE_MAX || sandlet_lib_http_date((long long)t, out, len) < 0)
        out[0] = '\0';
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int m)
{
    static const int dm[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dm[m - 1];
}

/* n decimal digits at s, or -1. */
static int digits(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int month_index(const char *s)
{
    for (int i = 0; i < 12; i++)
        if (memcmp(s, month_name[i], 3) == 0)
            return i + 1;
    return -1;
}

static bool is_wkday(const char *s)
{
    for (int i = 0; i < 7; i++)
        if (memcmp(s, wkday[i], 3) == 0)
            return true;
    return false;
}

/* "HH:MM:SS" at s into h, mi, sec. */
static bool parse_clock(const char *s, int *h, int *mi, int *sec)
{
    if (s[2] != ':' || s[5] != ':')
        return false;
    *h = digits(s, 2);
    *mi = digits(s + 3, 2);
    *sec = digits(s + 6, 2);
    return *h >= 0 && *mi >= 0 && *sec >= 0;
}

static int finish_date(int64_t y, int mon, int d, int h, int mi, int sec, time_t *out)
{
    if (mon < 1 || mon > 12 || d < 1 || d > days_in_month(y, mon) || h > 23 || mi > 59 || sec > 60)
        return -EINVAL;
    int64_t v = days_from_civil(y, mon, d) * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + sec;
    if ((int64_t)(time_t)v != v)
        return -EINVAL;
    *out = (time_t)v;
    return 0;
}

int sandlet_static_parse_http_date(const char *str, time_t *out)
{
    if (!str || !out)
        return -EINVAL;
    const char *s = str, *e = str + strnlen(str, 64);
    if (*e != '\0')
        return -EINVAL;
    trim_ows(&s, &e);
    size_t n = (size_t)(e - s);
    int y, mon, d, h, mi, sec;

    if (n == 29 && s[3] == ',') {
        /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
        if (!is_wkday(s) || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
            s[25] != ' ' || memcmp(s + 26, "GMT", 3) != 0)
            return -EINVAL;
        d = digits(s + 5, 2);
        mon = month_index(s + 8);
        y = digits(s + 12, 4);
        if (d < 0 || y < 0 || !parse_clock(s + 17, &h, &mi, &sec))
            return -EINVAL;
        return finish_date(y, mon, d, h, mi, sec, out);
    }
    if (n == 24 && s[3] == ' ') {
        /* asctime: "Sun Nov  6 08:49:37 1994" */
        if (!is_wkday(s) || s[7] != ' ' || s[10] != ' ' || s[19] != ' ')
            return -EINVAL;
        mon = month_index(s + 4);
        d = s[8] == ' ' ? digits(s + 9, 1) : digits(s + 8, 2);
        y = digits(s + 20, 4);
        if (d < 0 || y < 0 || !parse_clock(s + 11, &h, &mi, &sec))
            return -EINVAL;
        return finish_date(y, mon, d, h, mi, sec, out);
    }
    /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
    const char *comma = memchr(s, ',', n);
    if (!comma)
        return -EINVAL;
    size_t wl = (size_t)(comma - s);
    bool known = false;
    for (int i = 0; i < 7; i++)
        if (strlen(weekday_long[i]) == wl && memcmp(s, weekday_long[i], wl) == 0)
            known = true;
    const char *r = comma + 1;
    if (!known || (size_t)(e - r) != 23 || r[0] != ' ' || r[3] != '-' || r[7] != '-' ||
        r[10] != ' ' || r[19] != ' ' || memcmp(r + 20, "GMT", 3) != 0)
        return -EINVAL;
    d = digits(r + 1, 2);
    mon = month_index(r + 4);
    int yy = digits(r + 8, 2);
    if (d < 0 || yy < 0 || !parse_clock(r + 11, &h, &mi, &sec))
        return -EINVAL;
    /* RFC 9110 5.6.7: a two-digit year more than 50 years in the future is
     * the most recent past year with those digits. */
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !gmtime_r(&now, &tm))
        return -EINVAL;
    int64_t cur = (int64_t)tm.tm_year + 1900;
    int64_t year = cur - cur % 100 + yy;
    if (year > cur + 50)
        year -= 100;
    return finish_date(year, mon, d, h, mi, sec, out);
}

/* RFC 9110 etagc. */
static bool is_etagc(unsigned char c)
{
    return c == 0x21 || (c >= 0x23 && c != 0x7F);
}

/*
 * Parses one entity-tag at *p (before end): [W/] DQUOTE *etagc DQUOTE.
 * On success advances *p, sets *weak and the opaque tag [*o, *o + *olen)
 * (quotes included) and returns true.
 */
static bool parse_etag(const char **p, const char *end, bool *weak, const char **o, size_t *olen)
{
    const char *s = *p;
    *weak = false;
    if (end - s >= 2 && s[0] == 'W' && s[1] == '/') {
        *weak = true;
        s += 2;
    }
    if (s >= end || *s != '"')
        return false;
    const char *q = s + 1;
    while (q < end && *q != '"') {
        if (!is_etagc((unsigned char)*q))
            return false;
        q++;
    }
    if (q >= end)
        return false;
    *o = s;
    *olen = (size_t)(q + 1 - s);
    *p = q + 1;
    return true;
}

/* If-None-Match list against our etag with the weak comparison. */
static bool inm_matches(const char *value, const char *etag)
{
    const char *s = value, *e = value + strlen(value);
    trim_ows(&s, &e);
    if (e - s == 1 && *s == '*')
        return true;

    const char *mine = NULL;
    size_t mine_len = 0;
    if (etag && etag[0]) {
        const char *p = etag, *pe = etag + strlen(etag);
        bool weak;
        if (!parse_etag(&p, pe, &weak, &mine, &mine_len) || p != pe)
            mine = NULL;
    }

    bool matched = false, any = false;
    const char *p = s;
    for (;;) {
        while (p < e && (is_ows(*p) || *p == ','))
            p++;
        if (p >= e)
            break;
        bool weak;
        const char *o;
        size_t olen;
        if (!parse_etag(&p, e, &weak, &o, &olen))
            return false;
        any = true;
        if (mine && olen == mine_len && memcmp(o, mine, olen) == 0)
            matched = true;
        while (p < e && is_ows(*p))
            p++;
        if (p < e && *p != ',')
            return false;
    }
    return any && matched;
}

bool sandlet_static_not_modified(const char *if_none_match, const char *if_modified_since,
                                 const char *etag, time_t mtime)
{
    if (if_none_match)
        return inm_matches(if_none_match, etag);
    if (if_modified_since) {
        time_t t;
        if (sandlet_static_parse_http_date(if_modified_since, &t) < 0)
            return false;
        return mtime <= t;
    }
    return false;
}

/* If-Range: a strong etag equal to ours, or a date equal to mtime. */
static bool if_range_holds(const char *value, const char *etag, time_t mtime)
{
    const char *s = value, *e = value + strlen(value);
    trim_ows(&s, &e);
    if (s < e && (*s == '"' || (e - s >= 2 && s[0] == 'W' && s[1] == '/'))) {
        bool weak;
        const char *o;
        size_t olen;
        const char *p = s;
        if (!parse_etag(&p, e, &weak, &o, &olen) || p != e || weak)
            return false;
        if (!etag || etag[0] != '"')
            return false; /* no etag, or a weak one: never a strong match */
        return strlen(etag) == olen && memcmp(etag, o, olen) == 0;
    }
    time_t t;
    if (sandlet_static_parse_http_date(value, &t) < 0)
        return false;
    return t == mtime;
}

/* Decimal digits at *p, saturating at UINT64_MAX; false when none. */
static bool parse_u64_sat(const char **p, const char *end, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;
    while (s < end && is_digit(*s)) {
        unsigned d = (unsigned)(*s - '0');
        x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
        s++;
    }
    if (s == *p)
        return false;
    *p = s;
    *v = x;
    return true;
}

int sandlet_static_range(const char *range, const char *if_range, const char *etag, time_t mtime,
                         uint64_t size, uint64_t *start, uint64_t *length)
{
    if (!range || !start || !length)
        return 0;
    if (if_range && !if_range_holds(if_range, etag, mtime))
        return 0;
    const char *s = range, *e = range + strlen(range);
    trim_ows(&s, &e);
    const char *eq = memchr(s, '=', (size_t)(e - s));
    if (!eq || eq - s != 5 || ascii_lower((unsigned char)s[0]) != 'b' ||
        ascii_lower((unsigned char)s[1]) != 'y' || ascii_lower((unsigned char)s[2]) != 't' ||
        ascii_lower((unsigned char)s[3]) != 'e' || ascii_lower((unsigned char)s[4]) != 's')
        return 0; /* no unit or not "bytes": ignore */

    int count = 0;
    bool suffix = false, has_last = false;
    uint64_t first = 0, last = 0;
    const char *p = eq + 1;
    for (;;) {
        while (p < e && (is_ows(*p) || *p == ','))
            p++;
        if (p >= e)
            break;
        if (++count > 1)
            return 0; /* several ranges: served whole */
        if (*p == '-') {
            p++;
            suffix = true;
            if (!parse_u64_sat(&p, e, &last))
                return 0;
        } else {
            if (!parse_u64_sat(&p, e, &first) || p >= e || *p != '-')
                return 0;
            p++;
            has_last = parse_u64_sat(&p, e, &last);
        }
        while (p < e && is_ows(*p))
            p++;
        if (p < e && *p != ',')
            return 0;
    }
    if (count == 0)
        return 0;

    if (suffix) {
        if (last == 0)
            return -ERANGE;
        if (size == 0)
            return 0; /* nothing to cut: 200 with an empty body */
        uint64_t n = last < size ? last : size;
        *start = size - n;
        *length = n;
        return 1;
    }
    if (has_last && last < first)
        return 0; /* invalid range-spec: ignore */
    if (first >= size)
        return -ERANGE;
    uint64_t end = has_last && last < size - 1 ? last : size - 1;
    *start = first;
    *length = end - first + 1;
    return 1;
}

/*
 * pagecache.c - the compile cache of C Server Pages (layout and stamp
 * format in pagecache.h): keys, the timestamp rule, work dirs and the
 * installing of a finished build.
 *
 * The work dir is written by the compile's uid, which also runs the
 * sandbox's servlets: everything read from it is hostile.  So this file
 * must never follow a link or open a non-regular file there, never read
 * more than a fixed bound, never move a file out of it (a rename would
 * keep its owner, and hard links could alias it), and never trust a byte
 * of the stamp it did not parse.  It never compiles or executes anything.
 */
#include "config.h"

#include "csp/pagecache.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STAMP_MAGIC "sandlet-page-stamp 1"

/* ---- names ---------------------------------------------------------------- */

/* A docroot-relative path: no leading '/', no empty, "." or ".." segment,
 * no control character, bounded length. */
static int path_check(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n >= PATH_MAX || p[0] == '/')
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
            return -EINVAL;
    const char *s = p;
    for (;;) {
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 0 || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
            return -EINVAL;
        if (!e)
            return 0;
        s = e + 1;
    }
}

int sandlet_page_rel_check(const char *rel)
{
    if (!rel || path_check(rel) < 0)
        return -EINVAL;
    size_t n = strlen(rel);
    if (n < 5 || strcasecmp(rel + n - 4, ".csp") != 0 || rel[n - 5] == '/')
        return -EINVAL;
    return 0;
}

int sandlet_page_key(const char *rel, char *out, size_t cap)
{
    if (sandlet_page_rel_check(rel) < 0)
        return -EINVAL;
    if (cap < SANDLET_PAGE_KEY_MAX)
        return -ENOSPC;
    const char *base = strrchr(rel, '/');
    base = base ? base + 1 : rel;
    size_t blen = strlen(base) - 4; /* without ".csp" */
    size_t o = 0;
    for (size_t i = 0; i < blen && o < 40; i++) {
        unsigned char c = (unsigned char)base[i];
        out[o++] = (isalnum(c) && c < 0x80) || c == '_' || c == '-' ? (char)c : '_';
    }
    uint8_t h[8];
    crypto_generichash(h, sizeof(h), (const unsigned char *)rel, strlen(rel), NULL, 0);
    out[o++] = '-';
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof(h); i++) {
        out[o++] = hex[h[i] >> 4];
        out[o++] = hex[h[i] & 15];
    }
    out[o] = '\0';
    return 0;
}

/* cachedir/key + suffix into out. */
static int cache_path(char *out, size_t cap, const char *cachedir, const char *key,
                      const char *suffix)
{
    int n = snprintf(out, cap, "%s/%s%s", cachedir, key, suffix);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* ---- files ---------------------------------------------------------------- */

/* openat2 beneath dirfd: fd, or -errno (-ENOSYS without openat2). */
static int openat2_beneath(int dirfd, const char *path)
{
#if defined(SYS_openat2)
    struct open_how how = {.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    for (int tries = 0; tries < 8; tries++) {
        int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        if (fd >= 0)
            return fd;
        if (errno != EAGAIN) /* EAGAIN: a rename raced with ".." */
            break;
    }
    return -errno;
#else
    (void)dirfd;
    (void)path;
    return -ENOSYS;
#endif
}

int sandlet_page_open_beneath(int dirfd, const char *path, struct stat *sb)
{
    int fd = openat2_beneath(dirfd, path);
    if (fd == -ENOSYS) {
        /* No openat2: the path has no ".." (checked), so only a symlink
         * could leave dirfd; refuse links in the last component. */
        if (path_check(path) < 0)
            return -EXDEV;
        fd = openat(dirfd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
        if (fd < 0)
            return -errno;
    } else if (fd < 0) {
        return fd;
    }
    if (fstat(fd, sb) < 0 || !S_ISREG(sb->st_mode)) {
        int e = S_ISREG(sb->st_mode) ? -errno : -EINVAL;
        close(fd);
        return e;
    }
    return fd;
}

int sandlet_page_hash_fd(int fd, size_t max, uint8_t hash[32])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    uint8_t b[65536];
    size_t total = 0;
    for (;;) {
        ssize_t r = read(fd, b, sizeof(b));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        total += (size_t)r;
        if (total > max)
            return -EFBIG;
        crypto_generichash_update(&st, b, (size_t)r);
    }
    crypto_generichash_final(&st, hash, 32);
    return 0;
}

int sandlet_page_write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* A temporary beside name, created exclusively, 0644. */
static int tmp_create(int dirfd, const char *name, char *tmp, size_t cap)
{
    for (unsigned i = 0; i < 16; i++) {
        uint32_t r = randombytes_random();
        int n = snprintf(tmp, cap, ".tmp-%08x-%s", (unsigned)r, name);
        if (n < 0 || (size_t)n >= cap)
            return -ENAMETOOLONG;
        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd >= 0) {
            /* The umask may have taken bits; the layout promises 0644. */
            if (fchmod(fd, 0644) < 0) {
                int e = -errno;
                close(fd);
                unlinkat(dirfd, tmp, 0);
                return e;
            }
            return fd;
        }
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

/* Closes fd (a temporary named tmp), then renames it over name, or
 * removes it when rc is an error already. */
static int tmp_commit(int dirfd, int fd, const char *tmp, const char *name, int rc)
{
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        rc = -errno;
    if (rc < 0)
        unlinkat(dirfd, tmp, 0);
    return rc;
}

int sandlet_page_write_atomic(int dirfd, const char *name, const void *data, size_t len)
{
    char tmp[NAME_MAX + 1];
    int fd = tmp_create(dirfd, name, tmp, sizeof(tmp));
    if (fd < 0)
        return fd;
    return tmp_commit(dirfd, fd, tmp, name, sandlet_page_write_all(fd, data, len));
}

/* Opens a hostile work-dir file: no link, symbolic or hard (a hard link
 * to a file the compile cannot read, made where the kernel allows it,
 * would otherwise be copied out by root), non-blocking (a fifo cannot
 * stall us), a regular file of at most max bytes. */
static int open_hostile(int wfd, const char *name, size_t max, struct stat *sb)
{
    int fd = openat(wfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    if (fstat(fd, sb) < 0 || !S_ISREG(sb->st_mode) || sb->st_nlink != 1 ||
        (unsigned long long)sb->st_size > max) {
        int e = fstat(fd, sb) < 0                            ? -errno
                : !S_ISREG(sb->st_mode) || sb->st_nlink != 1 ? -EPERM
                                                             : -EFBIG;
        close(fd);
        return e;
    }
    return fd;
}

/* Copies a hostile file's bytes (at most max, checked while reading: the
 * owner may still be growing it) to dirfd/name atomically. */
static int copy_hostile(int wfd, const char *src, size_t max, int dirfd, const char *name)
{
    struct stat sb;
    int in = open_hostile(wfd, src, max, &sb);
    if (in < 0)
        return in;
    char tmp[NAME_MAX + 1];
    int out = tmp_create(dirfd, name, tmp, sizeof(tmp));
    if (out < 0) {
        close(in);
        return out;
    }
    int rc = 0;
    size_t total = 0;
    uint8_t b[65536];
    for (;;) {
        ssize_t r = read(in, b, sizeof(b));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        total += (size_t)r;
        if (total > max) {
            rc = -EFBIG;
            break;
        }
        if ((rc = sandlet_page_write_all(out, b, (size_t)r)) < 0)
            break;
    }
    close(in);
    return tmp_commit(dirfd, out, tmp, name, rc);
}

/* Reads a whole hostile file (bounded) into a NUL-terminated buffer. */
static int read_hostile(int wfd, const char *name, size_t max, char **data, size_t *len)
{
    struct stat sb;
    int fd = open_hostile(wfd, name, max, &sb);
    if (fd < 0)
        return fd;
    char *b = malloc(max + 1);
    if (!b) {
        close(fd);
        return -ENOMEM;
    }
    size_t n = 0;
    int rc = 0;
    for (;;) {
        if (n > max) {
            rc = -EFBIG;
            break;
        }
        ssize_t r = read(fd, b + n, max + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (rc == 0 && n > max)
        rc = -EFBIG;
    if (rc < 0) {
        free(b);
        return rc;
    }
    b[n] = '\0';
    *data = b;
    *len = n;
    return 0;
}

/* ---- the line table ------------------------------------------------------- */

int sandlet_page_lines_parse(const char *data, size_t len, sandlet_page_line **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (len > SANDLET_PAGE_MAX_LINES || (len && data[len - 1] != '\n'))
        return -EINVAL;
    size_t rows = 0;
    for (size_t i = 0; i < len; i++)
        rows += data[i] == '\n';
    sandlet_page_line *t = malloc((rows ? rows : 1) * sizeof(*t));
    if (!t)
        return -ENOMEM;
    const char *p = data, *end = data + len;
    size_t k = 0;
    while (p < end) {
        unsigned long long off = 0, line = 0;
        const char *s = p;
        while (p < end && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')) && p - s < 9) {
            off = off * 16 + (unsigned)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
            p++;
        }
        if (p == s || p >= end || *p != ' ' || off >= SANDLET_PAGE_MAX_SO ||
            (k && off <= t[k - 1].offset))
            goto bad;
        s = ++p;
        while (p < end && *p >= '0' && *p <= '9' && p - s < 11) {
            line = line * 10 + (unsigned)(*p - '0');
            p++;
        }
        if (p == s || p >= end || *p != '\n' || line >= 1ULL << 31)
            goto bad;
        p++;
        t[k].offset = (uint32_t)off;
        t[k].line = (uint32_t)line;
        k++;
    }
    if (!k) {
        free(t);
        return 0;
    }
    *out = t;
    *n = k;
    return 0;
bad:
    free(t);
    return -EINVAL;
}

/* ---- the stamp ------------------------------------------------------------- */

void sandlet_page_stamp_free(sandlet_page_stamp *st)
{
    for (size_t i = 0; i < st->nfiles; i++)
        free(st->files[i].path);
    free(st->files);
    free(st->rel);
    memset(st, 0, sizeof(*st));
}

int sandlet_page_stamp_add(sandlet_page_stamp *st, const char *path, const struct stat *sb,
                           const uint8_t hash[32])
{
    if (path_check(path) < 0)
        return -EINVAL;
    if (st->nfiles >= SANDLET_PAGE_MAX_DEPS)
        return -E2BIG;
    sandlet_page_file *f = realloc(st->files, (st->nfiles + 1) * sizeof(*f));
    if (!f)
        return -ENOMEM;
    st->files = f;
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    f[st->nfiles].size = (unsigned long long)sb->st_size;
    f[st->nfiles].mtime_ns = (unsigned long long)sb->st_mtim.tv_sec * 1000000000ull +
                             (unsigned long long)sb->st_mtim.tv_nsec;
    f[st->nfiles].ino = (unsigned long long)sb->st_ino;
    memcpy(f[st->nfiles].hash, hash, 32);
    f[st->nfiles].path = p;
    st->nfiles++;
    return 0;
}

static void put_str(sandlet_buf *b, const char *s)
{
    sandlet_buf_put(b, s, strlen(s));
}

int sandlet_page_stamp_format(const sandlet_page_stamp *st, sandlet_buf *out)
{
    if (!st->rel || sandlet_page_rel_check(st->rel) < 0 || st->nfiles == 0)
        return -EINVAL;
    put_str(out, STAMP_MAGIC "\nsandlet " PACKAGE_VERSION "\npage ");
    put_str(out, st->rel);
    put_str(out, st->ok ? "\nresult ok\n" : "\nresult failed\n");
    for (size_t i = 0; i < st->nfiles; i++) {
        const sandlet_page_file *f = &st->files[i];
        char line[160];
        char hex[65];
        sodium_bin2hex(hex, sizeof(hex), f->hash, 32);
        snprintf(line, sizeof(line), "file %llu %llu %llu %s ", f->size, f->mtime_ns, f->ino, hex);
        put_str(out, line);
        put_str(out, f->path);
        put_str(out, "\n");
    }
    put_str(out, "end\n");
    return out->error;
}

/* The next line of [*p, end) without its '\n' into line (NUL-terminated
 * in place); false when there is no complete line. */
static bool next_line(char **p, char *end, char **line)
{
    char *nl = memchr(*p, '\n', (size_t)(end - *p));
    if (!nl)
        return false;
    *nl = '\0';
    *line = *p;
    *p = nl + 1;
    return true;
}

/* A decimal number of at most 20 digits, no sign, no leading garbage;
 * advances *s past it and one following space. */
static bool parse_num(const char **s, unsigned long long *v)
{
    const char *p = *s;
    unsigned long long n = 0;
    size_t d = 0;
    while (*p >= '0' && *p <= '9') {
        unsigned dig = (unsigned)(*p - '0');
        if (n > (~0ull - dig) / 10)
            return false;
        n = n * 10 + dig;
        p++;
        d++;
    }
    if (d == 0 || d > 20 || (d > 1 && **s == '0') || *p != ' ')
        return false;
    *v = n;
    *s = p + 1;
    return true;
}

int sandlet_page_stamp_parse(const char *data, size_t len, sandlet_page_stamp *out)
{
    memset(out, 0, sizeof(*out));
    if (len > SANDLET_PAGE_MAX_STAMP || memchr(data, '\0', len))
        return -EINVAL;
    char *copy = malloc(len + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, data, len);
    copy[len] = '\0';
    char *p = copy, *end = copy + len, *line;
    int rc = -EINVAL;
    if (!next_line(&p, end, &line) || strcmp(line, STAMP_MAGIC) != 0)
        goto done;
    if (!next_line(&p, end, &line) || strncmp(line, "sandlet ", 8) != 0 || line[8] == '\0')
        goto done;
    out->version_matches = strcmp(line + 8, PACKAGE_VERSION) == 0;
    if (!next_line(&p, end, &line) || strncmp(line, "page ", 5) != 0 ||
        sandlet_page_rel_check(line + 5) < 0)
        goto done;
    if (!(out->rel = strdup(line + 5))) {
        rc = -ENOMEM;
        goto done;
    }
    if (!next_line(&p, end, &line))
        goto done;
    if (strcmp(line, "result ok") == 0)
        out->ok = true;
    else if (strcmp(line, "result failed") != 0)
        goto done;
    for (;;) {
        if (!next_line(&p, end, &line))
            goto done;
        if (strcmp(line, "end") == 0)
            break;
        if (strncmp(line, "file ", 5) != 0)
            goto done;
        const char *s = line + 5;
        unsigned long long size, mtime, ino;
        if (!parse_num(&s, &size) || !parse_num(&s, &mtime) || !parse_num(&s, &ino))
            goto done;
        uint8_t hash[32];
        for (size_t i = 0; i < 64; i++)
            if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                goto done;
        if (s[64] != ' ' || sodium_hex2bin(hash, 32, s, 64, NULL, NULL, NULL) != 0)
            goto done;
        s += 65;
        if (size > (unsigned long long)INT64_MAX || mtime > (unsigned long long)INT64_MAX)
            goto done;
        struct stat sb = {0};
        sb.st_size = (off_t)size;
        sb.st_mtim.tv_sec = (time_t)(mtime / 1000000000ull);
        sb.st_mtim.tv_nsec = (long)(mtime % 1000000000ull);
        sb.st_ino = (ino_t)ino;
        int a = sandlet_page_stamp_add(out, s, &sb, hash);
        if (a < 0) {
            rc = a == -ENOMEM ? a : -EINVAL;
            goto done;
        }
    }
    /* Nothing after "end"; the page is listed first, and only once. */
    if (p != end || out->nfiles == 0 || strcmp(out->files[0].path, out->rel) != 0)
        goto done;
    rc = 0;
done:
    free(copy);
    if (rc < 0)
        sandlet_page_stamp_free(out);
    return rc;
}

/* ---- the timestamp rule ------------------------------------------------------ */

/* The diagnostic the log names: the first "error:" line of the diag file
 * (compilers open with "In file included from" and "In function" lines,
 * which say nothing by themselves), else its first line. */
static void first_line(int cfd, const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    struct stat sb;
    int fd = open_hostile(cfd, name, SANDLET_PAGE_MAX_DIAG * 2, &sb);
    if (fd < 0)
        return;
    char buf[8192];
    ssize_t r = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (r <= 0)
        return;
    buf[r] = '\0';
    const char *line = buf, *err = strstr(buf, "error:");
    if (err) {
        while (err > buf && err[-1] != '\n')
            err--;
        line = err;
    }
    size_t n = strcspn(line, "\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, line, n);
    out[n] = '\0';
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
}

/* Whether every file of the stamp is unchanged; *refresh when one matched
 * by content only (its stat is then updated in st). */
static int deps_match(int docroot_fd, sandlet_page_stamp *st, bool *match, bool *refresh)
{
    *match = true;
    *refresh = false;
    for (size_t i = 0; i < st->nfiles && *match; i++) {
        sandlet_page_file *f = &st->files[i];
        struct stat sb = {0};
        int fd = sandlet_page_open_beneath(docroot_fd, f->path, &sb);
        if (fd < 0) {
            if (i == 0 && fd != -ENOENT && fd != -ENOTDIR)
                return fd;
            *match = false;
            break;
        }
        unsigned long long mt = (unsigned long long)sb.st_mtim.tv_sec * 1000000000ull +
                                (unsigned long long)sb.st_mtim.tv_nsec;
        if ((unsigned long long)sb.st_size == f->size && mt == f->mtime_ns &&
            (unsigned long long)sb.st_ino == f->ino) {
            close(fd);
            continue;
        }
        uint8_t h[32];
        int rc = (unsigned long long)sb.st_size == f->size ? sandlet_page_hash_fd(fd, f->size, h)
                                                           : -EFBIG;
        close(fd);
        if (rc == 0 && sodium_memcmp(h, f->hash, 32) == 0) {
            f->mtime_ns = mt;
            f->ino = (unsigned long long)sb.st_ino;
            *refresh = true;
        } else {
            *match = false;
        }
    }
    return 0;
}

static int check_at(int cfd, const char *cachedir, int docroot_fd, const char *rel,
                    sandlet_page_info *out)
{
    char key[SANDLET_PAGE_KEY_MAX], name[NAME_MAX + 1];
    int rc = sandlet_page_key(rel, key, sizeof(key));
    if (rc < 0)
        return rc;
    memset(out, 0, sizeof(*out));
    if ((rc = cache_path(out->so, sizeof(out->so), cachedir, key, ".so")) < 0 ||
        (rc = cache_path(out->diag, sizeof(out->diag), cachedir, key, ".diag")) < 0)
        return rc;
    struct stat sb;
    int pfd = sandlet_page_open_beneath(docroot_fd, rel, &sb);
    if (pfd < 0) {
        out->state = SANDLET_PAGE_MISSING;
        return pfd == -ENOENT || pfd == -ENOTDIR || pfd == -EINVAL ? 0 : pfd;
    }
    close(pfd);
    out->state = SANDLET_PAGE_STALE;
    snprintf(name, sizeof(name), "%s.stamp", key);
    char *data;
    size_t len;
    rc = read_hostile(cfd, name, SANDLET_PAGE_MAX_STAMP, &data, &len);
    if (rc < 0)
        return rc == -ENOENT || rc == -EFBIG || rc == -EPERM || rc == -ELOOP ? 0 : rc;
    sandlet_page_stamp st;
    rc = sandlet_page_stamp_parse(data, len, &st);
    free(data);
    if (rc < 0)
        return rc == -ENOMEM ? rc : 0;
    bool match = false, refresh = false;
    if (st.version_matches && strcmp(st.rel, rel) == 0)
        rc = deps_match(docroot_fd, &st, &match, &refresh);
    if (rc == 0 && match) {
        snprintf(name, sizeof(name), "%s.so", key);
        if (!st.ok)
            out->state = SANDLET_PAGE_FAILED;
        else if (fstatat(cfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode))
            out->state = SANDLET_PAGE_READY;
        if (out->state != SANDLET_PAGE_STALE && refresh) {
            /* Best effort: a read-only cache still answers correctly, it
             * only hashes again next time. */
            sandlet_buf b;
            sandlet_buf_init(&b, SANDLET_PAGE_MAX_STAMP);
            snprintf(name, sizeof(name), "%s.stamp", key);
            if (sandlet_page_stamp_format(&st, &b) == 0)
                (void)sandlet_page_write_atomic(cfd, name, b.data, b.len);
            sandlet_buf_free(&b);
        }
        /* The log line is for failed pages only: a ready page is checked
         * every 100 ms while it is busy. */
        snprintf(name, sizeof(name), "%s.diag", key);
        if (out->state == SANDLET_PAGE_FAILED)
            first_line(cfd, name, out->first, sizeof(out->first));
    }
    sandlet_page_stamp_free(&st);
    return rc;
}

int sandlet_page_check(const char *cachedir, int docroot_fd, const char *rel,
                       sandlet_page_info *out)
{
    if (sandlet_page_rel_check(rel) < 0)
        return -EINVAL;
    if (sodium_init() < 0)
        return -ENOSYS;
    int cfd = open(cachedir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cfd < 0)
        return -errno;
    int rc = check_at(cfd, cachedir, docroot_fd, rel, out);
    close(cfd);
    return rc;
}

/* ---- work dirs --------------------------------------------------------------- */

/* Removes the entries of the directory dfd, and of its subdirectories down
 * to depth levels (a compile confined by Landlock cannot make any; without
 * Landlock a deeper tree is refused rather than recursed into). */
static int remove_entries(int dfd, unsigned depth)
{
    int dup_fd = dup(dfd);
    if (dup_fd < 0)
        return -errno;
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return -errno;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (unlinkat(dfd, e->d_name, 0) == 0 || errno == ENOENT)
            continue;
        if (errno != EISDIR && errno != EPERM) {
            rc = -errno;
            break;
        }
        if (depth == 0) {
            rc = -ELOOP;
            break;
        }
        int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
            rc = -errno;
            break;
        }
        rc = remove_entries(sub, depth - 1);
        close(sub);
        if (rc < 0 || (unlinkat(dfd, e->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)) {
            rc = rc < 0 ? rc : -errno;
            break;
        }
    }
    closedir(d);
    return rc;
}

static int workdir_remove_at(int cfd, const char *name)
{
    int wfd = openat(cfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (wfd < 0) {
        if (errno == ENOENT)
            return 0;
        /* A link or a file where the work dir should be: just remove it. */
        if ((errno == ENOTDIR || errno == ELOOP) && unlinkat(cfd, name, 0) == 0)
            return 0;
        return -errno;
    }
    int rc = remove_entries(wfd, 4);
    close(wfd);
    if (rc == 0 && unlinkat(cfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        rc = -errno;
    return rc;
}

int sandlet_page_workdir_remove(const char *workdir)
{
    char dir[PATH_MAX];
    int n = snprintf(dir, sizeof(dir), "%s", workdir);
    if (n < 0 || (size_t)n >= sizeof(dir))
        return -ENAMETOOLONG;
    char *slash = strrchr(dir, '/');
    if (!slash || slash[1] == '\0')
        return -EINVAL;
    *slash = '\0';
    int cfd = open(slash == dir ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cfd < 0)
        return -errno;
    int rc = workdir_remove_at(cfd, slash + 1);
    close(cfd);
    return rc;
}

int sandlet_page_workdir(const char *cachedir, const char *rel, uid_t uid, gid_t gid, char *out,
                         size_t cap)
{
    char key[SANDLET_PAGE_KEY_MAX], name[NAME_MAX + 1];
    int rc = sandlet_page_key(rel, key, sizeof(key));
    if (rc < 0)
        return rc;
    snprintf(name, sizeof(name), ".build-%s", key);
    int n = snprintf(out, cap, "%s/%s", cachedir, name);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    int cfd = open(cachedir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cfd < 0)
        return -errno;
    if ((rc = workdir_remove_at(cfd, name)) == 0) {
        if (mkdirat(cfd, name, 0700) < 0) {
            rc = -errno;
        } else {
            int wfd = openat(cfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            /* chmod first: once the dir is the compile's, changing its mode
             * would need CAP_FOWNER, which the supervisor does not keep. */
            if (wfd < 0 || fchmod(wfd, 0700) < 0 || fchown(wfd, uid, gid) < 0)
                rc = -errno;
            if (wfd >= 0)
                close(wfd);
            if (rc < 0)
                unlinkat(cfd, name, AT_REMOVEDIR);
        }
    }
    close(cfd);
    return rc;
}

/* ---- installing ---------------------------------------------------------------- */

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Records a diagnostic of our own as the attempt's (the work dir gave none
 * we could trust). */
static void own_diag(int cfd, const char *key, const char *rel, const char *msg)
{
    char name[NAME_MAX + 1], line[1024];
    snprintf(name, sizeof(name), "%s.diag", key);
    int n = snprintf(line, sizeof(line), "%s: error: %s\n", rel, msg);
    if (n > 0)
        (void)sandlet_page_write_atomic(cfd, name, line,
                                        (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

enum { BUILD_OK = 0, BUILD_FAILED = 1, BUILD_ERROR = 2 }; /* = SANDLET_BUILD_* */

static int install_at(int cfd, int wfd, const char *key, const char *rel, int status, char *err,
                      size_t errlen)
{
    char name[NAME_MAX + 1];
    char *data = NULL;
    size_t len = 0;
    sandlet_page_stamp st = {0};
    int rc = read_hostile(wfd, "stamp", SANDLET_PAGE_MAX_STAMP, &data, &len);
    if (rc == 0) {
        rc = sandlet_page_stamp_parse(data, len, &st);
        free(data);
        if (rc == 0 && (strcmp(st.rel, rel) != 0 || !st.version_matches))
            rc = -EINVAL;
        if (rc == 0 && status == BUILD_OK && !st.ok)
            rc = -EINVAL;
    }
    if (rc < 0 && rc != -ENOENT) {
        sandlet_page_stamp_free(&st);
        own_diag(cfd, key, rel,
                 "the compile left an unusable stamp; the page is rebuilt on its next request");
        return fail(err, errlen, rc == -ENOMEM ? rc : -EPERM,
                    "page '%s': the compile's stamp is not a regular file of at most %zu bytes in "
                    "the stamp format (%s); fix: remove the work dir and report a bug if it recurs",
                    rel, SANDLET_PAGE_MAX_STAMP, strerror(-rc));
    }
    bool have_stamp = rc == 0;

    /* The diagnostics first: they explain whatever follows. */
    snprintf(name, sizeof(name), "%s.diag", key);
    rc = copy_hostile(wfd, "diag", SANDLET_PAGE_MAX_DIAG, cfd, name);
    if (rc == -ENOENT) {
        rc = 0;
        if (status != BUILD_OK)
            own_diag(cfd, key, rel, "the compile ended without a diagnostic (killed at a limit?)");
        else
            rc = sandlet_page_write_atomic(cfd, name, "", 0);
    }
    if (rc < 0) {
        sandlet_page_stamp_free(&st);
        own_diag(cfd, key, rel,
                 "the compile's diagnostics were refused (not a regular file, or too big)");
        return fail(err, errlen, rc == -EFBIG || rc == -EPERM || rc == -ELOOP ? -EPERM : rc,
                    "page '%s': cannot install the diagnostics: %s; fix: check the cache dir", rel,
                    strerror(-rc));
    }
    snprintf(name, sizeof(name), "%s.c", key);
    rc = copy_hostile(wfd, "page.c", SANDLET_PAGE_MAX_C, cfd, name);
    if (rc < 0 && rc != -ENOENT) {
        sandlet_page_stamp_free(&st);
        return fail(err, errlen, rc == -EFBIG || rc == -EPERM || rc == -ELOOP ? -EPERM : rc,
                    "page '%s': cannot install the generated C: %s; fix: check the cache dir", rel,
                    strerror(-rc));
    }
    if (status == BUILD_ERROR || !have_stamp) {
        /* Not the page's fault (or nothing says which version failed):
         * leave the stamp, so that the page stays STALE and is tried again. */
        sandlet_page_stamp_free(&st);
        return 0;
    }
    if (status == BUILD_OK) {
        /* The line table the crash report reads: only a valid one, and
         * never a previous version's, which would name wrong lines. */
        snprintf(name, sizeof(name), "%s.lines", key);
        rc = read_hostile(wfd, "lines", SANDLET_PAGE_MAX_LINES, &data, &len);
        if (rc == 0) {
            sandlet_page_line *t;
            size_t nt;
            rc = sandlet_page_lines_parse(data, len, &t, &nt);
            if (rc == 0) {
                free(t);
                rc = sandlet_page_write_atomic(cfd, name, data, len);
            }
            free(data);
        }
        if (rc < 0 && unlinkat(cfd, name, 0) < 0 && errno != ENOENT) {
            int e = errno;
            sandlet_page_stamp_free(&st);
            return fail(err, errlen, -e,
                        "page '%s': cannot remove the old line table '%s': %s; fix: check the "
                        "cache dir",
                        rel, name, strerror(e));
        }
        snprintf(name, sizeof(name), "%s.so", key);
        rc = copy_hostile(wfd, "page.so", SANDLET_PAGE_MAX_SO, cfd, name);
        if (rc < 0) {
            sandlet_page_stamp_free(&st);
            return fail(err, errlen, rc == -EFBIG || rc == -EPERM || rc == -ELOOP ? -EPERM : rc,
                        "page '%s': cannot install the shared object (not a regular file of at "
                        "most %zu bytes?): %s; fix: check the cache dir and the compiler",
                        rel, SANDLET_PAGE_MAX_SO, strerror(-rc));
        }
    }
    /* The stamp last, re-serialised from what we parsed: once it says ok,
     * the .so it vouches for is in place. */
    st.ok = status == BUILD_OK;
    sandlet_buf b;
    sandlet_buf_init(&b, SANDLET_PAGE_MAX_STAMP + 4096);
    snprintf(name, sizeof(name), "%s.stamp", key);
    rc = sandlet_page_stamp_format(&st, &b);
    if (rc == 0)
        rc = sandlet_page_write_atomic(cfd, name, b.data, b.len);
    sandlet_buf_free(&b);
    sandlet_page_stamp_free(&st);
    if (rc < 0)
        return fail(err, errlen, rc,
                    "page '%s': cannot write the stamp: %s; fix: check the cache dir", rel,
                    strerror(-rc));
    return 0;
}

int sandlet_page_install(const char *cachedir, const char *workdir, const char *rel,
                         int build_status, sandlet_page_info *out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    char key[SANDLET_PAGE_KEY_MAX], name[NAME_MAX + 1], expect[PATH_MAX];
    int rc = sandlet_page_key(rel, key, sizeof(key));
    if (rc < 0)
        return fail(err, errlen, rc,
                    "page '%s': not a page path (relative, no '..', ending in "
                    ".csp); fix the caller",
                    rel ? rel : "(null)");
    if (build_status < BUILD_OK || build_status > BUILD_ERROR)
        return fail(err, errlen, -EINVAL, "page '%s': unknown build status %d; report a bug", rel,
                    build_status);
    if (sodium_init() < 0)
        return fail(err, errlen, -ENOSYS, "libsodium failed to initialise");
    snprintf(name, sizeof(name), ".build-%s", key);
    int n = snprintf(expect, sizeof(expect), "%s/%s", cachedir, name);
    if (n < 0 || (size_t)n >= sizeof(expect) || strcmp(expect, workdir) != 0)
        return fail(
            err, errlen, -EINVAL,
            "page '%s': work dir '%s' is not '%s'; fix the caller (use sandlet_page_workdir)", rel,
            workdir, expect);
    int cfd = open(cachedir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cfd < 0)
        return fail(err, errlen, -errno,
                    "page cache '%s': %s; fix: create it (owned by root, 0755)", cachedir,
                    strerror(errno));
    int wfd = openat(cfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (wfd < 0) {
        rc = fail(err, errlen, -errno,
                  "page '%s': work dir '%s': %s; fix: build into the dir "
                  "sandlet_page_workdir made",
                  rel, workdir, strerror(errno));
        own_diag(cfd, key, rel, "the compile's work dir is gone or not a directory");
    } else {
        rc = install_at(cfd, wfd, key, rel, build_status, err, errlen);
        close(wfd);
    }
    int rm = workdir_remove_at(cfd, name);
    if (rc == 0 && rm < 0)
        rc = fail(err, errlen, rm, "page '%s': cannot remove the work dir '%s': %s; fix: remove it",
                  rel, workdir, strerror(-rm));
    if (out) {
        memset(out, 0, sizeof(*out));
        out->state = SANDLET_PAGE_STALE;
        cache_path(out->so, sizeof(out->so), cachedir, key, ".so");
        cache_path(out->diag, sizeof(out->diag), cachedir, key, ".diag");
        snprintf(name, sizeof(name), "%s.stamp", key);
        char *data;
        size_t len;
        sandlet_page_stamp st;
        if (build_status != BUILD_ERROR &&
            read_hostile(cfd, name, SANDLET_PAGE_MAX_STAMP, &data, &len) == 0) {
            if (sandlet_page_stamp_parse(data, len, &st) == 0) {
                if (strcmp(st.rel, rel) == 0 && st.ok == (build_status == BUILD_OK) && rc == 0)
                    out->state = st.ok ? SANDLET_PAGE_READY : SANDLET_PAGE_FAILED;
                sandlet_page_stamp_free(&st);
            }
            free(data);
        }
        snprintf(name, sizeof(name), "%s.diag", key);
        first_line(cfd, name, out->first, sizeof(out->first));
    }
    close(cfd);
    return rc;
}

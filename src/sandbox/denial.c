/*
 * denial.c - a Landlock denial of a worker, as the operator reads it:
 * which access it was, the 'readable' or 'writable' line that would allow
 * it, and a rate limit so that a servlet looping on a refused open fills
 * no log.  The supervisor (supervisor.c) feeds it the kernel's records
 * (audit.c) and logs the lines.
 *
 * It must never log, read a clock or trust a path: a path comes from a
 * worker, and is only ever written escaped, as data, never as a format.
 */
#include "config.h"

#include "sandbox/denial.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Blockers that a 'readable' line grants (LL_READ in landlock.h); every
 * other fs.* right comes with 'writable' only. */
static bool read_right(const char *b, size_t n)
{
    return (n == 12 && memcmp(b, "fs.read_file", 12) == 0) ||
           (n == 11 && memcmp(b, "fs.read_dir", 11) == 0) ||
           (n == 10 && memcmp(b, "fs.execute", 10) == 0);
}

/* Blockers whose record names the file itself, not its folder: the
 * folder is what 'writable' takes. */
static bool file_right(const char *b, size_t n)
{
    return (n == 13 && memcmp(b, "fs.write_file", 13) == 0) ||
           (n == 11 && memcmp(b, "fs.truncate", 11) == 0) ||
           (n == 12 && memcmp(b, "fs.ioctl_dev", 12) == 0);
}

/* Calls each(b, n) for every comma-separated blocker of d; stops at the
 * first true. */
static bool any_blocker(const sandlet_denial *d, bool (*each)(const char *b, size_t n))
{
    for (const char *b = d->blockers; *b;) {
        size_t n = strcspn(b, ",");
        if (each(b, n))
            return true;
        b += n + (b[n] == ',');
    }
    return false;
}

static bool not_read(const char *b, size_t n)
{
    return !read_right(b, n);
}

static bool not_fs(const char *b, size_t n)
{
    return n < 3 || memcmp(b, "fs.", 3) != 0;
}

sandlet_denial_kind sandlet_denial_kind_of(const sandlet_denial *d)
{
    if (!d->blockers[0] || any_blocker(d, not_fs))
        return SANDLET_DENIAL_OTHER;
    return any_blocker(d, not_read) ? SANDLET_DENIAL_WRITABLE : SANDLET_DENIAL_READABLE;
}

/* A bounded writer: what does not fit is cut, and the cut is marked. */
typedef struct out {
    char *p;
    size_t cap, len;
    bool cut;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->cap == 0)
        return;
    size_t room = o->cap - 1 - o->len;
    if (n > room) {
        n = room;
        o->cut = true;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void puts_(out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* At most max bytes of s, escaped: printable ASCII but quotes and
 * backslashes as is, the rest \xNN. */
static void put_path(out *o, const char *s, size_t n, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
        bool plain = c >= 0x20 && c < 0x7f && c != '\'' && c != '"' && c != '\\';
        size_t k = plain ? 1 : 4;
        if (shown + k > max) {
            puts_(o, "...");
            return;
        }
        put(o, plain ? s + i : e, k);
        shown += k;
    }
}

/* Longest path shown: a log line holds at most PIPE_BUF bytes, and the
 * path appears twice. */
#define SHOWN_MAX 1200

void sandlet_denial_describe(const sandlet_denial *d, const sandlet_denial_ctx *ctx, int pid,
                             unsigned more, char *buf, size_t cap)
{
    out o = {.p = buf, .cap = cap};
    if (cap)
        buf[0] = '\0';
    char num[96];
    /* FILE:LINE: first, as every message about the configuration. */
    puts_(&o, ctx->file ? ctx->file : "the configuration");
    if (ctx->line > 0) {
        snprintf(num, sizeof(num), ":%d", ctx->line);
        puts_(&o, num);
    }
    puts_(&o, ": sandbox '");
    puts_(&o, ctx->sandbox);
    puts_(&o, "'");
    if (ctx->servlets && *ctx->servlets) {
        puts_(&o, " (");
        puts_(&o, ctx->servlets);
        puts_(&o, ")");
    }
    snprintf(num, sizeof(num), ": Landlock refused worker %d ", pid);
    puts_(&o, num);
    puts_(&o, d->blockers);
    sandlet_denial_kind kind = sandlet_denial_kind_of(d);
    const char *word = kind == SANDLET_DENIAL_READABLE ? "readable" : "writable";
    size_t plen = strlen(d->path);
    if (kind == SANDLET_DENIAL_OTHER) {
        puts_(&o, ", which is not a file access: no readable or writable line allows it (see "
                  "sandlet-security(7))");
    } else if (!plen) {
        puts_(&o, " of a file its record does not name ('ausearch -m LANDLOCK_ACCESS' may): to "
                  "allow it, add a '");
        puts_(&o, word);
        puts_(&o, "' line that covers it");
    } else if (d->name_only) {
        puts_(&o, " of a file named '");
        put_path(&o, d->path, plen, SHOWN_MAX);
        puts_(&o, "': to allow it, add a '");
        puts_(&o, word);
        puts_(&o, "' line naming the folder that holds it");
    } else {
        /* 'writable' takes a folder: the file's own, for a right on a
         * file; records of making or removing name the folder already. */
        size_t dlen = plen;
        if (kind == SANDLET_DENIAL_WRITABLE && any_blocker(d, file_right)) {
            const char *slash = strrchr(d->path, '/');
            dlen = slash ? (slash == d->path ? 1 : (size_t)(slash - d->path)) : plen;
        }
        puts_(&o, " of '");
        put_path(&o, d->path, plen, SHOWN_MAX);
        puts_(&o, "', which no '");
        puts_(&o, word);
        puts_(&o, "' line of the sandbox covers");
        if (kind == SANDLET_DENIAL_WRITABLE && ctx->write_blocked)
            puts_(&o, " (or the sandbox is over its write-quota, which makes its writable folders "
                      "read-only until it is under it again)");
        puts_(&o, ": to allow it, add '");
        puts_(&o, word);
        puts_(&o, " \"");
        put_path(&o, d->path, dlen, SHOWN_MAX);
        puts_(&o, "\";'");
        if (kind == SANDLET_DENIAL_READABLE)
            puts_(&o, " (or a folder above it)");
    }
    if (kind != SANDLET_DENIAL_OTHER) {
        if (ctx->line > 0) {
            puts_(&o, " to its block and reload");
        } else {
            /* The implicit sandbox of servlets that name none. */
            puts_(&o, " in a block 'sandbox ");
            puts_(&o, ctx->sandbox);
            puts_(&o, " { ... }' (its servlets already run in it) and reload");
        }
    }
    if (more) {
        snprintf(num, sizeof(num), " (%u more since its last report)", more);
        puts_(&o, num);
    }
    if (o.cut && cap > 4)
        memcpy(buf + cap - 4, "...", 4);
}

/* The line of list that covers path (the path itself or a folder above
 * it), or NULL. */
static const char *covering(const char *path, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *p = list[i];
        size_t len = p ? strlen(p) : 0;
        while (len > 1 && p[len - 1] == '/')
            len--;
        if (len == 0)
            continue;
        if (len == 1 && p[0] == '/')
            return p;
        if (strncmp(path, p, len) == 0 && (path[len] == '\0' || path[len] == '/'))
            return p;
    }
    return NULL;
}

void sandlet_denial_hint(const sandlet_filehint *h, const sandlet_hint_ctx *ctx, char *buf,
                         size_t cap)
{
    out o = {.p = buf, .cap = cap};
    if (cap)
        buf[0] = '\0';
    size_t plen = strlen(h->path);
    puts_(&o, h->call);
    puts_(&o, "('");
    put_path(&o, h->path, plen, SHOWN_MAX);
    puts_(&o, h->err == EPERM ? "') failed with EPERM" : "') failed with EACCES");
    const char *by_write = covering(h->path, ctx->writable, ctx->nwritable);
    const char *by_read = covering(h->path, ctx->readable, ctx->nreadable);
    if (!by_read)
        by_read = covering(h->path, ctx->system, ctx->nsystem);
    if (h->relative) {
        puts_(&o, " (relative to a descriptor, so the worker cannot tell where it lies): if "
                  "Landlock refused it, a 'readable' or 'writable' line of sandbox '");
        puts_(&o, ctx->sandbox);
        puts_(&o, "' must cover the file");
    } else if (h->write && by_write && ctx->write_blocked) {
        puts_(&o, ": the sandbox is over its write-quota, which makes its writable folders "
                  "read-only until it is under it again");
    } else if (by_write || (!h->write && by_read)) {
        const char *line = by_write ? by_write : by_read;
        puts_(&o, ", though Landlock allows it (sandbox '");
        puts_(&o, ctx->sandbox);
        puts_(&o, by_write ? "', writable '" : "', readable '");
        put_path(&o, line, strlen(line), SHOWN_MAX);
        puts_(&o, "'): the file's own permissions, or its folders', refuse the sandbox's uid; "
                  "chown or chmod it ('sandletd -t' tries each path as that uid)");
    } else {
        /* 'writable' takes a folder: the one the call writes in (making
         * or removing a folder writes in its parent). */
        size_t dlen = plen;
        if (h->write) {
            const char *slash = strrchr(h->path, '/');
            dlen = slash ? (slash == h->path ? 1 : (size_t)(slash - h->path)) : plen;
        }
        puts_(&o, ", and no '");
        puts_(&o, h->write ? "writable" : "readable");
        puts_(&o, "' line of sandbox '");
        puts_(&o, ctx->sandbox);
        puts_(&o, "' covers it, so Landlock refused it (unless it lies in a folder of a servlet "
                  "library's RUNPATH, which Landlock allows too; a link is judged by where it "
                  "leads): to allow it, add '");
        puts_(&o, h->write ? "writable" : "readable");
        puts_(&o, " \"");
        put_path(&o, h->path, dlen, SHOWN_MAX);
        puts_(&o, "\";'");
        if (!h->write)
            puts_(&o, " (or a folder above it)");
        puts_(&o, " to its block and reload");
    }
    char num[96];
    if (h->more) {
        snprintf(num, sizeof(num), "; %u more file calls of this request were refused", h->more);
        puts_(&o, num);
    }
    puts_(&o, " (development mode's hint, from the worker: this kernel keeps no record of "
              "Landlock's denials)");
    if (o.cut && cap > 4)
        memcpy(buf + cap - 4, "...", 4);
}

/* FNV-1a, over the box id, the blockers and the path: never 0. */
static uint64_t key_of(uint32_t box, const sandlet_denial *d)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *parts[3] = {(const unsigned char *)&box,
                                     (const unsigned char *)d->blockers,
                                     (const unsigned char *)d->path};
    size_t lens[3] = {sizeof(box), strlen(d->blockers) + 1, strlen(d->path)};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < lens[k]; i++) {
            h ^= parts[k][i];
            h *= 0x100000001b3ull;
        }
    return h ? h : 1;
}

bool sandlet_denial_limit_take(sandlet_denial_limit *l, uint32_t box, const sandlet_denial *d,
                               uint64_t now_ms, unsigned *more)
{
    uint64_t h = key_of(box, d);
    size_t at = SANDLET_DENIAL_KEYS;
    for (size_t i = 0; i < SANDLET_DENIAL_KEYS; i++)
        if (l->keys[i].hash == h) {
            at = i;
            break;
        }
    if (at < SANDLET_DENIAL_KEYS && now_ms - l->keys[at].at < SANDLET_DENIAL_REPEAT_MS) {
        l->keys[at].more++;
        return false;
    }
    if (now_ms / 1000 != l->second) {
        l->second = now_ms / 1000;
        l->lines = 0;
    }
    if (l->lines >= SANDLET_DENIAL_LINES_PER_SEC)
        return false; /* counted by the caller; said when it comes again */
    l->lines++;
    if (at == SANDLET_DENIAL_KEYS) {
        for (size_t i = 0; i < SANDLET_DENIAL_KEYS && at == SANDLET_DENIAL_KEYS; i++)
            if (l->keys[i].hash == 0)
                at = i;
        if (at == SANDLET_DENIAL_KEYS) {
            at = l->next;
            l->next = (l->next + 1) % SANDLET_DENIAL_KEYS;
        }
        l->keys[at].hash = h;
        l->keys[at].more = 0;
    }
    *more = l->keys[at].more;
    l->keys[at].more = 0;
    l->keys[at].at = now_ms;
    return true;
}

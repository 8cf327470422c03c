/*
 * workerlog.c - what workers write to standard output and error: read by
 * the acceptor from one pipe per worker (the supervisor makes it at spawn
 * and hands over the read end), cut into lines, escaped, prefixed with
 * the worker's pid, sandbox and servlet, bounded in length and rate, and
 * written to the error log, which workers never hold themselves.
 *
 * A worker is hostile: it may write nothing, endlessly, binary, forged
 * log lines or terminal escapes.  This file must never block the loop,
 * never hold more memory for a worker than its one line, never spend
 * more than a bounded amount of work per worker and second, and never
 * pass a worker's bytes as a format.  A worker that writes nothing costs
 * one idle pipe handle.
 */
#include "config.h"

#include "loop/acceptor.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tokens are counted in thousandths, refilled by the millisecond. */
#define TOKEN       1000u
#define LINES_BURST (2u * SANDLET_WORKERLOG_RATE)
#define BYTES_PER_S (64u * 1024u)
#define BYTES_BURST (2u * BYTES_PER_S)
/* Read from one worker in a second at most; past it the pipe is left
 * alone until the second is over, and the worker waits on its own full
 * pipe: a worker writing endlessly costs the loop at most this much
 * reading and scanning a second. */
#define INTAKE_PER_S ((size_t)16 * 1024 * 1024)
#define READ_CHUNK   ((size_t)16 * 1024)
/* Escaped, a line fits one write of the error log with its prefix. */
#define ESCAPED_MAX 3600u
#define CUT_MARK    " [cut: longer than 1024 bytes]"

struct sandlet_wlog {
    uv_pipe_t pipe;
    uv_timer_t timer; /* runs while lines are dropped or reading waits */
    int open_handles;
    sandlet_server *srv;
    struct sandlet_wlog *prev, *next;
    /* Which worker: the slot is looked at (for the servlet it serves)
     * only while it is still this incarnation. */
    sandlet_worker *w;
    uint32_t gen;
    pid_t pid;
    /* A copy: a reload may free the configuration, and the pool, while
     * a worker's last lines are still being read. */
    char sandbox[64];
    bool closing;
    bool paused;     /* intake over its budget: reading stopped */
    bool in_line;    /* a line has begun and holds its token */
    bool discarding; /* the rest of this line is thrown away */
    uint64_t line_tokens, byte_tokens, refilled_at;
    uint64_t window_at;  /* start of the current intake second */
    size_t window_bytes; /* read in it */
    uint64_t dropped;    /* lines not logged since the last report */
    size_t len;
    uint8_t line[SANDLET_WORKERLOG_LINE];
};

/* Escape and UTF-8 ------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at in (n bytes left), 0 if none.
 * C1 controls (U+0080..U+009F) count as invalid: terminals obey some. */
static size_t utf8_len(const uint8_t *in, size_t n)
{
    uint8_t c = in[0];
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        if (c == 0xc2)
            lo = 0xa0;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* no overlong forms */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || in[1] < lo || in[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (in[i] < 0x80 || in[i] > 0xbf)
            return 0;
    return len;
}

size_t sandlet_workerlog_escape(char *out, size_t cap, const uint8_t *in, size_t n, size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i = 0;
    while (i < n) {
        uint8_t c = in[i];
        if (c == '\t' || (c >= 0x20 && c < 0x7f && c != '\\')) {
            if (o + 1 > cap)
                break;
            out[o++] = (char)c;
            i++;
            continue;
        }
        size_t k = c >= 0x80 ? utf8_len(in + i, n - i) : 0;
        if (k) {
            if (o + k > cap)
                break;
            memcpy(out + o, in + i, k);
            o += k;
            i += k;
            continue;
        }
        if (o + 4 > cap)
            break;
        out[o++] = '\\';
        out[o++] = 'x';
        out[o++] = hex[c >> 4];
        out[o++] = hex[c & 15];
        i++;
    }
    if (used)
        *used = i;
    return o;
}

/* Reading ------------------------------------------------------------------ */

static void wlog_closed(uv_handle_t *h)
{
    struct sandlet_wlog *r = h->data;
    if (--r->open_handles > 0)
        return;
    if (r->prev)
        r->prev->next = r->next;
    else
        r->srv->wlogs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    free(r);
}

static void refill(struct sandlet_wlog *r)
{
    uint64_t now = uv_now(r->srv->loop);
    uint64_t ms = now - r->refilled_at;
    r->refilled_at = now;
    if (ms > 10000)
        ms = 10000; /* a full bucket either way; keeps the products small */
    r->line_tokens += ms * SANDLET_WORKERLOG_RATE;
    if (r->line_tokens > (uint64_t)LINES_BURST * TOKEN)
        r->line_tokens = (uint64_t)LINES_BURST * TOKEN;
    r->byte_tokens += ms * BYTES_PER_S;
    if (r->byte_tokens > (uint64_t)BYTES_BURST * TOKEN)
        r->byte_tokens = (uint64_t)BYTES_BURST * TOKEN;
}

static void report_dropped(struct sandlet_wlog *r)
{
    if (!r->dropped)
        return;
    sandlet_warn("sandbox '%s': dropped %llu lines from worker %d (rate limit); a worker's "
                 "output is logged up to %u lines and %u KiB a second",
                 r->sandbox, (unsigned long long)r->dropped, (int)r->pid, SANDLET_WORKERLOG_RATE,
                 BYTES_PER_S / 1024);
    r->dropped = 0;
}

static void on_tick(uv_timer_t *t);

static void arm(struct sandlet_wlog *r)
{
    if (!r->closing && !uv_is_active((uv_handle_t *)&r->timer))
        uv_timer_start(&r->timer, on_tick, 1000, 1000);
}

static void drop(struct sandlet_wlog *r, uint64_t lines)
{
    r->dropped += lines;
    arm(r);
}

/* The level a line names with a leading "LEVEL: ", as sl_log and a
 * worker's own log lines write it; *skip is that prefix's length.  Any
 * other line is a warning, as it always was: a worker chooses its lines'
 * levels, never their prefix, sandbox or servlet. */
static enum sandlet_log_level line_level(const char *s, size_t n, size_t *skip)
{
    static const struct {
        const char *word;
        enum sandlet_log_level level;
    } words[] = {
        {"error: ", SANDLET_LOG_ERROR},
        {"warning: ", SANDLET_LOG_WARN},
        {"info: ", SANDLET_LOG_INFO},
        {"debug: ", SANDLET_LOG_DEBUG},
    };
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        size_t len = strlen(words[i].word);
        if (n >= len && memcmp(s, words[i].word, len) == 0) {
            *skip = len;
            return words[i].level;
        }
    }
    *skip = 0;
    return SANDLET_LOG_WARN;
}

/* Logs the line held (its token already taken), if the byte budget
 * allows. */
static void emit(struct sandlet_wlog *r, bool cut)
{
    size_t raw = r->len;
    if (!cut && raw && r->line[raw - 1] == '\r')
        raw--; /* CRLF line ends */
    if (raw == 0 && !cut)
        return; /* an empty line: costs its token, logs nothing */
    char out[ESCAPED_MAX];
    size_t used;
    size_t olen = sandlet_workerlog_escape(out, sizeof(out), r->line, raw, &used);
    cut = cut || used < raw;
    uint64_t cost = (uint64_t)olen * TOKEN;
    if (r->byte_tokens < cost) {
        drop(r, 1);
        return;
    }
    r->byte_tokens -= cost;
    /* The servlet it serves, or served last: the channel and this pipe
     * are read in whichever order the loop sees them, so what a servlet
     * wrote may arrive just after its response. */
    const sandlet_worker *w = r->w;
    bool serving = w && w->gen == r->gen && w->pid == r->pid && (w->reqline[0] || w->served);
    size_t skip;
    enum sandlet_log_level level = line_level(out, olen, &skip);
    sandlet_log(level, "worker %d sandbox '%s'%s%s: %.*s%s", (int)r->pid, r->sandbox,
                serving ? " " : "", serving ? w->servlet : "", (int)(olen - skip), out + skip,
                cut ? CUT_MARK : "");
}

static size_t count_lines(const uint8_t *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += p[i] == '\n';
    return k;
}

/* Splits what was read into lines.  Work is linear in n whatever the
 * worker writes: one pass, no line kept beyond its first
 * SANDLET_WORKERLOG_LINE bytes. */
static void feed(struct sandlet_wlog *r, const uint8_t *p, size_t n)
{
    refill(r);
    while (n) {
        if (r->discarding) {
            const uint8_t *nl = memchr(p, '\n', n);
            if (!nl)
                return;
            n -= (size_t)(nl + 1 - p);
            p = nl + 1;
            r->discarding = false;
            continue;
        }
        if (!r->in_line) {
            if (r->line_tokens < TOKEN) {
                /* Tokens do not come back within one read: every line
                 * that begins in it is dropped, counted in one pass. */
                uint64_t lines = count_lines(p, n);
                if (p[n - 1] != '\n') {
                    lines++;
                    r->discarding = true;
                }
                drop(r, lines);
                return;
            }
            r->line_tokens -= TOKEN;
            r->in_line = true;
        }
        const uint8_t *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        size_t room = sizeof(r->line) - r->len;
        if (take > room) {
            memcpy(r->line + r->len, p, room);
            r->len += room;
            p += room;
            n -= room;
            emit(r, true);
            r->len = 0;
            r->in_line = false;
            r->discarding = true;
            continue;
        }
        memcpy(r->line + r->len, p, take);
        r->len += take;
        p += take;
        n -= take;
        if (nl) {
            p++;
            n--;
            emit(r, false);
            r->len = 0;
            r->in_line = false;
        }
    }
}

static void wlog_close(struct sandlet_wlog *r)
{
    if (r->closing)
        return;
    r->closing = true;
    if (r->in_line && r->len) {
        refill(r);
        emit(r, false); /* the last line, without its line feed */
    }
    report_dropped(r);
    /* Closed by the loop's end already: sandlet_workerlog_free frees it. */
    if (uv_is_closing((uv_handle_t *)&r->timer) || uv_is_closing((uv_handle_t *)&r->pipe))
        return;
    uv_close((uv_handle_t *)&r->timer, wlog_closed);
    uv_close((uv_handle_t *)&r->pipe, wlog_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    /* One buffer for every pipe: each read is split into lines before
     * the loop reads anything else. */
    static char chunk[READ_CHUNK];
    *buf = uv_buf_init(chunk, sizeof(chunk));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct sandlet_wlog *r = s->data;
    if (nread < 0) {
        if (nread != UV_EOF)
            sandlet_log_errno(SANDLET_LOG_WARN, (int)nread, "reading the output of worker %d",
                              (int)r->pid);
        wlog_close(r); /* the worker and whatever it left are gone */
        return;
    }
    if (nread == 0)
        return;
    feed(r, (const uint8_t *)buf->base, (size_t)nread);
    uint64_t now = uv_now(r->srv->loop);
    if (now - r->window_at >= 1000) {
        r->window_at = now;
        r->window_bytes = 0;
    }
    r->window_bytes += (size_t)nread;
    if (r->window_bytes >= INTAKE_PER_S && !r->paused) {
        uv_read_stop(s);
        r->paused = true;
        arm(r);
    }
}

static void on_tick(uv_timer_t *t)
{
    struct sandlet_wlog *r = t->data;
    bool busy = r->dropped || r->paused;
    report_dropped(r);
    if (r->paused) {
        r->paused = false;
        r->window_at = uv_now(r->srv->loop);
        r->window_bytes = 0;
        int rc = uv_read_start((uv_stream_t *)&r->pipe, on_alloc, on_read);
        if (rc < 0) {
            sandlet_log_errno(SANDLET_LOG_WARN, rc, "reading the output of worker %d", (int)r->pid);
            wlog_close(r);
            return;
        }
    }
    if (!busy)
        uv_timer_stop(t);
}

int sandlet_workerlog_attach(sandlet_server *srv, sandlet_worker *w, int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
        close(fd);
        return -EINVAL; /* only ever a pipe the supervisor made */
    }
    struct sandlet_wlog *r = calloc(1, sizeof(*r));
    if (!r) {
        close(fd);
        return -ENOMEM;
    }
    r->srv = srv;
    r->w = w;
    r->gen = w->gen;
    r->pid = w->pid;
    snprintf(r->sandbox, sizeof(r->sandbox), "%s", w->pool->conf->name);
    r->line_tokens = (uint64_t)LINES_BURST * TOKEN;
    r->byte_tokens = (uint64_t)BYTES_BURST * TOKEN;
    r->refilled_at = r->window_at = uv_now(srv->loop);
    int rc = uv_pipe_init(srv->loop, &r->pipe, 0);
    if (rc < 0) {
        close(fd);
        free(r);
        return rc;
    }
    r->pipe.data = r;
    r->timer.data = r;
    uv_timer_init(srv->loop, &r->timer);
    r->open_handles = 2;
    r->next = srv->wlogs;
    if (srv->wlogs)
        srv->wlogs->prev = r;
    srv->wlogs = r;
    rc = uv_pipe_open(&r->pipe, fd); /* non-blocking from here on */
    if (rc < 0)
        close(fd); /* not taken */
    else
        rc = uv_read_start((uv_stream_t *)&r->pipe, on_alloc, on_read);
    if (rc < 0) {
        r->closing = true;
        uv_close((uv_handle_t *)&r->timer, wlog_closed);
        uv_close((uv_handle_t *)&r->pipe, wlog_closed);
        return rc;
    }
    return 0;
}

void sandlet_workerlog_forget_pool(sandlet_server *srv, const sandlet_pool *p)
{
    for (struct sandlet_wlog *r = srv->wlogs; r; r = r->next)
        if (r->w && r->w->pool == p)
            r->w = NULL;
}

void sandlet_workerlog_free(sandlet_server *srv)
{
    /* The loop has ended: every handle is closed, whatever closed it. */
    while (srv->wlogs) {
        struct sandlet_wlog *r = srv->wlogs;
        srv->wlogs = r->next;
        free(r);
    }
}

/*
 * log.c - sl_log: a servlet's own log lines.  Under sandletd they take
 * the one path every byte a worker writes takes: standard error, a pipe
 * the acceptor reads (loop/workerlog.c), which escapes them, adds the
 * worker's pid, sandbox and servlet, rate-limits them, and logs each at
 * the level its "LEVEL: " prefix names.  Under libsandlet-test they go to
 * the harness's hook instead (sl_test_log), and to standard error.
 *
 * This file must never open anything, never hold the error log, and never
 * let a message decide its own prefix: a line feed inside a message (a
 * client's value, libpq's multi-line errors) starts a new line carrying
 * the same level and request, so that no logged value can pass for a line
 * of its own.
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The message after formatting; the acceptor cuts a worker's line at
 * 1024 bytes anyway (SANDLET_WORKERLOG_LINE). */
#define MSG_MAX  1000u
#define OUT_MAX  8192u
#define CUT_MARK " [cut]"

static sandlet_lib_log_fn hook;
static void *hook_ctx;

void sandlet_lib_log_to(sandlet_lib_log_fn fn, void *ctx)
{
    hook = fn;
    hook_ctx = ctx;
}

static void put(const char *p, size_t n)
{
    if (hook) {
        hook(hook_ctx, p, n);
        return;
    }
    /* One write for the whole message when the pipe takes it: a worker is
     * single-threaded, so nothing else of ours lands in between. */
    while (n) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere to log that logging failed */
        p += w;
        n -= (size_t)w;
    }
}

void sl_vlog(const sl_request *rq, sl_log_level level, const char *fmt, va_list ap)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (!fmt)
        return;
    if ((unsigned)level > SL_LOG_DEBUG)
        level = SL_LOG_ERROR; /* a bad level must not hide the line */
    int saved_errno = errno;  /* "%m" and the caller's errno survive */
    char msg[MSG_MAX + sizeof(CUT_MARK)];
    int m = vsnprintf(msg, MSG_MAX + 1, fmt, ap);
    if (m < 0) {
        errno = saved_errno;
        return;
    }
    size_t mlen = (size_t)m;
    if (mlen > MSG_MAX) {
        memcpy(msg + MSG_MAX, CUT_MARK, sizeof(CUT_MARK));
        mlen = MSG_MAX + sizeof(CUT_MARK) - 1;
    }
    char prefix[256];
    int pl = rq && rq->method && rq->path
                 ? snprintf(prefix, sizeof(prefix), "%s: %s %.200s: ", names[level], rq->method,
                            rq->path)
                 : snprintf(prefix, sizeof(prefix), "%s: ", names[level]);
    if (pl < 0 || (size_t)pl >= sizeof(prefix))
        pl = (int)strlen(prefix);
    char out[OUT_MAX];
    size_t o = 0;
    const char *p = msg, *end = msg + mlen;
    do {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t take = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (o + (size_t)pl + take + 1 > sizeof(out))
            break; /* a message of many short lines: the rest is dropped */
        memcpy(out + o, prefix, (size_t)pl);
        o += (size_t)pl;
        memcpy(out + o, p, take);
        o += take;
        out[o++] = '\n';
        p += take + (nl ? 1 : 0);
    } while (p < end);
    put(out, o);
    errno = saved_errno;
}

void sl_log(const sl_request *rq, sl_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_vlog(rq, level, fmt, ap);
    va_end(ap);
}

/*
 * workerlog.c - what workers write to standard output and error reaches
 * the error log through the acceptor, one line at a time, prefixed with
 * the sandbox and the worker's pid.
 *
 * A worker's output is untrusted: it is read without ever blocking the
 * loop, lines are cut at a bound, control bytes are escaped, and the
 * worker never holds a log descriptor of its own.  (A minimal version:
 * the log helper's fuller one replaces it.)
 */
#include "config.h"

#include "loop/acceptor.h"
#include "loop/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A longer line is logged in pieces of this size. */
#define LINE_MAX_BYTES 1024

typedef struct wlog {
    uv_pipe_t pipe;
    char sandbox[64];
    int pid;
    size_t len;
    char line[LINE_MAX_BYTES];
    char chunk[4096];
} wlog;

static void emit(wlog *l)
{
    /* Each byte as itself when printable ASCII, else as \xHH: a worker
     * cannot forge a line break or a terminal sequence in the log. */
    char out[LINE_MAX_BYTES * 4 + 1];
    size_t o = 0;
    for (size_t i = 0; i < l->len; i++) {
        unsigned char ch = (unsigned char)l->line[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
            out[o++] = (char)ch;
        } else {
            static const char hex[] = "0123456789abcdef";
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    out[o] = '\0';
    sandlet_log(SANDLET_LOG_WARN, "worker %d of sandbox '%s' wrote: %s", l->pid, l->sandbox, out);
    l->len = 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    wlog *l = h->data;
    *buf = uv_buf_init(l->chunk, sizeof(l->chunk));
}

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    wlog *l = s->data;
    if (nread < 0) {
        /* The worker and every copy of its output's write end are gone. */
        if (l->len)
            emit(l);
        uv_close((uv_handle_t *)s, on_closed);
        return;
    }
    for (ssize_t i = 0; i < nread; i++) {
        char ch = buf->base[i];
        if (ch == '\n') {
            emit(l);
            continue;
        }
        l->line[l->len++] = ch;
        if (l->len == sizeof(l->line))
            emit(l);
    }
}

int sandlet_workerlog_attach(sandlet_server *srv, sandlet_worker *w, int fd)
{
    wlog *l = calloc(1, sizeof(*l));
    if (!l) {
        close(fd);
        return -ENOMEM;
    }
    size_t n = strlen(w->pool->conf->name);
    if (n >= sizeof(l->sandbox))
        n = sizeof(l->sandbox) - 1;
    memcpy(l->sandbox, w->pool->conf->name, n);
    l->pid = (int)w->pid;
    l->pipe.data = l;
    int rc = uv_pipe_init(srv->loop, &l->pipe, 0);
    if (rc < 0) {
        free(l);
        close(fd);
        return rc;
    }
    rc = uv_pipe_open(&l->pipe, fd);
    if (rc < 0)
        close(fd);
    else
        rc = uv_read_start((uv_stream_t *)&l->pipe, on_alloc, on_read);
    if (rc < 0)
        uv_close((uv_handle_t *)&l->pipe, on_closed);
    return rc;
}

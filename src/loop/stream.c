/*
 * stream.c - request bodies larger than the window (SANDLET_BODY_WINDOW)
 * that stream to the worker behind their REQUEST: REQBODY frames queued as
 * the client's bytes are parsed, END on the last, END|ABORT for a body
 * that will not be complete, and the backpressure that stops reading the
 * client while the window is full.
 *
 * A streamed multipart/form-data body is also copied into the worker's
 * spool file (the tee), each byte before the frame that carries it is
 * queued: the worker's parser leaves large file parts there as ranges
 * (lib/spool.c) instead of writing files of its own.  The copies a
 * sandbox's workers hold at once are bounded by its spool-size, reserved
 * whole when the request is handed over; a body that does not fit is not
 * copied, and its file parts stay in the worker's memory.
 *
 * It must never drop body bytes from the connection before the worker
 * claimed the request (sandlet_request_started): until then the request
 * may be taken back and handed to another worker, which needs all of it.
 * And it must never leave one request's bytes in a spool file another
 * request of that worker could take for its own: the file is emptied when
 * the request that filled it ends, and before any other is copied.
 */
#include "config.h"

#include "common/log.h"
#include "loop/pool_private.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <strings.h>
#include <unistd.h>

/* Empties w's spool file.  False when it cannot be emptied: the worker
 * could read what it holds as the next body's, so it goes (its requests
 * fail or move when its exit is reported, as for any lost worker). */
static bool spool_empty(sandlet_worker *w)
{
    if (w->spool_len == 0 || w->spool_fd < 0)
        return true;
    if (ftruncate(w->spool_fd, 0) == 0) {
        w->spool_len = 0;
        return true;
    }
    sandlet_log_errno(SANDLET_LOG_ERROR, -errno,
                      "cannot empty the spool file of worker %d of sandbox '%s'; restarting it",
                      (int)w->pid, sandbox_name(w));
    /* Through the supervisor, as body_abort does: this runs inside the
     * hand-over and the end of a request, which must not see the worker
     * vanish under them.  Recycling, it is given nothing more. */
    close(w->spool_fd);
    w->spool_fd = -1;
    w->recycling = true;
    sandlet_server_control(w->pool->srv, SANDLET_CTL_KILL, w->pool->id, w->slot, w->gen, SIGKILL);
    return false;
}

/* Whether the request is a multipart form: the only body whose parts a
 * worker leaves in the spool. */
static bool is_multipart(const sandlet_conn *c, const sandlet_request_view *v)
{
    static const char mp[] = "multipart/form-data";
    for (unsigned i = 0; i < v->nheaders; i++) {
        const char *name, *value;
        size_t name_len, value_len;
        sandlet_conn_header_at(c, i, &name, &name_len, &value, &value_len);
        if (name_len != 12 || strncasecmp(name, "Content-Type", 12) != 0)
            continue;
        while (value_len && (*value == ' ' || *value == '\t')) {
            value++;
            value_len--;
        }
        return value_len >= sizeof(mp) - 1 && strncasecmp(value, mp, sizeof(mp) - 1) == 0;
    }
    return false;
}

/* Copies len bytes of f's body, the next ones, into w's spool file.  A
 * failed write ends the copy: the worker finds the bytes missing and
 * fails that form (-EIO), never reads another's. */
static void tee_write(sandlet_worker *w, sandlet_inflight *f, const uint8_t *data, size_t len)
{
    if (!f->teed || len == 0)
        return;
    if (len > f->tee_reserved - f->tee_at) {
        f->teed = false; /* more than it declared: never (the parser stops it) */
        return;
    }
    while (len > 0) {
        ssize_t n = pwrite(w->spool_fd, data, len, (off_t)f->tee_at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, n < 0 ? -errno : -EIO,
                              "cannot copy the body of %s to the upload spool of sandbox '%s' "
                              "(spool-dir %s): its form fails; free space there or set "
                              "spool-size below it",
                              f->reqline, sandbox_name(w), w->pool->srv->conf->spool_dir);
            f->teed = false;
            return;
        }
        data += n;
        len -= (size_t)n;
        f->tee_at += (uint64_t)n;
    }
    if (f->tee_at > w->spool_len)
        w->spool_len = f->tee_at;
}

void sandlet_tee_begin(sandlet_worker *w, sandlet_inflight *f, const sandlet_conn *c,
                       const sandlet_request_view *v, size_t taken)
{
    f->teed = false;
    f->tee_at = f->tee_reserved = 0;
    if (!v->body_open || w->spool_fd < 0 || !spool_empty(w) || !is_multipart(c, v))
        return;
    sandlet_pool *p = w->pool;
    uint64_t need = v->body_max ? v->body_max : 1;
    unsigned long long limit = p->conf->spool_size;
    if (limit && (need > limit || p->spool_used > limit - need)) {
        p->spool_full++;
        uint64_t now = uv_now(p->srv->loop);
        if (p->spool_full_at == 0 || now - p->spool_full_at >= 10000) {
            p->spool_full_at = now;
            sandlet_warn("sandbox '%s': its upload spool is full (spool-size %llu bytes, %" PRIu64
                         " in use; %s needs %" PRIu64 "): the file parts of that form stay in "
                         "worker memory; raise spool-size in the sandbox's block",
                         sandbox_name(w), limit, p->spool_used, f->reqline, need);
        }
        return;
    }
    p->spool_used = need > UINT64_MAX - p->spool_used ? UINT64_MAX : p->spool_used + need;
    f->tee_reserved = need;
    f->teed = true;
    tee_write(w, f, v->body, taken);
}

void sandlet_tee_end(sandlet_worker *w, sandlet_inflight *f)
{
    if (f->tee_reserved) {
        sandlet_pool *p = w->pool;
        p->spool_used -= f->tee_reserved < p->spool_used ? f->tee_reserved : p->spool_used;
        f->tee_reserved = 0;
        /* Its copy goes now, not at the next copy: the disk is free for
         * the sandbox's next upload, and no later request finds it. */
        spool_empty(w);
    }
    f->teed = false;
    f->tee_at = 0;
}

/* Whether the worker has claimed the request it holds first (claim.h).
 * Body bytes it was sent may be dropped from the connection only then:
 * until a worker claims a request, the acceptor may take it back and hand
 * it to another worker, which needs the whole of it again.  Once seen,
 * remembered: a worker that scribbles on its word afterwards changes
 * nothing. */
bool sandlet_request_started(sandlet_worker *w)
{
    if (!w->claimed && w->rcount)
        w->claimed = sandlet_claim_taken(w->claim, held(w, 0)->id);
    return w->claimed;
}

/* Queues the body of w's first request that arrived since the last call
 * as REQBODY frames (END once the client sent all of it), and drops it
 * from the connection, including what the REQUEST carried.  Only once the
 * worker started the request (request_started); until then the body
 * stays at the connection and the window stops the client. */
void sandlet_body_pump(sandlet_worker *w)
{
    if (w->rcount == 0 || !w->pipe_open)
        return;
    sandlet_inflight *f = held(w, 0);
    if (!f->body_open || !f->conn || f->discard || !sandlet_request_started(w))
        return;
    size_t len;
    bool done;
    if (f->body_sent) {
        sandlet_conn_body_consume(f->conn, f->body_sent);
        f->body_sent = 0;
    }
    const uint8_t *data = sandlet_conn_body(f->conn, &len, &done);
    tee_write(w, f, data, len);
    if (len == 0 && !done) {
        /* What the REQUEST carried is dropped now that the worker has it:
         * the window has room, and the client, stopped while it was
         * full, may send again (no write follows here to say so). */
        sandlet_conn_body_drained(f->conn);
        return;
    }
    int rc = sandlet_wire_reqbody_encode(&w->out, f->id, data, len, done ? SANDLET_FRAME_END : 0);
    if (rc < 0) {
        /* The worker waits for bytes that cannot be queued: it goes, and
         * its client hears 503. */
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot queue the body of %s for sandbox '%s'",
                          f->reqline, sandbox_name(w));
        sandlet_kill_worker(w, 503);
        return;
    }
    sandlet_conn_body_consume(f->conn, len);
    if (done)
        f->body_open = false;
    /* The timeout bounds a servlet that stops taking its body (the
     * window then stops the pump) and its run after the body's end; an
     * upload longer than the timeout that keeps moving is no overrun. */
    if (f->timeout && (len || done))
        sandlet_deadline_start(w, sandlet_on_deadline, f->timeout);
    sandlet_mark_dirty(w);
}

/* The body of f (held by w) will not be complete: the worker gets an
 * empty END|ABORT REQBODY, its servlet's reader an error. */
void sandlet_body_abort(sandlet_worker *w, sandlet_inflight *f)
{
    if (!f->body_open || !w->pipe_open)
        return;
    f->body_open = false;
    int rc = sandlet_wire_reqbody_encode(&w->out, f->id, NULL, 0,
                                         SANDLET_FRAME_END | SANDLET_FRAME_ABORT);
    if (rc < 0) {
        /* It would wait for the body for ever: the supervisor ends it,
         * and its exit report cleans up as for any death. */
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot end the body of %s for worker %d",
                          f->reqline, (int)w->pid);
        w->recycling = true;
        sandlet_server_control(w->pool->srv, SANDLET_CTL_KILL, w->pool->id, w->slot, w->gen,
                               SIGKILL);
        return; /* recycling: pick_worker gives it nothing more meanwhile */
    }
    /* As after a body's last byte: the servlet has its timeout to answer. */
    if (f->timeout)
        sandlet_deadline_start(w, sandlet_on_deadline, f->timeout);
    sandlet_mark_dirty(w);
}

/* Queued bytes went into the worker's lane: its client may be read
 * again (below the low-water mark), and once no body streams, buffers
 * that grew for one are given back. */
void sandlet_body_written(sandlet_worker *w)
{
    sandlet_inflight *f = w->rcount ? held(w, 0) : NULL;
    if (f && f->conn && !f->discard)
        sandlet_conn_body_drained(f->conn);
    if (w->rcount && held(w, 0)->body_open)
        return;
    sandlet_buf_shrink(&w->out, SANDLET_BODY_WINDOW);
}

void sandlet_pool_body_more(sandlet_conn *c)
{
    sandlet_worker *w = sandlet_conn_pool_link(c)->worker;
    if (w && w->rcount && held(w, 0)->conn == c)
        sandlet_body_pump(w);
}

size_t sandlet_pool_body_backlog(const sandlet_conn *c)
{
    const sandlet_worker *w = sandlet_conn_pool_link_const(c)->worker;
    return w ? w->out.len : 0;
}

/*
 * stream.c - request bodies larger than the window (SANDLET_BODY_WINDOW)
 * that stream to the worker behind their REQUEST: REQBODY frames queued as
 * the client's bytes are parsed, END on the last, END|ABORT for a body
 * that will not be complete, and the backpressure that stops reading the
 * client while the window is full.
 *
 * It must never drop body bytes from the connection before the worker
 * claimed the request (sandlet_request_started): until then the request
 * may be taken back and handed to another worker, which needs all of it.
 */
#include "config.h"

#include "common/log.h"
#include "loop/pool_private.h"
#include <signal.h>

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
        uv_timer_start(&w->deadline, sandlet_on_deadline, f->timeout, 0);
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
        uv_timer_start(&w->deadline, sandlet_on_deadline, f->timeout, 0);
    sandlet_mark_dirty(w);
}

/* Queued bytes went to the worker's socketpair: its client may be read
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
    if (!w->writing)
        sandlet_buf_shrink(&w->sending, SANDLET_BODY_WINDOW);
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
    return w ? w->out.len + w->sending.len : 0;
}

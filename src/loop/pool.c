/*
 * pool.c - the acceptor's side of each sandbox: its workers' socketpairs,
 * the queue of requests waiting for a worker, and what happens when a
 * worker dies.
 *
 * Workers are untrusted.  Every frame they send is decoded with bounds
 * checks; a frame that is malformed, unexpected or for another request is
 * the worker's death (the supervisor kills it), never the acceptor's.
 * This file never parses HTTP and never forks: starting and killing
 * processes is the supervisor's job.  The supervisor decides what workers
 * load and starts each one, and hands it over (its channel, with INIT
 * already written); this side can only ask for a worker's death over the
 * control socket, close its channel, or ask for the worker of an extra
 * slot (GROW, within max-workers, which the supervisor enforces) when
 * requests wait (maybe_grow).
 */
#include "config.h"

#include "common/log.h"
#include "loop/acceptor.h"
#include "loop/pages.h"
#include "loop/pool.h"
#include "sandbox/control.h"
#include "sandbox/session_store.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK ((size_t)64 * 1024)

static void worker_lost(sandlet_worker *w);
static void worker_lost_status(sandlet_worker *w, int status);
static void close_pipe(sandlet_worker *w);
static void worker_process(sandlet_worker *w);
static void kill_worker(sandlet_worker *w, int status);

static bool fresh_up(const sandlet_pool *p);
static uint64_t tick(const sandlet_pool *p);
static void queue_expire(uv_timer_t *t);
static void on_claim_timer(uv_timer_t *t);
static void worker_resume(sandlet_worker *w);
static void body_pump(sandlet_worker *w);
static bool request_started(sandlet_worker *w);
static void body_abort(sandlet_worker *w, sandlet_inflight *f);
static void drain(sandlet_pool *p);
static void pool_maybe_gone(sandlet_pool *p);
static void retire(sandlet_worker *w, const char *why);
static void maybe_grow(sandlet_pool *p);
static void idle_watch(sandlet_pool *p);

static const char *sandbox_name(const sandlet_worker *w)
{
    return w->pool->conf->name;
}

/* ---- requests to workers ------------------------------------------------ */

/* Largest piece of one write: uv_buf_t lengths are unsigned int. */
#define WRITE_PIECE  ((size_t)1 << 30)
#define WRITE_PIECES 8

/* A worker may be handed up to its pool's depth ("pipeline") requests
 * before it has answered the first: all that one loop turn has for it
 * leaves in one write, and it serves them one after the other without
 * sleeping in between, which is what makes a hand-off to another process
 * cheaper than a request.  They wait in its channel, not in its memory
 * (worker.c reads one frame at a time), each with a claim word of its own
 * (claim.h): one that waits too long behind a slow request (on_behind) or
 * at a stopped worker (check_claim) is taken back and served elsewhere. */
_Static_assert(2 * SANDLET_MAX_PIPELINE <= SANDLET_CLAIM_WORDS,
               "every request in flight at a worker needs a claim word of its own");

/* How often a worker holding requests behind the one it serves is looked
 * at: when it claimed none of them between two looks, they are taken back
 * (it runs a slow request, or gets no CPU).  Short against the 10 ms a
 * fast request may wait behind a slow one. */
#define SANDLET_BEHIND_MS 2u

static unsigned depth(const sandlet_worker *w)
{
    return w->pool->depth;
}

/* The i-th request the worker holds; 0 is the one it is serving. */
static sandlet_inflight *held(sandlet_worker *w, unsigned i)
{
    return &w->ring[(w->rfirst + i) % depth(w)];
}

static int flush_out(sandlet_worker *w);
static void body_written(sandlet_worker *w);

static void after_write(uv_write_t *req, int status)
{
    sandlet_worker *w = req->data;
    w->writing = false;
    sandlet_buf_reset(&w->sending);
    if (status < 0 && status != UV_ECANCELED && w->pipe_open) {
        sandlet_log_errno(SANDLET_LOG_WARN, status, "writing to worker %d of sandbox '%s'",
                          (int)w->pid, sandbox_name(w));
        worker_lost(w);
        return;
    }
    /* Requests handed over while this write was under way leave now,
     * together, in one write. */
    int rc = flush_out(w);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_WARN, rc, "writing to worker %d of sandbox '%s'", (int)w->pid,
                          sandbox_name(w));
        worker_lost(w);
        return;
    }
    body_written(w);
}

/* Writes what has gathered in w->out unless a write is under way (its
 * completion comes back here).  The socket is tried directly first: when
 * it takes everything, as it nearly always does, no write request is
 * queued, so libuv makes no epoll_ctl call for the pipe.  Two buffers
 * keep the bytes being written still while new frames are appended. */
static int flush_out(sandlet_worker *w)
{
    if (w->writing || w->out.len == 0 || !w->pipe_open)
        return 0;
    sandlet_buf t = w->sending;
    w->sending = w->out;
    w->out = t;
    sandlet_buf_reset(&w->out);
    uv_buf_t bufs[WRITE_PIECES];
    unsigned n = 0;
    size_t done = 0;
    for (;;) {
        n = 0;
        for (size_t off = done; off < w->sending.len; off += WRITE_PIECE) {
            if (n == WRITE_PIECES)
                return -EMSGSIZE;
            size_t len = w->sending.len - off < WRITE_PIECE ? w->sending.len - off : WRITE_PIECE;
            bufs[n++] = uv_buf_init((char *)w->sending.data + off, (unsigned)len);
        }
        if (n == 0) {
            sandlet_buf_reset(&w->sending);
            return 0;
        }
        int k = uv_try_write((uv_stream_t *)&w->pipe, bufs, n);
        if (k == UV_EAGAIN)
            break;
        if (k < 0)
            return k;
        done += (size_t)k;
    }
    w->wreq.data = w;
    int rc = uv_write(&w->wreq, (uv_stream_t *)&w->pipe, bufs, n, after_write);
    if (rc == 0)
        w->writing = true;
    return rc;
}

/* The worker's pipe cannot be written: it is as good as dead. */
static void flush_or_lose(sandlet_worker *w)
{
    int rc = flush_out(w);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "writing to worker %d of sandbox '%s'",
                          (int)w->pid, sandbox_name(w));
        kill_worker(w, 0);
    }
}

static void flush_pool(sandlet_pool *p)
{
    /* A lost worker's requests go to the others, which may mark one seen
     * earlier in the pass dirty again: pass until none is.  Each pass
     * flushes or loses a worker, so this ends. */
    while (p->ndirty) {
        for (unsigned j = 0; p->ndirty && j < p->nworkers; j++) {
            sandlet_worker *w = &p->workers[j];
            if (!w->dirty)
                continue;
            w->dirty = false;
            p->ndirty--;
            flush_or_lose(w);
            body_written(w);
        }
    }
    uv_check_stop(&p->flush);
    uv_prepare_stop(&p->flush_early);
}

static void flush_dirty(uv_check_t *h)
{
    flush_pool(h->data);
}

static void flush_dirty_early(uv_prepare_t *h)
{
    flush_pool(h->data);
}

/* Frames wait in w->out for the end of this loop turn. */
static void mark_dirty(sandlet_worker *w)
{
    if (w->dirty)
        return;
    w->dirty = true;
    if (w->pool->ndirty++ == 0) {
        uv_check_start(&w->pool->flush, flush_dirty);
        uv_prepare_start(&w->pool->flush_early, flush_dirty_early);
    }
}

/* True when the cookie called name (len bytes) is the session cookie of a
 * sandbox other than p's. */
static bool foreign_session_cookie(const sandlet_pool *p, const char *name, size_t len,
                                   size_t *which)
{
    static const char prefix[] = SL_SESSION_COOKIE "_";
    const sandlet_conf *conf = p->srv->conf;
    if (len < sizeof(prefix) || strncasecmp(name, prefix, sizeof(prefix) - 1) != 0)
        return false;
    /* By name, not index: across a reload the sandbox's own cookie keeps
     * its name whatever the pool serving it. */
    const char *own = p->conf->session_cookie;
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        const char *other = conf->sandboxes[i].session_cookie;
        if (strcasecmp(other, own) != 0 && strlen(other) == len &&
            strncasecmp(other, name, len) == 0) {
            *which = i;
            return true;
        }
    }
    return false;
}

/* The pair of a Cookie header value that starts at pos: [*start, *end) is
 * the pair as sent, *name its name with blanks trimmed (as the worker's
 * parser splits it: ';' between pairs).  Returns where the next one
 * starts, or len. */
static size_t cookie_pair(const char *v, size_t len, size_t pos, size_t *end, const char **name,
                          size_t *name_len)
{
    const char *semi = memchr(v + pos, ';', len - pos);
    *end = semi ? (size_t)(semi - v) : len;
    const char *a = v + pos, *z = v + *end;
    while (a < z && (*a == ' ' || *a == '\t'))
        a++;
    const char *eq = memchr(a, '=', (size_t)(z - a));
    const char *ne = eq ? eq : a;
    while (ne > a && (ne[-1] == ' ' || ne[-1] == '\t'))
        ne--;
    *name = a;
    *name_len = (size_t)(ne - a);
    return semi ? *end + 1 : len;
}

/* A Cookie header's value without the session cookies of other
 * sandboxes: a browser sends every cookie whose Path matches, so when
 * sandboxes' routes nest, a servlet would otherwise be handed the session
 * tokens of its neighbours' clients.  The rest is kept byte for byte.
 * *vp becomes the value to send: unchanged (no copy) when nothing is
 * dropped, else a scratch buffer valid until the next call.  Returns 0 or
 * the scratch buffer's error. */
static int filter_cookie_header(const sandlet_pool *p, const char **vp, size_t *len)
{
    size_t which, end, nlen;
    const char *v = *vp, *name;
    if (p->srv->conf->nsandboxes < 2 || !memchr(v, '_', *len))
        return 0;
    size_t pos = 0;
    while (pos < *len) {
        size_t next = cookie_pair(v, *len, pos, &end, &name, &nlen);
        if (foreign_session_cookie(p, name, nlen, &which))
            break;
        pos = next;
    }
    if (pos >= *len)
        return 0; /* nothing to drop: the common case costs no copy */
    /* One loop thread: one scratch buffer, never larger than a header. */
    static sandlet_buf out = {.limit = SANDLET_MAX_HEADER_SIZE_LIMIT};
    sandlet_buf_reset(&out);
    bool first = true;
    for (pos = 0; pos < *len;) {
        size_t next = cookie_pair(v, *len, pos, &end, &name, &nlen);
        if (!foreign_session_cookie(p, name, nlen, &which)) {
            if (!first)
                sandlet_buf_put(&out, ";", 1);
            sandlet_buf_put(&out, v + pos, end - pos);
            first = false;
        }
        pos = next;
    }
    if (out.error)
        return out.error;
    *len = out.len;
    *vp = out.len ? (const char *)out.data : "";
    return 0;
}

/* Appends c's request (seen through v) to w->out; on failure w->out is
 * left as it was. */
static int encode_request(sandlet_worker *w, const sandlet_conn *c, const sandlet_request_view *v,
                          uint32_t id, size_t *taken)
{
    sandlet_buf *b = &w->out;
    uint32_t slot = 0;
    if (v->page)
        sandlet_page_servlet(v->page, &slot, NULL);
    sandlet_wire_request rq = {
        .servlet = v->page ? (uint16_t)(w->pool->nservlets + slot) : v->servlet_local,
        .http_major = (uint8_t)v->http_major,
        .http_minor = (uint8_t)v->http_minor,
        .nheaders = (uint16_t)v->nheaders,
        .method = v->method,
        .method_len = v->method_len,
        .target = v->target,
        .target_len = v->target_len,
        .peer = v->peer,
        .peer_len = v->peer_len,
    };
    size_t start = sandlet_wire_request_begin(b, id, &rq);
    for (unsigned i = 0; i < v->nheaders; i++) {
        const char *name, *value;
        size_t name_len, value_len;
        sandlet_conn_header_at(c, i, &name, &name_len, &value, &value_len);
        int rc = 0;
        if (name_len == 6 && strncasecmp(name, "Cookie", 6) == 0)
            rc = filter_cookie_header(w->pool, &value, &value_len);
        if (rc < 0) {
            b->error = rc;
            break;
        }
        sandlet_wire_header_put(b, name, name_len, value, value_len);
    }
    /* A streamed body: the REQUEST carries what fits, the rest follows
     * (body_pump). */
    if (v->body_open)
        return sandlet_wire_request_finish_open(b, start, v->body, v->body_len, taken);
    *taken = v->body_len;
    return sandlet_wire_request_finish(b, start, id, v->body, v->body_len);
}

static void copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void time_out(sandlet_worker *w)
{
    if (w->state != W_BUSY || w->rcount == 0)
        return;
    sandlet_error("worker %d of sandbox '%s' ran past its timeout (%" PRIu64
                  " ms) serving %s: %s; killing it",
                  (int)w->pid, sandbox_name(w), uv_now(w->pool->srv->loop) - w->started, w->servlet,
                  w->reqline);
    w->timed_out = true;
    w->pool->timeouts++;
    kill_worker(w, 504);
}

static void on_deadline(uv_timer_t *t)
{
    sandlet_worker *w = t->data;
    sandlet_inflight *f = w->rcount ? held(w, 0) : NULL;
    /* The servlet has every byte the client sent and waits for more: the
     * wait is the client's, which body-timeout bounds (then END|ABORT). */
    if (f && f->body_open && f->conn && !f->discard && w->out.len + w->sending.len == 0) {
        size_t len;
        bool done;
        sandlet_conn_body(f->conn, &len, &done);
        if (len == 0 && f->timeout) {
            uv_timer_start(&w->deadline, on_deadline, f->timeout, 0);
            return;
        }
    }
    time_out(w);
}

/* The worker's first held request was taken back: it owes a SKIP. */
static bool stalled(sandlet_worker *w)
{
    return w->rcount && held(w, 0)->revoked;
}

static void on_skip_overdue(uv_timer_t *t)
{
    sandlet_worker *w = t->data;
    if (!stalled(w) || !w->pipe_open)
        return;
    sandlet_error("worker %d of sandbox '%s' has not run since a request was taken back from it "
                  "(stopped?) and is past that request's timeout; killing it",
                  (int)w->pid, sandbox_name(w));
    /* Not counted as a timeout: its request was answered by another
     * worker; the restart is counted as any. */
    kill_worker(w, 0);
}

/* Puts c back at the front of p's queue: it was handed to a worker that
 * never started it, so it has waited longest. */
static void queue_push_front(sandlet_pool *p, sandlet_conn *c)
{
    sandlet_pool_link *l = sandlet_conn_pool_link(c);
    l->worker = NULL;
    l->queued_at = uv_now(p->srv->loop);
    l->qnext = p->qhead;
    p->qhead = c;
    if (!p->qtail)
        p->qtail = c;
    p->queued++;
    if (!uv_is_active((uv_handle_t *)&p->qtimer))
        uv_timer_start(&p->qtimer, queue_expire, tick(p), tick(p));
}

/* Takes back every request w holds from index from on that it has not
 * claimed, and queues them first, in their order, for other workers; the
 * worker answers each with SKIP when it gets to it.  The worker claims in
 * order, so once one is claimed, those before it are too.  Returns how
 * many were taken back. */
static unsigned revoke_from(sandlet_worker *w, unsigned from)
{
    sandlet_pool *p = w->pool;
    unsigned n = 0;
    for (unsigned i = w->rcount; i-- > from;) {
        sandlet_inflight *f = held(w, i);
        if (f->revoked)
            continue;
        if (!sandlet_claim_revoke(w->claim, f->id))
            break;
        f->revoked = true;
        w->nrevoked++;
        n++;
        /* Nothing of its body went further than the REQUEST frame
         * (body_pump waits for the claim): the connection still holds
         * all of it, and the worker drops the REQUEST unread. */
        f->body_open = false;
        f->body_sent = 0;
        if (f->conn)
            queue_push_front(p, f->conn);
        f->conn = NULL;
        f->discard = true;
    }
    p->moved += n;
    return n;
}

/* The worker did not take its first request within SANDLET_CLAIM_MS, and
 * the acceptor's revoke won (claim.h): no worker has started it, nor any
 * behind it, so they go back to the front of the queue for the next
 * worker free.  This worker gets nothing more until it has said SKIP for
 * each, which it does when it runs again. */
static void take_back(sandlet_worker *w)
{
    sandlet_pool *p = w->pool;
    sandlet_inflight *f = held(w, 0);
    sandlet_warn("worker %d of sandbox '%s' did not start %s within %u ms (stopped, or starved "
                 "of CPU); handing it%s to another worker",
                 (int)w->pid, sandbox_name(w), w->reqline, SANDLET_CLAIM_MS,
                 w->rcount > 1 ? " and the requests behind it" : "");
    /* The first one's revoke already won; the rest follow. */
    f->revoked = true;
    w->nrevoked++;
    p->moved++;
    f->body_open = false;
    f->body_sent = 0;
    sandlet_conn *c = f->conn;
    f->conn = NULL;
    f->discard = true;
    revoke_from(w, 1);
    if (c)
        queue_push_front(p, c);
    w->reqline[0] = '\0';
    uv_timer_stop(&w->behind);
    /* A worker that never runs again (stopped for good, or hostile and
     * silent) would hold its slot for ever: it is killed when the request
     * taken back would have timed out. */
    if (f->timeout) {
        uint64_t ran = uv_now(p->srv->loop) - w->started;
        uv_timer_start(&w->deadline, on_skip_overdue, f->timeout > ran ? f->timeout - ran : 1, 0);
    }
    sandlet_pool_submit(p, NULL);
    /* Its SKIP must be read whatever stopped reading before. */
    worker_resume(w);
}

/* Requests queued behind the one a worker serves must not wait for a
 * slow one (a 2 s report) while other workers could serve them: every
 * SANDLET_BEHIND_MS while it holds some, the first it has not claimed is
 * noted; when it is the same one at the next look, the worker made no
 * progress in between, and those not claimed are taken back and queued
 * first for the others.  The claim words say what the worker did in real
 * time, whatever the acceptor has read of its answers yet. */
static void on_behind(uv_timer_t *t)
{
    sandlet_worker *w = t->data;
    if (w->rcount < 2 || !w->pipe_open || stalled(w)) {
        uv_timer_stop(&w->behind);
        return;
    }
    unsigned k = 0;
    while (k < w->rcount && !held(w, k)->revoked && sandlet_claim_taken(w->claim, held(w, k)->id))
        k++;
    if (k == w->rcount || held(w, k)->revoked) {
        uv_timer_stop(&w->behind);
        return;
    }
    uint32_t mark = held(w, k)->id;
    if (k == 0 || mark != w->behind_id) {
        /* Moving, or not started at all (check_claim's case): look again. */
        w->behind_id = mark;
        return;
    }
    unsigned n = revoke_from(w, k);
    if (n == 0)
        return;
    w->slow = true;
    uv_timer_stop(&w->behind);
    sandlet_debug("worker %d of sandbox '%s' serves %s for over %u ms; %u request(s) queued "
                  "behind it go to other workers",
                  (int)w->pid, sandbox_name(w), w->reqline, SANDLET_BEHIND_MS, n);
    sandlet_pool_submit(w->pool, NULL);
}

/* Looks at a worker that holds requests behind its first from now on. */
static void behind_watch(sandlet_worker *w)
{
    if (w->rcount >= 2 && !uv_is_active((uv_handle_t *)&w->behind)) {
        w->behind_id = 0;
        uv_timer_start(&w->behind, on_behind, SANDLET_BEHIND_MS, SANDLET_BEHIND_MS);
    }
}

/* The first check of a request handed over: taken by its worker, or
 * taken back.  A taken request's own timeout goes on from when it was
 * handed over. */
static void check_claim(sandlet_worker *w)
{
    if (w->state != W_BUSY || w->rcount == 0 || stalled(w))
        return;
    sandlet_inflight *f = held(w, 0);
    uint64_t ran = uv_now(w->pool->srv->loop) - w->started;
    if (!request_started(w)) {
        if (ran < SANDLET_CLAIM_MS && (!f->timeout || ran < f->timeout)) {
            /* A streamed body waits at the connection for the claim (the
             * worker says nothing when it claims): look again soon. */
            uv_timer_start(&w->deadline, on_claim_timer, 1, 0);
            return;
        }
        if (sandlet_claim_revoke(w->claim, f->id)) {
            take_back(w);
            return;
        }
    }
    if (f->timeout) {
        if (ran >= f->timeout) {
            time_out(w);
            return;
        }
        uv_timer_start(&w->deadline, on_deadline, f->timeout - ran, 0);
    }
    body_pump(w);
}

static void on_claim_timer(uv_timer_t *t)
{
    check_claim(t->data);
}

/* The worker's first held request is the one it serves now: its timeout
 * runs from here, not from when it was handed over behind others. */
static void start_first(sandlet_worker *w)
{
    sandlet_inflight *f = held(w, 0);
    w->got_head = false;
    w->dropped = 0;
    w->started = uv_now(w->pool->srv->loop);
    if (f->revoked) {
        /* Its SKIP comes when the worker gets to it; one that never does
         * is killed when the request would have timed out. */
        w->reqline[0] = '\0';
        if (f->timeout)
            uv_timer_start(&w->deadline, on_skip_overdue, f->timeout, 0);
        return;
    }
    copy_str(w->reqline, sizeof(w->reqline), f->reqline);
    /* Not snprintf: this runs for every request. */
    copy_str(w->servlet, sizeof(w->servlet) - 1, f->servlet->path);
    if (f->servlet->prefix) {
        size_t n = strlen(w->servlet); /* copy_str left room for it */
        w->servlet[n] = '*';
        w->servlet[n + 1] = '\0';
    }
    /* Whichever comes first: the claim's check or the timeout; a streamed
     * body's pump waits for the claim, so that one is looked for at once. */
    w->claimed = false;
    unsigned first = f->timeout && f->timeout < SANDLET_CLAIM_MS ? f->timeout : SANDLET_CLAIM_MS;
    if (f->body_open)
        first = 1;
    uv_timer_start(&w->deadline, on_claim_timer, first, 0);
}

static void send_request(sandlet_worker *w, sandlet_conn *c, const sandlet_request_view *v)
{
    /* Numbered per worker, consecutively: the ring's requests then use
     * distinct claim words (claim.h). */
    if (++w->next_id == 0)
        w->next_id = 1;
    uint32_t id = w->next_id;
    sandlet_pool_link *l = sandlet_conn_pool_link(c);
    /* Before the frame can reach the worker. */
    sandlet_claim_offer(w->claim, id);
    size_t taken = 0;
    int rc = encode_request(w, c, v, id, &taken);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot hand %s to sandbox '%s'", v->reqline,
                          sandbox_name(w));
        sandlet_pool_link_reset(l);
        sandlet_conn_fail(c, rc == -ENOMEM ? 503 : 500);
        return;
    }
    sandlet_inflight *f = held(w, w->rcount);
    f->conn = c;
    f->id = id;
    f->discard = false;
    f->revoked = false;
    f->servlet = v->servlet;
    f->timeout = v->servlet->timeout ? v->servlet->timeout : w->pool->conf->timeout;
    {
        /* Kept here: the connection's own clock restarts for its next
         * request as soon as this answer is queued, before the worker's
         * END arrives. */
        int status;
        uint64_t bytes;
        sandlet_conn_outcome(c, &status, &bytes, &f->started);
    }
    copy_str(f->reqline, sizeof(f->reqline), v->reqline);
    f->body_open = v->body_open;
    f->body_sent = taken;
    l->worker = w;
    w->state = W_BUSY;
    if (++w->rcount == 1) {
        start_first(w);
    } else {
        w->pool->batched++;
        behind_watch(w);
    }
    mark_dirty(w);
    body_pump(w);
}

/* How often the queue is checked: a quarter of the limit, so a request
 * waits at most 1.25 times queue-timeout. */
static uint64_t tick(const sandlet_pool *p)
{
    return p->conf->queue_timeout >= 4 ? p->conf->queue_timeout / 4 : 1;
}

/* Takes the oldest request off the sandbox's queue. */
static sandlet_conn *queue_pop(sandlet_pool *p)
{
    sandlet_conn *c = p->qhead;
    p->qhead = sandlet_conn_pool_link(c)->qnext;
    if (!p->qhead)
        p->qtail = NULL;
    p->queued--;
    return c;
}

/* Requests queued longer than the wait limit get 503: the sandbox is
 * overloaded or cannot start, and the client should hear so. */
static void queue_expire(uv_timer_t *t)
{
    sandlet_pool *p = t->data;
    uint64_t now = uv_now(p->srv->loop);
    while (p->qhead &&
           now - sandlet_conn_pool_link(p->qhead)->queued_at >= p->conf->queue_timeout) {
        sandlet_conn *c = queue_pop(p);
        sandlet_conn_pool_link(c)->pool = NULL;
        p->rejected++;
        sandlet_warn("sandbox '%s': no worker free for %u ms (queue-timeout); answering 503 "
                     "to %s",
                     p->conf->name, p->conf->queue_timeout, sandlet_conn_reqline(c));
        sandlet_conn_fail(c, 503);
    }
    if (!p->qhead)
        uv_timer_stop(&p->qtimer);
}

/* True when a worker is serving or ready to. */
static bool any_worker_up(const sandlet_pool *p)
{
    for (unsigned i = 0; i < p->nworkers; i++)
        if ((p->workers[i].state == W_IDLE || p->workers[i].state == W_BUSY) &&
            p->workers[i].pipe_open)
            return true;
    return false;
}

/* While the sandbox cannot start, its requests are answered now: a client
 * learns in milliseconds what it would otherwise learn after
 * queue-timeout, and the log says why once per failed start. */
static void fail_fast(sandlet_pool *p, sandlet_conn *c)
{
    sandlet_conn_pool_link(c)->pool = NULL;
    p->rejected++;
    sandlet_debug("sandbox '%s' cannot start; answering 503 to %s", p->conf->name,
                  sandlet_conn_reqline(c));
    sandlet_conn_fail(c, 503);
}

static void fail_queue(sandlet_pool *p)
{
    while (p->qhead)
        fail_fast(p, queue_pop(p));
    uv_timer_stop(&p->qtimer);
}

/* The worker for the next request: an idle one below what max-requests
 * leaves it; NULL when all are busy, starting or down. */
/* The pages generation a worker needs for c's request: a page's, 0 for
 * a servlet (any worker has every configured servlet). */
static uint32_t needs(sandlet_conn *c)
{
    const sandlet_page *pg = sandlet_conn_page_link(c)->page;
    uint32_t gen = 0;
    if (pg)
        sandlet_page_servlet(pg, NULL, &gen);
    return gen;
}

/* The worker for a request that needs pages generation gen: the one
 * holding the fewest requests among those that may take one more; NULL
 * when none may.  A request whose body streams (v->body_open) goes only
 * to a worker holding nothing, and nothing is queued behind it until its
 * body's last frame is: its REQBODY frames must follow it on the channel. */
static sandlet_worker *pick_worker(sandlet_pool *p, const sandlet_request_view *v, uint32_t gen)
{
    sandlet_worker *best = NULL;
    unsigned max = p->conf->max_requests;
    for (unsigned i = 0; i < p->nworkers; i++) {
        sandlet_worker *w = &p->workers[i];
        if ((w->state != W_IDLE && w->state != W_BUSY) || !w->pipe_open || w->nrevoked || w->slow ||
            w->recycling)
            continue;
        if (w->pages_gen < gen)
            continue; /* started before the page's version: being replaced */
        if (w->rcount >= depth(w) ||
            (w->rcount && (v->body_open || held(w, w->rcount - 1)->body_open)))
            continue;
        /* Past max-requests a worker is recycled, unless it runs old code
         * and none of the new is up (request_finished). */
        if (max && w->served + w->rcount >= max && (w->pages_gen >= p->pages_gen || fresh_up(p)))
            continue;
        if (!best || w->rcount < best->rcount)
            best = w;
        if (best->rcount == 0)
            break;
    }
    return best;
}

/* Hands c (or, when c is NULL, the queue's head) to an idle worker. */
void sandlet_pool_submit(sandlet_pool *p, sandlet_conn *c)
{
    sandlet_request_view v;
    if (c) {
        sandlet_pool_link *l = sandlet_conn_pool_link(c);
        l->pool = p;
        sandlet_conn_request_view(c, &v);
        sandlet_worker *w = p->qhead ? NULL : pick_worker(p, &v, needs(c));
        if (!w && p->failing && !any_worker_up(p)) {
            fail_fast(p, c);
            return;
        }
        if (!w) {
            if (p->queued >= p->conf->queue) {
                sandlet_warn("sandbox '%s': queue full (%zu waiting); answering 503 to %s",
                             p->conf->name, p->queued, sandlet_conn_reqline(c));
                l->pool = NULL;
                p->rejected++;
                sandlet_conn_fail(c, 503);
                return;
            }
            l->qnext = NULL;
            l->queued_at = uv_now(p->srv->loop);
            if (!uv_is_active((uv_handle_t *)&p->qtimer))
                uv_timer_start(&p->qtimer, queue_expire, tick(p), tick(p));
            if (p->qtail)
                sandlet_conn_pool_link(p->qtail)->qnext = c;
            else
                p->qhead = c;
            p->qtail = c;
            p->queued++;
        } else {
            send_request(w, c, &v);
            return;
        }
    }
    while (p->qhead) {
        sandlet_conn_request_view(p->qhead, &v);
        sandlet_worker *w = pick_worker(p, &v, needs(p->qhead));
        if (!w)
            break;
        send_request(w, queue_pop(p), &v);
    }
    drain(p);
    maybe_grow(p);
}

/* ---- growing and shrinking (max-workers) ---------------------------------- */

/* After an extra worker failed to start, how long the pool waits before
 * it asks for one again: a servlet whose init fails in an extra would
 * otherwise be started again for every request that waits. */
#define GROW_BACKOFF_MS 1000u
/* A GROW the supervisor never answered (it refused it: the sandbox was
 * retired by a reload meanwhile) stops blocking the next one after
 * this; a worker's start takes milliseconds, its init a few seconds at
 * most. */
#define GROW_STUCK_MS 60000u
/* At most one "all max-workers are busy" warning a minute per pool. */
#define MAXED_WARN_MS 60000u

static bool extra(const sandlet_worker *w)
{
    return w->slot >= w->pool->conf->workers;
}

/* A request waits in the queue because no worker is free: when the pool
 * may grow (max-workers), ask the supervisor for the worker of one extra
 * slot that is down.  One GROW at a time per pool: the next is asked for
 * only once that worker said READY (and requests still wait), so a burst
 * grows the pool one worker per start instead of to max-workers at once,
 * and a pool whose extras cannot start asks for one at a time. */
static void maybe_grow(sandlet_pool *p)
{
    if (!p->qhead || p->failing || p->retired || p->srv->stopping ||
        p->nworkers <= p->conf->workers)
        return;
    uint64_t now = uv_now(p->srv->loop);
    if (p->growing) {
        if (now - p->grow_at < GROW_STUCK_MS)
            return;
        sandlet_warn("sandbox '%s': the supervisor did not start the extra worker %u asked for "
                     "%u ms ago; asking again",
                     p->conf->name, p->grow_slot, GROW_STUCK_MS);
        p->growing = false;
    }
    if (now < p->grow_after)
        return;
    bool all_up = true;
    for (unsigned i = p->conf->workers; i < p->nworkers; i++) {
        const sandlet_worker *w = &p->workers[i];
        all_up &= (w->state == W_IDLE || w->state == W_BUSY) && w->pipe_open;
        if (w->state != W_DOWN || w->pipe_open || w->next_channel >= 0)
            continue;
        p->growing = true;
        p->grow_slot = i;
        p->grow_at = now;
        sandlet_debug("sandbox '%s': %zu request(s) wait and no worker is free; starting extra "
                      "worker %u (max-workers %u)",
                      p->conf->name, p->queued, i, p->conf->max_workers);
        sandlet_server_control(p->srv, SANDLET_CTL_GROW, p->id, i, 0, 0);
        return;
    }
    /* Every slot runs a worker and requests still wait: the operator
     * should hear it (as php-fpm says it reached pm.max_children), but
     * once a minute, not once a request. */
    if (all_up && (p->maxed_at == 0 || now - p->maxed_at >= MAXED_WARN_MS)) {
        p->maxed_at = now;
        sandlet_warn("sandbox '%s' has all its max-workers %u workers and %zu request(s) wait; "
                     "raise max-workers in %s if the machine has room",
                     p->conf->name, p->nworkers, p->queued, p->srv->conf->file);
    }
}

/* The GROW for w's slot is answered: its worker is up, or it failed. */
static void grow_done(sandlet_worker *w, bool failed)
{
    sandlet_pool *p = w->pool;
    if (!p->growing || p->grow_slot != w->slot)
        return;
    p->growing = false;
    if (failed)
        p->grow_after = uv_now(p->srv->loop) + GROW_BACKOFF_MS;
}

/* How often idle extras are looked at: a quarter of the idle limit, so
 * one is retired at most 1.25 times worker-idle-timeout after its last
 * request. */
static uint64_t idle_tick(const sandlet_pool *p)
{
    unsigned t = p->conf->worker_idle_timeout;
    return t >= 4 ? t / 4 : 1;
}

/* Retires the extras idle for worker-idle-timeout: closing the channel
 * makes the worker run its servlets' destroy and exit 0, and the
 * supervisor does not start an extra slot again until asked (GROW).
 * Stops once no extra is up or coming. */
static void on_idle(uv_timer_t *t)
{
    sandlet_pool *p = t->data;
    uint64_t now = uv_now(p->srv->loop);
    bool any = false;
    for (unsigned i = p->conf->workers; i < p->nworkers; i++) {
        sandlet_worker *w = &p->workers[i];
        if (w->state == W_IDLE && w->rcount == 0 && w->pipe_open &&
            now - w->idle_since >= p->conf->worker_idle_timeout) {
            sandlet_debug("worker %d of sandbox '%s' (extra slot %u) was idle for %u ms "
                          "(worker-idle-timeout); retiring it",
                          (int)w->pid, p->conf->name, w->slot, p->conf->worker_idle_timeout);
            close_pipe(w);
            w->reqline[0] = '\0';
            w->state = W_DYING;
            w->retired = true;
            continue;
        }
        any |= w->state != W_DOWN && w->state != W_DYING;
    }
    if (!any)
        uv_timer_stop(&p->idle);
}

/* An extra worker is up: make sure someone watches it idle. */
static void idle_watch(sandlet_pool *p)
{
    if (!uv_is_active((uv_handle_t *)&p->idle) && !p->srv->stopping)
        uv_timer_start(&p->idle, on_idle, idle_tick(p), idle_tick(p));
}

void sandlet_pool_forget(sandlet_conn *c)
{
    sandlet_pool_link *l = sandlet_conn_pool_link(c);
    sandlet_pool *p = l->pool;
    sandlet_worker *w = l->worker;
    if (w) {
        /* A worker cannot be stopped midway: its answer is read and
         * dropped, up to SANDLET_DISCARD_MAX (then it is recycled). */
        for (unsigned i = 0; i < w->rcount; i++) {
            sandlet_inflight *f = held(w, i);
            if (f->conn == c) {
                f->conn = NULL;
                f->discard = true;
                /* Its body will not end: the servlet's reader says so. */
                body_abort(w, f);
            }
        }
        /* Reading may have stopped for this very client; nobody else
         * would start it again, and the worker would block for ever. */
        worker_resume(w);
    } else if (p) {
        for (sandlet_conn **pp = &p->qhead; *pp; pp = &sandlet_conn_pool_link(*pp)->qnext) {
            if (*pp == c) {
                *pp = l->qnext;
                if (p->qtail == c) {
                    p->qtail = NULL;
                    for (sandlet_conn *q = p->qhead; q; q = sandlet_conn_pool_link(q)->qnext)
                        p->qtail = q;
                }
                p->queued--;
                break;
            }
        }
    }
    sandlet_pool_link_reset(l);
}

/* ---- streamed request bodies --------------------------------------------- */

/* Whether the worker has claimed the request it holds first (claim.h).
 * Body bytes it was sent may be dropped from the connection only then:
 * until a worker claims a request, the acceptor may take it back and hand
 * it to another worker, which needs the whole of it again.  Once seen,
 * remembered: a worker that scribbles on its word afterwards changes
 * nothing. */
static bool request_started(sandlet_worker *w)
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
static void body_pump(sandlet_worker *w)
{
    if (w->rcount == 0 || !w->pipe_open)
        return;
    sandlet_inflight *f = held(w, 0);
    if (!f->body_open || !f->conn || f->discard || !request_started(w))
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
        kill_worker(w, 503);
        return;
    }
    sandlet_conn_body_consume(f->conn, len);
    if (done)
        f->body_open = false;
    /* The timeout bounds a servlet that stops taking its body (the
     * window then stops the pump) and its run after the body's end; an
     * upload longer than the timeout that keeps moving is no overrun. */
    if (f->timeout && (len || done))
        uv_timer_start(&w->deadline, on_deadline, f->timeout, 0);
    mark_dirty(w);
}

/* The body of f (held by w) will not be complete: the worker gets an
 * empty END|ABORT REQBODY, its servlet's reader an error. */
static void body_abort(sandlet_worker *w, sandlet_inflight *f)
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
        uv_timer_start(&w->deadline, on_deadline, f->timeout, 0);
    mark_dirty(w);
}

/* Queued bytes went to the worker's socketpair: its client may be read
 * again (below the low-water mark), and once no body streams, buffers
 * that grew for one are given back. */
static void body_written(sandlet_worker *w)
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
        body_pump(w);
}

size_t sandlet_pool_body_backlog(const sandlet_conn *c)
{
    const sandlet_worker *w = sandlet_conn_pool_link_const(c)->worker;
    return w ? w->out.len + w->sending.len : 0;
}

/* ---- frames from workers ------------------------------------------------- */

static void violation(sandlet_worker *w, const char *why)
{
    sandlet_error("worker %d of sandbox '%s' broke the frame protocol (%s)%s%s; killing it",
                  (int)w->pid, sandbox_name(w), why, w->rcount ? " while serving " : "",
                  w->rcount ? w->reqline : "");
    kill_worker(w, 0);
}

/* The first request's client left while its answer streams: restart the
 * worker rather than read the rest of a response that may be endless.
 * (The requests behind it it has not claimed go to other workers.) */
static void recycle(sandlet_worker *w)
{
    sandlet_info("worker %d of sandbox '%s': the client of %s left mid-response; dropped "
                 "%" PRIu64 " bytes, recycling the worker rather than read the rest",
                 (int)w->pid, sandbox_name(w), w->reqline, w->dropped);
    w->recycling = true;
    kill_worker(w, 502);
}

/* A status that is not a final HTTP status (a 1xx, or anything outside
 * 200-599) would answer the request with an interim or invalid response,
 * and the client would take the next response on the connection for this
 * one's: the client gets 502 and the rest of the worker's answer is
 * dropped (the worker is not at fault for the protocol, only its
 * servlet for the status). */
static void not_final(sandlet_worker *w, sandlet_inflight *f, unsigned status)
{
    sandlet_error("sandbox '%s': servlet %s answered %s with status %u, which is not a final "
                  "HTTP status (200-599); answering 502 instead",
                  sandbox_name(w), w->servlet, w->reqline, status);
    sandlet_conn *c = f->discard ? NULL : f->conn;
    f->discard = true;
    if (c) {
        f->conn = NULL;
        sandlet_conn_fail(c, 502);
    }
}

/* An idle worker leaves: closing its socketpair makes it run destroy and
 * exit 0, and its EXITED report starts the next one at once (no back-off:
 * this is no crash).  Requests keep going to the other workers. */
static void retire(sandlet_worker *w, const char *why)
{
    sandlet_debug("worker %d of sandbox '%s': %s; replacing it", (int)w->pid, sandbox_name(w), why);
    close_pipe(w);
    w->reqline[0] = '\0';
    w->state = W_DYING;
    w->retired = true;
}

static bool worker_up(const sandlet_worker *w)
{
    return (w->state == W_IDLE || w->state == W_BUSY) && w->pipe_open;
}

/* Whether a worker of the pool's newest code is up. */
static bool fresh_up(const sandlet_pool *p)
{
    for (unsigned i = 0; i < p->nworkers; i++)
        if (worker_up(&p->workers[i]) && p->workers[i].pages_gen >= p->pages_gen)
            return true;
    return false;
}

/* Whether one more stale worker may be replaced now.  Before a worker of
 * the new code is up: one (the canary), and never the last worker up, so
 * that code that no longer starts leaves the old workers serving (with
 * "workers 1" there is no other: the reload is that worker's restart).
 * Once the new code is up: a quarter of the workers at a time at most, so
 * that a slow init costs a quarter of the capacity, not all of it. */
static bool may_replace(sandlet_pool *p)
{
    /* The pool's size now: its workers up, and those not up that count
     * (a normal slot being restarted, an extra starting or leaving); an
     * extra slot that is down is no capacity missing. */
    unsigned up = 0, out = 0;
    for (unsigned i = 0; i < p->nworkers; i++) {
        const sandlet_worker *w = &p->workers[i];
        if (worker_up(w))
            up++;
        else if (!extra(w) || w->state != W_DOWN)
            out++;
    }
    unsigned size = up + out;
    if (fresh_up(p)) {
        unsigned wave = size / 4 ? size / 4 : 1;
        return out < wave;
    }
    if (p->canary)
        return false;
    return up >= 2 || size == 1;
}

/* Replaces the idle stale workers that may go now. */
static void replace_stale(sandlet_pool *p, const char *why)
{
    for (unsigned i = 0; i < p->nworkers && may_replace(p); i++) {
        sandlet_worker *w = &p->workers[i];
        if (w->state == W_IDLE && w->pipe_open && w->pages_gen < p->pages_gen) {
            p->canary = true;
            retire(w, why);
        }
    }
}

void sandlet_pool_pages(sandlet_pool *p, uint32_t gen)
{
    if (gen <= p->pages_gen)
        return;
    p->pages_gen = gen;
    p->canary = false;
    replace_stale(p, "its code has a new version");
}

const uint64_t sandlet_duration_bounds_us[SANDLET_DURATION_BUCKETS] = {
    1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 10000000};

/* One more request of p, whose head arrived at started (uv_hrtime), is
 * over: answered, or failed with its worker (a 502 or 504 counts too: the
 * slowest requests are those). */
static void observe(sandlet_pool *p, uint64_t started)
{
    uint64_t now = uv_hrtime();
    uint64_t us = now > started ? (now - started) / 1000 : 0;
    p->duration_sum_us += us;
    p->duration_count++;
    for (size_t i = 0; i < SANDLET_DURATION_BUCKETS; i++)
        if (us <= sandlet_duration_bounds_us[i]) {
            p->duration_le[i]++;
            break;
        }
}

static void worker_free(sandlet_worker *w);

static void request_finished(sandlet_worker *w)
{
    /* Answering the client may have lost this worker meanwhile (a failed
     * write while handing over that client's next request). */
    if (w->rcount == 0 || !w->pipe_open)
        return;
    /* Answered before its streamed body ended: the worker reads and drops
     * the rest up to this abort before it takes another request. */
    body_abort(w, held(w, 0));
    observe(w->pool, held(w, 0)->started);
    uv_timer_stop(&w->deadline);
    w->rfirst = (w->rfirst + 1) % depth(w);
    w->rcount--;
    w->slow = false;
    w->served++;
    w->pool->served++;
    worker_free(w);
}

/* The worker has nothing to do (its request answered, or the one taken
 * back from it skipped): it is replaced when its code is out of date or
 * it served max-requests, else it takes the next request. */
static void worker_free(sandlet_worker *w)
{
    unsigned max = w->pool->conf->max_requests;
    if (w->rcount == 0 && w->pages_gen < w->pool->pages_gen && may_replace(w->pool)) {
        w->pool->canary = true;
        retire(w, "its code is out of date");
        sandlet_pool_submit(w->pool, NULL);
        return;
    }
    /* A worker of old code that comes back loads the code now on disk,
     * which may not start: while none of the new code is up, the old
     * ones serve on past max-requests. */
    bool stale = w->pages_gen < w->pool->pages_gen;
    if (max && w->served >= max && w->rcount == 0 && (!stale || fresh_up(w->pool))) {
        /* Recycle: closing the socketpair makes the worker run destroy
         * and exit 0; its EXITED report starts the next one at once. */
        sandlet_debug("worker %d of sandbox '%s' served %u requests; recycling it", (int)w->pid,
                      sandbox_name(w), max);
        close_pipe(w);
        w->reqline[0] = '\0';
        w->state = W_DYING;
        return;
    }
    if (w->rcount) {
        start_first(w);
    } else {
        w->reqline[0] = '\0';
        w->state = W_IDLE;
        w->idle_since = uv_now(w->pool->srv->loop);
    }
    sandlet_pool_submit(w->pool, NULL);
}

/* Returns false when the worker was dropped and processing must stop. */
static bool handle_frame(sandlet_worker *w, const sandlet_frame_hdr *h, const uint8_t *payload)
{
    bool end = h->flags & SANDLET_FRAME_END;
    if (w->state == W_STARTING) {
        if (h->type == SANDLET_FRAME_READY) {
            w->state = W_IDLE;
            w->idle_since = uv_now(w->pool->srv->loop);
            w->pool->failing = false;
            if (extra(w)) {
                grow_done(w, false);
                idle_watch(w->pool);
            }
            /* The supervisor's back-off is for workers that cannot start. */
            sandlet_server_control(w->pool->srv, SANDLET_CTL_READY, w->pool->id, w->slot, w->gen,
                                   0);
            sandlet_debug("worker %d of sandbox '%s' is ready", (int)w->pid, sandbox_name(w));
            if (w->pages_gen < w->pool->pages_gen && may_replace(w->pool)) {
                /* Started just before the code's new version: it would
                 * only ever serve the old code.  Unless the new code has
                 * no worker up yet: then it serves the old code meanwhile
                 * (the new may never start), and goes when one is up. */
                w->pool->canary = true;
                retire(w, "it started before the newest code");
                return false;
            }
            /* A worker of the new code is up: the other stale ones may go. */
            replace_stale(w->pool, "its code has a new version");
            sandlet_pool_submit(w->pool, NULL);
            return true;
        }
        if (h->type == SANDLET_FRAME_FAIL) {
            /* Servlet code (a constructor, init) can write frames too:
             * the message is escaped and cut like any worker output, and
             * a worker says FAIL once -- its channel is closed after it,
             * so a loop of FAIL frames cannot forge or flood the log. */
            const char *msg;
            char shown[512];
            size_t used;
            size_t n = 0;
            if (sandlet_wire_fail_decode(payload, h->length, &msg) == 0)
                n = sandlet_workerlog_escape(shown, sizeof(shown) - 1, (const uint8_t *)msg,
                                             strlen(msg), &used);
            shown[n] = '\0';
            sandlet_error("sandbox '%s' cannot start: %s%s", sandbox_name(w),
                          n ? shown : "(no message)",
                          any_worker_up(w->pool) ? "" : "; answering 503 until a worker starts");
            if (!any_worker_up(w->pool)) {
                w->pool->failing = true;
                fail_queue(w->pool);
            }
            /* It exits; the supervisor backs off its restart (an extra
             * slot's is not restarted: the pool backs off its GROW). */
            grow_done(w, true);
            close_pipe(w);
            w->state = W_DYING;
            return false;
        }
        violation(w, "expected READY");
        return false;
    }
    if (stalled(w)) {
        /* For a request taken back the worker has nothing to say but
         * SKIP: it never started it. */
        if (h->type != SANDLET_FRAME_SKIP || h->id != held(w, 0)->id) {
            violation(w, "expected SKIP for the request taken back");
            return false;
        }
        uv_timer_stop(&w->deadline);
        w->rfirst = (w->rfirst + 1) % depth(w);
        w->rcount--;
        w->nrevoked--;
        worker_free(w);
        return true;
    }
    if (w->state != W_BUSY || w->rcount == 0 || h->id != held(w, 0)->id) {
        violation(w, w->state == W_BUSY ? "frame for another request" : "frame while idle");
        return false;
    }
    /* A worker claims a request before it answers it: an answer to one
     * it did not claim could meet a second answer from the worker it is
     * then handed to. */
    if (!request_started(w)) {
        violation(w, "answer to a request it has not claimed");
        return false;
    }
    sandlet_inflight *f = held(w, 0);
    int rc = 0;
    if (h->type == SANDLET_FRAME_RESPONSE && !w->got_head) {
        sandlet_wire_response r;
        int drc = sandlet_wire_response_decode(payload, h->length, &r);
        if (drc < 0 && drc != -ERANGE) {
            violation(w, "malformed RESPONSE");
            return false;
        }
        w->got_head = true;
        if (drc == -ERANGE)
            not_final(w, f, r.status);
        else if (f->conn && !f->discard)
            rc = sandlet_conn_response_head(f->conn, &r, end);
    } else if (h->type == SANDLET_FRAME_BODY && w->got_head &&
               !sandlet_wire_body_valid(h->length, h->flags)) {
        violation(w, "empty BODY frame that does not end the response");
        return false;
    } else if (h->type == SANDLET_FRAME_BODY && w->got_head) {
        if (f->conn && !f->discard)
            rc = sandlet_conn_response_body(f->conn, payload, h->length, end);
    } else {
        violation(w, sandlet_frame_type_name(h->type));
        return false;
    }
    if (rc == -EPROTO) {
        violation(w, "invalid status or header");
        return false;
    }
    if (rc < 0 && w->rcount && held(w, 0) == f && f->conn) {
        /* The client cannot take the response; drop the rest of it. */
        f->discard = true;
    }
    if (end) {
        request_finished(w);
    } else if (w->rcount && held(w, 0) == f && (f->discard || !f->conn)) {
        /* Frames count with their header: a flood of tiny frames to a
         * client that left costs the acceptor as much as bytes do. */
        w->dropped += SANDLET_FRAME_HEADER + (uint64_t)h->length;
        if (w->dropped > SANDLET_DISCARD_MAX) {
            recycle(w);
            return false;
        }
    }
    return true;
}

static void worker_process(sandlet_worker *w)
{
    size_t off = 0;
    w->processing = true;
    while (w->pipe_open) {
        sandlet_frame_hdr h;
        int rc = sandlet_frame_header_decode(w->in.data + off, w->in.len - off, &h);
        if (rc == -EAGAIN)
            break;
        if (rc < 0) {
            w->processing = false;
            violation(w, rc == -EMSGSIZE ? "frame length over the maximum" : "bad frame header");
            return;
        }
        if (w->in.len - off - SANDLET_FRAME_HEADER < h.length)
            break;
        if (!handle_frame(w, &h, w->in.data + off + SANDLET_FRAME_HEADER)) {
            w->processing = false;
            return;
        }
        off += SANDLET_FRAME_HEADER + h.length;
        /* Backpressure: let the client catch up before reading more. */
        sandlet_conn *c = w->rcount ? held(w, 0)->conn : NULL;
        if (c && sandlet_conn_write_backlog(c) > SANDLET_WRITE_HIGH_WATER) {
            if (w->reading) {
                uv_read_stop((uv_stream_t *)&w->pipe);
                w->reading = false;
            }
            break;
        }
    }
    w->processing = false;
    sandlet_buf_consume(&w->in, off);
}

static void worker_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void worker_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    sandlet_worker *w = h->data;
    size_t room = w->in.limit - w->in.len;
    size_t want = room < READ_CHUNK ? room : READ_CHUNK;
    if (want == 0 || sandlet_buf_reserve(&w->in, want) < 0) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)w->in.data + w->in.len, (unsigned)want);
}

static void worker_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    sandlet_worker *w = s->data;
    if (nread > 0) {
        w->in.len += (size_t)nread;
        worker_process(w);
        return;
    }
    if (nread == 0)
        return;
    if (nread == UV_ENOBUFS) {
        violation(w, "frame larger than the buffer");
        return;
    }
    /* EOF or error: the worker is gone or going; its EXITED report says
     * why.  Its client learns now, not after the report. */
    worker_lost(w);
}

/* Reads w again after a pause, starting with what is already buffered.
 * Never from inside worker_process, whose loop goes on by itself. */
static void worker_resume(sandlet_worker *w)
{
    if (w->reading || !w->pipe_open || w->processing || w->state != W_BUSY)
        return;
    int rc = uv_read_start((uv_stream_t *)&w->pipe, worker_alloc, worker_read);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "reading from worker %d of sandbox '%s'",
                          (int)w->pid, sandbox_name(w));
        kill_worker(w, 0);
        return;
    }
    w->reading = true;
    worker_process(w);
}

void sandlet_pool_resume(sandlet_conn *c)
{
    sandlet_worker *w = sandlet_conn_pool_link(c)->worker;
    if (w)
        worker_resume(w);
}

/* ---- worker lifecycle ---------------------------------------------------- */

static void take_worker(sandlet_worker *w, const sandlet_ctl *m, int channel, int output,
                        sandlet_claim *claim);

static void pipe_closed(uv_handle_t *h)
{
    sandlet_worker *w = h->data;
    w->pipe_closing = false;
    if (w->next_channel < 0) {
        pool_maybe_gone(w->pool);
        return;
    }
    int channel = w->next_channel, output = w->next_output;
    sandlet_claim *claim = w->next_claim;
    w->next_channel = w->next_output = -1;
    w->next_claim = NULL;
    if (w->pool->srv->stopping) {
        close(channel);
        if (output >= 0)
            close(output);
        sandlet_claim_unmap(claim);
        return;
    }
    take_worker(w, &w->next, channel, output, claim);
}

static void close_pipe(sandlet_worker *w)
{
    if (!w->pipe_open)
        return;
    w->pipe_open = false;
    w->reading = false;
    w->pipe_closing = true;
    uv_close((uv_handle_t *)&w->pipe, pipe_closed);
}

/* The worker's socketpair is unusable: what it claimed fails with
 * status, and what it held but never claimed is taken back and goes to
 * the front of the queue (taken back first, so that none runs twice).
 * Then wait for the supervisor's report of its exit. */
static void worker_lost_status(sandlet_worker *w, int status)
{
    sandlet_pool *p = w->pool;
    close_pipe(w);
    uv_timer_stop(&w->deadline);
    uv_timer_stop(&w->behind);
    if (w->state != W_DOWN)
        w->state = W_DYING;
    unsigned n = w->rcount, first = w->rfirst;
    if (n && !held(w, 0)->revoked)
        observe(p, held(w, 0)->started);
    unsigned moved = n && w->claim ? revoke_from(w, 0) : 0;
    /* Forgotten before any client is answered: answering may hand that
     * client's next request to a worker, never this one again. */
    w->rcount = 0;
    w->nrevoked = 0;
    w->slow = false;
    for (unsigned i = 0; i < n; i++) {
        sandlet_inflight *f = &w->ring[(first + i) % depth(w)];
        sandlet_conn *c = f->revoked ? NULL : f->conn;
        f->conn = NULL;
        if (c) {
            sandlet_pool_link_reset(sandlet_conn_pool_link(c));
            sandlet_conn_fail(c, status);
        }
    }
    if (moved)
        sandlet_pool_submit(p, NULL);
}

static void worker_lost(sandlet_worker *w)
{
    worker_lost_status(w, w->timed_out ? 504 : 502);
}

/* The worker cannot be trusted or used any more: the supervisor kills it
 * (by slot and generation, never by pid) and what it held fails with
 * status (0: 504 when it ran out of time, else 502). */
static void kill_worker(sandlet_worker *w, int status)
{
    sandlet_server_control(w->pool->srv, SANDLET_CTL_KILL, w->pool->id, w->slot, w->gen, SIGKILL);
    if (status)
        worker_lost_status(w, status);
    else
        worker_lost(w);
}

/* The supervisor reported the exit of the worker of w's slot; it starts
 * the next one itself (backing off when the slot crash-loops) and hands
 * it over with a WORKER message. */
static void worker_exited(sandlet_worker *w, const sandlet_ctl *m)
{
    bool busy = w->reqline[0] != '\0';
    if (w->recycling) {
        /* Killed on purpose, see recycle(): not a crash. */
        sandlet_info("worker %d of sandbox '%s' recycled", (int)m->pid, sandbox_name(w));
    } else if (m->signal) {
        sandlet_error("worker %d of sandbox '%s' was killed by signal %d (%s)%s%s%s%s", (int)m->pid,
                      sandbox_name(w), m->signal, strsignal(m->signal),
                      busy ? " while serving " : "", busy ? w->servlet : "", busy ? ": " : "",
                      busy ? w->reqline : "");
    } else if (m->status != 0 || busy) {
        sandlet_error("worker %d of sandbox '%s' exited with status %d%s%s%s%s", (int)m->pid,
                      sandbox_name(w), m->status, busy ? " while serving " : "",
                      busy ? w->servlet : "", busy ? ": " : "", busy ? w->reqline : "");
    } else if (w->retired && extra(w)) {
        sandlet_debug("worker %d of sandbox '%s' (extra slot %u) left", (int)m->pid,
                      sandbox_name(w), w->slot);
    } else if (w->retired) {
        sandlet_debug("worker %d of sandbox '%s' was replaced", (int)m->pid, sandbox_name(w));
    } else {
        sandlet_info("worker %d of sandbox '%s' exited", (int)m->pid, sandbox_name(w));
    }
    if (!w->recycling && (m->signal || m->status != 0 || busy))
        w->pool->crashes++;
    /* Only what the kernel reported: a SIGSYS can be self-sent. */
    if (!w->recycling && m->signal == SIGSYS && m->seccomp)
        w->pool->seccomp_kills++;
    /* An extra that died before READY failed its start. */
    grow_done(w, true);
    worker_lost(w);
    w->state = W_DOWN;
    w->pid = 0;
    w->reqline[0] = '\0';
    drain(w->pool);
    /* An extra slot is not restarted by the supervisor: when requests
     * still wait, the pool asks for one itself. */
    maybe_grow(w->pool);
}

void sandlet_pool_worker(sandlet_server *srv, const sandlet_ctl *m, int channel, int output,
                         int claim_fd)
{
    sandlet_pool *p = sandlet_pool_find(srv, m->sandbox);
    sandlet_claim *claim = NULL;
    int crc = claim_fd >= 0 ? sandlet_claim_map(claim_fd, &claim) : -EBADF;
    if (claim_fd >= 0)
        close(claim_fd); /* the mapping stays */
    if (!p || m->slot >= p->nworkers || channel < 0 || m->pid <= 0 || crc < 0) {
        sandlet_error("the supervisor handed over an unknown or incomplete worker %u/%u%s%s; "
                      "ignored",
                      m->sandbox, m->slot, crc < 0 ? ": its claim word: " : "",
                      crc < 0 ? strerror(-crc) : "");
        if (channel >= 0)
            close(channel);
        if (output >= 0)
            close(output);
        sandlet_claim_unmap(claim);
        return;
    }
    sandlet_worker *w = &p->workers[m->slot];
    if (w->pipe_open || w->state != W_DOWN) {
        /* Its predecessor's exit report was lost or is late: whatever it
         * held failed. */
        worker_lost(w);
    }
    if (w->next_channel >= 0) {
        /* Superseded before it was taken (cannot happen while the
         * supervisor keeps one live worker per slot). */
        close(w->next_channel);
        if (w->next_output >= 0)
            close(w->next_output);
        sandlet_claim_unmap(w->next_claim);
        w->next_channel = w->next_output = -1;
        w->next_claim = NULL;
    }
    if (w->pipe_closing) {
        /* The handle is reused: libuv must be done closing it first. */
        w->next = *m;
        w->next_channel = channel;
        w->next_output = output;
        w->next_claim = claim;
        return;
    }
    take_worker(w, m, channel, output, claim);
}

static void take_worker(sandlet_worker *w, const sandlet_ctl *m, int channel, int output,
                        sandlet_claim *claim)
{
    sandlet_pool *p = w->pool;
    sandlet_server *srv = p->srv;
    /* An extra's start is growth, not a restart. */
    if (extra(w))
        p->grown++;
    else if (w->gen > 0)
        p->restarts++;
    w->gen = m->gen;
    w->pid = m->pid;
    w->pages_gen = m->pages;
    w->retired = false;
    w->state = W_STARTING;
    w->served = 0;
    w->timed_out = false;
    w->recycling = false;
    w->dropped = 0;
    w->got_head = false;
    w->rfirst = w->rcount = 0;
    w->reqline[0] = '\0';
    w->nrevoked = 0;
    w->slow = false;
    w->next_id = 0;
    sandlet_claim_unmap(w->claim);
    w->claim = claim;
    sandlet_buf_reset(&w->in);
    sandlet_buf_reset(&w->out);
    sandlet_buf_reset(&w->sending);
    if (output >= 0 && sandlet_workerlog_attach(srv, w, output) < 0)
        sandlet_warn("worker %d of sandbox '%s': its output cannot be read; it is lost",
                     (int)w->pid, sandbox_name(w));
    int rc = uv_pipe_init(srv->loop, &w->pipe, 0);
    if (rc == 0) {
        w->pipe.data = w;
        w->pipe_open = true;
        rc = uv_pipe_open(&w->pipe, channel);
        if (rc < 0)
            close(channel); /* libuv takes it only when the open succeeds */
    } else {
        close(channel);
    }
    if (rc == 0)
        rc = uv_read_start((uv_stream_t *)&w->pipe, worker_alloc, worker_read);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot read worker %d of sandbox '%s'",
                          (int)w->pid, sandbox_name(w));
        kill_worker(w, 0);
        return;
    }
    w->reading = true;
}

void sandlet_pool_control(sandlet_server *srv, const sandlet_ctl *m)
{
    sandlet_pool *p = sandlet_pool_find(srv, m->sandbox);
    if (!p || m->slot >= p->nworkers) {
        sandlet_error("control message for unknown worker %u/%u; ignored", m->sandbox, m->slot);
        return;
    }
    sandlet_worker *w = &p->workers[m->slot];
    /* A failed start never had a generation the acceptor saw. */
    if (m->type == SANDLET_CTL_SPAWN_FAILED && extra(w) && w->state == W_DOWN)
        grow_done(w, true);
    if (m->gen != w->gen)
        return; /* about an earlier incarnation of this slot */
    switch (m->type) {
    case SANDLET_CTL_SPAWN_FAILED:
        sandlet_log_errno(SANDLET_LOG_ERROR, m->status,
                          "the supervisor could not start a worker of sandbox '%s'",
                          sandbox_name(w));
        break;
    case SANDLET_CTL_EXITED: worker_exited(w, m); break;
    default:
        sandlet_error("unexpected control message type %u from the supervisor", m->type);
        break;
    }
}

sandlet_pool *sandlet_pool_find(sandlet_server *srv, uint32_t id)
{
    for (sandlet_pool *p = srv->pools; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static void pool_free(sandlet_pool *p)
{
    for (unsigned j = 0; p->workers && j < p->nworkers; j++) {
        sandlet_buf_free(&p->workers[j].in);
        sandlet_buf_free(&p->workers[j].out);
        sandlet_buf_free(&p->workers[j].sending);
        free(p->workers[j].ring);
        sandlet_claim_unmap(p->workers[j].claim);
        sandlet_claim_unmap(p->workers[j].next_claim);
    }
    free(p->workers);
    sandlet_confgen_put(p->gen);
    free(p);
}

sandlet_pool *sandlet_pool_new(sandlet_server *srv, sandlet_confgen *g, size_t index)
{
    sandlet_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->srv = srv;
    p->gen = sandlet_confgen_hold(g);
    p->conf = &g->conf->sandboxes[index];
    p->id = p->conf->id;
    p->nservlets = g->nservlets[index];
    p->depth = p->conf->pipeline ? p->conf->pipeline : 1;
    p->nworkers = p->conf->max_workers > p->conf->workers ? p->conf->max_workers : p->conf->workers;
    p->workers = calloc(p->nworkers ? p->nworkers : 1, sizeof(*p->workers));
    if (!p->workers) {
        pool_free(p);
        return NULL;
    }
    for (unsigned j = 0; j < p->nworkers; j++) {
        sandlet_worker *w = &p->workers[j];
        w->pool = p;
        w->slot = j;
        w->state = W_DOWN;
        w->next_channel = w->next_output = -1;
        sandlet_buf_init(&w->in, SANDLET_FRAME_HEADER + SANDLET_FRAME_MAX + READ_CHUNK);
        sandlet_buf_init(&w->out, 0);
        sandlet_buf_init(&w->sending, 0);
        w->ring = calloc(p->depth, sizeof(*w->ring));
        if (!w->ring) {
            pool_free(p);
            return NULL;
        }
    }
    /* Nothing can fail from here: the handles are only ever closed. */
    uv_timer_init(srv->loop, &p->qtimer);
    p->qtimer.data = p;
    uv_check_init(srv->loop, &p->flush);
    p->flush.data = p;
    uv_prepare_init(srv->loop, &p->flush_early);
    p->flush_early.data = p;
    uv_timer_init(srv->loop, &p->idle);
    p->idle.data = p;
    for (unsigned j = 0; j < p->nworkers; j++) {
        uv_timer_init(srv->loop, &p->workers[j].deadline);
        p->workers[j].deadline.data = &p->workers[j];
        uv_timer_init(srv->loop, &p->workers[j].behind);
        p->workers[j].behind.data = &p->workers[j];
    }
    p->next = srv->pools;
    srv->pools = p;
    return p;
}

void sandlet_pool_rebase(sandlet_pool *p, sandlet_confgen *g, size_t index)
{
    sandlet_confgen *old = p->gen;
    p->gen = sandlet_confgen_hold(g);
    p->conf = &g->conf->sandboxes[index];
    sandlet_confgen_put(old);
    /* queue-timeout may have changed: the check's period follows it. */
    if (uv_is_active((uv_handle_t *)&p->qtimer))
        uv_timer_start(&p->qtimer, queue_expire, tick(p), tick(p));
    /* So may worker-idle-timeout. */
    if (uv_is_active((uv_handle_t *)&p->idle))
        uv_timer_start(&p->idle, on_idle, idle_tick(p), idle_tick(p));
}

int sandlet_pools_start(sandlet_server *srv)
{
    sandlet_confgen *g = srv->gen;
    for (size_t i = 0; i < g->conf->nsandboxes; i++)
        if (!(g->pool_of[i] = sandlet_pool_new(srv, g, i)))
            return -ENOMEM;
    /* The supervisor makes the sessions' keys: the secret they come from
     * is of no use to the process that faces the network. */
    sodium_memzero(srv->conf->session_secret, sizeof(srv->conf->session_secret));
    return 0;
}

static void pool_handle_closed(uv_handle_t *h)
{
    sandlet_pool *p = h->data;
    if (h->type == UV_TIMER && h != (uv_handle_t *)&p->qtimer)
        p = ((sandlet_worker *)h->data)->pool;
    if (--p->closing == 0)
        pool_free(p);
}

/* The idle timer's data is its pool, not a worker as for the other
 * timers but qtimer: its own callback, rather than one more address to
 * tell apart in pool_handle_closed. */
static void idle_closed(uv_handle_t *h)
{
    sandlet_pool *p = h->data;
    if (--p->closing == 0)
        pool_free(p);
}

/* A retired pool with nothing left to do goes: out of the list, its
 * handles closed, then freed. */
static void pool_maybe_gone(sandlet_pool *p)
{
    if (!p->retired || p->closing || p->qhead || p->srv->stopping)
        return;
    for (unsigned j = 0; j < p->nworkers; j++) {
        const sandlet_worker *w = &p->workers[j];
        if (w->state != W_DOWN || w->pipe_open || w->pipe_closing || w->next_channel >= 0)
            return;
    }
    for (sandlet_pool **pp = &p->srv->pools; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    sandlet_debug("sandbox '%s' (id %u), replaced by a reload, is done", p->conf->name, p->id);
    sandlet_workerlog_forget_pool(p->srv, p);
    if (p->ndirty) {
        uv_check_stop(&p->flush);
        uv_prepare_stop(&p->flush_early);
    }
    uv_timer_stop(&p->qtimer);
    uv_timer_stop(&p->idle);
    p->closing = 4 + 2 * p->nworkers;
    uv_close((uv_handle_t *)&p->qtimer, pool_handle_closed);
    uv_close((uv_handle_t *)&p->idle, idle_closed);
    uv_close((uv_handle_t *)&p->flush, pool_handle_closed);
    uv_close((uv_handle_t *)&p->flush_early, pool_handle_closed);
    for (unsigned j = 0; j < p->nworkers; j++) {
        uv_timer_stop(&p->workers[j].deadline);
        uv_close((uv_handle_t *)&p->workers[j].deadline, pool_handle_closed);
        uv_timer_stop(&p->workers[j].behind);
        uv_close((uv_handle_t *)&p->workers[j].behind, pool_handle_closed);
    }
}

/* A retired pool closes each worker that has nothing left to serve. */
static void drain(sandlet_pool *p)
{
    if (!p->retired || p->srv->stopping)
        return;
    if (p->qhead) {
        bool coming = false;
        for (unsigned j = 0; j < p->nworkers && !coming; j++)
            coming = p->workers[j].state != W_DOWN && p->workers[j].state != W_DYING &&
                     !stalled(&p->workers[j]); /* may never run again */
        if (coming)
            return;
        /* Nothing of the sandbox will start again (the supervisor
         * restarts no worker of a retired sandbox): what waits goes where
         * the configuration now sends it. */
        uv_timer_stop(&p->qtimer);
        while (p->qhead) {
            sandlet_conn *c = queue_pop(p);
            sandlet_pool_link_reset(sandlet_conn_pool_link(c));
            sandlet_conn_redispatch(c);
        }
    }
    for (unsigned j = 0; j < p->nworkers; j++) {
        sandlet_worker *w = &p->workers[j];
        if ((w->state == W_IDLE || w->state == W_STARTING) && w->rcount == 0 && w->pipe_open)
            retire(w, "a reload changed or removed its sandbox");
    }
    pool_maybe_gone(p);
}

void sandlet_pool_retire(sandlet_pool *p)
{
    p->retired = true;
    drain(p);
}

void sandlet_pools_stop(sandlet_server *srv)
{
    for (sandlet_pool *p = srv->pools; p; p = p->next) {
        if (!uv_is_closing((uv_handle_t *)&p->qtimer))
            uv_close((uv_handle_t *)&p->qtimer, NULL);
        if (!uv_is_closing((uv_handle_t *)&p->flush))
            uv_close((uv_handle_t *)&p->flush, NULL);
        if (!uv_is_closing((uv_handle_t *)&p->flush_early))
            uv_close((uv_handle_t *)&p->flush_early, NULL);
        if (!uv_is_closing((uv_handle_t *)&p->idle))
            uv_close((uv_handle_t *)&p->idle, NULL);
        for (unsigned j = 0; p->workers && j < p->nworkers; j++) {
            sandlet_worker *w = &p->workers[j];
            /* Closing the socketpair is the worker's signal to run its
             * servlets' destroy and exit. */
            worker_lost(w);
            if (!uv_is_closing((uv_handle_t *)&w->deadline))
                uv_close((uv_handle_t *)&w->deadline, NULL);
            if (!uv_is_closing((uv_handle_t *)&w->behind))
                uv_close((uv_handle_t *)&w->behind, NULL);
        }
    }
}

/* ---- session cookies of other sandboxes ------------------------------------ */

bool sandlet_pool_header_allowed(const sandlet_conn *c, const char *name, size_t name_len,
                                 const char *value, size_t value_len)
{
    const sandlet_pool *pool = sandlet_conn_pool_link_const(c)->pool;
    if (name_len != 10 || strncasecmp(name, "Set-Cookie", 10) != 0 || !pool)
        return true;
    return sandlet_setcookie_allowed(c, pool->conf, value, value_len);
}

void sandlet_pools_free(sandlet_server *srv)
{
    while (srv->pools) {
        sandlet_pool *p = srv->pools;
        srv->pools = p->next;
        pool_free(p);
    }
}

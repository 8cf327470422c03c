/*
 * queue.c - a sandbox's queue of requests waiting for a worker, which
 * worker takes the next one (pick.c decides), the hand-over to a worker
 * (numbered, offered in its claim word, batched up to the pool's depth),
 * and the take-back of requests a worker did not claim in time (stopped,
 * or stuck behind a slow request): they go back to the front of the
 * queue, never to be run twice.  The timeouts of the request a worker
 * serves run here too.
 *
 * It must never write a frame itself (channel.c encodes and flushes), read
 * the claim word but through claim.h and pick.c, or answer a client
 * otherwise than through sandlet_conn_fail.
 */
#include "config.h"

#include "common/log.h"
#include "loop/pool_private.h"
#include "loop/pages.h"
#include "loop/pick.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void on_claim_timer(uv_timer_t *t);

/* Every start of a worker's deadline timer goes here: whether it runs the
 * claim check is what lets a running one serve the next request too
 * (sandlet_start_first, request_finished). */
void sandlet_deadline_start(sandlet_worker *w, uv_timer_cb cb, uint64_t ms)
{
    w->claim_timer = cb == on_claim_timer;
    uv_timer_start(&w->deadline, cb, ms, 0);
}

/* How often a worker holding requests behind the one it serves is looked
 * at: when it claimed none of them between two looks, they are taken back
 * (it runs a slow request, or gets no CPU).  Short against the 10 ms a
 * fast request may wait behind a slow one. */
#define SANDLET_BEHIND_MS 2u

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
    sandlet_kill_worker(w, 504);
}

void sandlet_on_deadline(uv_timer_t *t)
{
    sandlet_worker *w = t->data;
    sandlet_inflight *f = w->rcount ? held(w, 0) : NULL;
    /* The servlet has every byte the client sent and waits for more: the
     * wait is the client's, which body-timeout bounds (then END|ABORT). */
    if (f && f->body_open && f->conn && !f->discard && w->out.len == 0) {
        size_t len;
        bool done;
        sandlet_conn_body(f->conn, &len, &done);
        if (len == 0 && f->timeout) {
            sandlet_deadline_start(w, sandlet_on_deadline, f->timeout);
            return;
        }
    }
    time_out(w);
}

/* The worker's first held request was taken back: it owes a SKIP. */
bool sandlet_worker_stalled(sandlet_worker *w)
{
    return w->rcount && held(w, 0)->revoked;
}

static void on_skip_overdue(uv_timer_t *t)
{
    sandlet_worker *w = t->data;
    if (!sandlet_worker_stalled(w) || !w->pipe_open)
        return;
    sandlet_error("worker %d of sandbox '%s' has not run since a request was taken back from it "
                  "(stopped?) and is past that request's timeout; killing it",
                  (int)w->pid, sandbox_name(w));
    /* Not counted as a timeout: its request was answered by another
     * worker; the restart is counted as any. */
    sandlet_kill_worker(w, 0);
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
        uv_timer_start(&p->qtimer, sandlet_queue_expire, sandlet_queue_tick(p),
                       sandlet_queue_tick(p));
}

/* Takes back every request w holds from index from on that it has not
 * claimed, and queues them first, in their order, for other workers; the
 * worker answers each with SKIP when it gets to it.  The worker claims in
 * order, so once one is claimed, those before it are too.  Returns how
 * many were taken back. */
unsigned sandlet_revoke_from(sandlet_worker *w, unsigned from)
{
    sandlet_pool *p = w->pool;
    unsigned pos[SANDLET_MAX_PIPELINE];
    sandlet_held h = held_all(w);
    unsigned n = sandlet_pick_revoke(w->claim, &h, from, pos);
    for (unsigned j = 0; j < n; j++) {
        sandlet_inflight *f = held(w, pos[j]);
        w->nrevoked++;
        /* Nothing of its body went further than the REQUEST frame
         * (body_pump waits for the claim): the connection still holds
         * all of it, and the worker drops the REQUEST unread. */
        f->body_open = false;
        f->body_sent = 0;
        sandlet_tee_end(w, f);
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
    sandlet_tee_end(w, f);
    sandlet_conn *c = f->conn;
    f->conn = NULL;
    f->discard = true;
    sandlet_revoke_from(w, 1);
    if (c)
        queue_push_front(p, c);
    w->reqline[0] = '\0';
    uv_timer_stop(&w->behind);
    /* A worker that never runs again (stopped for good, or hostile and
     * silent) would hold its slot for ever: it is killed when the request
     * taken back would have timed out. */
    if (f->timeout) {
        uint64_t ran = uv_now(p->srv->loop) - w->started;
        sandlet_deadline_start(w, on_skip_overdue, f->timeout > ran ? f->timeout - ran : 1);
    }
    sandlet_pool_submit(p, NULL);
    /* Its SKIP must be read whatever stopped reading before. */
    sandlet_worker_resume(w);
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
    if (w->rcount < 2 || !w->pipe_open || sandlet_worker_stalled(w)) {
        uv_timer_stop(&w->behind);
        return;
    }
    unsigned k = 0;
    sandlet_held h = held_all(w);
    switch (sandlet_pick_behind(w->claim, &h, &w->behind_id, &k)) {
    case SANDLET_BEHIND_STOP: uv_timer_stop(&w->behind); return;
    case SANDLET_BEHIND_WAIT: return; /* moving, or not started at all: look again */
    case SANDLET_BEHIND_TAKE_BACK: break;
    }
    unsigned n = sandlet_revoke_from(w, k);
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
    if (w->state != W_BUSY || w->rcount == 0 || sandlet_worker_stalled(w))
        return;
    sandlet_inflight *f = held(w, 0);
    uint64_t ran = uv_now(w->pool->srv->loop) - w->started;
    enum sandlet_claim_next next = sandlet_pick_claim(sandlet_request_started(w), ran, f->timeout);
    if (next != SANDLET_CLAIM_RUN) {
        if (next == SANDLET_CLAIM_WAIT) {
            /* A streamed body waits at the connection for the claim (the
             * worker says nothing when it claims): look again soon.
             * Otherwise the check came early (a timer kept from the
             * request before): look again when this one's is due. */
            uint64_t due =
                f->timeout && f->timeout < SANDLET_CLAIM_MS ? f->timeout : SANDLET_CLAIM_MS;
            sandlet_deadline_start(w, on_claim_timer, f->body_open || ran >= due ? 1 : due - ran);
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
        sandlet_deadline_start(w, sandlet_on_deadline, f->timeout - ran);
    }
    sandlet_body_pump(w);
}

static void on_claim_timer(uv_timer_t *t)
{
    check_claim(t->data);
}

/* The worker's first held request is the one it serves now: its timeout
 * runs from here, not from when it was handed over behind others. */
void sandlet_start_first(sandlet_worker *w)
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
            sandlet_deadline_start(w, on_skip_overdue, f->timeout);
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
    /* A claim check still to come no later than this one's looks at this
     * request when it fires (check_claim takes whichever is first then):
     * at a few hundred thousand requests a second, restarting the timer
     * per request was two timer-heap operations each. */
    if (w->claim_timer && uv_is_active((uv_handle_t *)&w->deadline) &&
        uv_timer_get_due_in(&w->deadline) <= first)
        return;
    sandlet_deadline_start(w, on_claim_timer, first);
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
    int rc = sandlet_encode_request(w, c, v, id, &taken);
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
        sandlet_start_first(w);
    } else {
        w->pool->batched++;
        behind_watch(w);
    }
    sandlet_mark_dirty(w);
    /* Before the REQUEST leaves (at the end of this loop turn): the
     * worker may look in its spool file as soon as it reads it. */
    sandlet_tee_begin(w, f, c, v, taken);
    sandlet_body_pump(w);
}

/* How often the queue is checked: a quarter of the limit, so a request
 * waits at most 1.25 times queue-timeout. */
uint64_t sandlet_queue_tick(const sandlet_pool *p)
{
    return p->conf->queue_timeout >= 4 ? p->conf->queue_timeout / 4 : 1;
}

/* Takes the oldest request off the sandbox's queue. */
sandlet_conn *sandlet_queue_pop(sandlet_pool *p)
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
void sandlet_queue_expire(uv_timer_t *t)
{
    sandlet_pool *p = t->data;
    uint64_t now = uv_now(p->srv->loop);
    while (p->qhead &&
           now - sandlet_conn_pool_link(p->qhead)->queued_at >= p->conf->queue_timeout) {
        sandlet_conn *c = sandlet_queue_pop(p);
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
bool sandlet_any_worker_up(const sandlet_pool *p)
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

void sandlet_fail_queue(sandlet_pool *p)
{
    while (p->qhead)
        fail_fast(p, sandlet_queue_pop(p));
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

/* A servlet is slow when its requests ran SANDLET_BEHIND_MS or longer on
 * average lately: a request of it ends a worker's batch.  Collisions in
 * the small table just share a slot (a fast servlet may be taken for slow
 * for a while: it then only batches less). */
static unsigned slow_slot(const void *servlet)
{
    return (unsigned)(((uintptr_t)servlet >> 4) % 64u);
}

bool sandlet_slow(const sandlet_pool *p, const void *servlet)
{
    unsigned i = slow_slot(servlet);
    return p->slow[i].servlet == servlet && p->slow[i].avg8 >= 8u * SANDLET_BEHIND_MS;
}

void sandlet_slow_note(sandlet_pool *p, const void *servlet, uint64_t ms)
{
    unsigned i = slow_slot(servlet);
    uint32_t m = ms > 60000 ? 60000u : (uint32_t)ms;
    if (p->slow[i].servlet != servlet) {
        p->slow[i].servlet = servlet;
        p->slow[i].avg8 = 8 * m;
        return;
    }
    p->slow[i].avg8 = p->slow[i].avg8 - p->slow[i].avg8 / 8 + m;
}

/* Worker i of the pool ctx as sandlet_pick sees it. */
static void view_worker(const void *ctx, unsigned i, sandlet_pick_worker *out)
{
    const sandlet_worker *w = &((const sandlet_pool *)ctx)->workers[i];
    *out = (sandlet_pick_worker){
        .up = (w->state == W_IDLE || w->state == W_BUSY) && w->pipe_open,
        .held_back = w->nrevoked || w->slow || w->recycling,
        .held = w->rcount,
        .last_streams =
            w->rcount && w->ring[(w->rfirst + w->rcount - 1) % w->pool->depth].body_open,
        .last_slow =
            w->rcount &&
            sandlet_slow(w->pool, w->ring[(w->rfirst + w->rcount - 1) % w->pool->depth].servlet),
        .pages_gen = w->pages_gen,
        .served = w->served,
    };
}

/* Whether any worker up runs code older than the pool's newest. */
static bool stale_any(const sandlet_pool *p)
{
    for (unsigned i = 0; i < p->nworkers; i++)
        if (p->workers[i].pipe_open && p->workers[i].pages_gen < p->pages_gen)
            return true;
    return false;
}

/* The worker for a request that needs pages generation gen: the one
 * holding the fewest requests among those that may take one more; NULL
 * when none may (sandlet_pick decides).  A request whose body streams (v->body_open) goes only
 * to a worker holding nothing, and nothing is queued behind it until its
 * body's last frame is: its REQBODY frames must follow it on the channel. */
static sandlet_worker *pick_worker(sandlet_pool *p, const sandlet_request_view *v, uint32_t gen)
{
    unsigned max = p->conf->max_requests;
    sandlet_pick_ask a = {
        .needs = gen,
        .body_open = v->body_open,
        .depth = p->depth,
        .max_requests = max,
        .pages_gen = p->pages_gen,
        /* Looked for only when a worker runs old code (a reload or a
         * page's new version is being rolled out). */
        .fresh_up = stale_any(p) && sandlet_fresh_up(p),
        .recycle_waits = max && !sandlet_may_recycle(p),
        .cpus = p->srv->cpus,
    };
    /* Only when it can matter: a few loads, the clock once a turn. */
    if (a.cpus)
        a.blocking = sandlet_pool_blocks(p);
    unsigned i = sandlet_pick(p->nworkers, view_worker, p, &a);
    return i < p->nworkers ? &p->workers[i] : NULL;
}

/* c's request as a worker gets it; a page's servlet is its view. */
static void request_view(const sandlet_conn *c, sandlet_request_view *v)
{
    sandlet_conn_request_view(c, v);
    if (v->page)
        v->servlet = sandlet_page_servlet(v->page, NULL, NULL);
}

/* Hands c (or, when c is NULL, the queue's head) to an idle worker. */
void sandlet_pool_submit(sandlet_pool *p, sandlet_conn *c)
{
    sandlet_request_view v;
    if (c) {
        sandlet_pool_link *l = sandlet_conn_pool_link(c);
        l->pool = p;
        request_view(c, &v);
        sandlet_worker *w = p->qhead ? NULL : pick_worker(p, &v, needs(c));
        if (!w && p->failing && !sandlet_any_worker_up(p)) {
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
                uv_timer_start(&p->qtimer, sandlet_queue_expire, sandlet_queue_tick(p),
                               sandlet_queue_tick(p));
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
        request_view(p->qhead, &v);
        sandlet_worker *w = pick_worker(p, &v, needs(p->qhead));
        if (!w)
            break;
        send_request(w, sandlet_queue_pop(p), &v);
    }
    sandlet_pool_drain(p);
    sandlet_maybe_grow(p);
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
                sandlet_body_abort(w, f);
            }
        }
        /* Reading may have stopped for this very client; nobody else
         * would start it again, and the worker would block for ever. */
        sandlet_worker_resume(w);
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

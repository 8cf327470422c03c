/*
 * pool.c - the acceptor's side of each sandbox, its workers' lifecycle:
 * a pool made, rebased and retired with the configuration generations,
 * each worker handed over by the supervisor (its channel, output pipe and
 * claim word), lost, killed, reported dead, replaced when its code is out
 * of date or it served max-requests, and the pool grown by extra workers
 * (GROW, within max-workers) while requests wait and shrunk when they
 * idle.
 *
 * Workers are untrusted.  This file never parses HTTP and never forks:
 * starting and killing processes is the supervisor's job.  The supervisor
 * decides what workers load and starts each one, and hands it over (its
 * channel, with INIT already written); this side can only ask for a
 * worker's death over the control socket, close its channel, or ask for
 * the worker of an extra slot (GROW, within max-workers, which the
 * supervisor enforces) when requests wait (sandlet_maybe_grow).  It never
 * chooses which worker takes a request (queue.c) or reads a frame
 * (channel.c).
 */
#include "config.h"

#include "common/log.h"
#include "loop/pool_private.h"
#include "sandbox/control.h"
#include "sandbox/lane.h"

#include <errno.h>
#include <signal.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void pool_maybe_gone(sandlet_pool *p);

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

bool sandlet_worker_extra(const sandlet_worker *w)
{
    return w->slot >= w->pool->conf->workers;
}

/* A request waits in the queue because no worker is free: when the pool
 * may grow (max-workers), ask the supervisor for the worker of one extra
 * slot that is down.  One GROW at a time per pool: the next is asked for
 * only once that worker said READY (and requests still wait), so a burst
 * grows the pool one worker per start instead of to max-workers at once,
 * and a pool whose extras cannot start asks for one at a time. */
void sandlet_maybe_grow(sandlet_pool *p)
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
void sandlet_grow_done(sandlet_worker *w, bool failed)
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
            sandlet_close_pipe(w);
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
void sandlet_idle_watch(sandlet_pool *p)
{
    if (!uv_is_active((uv_handle_t *)&p->idle) && !p->srv->stopping)
        uv_timer_start(&p->idle, on_idle, idle_tick(p), idle_tick(p));
}

/* An idle worker leaves: closing its socketpair makes it run destroy and
 * exit 0, and its EXITED report starts the next one at once (no back-off:
 * this is no crash).  Requests keep going to the other workers. */
void sandlet_worker_retire(sandlet_worker *w, const char *why)
{
    sandlet_debug("worker %d of sandbox '%s': %s; replacing it", (int)w->pid, sandbox_name(w), why);
    sandlet_close_pipe(w);
    w->reqline[0] = '\0';
    w->state = W_DYING;
    w->retired = true;
}

static bool worker_up(const sandlet_worker *w)
{
    return (w->state == W_IDLE || w->state == W_BUSY) && w->pipe_open;
}

/* Whether a worker of the pool's newest code is up. */
bool sandlet_fresh_up(const sandlet_pool *p)
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
bool sandlet_may_replace(sandlet_pool *p)
{
    /* The pool's size now: its workers up, and those not up that count
     * (a normal slot being restarted, an extra starting or leaving); an
     * extra slot that is down is no capacity missing. */
    unsigned up = 0, out = 0;
    for (unsigned i = 0; i < p->nworkers; i++) {
        const sandlet_worker *w = &p->workers[i];
        if (worker_up(w))
            up++;
        else if (!sandlet_worker_extra(w) || w->state != W_DOWN)
            out++;
    }
    unsigned size = up + out;
    if (sandlet_fresh_up(p)) {
        unsigned wave = size / 4 ? size / 4 : 1;
        return out < wave;
    }
    if (p->canary)
        return false;
    return up >= 2 || size == 1;
}

/* A worker's start failed: its servlets did not load or init, or it died
 * before READY.  What it loaded is what is on disk, which a deploy may
 * have changed before the reload that says so reaches us (or with no
 * reload at all): a worker started now would load the same. */
void sandlet_start_failed(sandlet_worker *w)
{
    if (w->start_no > w->pool->failed_start)
        w->pool->failed_start = w->start_no;
}

/* A worker said READY: when it was taken after the newest failed start,
 * what is on disk starts again.  One taken before (it may have loaded
 * older files) proves nothing about what a new one would load. */
void sandlet_start_ok(sandlet_worker *w)
{
    if (w->start_no > w->pool->failed_start)
        w->pool->failed_start = 0;
}

/* Whether a worker past max-requests may be recycled now.  Its successor
 * loads the servlet libraries on disk now: after a failed start they may
 * not load, and recycling the last worker up would leave the sandbox
 * nothing to answer with (CI saw it: a deploy's library that does not
 * load, the lone old worker recycled before the reload's new code
 * generation came, 503).  So, as old workers do while none of the new
 * code is up, the last one serves on past max-requests until a start
 * succeeds; while another is up, one may go and find out.  Not with
 * max-requests 1: that promises each request a process no earlier
 * request touched (sandlet.conf(5), sandlet-security(7)), which a
 * failed start must not take back. */
bool sandlet_may_recycle(const sandlet_pool *p)
{
    if (!p->failed_start || p->conf->max_requests == 1)
        return true;
    unsigned up = 0;
    for (unsigned i = 0; i < p->nworkers; i++)
        up += worker_up(&p->workers[i]);
    return up >= 2;
}

/* A worker said READY: those kept idle past max-requests while it was
 * not up (sandlet_may_recycle) take no request (sandlet_pick) and would
 * idle for ever; they are recycled now if they may be. */
void sandlet_recycle_past_max(sandlet_pool *p)
{
    unsigned max = p->conf->max_requests;
    for (unsigned i = 0; max && i < p->nworkers; i++) {
        sandlet_worker *w = &p->workers[i];
        if (w->state == W_IDLE && w->pipe_open && w->rcount == 0 && w->served >= max)
            sandlet_worker_free(w);
    }
}

/* Replaces the idle stale workers that may go now. */
void sandlet_replace_stale(sandlet_pool *p, const char *why)
{
    for (unsigned i = 0; i < p->nworkers && sandlet_may_replace(p); i++) {
        sandlet_worker *w = &p->workers[i];
        if (w->state == W_IDLE && w->pipe_open && w->pages_gen < p->pages_gen) {
            p->canary = true;
            sandlet_worker_retire(w, why);
        }
    }
}

void sandlet_pool_pages(sandlet_pool *p, uint32_t gen)
{
    if (gen <= p->pages_gen)
        return;
    p->pages_gen = gen;
    p->canary = false;
    sandlet_replace_stale(p, "its code has a new version");
}

/* The worker has nothing to do (its request answered, or the one taken
 * back from it skipped): it is replaced when its code is out of date or
 * it served max-requests, else it takes the next request. */
void sandlet_worker_free(sandlet_worker *w)
{
    unsigned max = w->pool->conf->max_requests;
    if (w->rcount == 0 && w->pages_gen < w->pool->pages_gen && sandlet_may_replace(w->pool)) {
        w->pool->canary = true;
        sandlet_worker_retire(w, "its code is out of date");
        sandlet_pool_submit(w->pool, NULL);
        return;
    }
    /* A worker of old code that comes back loads the code now on disk,
     * which may not start: while none of the new code is up, the old
     * ones serve on past max-requests. */
    bool stale = w->pages_gen < w->pool->pages_gen;
    bool past_max = max && w->served >= max && w->rcount == 0;
    if (past_max && !sandlet_may_recycle(w->pool)) {
        if (!w->past_max_said)
            sandlet_info("worker %d of sandbox '%s' served %u requests (max-requests) and serves "
                         "on: the sandbox's newest worker failed to start, and this one is the "
                         "last up",
                         (int)w->pid, sandbox_name(w), max);
        w->past_max_said = true;
        past_max = false;
    }
    if (past_max && (!stale || sandlet_fresh_up(w->pool))) {
        /* Recycle: closing the socketpair makes the worker run destroy
         * and exit 0; its EXITED report starts the next one at once. */
        sandlet_debug("worker %d of sandbox '%s' served %u requests; recycling it", (int)w->pid,
                      sandbox_name(w), max);
        sandlet_close_pipe(w);
        w->reqline[0] = '\0';
        w->state = W_DYING;
        return;
    }
    if (w->rcount) {
        sandlet_start_first(w);
    } else {
        w->reqline[0] = '\0';
        w->state = W_IDLE;
        w->idle_since = uv_now(w->pool->srv->loop);
    }
    sandlet_pool_submit(w->pool, NULL);
}

static void take_worker(sandlet_worker *w, const sandlet_ctl *m, int channel, int output,
                        sandlet_claim *claim, int spool);

static void pipe_closed(uv_handle_t *h)
{
    sandlet_worker *w = h->data;
    w->pipe_closing = false;
    if (w->next_channel < 0) {
        pool_maybe_gone(w->pool);
        return;
    }
    int channel = w->next_channel, output = w->next_output, spool = w->next_spool;
    sandlet_claim *claim = w->next_claim;
    w->next_channel = w->next_output = w->next_spool = -1;
    w->next_claim = NULL;
    if (w->pool->srv->stopping) {
        close(channel);
        if (output >= 0)
            close(output);
        if (spool >= 0)
            close(spool);
        sandlet_claim_unmap(claim);
        return;
    }
    take_worker(w, &w->next, channel, output, claim, spool);
}

void sandlet_close_pipe(sandlet_worker *w)
{
    /* Its spool file goes with it (once the worker's own copy is closed
     * too, by its exit). */
    if (w->spool_fd >= 0)
        close(w->spool_fd);
    w->spool_fd = -1;
    w->spool_len = 0;
    if (!w->pipe_open)
        return;
    /* The worker sleeps on its lane's doorbell, not on the socketpair. */
    sandlet_lane_bell_close(&w->tx);
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
    if (w->state == W_STARTING)
        sandlet_start_failed(w); /* died, or was killed, before READY */
    sandlet_close_pipe(w);
    uv_timer_stop(&w->deadline);
    uv_timer_stop(&w->behind);
    if (w->state != W_DOWN)
        w->state = W_DYING;
    unsigned n = w->rcount, first = w->rfirst;
    if (n && !held(w, 0)->revoked)
        sandlet_pool_observe(p, held(w, 0)->started);
    unsigned moved = n && w->claim ? sandlet_revoke_from(w, 0) : 0;
    /* Forgotten before any client is answered: answering may hand that
     * client's next request to a worker, never this one again. */
    w->rcount = 0;
    w->nrevoked = 0;
    w->slow = false;
    for (unsigned i = 0; i < n; i++) {
        sandlet_inflight *f = &w->ring[(first + i) % depth(w)];
        sandlet_tee_end(w, f);
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

void sandlet_worker_lost(sandlet_worker *w)
{
    worker_lost_status(w, w->timed_out ? 504 : 502);
}

/* The worker cannot be trusted or used any more: the supervisor kills it
 * (by slot and generation, never by pid) and what it held fails with
 * status (0: 504 when it ran out of time, else 502). */
void sandlet_kill_worker(sandlet_worker *w, int status)
{
    sandlet_server_control(w->pool->srv, SANDLET_CTL_KILL, w->pool->id, w->slot, w->gen, SIGKILL);
    if (status)
        worker_lost_status(w, status);
    else
        sandlet_worker_lost(w);
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
    } else if (w->retired && sandlet_worker_extra(w)) {
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
    sandlet_grow_done(w, true);
    sandlet_worker_lost(w);
    w->state = W_DOWN;
    w->pid = 0;
    w->reqline[0] = '\0';
    sandlet_pool_drain(w->pool);
    /* An extra slot is not restarted by the supervisor: when requests
     * still wait, the pool asks for one itself. */
    sandlet_maybe_grow(w->pool);
}

void sandlet_pool_worker(sandlet_server *srv, const sandlet_ctl *m, int channel, int output,
                         int claim_fd, int spool)
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
        if (spool >= 0)
            close(spool);
        sandlet_claim_unmap(claim);
        return;
    }
    sandlet_worker *w = &p->workers[m->slot];
    if (w->pipe_open || w->state != W_DOWN) {
        /* Its predecessor's exit report was lost or is late: whatever it
         * held failed. */
        sandlet_worker_lost(w);
    }
    if (w->next_channel >= 0) {
        /* Superseded before it was taken (cannot happen while the
         * supervisor keeps one live worker per slot). */
        close(w->next_channel);
        if (w->next_output >= 0)
            close(w->next_output);
        if (w->next_spool >= 0)
            close(w->next_spool);
        sandlet_claim_unmap(w->next_claim);
        w->next_channel = w->next_output = w->next_spool = -1;
        w->next_claim = NULL;
    }
    if (w->pipe_closing) {
        /* The handle is reused: libuv must be done closing it first. */
        w->next = *m;
        w->next_channel = channel;
        w->next_output = output;
        w->next_spool = spool;
        w->next_claim = claim;
        return;
    }
    take_worker(w, m, channel, output, claim, spool);
}

static void take_worker(sandlet_worker *w, const sandlet_ctl *m, int channel, int output,
                        sandlet_claim *claim, int spool)
{
    sandlet_pool *p = w->pool;
    sandlet_server *srv = p->srv;
    /* An extra's start is growth, not a restart. */
    if (sandlet_worker_extra(w))
        p->grown++;
    else if (w->gen > 0)
        p->restarts++;
    w->gen = m->gen;
    w->pid = m->pid;
    w->pages_gen = m->pages;
    w->start_no = ++p->starts;
    w->past_max_said = false;
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
    sandlet_lanes_open(sandlet_claim_lanes(claim), true, &w->tx, &w->rx);
    if (w->spool_fd >= 0)
        close(w->spool_fd);
    w->spool_fd = spool;
    w->spool_len = 0;
    sandlet_buf_reset(&w->in);
    sandlet_buf_reset(&w->out);
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
        rc = uv_read_start((uv_stream_t *)&w->pipe, sandlet_worker_alloc, sandlet_worker_read);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot read worker %d of sandbox '%s'",
                          (int)w->pid, sandbox_name(w));
        sandlet_kill_worker(w, 0);
        return;
    }
    w->reading = true;
    /* Its READY may be in its lane already, written before it had
     * anyone to ring. */
    sandlet_lanes_watch(w);
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
    if (m->type == SANDLET_CTL_SPAWN_FAILED && sandlet_worker_extra(w) && w->state == W_DOWN)
        sandlet_grow_done(w, true);
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
        free(p->workers[j].ring);
        sandlet_claim_unmap(p->workers[j].claim);
        sandlet_claim_unmap(p->workers[j].next_claim);
        if (p->workers[j].spool_fd >= 0)
            close(p->workers[j].spool_fd);
        if (p->workers[j].next_spool >= 0)
            close(p->workers[j].next_spool);
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
    /* Before anything can fail: pool_free closes what is not -1. */
    for (unsigned j = 0; j < p->nworkers; j++)
        p->workers[j].next_spool = p->workers[j].spool_fd = -1;
    for (unsigned j = 0; j < p->nworkers; j++) {
        sandlet_worker *w = &p->workers[j];
        w->pool = p;
        w->slot = j;
        w->state = W_DOWN;
        w->next_channel = w->next_output = -1;
        sandlet_buf_init(&w->in, SANDLET_FRAME_HEADER + SANDLET_FRAME_MAX + READ_CHUNK);
        sandlet_buf_init(&w->out, 0);
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
    /* Always on, and never what keeps the loop running. */
    uv_check_init(srv->loop, &p->lanes_awake);
    p->lanes_awake.data = p;
    uv_check_start(&p->lanes_awake, sandlet_lanes_awake);
    uv_unref((uv_handle_t *)&p->lanes_awake);
    uv_prepare_init(srv->loop, &p->lanes_asleep);
    p->lanes_asleep.data = p;
    uv_prepare_start(&p->lanes_asleep, sandlet_lanes_asleep);
    uv_unref((uv_handle_t *)&p->lanes_asleep);
    uv_idle_init(srv->loop, &p->lanes_look);
    p->lanes_look.data = p;
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
        uv_timer_start(&p->qtimer, sandlet_queue_expire, sandlet_queue_tick(p),
                       sandlet_queue_tick(p));
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
    p->closing = 7 + 2 * p->nworkers;
    uv_close((uv_handle_t *)&p->lanes_awake, pool_handle_closed);
    uv_close((uv_handle_t *)&p->lanes_asleep, pool_handle_closed);
    uv_close((uv_handle_t *)&p->lanes_look, pool_handle_closed);
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
void sandlet_pool_drain(sandlet_pool *p)
{
    if (!p->retired || p->srv->stopping)
        return;
    if (p->qhead) {
        bool coming = false;
        for (unsigned j = 0; j < p->nworkers && !coming; j++)
            coming = p->workers[j].state != W_DOWN && p->workers[j].state != W_DYING &&
                     !sandlet_worker_stalled(&p->workers[j]); /* may never run again */
        if (coming)
            return;
        /* Nothing of the sandbox will start again (the supervisor
         * restarts no worker of a retired sandbox): what waits goes where
         * the configuration now sends it. */
        uv_timer_stop(&p->qtimer);
        while (p->qhead) {
            sandlet_conn *c = sandlet_queue_pop(p);
            sandlet_pool_link_reset(sandlet_conn_pool_link(c));
            sandlet_conn_redispatch(c);
        }
    }
    for (unsigned j = 0; j < p->nworkers; j++) {
        sandlet_worker *w = &p->workers[j];
        if ((w->state == W_IDLE || w->state == W_STARTING) && w->rcount == 0 && w->pipe_open)
            sandlet_worker_retire(w, "a reload changed or removed its sandbox");
    }
    pool_maybe_gone(p);
}

void sandlet_pool_retire(sandlet_pool *p)
{
    p->retired = true;
    sandlet_pool_drain(p);
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
        if (!uv_is_closing((uv_handle_t *)&p->lanes_awake))
            uv_close((uv_handle_t *)&p->lanes_awake, NULL);
        if (!uv_is_closing((uv_handle_t *)&p->lanes_asleep))
            uv_close((uv_handle_t *)&p->lanes_asleep, NULL);
        if (!uv_is_closing((uv_handle_t *)&p->lanes_look))
            uv_close((uv_handle_t *)&p->lanes_look, NULL);
        for (unsigned j = 0; p->workers && j < p->nworkers; j++) {
            sandlet_worker *w = &p->workers[j];
            /* Closing the socketpair is the worker's signal to run its
             * servlets' destroy and exit. */
            sandlet_worker_lost(w);
            if (!uv_is_closing((uv_handle_t *)&w->deadline))
                uv_close((uv_handle_t *)&w->deadline, NULL);
            if (!uv_is_closing((uv_handle_t *)&w->behind))
                uv_close((uv_handle_t *)&w->behind, NULL);
        }
    }
}

void sandlet_pools_free(sandlet_server *srv)
{
    while (srv->pools) {
        sandlet_pool *p = srv->pools;
        srv->pools = p->next;
        pool_free(p);
    }
}

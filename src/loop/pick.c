/*
 * pick.c - the queue's decisions (see pick.h): which worker takes a
 * request, which held requests are taken back and when.
 *
 * Pure functions of what they are given, apart from the claim word's
 * compare-and-swap: they must never touch a connection, a timer or the
 * log, nor read the claim word but through claim.h, so that they can be
 * tested without a daemon (tests/unit/test_queue.c).
 */
#include "config.h"

#include "loop/acceptor.h"
#include "loop/pick.h"

unsigned sandlet_pick(unsigned n, sandlet_pick_view *view, const void *ctx,
                      const sandlet_pick_ask *a)
{
    unsigned idle = n, busy = n, busy_held = 0, holding = 0;
    for (unsigned i = 0; i < n; i++) {
        sandlet_pick_worker w;
        view(ctx, i, &w);
        if (w.up && w.held)
            holding++;
        if (!w.up || w.held_back)
            continue;
        if (w.pages_gen < a->needs)
            continue; /* started before the page's version: being replaced */
        /* Nothing queues behind a request of a servlet known to be slow:
         * it would wait there until on_behind takes it back, and with
         * slow clients on every worker, fast requests went round and
         * round (39 req/s beside four 50 ms clients on two workers). */
        if (w.held >= a->depth || (w.held && (a->body_open || w.last_streams || w.last_slow)))
            continue;
        /* A worker of old code is replaced only once it holds nothing:
         * while one of the new code is up, nothing more queues behind
         * what it holds, or a steady load would keep it for ever. */
        if (w.held && w.pages_gen < a->pages_gen && a->fresh_up)
            continue;
        /* Past max-requests a worker is recycled, unless it runs old code
         * and none of the new is up, or its successor may not start and
         * it is the last worker up (sandlet_worker_free): then it serves
         * on, or nothing would. */
        if (a->max_requests && w.served + w.held >= a->max_requests &&
            (w.pages_gen >= a->pages_gen || a->fresh_up) && !a->recycle_waits)
            continue;
        if (w.held == 0) {
            if (idle == n)
                idle = i;
        } else if (busy == n || w.held < busy_held) {
            busy = i;
            busy_held = w.held;
        }
    }
    if (busy < n && (idle == n || (a->cpus && holding >= a->cpus && !a->blocking)))
        return busy;
    return idle;
}

static sandlet_inflight *at(const sandlet_held *h, unsigned i)
{
    return &h->ring[(h->first + i) % h->depth];
}

unsigned sandlet_pick_revoke(sandlet_claim *claim, const sandlet_held *h, unsigned from,
                             unsigned *out)
{
    unsigned n = 0;
    for (unsigned i = h->count; i-- > from;) {
        sandlet_inflight *f = at(h, i);
        if (f->revoked)
            continue;
        if (!sandlet_claim_revoke(claim, f->id))
            break;
        f->revoked = true;
        out[n++] = i;
    }
    return n;
}

enum sandlet_behind sandlet_pick_behind(sandlet_claim *claim, const sandlet_held *h, uint32_t *mark,
                                        unsigned *from)
{
    if (h->count < 2 || at(h, 0)->revoked)
        return SANDLET_BEHIND_STOP;
    unsigned k = 0;
    while (k < h->count && !at(h, k)->revoked && sandlet_claim_taken(claim, at(h, k)->id))
        k++;
    if (k == h->count || at(h, k)->revoked)
        return SANDLET_BEHIND_STOP;
    uint32_t id = at(h, k)->id;
    if (k == 0 || id != *mark) {
        /* Moving, or not started at all (the claim check's case). */
        *mark = id;
        return SANDLET_BEHIND_WAIT;
    }
    *from = k;
    return SANDLET_BEHIND_TAKE_BACK;
}

enum sandlet_claim_next sandlet_pick_claim(bool claimed, uint64_t ran, unsigned timeout)
{
    if (claimed)
        return SANDLET_CLAIM_RUN;
    if (ran < SANDLET_CLAIM_MS && (!timeout || ran < timeout))
        return SANDLET_CLAIM_WAIT;
    return SANDLET_CLAIM_REVOKE;
}

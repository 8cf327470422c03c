/*
 * pick.h - the decisions of a sandbox's queue (queue.c), as functions of
 * plain structs: which worker takes a request, which requests a worker
 * holds are taken back, and when.  No libuv, no connection, no clock and
 * no log: queue.c hands them what it sees, tests/unit/test_queue.c drives
 * them without a daemon.  The only shared state they touch is the claim
 * word (claim.h), through its compare-and-swap, so that a request is never
 * both taken back and claimed.
 */
#ifndef SANDLET_LOOP_PICK_H
#define SANDLET_LOOP_PICK_H

#include "sandbox/claim.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct sandlet_inflight sandlet_inflight;

/* ---- which worker takes a request ------------------------------------- */

/* A worker as the choice sees it. */
typedef struct sandlet_pick_worker {
    bool up;           /* idle or busy, its channel open */
    bool held_back;    /* owes a SKIP, was found slow, or is being recycled */
    unsigned held;     /* requests written to it and not answered */
    bool last_streams; /* the last of them still has a body streaming */
    bool last_slow;    /* the last of them is of a servlet known to be slow */
    uint32_t pages_gen;
    uint64_t served; /* by this incarnation, for max-requests */
} sandlet_pick_worker;

/* The request to place, and what of its pool the choice needs. */
typedef struct sandlet_pick_ask {
    uint32_t needs;        /* the pages generation it needs: 0 for a servlet */
    bool body_open;        /* its body streams behind its REQUEST */
    unsigned depth;        /* how many requests a worker may hold ("pipeline") */
    unsigned max_requests; /* 0: no limit */
    uint32_t pages_gen;    /* the pool's newest code generation */
    bool fresh_up;         /* a worker of that generation is up */
    /* No worker is recycled for max-requests now: the pool's newest
     * start failed and one worker at most is up (sandlet_may_recycle). */
    bool recycle_waits;
    /* The CPUs the daemon may run on (0: unknown), and whether the pool's
     * servlets were seen to block lately (sandlet_pool_blocks): with as
     * many workers holding requests as there are CPUs, and servlets that
     * do not block, the next request goes behind one of them rather than
     * to a worker that would have to be woken for it. */
    unsigned cpus;
    bool blocking;
} sandlet_pick_ask;

/* Describes worker i of the pool into *w. */
typedef void sandlet_pick_view(const void *ctx, unsigned i, sandlet_pick_worker *w);

/* The worker of n for the request a: the first one holding nothing among
 * those that may take one more, else the one holding the fewest; n when
 * none may.  But when at least a->cpus workers hold requests and the
 * pool's servlets do not block, the fewest-holding of those that may take
 * one more, if any: more workers running than CPUs only take turns on
 * them, and each costs a wake-up and two context switches a batch (7% of
 * a hello request's CPU with two workers on one core).  A streamed body
 * goes only to a worker holding nothing, and nothing goes behind one: its
 * REQBODY frames must follow it on the channel. */
unsigned sandlet_pick(unsigned n, sandlet_pick_view *view, const void *ctx,
                      const sandlet_pick_ask *a);

/* ---- which requests go back, and when --------------------------------- */

/* The requests a worker holds, oldest first: count entries of a ring of
 * depth, from first.  Position 0 is the one it serves. */
typedef struct sandlet_held {
    sandlet_inflight *ring;
    unsigned depth, first, count;
} sandlet_held;

/* Takes back, newest first, the requests at positions from.. not taken
 * back yet, as long as the acceptor's revoke wins over the worker's claim
 * (claim.h): the worker claims in order, so once one is claimed, those
 * before it are too, and the walk stops.  Each one taken back is marked
 * revoked; its position is written to out (newest first, at most count).
 * Returns how many. */
unsigned sandlet_pick_revoke(sandlet_claim *claim, const sandlet_held *h, unsigned from,
                             unsigned *out);

/* What one look at a worker holding requests behind the one it serves
 * says (every SANDLET_BEHIND_MS, queue.c). */
enum sandlet_behind {
    SANDLET_BEHIND_STOP,      /* nothing waits behind: stop looking */
    SANDLET_BEHIND_WAIT,      /* it made progress since the last look, or none was made yet */
    SANDLET_BEHIND_TAKE_BACK, /* no progress between two looks: take back from *from on */
};

/* *mark is the first request not claimed at the previous look (0: none
 * yet), updated here.  The worker made no progress when it is the same
 * one at this look and it is not the one being served (that one is the
 * claim check's: sandlet_pick_claim). */
enum sandlet_behind sandlet_pick_behind(sandlet_claim *claim, const sandlet_held *h, uint32_t *mark,
                                        unsigned *from);

/* What to do about the request a worker serves, ran ms after it became
 * its first, with the servlet's timeout (0: none) and claimed: whether
 * the worker's claim was seen. */
enum sandlet_claim_next {
    SANDLET_CLAIM_WAIT,   /* not claimed yet, still in time: look again */
    SANDLET_CLAIM_REVOKE, /* not claimed within SANDLET_CLAIM_MS (or its timeout): take it back */
    SANDLET_CLAIM_RUN,    /* claimed: its timeout runs */
};
enum sandlet_claim_next sandlet_pick_claim(bool claimed, uint64_t ran, unsigned timeout);

#endif

/*
 * pool_private.h - what the files of the worker pool share, and nothing
 * else may include: pool.c (workers' lifecycle), queue.c (the queue, the
 * hand-over and the take-back), channel.c (frames to and from a worker)
 * and stream.c (streamed request bodies).  The structs are in acceptor.h;
 * the pure decisions the queue takes (which worker, which requests go
 * back) are in pick.h, testable without a daemon.
 */
#ifndef SANDLET_LOOP_POOL_PRIVATE_H
#define SANDLET_LOOP_POOL_PRIVATE_H

#include "loop/acceptor.h"
#include "loop/pick.h"
#include "loop/pool.h"

#include <stdbool.h>
#include <stdint.h>

/* Read from a worker's channel at most this much at a time. */
#define READ_CHUNK ((size_t)64 * 1024)

static inline const char *sandbox_name(const sandlet_worker *w)
{
    return w->pool->conf->name;
}

/* A worker may be handed up to its pool's depth ("pipeline") requests
 * before it has answered the first: all that one loop turn has for it
 * leaves in one write, and it serves them one after the other without
 * sleeping in between, which is what makes a hand-off to another process
 * cheaper than a request.  They wait in its lane, not in its memory
 * (worker.c copies one frame at a time), each with a claim word of its own
 * (claim.h): one that waits too long behind a slow request (on_behind) or
 * at a stopped worker (check_claim) is taken back and served elsewhere. */
_Static_assert(2 * SANDLET_MAX_PIPELINE <= SANDLET_CLAIM_WORDS,
               "every request in flight at a worker needs a claim word of its own");

static inline unsigned depth(const sandlet_worker *w)
{
    return w->pool->depth;
}

/* The i-th request the worker holds; 0 is the one it is serving. */
static inline sandlet_inflight *held(sandlet_worker *w, unsigned i)
{
    return &w->ring[(w->rfirst + i) % depth(w)];
}

/* All the requests the worker holds, for pick.c. */
static inline sandlet_held held_all(sandlet_worker *w)
{
    return (sandlet_held){
        .ring = w->ring, .depth = depth(w), .first = w->rfirst, .count = w->rcount};
}

/* ---- pool.c ---------------------------------------------------------------- */

bool sandlet_worker_extra(const sandlet_worker *w);
void sandlet_maybe_grow(sandlet_pool *p);
void sandlet_grow_done(sandlet_worker *w, bool failed);
void sandlet_idle_watch(sandlet_pool *p);
void sandlet_worker_retire(sandlet_worker *w, const char *why);
bool sandlet_fresh_up(const sandlet_pool *p);
/* Whether requests of servlet (a configuration view) ran long lately,
 * and one more such request took ms (queue.c). */
bool sandlet_slow(const sandlet_pool *p, const void *servlet);
void sandlet_slow_note(sandlet_pool *p, const void *servlet, uint64_t ms);
bool sandlet_may_replace(sandlet_pool *p);
bool sandlet_may_recycle(const sandlet_pool *p);
void sandlet_start_failed(sandlet_worker *w);
void sandlet_start_ok(sandlet_worker *w);
void sandlet_recycle_past_max(sandlet_pool *p);
void sandlet_replace_stale(sandlet_pool *p, const char *why);
void sandlet_worker_free(sandlet_worker *w);
void sandlet_close_pipe(sandlet_worker *w);
void sandlet_worker_lost(sandlet_worker *w);
void sandlet_kill_worker(sandlet_worker *w, int status);
void sandlet_pool_drain(sandlet_pool *p);

/* ---- queue.c --------------------------------------------------------------- */
void sandlet_deadline_start(sandlet_worker *w, uv_timer_cb cb, uint64_t ms);

void sandlet_on_deadline(uv_timer_t *t);
bool sandlet_worker_stalled(sandlet_worker *w);
unsigned sandlet_revoke_from(sandlet_worker *w, unsigned from);
void sandlet_start_first(sandlet_worker *w);
uint64_t sandlet_queue_tick(const sandlet_pool *p);
sandlet_conn *sandlet_queue_pop(sandlet_pool *p);
void sandlet_queue_expire(uv_timer_t *t);
bool sandlet_any_worker_up(const sandlet_pool *p);
void sandlet_fail_queue(sandlet_pool *p);

/* ---- channel.c ------------------------------------------------------------- */

void sandlet_mark_dirty(sandlet_worker *w);
int sandlet_encode_request(sandlet_worker *w, const sandlet_conn *c, const sandlet_request_view *v,
                           uint32_t id, size_t *taken);
void sandlet_pool_observe(sandlet_pool *p, uint64_t started);
void sandlet_worker_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void sandlet_worker_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
void sandlet_worker_resume(sandlet_worker *w);
void sandlet_lanes_watch(sandlet_worker *w);
/* Whether p's servlets count as ones that block (pick.h): a worker noted
 * one in the last second (lane.h).  Reads every worker's note. */
bool sandlet_pool_blocks(sandlet_pool *p);
void sandlet_lanes_look(uv_idle_t *h);
void sandlet_lanes_asleep(uv_prepare_t *h);
void sandlet_lanes_awake(uv_check_t *h);

/* ---- stream.c -------------------------------------------------------------- */

bool sandlet_request_started(sandlet_worker *w);
void sandlet_body_pump(sandlet_worker *w);
void sandlet_body_abort(sandlet_worker *w, sandlet_inflight *f);
void sandlet_body_written(sandlet_worker *w);
/* The spool copy (the tee) of f's body, just handed to w with the view v
 * (taken: the bytes its REQUEST carries): begun when its body streams, is
 * a multipart form and fits the sandbox's spool-size.  sandlet_tee_end
 * when f leaves w, however (answered, taken back, lost): gives back its
 * share of spool-size and empties the file. */
void sandlet_tee_begin(sandlet_worker *w, sandlet_inflight *f, const sandlet_conn *c,
                       const sandlet_request_view *v, size_t taken);
void sandlet_tee_end(sandlet_worker *w, sandlet_inflight *f);

#endif

/*
 * lane.h - the shared-memory lanes between the acceptor and one worker:
 * two byte streams in the pages after the claim words (claim.h), one for
 * the frames the acceptor sends (requests, bodies), one for the frames
 * the worker sends back.  A doorbell says "look at your lane", and is
 * rung only when the other side said it is going to sleep.  The worker's
 * doorbells are a byte on its socketpair, which the acceptor's loop
 * polls with its clients; the acceptor's are a futex wake on a counter
 * in the control page, which the worker sleeps on.
 *
 * Why a futex that way: the worker sleeps on nothing else, and a
 * hand-off between two processes on one core costs 1.3 us through a
 * futex against 2.5 us through a unix socketpair (make bench-floor).  The
 * socketpair stays for the worker's doorbells and for ends: the acceptor
 * sees the worker's end of file, and the worker looks for the
 * acceptor's (SANDLET_LANE_LOOK_MS) should the acceptor's process end
 * without saying so in the control page.
 *
 * Why: a frame through a socket costs both sides a system call, a copy
 * into the kernel and out, and a wake-up, per request.  Through a lane it
 * costs a copy; a batch of requests queued for a busy worker, and the
 * answers it writes while the acceptor is busy, cost no system call.
 *
 * What a worker may read here it could read before in its socket's
 * buffer: its own sandbox's traffic.  Its own buffers still never hold a
 * request it has not started: it copies one frame at a time out of the
 * lane (worker.c), and the lane lies between guard pages (claim.c), so
 * a servlet's over-read of a heap or stack buffer cannot run into it.
 *
 * The worker is untrusted and may write anything anywhere in these
 * pages.  Each side keeps its own position privately and never reads it
 * back; the other side's position is only ever used as a count, checked
 * against the lane's size (a count that cannot be is -EPROTO, and the
 * acceptor kills the worker); data is copied out before it is decoded,
 * and every index is masked.  A flag a worker scribbles on costs at most
 * a doorbell more or one the worker then misses.
 */
#ifndef SANDLET_LANE_H
#define SANDLET_LANE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Bytes in each lane: a power of two.  A hundred queued hello requests
 * take 16 KiB; larger frames (bodies, large answers) stream through with
 * doorbells, as through a socket buffer of this size. */
#define SANDLET_LANE_SIZE ((size_t)128 * 1024)

/* The lanes' control page and their data, after the claim page. */
#define SANDLET_LANES_BYTES (4096 + 2 * SANDLET_LANE_SIZE)

/* The shared state of one lane.  Each word on a cache line of its own:
 * the producer writes head and reads tail, the consumer the reverse. */
typedef struct sandlet_lane_ctl {
    _Alignas(64) _Atomic uint32_t head;       /* bytes ever published (producer) */
    _Alignas(64) _Atomic uint32_t tail;       /* bytes ever consumed (consumer) */
    _Alignas(64) _Atomic uint32_t wants_data; /* consumer: ring me once you publish */
    _Alignas(64) _Atomic uint32_t wants_room; /* producer: ring me once you consume */
    /* The acceptor's doorbells to the worker, in the worker's lane's
     * control only: rings counted (the futex word) and its end. */
    _Alignas(64) _Atomic uint32_t bell;
    _Atomic uint32_t closed;
    /* When a request whose servlet blocked (slept in the kernel: a
     * database, a file, a sleep) last ended, CLOCK_MONOTONIC ns, 0 for
     * never: written by the worker in its own lane's control only.  A
     * hint for the acceptor's choice of worker (pick.h), which a worker
     * that lies about it can only spoil for its own sandbox. */
    _Alignas(64) _Atomic uint64_t blocked_at;
} sandlet_lane_ctl;

/* One side's end of one lane. */
typedef struct sandlet_lane {
    sandlet_lane_ctl *ctl;
    unsigned char *data;
    uint32_t pos; /* this side's own position, never read back from ctl */
} sandlet_lane;

/* The ends of the two lanes for one side, in the mapping that starts at
 * the claim page (lanes, the bytes after it, as claim.c maps them).
 * tx is the lane this side writes, rx the one it reads. */
void sandlet_lanes_open(void *lanes, bool acceptor, sandlet_lane *tx, sandlet_lane *rx);

/* Producer: copies up to len bytes of p in and publishes them.  Returns
 * the bytes taken (0: the lane is full), or -EPROTO when the consumer's
 * position is impossible. */
ssize_t sandlet_lane_put(sandlet_lane *l, const void *p, size_t len);
/* Consumer: copies up to max bytes out and frees their room.  Returns
 * the bytes copied (0: empty), or -EPROTO when the producer's position is
 * impossible. */
ssize_t sandlet_lane_get(sandlet_lane *l, void *dst, size_t max);
/* Consumer: bytes waiting (-EPROTO as above). */
ssize_t sandlet_lane_avail(sandlet_lane *l);

/* Going to sleep: asks the other side for a doorbell, then looks again.
 * True when there is data (room) after all: do not sleep. */
bool sandlet_lane_wait_data(sandlet_lane *l);
bool sandlet_lane_wait_room(sandlet_lane *l);
/* The consumer is awake and will look by itself: no doorbell needed. */
void sandlet_lane_awake(sandlet_lane *l);
/* After a put (get): whether the other side asked for a doorbell; the
 * request is taken, so one doorbell answers it. */
bool sandlet_lane_ring_consumer(sandlet_lane *l);
bool sandlet_lane_ring_producer(sandlet_lane *l);

/* The acceptor's doorbells, on the lane to the worker (tx for the
 * acceptor, rx for the worker).  The worker reads the count before its
 * last look (sandlet_lane_wait_data or _room), then sleeps while it has
 * not moved: a ring between the look and the sleep is never missed. */
#define SANDLET_LANE_LOOK_MS 1000 /* the worker's sleep between looks for the acceptor's end */
uint32_t sandlet_lane_bell_count(sandlet_lane *l);
void sandlet_lane_bell_ring(sandlet_lane *l);
/* The acceptor is done with the worker: its wait says so (once rung). */
void sandlet_lane_bell_close(sandlet_lane *l);
/* Sleeps while the count is still count, for timeout_ms at most.
 * Returns 1 when rung, 0 when closed, -ETIMEDOUT, or another -errno. */
int sandlet_lane_bell_wait(sandlet_lane *l, uint32_t count, int timeout_ms);

#endif /* SANDLET_LANE_H */

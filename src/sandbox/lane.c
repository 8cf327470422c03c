/*
 * lane.c - the shared-memory lanes between the acceptor and one worker
 * (see lane.h for the protocol and why).  It must never take an index or
 * a length from shared memory without checking it against the lane's
 * size, and never read this side's own position back from it.
 */
#include "config.h"

#include "sandbox/lane.h"

#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert((SANDLET_LANE_SIZE & (SANDLET_LANE_SIZE - 1)) == 0,
               "a lane's size is a power of two: positions are masked");
_Static_assert(SANDLET_LANE_SIZE <= (size_t)1 << 30, "positions are 32-bit counters");
_Static_assert(2 * sizeof(sandlet_lane_ctl) <= 4096, "both lanes' control fits one page");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "shared words need lock-free atomics");

#define MASK ((uint32_t)(SANDLET_LANE_SIZE - 1))

void sandlet_lanes_open(void *lanes, bool acceptor, sandlet_lane *tx, sandlet_lane *rx)
{
    sandlet_lane_ctl *ctl = lanes;
    unsigned char *data = (unsigned char *)lanes + 4096;
    /* Lane 0 carries the acceptor's frames, lane 1 the worker's. */
    sandlet_lane *to_worker = acceptor ? tx : rx, *to_acceptor = acceptor ? rx : tx;
    *to_worker = (sandlet_lane){.ctl = &ctl[0], .data = data};
    *to_acceptor = (sandlet_lane){.ctl = &ctl[1], .data = data + SANDLET_LANE_SIZE};
}

/* Both positions only ever grow: the distance from the other side's is
 * what is in the lane, and more than the lane holds cannot be. */
ssize_t sandlet_lane_put(sandlet_lane *l, const void *p, size_t len)
{
    uint32_t tail = atomic_load_explicit(&l->ctl->tail, memory_order_acquire);
    uint32_t used = l->pos - tail;
    if (used > SANDLET_LANE_SIZE)
        return -EPROTO;
    size_t room = SANDLET_LANE_SIZE - used;
    size_t n = len < room ? len : room;
    if (n == 0)
        return 0;
    size_t at = l->pos & MASK, first = SANDLET_LANE_SIZE - at;
    if (first > n)
        first = n;
    memcpy(l->data + at, p, first);
    memcpy(l->data, (const unsigned char *)p + first, n - first);
    l->pos += (uint32_t)n;
    atomic_store_explicit(&l->ctl->head, l->pos, memory_order_release);
    return (ssize_t)n;
}

ssize_t sandlet_lane_avail(sandlet_lane *l)
{
    uint32_t head = atomic_load_explicit(&l->ctl->head, memory_order_acquire);
    uint32_t avail = head - l->pos;
    if (avail > SANDLET_LANE_SIZE)
        return -EPROTO;
    return (ssize_t)avail;
}

ssize_t sandlet_lane_get(sandlet_lane *l, void *dst, size_t max)
{
    ssize_t avail = sandlet_lane_avail(l);
    if (avail <= 0)
        return avail;
    size_t n = (size_t)avail < max ? (size_t)avail : max;
    if (n == 0)
        return 0;
    size_t at = l->pos & MASK, first = SANDLET_LANE_SIZE - at;
    if (first > n)
        first = n;
    memcpy(dst, l->data + at, first);
    memcpy((unsigned char *)dst + first, l->data, n - first);
    l->pos += (uint32_t)n;
    atomic_store_explicit(&l->ctl->tail, l->pos, memory_order_release);
    return (ssize_t)n;
}

/* The flag is written, then the lane read, each side the other way round
 * (publish, then read the flag), both with a full fence between: one of
 * the two sees the other's write, so a doorbell is never missed. */
bool sandlet_lane_wait_data(sandlet_lane *l)
{
    atomic_store_explicit(&l->ctl->wants_data, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    return sandlet_lane_avail(l) != 0;
}

bool sandlet_lane_wait_room(sandlet_lane *l)
{
    atomic_store_explicit(&l->ctl->wants_room, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    uint32_t tail = atomic_load_explicit(&l->ctl->tail, memory_order_acquire);
    /* An impossible tail is "room": the put that follows reports it. */
    return l->pos - tail != SANDLET_LANE_SIZE;
}

void sandlet_lane_awake(sandlet_lane *l)
{
    atomic_store_explicit(&l->ctl->wants_data, 0, memory_order_relaxed);
}

static bool take_wish(_Atomic uint32_t *flag)
{
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(flag, memory_order_relaxed) != 0 &&
           atomic_exchange_explicit(flag, 0, memory_order_relaxed) != 0;
}

bool sandlet_lane_ring_consumer(sandlet_lane *l)
{
    return take_wish(&l->ctl->wants_data);
}

bool sandlet_lane_ring_producer(sandlet_lane *l)
{
    return take_wish(&l->ctl->wants_room);
}

uint32_t sandlet_lane_bell_count(sandlet_lane *l)
{
    /* Before the look that follows: acquire keeps the look after it. */
    return atomic_load_explicit(&l->ctl->bell, memory_order_acquire);
}

/* Not FUTEX_PRIVATE_FLAG: the word is in a mapping two processes share.
 * A wake that fails wakes nobody, which the worker's timed sleep covers. */
void sandlet_lane_bell_ring(sandlet_lane *l)
{
    atomic_fetch_add_explicit(&l->ctl->bell, 1, memory_order_seq_cst);
    (void)syscall(SYS_futex, (uint32_t *)&l->ctl->bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

void sandlet_lane_bell_close(sandlet_lane *l)
{
    atomic_store_explicit(&l->ctl->closed, 1, memory_order_seq_cst);
    sandlet_lane_bell_ring(l);
}

int sandlet_lane_bell_wait(sandlet_lane *l, uint32_t count, int timeout_ms)
{
    if (atomic_load_explicit(&l->ctl->closed, memory_order_acquire))
        return 0;
    struct timespec ts = {.tv_sec = timeout_ms / 1000,
                          .tv_nsec = (long)(timeout_ms % 1000) * 1000000};
    if (syscall(SYS_futex, (uint32_t *)&l->ctl->bell, FUTEX_WAIT, count, &ts, NULL, 0) < 0 &&
        errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT)
        return -errno;
    if (atomic_load_explicit(&l->ctl->closed, memory_order_acquire))
        return 0;
    if (atomic_load_explicit(&l->ctl->bell, memory_order_acquire) != count)
        return 1;
    /* Woken with the count unchanged (a signal, a spurious wake) or timed
     * out: the caller looks again, or for the acceptor's end. */
    return -ETIMEDOUT;
}

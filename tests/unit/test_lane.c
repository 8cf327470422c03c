/*
 * test_lane.c - the lanes between the acceptor and a worker
 * (src/sandbox/lane.c): bytes arrive whole and in order across the
 * wrap, in one process and between two racing ones; a position the
 * other side could not have written is refused, never used; the doorbell
 * wishes are taken exactly once, so a sleeper is rung and nobody else;
 * the acceptor's futex doorbell wakes a sleeper in another process, and
 * its end is seen; guard pages fence the mapping.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sandbox/claim.h"
#include "sandbox/lane.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Both sides' ends in two mappings of one memfd, as the acceptor and a
 * worker have them. */
typedef struct ends {
    int fd;
    sandlet_claim *a, *w;
    sandlet_lane a_tx, a_rx, w_tx, w_rx;
} ends;

static void ends_open(ends *e)
{
    e->fd = sandlet_claim_create();
    assert_true(e->fd >= 0);
    assert_int_equal(sandlet_claim_map(e->fd, &e->a), 0);
    assert_int_equal(sandlet_claim_map(e->fd, &e->w), 0);
    sandlet_lanes_open(sandlet_claim_lanes(e->a), true, &e->a_tx, &e->a_rx);
    sandlet_lanes_open(sandlet_claim_lanes(e->w), false, &e->w_tx, &e->w_rx);
}

static void ends_close(ends *e)
{
    sandlet_claim_unmap(e->a);
    sandlet_claim_unmap(e->w);
    close(e->fd);
}

static unsigned char pattern(uint64_t i)
{
    return (unsigned char)(i * 131 + (i >> 9));
}

/* Pieces of every size from 1 byte to more than the lane, through it
 * many times over: each byte comes out where it went in. */
static void test_bytes_in_order_across_the_wrap(void **state)
{
    (void)state;
    ends e;
    ends_open(&e);
    static unsigned char in[SANDLET_LANE_SIZE + 977], out[SANDLET_LANE_SIZE + 977];
    uint64_t sent = 0, got = 0;
    size_t piece = 1;
    while (got < 8 * SANDLET_LANE_SIZE) {
        for (size_t i = 0; i < piece; i++)
            in[i] = pattern(sent + i);
        size_t off = 0;
        while (off < piece) {
            ssize_t k = sandlet_lane_put(&e.a_tx, in + off, piece - off);
            assert_true(k >= 0);
            off += (size_t)k;
            ssize_t n = sandlet_lane_get(&e.w_rx, out, sizeof(out));
            assert_true(n >= 0);
            for (ssize_t i = 0; i < n; i++)
                if (out[i] != pattern(got + (uint64_t)i))
                    fail_msg("byte %llu differs", (unsigned long long)(got + (uint64_t)i));
            got += (uint64_t)n;
        }
        sent += piece;
        piece = piece * 7 % (SANDLET_LANE_SIZE + 977) + 1;
    }
    assert_int_equal(sandlet_lane_avail(&e.w_rx), 0);
    ends_close(&e);
}

/* The lane holds exactly its size: a put into a full lane takes nothing,
 * and the two directions do not share bytes. */
static void test_full_and_separate(void **state)
{
    (void)state;
    ends e;
    ends_open(&e);
    static unsigned char big[SANDLET_LANE_SIZE + 1];
    memset(big, 'a', sizeof(big));
    assert_int_equal(sandlet_lane_put(&e.a_tx, big, sizeof(big)), SANDLET_LANE_SIZE);
    assert_int_equal(sandlet_lane_put(&e.a_tx, big, 1), 0);
    assert_false(sandlet_lane_wait_room(&e.a_tx));
    assert_int_equal(sandlet_lane_avail(&e.a_rx), 0);
    assert_int_equal(sandlet_lane_put(&e.w_tx, "b", 1), 1);
    unsigned char c = 0;
    assert_int_equal(sandlet_lane_get(&e.a_rx, &c, 1), 1);
    assert_int_equal(c, 'b');
    assert_int_equal(sandlet_lane_avail(&e.w_rx), SANDLET_LANE_SIZE);
    ends_close(&e);
}

/* A worker writes the positions in shared memory: the acceptor never
 * takes one that cannot be as a count, and never reads its own back. */
static void test_impossible_positions_refused(void **state)
{
    (void)state;
    ends e;
    ends_open(&e);
    sandlet_lane_ctl *ctl = sandlet_claim_lanes(e.w);
    /* The worker says it consumed bytes that were never put. */
    assert_int_equal(sandlet_lane_put(&e.a_tx, "xyz", 3), 3);
    atomic_store(&ctl[0].tail, 1000);
    assert_int_equal(sandlet_lane_put(&e.a_tx, "x", 1), -EPROTO);
    /* ... or that the lane holds more than it can. */
    atomic_store(&ctl[0].tail, (uint32_t)(3 - SANDLET_LANE_SIZE - 1));
    assert_int_equal(sandlet_lane_put(&e.a_tx, "x", 1), -EPROTO);
    /* It publishes more than the lane holds, or a head behind what the
     * acceptor took. */
    atomic_store(&ctl[1].head, (uint32_t)SANDLET_LANE_SIZE + 1);
    unsigned char buf[16];
    assert_int_equal(sandlet_lane_get(&e.a_rx, buf, sizeof(buf)), -EPROTO);
    assert_int_equal(sandlet_lane_avail(&e.a_rx), -EPROTO);
    atomic_store(&ctl[1].head, (uint32_t)-1);
    assert_int_equal(sandlet_lane_get(&e.a_rx, buf, sizeof(buf)), -EPROTO);
    /* It rewinds the acceptor's own head: the acceptor's next put goes on
     * from its own count, which the worker sees again. */
    atomic_store(&ctl[0].tail, 3);
    atomic_store(&ctl[0].head, 0);
    assert_int_equal(sandlet_lane_put(&e.a_tx, "q", 1), 1);
    assert_int_equal(atomic_load(&ctl[0].head), 4);
    ends_close(&e);
}

/* A consumer that goes to sleep is rung once by the next put and not by
 * the one after; one that is awake is not rung; the same for room. */
static void test_doorbell_wishes(void **state)
{
    (void)state;
    ends e;
    ends_open(&e);
    assert_false(sandlet_lane_ring_consumer(&e.a_tx));
    assert_false(sandlet_lane_wait_data(&e.w_rx));
    assert_int_equal(sandlet_lane_put(&e.a_tx, "r", 1), 1);
    assert_true(sandlet_lane_ring_consumer(&e.a_tx));
    assert_int_equal(sandlet_lane_put(&e.a_tx, "s", 1), 1);
    assert_false(sandlet_lane_ring_consumer(&e.a_tx));
    /* Data already there: no sleep, and awake withdraws the wish. */
    assert_true(sandlet_lane_wait_data(&e.w_rx));
    sandlet_lane_awake(&e.w_rx);
    assert_false(sandlet_lane_ring_consumer(&e.a_tx));
    /* Room: a full lane's producer is rung by the get that frees some. */
    static unsigned char big[SANDLET_LANE_SIZE];
    assert_int_equal(sandlet_lane_put(&e.a_tx, big, sizeof(big)), SANDLET_LANE_SIZE - 2);
    assert_false(sandlet_lane_wait_room(&e.a_tx));
    unsigned char c;
    assert_int_equal(sandlet_lane_get(&e.w_rx, &c, 1), 1);
    assert_true(sandlet_lane_ring_producer(&e.w_rx));
    assert_false(sandlet_lane_ring_producer(&e.w_rx));
    ends_close(&e);
}

/* Two processes, each side sleeping as the real ones do: the worker on
 * the futex doorbell, the acceptor on a pipe (its socketpair): 64 MiB
 * through in pieces of odd sizes, in order, with no doorbell lost (a lost
 * one hangs the test, which alarm() ends). */
static void test_two_processes(void **state)
{
    (void)state;
    ends e;
    ends_open(&e);
    int to_a[2];
    assert_int_equal(pipe(to_a), 0);
    const uint64_t total = (uint64_t)64 << 20;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(60);
        static unsigned char buf[7919];
        uint64_t got = 0;
        while (got < total) {
            ssize_t n = sandlet_lane_get(&e.w_rx, buf, sizeof(buf));
            if (n < 0)
                _exit(2);
            if (n == 0) {
                uint32_t bells = sandlet_lane_bell_count(&e.w_rx);
                if (sandlet_lane_wait_data(&e.w_rx))
                    continue;
                int rc;
                while ((rc = sandlet_lane_bell_wait(&e.w_rx, bells, 1000)) == -ETIMEDOUT) {
                }
                if (rc != 1)
                    _exit(3);
                sandlet_lane_awake(&e.w_rx);
                continue;
            }
            for (ssize_t i = 0; i < n; i++)
                if (buf[i] != pattern(got + (uint64_t)i))
                    _exit(4);
            got += (uint64_t)n;
            if (sandlet_lane_ring_producer(&e.w_rx) && write(to_a[1], "", 1) != 1)
                _exit(5);
        }
        _exit(0);
    }
    alarm(60);
    static unsigned char buf[4099];
    uint64_t sent = 0;
    while (sent < total) {
        size_t len = total - sent < sizeof(buf) ? (size_t)(total - sent) : sizeof(buf);
        for (size_t i = 0; i < len; i++)
            buf[i] = pattern(sent + i);
        size_t off = 0;
        while (off < len) {
            ssize_t k = sandlet_lane_put(&e.a_tx, buf + off, len - off);
            assert_true(k >= 0);
            off += (size_t)k;
            if (k > 0) {
                if (sandlet_lane_ring_consumer(&e.a_tx))
                    sandlet_lane_bell_ring(&e.a_tx);
                continue;
            }
            if (sandlet_lane_wait_room(&e.a_tx))
                continue;
            char b;
            assert_int_equal(read(to_a[0], &b, 1), 1);
        }
        sent += len;
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    alarm(0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    ends_close(&e);
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The acceptor's doorbell: a count that has not moved sleeps until the
 * timeout; one that moved before the sleep, or moves during it, returns
 * at once; the acceptor's end wins over a ring.  Across processes, as the
 * acceptor and a worker share the page: a sleeper is woken by the ring,
 * not by its timeout. */
static void test_bell(void **state)
{
    (void)state;
    ends e;
    ends_open(&e);
    uint32_t c = sandlet_lane_bell_count(&e.w_rx);
    long long t0 = now_ms();
    assert_int_equal(sandlet_lane_bell_wait(&e.w_rx, c, 50), -ETIMEDOUT);
    assert_true(now_ms() - t0 >= 40);
    sandlet_lane_bell_ring(&e.a_tx);
    assert_int_equal(sandlet_lane_bell_wait(&e.w_rx, c, 5000), 1);
    c = sandlet_lane_bell_count(&e.w_rx);
    assert_int_equal(sandlet_lane_bell_wait(&e.w_rx, c, 10), -ETIMEDOUT);

    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30);
        long long start = now_ms();
        if (write(ready[1], "r", 1) != 1)
            _exit(2);
        int rc = sandlet_lane_bell_wait(&e.w_rx, c, 20000);
        long long took = now_ms() - start;
        /* Rung after 200 ms: it slept, and the ring, not the timeout,
         * woke it. */
        _exit(rc == 1 && took >= 100 && took < 10000 ? 0 : 1);
    }
    /* Rung well after the child said it is about to sleep, even under
     * valgrind. */
    char b;
    assert_int_equal(read(ready[0], &b, 1), 1);
    close(ready[0]);
    close(ready[1]);
    usleep(200 * 1000);
    sandlet_lane_bell_ring(&e.a_tx);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    /* The end, in another process too: the sleeper learns it. */
    c = sandlet_lane_bell_count(&e.w_rx);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30);
        _exit(sandlet_lane_bell_wait(&e.w_rx, c, 20000) == 0 ? 0 : 1);
    }
    usleep(100 * 1000);
    sandlet_lane_bell_close(&e.a_tx);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(sandlet_lane_bell_wait(&e.w_rx, sandlet_lane_bell_count(&e.w_rx), 10), 0);
    ends_close(&e);
}

/* The byte before the mapping and the byte after it are inaccessible: an
 * over-read of a buffer next to the lanes faults instead of reading the
 * requests queued in them. */
static void test_guard_pages(void **state)
{
    (void)state;
    ends e;
    ends_open(&e);
    const volatile unsigned char *first = (const unsigned char *)e.w;
    const volatile unsigned char *end =
        (const unsigned char *)sandlet_claim_lanes(e.w) + SANDLET_LANES_BYTES;
    const volatile unsigned char *probes[] = {first - 1, end, end - 1};
    for (int i = 0; i < 3; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            signal(SIGSEGV, SIG_DFL); /* cmocka's handler would catch it */
            unsigned char c = *probes[i];
            _exit(c == 0 ? 0 : 1);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (i < 2) {
            assert_true(WIFSIGNALED(status));
            assert_int_equal(WTERMSIG(status), SIGSEGV);
        } else {
            /* The lanes' last byte itself is readable. */
            assert_true(WIFEXITED(status));
        }
    }
    ends_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_in_order_across_the_wrap),
        cmocka_unit_test(test_full_and_separate),
        cmocka_unit_test(test_impossible_positions_refused),
        cmocka_unit_test(test_doorbell_wishes),
        cmocka_unit_test(test_two_processes),
        cmocka_unit_test(test_bell),
        cmocka_unit_test(test_guard_pages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

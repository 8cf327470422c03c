/*
 * test_queue.c - the queue's decisions (src/loop/pick.c) without a
 * daemon: which worker a request goes to, which requests a worker holds
 * are taken back and when, and that a request is never both taken back by
 * the acceptor and claimed by its worker, whatever the order of the two.
 * The claim words are real (a memfd mapped twice, as the acceptor and a
 * worker have it).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loop/acceptor.h"
#include "loop/pick.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- which worker ------------------------------------------------------ */

static void view(const void *ctx, unsigned i, sandlet_pick_worker *w)
{
    *w = ((const sandlet_pick_worker *)ctx)[i];
}

static unsigned pick(const sandlet_pick_worker *ws, unsigned n, const sandlet_pick_ask *a)
{
    return sandlet_pick(n, view, ws, a);
}

#define UP(held_)                                                                                  \
    {                                                                                              \
        .up = true, .held = (held_)                                                                \
    }

static const sandlet_pick_ask servlet = {.depth = 4};

static void test_pick_fewest(void **state)
{
    (void)state;
    sandlet_pick_worker ws[] = {UP(3), UP(1), UP(2), UP(1)};
    /* The fewest held, the first of those that tie. */
    assert_int_equal(pick(ws, 4, &servlet), 1);
    ws[2].held = 0;
    assert_int_equal(pick(ws, 4, &servlet), 2);
    /* The first idle worker, whatever comes after it. */
    ws[3].held = 0;
    assert_int_equal(pick(ws, 4, &servlet), 2);
}

/* As many workers holding requests as CPUs: the next request goes behind
 * the one of them holding fewest, not to an idle worker that would have
 * to be woken for it; but to the idle one when the servlets block, when
 * fewer hold requests than there are CPUs, when none of those may take
 * it (full, slow, streaming), and when the CPUs are unknown. */
static void test_pick_packs_on_cpus(void **state)
{
    (void)state;
    sandlet_pick_worker ws[] = {UP(0), UP(3), UP(0), UP(2)};
    sandlet_pick_ask one = {.depth = 4, .cpus = 1};
    assert_int_equal(pick(ws, 4, &one), 3);
    sandlet_pick_ask two = {.depth = 4, .cpus = 2};
    assert_int_equal(pick(ws, 4, &two), 3);
    sandlet_pick_ask three = {.depth = 4, .cpus = 3};
    assert_int_equal(pick(ws, 4, &three), 0);
    assert_int_equal(pick(ws, 4, &servlet), 0);
    sandlet_pick_ask blocking = {.depth = 4, .cpus = 1, .blocking = true};
    assert_int_equal(pick(ws, 4, &blocking), 0);
    /* One worker holding, one CPU: it takes the next too, until full. */
    sandlet_pick_worker lone[] = {UP(0), UP(1)};
    assert_int_equal(pick(lone, 2, &one), 1);
    lone[1].held = 4;
    assert_int_equal(pick(lone, 2, &one), 0);
    /* A worker that may take no more still counts as running: a slow
     * servlet's worker sends the next request to the idle one, which
     * then counts as the one to fill. */
    lone[1].held = 1;
    lone[1].last_slow = true;
    assert_int_equal(pick(lone, 2, &one), 0);
    sandlet_pick_worker slow[] = {UP(1), UP(1), UP(0)};
    slow[0].last_slow = true;
    assert_int_equal(pick(slow, 3, &one), 1);
    sandlet_pick_worker streaming[] = {UP(1), UP(0)};
    streaming[0].last_streams = true;
    assert_int_equal(pick(streaming, 2, &one), 1);
    /* Nobody up but busy ones: the fewest held, as ever. */
    sandlet_pick_worker busy[] = {UP(3), UP(2)};
    assert_int_equal(pick(busy, 2, &three), 1);
}

static void test_pick_not_up(void **state)
{
    (void)state;
    sandlet_pick_worker ws[] = {UP(0), UP(0), UP(2)};
    ws[0].up = false;       /* starting, dying or down */
    ws[1].held_back = true; /* owes a SKIP, slow, or recycling */
    assert_int_equal(pick(ws, 3, &servlet), 2);
    ws[2].up = false;
    assert_int_equal(pick(ws, 3, &servlet), 3); /* none: the request waits */
    assert_int_equal(pick(ws, 0, &servlet), 0);
}

static void test_pick_depth(void **state)
{
    (void)state;
    sandlet_pick_worker ws[] = {UP(4), UP(4)};
    assert_int_equal(pick(ws, 2, &servlet), 2);
    ws[1].held = 3;
    assert_int_equal(pick(ws, 2, &servlet), 1);
    /* "pipeline 1": one request a worker at most. */
    sandlet_pick_ask one = {.depth = 1};
    ws[0].held = 0;
    ws[1].held = 1;
    assert_int_equal(pick(ws, 2, &one), 0);
    ws[0].held = 1;
    assert_int_equal(pick(ws, 2, &one), 2);
}

static void test_pick_streamed_body(void **state)
{
    (void)state;
    /* A streamed body goes only to a worker holding nothing ... */
    sandlet_pick_worker ws[] = {UP(1), UP(2)};
    sandlet_pick_ask body = {.depth = 4, .body_open = true};
    assert_int_equal(pick(ws, 2, &body), 2);
    ws[1].held = 0;
    assert_int_equal(pick(ws, 2, &body), 1);
    /* ... and nothing goes behind a request whose body still streams. */
    sandlet_pick_worker behind[] = {UP(1), UP(2)};
    behind[0].last_streams = true;
    assert_int_equal(pick(behind, 2, &servlet), 1);
    behind[1].last_streams = true;
    assert_int_equal(pick(behind, 2, &servlet), 2);
}

static void test_pick_pages_gen(void **state)
{
    (void)state;
    sandlet_pick_worker ws[] = {UP(0), UP(1)};
    ws[0].pages_gen = 2;
    ws[1].pages_gen = 3;
    /* A page of generation 3 needs a worker started with it. */
    sandlet_pick_ask page = {.depth = 4, .needs = 3};
    assert_int_equal(pick(ws, 2, &page), 1);
    page.needs = 4;
    assert_int_equal(pick(ws, 2, &page), 2);
    /* A servlet runs on any. */
    assert_int_equal(pick(ws, 2, &servlet), 0);
}

static void test_pick_max_requests(void **state)
{
    (void)state;
    sandlet_pick_worker ws[] = {UP(0), UP(1)};
    ws[0].served = 9;
    ws[1].served = 5;
    sandlet_pick_ask a = {.depth = 4, .max_requests = 10};
    /* 9 served + 1 more would be its last: it takes it; with 10 it is
     * recycled and takes nothing more. */
    assert_int_equal(pick(ws, 2, &a), 0);
    ws[0].served = 10;
    assert_int_equal(pick(ws, 2, &a), 1);
    /* Held requests count: 5 served + 5 held. */
    ws[1].held = 5;
    a.depth = 8;
    assert_int_equal(pick(ws, 2, &a), 2);
    /* A worker of old code serves on past max-requests while none of the
     * new code is up, since the new may not start. */
    a.pages_gen = 1;
    assert_int_equal(pick(ws, 2, &a), 0);
    a.fresh_up = true;
    assert_int_equal(pick(ws, 2, &a), 2);
    /* Nor is one recycled while its successor may not start and it is
     * the last worker up (sandlet_may_recycle): it serves on. */
    a.recycle_waits = true;
    assert_int_equal(pick(ws, 2, &a), 0);
    a.pages_gen = 0;
    assert_int_equal(pick(ws, 2, &a), 0);
}

/* Nothing queues behind a request of a servlet known to be slow; an
 * empty worker takes anything. */
static void test_pick_behind_slow(void **state)
{
    (void)state;
    sandlet_pick_worker ws[] = {UP(1), UP(3)};
    ws[0].last_slow = true;
    assert_int_equal(pick(ws, 2, &servlet), 1);
    ws[1].last_slow = true;
    assert_int_equal(pick(ws, 2, &servlet), 2);
    ws[0].held = 0;
    assert_int_equal(pick(ws, 2, &servlet), 0);
}

/* A worker of old code that holds requests gets no more while one of the
 * new code is up (it must empty to be replaced: under a steady load it
 * never would); holding nothing, or with no new one up, it serves. */
static void test_pick_stale_drains(void **state)
{
    (void)state;
    sandlet_pick_worker ws[] = {UP(1), UP(3)};
    ws[0].pages_gen = 1;
    ws[1].pages_gen = 2;
    sandlet_pick_ask a = {.depth = 4, .pages_gen = 2, .fresh_up = true};
    assert_int_equal(pick(ws, 2, &a), 1);
    a.fresh_up = false;
    assert_int_equal(pick(ws, 2, &a), 0);
    a.fresh_up = true;
    ws[0].held = 0;
    assert_int_equal(pick(ws, 2, &a), 0);
}

/* ---- the claim words --------------------------------------------------- */

typedef struct words {
    int fd;
    sandlet_claim *acceptor, *worker;
    sandlet_inflight ring[8];
} words;

static int words_open(void **state)
{
    words *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    w->fd = sandlet_claim_create();
    assert_true(w->fd >= 0);
    assert_int_equal(sandlet_claim_map(w->fd, &w->acceptor), 0);
    assert_int_equal(sandlet_claim_map(w->fd, &w->worker), 0);
    *state = w;
    return 0;
}

static int words_close(void **state)
{
    words *w = *state;
    sandlet_claim_unmap(w->acceptor);
    sandlet_claim_unmap(w->worker);
    close(w->fd);
    free(w);
    return 0;
}

/* count requests handed over with ids id0, id0 + 1, ..., in a ring of
 * depth from first, as queue.c hands them. */
static sandlet_held hand_over(words *w, unsigned depth, unsigned first, unsigned count,
                              uint32_t id0)
{
    memset(w->ring, 0, sizeof(w->ring));
    for (unsigned i = 0; i < count; i++) {
        sandlet_inflight *f = &w->ring[(first + i) % depth];
        f->id = id0 + i;
        sandlet_claim_offer(w->acceptor, f->id);
    }
    return (sandlet_held){.ring = w->ring, .depth = depth, .first = first, .count = count};
}

static sandlet_inflight *at(const sandlet_held *h, unsigned i)
{
    return &h->ring[(h->first + i) % h->depth];
}

static void test_revoke_newest_first(void **state)
{
    words *w = *state;
    /* Four requests in a ring of four that wraps. */
    sandlet_held h = hand_over(w, 4, 3, 4, 100);
    assert_true(sandlet_claim_take(w->worker, 100)); /* it serves the first */
    unsigned pos[8];
    assert_int_equal(sandlet_pick_revoke(w->acceptor, &h, 0, pos), 3);
    assert_int_equal(pos[0], 3);
    assert_int_equal(pos[1], 2);
    assert_int_equal(pos[2], 1);
    assert_false(at(&h, 0)->revoked);
    for (unsigned i = 1; i < 4; i++) {
        assert_true(at(&h, i)->revoked);
        /* The worker gets to it later: it must skip it. */
        assert_false(sandlet_claim_take(w->worker, at(&h, i)->id));
    }
    /* A second walk takes nothing twice. */
    assert_int_equal(sandlet_pick_revoke(w->acceptor, &h, 0, pos), 0);
}

static void test_revoke_stops_at_claimed(void **state)
{
    words *w = *state;
    sandlet_held h = hand_over(w, 8, 0, 5, 7);
    /* It claimed the first three meanwhile. */
    for (uint32_t id = 7; id < 10; id++)
        assert_true(sandlet_claim_take(w->worker, id));
    unsigned pos[8];
    assert_int_equal(sandlet_pick_revoke(w->acceptor, &h, 1, pos), 2);
    assert_int_equal(pos[0], 4);
    assert_int_equal(pos[1], 3);
    assert_false(at(&h, 2)->revoked);
    /* From a position past those: nothing. */
    assert_int_equal(sandlet_pick_revoke(w->acceptor, &h, 5, pos), 0);
}

/* A worker that scribbled on a word is taken to have claimed it: its
 * request runs to its answer or its timeout, and is not taken back. */
static void test_revoke_scribbled(void **state)
{
    words *w = *state;
    sandlet_held h = hand_over(w, 4, 0, 3, 40);
    atomic_store(&w->worker[42 % SANDLET_CLAIM_WORDS], 0xdeadbeefu);
    unsigned pos[4];
    assert_int_equal(sandlet_pick_revoke(w->acceptor, &h, 0, pos), 0);
    assert_false(at(&h, 2)->revoked);
}

/* Whatever the worker claimed before the acceptor's walk, and whatever it
 * tries after: every request is either claimed or taken back, never
 * both, never neither. */
static void test_never_both(void **state)
{
    words *w = *state;
    uint32_t id0 = 1;
    for (unsigned depth = 1; depth <= 8; depth++)
        for (unsigned first = 0; first < depth; first++)
            for (unsigned count = 1; count <= depth; count++)
                for (unsigned claimed = 0; claimed <= count; claimed++)
                    for (unsigned from = 0; from <= count; from++) {
                        sandlet_held h = hand_over(w, depth, first, count, id0);
                        bool took[8] = {0};
                        for (unsigned i = 0; i < claimed; i++)
                            took[i] = sandlet_claim_take(w->worker, id0 + i);
                        unsigned pos[8];
                        unsigned n = sandlet_pick_revoke(w->acceptor, &h, from, pos);
                        /* Then the worker runs on through its channel. */
                        for (unsigned i = claimed; i < count; i++)
                            took[i] = sandlet_claim_take(w->worker, id0 + i);
                        unsigned revoked = 0;
                        for (unsigned i = 0; i < count; i++) {
                            bool r = at(&h, i)->revoked;
                            revoked += r;
                            assert_true(r != took[i]);
                            assert_true(r == (sandlet_claim_taken(w->acceptor, id0 + i) == false));
                            /* Only those from on that the worker had not
                             * reached are taken back. */
                            assert_true(r == (i >= from && i >= claimed));
                        }
                        assert_int_equal(revoked, n);
                        id0 += count;
                    }
}

/* ---- when requests behind a slow one go -------------------------------- */

static void test_behind(void **state)
{
    words *w = *state;
    sandlet_held h = hand_over(w, 4, 2, 3, 50);
    uint32_t mark = 0;
    unsigned from = 99;
    /* Nothing claimed: the first's own check (sandlet_pick_claim) decides,
     * never this one. */
    assert_int_equal(sandlet_pick_behind(w->acceptor, &h, &mark, &from), SANDLET_BEHIND_WAIT);
    assert_int_equal(sandlet_pick_behind(w->acceptor, &h, &mark, &from), SANDLET_BEHIND_WAIT);
    assert_int_equal(from, 99);
    /* It serves the first: the look after notes the second ... */
    assert_true(sandlet_claim_take(w->worker, 50));
    assert_int_equal(sandlet_pick_behind(w->acceptor, &h, &mark, &from), SANDLET_BEHIND_WAIT);
    assert_int_equal(mark, 51);
    /* ... it moved on between two looks: wait again ... */
    assert_true(sandlet_claim_take(w->worker, 51));
    assert_int_equal(sandlet_pick_behind(w->acceptor, &h, &mark, &from), SANDLET_BEHIND_WAIT);
    assert_int_equal(mark, 52);
    /* ... it did not: take back from the third. */
    assert_int_equal(sandlet_pick_behind(w->acceptor, &h, &mark, &from), SANDLET_BEHIND_TAKE_BACK);
    assert_int_equal(from, 2);
    unsigned pos[4];
    assert_int_equal(sandlet_pick_revoke(w->acceptor, &h, from, pos), 1);
    /* What is left behind is taken back: nothing more to look at. */
    assert_int_equal(sandlet_pick_behind(w->acceptor, &h, &mark, &from), SANDLET_BEHIND_STOP);
}

static void test_behind_stop(void **state)
{
    words *w = *state;
    uint32_t mark = 0;
    unsigned from = 0;
    /* One request: nothing behind it. */
    sandlet_held h = hand_over(w, 4, 0, 1, 60);
    assert_int_equal(sandlet_pick_behind(w->acceptor, &h, &mark, &from), SANDLET_BEHIND_STOP);
    /* All claimed: none waits. */
    h = hand_over(w, 4, 0, 2, 61);
    assert_true(sandlet_claim_take(w->worker, 61));
    assert_true(sandlet_claim_take(w->worker, 62));
    assert_int_equal(sandlet_pick_behind(w->acceptor, &h, &mark, &from), SANDLET_BEHIND_STOP);
    /* The first taken back (a stopped worker): it owes a SKIP first. */
    h = hand_over(w, 4, 0, 3, 63);
    at(&h, 0)->revoked = true;
    assert_int_equal(sandlet_pick_behind(w->acceptor, &h, &mark, &from), SANDLET_BEHIND_STOP);
}

/* ---- when the request served is taken back ----------------------------- */

static void test_claim_check(void **state)
{
    (void)state;
    assert_int_equal(sandlet_pick_claim(true, 0, 0), SANDLET_CLAIM_RUN);
    assert_int_equal(sandlet_pick_claim(true, 5000, 30), SANDLET_CLAIM_RUN);
    assert_int_equal(sandlet_pick_claim(false, 0, 0), SANDLET_CLAIM_WAIT);
    assert_int_equal(sandlet_pick_claim(false, SANDLET_CLAIM_MS - 1, 0), SANDLET_CLAIM_WAIT);
    assert_int_equal(sandlet_pick_claim(false, SANDLET_CLAIM_MS, 0), SANDLET_CLAIM_REVOKE);
    assert_int_equal(sandlet_pick_claim(false, SANDLET_CLAIM_MS, 30000), SANDLET_CLAIM_REVOKE);
    /* A timeout shorter than the claim's wait bounds it. */
    assert_int_equal(sandlet_pick_claim(false, 49, 50), SANDLET_CLAIM_WAIT);
    assert_int_equal(sandlet_pick_claim(false, 50, 50), SANDLET_CLAIM_REVOKE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick_fewest),
        cmocka_unit_test(test_pick_packs_on_cpus),
        cmocka_unit_test(test_pick_not_up),
        cmocka_unit_test(test_pick_depth),
        cmocka_unit_test(test_pick_streamed_body),
        cmocka_unit_test(test_pick_pages_gen),
        cmocka_unit_test(test_pick_max_requests),
        cmocka_unit_test(test_pick_stale_drains),
        cmocka_unit_test(test_pick_behind_slow),
        cmocka_unit_test_setup_teardown(test_revoke_newest_first, words_open, words_close),
        cmocka_unit_test_setup_teardown(test_revoke_stops_at_claimed, words_open, words_close),
        cmocka_unit_test_setup_teardown(test_revoke_scribbled, words_open, words_close),
        cmocka_unit_test_setup_teardown(test_never_both, words_open, words_close),
        cmocka_unit_test_setup_teardown(test_behind, words_open, words_close),
        cmocka_unit_test_setup_teardown(test_behind_stop, words_open, words_close),
        cmocka_unit_test(test_claim_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

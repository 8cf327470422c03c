/*
 * test_claim.c - the claim word (src/sandbox/claim.c): exactly one of a
 * worker's take and the acceptor's revoke wins, across two processes
 * racing on the same word; a word a worker scribbled on never reads as
 * revocable; the memfd cannot be resized under a mapping.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sandbox/claim.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* Two mappings of one word, as the acceptor and a worker have. */
typedef struct pair {
    int fd;
    sandlet_claim *acceptor, *worker;
} pair;

static void pair_open(pair *p)
{
    p->fd = sandlet_claim_create();
    assert_true(p->fd >= 0);
    assert_int_equal(sandlet_claim_map(p->fd, &p->acceptor), 0);
    assert_int_equal(sandlet_claim_map(p->fd, &p->worker), 0);
    assert_ptr_not_equal(p->acceptor, p->worker);
}

static void pair_close(pair *p)
{
    sandlet_claim_unmap(p->acceptor);
    sandlet_claim_unmap(p->worker);
    close(p->fd);
}

static void test_take_then_revoke(void **state)
{
    (void)state;
    pair p;
    pair_open(&p);
    sandlet_claim_offer(p.acceptor, 7);
    assert_false(sandlet_claim_taken(p.acceptor, 7));
    assert_true(sandlet_claim_take(p.worker, 7));
    assert_true(sandlet_claim_taken(p.acceptor, 7));
    assert_false(sandlet_claim_revoke(p.acceptor, 7));
    /* Taken once only. */
    assert_false(sandlet_claim_take(p.worker, 7));
    pair_close(&p);
}

static void test_revoke_then_take(void **state)
{
    (void)state;
    pair p;
    pair_open(&p);
    sandlet_claim_offer(p.acceptor, 8);
    assert_true(sandlet_claim_revoke(p.acceptor, 8));
    assert_false(sandlet_claim_take(p.worker, 8));
    assert_false(sandlet_claim_taken(p.acceptor, 8));
    /* Revoked once only. */
    assert_false(sandlet_claim_revoke(p.acceptor, 8));
    pair_close(&p);
}

/* A take or revoke names the request: one for an older or newer id
 * changes nothing, and ids that differ only above 30 bits (the word
 * keeps all 32) are not confused. */
static void test_other_ids(void **state)
{
    (void)state;
    pair p;
    pair_open(&p);
    sandlet_claim_offer(p.acceptor, 0x40000001u);
    assert_false(sandlet_claim_take(p.worker, 1));
    assert_false(sandlet_claim_revoke(p.acceptor, 1));
    assert_false(sandlet_claim_take(p.worker, 0x40000002u));
    assert_true(sandlet_claim_take(p.worker, 0x40000001u));
    sandlet_claim_offer(p.acceptor, UINT32_MAX);
    assert_true(sandlet_claim_revoke(p.acceptor, UINT32_MAX));
    pair_close(&p);
}

/* What a hostile worker writes reads as taken-or-unknown, never as
 * revocable: the acceptor then waits for the answer or the timeout. */
static void test_scribbled_word(void **state)
{
    (void)state;
    pair p;
    pair_open(&p);
    static const uint64_t junk[] = {0, 1, 2, 3, UINT64_MAX, (uint64_t)9 << 2 | 1};
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        sandlet_claim_offer(p.acceptor, 5);
        atomic_store(p.worker + 5 % SANDLET_CLAIM_WORDS, junk[i]);
        assert_false(sandlet_claim_revoke(p.acceptor, 5));
        assert_false(sandlet_claim_taken(p.acceptor, 5));
    }
    pair_close(&p);
}

/* Requests queued at one worker have words of their own: consecutive
 * ids, as the acceptor numbers a worker's requests, are taken and
 * revoked independently, and a full ring's worth never shares a word. */
static void test_words_per_request(void **state)
{
    (void)state;
    pair p;
    pair_open(&p);
    for (uint32_t id = 1; id <= SANDLET_CLAIM_WORDS; id++)
        sandlet_claim_offer(p.acceptor, id);
    for (uint32_t id = 1; id <= SANDLET_CLAIM_WORDS; id++) {
        if (id % 3 == 0)
            assert_true(sandlet_claim_revoke(p.acceptor, id));
        else
            assert_true(sandlet_claim_take(p.worker, id));
    }
    for (uint32_t id = 1; id <= SANDLET_CLAIM_WORDS; id++) {
        assert_int_equal(sandlet_claim_taken(p.acceptor, id), id % 3 != 0);
        assert_false(sandlet_claim_take(p.worker, id));
        assert_false(sandlet_claim_revoke(p.acceptor, id));
    }
    /* An id a whole page of words later reuses the word, once the first
     * is over: its offer replaces whatever the word held. */
    sandlet_claim_offer(p.acceptor, 1 + SANDLET_CLAIM_WORDS);
    assert_false(sandlet_claim_take(p.worker, 1));
    assert_true(sandlet_claim_take(p.worker, 1 + SANDLET_CLAIM_WORDS));
    pair_close(&p);
}

/* A worker cannot shrink the word's memory under the acceptor's mapping
 * (a SIGBUS in the acceptor) or grow it. */
static void test_sealed_size(void **state)
{
    (void)state;
    pair p;
    pair_open(&p);
    assert_int_equal(ftruncate(p.fd, 0), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(ftruncate(p.fd, 1 << 20), -1);
    assert_int_equal(errno, EPERM);
    pair_close(&p);
}

/* A child process takes each offered id as fast as it can while this
 * one revokes it at once: for every id exactly one side wins.  The
 * child reports its wins through a pipe. */
static void test_race_across_processes(void **state)
{
    (void)state;
    enum { ROUNDS = 5000 };
    pair p;
    pair_open(&p);
    sandlet_claim *go;
    int gofd = sandlet_claim_create();
    assert_true(gofd >= 0);
    assert_int_equal(sandlet_claim_map(gofd, &go), 0);
    /* Two words of the page: the id offered, the id the child is done
     * with. */
    atomic_store(&go[0], 0);
    atomic_store(&go[1], 0);
    int wins[2];
    assert_int_equal(pipe(wins), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(wins[0]);
        uint32_t taken = 0;
        for (uint32_t id = 1; id <= ROUNDS; id++) {
            /* Wait for the offer of id, race for it, say so. */
            while (atomic_load(&go[0]) != id)
                ;
            if (sandlet_claim_take(p.worker, id))
                taken++;
            atomic_store(&go[1], id);
        }
        _exit(write(wins[1], &taken, sizeof(taken)) == sizeof(taken) ? 0 : 1);
    }
    close(wins[1]);
    uint32_t revoked = 0;
    for (uint32_t id = 1; id <= ROUNDS; id++) {
        sandlet_claim_offer(p.acceptor, id);
        atomic_store(&go[0], id);
        if (sandlet_claim_revoke(p.acceptor, id))
            revoked++;
        /* The child is done with id before the next offer. */
        while (atomic_load(&go[1]) != id)
            ;
    }
    uint32_t taken = 0;
    assert_int_equal(read(wins[0], &taken, sizeof(taken)), (ssize_t)sizeof(taken));
    int st;
    assert_int_equal(waitpid(child, &st, 0), child);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    printf("%u taken by the child, %u revoked, of %u\n", taken, revoked, (unsigned)ROUNDS);
    assert_int_equal(taken + revoked, ROUNDS);
    close(wins[0]);
    sandlet_claim_unmap(go);
    close(gofd);
    pair_close(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_then_revoke),
        cmocka_unit_test(test_revoke_then_take),
        cmocka_unit_test(test_other_ids),
        cmocka_unit_test(test_scribbled_word),
        cmocka_unit_test(test_words_per_request),
        cmocka_unit_test(test_sealed_size),
        cmocka_unit_test(test_race_across_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

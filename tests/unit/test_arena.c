/*
 * test_arena.c - the per-request arena: pieces are aligned and usable,
 * the limit holds, and resets in the order a worker does them (a large
 * piece, then requests with only small ones) never free a chunk twice.
 * Run under valgrind or ASan by scripts/test-all; plain glibc aborts on
 * the double free this guards against.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/servlet.h"

#include <string.h>

static void test_large_then_small_requests(void **state)
{
    (void)state;
    sandlet_arena a;
    sandlet_lib_arena_init(&a, 0);
    for (int round = 0; round < 3; round++) {
        /* Request 1: a small piece (the kept chunk becomes the head), then
         * a large one linked behind it. */
        unsigned char *s = sandlet_lib_arena_alloc(&a, 10);
        unsigned char *big = sandlet_lib_arena_alloc(&a, 100000);
        assert_non_null(s);
        assert_non_null(big);
        memset(big, 0xab, 100000);
        sandlet_lib_arena_reset(&a);
        /* Requests 2 and 3: small pieces only. */
        for (int i = 0; i < 2; i++) {
            unsigned char *p = sandlet_lib_arena_alloc(&a, 32);
            assert_non_null(p);
            memset(p, 1, 32);
            sandlet_lib_arena_reset(&a);
        }
    }
    sandlet_lib_arena_free(&a);
}

static void test_alignment_and_limit(void **state)
{
    (void)state;
    sandlet_arena a;
    sandlet_lib_arena_init(&a, 4096);
    for (int i = 0; i < 20; i++) {
        void *p = sandlet_lib_arena_alloc(&a, (size_t)i + 1);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % _Alignof(max_align_t), 0);
    }
    assert_null(sandlet_lib_arena_alloc(&a, 8192));
    sandlet_lib_arena_reset(&a);
    assert_non_null(sandlet_lib_arena_alloc(&a, 4000));
    sandlet_lib_arena_free(&a);
}

/* A reset wipes what was handed out: the kept chunk, reused by the next
 * request (another client's), shows none of the previous one's bytes. */
static void test_reset_wipes(void **state)
{
    (void)state;
    sandlet_arena a;
    sandlet_lib_arena_init(&a, 0);
    char *p = sandlet_lib_arena_alloc(&a, 1000);
    assert_non_null(p);
    memset(p, 'S', 1000);
    sandlet_lib_arena_reset(&a);
    unsigned char *q = sandlet_lib_arena_alloc(&a, 1000);
    assert_ptr_equal(q, p); /* the same kept chunk */
    for (size_t i = 0; i < 1000; i++)
        assert_int_equal(q[i], 0);
    sandlet_lib_arena_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_then_small_requests),
        cmocka_unit_test(test_alignment_and_limit),
        cmocka_unit_test(test_reset_wipes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

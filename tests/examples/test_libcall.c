/*
 * test_libcall.c - the libcall example under the in-process harness: the
 * servlet's result for n calls equals calling libcalc here directly (the
 * test links the same library), and n is bounded.  It must never need a
 * running sandletd.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sandlet/test.h>

#include "../../examples/libcall/calc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int setup(void **state)
{
    const char *b = getenv("SANDLET_BUILDDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/examples/libcall/.libs/libcall.so", b ? b : ".");
    sl_test *t = sl_test_load(path, NULL);
    *state = t;
    return t ? 0 : -1;
}

static int teardown(void **state)
{
    sl_test_free(*state);
    return 0;
}

static uint32_t expected(unsigned long n, uint32_t seed)
{
    uint32_t acc = seed;
    for (unsigned long i = 0; i < n; i++)
        acc = calc_step(acc, (uint32_t)i);
    return acc;
}

static void test_result_matches_the_library(void **state)
{
    sl_test *t = *state;
    char want[128];
    sl_test_response *r = sl_test_get(t, "/libcall");
    assert_int_equal(sl_test_status(r), 200);
    snprintf(want, sizeof(want), "calc_step called 1000 times: %u\n", (unsigned)expected(1000, 0));
    assert_string_equal(sl_test_body_str(r), want);

    r = sl_test_get(t, "/libcall?n=123457&seed=99");
    assert_int_equal(sl_test_status(r), 200);
    snprintf(want, sizeof(want), "calc_step called 123457 times: %u\n",
             (unsigned)expected(123457, 99));
    assert_string_equal(sl_test_body_str(r), want);
    /* A known value, so that a broken libcalc cannot agree with itself. */
    assert_int_equal(expected(3, 0), (0u * 31 + 0) * 31 * 31 + 1 * 31 + 2);
}

static void test_bounds(void **state)
{
    sl_test *t = *state;
    static const char *const bad[] = {
        "/libcall?n=0", "/libcall?n=10000001",   "/libcall?n=-1",      "/libcall?n=1e3",
        "/libcall?n=",  "/libcall?seed=1000003", "/libcall?n=5&seed=x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sl_test_status(sl_test_get(t, bad[i])), 400);
    assert_int_equal(sl_test_status(sl_test_get(t, "/libcall?n=10000000")), 200);
    sl_test_request *rq = sl_test_request_new(t, "PUT", "/libcall");
    assert_int_equal(sl_test_status(sl_test_run(rq)), 405);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_result_matches_the_library, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

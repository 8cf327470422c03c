/*
 * test_failframe.c - a servlet's init that writes FAIL frames of its own
 * on the worker's channel cannot forge lines in the daemon's log or flood
 * it: the acceptor logs one escaped line per worker start and closes that
 * worker's channel after its first FAIL.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void test_fail_frames_from_init(void **state)
{
    (void)state;
    th_prepare();
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "sandbox flood { workers 1; }\n"
             "servlet /ff { library \"%s\"; sandbox flood; }\n"
             "servlet /p/* { library \"%s\"; }\n",
             th_fixture("failflood"), th_fixture("probe"));
    th_daemon d;
    assert_int_equal(th_start(&d, conf, false), 0);
    /* The first start fails at once; let a restart or two happen. */
    assert_true(th_log_wait(&d, "sandbox 'flood' cannot start", 5000));
    usleep(1500 * 1000);
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/p/pid", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    size_t len = 0;
    char *log = th_slurp(d.log, &len);
    assert_non_null(log);
    /* No line of the log starts with what the servlet forged. */
    assert_null(strstr(log, "\n2026-01-01T00:00:00Z sandletd[1]"));
    /* The break is shown escaped inside the one line per start. */
    assert_non_null(strstr(log, "x\\x0a2026-01-01T00:00:00Z"));
    /* One line per worker start, not one per frame (300 per start). */
    assert_true(count(log, "sandbox 'flood' cannot start") < 20);
    free(log);
    assert_int_equal(th_stop(&d), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_frames_from_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * bench_slow.c - the slow path of the mixed-workload benchmark (make
 * bench): 50 ms of waiting (a slow query, say) before a short answer, in the
 * same sandbox as the hello servlet, so that the report shows what slow
 * requests cost the fast ones beside them.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <sandlet.h>

#include <time.h>

static int slow(sl_request *rq, sl_response *rs)
{
    (void)rq;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    sl_set_content_type(rs, "text/plain");
    sl_write(rs, "slow\n", 5);
    return 200;
}

SL_SERVLET(bench_slow) = {.service = slow};

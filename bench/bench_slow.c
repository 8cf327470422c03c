/*
 * bench_slow.c - the slow path of the mixed-workload benchmark (make
 * bench): 50 ms of waiting (a slow query, say; ?ms= for another figure,
 * 0 to 10000) before a short answer, in the same sandbox as the hello
 * servlet, so that the report shows what slow requests cost the fast ones
 * beside them.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <sandlet.h>

#include <stdlib.h>
#include <time.h>

static int slow(sl_request *rq, sl_response *rs)
{
    long ms = strtol(sl_param(rq, "ms", "50"), NULL, 10);
    if (ms < 0 || ms > 10000)
        return 400;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
    nanosleep(&ts, NULL);
    sl_set_content_type(rs, "text/plain");
    sl_write(rs, "slow\n", 5);
    return 200;
}

SL_SERVLET(bench_slow) = {.service = slow};

/*
 * libcall.c - CSE's system library call servlet: calls calc_step from
 * the separate shared library libcalc n times in a loop and prints the
 * result.  n is bounded, so that a request cannot hold a worker for long.
 *
 * Parameters: n (1..10000000, default 1000), seed (0..1000002, default 0).
 */
#include <sandlet.h>

#include "calc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define LIBCALL_MAX_N 10000000ul

static bool whole(const char *v, unsigned long lo, unsigned long hi, unsigned long *out)
{
    if (!v || *v < '0' || *v > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || n < lo || n > hi)
        return false;
    *out = n;
    return true;
}

static int service(sl_request *rq, sl_response *rs)
{
    sl_set_content_type(rs, "text/plain; charset=utf-8");
    if (strcmp(sl_method(rq), "GET") != 0 && strcmp(sl_method(rq), "HEAD") != 0) {
        sl_set_header(rs, "Allow", "GET, HEAD");
        return 405;
    }
    unsigned long n, seed;
    if (!whole(sl_param(rq, "n", "1000"), 1, LIBCALL_MAX_N, &n) ||
        !whole(sl_param(rq, "seed", "0"), 0, 1000002, &seed)) {
        sl_puts(rs, "bad request: n must be 1..10000000 and seed 0..1000002\n");
        return 400;
    }
    uint32_t acc = (uint32_t)seed;
    for (unsigned long i = 0; i < n; i++)
        acc = calc_step(acc, (uint32_t)i);
    sl_printf(rs, "calc_step called %lu times: %u\n", n, (unsigned)acc);
    return 200;
}

SL_SERVLET(libcall) = {.service = service, .session = SL_SESSION_NONE};

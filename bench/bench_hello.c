/*
 * bench_hello.c - the benchmark's hello servlet: the same 13 bytes the
 * peers send from a file, so that rows compare like with like.
 */
#include <sandlet.h>

static int hello(sl_request *rq, sl_response *rs)
{
    (void)rq;
    sl_set_content_type(rs, "text/plain");
    sl_write(rs, "Hello, world\n", 13);
    return 200;
}

SL_SERVLET(bench_hello) = {.service = hello};

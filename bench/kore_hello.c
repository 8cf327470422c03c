/*
 * kore_hello.c - Kore's handler for the hello benchmark (bench/run builds it
 * against the Kore source it is given): the same 13 bytes and type as
 * bench_hello.c, so that the two are compared on the same answer.
 */
#include <kore/kore.h>
#include <kore/http.h>

int hello(struct http_request *);

int hello(struct http_request *req)
{
    http_response_header(req, "content-type", "text/plain");
    http_response(req, 200, "Hello, world\n", 13);
    return KORE_RESULT_OK;
}

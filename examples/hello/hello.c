/*
 * hello.c - the classic first servlet: greets by name and counts the
 * requests its worker has served.  Each worker process has its own
 * counter, as each CSE sandbox did, so with two workers the numbers
 * interleave.
 */
#include <sandlet.h>

static int count;

static int hello(sl_request *rq, sl_response *rs)
{
    sl_set_content_type(rs, "text/html; charset=utf-8");
    sl_printf(rs, "<!DOCTYPE html>\n<title>Hello</title>\n<h1>Hello, %s</h1>\n<p>request %d</p>\n",
              sl_html(rq, sl_param(rq, "name", "world")), ++count);
    return 200;
}

SL_SERVLET(hello) = {.service = hello, .session = SL_SESSION_NONE};

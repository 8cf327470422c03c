/*
 * te_plaintext.c - TechEmpower "plaintext" test as a sandlet servlet: the
 * fixed 13 bytes "Hello, World!" as text/plain, for make bench.  It must
 * never do more per request than the rules of that test allow (no caching
 * of the whole response beyond the constant body).
 */
#include <sandlet.h>

static int plaintext(sl_request *rq, sl_response *rs)
{
    static const char body[] = "Hello, World!";

    (void)rq;
    if (sl_set_content_type(rs, "text/plain") != 0 || sl_write(rs, body, sizeof body - 1) != 0)
        return 500;
    return 200;
}

SL_SERVLET(te_plaintext) = {.service = plaintext};

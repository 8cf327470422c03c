/*
 * te_json.c - TechEmpower "JSON serialization" test as a sandlet servlet:
 * {"message":"Hello, World!"} as application/json, serialized on every
 * request (the test forbids sending a cached string).  It must never emit
 * invalid JSON: the body comes from json_write.h only.
 */
#include "json_write.h"
#include <sandlet.h>

static int json(sl_request *rq, sl_response *rs)
{
    char buf[128];
    int n = json_message(buf, sizeof buf, "Hello, World!");

    (void)rq;
    if (n < 0)
        return 500;
    if (sl_set_content_type(rs, "application/json") != 0 || sl_write(rs, buf, (size_t)n) != 0)
        return 500;
    return 200;
}

SL_SERVLET(te_json) = {.service = json};

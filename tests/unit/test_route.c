/*
 * test_route.c - who answers a request (src/loop/route.c): a servlet's
 * route wins, the status page only for loopback peers and its exact path,
 * everything else goes to the docroot.
 */
#include "config.h"
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>
#include "loop/route.h"

static sandlet_conf *parse(const char *text)
{
    sandlet_conf *c = NULL;
    char err[256] = "";
    if (sandlet_conf_parse(text, strlen(text), "test.conf", "/srv", &c, err, sizeof(err)) < 0)
        fail_msg("parse: %s", err);
    return c;
}

static sandlet_route route(const sandlet_conf *c, const char *peer, const char *path)
{
    return sandlet_route_request(c, peer, path, strlen(path));
}

static void test_route_kinds(void **state)
{
    (void)state;
    sandlet_conf *c = parse("status-page /st;\n"
                            "servlet /app/* { library x.so; }\n"
                            "servlet /taken { library x.so; }\n");
    sandlet_route r = route(c, "127.0.0.1:5000", "/app/x");
    assert_int_equal(r.kind, SANDLET_ROUTE_SERVLET);
    assert_ptr_equal(r.servlet, &c->servlets[0]);
    /* The status page, for loopback peers of every spelling only. */
    const char *local[] = {"127.0.0.1:1", "127.9.9.9:2", "[::1]:3", "[::ffff:127.0.0.1]:4"};
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
        r = route(c, local[i], "/st");
        assert_int_equal(r.kind, SANDLET_ROUTE_STATUS);
        assert_null(r.servlet);
    }
    const char *remote[] = {"10.0.0.1:1", "[2001:db8::1]:2", "[::ffff:10.0.0.1]:3", "128.0.0.1:4"};
    for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++)
        assert_int_equal(route(c, remote[i], "/st").kind, SANDLET_ROUTE_FILES);
    /* Only its exact path. */
    assert_int_equal(route(c, "127.0.0.1:1", "/st/").kind, SANDLET_ROUTE_FILES);
    assert_int_equal(route(c, "127.0.0.1:1", "/s").kind, SANDLET_ROUTE_FILES);
    assert_int_equal(route(c, "127.0.0.1:1", "/").kind, SANDLET_ROUTE_FILES);
    assert_int_equal(route(c, "127.0.0.1:1", "").kind, SANDLET_ROUTE_FILES);
    sandlet_conf_free(c);
}

/* A servlet routed at the status page's path takes it: routes come first. */
static void test_servlet_before_status(void **state)
{
    (void)state;
    sandlet_conf *c = parse("status-page /taken;\nservlet /taken { library x.so; }\n");
    sandlet_route r = route(c, "127.0.0.1:1", "/taken");
    assert_int_equal(r.kind, SANDLET_ROUTE_SERVLET);
    assert_ptr_equal(r.servlet, &c->servlets[0]);
    sandlet_conf_free(c);
    /* No status page configured: nothing routes there. */
    c = parse("servlet /a { library x.so; }\n");
    assert_int_equal(route(c, "127.0.0.1:1", "/sandlet-status").kind, SANDLET_ROUTE_FILES);
    sandlet_conf_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_kinds),
        cmocka_unit_test(test_servlet_before_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

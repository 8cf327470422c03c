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
    return sandlet_route_request(c, NULL, 0, peer, path, strlen(path));
}

static sandlet_route host_route(const sandlet_conf *c, const char *host, const char *path)
{
    return sandlet_route_request(c, host, host ? strlen(host) : 0, "10.0.0.1:1", path,
                                 strlen(path));
}

/* Host blocks as nginx picks server blocks: an exact name, then the
 * longest wildcard, then the default host (or 421); each host sees only
 * its own servlets. */
static void test_hosts(void **state)
{
    (void)state;
    sandlet_conf *c = parse("status-page /st;\n"
                            "servlet /x { library d.so; }\n"
                            "host a.example.org { name www.a.example.org; "
                            "servlet /x { library a.so; } }\n"
                            "host *.example.org { servlet /y { library w.so; } }\n"
                            "host *.deep.example.org { }\n"
                            "host deep.example.org { }\n");
    static const struct {
        const char *host;
        size_t want;
    } cases[] = {
        {"a.example.org", 0},
        {"A.Example.ORG", 0},
        {"a.example.org:8080", 0},
        {"a.example.org.", 0},
        {"www.a.example.org", 0},
        {"b.example.org", 1},
        {"x.a.example.org", 1}, /* not a name of host 0: the wildcard's */
        {"x.deep.example.org", 2},
        {"deep.example.org", 3},
        {"example.org", SANDLET_HOST_DEFAULT},
        {"a.example.org.evil", SANDLET_HOST_DEFAULT},
        {"evil-a.example.org", 1},
        {"[::1]:8080", SANDLET_HOST_DEFAULT},
        {"127.0.0.1", SANDLET_HOST_DEFAULT},
        {"", SANDLET_HOST_DEFAULT},
        {NULL, SANDLET_HOST_DEFAULT},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t got = sandlet_conf_host(c, cases[i].host, cases[i].host ? strlen(cases[i].host) : 0);
        if (got != cases[i].want)
            fail_msg("Host %s: host %zu, expected %zu", cases[i].host ? cases[i].host : "(none)",
                     got, cases[i].want);
    }
    /* A Host cut by its length, not by a NUL. */
    assert_int_equal(sandlet_conf_host(c, "a.example.orgXX", 13), 0);
    /* Each host its own servlets. */
    sandlet_route r = host_route(c, "a.example.org", "/x");
    assert_int_equal(r.kind, SANDLET_ROUTE_SERVLET);
    assert_ptr_equal(r.servlet, &c->servlets[1]);
    r = host_route(c, "other", "/x");
    assert_ptr_equal(r.servlet, &c->servlets[0]);
    assert_int_equal(r.host, SANDLET_HOST_DEFAULT);
    r = host_route(c, "a.example.org", "/y");
    assert_int_equal(r.kind, SANDLET_ROUTE_FILES);
    assert_int_equal(r.host, 0);
    r = host_route(c, "b.example.org", "/y");
    assert_int_equal(r.kind, SANDLET_ROUTE_SERVLET);
    assert_ptr_equal(r.servlet, &c->servlets[2]);
    r = host_route(c, "b.example.org", "/x");
    assert_int_equal(r.kind, SANDLET_ROUTE_FILES);
    assert_null(r.servlet);
    sandlet_conf_free(c);

    /* unknown-hosts refuse: 421 for the rest, the status page aside. */
    c = parse("status-page /st;\nunknown-hosts refuse;\n"
              "host a.example.org { servlet /x { library a.so; } }\n");
    assert_int_equal(host_route(c, "b.example.org", "/x").kind, SANDLET_ROUTE_MISDIRECTED);
    assert_int_equal(host_route(c, NULL, "/x").kind, SANDLET_ROUTE_MISDIRECTED);
    assert_int_equal(host_route(c, "a.example.org", "/x").kind, SANDLET_ROUTE_SERVLET);
    r = sandlet_route_request(c, "b.example.org", 13, "127.0.0.1:1", "/st", 3);
    assert_int_equal(r.kind, SANDLET_ROUTE_STATUS);
    sandlet_conf_free(c);
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
        cmocka_unit_test(test_hosts),
        cmocka_unit_test(test_servlet_before_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

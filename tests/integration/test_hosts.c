/*
 * test_hosts.c - host blocks over real HTTP (issue 29): the Host header
 * picks the host block as nginx picks a server block (an exact name, then
 * the longest wildcard, then the default host), each host serves only its
 * own servlets and docroot, an absolute-form target's host overrides
 * Host, a reload adds a host with its docroot, and
 * with "unknown-hosts refuse" a Host no block names gets 421.  sandletd -t
 * names a host's missing docroot and a bad host name with file and line.
 */
#define _GNU_SOURCE /* strcasestr */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static th_daemon d;
static char dir[64];
static char body[4096];

static void put(const char *sub, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The configuration's body: every host of the test, and more. */
static void conf_text(char *out, size_t cap, const char *more)
{
    const char *probe = th_fixture("probe");
    snprintf(out, cap,
             "docroot %s/default;\n"
             "status-page /status;\n"
             "sandbox a { workers 1; }\n"
             "sandbox w { workers 1; }\n"
             "servlet /p/* { library \"%s\"; param greeting default; }\n"
             "host a.test {\n"
             "    name www.a.test;\n"
             "    docroot %s/a;\n"
             "    servlet /p/* { library \"%s\"; sandbox a; param greeting a; }\n"
             "    servlet /s { library \"%s\"; sandbox a; }\n"
             "}\n"
             "host *.w.test {\n"
             "    docroot %s/w;\n"
             "    servlet /p/* { library \"%s\"; sandbox w; param greeting w; }\n"
             "}\n"
             "host *.deep.w.test { docroot %s/deep; }\n"
             "host bare.test { }\n"
             "%s",
             dir, probe, dir, probe, th_fixture("session"), dir, probe, dir, more);
}

static int group_setup(void **state)
{
    (void)state;
    th_prepare();
    if (th_tempdir(dir, sizeof(dir), "hosts", 0755) < 0)
        return -1;
    put("default", "index.html", "default root\n");
    put("a", "index.html", "a root\n");
    put("a", "only-a.txt", "a's own\n");
    put("w", "index.html", "w root\n");
    put("deep", "index.html", "deep root\n");
    put("b", "index.html", "b root\n");
    conf_text(body, sizeof(body), "");
    return th_start(&d, body, false);
}

static int group_teardown(void **state)
{
    (void)state;
    int rc = th_stop(&d);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return -1;
    return rc == 0 ? 0 : -1;
}

/* GET target with the Host line host ("" for none, as HTTP/1.0 may). */
static int get_as(unsigned port, const char *host, const char *target, th_response *r)
{
    th_conn *c = th_connect(port, false);
    assert_non_null(c);
    char req[512];
    if (host[0])
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                 target, host);
    else
        snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", target);
    assert_int_equal(th_send_str(c, req), 0);
    assert_int_equal(th_read(c, r, false), 0);
    th_close(c);
    return r->status;
}

/* The answer's status and body for host and target. */
static void expect(unsigned port, const char *host, const char *target, int status,
                   const char *want)
{
    th_response r;
    get_as(port, host, target, &r);
    if (r.status != status || (want && strcmp(r.body, want) != 0))
        fail_msg("Host %s, %s: %d \"%s\", expected %d \"%s\"", host, target, r.status, r.body,
                 status, want ? want : "(any)");
    th_response_free(&r);
}

/* Exact names (any case, with a port, with the trailing dot) reach their
 * host block: its servlet and its docroot, nothing of the default's. */
static void test_exact(void **state)
{
    (void)state;
    static const char *const names[] = {"a.test", "A.Test:8080", "a.test.", "www.a.test"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        expect(d.port, names[i], "/p/greeting", 200, "a");
        expect(d.port, names[i], "/", 200, "a root\n");
        expect(d.port, names[i], "/only-a.txt", 200, "a's own\n");
    }
}

/* A Host no block names, and none at all, get the default host: the
 * top-level servlets and docroot, never a host block's files. */
static void test_default(void **state)
{
    (void)state;
    static const char *const names[] = {"other.test",  "test",     "w.test",
                                        "a.test.evil", "[::1]:80", ""};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        expect(d.port, names[i], "/p/greeting", 200, "default");
        expect(d.port, names[i], "/", 200, "default root\n");
        expect(d.port, names[i], "/only-a.txt", 404, NULL);
    }
}

/* "*.w.test" takes every name under w.test, the longer "*.deep.w.test"
 * those under deep.w.test; a host without docroot or servlets answers
 * 404 rather than the default host's pages. */
static void test_wildcard(void **state)
{
    (void)state;
    expect(d.port, "x.w.test", "/p/greeting", 200, "w");
    expect(d.port, "x.y.w.test", "/", 200, "w root\n");
    expect(d.port, "x.deep.w.test", "/", 200, "deep root\n");
    expect(d.port, "x.deep.w.test", "/p/greeting", 404, NULL);
    expect(d.port, "deep.w.test", "/", 200, "w root\n");
    expect(d.port, "bare.test", "/", 404, NULL);
    expect(d.port, "bare.test", "/p/greeting", 404, NULL);
    /* The status page is the server's: a loopback client under any host. */
    expect(d.port, "a.test", "/status", 200, NULL);
}

/* A host's session cookie carries no Domain: a browser keeps it for that
 * host alone and never sends it to another host's sandboxes. */
static void test_session_host_only(void **state)
{
    (void)state;
    th_response r;
    get_as(d.port, "a.test", "/s?op=count", &r);
    assert_int_equal(r.status, 200);
    char sc[256];
    assert_true(th_header(&r, "Set-Cookie", sc, sizeof(sc)));
    th_response_free(&r);
    assert_int_equal(strncmp(sc, "SLSESSION_a=", 12), 0);
    assert_null(strcasestr(sc, "domain"));
    /* Not a route of any other host. */
    expect(d.port, "x.w.test", "/s?op=count", 404, NULL);
    expect(d.port, "other.test", "/s?op=count", 404, NULL);
}

/* An absolute-form target names the host itself: it, not the Host
 * header, picks the block (RFC 9112 3.2.2). */
static void test_absolute_form(void **state)
{
    (void)state;
    expect(d.port, "a.test", "http://x.w.test/p/greeting", 200, "w");
    expect(d.port, "x.w.test", "https://A.test:443/p/greeting", 200, "a");
    expect(d.port, "a.test", "http://other.test/p/greeting", 200, "default");
    expect(d.port, "a.test", "http://a.test@x.w.test/p/greeting", 400, NULL);
}

/* A reload adds a host block: its docroot is opened by the new
 * configuration generation, and the others keep serving. */
static void test_reload_adds_host(void **state)
{
    (void)state;
    expect(d.port, "b.test", "/", 200, "default root\n");
    char more[256], text[4096];
    snprintf(more, sizeof(more), "host b.test { docroot %s/b; }\n", dir);
    conf_text(text, sizeof(text), more);
    int fd = open(d.conf, O_WRONLY | O_TRUNC | O_CLOEXEC);
    assert_true(fd >= 0);
    dprintf(fd, "listen 127.0.0.1:0;\n%sspool-dir %s/spool;\n", text, d.dir);
    close(fd);
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    assert_true(th_log_wait(&d, "reload: ", 5000));
    assert_true(th_log_wait(&d, " applied: ", 5000));
    expect(d.port, "b.test", "/", 200, "b root\n");
    expect(d.port, "a.test", "/p/greeting", 200, "a");
    expect(d.port, "nothing.test", "/", 200, "default root\n");
}

/* unknown-hosts refuse: 421 for a Host no block names and for a request
 * without one; the named hosts and the status page still answer. */
static void test_refuse(void **state)
{
    (void)state;
    th_daemon r;
    char text[1024];
    snprintf(text, sizeof(text),
             "status-page /status;\n"
             "unknown-hosts refuse;\n"
             "host a.test { docroot %s/a; }\n"
             "host *.w.test { docroot %s/w; }\n",
             dir, dir);
    assert_int_equal(th_start(&r, text, false), 0);
    expect(r.port, "other.test", "/", 421, NULL);
    expect(r.port, "w.test", "/", 421, NULL);
    expect(r.port, "", "/", 421, NULL);
    expect(r.port, "a.test", "/", 200, "a root\n");
    expect(r.port, "x.w.test", "/", 200, "w root\n");
    expect(r.port, "other.test", "/status", 200, NULL);
    assert_int_equal(th_stop(&r), 0);
}

/* sandletd -t checks host blocks: a missing docroot and a bad name, each
 * with its file, line and fix. */
static void test_check(void **state)
{
    (void)state;
    char conf[128], out[4096];
    snprintf(conf, sizeof(conf), "%s/check.conf", dir);
    FILE *f = fopen(conf, "w");
    assert_non_null(f);
    fprintf(f, "host a.test {\n    docroot %s/missing;\n}\n", dir);
    fclose(f);
    assert_int_not_equal(th_check_conf(conf, out, sizeof(out)), 0);
    char want[256];
    snprintf(want, sizeof(want), "check.conf:2: docroot '%s/missing' does not exist", dir);
    if (!strstr(out, want) || !strstr(out, "or fix host a.test's 'docroot'"))
        fail_msg("sandletd -t said: %s", out);
    f = fopen(conf, "w");
    assert_non_null(f);
    fputs("host a.test:80 { }\n", f);
    fclose(f);
    assert_int_not_equal(th_check_conf(conf, out, sizeof(out)), 0);
    if (!strstr(out, "check.conf:1:6: invalid host name 'a.test:80'") || !strstr(out, "no port"))
        fail_msg("sandletd -t said: %s", out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_default),
        cmocka_unit_test(test_wildcard),
        cmocka_unit_test(test_absolute_form),
        cmocka_unit_test(test_session_host_only),
        cmocka_unit_test(test_reload_adds_host),
        cmocka_unit_test(test_refuse),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

/*
 * test_session.c - memory sessions through the real daemon: a sandbox of
 * two workers shares one store, so a per-session counter keeps counting
 * whichever worker serves, and survives a worker's death; regenerated,
 * invalidated, expired and forged ids behave as sl_session(3) says.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static th_daemon d;

static int group_setup(void **state)
{
    (void)state;
    th_become_subreaper();
    signal(SIGPIPE, SIG_IGN);
    const char *so = th_build_path("tests/fixtures/.libs/session.so");
    char conf[2048];
    snprintf(conf, sizeof(conf),
             "sandbox shop { workers 2; session-size 64k; }\n"
             "sandbox brief { workers 1; session-timeout 1; session-cookie-secure on; }\n"
             "servlet /session { library \"%s\"; sandbox shop; }\n"
             "servlet /brief { library \"%s\"; sandbox brief; }\n",
             so, so);
    return th_start(&d, conf, false);
}

static int group_teardown(void **state)
{
    (void)state;
    return th_stop(&d) == 0 ? 0 : -1;
}

/* What one request told us. */
typedef struct answer {
    int status;
    char body[512];
    char cookie[256]; /* Set-Cookie, "" when none */
    long count;
    int pid;
    char id[40];
} answer;

static void parse_body(answer *a)
{
    const char *p;
    a->count = (p = strstr(a->body, "count=")) ? strtol(p + 6, NULL, 10) : -1;
    a->pid = (p = strstr(a->body, "pid=")) ? atoi(p + 4) : 0;
    a->id[0] = '\0';
    if ((p = strstr(a->body, " id=")) != NULL)
        snprintf(a->id, sizeof(a->id), "%.32s", p + 4);
}

static void ask_with(const char *method, const char *target, const char *cookie_id,
                     const char *extra, const char *body, answer *a)
{
    char headers[512] = "";
    if (cookie_id)
        snprintf(headers, sizeof(headers), "Cookie: theme=dark; SLSESSION=%s\r\n%s", cookie_id,
                 extra ? extra : "");
    else if (extra)
        snprintf(headers, sizeof(headers), "%s", extra);
    th_response r;
    assert_int_equal(th_request(d.port, method, target, headers, body, body ? strlen(body) : 0, &r),
                     0);
    a->status = r.status;
    snprintf(a->body, sizeof(a->body), "%s", r.body);
    if (!th_header(&r, "Set-Cookie", a->cookie, sizeof(a->cookie)))
        a->cookie[0] = '\0';
    th_response_free(&r);
    parse_body(a);
}

static void ask(const char *target, const char *cookie_id, answer *a)
{
    ask_with("GET", target, cookie_id, NULL, NULL, a);
}

/* The id a Set-Cookie carries. */
static void cookie_id(const answer *a, char *out)
{
    assert_true(strncmp(a->cookie, "SLSESSION=", 10) == 0);
    snprintf(out, 33, "%.32s", a->cookie + 10);
    assert_int_equal(strlen(out), 32);
    assert_int_equal(strspn(out, "0123456789abcdef"), 32);
}

/* Starts a session and returns its id. */
static void start_session(const char *path, char *id)
{
    answer a;
    char target[64];
    snprintf(target, sizeof(target), "%s?op=count", path);
    ask(target, NULL, &a);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.count, 1);
    cookie_id(&a, id);
    assert_string_equal(a.id, id);
}

static void test_cookie_attributes(void **state)
{
    (void)state;
    answer a;
    ask("/session?op=count", NULL, &a);
    assert_non_null(strstr(a.cookie, "; Path=/"));
    assert_non_null(strstr(a.cookie, "; HttpOnly"));
    assert_non_null(strstr(a.cookie, "; SameSite=Lax"));
    assert_null(strstr(a.cookie, "Secure"));
    ask("/brief?op=count", NULL, &a);
    assert_non_null(strstr(a.cookie, "; Secure"));
}

/* Sends a slow request on its own connection, so that one worker is busy
 * and the next request has to go to the other. */
static th_conn *hold_a_worker(void)
{
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /session?op=sleep HTTP/1.1\r\nHost: t\r\n"
                                    "Connection: close\r\n\r\n"),
                     0);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return c;
}

static void release_worker(th_conn *c)
{
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    th_close(c);
}

static void test_counter_across_workers(void **state)
{
    (void)state;
    char id[33];
    start_session("/session", id);
    int pids[2] = {0, 0};
    long expect = 2;
    for (int i = 0; i < 24; i++, expect++) {
        th_conn *busy = i % 3 == 0 ? hold_a_worker() : NULL;
        answer a;
        ask("/session?op=count", id, &a);
        assert_int_equal(a.status, 200);
        assert_int_equal(a.count, expect);
        assert_string_equal(a.id, id);
        /* A known session sends no new cookie. */
        assert_string_equal(a.cookie, "");
        if (!pids[0] || a.pid == pids[0])
            pids[0] = a.pid;
        else
            pids[1] = a.pid;
        if (busy)
            release_worker(busy);
    }
    /* Both workers served the same session. */
    assert_true(pids[0] > 0 && pids[1] > 0 && pids[0] != pids[1]);
}

static void test_survives_worker_kill(void **state)
{
    (void)state;
    char id[33];
    start_session("/session", id);
    answer a;
    ask("/session?op=count", id, &a);
    assert_int_equal(a.count, 2);
    /* The worker that just wrote the session dies; the store lives on in
     * the other worker and the supervisor. */
    assert_int_equal(kill(a.pid, SIGKILL), 0);
    int killed = a.pid;
    /* Until the acceptor hears of the death it may still hand the dead
     * worker a request (a 502 that has nothing to do with sessions). */
    char line[96];
    snprintf(line, sizeof(line), "worker %d of sandbox 'shop' was killed by signal 9", killed);
    assert_true(th_log_wait(&d, line, 3000));
    for (long expect = 3; expect < 10; expect++) {
        th_conn *busy = expect % 2 ? hold_a_worker() : NULL;
        ask("/session?op=count", id, &a);
        assert_int_equal(a.status, 200);
        assert_int_equal(a.count, expect);
        assert_int_not_equal(a.pid, killed);
        if (busy)
            release_worker(busy);
    }
}

static void test_regenerate(void **state)
{
    (void)state;
    char id[33], fresh[33];
    start_session("/session", id);
    answer a;
    ask("/session?op=count", id, &a);
    ask("/session?op=regen", id, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body, "regen rc=0"));
    assert_non_null(strstr(a.body, " n=2"));
    cookie_id(&a, fresh);
    assert_string_not_equal(fresh, id);
    /* The old id is dead: no session without create, a fresh one with. */
    ask("/session?op=peek", id, &a);
    assert_non_null(strstr(a.body, "none"));
    ask("/session?op=count", fresh, &a);
    assert_int_equal(a.count, 3);
    ask("/session?op=count", id, &a);
    assert_int_equal(a.count, 1);
    assert_string_not_equal(a.id, id);
}

static void test_invalidate(void **state)
{
    (void)state;
    char id[33];
    start_session("/session", id);
    answer a;
    ask("/session?op=invalidate", id, &a);
    assert_non_null(strstr(a.body, "invalidate rc=0"));
    assert_true(strncmp(a.cookie, "SLSESSION=;", 11) == 0);
    assert_non_null(strstr(a.cookie, "Max-Age=0"));
    ask("/session?op=peek", id, &a);
    assert_non_null(strstr(a.body, "none"));
}

static void test_expiry(void **state)
{
    (void)state;
    char id[33];
    start_session("/brief", id);
    answer a;
    ask("/brief?op=peek", id, &a);
    assert_non_null(strstr(a.body, "1 pid="));
    /* session-timeout 1: idle for more than a second and it is gone. */
    struct timespec ts = {2, 600 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ask("/brief?op=peek", id, &a);
    assert_non_null(strstr(a.body, "none"));
    ask("/brief?op=count", id, &a);
    assert_int_equal(a.count, 1);
    assert_string_not_equal(a.id, id);
}

static void test_forged_ids(void **state)
{
    (void)state;
    static const char *const forged[] = {
        "00000000000000000000000000000000", /* well-formed, unknown */
        "0123456789abcdef0123456789abcdeg", /* not hex */
        "0123456789abcdef",                 /* short */
        "\"><script>x</script>",            /* hostile */
    };
    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
        answer a;
        ask("/session?op=count", forged[i], &a);
        assert_int_equal(a.status, 200);
        assert_int_equal(a.count, 1);
        char id[33];
        cookie_id(&a, id);
        assert_string_not_equal(id, forged[i]);
    }
}

/* Clients without cookies carry the id in links and forms. */
static void test_url_and_form(void **state)
{
    (void)state;
    char id[33], target[128];
    start_session("/session", id);
    answer a;
    snprintf(target, sizeof(target), "/session?op=links&SLSESSION=%s", id);
    ask(target, NULL, &a);
    char url[96];
    snprintf(url, sizeof(url), "/session?op=count&SLSESSION=%s#top", id);
    assert_non_null(strstr(a.body, url));
    char field[128];
    snprintf(field, sizeof(field), "<input type=\"hidden\" name=\"SLSESSION\" value=\"%s\">", id);
    assert_non_null(strstr(a.body, field));
    snprintf(target, sizeof(target), "/session?op=count&SLSESSION=%s", id);
    ask(target, NULL, &a);
    assert_int_equal(a.count, 2);
    assert_string_equal(a.cookie, "");
    char body[64];
    snprintf(body, sizeof(body), "a=1&SLSESSION=%s", id);
    ask_with("POST", "/session?op=count", NULL,
             "Content-Type: application/x-www-form-urlencoded\r\n", body, &a);
    assert_int_equal(a.count, 3);
}

/* A servlet that declares memory sessions refuses to start in a sandbox
 * that has none, with a message that says what to change. */
static void test_sessions_none_refused(void **state)
{
    (void)state;
    th_daemon nd;
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "sandbox bare { workers 1; sessions none; }\n"
             "servlet /session { library \"%s\"; sandbox bare; }\n",
             th_build_path("tests/fixtures/.libs/session.so"));
    assert_int_equal(th_start(&nd, conf, false), 0);
    th_response r;
    assert_int_equal(th_request(nd.port, "GET", "/session", NULL, NULL, 0, &r), 0);
    assert_true(r.status >= 500);
    th_response_free(&r);
    assert_true(
        th_log_wait(&nd, "wants memory sessions but sandbox 'bare' has 'sessions none'", 3000));
    th_stop(&nd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cookie_attributes),
        cmocka_unit_test(test_counter_across_workers),
        cmocka_unit_test(test_survives_worker_kill),
        cmocka_unit_test(test_regenerate),
        cmocka_unit_test(test_invalidate),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_forged_ids),
        cmocka_unit_test(test_url_and_form),
        cmocka_unit_test(test_sessions_none_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

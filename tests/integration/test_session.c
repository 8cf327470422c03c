/*
 * test_session.c - memory sessions through the real daemon: a sandbox of
 * two workers shares one store, so a per-session counter keeps counting
 * whichever worker serves, and survives a worker's death; regenerated,
 * invalidated, expired and forged ids behave as sl_session(3) says.
 * Sessions are bound to their sandbox (issue 13): two sandboxes' cookies
 * neither reach, nor are readable by, nor overwrite each other.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static th_daemon d;

/* A session token: 128-bit id and 128-bit MAC in hex. */
#define TOKEN 64

/* The session cookie of the sandbox serving target in this file's
 * daemon: shop for /session, brief for /brief. */
static const char *cookie_for(const char *target)
{
    return strncmp(target, "/brief", 6) == 0 ? "SLSESSION_brief" : "SLSESSION_shop";
}

static int group_setup(void **state)
{
    (void)state;
    th_prepare();
    const char *so = th_fixture("session");
    char conf[2048];
    snprintf(conf, sizeof(conf),
             "sandbox shop { workers 2; session-size 64k; }\n"
             "sandbox brief { workers 1; session-timeout 1; session-cookie-secure on; }\n"
             "sandbox alpha { workers 1; session-size 64k; }\n"
             "sandbox beta { workers 1; session-size 64k; }\n"
             "servlet /session { library \"%s\"; sandbox shop; }\n"
             "servlet /brief { library \"%s\"; sandbox brief; }\n"
             "servlet /a/session { library \"%s\"; sandbox alpha; }\n"
             "servlet /a/more/* { library \"%s\"; sandbox alpha; }\n"
             "servlet /b/session { library \"%s\"; sandbox beta; }\n",
             so, so, so, so, so);
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
    char id[TOKEN + 8];
} answer;

static void parse_body(answer *a)
{
    const char *p;
    a->count = (p = strstr(a->body, "count=")) ? strtol(p + 6, NULL, 10) : -1;
    a->pid = (p = strstr(a->body, "pid=")) ? atoi(p + 4) : 0;
    a->id[0] = '\0';
    if ((p = strstr(a->body, " id=")) != NULL)
        snprintf(a->id, sizeof(a->id), "%.64s", p + 4);
}

static void ask_with(const char *method, const char *target, const char *cookie_id,
                     const char *extra, const char *body, answer *a)
{
    char headers[512] = "";
    if (cookie_id)
        snprintf(headers, sizeof(headers), "Cookie: theme=dark; %s=%s\r\n%s", cookie_for(target),
                 cookie_id, extra ? extra : "");
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

/* The token a Set-Cookie carries for the cookie called name. */
static void cookie_token(const answer *a, const char *name, char *out)
{
    size_t n = strlen(name);
    assert_true(strncmp(a->cookie, name, n) == 0 && a->cookie[n] == '=');
    snprintf(out, TOKEN + 1, "%.64s", a->cookie + n + 1);
    assert_int_equal(strlen(out), TOKEN);
    assert_int_equal(strspn(out, "0123456789abcdef"), TOKEN);
}

static void cookie_id(const answer *a, char *out)
{
    cookie_token(a, "SLSESSION_shop", out);
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
    cookie_token(&a, cookie_for(path), id);
    assert_string_equal(a.id, id);
}

static void test_cookie_attributes(void **state)
{
    (void)state;
    answer a;
    ask("/session?op=count", NULL, &a);
    /* The sandbox's own cookie, scoped to its routes. */
    assert_true(strncmp(a.cookie, "SLSESSION_shop=", 15) == 0);
    assert_non_null(strstr(a.cookie, "; Path=/session;"));
    assert_non_null(strstr(a.cookie, "; HttpOnly"));
    assert_non_null(strstr(a.cookie, "; SameSite=Lax"));
    assert_null(strstr(a.cookie, "Secure"));
    ask("/brief?op=count", NULL, &a);
    assert_true(strncmp(a.cookie, "SLSESSION_brief=", 16) == 0);
    assert_non_null(strstr(a.cookie, "; Path=/brief;"));
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
    char id[TOKEN + 1];
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
    char id[TOKEN + 1];
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
    char id[TOKEN + 1], fresh[TOKEN + 1];
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
    char id[TOKEN + 1];
    start_session("/session", id);
    answer a;
    ask("/session?op=invalidate", id, &a);
    assert_non_null(strstr(a.body, "invalidate rc=0"));
    assert_true(strncmp(a.cookie, "SLSESSION_shop=;", 16) == 0);
    assert_non_null(strstr(a.cookie, "Max-Age=0"));
    ask("/session?op=peek", id, &a);
    assert_non_null(strstr(a.body, "none"));
}

static void test_expiry(void **state)
{
    (void)state;
    char id[TOKEN + 1];
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
        /* well-formed, MAC made up */
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg", /* not hex */
        "0123456789abcdef0123456789abcdef", /* a bare id, as before sessions had a MAC */
        "0123456789abcdef",                 /* short */
        "\"><script>x</script>",            /* hostile */
    };
    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
        answer a;
        ask("/session?op=count", forged[i], &a);
        assert_int_equal(a.status, 200);
        assert_int_equal(a.count, 1);
        char id[TOKEN + 1];
        cookie_id(&a, id);
        assert_string_not_equal(id, forged[i]);
    }
}

/* Clients without cookies carry the id in links and forms. */
static void test_url_and_form(void **state)
{
    (void)state;
    char id[TOKEN + 1], target[160];
    start_session("/session", id);
    answer a;
    snprintf(target, sizeof(target), "/session?op=links&SLSESSION_shop=%s", id);
    ask(target, NULL, &a);
    char url[160];
    snprintf(url, sizeof(url), "/session?op=count&SLSESSION_shop=%s#top", id);
    assert_non_null(strstr(a.body, url));
    char field[160];
    snprintf(field, sizeof(field), "<input type=\"hidden\" name=\"SLSESSION_shop\" value=\"%s\">",
             id);
    assert_non_null(strstr(a.body, field));
    snprintf(target, sizeof(target), "/session?op=count&SLSESSION_shop=%s", id);
    ask(target, NULL, &a);
    assert_int_equal(a.count, 2);
    assert_string_equal(a.cookie, "");
    char body[128];
    snprintf(body, sizeof(body), "a=1&SLSESSION_shop=%s", id);
    ask_with("POST", "/session?op=count", NULL,
             "Content-Type: application/x-www-form-urlencoded\r\n", body, &a);
    assert_int_equal(a.count, 3);
}

/* ---- two sandboxes, alpha and beta: sessions do not cross ---------------- */

/* A browser's cookie jar, as far as these tests need one: cookies by name
 * and Path, sent where their Path matches (RFC 6265 5.1.4), replaced by a
 * Set-Cookie of the same name and Path, deleted by Max-Age=0. */
typedef struct jar_cookie {
    char name[64], value[128], path[64];
} jar_cookie;

typedef struct jar {
    jar_cookie c[8];
    size_t n;
} jar;

static bool path_match(const char *cookie_path, const char *req, size_t req_len)
{
    size_t n = strlen(cookie_path);
    if (n > req_len || strncmp(cookie_path, req, n) != 0)
        return false;
    return n == req_len || cookie_path[n - 1] == '/' || req[n] == '/';
}

static void jar_take(jar *j, const char *set_cookie)
{
    if (!set_cookie[0])
        return;
    jar_cookie k = {{0}, {0}, "/"};
    const char *eq = strchr(set_cookie, '='), *semi = strchr(set_cookie, ';');
    assert_non_null(eq);
    snprintf(k.name, sizeof(k.name), "%.*s", (int)(eq - set_cookie), set_cookie);
    size_t vl = semi ? (size_t)(semi - eq - 1) : strlen(eq + 1);
    snprintf(k.value, sizeof(k.value), "%.*s", (int)vl, eq + 1);
    const char *p = strstr(set_cookie, "; Path=");
    if (p) {
        p += 7;
        snprintf(k.path, sizeof(k.path), "%.*s", (int)strcspn(p, ";"), p);
    }
    bool expire = strstr(set_cookie, "; Max-Age=0") != NULL;
    for (size_t i = 0; i < j->n; i++) {
        if (strcmp(j->c[i].name, k.name) != 0 || strcmp(j->c[i].path, k.path) != 0)
            continue;
        if (expire)
            j->c[i] = j->c[--j->n];
        else
            j->c[i] = k;
        return;
    }
    if (!expire && j->n < 8)
        j->c[j->n++] = k;
}

static const char *jar_get(const jar *j, const char *name)
{
    for (size_t i = 0; i < j->n; i++)
        if (strcmp(j->c[i].name, name) == 0)
            return j->c[i].value;
    return NULL;
}

/* One request as a browser holding j would send it. */
static void jar_ask(jar *j, const char *target, answer *a)
{
    char headers[1024] = "";
    size_t len = 0, plen = strcspn(target, "?");
    for (size_t i = 0; i < j->n; i++) {
        if (!path_match(j->c[i].path, target, plen))
            continue;
        int n = snprintf(headers + len, sizeof(headers) - len, "%s%s=%s",
                         len ? "; " : "Cookie: ", j->c[i].name, j->c[i].value);
        assert_true(n > 0 && (size_t)n < sizeof(headers) - len);
        len += (size_t)n;
    }
    if (len)
        snprintf(headers + len, sizeof(headers) - len, "\r\n");
    th_response r;
    assert_int_equal(th_request(d.port, "GET", target, headers, NULL, 0, &r), 0);
    a->status = r.status;
    snprintf(a->body, sizeof(a->body), "%s", r.body);
    if (!th_header(&r, "Set-Cookie", a->cookie, sizeof(a->cookie)))
        a->cookie[0] = '\0';
    th_response_free(&r);
    parse_body(a);
    jar_take(j, a->cookie);
}

/* One request with exactly this Cookie header. */
static void ask_cookie(const char *target, const char *cookie, answer *a)
{
    char headers[512];
    snprintf(headers, sizeof(headers), "Cookie: %s\r\n", cookie);
    ask_with("GET", target, NULL, headers, NULL, a);
}

/* The name and value of the cookie a response set, whatever its name. */
static void set_cookie_parts(const answer *a, char *name, size_t ncap, char *value, size_t vcap)
{
    size_t n = strcspn(a->cookie, "=");
    assert_true(a->cookie[n] == '=');
    snprintf(name, ncap, "%.*s", (int)n, a->cookie);
    snprintf(value, vcap, "%.*s", (int)strcspn(a->cookie + n + 1, ";"), a->cookie + n + 1);
}

/* Theft: beta's servlet is not sent alpha's cookie, and alpha's token
 * replayed to beta, under either name, is no session there.  The first
 * part holds for any cookie naming, so that it shows the hole itself. */
static void test_cross_theft(void **state)
{
    (void)state;
    jar j = {0};
    answer a;
    jar_ask(&j, "/a/session?op=count", &a);
    assert_int_equal(a.count, 1);
    char name[64], tok[TOKEN + 8];
    set_cookie_parts(&a, name, sizeof(name), tok, sizeof(tok));
    jar_ask(&j, "/b/session?op=cookies", &a);
    assert_int_equal(a.status, 200);
    assert_null(strstr(a.body, tok));
    assert_non_null(strstr(a.body, "cookies=[]"));
    /* alpha's own cookie, scoped to the /a its routes share. */
    assert_string_equal(name, "SLSESSION_alpha");
    assert_string_equal(jar_get(&j, name), tok);
    assert_string_equal(j.c[0].path, "/a");
    jar_ask(&j, "/a/more/x?op=count", &a);
    assert_int_equal(a.count, 2);

    char cookie[256];
    snprintf(cookie, sizeof(cookie), "SLSESSION_beta=%s", tok);
    ask_cookie("/b/session?op=peek", cookie, &a);
    assert_non_null(strstr(a.body, "none"));
    assert_string_equal(a.cookie, ""); /* only looked: sets nothing */
    snprintf(cookie, sizeof(cookie), "SLSESSION_alpha=%s", tok);
    ask_cookie("/b/session?op=peek", cookie, &a);
    assert_non_null(strstr(a.body, "none"));
    /* A client that sends alpha's cookie to beta anyway (an old browser,
     * nested routes): the acceptor takes it out before beta's worker sees
     * the header; every other cookie stays as sent. */
    snprintf(cookie, sizeof(cookie),
             "theme=dark; SLSESSION_alpha=%s;SLSESSION_beta=x ; slsession_ALPHA = %s;a_b=1", tok,
             tok);
    ask_cookie("/b/session?op=cookies", cookie, &a);
    assert_int_equal(a.status, 200);
    assert_null(strstr(a.body, tok));
    assert_non_null(strstr(a.body, "cookies=[theme=dark;SLSESSION_beta=x ;a_b=1]"));
    snprintf(cookie, sizeof(cookie), "SLSESSION_alpha=%s", tok);
    ask_cookie("/b/session?op=cookies", cookie, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body, "cookies=[]"));
    ask_cookie("/b/session?op=cookies", ";;SLSESSION_alpha;=;_", &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body, "cookies=[;;SLSESSION_alpha;=;_]"));
    /* alpha's session is whole. */
    jar_ask(&j, "/a/session?op=count", &a);
    assert_int_equal(a.count, 3);
}

/* Fixation: beta cannot put a cookie named like alpha's session cookie in
 * the client's jar, and a token beta issued is no session in alpha. */
static void test_cross_fixation(void **state)
{
    (void)state;
    answer a;
    /* Whatever alpha's cookie is called, beta may not set it. */
    ask("/a/session?op=count", NULL, &a);
    char aname[64], atok0[TOKEN + 8], target0[256];
    set_cookie_parts(&a, aname, sizeof(aname), atok0, sizeof(atok0));
    snprintf(target0, sizeof(target0), "/b/session?op=plant&name=%s&value=%s", aname,
             "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    ask(target0, NULL, &a);
    assert_int_equal(a.status, 502);
    assert_string_equal(a.cookie, "");

    ask("/b/session?op=count", NULL, &a);
    char btok[TOKEN + 1];
    cookie_token(&a, "SLSESSION_beta", btok);
    assert_non_null(strstr(a.cookie, "; Path=/b/session;"));

    static const char *const names[] = {"SLSESSION_alpha", "slsession_ALPHA", "SLSESSION_shop"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char target[200], line[160];
        snprintf(target, sizeof(target), "/b/session?op=plant&name=%s&value=%s", names[i], btok);
        ask(target, NULL, &a);
        assert_int_equal(a.status, 502);
        assert_string_equal(a.cookie, "");
        assert_null(strstr(a.body, btok));
        snprintf(line, sizeof(line),
                 "servlet /b/session of sandbox 'beta' tried to set the session "
                 "cookie %s",
                 i == 2 ? "SLSESSION_shop" : "SLSESSION_alpha");
        assert_true(th_log_wait(&d, line, 3000));
    }
    /* Its own cookies, session or not, still go out. */
    ask("/b/session?op=plant&name=theme&value=dark", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.cookie, "theme=dark; Path=/");
    ask("/b/session?op=plant&name=SLSESSION_beta&value=x", NULL, &a);
    assert_int_equal(a.status, 200);

    /* beta's token in alpha: by cookie and by parameter, no session; with
     * create, a fresh one under alpha's own cookie. */
    char cookie[256], target[200];
    snprintf(cookie, sizeof(cookie), "SLSESSION_alpha=%s", btok);
    ask_cookie("/a/session?op=peek", cookie, &a);
    assert_non_null(strstr(a.body, "none"));
    snprintf(target, sizeof(target), "/a/session?op=peek&SLSESSION_alpha=%s", btok);
    ask(target, NULL, &a);
    assert_non_null(strstr(a.body, "none"));
    ask_cookie("/a/session?op=count", cookie, &a);
    assert_int_equal(a.count, 1);
    char atok[TOKEN + 1];
    cookie_token(&a, "SLSESSION_alpha", atok);
    assert_string_not_equal(atok, btok);
}

/* Clobber: using beta's sessions leaves the client's alpha cookie alone;
 * alpha's session lives on through beta's create and invalidate. */
static void test_cross_clobber(void **state)
{
    (void)state;
    jar j = {0};
    answer a;
    jar_ask(&j, "/a/session?op=count", &a);
    assert_int_equal(a.count, 1);
    char name[64], before[TOKEN + 8];
    set_cookie_parts(&a, name, sizeof(name), before, sizeof(before));
    jar_ask(&j, "/b/session?op=peek", &a);
    assert_string_equal(a.cookie, "");
    jar_ask(&j, "/b/session?op=count", &a);
    assert_int_equal(a.count, 1);
    assert_string_equal(jar_get(&j, name), before);
    jar_ask(&j, "/a/session?op=count", &a);
    assert_int_equal(a.count, 2);
    jar_ask(&j, "/b/session?op=count", &a);
    assert_int_equal(a.count, 2);
    assert_non_null(jar_get(&j, "SLSESSION_beta"));
    jar_ask(&j, "/b/session?op=invalidate", &a);
    assert_null(jar_get(&j, "SLSESSION_beta"));
    assert_string_equal(jar_get(&j, name), before);
    jar_ask(&j, "/a/session?op=count", &a);
    assert_int_equal(a.count, 3);
}

/* session-secret-file: a file others may read stops sandletd with the fix
 * named; a private one is taken, and sessions work with keys from it. */
static void test_secret_file(void **state)
{
    (void)state;
    char dir[64];
    assert_int_equal(th_tempdir(dir, sizeof(dir), "session", 0), 0);
    char secret[128], conf[128], body[1024], out[1024];
    snprintf(secret, sizeof(secret), "%s/session.key", dir);
    snprintf(conf, sizeof(conf), "%s/sandlet.conf", dir);
    FILE *f = fopen(secret, "w");
    assert_non_null(f);
    assert_int_equal(fwrite("0123456789abcdef0123456789abcdef", 1, 32, f), 32);
    fclose(f);
    assert_int_equal(chmod(secret, 0644), 0);
    snprintf(body, sizeof(body),
             "session-secret-file %s;\n"
             "sandbox keyed { workers 1; session-size 64k; }\n"
             "servlet /keyed { library \"%s\"; sandbox keyed; }\n",
             secret, th_fixture("session"));
    f = fopen(conf, "w");
    assert_non_null(f);
    fputs(body, f);
    fclose(f);
    assert_int_equal(th_check_conf(conf, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "may be read or written by group or others"));
    assert_non_null(strstr(out, "chmod 600"));
    assert_int_equal(chmod(secret, 0600), 0);
    assert_int_equal(th_check_conf(conf, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "OK"));

    th_daemon kd;
    assert_int_equal(th_start(&kd, body, false), 0);
    th_response r;
    assert_int_equal(th_request(kd.port, "GET", "/keyed?op=count", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    char sc[256], headers[300];
    assert_true(th_header(&r, "Set-Cookie", sc, sizeof(sc)));
    th_response_free(&r);
    assert_int_equal(strncmp(sc, "SLSESSION_keyed=", 16), 0);
    snprintf(headers, sizeof(headers), "Cookie: %.*s\r\n", (int)strcspn(sc, ";"), sc);
    assert_int_equal(th_request(kd.port, "GET", "/keyed?op=count", headers, NULL, 0, &r), 0);
    assert_non_null(strstr(r.body, "count=2"));
    th_response_free(&r);
    th_stop(&kd);
    unlink(secret);
    unlink(conf);
    assert_int_equal(rmdir(dir), 0);
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
             th_fixture("session"));
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
        cmocka_unit_test(test_cross_theft),
        cmocka_unit_test(test_cross_fixation),
        cmocka_unit_test(test_cross_clobber),
        cmocka_unit_test(test_secret_file),
        cmocka_unit_test(test_sessions_none_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

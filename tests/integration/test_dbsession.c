/*
 * test_dbsession.c - "sessions database" through the real sandletd against
 * a throwaway PostgreSQL (tests/db/pgtest.h): sessions kept in the
 * sandlet_sessions table, shared by two sandletd on one database, kept
 * across a restart, updated by concurrent requests on both hosts without
 * a lost update, untouched by a request that crashed, 503 while the
 * database is down (never an empty session), expired and swept; and a
 * C Server Page that uses the same database and sessions.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "../db/pgtest.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static pgtest pg;
static th_daemon a, b;
static char dir[64];
static char secret[128];
static char root[128], cache[128];
static char conf[4096];

/* A page in a sandbox with a database and database sessions: a query
 * whose parameter is request data, and a counter in the session. */
static const char page[] =
    "<%@ include <sandlet/db.h> %><%@ include <stdlib.h> %><%\n"
    "    const char *v[] = {sl_param(rq, \"name\", \"x\")};\n"
    "    sl_db_result *r = sl_db_query(rq, \"SELECT upper($1) AS u\", 1, v);\n"
    "    sl_session *s = sl_session_get(rq, rs, true);\n"
    "    if (!r || !s) return 500;\n"
    "    const char *n = sl_session_str(s, \"n\");\n"
    "    long c = (n ? strtol(n, NULL, 10) : 0) + 1;\n"
    "    sl_session_set_str(s, \"n\", sl_sprintf(rq, \"%ld\", c));\n"
    "%>db=<%= sl_db_text_by(r, 0, \"u\") %> count=<%= c %>\n";

static int setup(void **state)
{
    (void)state;
    th_prepare();
    if (pgtest_start_or_say(&pg) != 0)
        return -1;
    if (th_tempdir(dir, sizeof(dir), "dbsess", 0700) != 0)
        return -1;
    /* One secret for both hosts: an id one mints verifies on the other. */
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    int fd = open(secret, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    uint8_t key[32];
    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (uint8_t)(i * 37 + 11);
    if (fd < 0 || write(fd, key, sizeof(key)) != (ssize_t)sizeof(key))
        return -1;
    close(fd);
    snprintf(root, sizeof(root), "%s/www", dir);
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    char pagefile[192];
    snprintf(pagefile, sizeof(pagefile), "%s/visits.csp", root);
    if (mkdir(root, 0755) != 0 || mkdir(cache, 0755) != 0 || chmod(dir, 0755) != 0)
        return -1;
    fd = open(pagefile, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, page, strlen(page)) != (ssize_t)strlen(page))
        return -1;
    close(fd);
    /* The set-up sandlet.conf(5) advises: each sandbox's role has a schema
     * of its own, where its first worker makes its table (shop connects
     * as the cluster's owner and keeps its table in public); app also
     * reads at repeatable read by default, where a read in the lock's
     * transaction would see what was there before the lock's last holder
     * saved. */
    char err[512];
    if (pgtest_exec(&pg,
                    "CREATE ROLE app LOGIN;"
                    "ALTER ROLE app SET default_transaction_isolation = 'repeatable read';"
                    "CREATE SCHEMA app AUTHORIZATION app;"
                    "CREATE ROLE brief LOGIN;"
                    "CREATE SCHEMA brief AUTHORIZATION brief",
                    err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    snprintf(conf, sizeof(conf),
             "docroot \"%s\";\npage-cache \"%s\";\n"
             "pages / { sandbox shop; }\n"
             "session-secret-file \"%s\";\n"
             "sandbox shop { workers 2; database \"%s\"; sessions database; }\n"
             "servlet /session { library \"%s\"; sandbox shop; }\n"
             "sandbox brief { workers 1; database \"%s user=brief\"; sessions database; "
             "session-timeout 2; }\n"
             "servlet /brief { library \"%s\"; sandbox brief; }\n"
             "sandbox granted { workers 2; database \"%s user=app\"; sessions database; }\n"
             "servlet /granted { library \"%s\"; sandbox granted; }\n",
             root, cache, secret, pg.conninfo, th_fixture("session"), pg.conninfo,
             th_fixture("session"), pg.conninfo, th_fixture("session"));
    if (th_start(&a, conf, false) != 0 || th_start(&b, conf, false) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int rc = 0;
    if (a.pid && th_stop(&a) != 0)
        rc = -1;
    if (b.pid && th_stop(&b) != 0)
        rc = -1;
    pgtest_destroy(&pg);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = -1;
    return rc;
}

/* One number from the database (the first column of the first row). */
static long long sql_number(const char *sql)
{
    PGconn *c = PQconnectdb(pg.conninfo);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    long long v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    PQfinish(c);
    return v;
}

/* The session cookie a response set ("NAME=VALUE"), or "" when none. */
static void cookie_of(const th_response *r, char *out, size_t cap)
{
    out[0] = '\0';
    const char *p = strstr(r->head, "Set-Cookie: SLSESSION_");
    if (!p)
        return;
    p += strlen("Set-Cookie: ");
    size_t n = strcspn(p, ";\r\n");
    assert_true(n < cap);
    memcpy(out, p, n);
    out[n] = '\0';
}

/* GET target on port with the cookie; the body's count=N, or -status. */
static long count_on(unsigned port, const char *target, const char *cookie, char *newcookie,
                     size_t cap)
{
    char hdr[512];
    snprintf(hdr, sizeof(hdr), "Cookie: %s\r\n", cookie);
    th_response r;
    assert_int_equal(th_request(port, "GET", target, cookie[0] ? hdr : NULL, NULL, 0, &r), 0);
    long v = -r.status;
    const char *p = r.status == 200 ? strstr(r.body, "count=") : NULL;
    if (p)
        v = strtol(p + 6, NULL, 10);
    if (newcookie)
        cookie_of(&r, newcookie, cap);
    th_response_free(&r);
    return v;
}

static void new_session(unsigned port, char *cookie, size_t cap)
{
    long v = count_on(port, "/session", "", cookie, cap);
    if (v != 1) {
        char *log = th_slurp(port == a.port ? a.log : b.log, NULL);
        fail_msg("a new session answered %ld; log:\n%s", v, log ? log : "(none)");
    }
    assert_true(cookie[0] != '\0');
}

static void test_kept_in_the_table(void **state)
{
    (void)state;
    char cookie[256];
    new_session(a.port, cookie, sizeof(cookie));
    for (long i = 2; i <= 5; i++)
        assert_int_equal(count_on(a.port, "/session", cookie, NULL, 0), i);
    /* The workers made the table; the session is a row of sandbox shop,
     * sealed: its entry n=5 is nowhere in clear. */
    assert_true(sql_number("SELECT count(*) FROM sandlet_sessions WHERE sandbox = 'shop'") >= 1);
    assert_int_equal(sql_number("SELECT count(*) FROM sandlet_sessions WHERE sandbox = 'shop' AND "
                                "position('\\x01010000006e3500'::bytea IN data) > 0"),
                     0);
}

static void test_two_hosts_share(void **state)
{
    (void)state;
    char cookie[256];
    new_session(a.port, cookie, sizeof(cookie));
    for (long i = 2; i <= 12; i++)
        assert_int_equal(count_on(i % 2 ? a.port : b.port, "/session", cookie, NULL, 0), i);
}

/* Children each add 1 to one session of path, alternating hosts, all at
 * once. */
static void concurrent(const char *path)
{
    enum { KIDS = 6, EACH = 15 };
    char cookie[256];
    long v = count_on(a.port, path, "", cookie, sizeof(cookie));
    if (v != 1) {
        char *log = th_slurp(a.log, NULL);
        fprintf(stderr, "%s\n", log ? log : "(none)");
        fail_msg("a new session of %s answered %ld", path, v);
    }
    pid_t kids[KIDS];
    for (int k = 0; k < KIDS; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            int bad = 0;
            for (int i = 0; i < EACH; i++)
                bad += count_on((i + k) % 2 ? a.port : b.port, path, cookie, NULL, 0) <= 1;
            _exit(bad ? 1 : 0);
        }
    }
    for (int k = 0; k < KIDS; k++) {
        int st;
        assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    assert_int_equal(count_on(b.port, path, cookie, NULL, 0), 1 + KIDS * EACH + 1);
}

static void test_concurrent_no_lost_update(void **state)
{
    (void)state;
    concurrent("/session");
}

/* A table in the role's own schema, at repeatable read. */
static void test_own_schema_repeatable_read(void **state)
{
    (void)state;
    concurrent("/granted");
    assert_true(sql_number("SELECT count(*) FROM app.sandlet_sessions WHERE sandbox = 'granted'") ==
                1);
}

static void test_survives_restart(void **state)
{
    (void)state;
    char cookie[256];
    new_session(a.port, cookie, sizeof(cookie));
    assert_int_equal(count_on(a.port, "/session", cookie, NULL, 0), 2);
    assert_int_equal(th_stop(&a), 0);
    memset(&a, 0, sizeof(a));
    assert_int_equal(th_start(&a, conf, false), 0);
    assert_int_equal(count_on(a.port, "/session", cookie, NULL, 0), 3);
}

static void test_crash_changes_nothing(void **state)
{
    (void)state;
    char cookie[256];
    new_session(a.port, cookie, sizeof(cookie));
    assert_int_equal(count_on(a.port, "/session", cookie, NULL, 0), 2);
    /* Sets n to 999 and dies holding the session. */
    long v = count_on(a.port, "/session?op=crash", cookie, NULL, 0);
    assert_true(v <= -500);
    /* The lock died with the worker's connection: no wait, and the value
     * is the one before the crash. */
    unsigned long long t0 = th_now_ms();
    assert_int_equal(count_on(b.port, "/session", cookie, NULL, 0), 3);
    assert_true(th_now_ms() - t0 < 2000);
}

static void test_database_down_is_503(void **state)
{
    (void)state;
    char cookie[256], err[512];
    new_session(a.port, cookie, sizeof(cookie));
    assert_int_equal(count_on(a.port, "/session", cookie, NULL, 0), 2);
    assert_int_equal(pgtest_stop(&pg, err, sizeof(err)), 0);
    th_response r;
    char hdr[512], ra[16];
    snprintf(hdr, sizeof(hdr), "Cookie: %s\r\n", cookie);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(th_request(a.port, "GET", "/session", hdr, NULL, 0, &r), 0);
        /* The servlet printed "nosession" with status 200; the answer is
         * 503 all the same, never a page without the client's session. */
        assert_int_equal(r.status, 503);
        assert_true(th_header(&r, "Retry-After", ra, sizeof(ra)));
        assert_null(strstr(r.body, "count="));
        th_response_free(&r);
    }
    /* A request of the sandbox that needs no session still serves. */
    assert_int_equal(th_request(a.port, "GET", "/session?op=cookies", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(pgtest_restart(&pg, err, sizeof(err)), 0);
    /* Back: the session is where it was. */
    long v = -503;
    for (int i = 0; i < 50 && v == -503; i++) {
        v = count_on(a.port, "/session", cookie, NULL, 0);
        if (v == -503)
            usleep(100 * 1000);
    }
    assert_int_equal(v, 3);
}

static void test_expiry_and_sweep(void **state)
{
    (void)state;
    char cookie[256], fresh[256];
    assert_int_equal(count_on(a.port, "/brief", "", cookie, sizeof(cookie)), 1);
    assert_int_equal(count_on(a.port, "/brief", cookie, NULL, 0), 2);
    sleep(3);
    /* Idle past session-timeout 2: a new session, under a new id. */
    assert_int_equal(count_on(a.port, "/brief", cookie, fresh, sizeof(fresh)), 1);
    assert_true(fresh[0] != '\0');
    assert_string_not_equal(fresh, cookie);
    /* The expired row is removed by a sweep (every second here). */
    long long left = 1;
    for (int i = 0; i < 40 && left; i++) {
        usleep(200 * 1000);
        assert_int_equal(count_on(a.port, "/brief", fresh, NULL, 0) > 1, 1);
        left = sql_number("SELECT count(*) FROM brief.sandlet_sessions WHERE sandbox = 'brief' AND "
                          "expires < now()");
    }
    assert_int_equal(left, 0);
}

static void test_regenerate_and_invalidate(void **state)
{
    (void)state;
    char cookie[256], fresh[256];
    new_session(a.port, cookie, sizeof(cookie));
    long long before = sql_number("SELECT count(*) FROM sandlet_sessions WHERE sandbox = 'shop'");
    th_response r;
    char hdr[512];
    snprintf(hdr, sizeof(hdr), "Cookie: %s\r\n", cookie);
    assert_int_equal(th_request(a.port, "GET", "/session?op=regen", hdr, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "regen rc=0"));
    assert_non_null(strstr(r.body, "n=1"));
    cookie_of(&r, fresh, sizeof(fresh));
    th_response_free(&r);
    assert_true(fresh[0] && strcmp(fresh, cookie) != 0);
    /* The old id is gone, the new one carries the data, on either host. */
    assert_int_equal(sql_number("SELECT count(*) FROM sandlet_sessions WHERE sandbox = 'shop'"),
                     before);
    assert_int_equal(count_on(b.port, "/session", fresh, NULL, 0), 2);
    assert_int_equal(count_on(b.port, "/session?op=peek", cookie, NULL, 0), -200);
    snprintf(hdr, sizeof(hdr), "Cookie: %s\r\n", fresh);
    assert_int_equal(th_request(b.port, "GET", "/session?op=invalidate", hdr, NULL, 0, &r), 0);
    assert_non_null(strstr(r.body, "invalidate rc=0"));
    th_response_free(&r);
    assert_int_equal(sql_number("SELECT count(*) FROM sandlet_sessions WHERE sandbox = 'shop'"),
                     before - 1);
}

/* A page queries the database with request data as a parameter and
 * counts in a database session that the other host shares. */
static void test_page_uses_database(void **state)
{
    (void)state;
    th_response r;
    assert_int_equal(th_request(a.port, "GET", "/visits.csp?name=o'hara", NULL, NULL, 0, &r), 0);
    if (r.status != 200) {
        char *log = th_slurp(a.log, NULL);
        fail_msg("status %d: %s; log:\n%s", r.status, r.body, log ? log : "(none)");
    }
    assert_non_null(strstr(r.body, "db=O&#39;HARA count=1"));
    char cookie[256], hdr[300];
    cookie_of(&r, cookie, sizeof(cookie));
    th_response_free(&r);
    assert_true(cookie[0] != '\0');
    snprintf(hdr, sizeof(hdr), "Cookie: %s\r\n", cookie);
    assert_int_equal(th_request(b.port, "GET", "/visits.csp", hdr, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "db=X count=2"));
    th_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kept_in_the_table),
        cmocka_unit_test(test_two_hosts_share),
        cmocka_unit_test(test_concurrent_no_lost_update),
        cmocka_unit_test(test_own_schema_repeatable_read),
        cmocka_unit_test(test_survives_restart),
        cmocka_unit_test(test_crash_changes_nothing),
        cmocka_unit_test(test_regenerate_and_invalidate),
        cmocka_unit_test(test_expiry_and_sweep),
        cmocka_unit_test(test_page_uses_database),
        cmocka_unit_test(test_database_down_is_503),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

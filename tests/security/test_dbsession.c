/*
 * test_dbsession.c - database sessions do not cross sandboxes (issue 29).
 * Two sandboxes with "sessions database", each connecting as a role of
 * its own to one throwaway PostgreSQL (tests/db/pgtest.h): a (role ra)
 * runs a hostile servlet that uses plain sl_db calls against b's
 * sessions (role rb).
 *
 * - One table for both roles, made by the database's owner with the rows
 *   granted to each (the recipe sandlet.conf(5) gave before): a reads
 *   none of b's values, forges, extends and deletes none of b's rows,
 *   because b's workers refuse to keep sessions in a table another role
 *   can reach, and say how to fix it.  The same with the table owned by
 *   rb but granted to ra.
 * - A schema per role (the one recipe now documented): a's role cannot
 *   reach b's table at all; and what a reader of the database (the
 *   superuser here) sees of b's rows is sealed: no value in clear, and a
 *   row it writes, in clear or copied from another session, is no
 *   session.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "../db/pgtest.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static pgtest pg;
static th_daemon d;
static char dir[64];

#define SECRET_VALUE "TOP-SECRET-B"
#define FORGED_VALUE "FORGED-BY-A"

static void sql(const char *text)
{
    char err[512];
    if (pgtest_exec(&pg, text, err, sizeof(err)) != 0)
        fail_msg("%s: %s", text, err);
}

static int setup(void **state)
{
    (void)state;
    th_prepare();
    if (pgtest_start_or_say(&pg) != 0)
        return -1;
    if (th_tempdir(dir, sizeof(dir), "dbsec", 0755) != 0)
        return -1;
    char secret[128];
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    int fd = open(secret, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    uint8_t key[32];
    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (uint8_t)(i * 53 + 7);
    if (fd < 0 || write(fd, key, sizeof(key)) != (ssize_t)sizeof(key))
        return -1;
    close(fd);
    /* The set-up of the issue: one table, made by the owner, the rows
     * granted to both sandboxes' roles. */
    char err[512];
    if (pgtest_exec(&pg,
                    "CREATE ROLE ra LOGIN; CREATE ROLE rb LOGIN;"
                    "CREATE TABLE public.sandlet_sessions (sandbox text NOT NULL, id bytea NOT "
                    "NULL, data bytea NOT NULL, expires timestamptz NOT NULL, PRIMARY KEY "
                    "(sandbox, id));"
                    "GRANT SELECT, INSERT, UPDATE, DELETE ON public.sandlet_sessions TO ra, rb",
                    err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    char conf[4096];
    snprintf(conf, sizeof(conf),
             "session-secret-file \"%s\";\n"
             "sandbox a { workers 1; database \"%s user=ra\"; sessions database; }\n"
             "servlet /a/thief { library \"%s\"; sandbox a; }\n"
             "sandbox b { workers 1; database \"%s user=rb\"; sessions database; }\n"
             "servlet /b/session { library \"%s\"; sandbox b; }\n",
             secret, pg.conninfo, th_fixture("dbthief"), pg.conninfo, th_fixture("session"));
    return th_start(&d, conf, false);
}

static int teardown(void **state)
{
    (void)state;
    int rc = d.pid && th_stop(&d) != 0 ? -1 : 0;
    pgtest_destroy(&pg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = -1;
    return rc;
}

/* GET target with cookie (may be ""): the status, the body in body, the
 * session cookie it set (if any) in jar. */
static int get(const char *target, const char *cookie, char *body, size_t cap, char *jar,
               size_t jarcap)
{
    char hdr[300];
    snprintf(hdr, sizeof(hdr), "Cookie: %s\r\n", cookie);
    th_response r;
    assert_int_equal(th_request(d.port, "GET", target, cookie[0] ? hdr : NULL, NULL, 0, &r), 0);
    snprintf(body, cap, "%s", r.body ? r.body : "");
    char sc[200];
    if (jar && th_header(&r, "Set-Cookie", sc, sizeof(sc)))
        snprintf(jar, jarcap, "%.*s", (int)strcspn(sc, ";"), sc);
    int st = r.status;
    th_response_free(&r);
    return st;
}

/* What the thief's op answers (always 200). */
static void thief(const char *op, const char *table, char *body, size_t cap)
{
    char target[128];
    snprintf(target, sizeof(target), "/a/thief?op=%s&sandbox=b&table=%s", op, table);
    assert_int_equal(get(target, "", body, cap, NULL, 0), 200);
}

/* Every attack of a on b's rows in table: nothing read, nothing changed
 * (no row of b in reach, or no right to the table at all). */
static void attacks_fail(const char *table)
{
    char body[4096];
    thief("read", table, body, sizeof(body));
    if (strstr(body, SECRET_VALUE))
        fail_msg("a read b's session in %s: %s", table, body);
    assert_true(strncmp(body, "rows=0 ", 7) == 0 || strncmp(body, "error ", 6) == 0);
    static const char *const writes[] = {"forge", "extend", "delete"};
    for (size_t i = 0; i < 3; i++) {
        thief(writes[i], table, body, sizeof(body));
        if (strncmp(body, "changed=0\n", 10) != 0 && strncmp(body, "error ", 6) != 0)
            fail_msg("%s of b's rows in %s: %s", writes[i], table, body);
    }
}

/* The refused table: a's attacks find nothing of b's (b's client sees no
 * forged value), because b's session request is 503 and the log names
 * the fix. */
static void refused(const char *reason)
{
    char body[4096], jar[256] = "";
    int st = get("/b/session?op=set&value=" SECRET_VALUE, "", body, sizeof(body), jar, sizeof(jar));
    attacks_fail("public.sandlet_sessions");
    char peek[4096];
    get("/b/session?op=peek", jar, peek, sizeof(peek), NULL, 0);
    if (strstr(peek, FORGED_VALUE))
        fail_msg("b's client read a's forgery: %s", peek);
    if (st != 503) {
        char *log = th_slurp(d.log, NULL);
        fail_msg("b kept a session in a table role ra can reach: %d %s\nlog:\n%s", st, body,
                 log ? log : "(none)");
    }
    assert_true(th_log_wait(&d, reason, 2000));
    assert_true(th_log_contains(&d, "CREATE SCHEMA rb AUTHORIZATION rb"));
}

/* The attack: one table, rows granted to both roles. */
static void test_one_table_granted_to_both(void **state)
{
    (void)state;
    refused("is owned by role");
}

/* The table owned by b's role, its rows granted to a's as well. */
static void test_own_table_granted_to_another(void **state)
{
    (void)state;
    sql("ALTER TABLE public.sandlet_sessions OWNER TO rb");
    refused("other roles (or PUBLIC) hold privileges on it");
}

/* The one documented way: a schema per role, where the first worker makes
 * the role's own table. */
static void test_schema_per_role(void **state)
{
    (void)state;
    sql("DROP TABLE public.sandlet_sessions;"
        "CREATE SCHEMA ra AUTHORIZATION ra; CREATE SCHEMA rb AUTHORIZATION rb");
    char body[4096], jar[256] = "";
    int st = get("/b/session?op=set&value=" SECRET_VALUE, "", body, sizeof(body), jar, sizeof(jar));
    if (st != 200) {
        char *log = th_slurp(d.log, NULL);
        fail_msg("b in its own schema: %d %s\nlog:\n%s", st, body, log ? log : "(none)");
    }
    assert_true(jar[0] != '\0');
    assert_int_equal(get("/b/session?op=peek", jar, body, sizeof(body), NULL, 0), 200);
    assert_non_null(strstr(body, SECRET_VALUE));
    /* a's own table has no row of b's; b's is out of a's reach. */
    attacks_fail("");
    char out[4096];
    thief("read", "rb.sandlet_sessions", out, sizeof(out));
    assert_true(strncmp(out, "error 42501", 11) == 0);
    attacks_fail("rb.sandlet_sessions");
    assert_int_equal(get("/b/session?op=peek", jar, body, sizeof(body), NULL, 0), 200);
    assert_non_null(strstr(body, SECRET_VALUE));
}

/* One number or text from the database, as the superuser. */
static char *super_text(const char *q)
{
    PGconn *c = PQconnectdb(pg.conninfo);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, q);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        fail_msg("%s: %s", q, PQerrorMessage(c));
    char *v = strdup(PQgetvalue(r, 0, 0));
    assert_non_null(v);
    PQclear(r);
    PQfinish(c);
    return v;
}

/* A reader (and writer) of the database itself, past every grant: b's
 * rows hold no value in clear, and a row it writes is no session. */
static void test_database_reader(void **state)
{
    (void)state;
    char body[4096], one[256] = "", two[256] = "";
    assert_int_equal(
        get("/b/session?op=set&value=" SECRET_VALUE, "", body, sizeof(body), one, sizeof(one)),
        200);
    assert_int_equal(get("/b/session?op=set&value=OTHER", "", body, sizeof(body), two, sizeof(two)),
                     200);
    char *clear = super_text("SELECT count(*) FROM rb.sandlet_sessions WHERE "
                             "position(convert_to('" SECRET_VALUE "', 'UTF8') IN data) > 0 "
                             "OR position(convert_to('OTHER', 'UTF8') IN data) > 0");
    assert_string_equal(clear, "0");
    free(clear);
    /* The sealed data of session "two" under the id of "one": it does not
     * open there (the id is bound in), so one's client sees no "OTHER". */
    char q[512];
    snprintf(q, sizeof(q),
             "UPDATE rb.sandlet_sessions SET data = (SELECT data FROM rb.sandlet_sessions WHERE "
             "id = '\\x%.32s') WHERE id = '\\x%.32s'",
             strchr(two, '=') + 1, strchr(one, '=') + 1);
    sql(q);
    assert_int_equal(get("/b/session?op=peek", one, body, sizeof(body), NULL, 0), 200);
    assert_null(strstr(body, "OTHER"));
    assert_null(strstr(body, SECRET_VALUE));
    assert_true(th_log_wait(&d, "does not open", 2000));
    assert_int_equal(get("/b/session?op=peek", two, body, sizeof(body), NULL, 0), 200);
    assert_non_null(strstr(body, "OTHER"));
    /* A row in the old, clear framing (what an earlier sandlet wrote, or a
     * forger without the key): no session, said once in the log. */
    sql("UPDATE rb.sandlet_sessions SET data = '\\x010b0000006e464f524745442d42592d4100'");
    assert_int_equal(get("/b/session?op=peek", one, body, sizeof(body), NULL, 0), 200);
    assert_null(strstr(body, FORGED_VALUE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_table_granted_to_both),
        cmocka_unit_test(test_own_table_granted_to_another),
        cmocka_unit_test(test_schema_per_role),
        cmocka_unit_test(test_database_reader),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

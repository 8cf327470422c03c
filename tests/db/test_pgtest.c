/*
 * test_pgtest.c - the throwaway PostgreSQL server tests use (pgtest.h):
 * it starts as an unprivileged user, answers on its unix socket and on
 * loopback TCP, keeps its data across a stop and restart on the same
 * port, is gone after destroy, and a missing installation is a failure
 * that names scripts/install-deps, never a skip.
 */
#define _GNU_SOURCE
#include "pgtest.h"

#include <libpq-fe.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char *query_one(const char *conninfo, const char *sql)
{
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        print_error("connect %s: %s", conninfo, PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PGresult *r = PQexec(c, sql);
    char *v = NULL;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        v = strdup(PQgetvalue(r, 0, 0));
    else
        print_error("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
    return v;
}

static void test_lifecycle(void **state)
{
    (void)state;
    pgtest pg;
    char err[512];
    if (pgtest_start(&pg, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_true(pg.running);
    assert_non_null(strstr(pg.conninfo, pg.dir)); /* the socket is in the temp dir */

    struct stat st;
    assert_int_equal(stat(pg.data, &st), 0);
    if (geteuid() == 0)
        assert_int_not_equal(st.st_uid, 0); /* postgres refuses root */

    char *v = query_one(pg.conninfo, "SELECT current_user");
    assert_non_null(v);
    assert_string_equal(v, "sandlet");
    free(v);
    v = query_one(pg.conninfo_tcp, "SELECT inet_server_addr()::text");
    assert_non_null(v);
    assert_string_equal(v, "127.0.0.1/32");
    free(v);
    v = query_one(pg.conninfo, "SHOW fsync");
    assert_non_null(v);
    assert_string_equal(v, "off");
    free(v);

    if (pgtest_exec(&pg, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)", err,
                    sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(pgtest_stop(&pg, err, sizeof(err)), 0);
    assert_false(pg.running);
    assert_int_equal(PQping(pg.conninfo_tcp), PQPING_NO_RESPONSE);
    assert_int_equal(pgtest_restart(&pg, err, sizeof(err)), 0);
    v = query_one(pg.conninfo_tcp, "SELECT v FROM kept");
    assert_non_null(v);
    assert_string_equal(v, "42");
    free(v);

    char dir[sizeof(pg.dir)];
    memcpy(dir, pg.dir, sizeof(dir));
    pgtest_destroy(&pg);
    assert_int_not_equal(access(dir, F_OK), 0);
    assert_int_equal(PQping(pg.conninfo_tcp), PQPING_NO_RESPONSE);
    pgtest_destroy(&pg); /* idempotent */
}

static void test_missing_binaries_fail(void **state)
{
    (void)state;
    const char *old = getenv("SANDLET_PG_BINDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("SANDLET_PG_BINDIR", "/nonexistent/postgresql/bin", 1);
    pgtest pg;
    char err[512] = "";
    int rc = pgtest_start(&pg, err, sizeof(err));
    if (saved) {
        setenv("SANDLET_PG_BINDIR", saved, 1);
        free(saved);
    } else {
        unsetenv("SANDLET_PG_BINDIR");
    }
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "scripts/install-deps"));
    assert_non_null(strstr(err, "/nonexistent/postgresql/bin"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_missing_binaries_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

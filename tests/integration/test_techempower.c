/*
 * test_techempower.c - the TechEmpower example servlet
 * (examples/techempower) through the real sandletd against a throwaway
 * PostgreSQL (tests/db/pgtest.h) filled by the shipped
 * examples/techempower/create.sql: each route's answer is checked against
 * what the table holds (so a servlet that invents rows fails), the
 * "queries" parameter is clamped to 1..500, the fortunes page is the exact
 * expected page (sorted, escaped, with the added row, read per request),
 * and updates are really in the table afterwards.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "../db/pgtest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>

#define MAX_ROWS 600

static pgtest pg;
static th_daemon d;
static PGconn *conn;

typedef struct row {
    int id;
    int number;
} row;

static int setup(void **state)
{
    (void)state;
    th_prepare();
    char err[512];
    if (pgtest_start_or_say(&pg) != 0)
        return -1;
    char path[4096];
    snprintf(path, sizeof(path), "%s/examples/techempower/create.sql",
             getenv("SANDLET_SRCDIR") ? getenv("SANDLET_SRCDIR") : ".");
    char *sql = th_slurp(path, NULL);
    if (!sql) {
        fprintf(stderr, "cannot read %s\n", path);
        return -1;
    }
    int rc = pgtest_exec(&pg, sql, err, sizeof(err));
    free(sql);
    if (rc != 0) {
        fprintf(stderr, "create.sql: %s\n", err);
        return -1;
    }
    conn = PQconnectdb(pg.conninfo);
    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "%s", PQerrorMessage(conn));
        return -1;
    }
    static char conf[2048];
    snprintf(conf, sizeof(conf),
             "sandbox te { workers 2; database \"%s\"; }\n"
             "servlet /te/* { library \"%s\"; sandbox te; }\n",
             pg.conninfo, th_build_path("examples/techempower/.libs/techempower.so"));
    return th_start(&d, conf, false) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    int rc = d.pid ? th_stop(&d) : 0;
    if (conn)
        PQfinish(conn);
    pgtest_destroy(&pg);
    return rc == 0 ? 0 : -1;
}

/* The table's randomNumber of id, or -1. */
static int table_number(int id)
{
    char v[16];
    snprintf(v, sizeof(v), "%d", id);
    const char *values[] = {v};
    PGresult *r = PQexecParams(conn, "SELECT randomNumber FROM World WHERE id = $1", 1, NULL,
                               values, NULL, NULL, 0);
    int n = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static void run_sql(const char *text)
{
    char err[512];
    if (pgtest_exec(&pg, text, err, sizeof(err)) != 0)
        fail_msg("%s: %s", text, err);
}

/* Parses one {"id":N,"randomNumber":M} at *p, exactly that shape. */
static bool parse_row(const char **p, row *out)
{
    int used = 0;
    if (sscanf(*p, "{\"id\":%d,\"randomNumber\":%d}%n", &out->id, &out->number, &used) != 2 ||
        used == 0)
        return false;
    *p += used;
    return true;
}

/* A JSON array of rows, exactly; the count, or -1 for any other shape. */
static int parse_rows(const char *body, row *out, int max)
{
    const char *p = body;
    if (*p++ != '[')
        return -1;
    int n = 0;
    if (*p == ']')
        return p[1] ? -1 : 0;
    for (;;) {
        if (n == max || !parse_row(&p, &out[n++]))
            return -1;
        if (*p == ']')
            return p[1] ? -1 : n;
        if (*p++ != ',')
            return -1;
    }
}

static void get(const char *target, th_response *r, int status, const char *type)
{
    assert_int_equal(th_request(d.port, "GET", target, NULL, NULL, 0, r), 0);
    if (r->status != status)
        fail_msg("%s: status %d, want %d; body: %.200s", target, r->status, status, r->body);
    char ct[128];
    assert_true(th_header(r, "Content-Type", ct, sizeof(ct)));
    assert_string_equal(ct, type);
}

/* Every row in range and equal to the table's. */
static void check_rows(const row *rows, int n)
{
    for (int i = 0; i < n; i++) {
        assert_in_range(rows[i].id, 1, 10000);
        assert_in_range(rows[i].number, 1, 10000);
        assert_int_equal(rows[i].number, table_number(rows[i].id));
    }
}

static void test_db(void **state)
{
    (void)state;
    int seen[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        th_response r;
        get("/te/db", &r, 200, "application/json");
        row w;
        const char *p = r.body;
        assert_true(parse_row(&p, &w));
        assert_int_equal(*p, '\0'); /* one object, not an array */
        check_rows(&w, 1);
        seen[i] = w.id;
        th_response_free(&r);
    }
    /* Random, not one fixed row: two equal ids in a row are 1 in 10000. */
    assert_int_not_equal(seen[0], seen[1]);
}

/* queries=arg answers want rows, each the table's. */
static void expect_queries(const char *route, const char *arg, int want)
{
    char target[128];
    snprintf(target, sizeof(target), "/te/%s%s", route, arg);
    th_response r;
    get(target, &r, 200, "application/json");
    static row rows[MAX_ROWS];
    int n = parse_rows(r.body, rows, MAX_ROWS);
    if (n != want)
        fail_msg("%s: %d rows, want %d: %.120s", target, n, want, r.body);
    check_rows(rows, n);
    th_response_free(&r);
}

static void test_queries(void **state)
{
    (void)state;
    expect_queries("queries", "?queries=20", 20);
    expect_queries("queries", "?queries=1", 1);
    expect_queries("queries", "", 1);
    expect_queries("queries", "?queries=", 1);
    expect_queries("queries", "?queries=foo", 1);
    expect_queries("queries", "?queries=12abc", 1);
    expect_queries("queries", "?queries=0", 1);
    expect_queries("queries", "?queries=-3", 1);
    expect_queries("queries", "?queries=500", 500);
    expect_queries("queries", "?queries=501", 500);
    expect_queries("queries", "?queries=99999999999999999999", 500);
}

#define HEAD                                                                                       \
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>"    \
    "message</th></tr>"
#define TR(id, m) "<tr><td>" #id "</td><td>" m "</td></tr>"
#define SCRIPT_ROW                                                                                 \
    TR(11, "&lt;script&gt;alert(&quot;This should not be displayed in a browser alert "            \
           "box.&quot;);&lt;/script&gt;")
#define ROWS_A                                                                                     \
    TR(4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1")                       \
    TR(5, "A computer program does what you tell it to do, not what you want it to do.")           \
    TR(2, "A computer scientist is someone who fixes things that aren&#39;t broken.")              \
    TR(8, "A list is only as strong as its weakest link. \u2014 Donald Knuth")                     \
    TR(0, "Additional fortune added at request time.")                                             \
    TR(3, "After enough decimal places, nobody gives a damn.")                                     \
    TR(7, "Any program that runs right is obsolete.")
#define ROWS_C                                                                                     \
    TR(10, "Computers make very fast, very accurate mistakes.")                                    \
    TR(6, "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen")          \
    TR(9, "Feature: A bug with seniority.")                                                        \
    TR(1, "fortune: No such file or directory")                                                    \
    TR(12, "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af")
#define TAIL "</table></body></html>"

static void expect_fortunes(const char *want)
{
    th_response r;
    get("/te/fortunes", &r, 200, "text/html; charset=utf-8");
    assert_int_equal(r.body_len, strlen(r.body));
    if (strcmp(r.body, want) != 0)
        fail_msg("fortunes page differs:\n got %s\nwant %s", r.body, want);
    assert_null(strstr(r.body, "<script>"));
    th_response_free(&r);
}

static void test_fortunes(void **state)
{
    (void)state;
    expect_fortunes(HEAD SCRIPT_ROW ROWS_A ROWS_C TAIL);
    /* Read per request, not once: a row added now shows on the next page,
     * in its place, with all five HTML specials escaped. */
    run_sql("INSERT INTO Fortune VALUES (13, 'B & <b>''q''</b> \"x\"')");
    expect_fortunes(HEAD SCRIPT_ROW ROWS_A TR(
        13, "B &amp; &lt;b&gt;&#39;q&#39;&lt;/b&gt; &quot;x&quot;") ROWS_C TAIL);
    run_sql("DELETE FROM Fortune WHERE id = 13");
}

static void test_updates(void **state)
{
    (void)state;
    /* 0 is outside 1..10000: a row the servlet wrote differs from it. */
    run_sql("UPDATE World SET randomNumber = 0");
    th_response r;
    get("/te/updates?queries=20", &r, 200, "application/json");
    static row rows[MAX_ROWS];
    int n = parse_rows(r.body, rows, MAX_ROWS);
    assert_int_equal(n, 20);
    /* What the answer shows is what the table now holds, for every row
     * (ids drawn twice included). */
    check_rows(rows, n);
    th_response_free(&r);

    PGresult *res = PQexec(conn, "SELECT count(*) FROM World WHERE randomNumber <> 0");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    int changed = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    assert_in_range(changed, 1, 20);

    expect_queries("updates", "?queries=foo", 1);
    expect_queries("updates", "?queries=0", 1);
    expect_queries("updates", "?queries=501", 500);
    run_sql("UPDATE World SET randomNumber = 1 + floor(random() * 10000)::integer");
}

static void test_unknown_route(void **state)
{
    (void)state;
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/te/plaintext", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 404);
    th_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_db),
        cmocka_unit_test(test_queries),
        cmocka_unit_test(test_fortunes),
        cmocka_unit_test(test_updates),
        cmocka_unit_test(test_unknown_route),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * techempower.c - TechEmpower's four database tests as one servlet over
 * sl_db(3): /db (one random World row as JSON), /queries?queries=N (N rows,
 * 1..500), /fortunes (the Fortune table plus one row added per request,
 * sorted and escaped, as HTML) and /updates?queries=N (N rows read, each
 * given a new random number, written back).  The route is the last segment
 * of the path, so the servlet can be mounted at /db, /queries... or once
 * at a prefix such as "/te/" (examples/techempower.conf.in).
 *
 * Every statement is prepared (sl_db_prepared) and takes its values as
 * parameters; request data never becomes SQL text.  The page is built in
 * one buffer of the request's arena and written once.  It must never cache
 * rows between requests: every request reads the database, as the tests'
 * rules require.  The tables: examples/techempower/create.sql.
 */
#include "te_core.h"

#include <sandlet.h>
#include <sandlet/db.h>

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

/* Room for the largest answer: 500 rows of at most 38 bytes of JSON, or a
 * fortunes page far larger than the standard one. */
#define OUT_CAP   ((size_t)64 * 1024)
#define ARRAY_CAP ((size_t)TE_MAX_QUERIES * 12 + 4)

static uint64_t rng;

static int init(sl_context *ctx)
{
    (void)ctx;
    if (getrandom(&rng, sizeof(rng), 0) != (ssize_t)sizeof(rng))
        return -1;
    rng |= 1; /* xorshift's one forbidden state is 0 */
    return 0;
}

/* A failed statement: the log (the worker's stderr) gets the database's
 * message, the client a 500 (which sandlet answers as 503 + Retry-After
 * while the database is down). */
static int db_failed(sl_request *rq, sl_response *rs, const char *what)
{
    (void)rs;
    fprintf(stderr, "techempower: %s failed: %s (SQLSTATE %s)\n", what, sl_db_error(rq),
            sl_db_sqlstate(rq));
    return 500;
}

static int answer(sl_response *rs, const char *type, const char *out, size_t len)
{
    if (sl_set_content_type(rs, type) != 0 || sl_write(rs, out, len) != 0)
        return 500;
    return 200;
}

/* One random row into *w; 0, or -1 (sl_db_error says why). */
static int read_world(sl_request *rq, te_world *w)
{
    char id[16];
    snprintf(id, sizeof(id), "%d", (int)te_random_id(&rng));
    const char *values[] = {id};
    sl_db_result *r = sl_db_prepared(rq, "te_world", TE_SQL_WORLD, 1, values, NULL, NULL);
    if (!r || sl_db_rows(r) != 1 || sl_db_int32(r, 0, 0, &w->id) != 0 ||
        sl_db_int32(r, 0, 1, &w->number) != 0)
        return -1;
    return 0;
}

static int route_db(sl_request *rq, sl_response *rs)
{
    te_world w;
    if (read_world(rq, &w) != 0)
        return db_failed(rq, rs, "reading a World row");
    char out[64];
    size_t at = 0;
    if (te_world_json(out, sizeof(out), &at, &w) != 0)
        return 500;
    return answer(rs, "application/json", out, at);
}

/* n random rows into w; 0 or -1. */
static int read_worlds(sl_request *rq, te_world *w, int n)
{
    for (int i = 0; i < n; i++)
        if (read_world(rq, &w[i]) != 0)
            return -1;
    return 0;
}

/* The rows as the JSON array both routes answer. */
static int worlds_answer(sl_request *rq, sl_response *rs, const te_world *w, int n)
{
    char *out = sl_alloc(rq, OUT_CAP);
    size_t at = 0;
    if (!out || te_worlds_json(out, OUT_CAP, &at, w, n) != 0)
        return 500;
    return answer(rs, "application/json", out, at);
}

static int route_queries(sl_request *rq, sl_response *rs)
{
    int n = te_queries(sl_param(rq, "queries", NULL));
    te_world w[TE_MAX_QUERIES];
    if (read_worlds(rq, w, n) != 0)
        return db_failed(rq, rs, "reading World rows");
    return worlds_answer(rq, rs, w, n);
}

static int route_updates(sl_request *rq, sl_response *rs)
{
    int n = te_queries(sl_param(rq, "queries", NULL));
    te_world w[TE_MAX_QUERIES], sorted[TE_MAX_QUERIES];
    if (read_worlds(rq, w, n) != 0)
        return db_failed(rq, rs, "reading World rows");
    for (int i = 0; i < n; i++)
        w[i].number = te_random_id(&rng);
    char *ids = sl_alloc(rq, ARRAY_CAP), *nums = sl_alloc(rq, ARRAY_CAP);
    if (!ids || !nums || te_update_arrays(w, n, sorted, ids, nums, ARRAY_CAP) != 0)
        return 500;
    const char *values[] = {ids, nums};
    if (!sl_db_prepared(rq, "te_update", TE_SQL_UPDATE, 2, values, NULL, NULL))
        return db_failed(rq, rs, "updating World rows");
    return worlds_answer(rq, rs, w, n);
}

static int route_fortunes(sl_request *rq, sl_response *rs)
{
    sl_db_result *r = sl_db_prepared(rq, "te_fortunes", TE_SQL_FORTUNES, 0, NULL, NULL, NULL);
    if (!r)
        return db_failed(rq, rs, "reading Fortune");
    int n = sl_db_rows(r);
    if (n < 0 || n >= TE_MAX_FORTUNES) {
        fprintf(stderr, "techempower: Fortune has %d rows; this page shows at most %d\n", n,
                TE_MAX_FORTUNES - 1);
        return 500;
    }
    te_fortune list[TE_MAX_FORTUNES];
    for (int i = 0; i < n; i++) {
        list[i].message = sl_db_text(r, i, 1);
        if (sl_db_int32(r, i, 0, &list[i].id) != 0 || !list[i].message)
            return db_failed(rq, rs, "reading a Fortune row (NULL or not an integer id)");
    }
    char *out = sl_alloc(rq, OUT_CAP);
    size_t at = 0;
    if (!out || te_fortunes_html(out, OUT_CAP, &at, list, n) != 0) {
        fprintf(stderr, "techempower: the fortunes page exceeds %zu bytes\n", OUT_CAP);
        return 500;
    }
    return answer(rs, "text/html; charset=utf-8", out, at);
}

static int service(sl_request *rq, sl_response *rs)
{
    const char *path = sl_path(rq);
    const char *last = strrchr(path, '/');
    last = last ? last + 1 : path;
    if (strcmp(last, "db") == 0)
        return route_db(rq, rs);
    if (strcmp(last, "queries") == 0)
        return route_queries(rq, rs);
    if (strcmp(last, "fortunes") == 0)
        return route_fortunes(rq, rs);
    if (strcmp(last, "updates") == 0)
        return route_updates(rq, rs);
    return 404;
}

SL_SERVLET(techempower) = {.init = init, .service = service, .session = SL_SESSION_NONE};

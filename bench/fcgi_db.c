/*
 * fcgi_db.c - the FastCGI peer of examples/techempower (bench/db runs it
 * under spawn-fcgi behind nginx): the same four TechEmpower database tests
 * (/db, /queries, /fortunes, /updates) from the same code
 * (examples/techempower/te_core.h), with libpq in place of sl_db.  Like a
 * sandlet worker, each process opens one connection at start and keeps it,
 * and prepares each statement once.  Built by bench/db only; it must never
 * do more per request than the servlet (no logging on success), nor less
 * (every row is read from the database on every request).
 *
 * The connection string is its first argument.
 */
#include "../examples/techempower/te_core.h"

#include <fcgiapp.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define OUT_CAP   ((size_t)64 * 1024)
#define ARRAY_CAP ((size_t)TE_MAX_QUERIES * 12 + 4)

static PGconn *db;
static uint64_t rng;
static char out[OUT_CAP];

static int prepare(const char *name, const char *sql, int n)
{
    PGresult *r = PQprepare(db, name, sql, n, NULL);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        fprintf(stderr, "fcgi_db: preparing %s: %s", name, PQerrorMessage(db));
    PQclear(r);
    return ok ? 0 : -1;
}

static int reply(FCGX_Stream *os, const char *status, const char *type, const char *body,
                 size_t len)
{
    /* libfcgi's own formatter knows %lu but not %zu. */
    if (FCGX_FPrintF(os, "Status: %s\r\nContent-Type: %s\r\nContent-Length: %lu\r\n\r\n", status,
                     type, (unsigned long)len) < 0)
        return -1;
    return FCGX_PutStr(body, (int)len, os) == (int)len ? 0 : -1;
}

static int fail(FCGX_Stream *os, const char *what)
{
    fprintf(stderr, "fcgi_db: %s: %s", what, PQerrorMessage(db));
    return reply(os, "500 Internal Server Error", "text/plain", "", 0);
}

/* Text of an int column, as sl_db_int32 parses it. */
static int int_at(const PGresult *r, int row, int col, int32_t *v)
{
    char *end;
    const char *s = PQgetvalue(r, row, col);
    long n = strtol(s, &end, 10);
    if (PQgetisnull(r, row, col) || end == s || *end || n < INT32_MIN || n > INT32_MAX)
        return -1;
    *v = (int32_t)n;
    return 0;
}

static int read_world(te_world *w)
{
    char id[16];
    snprintf(id, sizeof(id), "%d", (int)te_random_id(&rng));
    const char *values[] = {id};
    PGresult *r = PQexecPrepared(db, "te_world", 1, values, NULL, NULL, 0);
    int rc = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                     int_at(r, 0, 0, &w->id) == 0 && int_at(r, 0, 1, &w->number) == 0
                 ? 0
                 : -1;
    PQclear(r);
    return rc;
}

/* The "queries" parameter from the query string (first occurrence). */
static int queries(FCGX_Request *rq)
{
    const char *q = FCGX_GetParam("QUERY_STRING", rq->envp);
    char v[32] = "";
    for (const char *p = q; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
        if (strncmp(p, "queries=", 8) == 0) {
            size_t n = strcspn(p + 8, "&");
            if (n >= sizeof(v))
                n = sizeof(v) - 1; /* longer than any number: a garbage tail */
            memcpy(v, p + 8, n);
            v[n] = '\0';
            return te_queries(v);
        }
    }
    return te_queries(NULL);
}

static int route_worlds(FCGX_Request *rq, int update)
{
    static te_world w[TE_MAX_QUERIES];
    int n = queries(rq);
    for (int i = 0; i < n; i++)
        if (read_world(&w[i]) != 0)
            return fail(rq->out, "reading World rows");
    if (update) {
        static te_world sorted[TE_MAX_QUERIES];
        static char ids[ARRAY_CAP], nums[ARRAY_CAP];
        for (int i = 0; i < n; i++)
            w[i].number = te_random_id(&rng);
        if (te_update_arrays(w, n, sorted, ids, nums, ARRAY_CAP) != 0)
            return fail(rq->out, "update arrays too long");
        const char *values[] = {ids, nums};
        PGresult *r = PQexecPrepared(db, "te_update", 2, values, NULL, NULL, 0);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (!ok)
            return fail(rq->out, "updating World rows");
    }
    size_t at = 0;
    if (te_worlds_json(out, OUT_CAP, &at, w, n) != 0)
        return fail(rq->out, "JSON too long");
    return reply(rq->out, "200 OK", "application/json", out, at);
}

static int route_db(FCGX_Request *rq)
{
    te_world w;
    if (read_world(&w) != 0)
        return fail(rq->out, "reading a World row");
    size_t at = 0;
    if (te_world_json(out, OUT_CAP, &at, &w) != 0)
        return fail(rq->out, "JSON too long");
    return reply(rq->out, "200 OK", "application/json", out, at);
}

static int route_fortunes(FCGX_Request *rq)
{
    te_fortune list[TE_MAX_FORTUNES];
    PGresult *r = PQexecPrepared(db, "te_fortunes", 0, NULL, NULL, NULL, 0);
    int n = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : -1;
    if (n < 0 || n >= TE_MAX_FORTUNES) {
        PQclear(r);
        return fail(rq->out, "reading Fortune");
    }
    for (int i = 0; i < n; i++) {
        list[i].message = PQgetvalue(r, i, 1);
        if (int_at(r, i, 0, &list[i].id) != 0 || PQgetisnull(r, i, 1)) {
            PQclear(r);
            return fail(rq->out, "a Fortune row");
        }
    }
    size_t at = 0;
    int rc = te_fortunes_html(out, OUT_CAP, &at, list, n);
    PQclear(r);
    if (rc != 0)
        return fail(rq->out, "page too long");
    return reply(rq->out, "200 OK", "text/html; charset=utf-8", out, at);
}

static int serve(FCGX_Request *rq)
{
    /* nginx's fastcgi_params sends DOCUMENT_URI: the path without the query. */
    const char *path = FCGX_GetParam("DOCUMENT_URI", rq->envp);
    const char *last = path ? strrchr(path, '/') : NULL;
    last = last ? last + 1 : "";
    if (strcmp(last, "db") == 0)
        return route_db(rq);
    if (strcmp(last, "queries") == 0)
        return route_worlds(rq, 0);
    if (strcmp(last, "updates") == 0)
        return route_worlds(rq, 1);
    if (strcmp(last, "fortunes") == 0)
        return route_fortunes(rq);
    return reply(rq->out, "404 Not Found", "text/plain", "not found\n", 10);
}

int main(int argc, char **argv)
{
    FCGX_Request rq;
    if (argc != 2) {
        fputs("usage: fcgi_db CONNINFO (under spawn-fcgi)\n", stderr);
        return 2;
    }
    if (getrandom(&rng, sizeof(rng), 0) != (ssize_t)sizeof(rng))
        return 1;
    rng |= 1;
    db = PQconnectdb(argv[1]);
    if (PQstatus(db) != CONNECTION_OK) {
        fprintf(stderr, "fcgi_db: %s", PQerrorMessage(db));
        return 1;
    }
    if (prepare("te_world", TE_SQL_WORLD, 1) != 0 ||
        prepare("te_fortunes", TE_SQL_FORTUNES, 0) != 0 ||
        prepare("te_update", TE_SQL_UPDATE, 2) != 0)
        return 1;
    if (FCGX_Init() != 0 || FCGX_InitRequest(&rq, 0, 0) != 0) {
        fputs("fcgi_db: libfcgi failed to initialise (run it under spawn-fcgi)\n", stderr);
        return 1;
    }
    while (FCGX_Accept_r(&rq) >= 0) {
        if (serve(&rq) != 0)
            fputs("fcgi_db: the web server closed the stream mid-response\n", stderr);
        FCGX_Finish_r(&rq);
    }
    PQfinish(db);
    return 0;
}

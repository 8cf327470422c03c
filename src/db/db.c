/*
 * db.c - the sandbox's PostgreSQL connection and the sl_db_ API
 * (sandlet/db.h, sl_db(3)), in libsandlet.
 *
 * One connection per process: the worker opens it before it confines
 * itself (sandlet_lib_db_open) and keeps it; a broken one is reset by the
 * next call that needs it, which takes socket/connect (allowed only to
 * sandboxes with a database, and only for TCP: a worker whose database is
 * on a unix socket is replaced by a fresh one instead, see reconnect()).  Results are read row by
 * row (libpq's single-row mode) straight into the request's arena, so that a result over
 * SL_DB_MAX_RESULT is refused while being read, not after libpq has held all of it.  Per-request
 * state (the last error, "unavailable") is reset by sandlet_lib_db_request_start;
 * sandlet_lib_db_request_end rolls back a transaction the handler left open.
 *
 * This file never builds SQL from its arguments (only fixed statements of
 * its own), never prints the connection string or password, and never
 * aborts the process on a database error.
 */
#include "config.h"

#include "db/db_private.h"
#include "lib/servlet.h"

#include <sandlet/db.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTEAOID 17

typedef struct cell {
    const char *v; /* NUL-terminated copy in the arena */
    size_t len;
    bool null;
} cell;

struct sl_db_result {
    sl_request *rq;
    int nrows, ncols;
    size_t cap_rows;
    char **names;
    unsigned *types;
    cell *cells; /* nrows * ncols */
    long long affected;
};

static struct {
    PGconn *conn;
    /* Statements prepared on this connection (forgotten on reconnect). */
    char *prepared[SL_DB_MAX_PREPARED];
    size_t nprepared;
    /* The request being served and its state. */
    const sl_request *rq;
    bool checked;             /* the connection was checked in this request */
    bool unavailable;         /* a call of this request found the database down */
    bool was_down;            /* the last request that needed it found it down */
    bool broken;              /* the server said it is going away: reset before use */
    unsigned want_timeout;    /* statement_timeout the next statement needs */
    unsigned applied_timeout; /* the connection's; UINT_MAX: unknown */
    unsigned long resets;     /* connections made so far (server sessions) */
    char sqlstate[6];
    char error[256];
    /* Why libpq could not be loaded at start: each request that asks for
     * the database hears that (and its fix), not "no database". */
    char load_error[256];
    /* Reconnects are a fresh worker's (sandlet_lib_db_fresh_only), and
     * this connection broke: the worker leaves after its request. */
    bool fresh_only, want_fresh;
} db;

void sandlet_lib_db_fresh_only(void)
{
    db.fresh_only = true;
}

bool sandlet_lib_db_wants_fresh(void)
{
    return db.want_fresh;
}

/* Reconnects, or (fresh_only) asks for a fresh worker instead: a worker
 * whose database is on a unix socket may make no unix socket once
 * confined, so that it can reach no other (issue 29); its successor
 * connects before it confines itself.  True when the connection works. */
static bool reconnect(void)
{
    if (db.fresh_only) {
        db.want_fresh = true;
        return false;
    }
    PQreset(db.conn);
    db.resets++;
    return PQstatus(db.conn) == CONNECTION_OK;
}

static void call_failed(const PGresult *r);

static void set_error(const char *state, const char *msg)
{
    snprintf(db.sqlstate, sizeof(db.sqlstate), "%s", state ? state : "");
    snprintf(db.error, sizeof(db.error), "%s", msg ? msg : "");
    /* One line: libpq's messages end in a newline and may add a hint. */
    db.error[strcspn(db.error, "\r\n")] = '\0';
}

static void forget_prepared(void)
{
    for (size_t i = 0; i < db.nprepared; i++)
        free(db.prepared[i]);
    db.nprepared = 0;
}

/* What every new or reset connection gets: UTC and ISO dates, so that
 * timestamps parse the same whatever the server's defaults. */
static int session_setup(void)
{
    /* Keepalives on the server's side of a TCP connection: a worker's host
     * that vanishes (power, network) would otherwise keep its sessions'
     * advisory locks until the kernel's default of two hours gives up on
     * it; with these, about 25 s.  Ignored on a unix socket. */
    PGresult *r = PQexec(db.conn, "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'; "
                                  "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; "
                                  "SET tcp_keepalives_count = 3");
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    forget_prepared();
    db.applied_timeout = UINT_MAX;
    return ok ? 0 : -1;
}

int sandlet_lib_db_open(const char *conninfo, const char *password, char *err, size_t errlen)
{
    if (db.conn)
        return 0;
    /* The one place a worker loads libpq: only sandboxes with a database
     * pay for its libraries (pq.h). */
    if (sandlet_lib_pq_load(err, errlen) < 0) {
        snprintf(db.load_error, sizeof(db.load_error), "%s", err);
        return -1;
    }
    /* Defaults first, the sandbox's string over them, the password last:
     * GSSAPI off (its credential lookup opens files a confined worker may
     * not) and a bounded connect. */
    const char *keys[] = {"gssencmode", "connect_timeout", "dbname", "password", NULL};
    const char *vals[] = {"disable", "5", conninfo, password, NULL};
    if (!password || !*password)
        keys[3] = NULL;
    db.conn = PQconnectdbParams(keys, vals, 1);
    if (!db.conn) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* The crypto of password authentication (SCRAM, MD5) loads OpenSSL's
     * configuration file the first time it runs: run it now, while files
     * may still be opened, or a worker whose first connect failed would
     * be killed by its filter for the openat of its first reconnect. */
    bool ok = PQstatus(db.conn) == CONNECTION_OK && session_setup() == 0;
    /* The reason first: PQencryptPasswordConn clears the connection's
     * error message. */
    if (!ok)
        snprintf(err, errlen, "%s", PQerrorMessage(db.conn));
    PQfreemem(PQencryptPasswordConn(db.conn, "sandlet", "sandlet", "scram-sha-256"));
    if (!ok) {
        size_t n = strlen(err);
        while (n && err[n - 1] == '\n')
            err[--n] = '\0';
        return -1;
    }
    return 0;
}

void sandlet_lib_db_close(void)
{
    forget_prepared();
    if (db.conn) /* else libpq may not even be loaded */
        PQfinish(db.conn);
    db.conn = NULL;
}

bool sandlet_lib_db_configured(void)
{
    return db.conn != NULL;
}

void sandlet_lib_db_set_timeout(unsigned ms)
{
    db.want_timeout = ms;
}

/* SET statement_timeout when the servlet's timeout differs from the one
 * the connection has: the number is ours, never request data. */
static int apply_timeout(void)
{
    unsigned ms = db.want_timeout - db.want_timeout / 10;
    if (db.want_timeout && !ms)
        ms = 1;
    if (ms == db.applied_timeout)
        return 0;
    char sql[64];
    snprintf(sql, sizeof(sql), "SET statement_timeout = %u", ms);
    PGresult *r = PQexec(db.conn, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (ok)
        db.applied_timeout = ms;
    else
        call_failed(r);
    PQclear(r);
    return ok ? 0 : -1;
}

void sandlet_lib_db_request_start(const sl_request *rq)
{
    db.rq = rq;
    db.checked = false;
    db.unavailable = false;
    db.sqlstate[0] = db.error[0] = '\0';
}

bool sandlet_lib_db_request_unavailable(void)
{
    return db.unavailable;
}

int sandlet_lib_db_rollback_open(void)
{
    if (!db.conn || PQstatus(db.conn) != CONNECTION_OK ||
        PQtransactionStatus(db.conn) == PQTRANS_IDLE)
        return 0;
    /* The handler left a transaction open (or failed in one): the next
     * request on this worker, and the session store's writes, must start
     * clean. */
    PGresult *r = PQexec(db.conn, "ROLLBACK");
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        /* Dropping the server's session drops the transaction with it;
         * the session store's locks go too, and its next write finds the
         * connection gone. */
        db.broken = !reconnect();
        if (!db.broken && session_setup() != 0)
            db.broken = true;
    }
    PQclear(r);
    return 1;
}

int sandlet_lib_db_request_end(void)
{
    int rc = sandlet_lib_db_rollback_open();
    if (db.checked)
        db.was_down = db.unavailable;
    db.rq = NULL;
    return rc;
}

/* The connection, usable, or NULL with the request's error set. */
static PGconn *connection(void)
{
    if (!db.conn) {
        set_error("08003", db.load_error[0] ? db.load_error
                                            : "this sandbox has no database (sandlet.conf: "
                                              "database \"CONNINFO\";)");
        return NULL;
    }
    /* Once per request, before anything is sent: a server that restarted
     * since the last request has closed our socket, and finding out now
     * lets us reconnect instead of failing a statement. */
    if (!db.checked && PQstatus(db.conn) == CONNECTION_OK) {
        /* An idle connection that has something to read is being closed
         * (a FATAL, then end of file) or got a notice: reading until
         * nothing is left tells which, and costs one poll otherwise. */
        struct pollfd p = {.fd = PQsocket(db.conn), .events = POLLIN};
        for (int i = 0; i < 4 && PQstatus(db.conn) == CONNECTION_OK && poll(&p, 1, 0) > 0; i++)
            if (!PQconsumeInput(db.conn))
                break;
    }
    db.checked = true;
    if (PQstatus(db.conn) != CONNECTION_OK || db.broken) {
        db.broken = false;
        if (!reconnect() || session_setup() != 0) {
            db.unavailable = true;
            char msg[200];
            snprintf(msg, sizeof(msg), "the database is unavailable: %s",
                     db.fresh_only ? "the connection is lost; a fresh worker reconnects"
                                   : PQerrorMessage(db.conn));
            set_error("08006", msg);
            return NULL;
        }
    }
    if (apply_timeout() != 0)
        return NULL;
    return db.conn;
}

/* After a failed call: the server's SQLSTATE and message, or a lost
 * connection (which the next call resets). */
static void call_failed(const PGresult *r)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    /* The connection is gone, or the server says it is going (admin or
     * crash shutdown, starting up): unavailable, and reset next time. */
    bool going = state && (!strncmp(state, "08", 2) || !strcmp(state, "57P01") ||
                           !strcmp(state, "57P02") || !strcmp(state, "57P03"));
    if (PQstatus(db.conn) != CONNECTION_OK || going) {
        db.unavailable = true;
        db.broken = true;
        char m[200];
        snprintf(m, sizeof(m), "the database is unavailable: %s",
                 msg ? msg : "the connection was lost");
        set_error("08006", m);
        return;
    }
    set_error(state ? state : "XX000", msg ? msg : PQerrorMessage(db.conn));
}

PGconn *sandlet_lib_db_conn(void)
{
    return connection();
}

void sandlet_lib_db_failed(const PGresult *r)
{
    call_failed(r);
}

void sandlet_lib_db_reset(void)
{
    if (!db.conn)
        return;
    db.broken = !reconnect() || session_setup() != 0;
}

unsigned long sandlet_lib_db_resets(void)
{
    return db.resets;
}

const char *sandlet_lib_db_last_error(void)
{
    return db.error;
}

static bool belongs(const sl_request *rq)
{
    return rq && db.rq == rq;
}

/* Appends row 0 of a single-row result to res; counts bytes in *total. */
static int add_row(sl_db_result *res, const PGresult *r, size_t *total)
{
    if ((size_t)res->nrows == res->cap_rows) {
        size_t cap = res->cap_rows ? res->cap_rows * 2 : 16;
        if (cap > (size_t)INT_MAX / (res->ncols ? (size_t)res->ncols : 1))
            return -ENOMEM;
        cell *c = sl_alloc(res->rq, cap * (size_t)res->ncols * sizeof(*c) + 1);
        if (!c)
            return -ENOMEM;
        if (res->nrows)
            memcpy(c, res->cells, (size_t)res->nrows * (size_t)res->ncols * sizeof(*c));
        res->cells = c;
        res->cap_rows = cap;
    }
    cell *row = res->cells + (size_t)res->nrows * (size_t)res->ncols;
    for (int j = 0; j < res->ncols; j++) {
        row[j].null = PQgetisnull(r, 0, j);
        size_t len = (size_t)PQgetlength(r, 0, j);
        *total += len + sizeof(cell);
        if (*total > SL_DB_MAX_RESULT)
            return -EFBIG;
        if (row[j].null) {
            row[j].v = NULL;
            row[j].len = 0;
            continue;
        }
        char *v = sl_alloc(res->rq, len + 1);
        if (!v)
            return -ENOMEM;
        memcpy(v, PQgetvalue(r, 0, j), len);
        v[len] = '\0';
        row[j].v = v;
        row[j].len = len;
    }
    res->nrows++;
    return 0;
}

static int set_columns(sl_db_result *res, const PGresult *r)
{
    res->ncols = PQnfields(r);
    res->names = sl_alloc(res->rq, ((size_t)res->ncols + 1) * sizeof(*res->names));
    res->types = sl_alloc(res->rq, ((size_t)res->ncols + 1) * sizeof(*res->types));
    if (!res->names || !res->types)
        return -ENOMEM;
    for (int j = 0; j < res->ncols; j++) {
        res->names[j] = sl_strdup(res->rq, PQfname(r, j));
        res->types[j] = PQftype(r, j);
        if (!res->names[j])
            return -ENOMEM;
    }
    return 0;
}

/* Reads every result of the statement just sent, row by row. */
static sl_db_result *collect(sl_request *rq)
{
    sl_db_result *res = sl_alloc(rq, sizeof(*res));
    if (res)
        memset(res, 0, sizeof(*res));
    if (!res || !PQsetSingleRowMode(db.conn)) {
        /* Drain what was sent so the connection stays usable. */
        PGresult *r;
        while ((r = PQgetResult(db.conn)) != NULL)
            PQclear(r);
        set_error("53200", res ? "cannot read the result row by row" : "out of memory");
        return NULL;
    }
    res->rq = rq;
    size_t total = 0;
    int bad = 0; /* first local failure; the rest is drained */
    bool failed = false;
    PGresult *r;
    while ((r = PQgetResult(db.conn)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        if (bad || failed) {
            /* draining */
        } else if (st == PGRES_SINGLE_TUPLE) {
            if (!res->names)
                bad = set_columns(res, r);
            if (!bad)
                bad = add_row(res, r, &total);
        } else if (st == PGRES_TUPLES_OK) {
            if (!res->names)
                bad = set_columns(res, r);
            res->affected = res->nrows;
        } else if (st == PGRES_COMMAND_OK) {
            const char *n = PQcmdTuples(r);
            res->affected = *n ? strtoll(n, NULL, 10) : 0;
        } else {
            call_failed(r);
            failed = true;
        }
        PQclear(r);
    }
    if (!failed && PQstatus(db.conn) != CONNECTION_OK) {
        call_failed(NULL);
        failed = true;
    }
    if (failed)
        return NULL;
    if (bad == -EFBIG) {
        char msg[120];
        snprintf(msg, sizeof(msg), "the result is larger than %zu bytes (SL_DB_MAX_RESULT)",
                 SL_DB_MAX_RESULT);
        set_error("54000", msg);
        return NULL;
    }
    if (bad) {
        set_error("53200", "out of memory for the result (the request's arena)");
        return NULL;
    }
    return res;
}

sl_db_result *sl_db_query_params(sl_request *rq, const char *sql, int nparams,
                                 const char *const *values, const int *lengths, const int *formats)
{
    if (!belongs(rq) || !sql || nparams < 0 || (nparams && !values)) {
        if (belongs(rq))
            set_error("22023", "sl_db_query: bad arguments");
        return NULL;
    }
    if (!connection())
        return NULL;
    if (!PQsendQueryParams(db.conn, sql, nparams, NULL, values, lengths, formats, 0)) {
        call_failed(NULL);
        return NULL;
    }
    return collect(rq);
}

sl_db_result *sl_db_query(sl_request *rq, const char *sql, int nparams, const char *const *values)
{
    return sl_db_query_params(rq, sql, nparams, values, NULL, NULL);
}

static bool is_prepared(const char *name)
{
    for (size_t i = 0; i < db.nprepared; i++)
        if (!strcmp(db.prepared[i], name))
            return true;
    return false;
}

sl_db_result *sl_db_prepared(sl_request *rq, const char *name, const char *sql, int nparams,
                             const char *const *values, const int *lengths, const int *formats)
{
    if (!belongs(rq))
        return NULL;
    if (!name || !*name || strlen(name) > SL_DB_MAX_NAME || !sql || nparams < 0 ||
        (nparams && !values)) {
        set_error("22023", "sl_db_prepared: bad arguments (a name of 1 to 63 bytes, the SQL)");
        return NULL;
    }
    if (!connection())
        return NULL;
    if (!is_prepared(name)) {
        if (db.nprepared == SL_DB_MAX_PREPARED) {
            set_error("54000", "too many prepared statements on this connection (256)");
            return NULL;
        }
        char *copy = strdup(name);
        if (!copy) {
            set_error("53200", "out of memory");
            return NULL;
        }
        PGresult *r = PQprepare(db.conn, name, sql, nparams, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            call_failed(r);
            PQclear(r);
            free(copy);
            return NULL;
        }
        PQclear(r);
        db.prepared[db.nprepared++] = copy;
    }
    if (!PQsendQueryPrepared(db.conn, name, nparams, values, lengths, formats, 0)) {
        call_failed(NULL);
        return NULL;
    }
    return collect(rq);
}

static int command(sl_request *rq, const char *sql)
{
    return sl_db_query(rq, sql, 0, NULL) ? 0 : -1;
}

int sl_db_begin(sl_request *rq)
{
    return command(rq, "BEGIN");
}

int sl_db_commit(sl_request *rq)
{
    /* COMMIT of a failed transaction "succeeds" as a ROLLBACK: say so. */
    bool aborted = belongs(rq) && db.conn && PQtransactionStatus(db.conn) == PQTRANS_INERROR;
    if (command(rq, "COMMIT") != 0)
        return -1;
    if (aborted) {
        set_error("25P02", "the transaction had failed and was rolled back, not committed");
        return -1;
    }
    return 0;
}

int sl_db_rollback(sl_request *rq)
{
    return command(rq, "ROLLBACK");
}

const char *sl_db_error(const sl_request *rq)
{
    return belongs(rq) ? db.error : "";
}

const char *sl_db_sqlstate(const sl_request *rq)
{
    return belongs(rq) ? db.sqlstate : "";
}

bool sl_db_unavailable(const sl_request *rq)
{
    return belongs(rq) && db.unavailable;
}

/* ---- results -------------------------------------------------------- */

int sl_db_rows(const sl_db_result *r)
{
    return r ? r->nrows : 0;
}

int sl_db_columns(const sl_db_result *r)
{
    return r ? r->ncols : 0;
}

const char *sl_db_column_name(const sl_db_result *r, int col)
{
    return r && col >= 0 && col < r->ncols ? r->names[col] : NULL;
}

int sl_db_column(const sl_db_result *r, const char *name)
{
    for (int j = 0; r && name && j < r->ncols; j++)
        if (!strcmp(r->names[j], name))
            return j;
    return -1;
}

long long sl_db_affected(const sl_db_result *r)
{
    return r ? r->affected : 0;
}

static const cell *at(const sl_db_result *r, int row, int col)
{
    if (!r || row < 0 || col < 0 || row >= r->nrows || col >= r->ncols)
        return NULL;
    const cell *c = &r->cells[(size_t)row * (size_t)r->ncols + (size_t)col];
    return c->null ? NULL : c;
}

bool sl_db_is_null(const sl_db_result *r, int row, int col)
{
    return at(r, row, col) == NULL;
}

const char *sl_db_text(const sl_db_result *r, int row, int col)
{
    const cell *c = at(r, row, col);
    return c ? c->v : NULL;
}

int sl_db_int64(const sl_db_result *r, int row, int col, int64_t *out)
{
    const cell *c = at(r, row, col);
    if (!c || !c->len)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(c->v, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int sl_db_int32(const sl_db_result *r, int row, int col, int32_t *out)
{
    int64_t v;
    if (sl_db_int64(r, row, col, &v) != 0 || v < INT32_MIN || v > INT32_MAX)
        return -1;
    *out = (int32_t)v;
    return 0;
}

int sl_db_double(const sl_db_result *r, int row, int col, double *out)
{
    const cell *c = at(r, row, col);
    if (!c || !c->len)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(c->v, &end); /* also NaN, Infinity, -Infinity */
    if (*end || (errno && errno != ERANGE))
        return -1;
    *out = v;
    return 0;
}

int sl_db_bool(const sl_db_result *r, int row, int col, bool *out)
{
    const cell *c = at(r, row, col);
    if (!c || c->len != 1 || (c->v[0] != 't' && c->v[0] != 'f'))
        return -1;
    *out = c->v[0] == 't';
    return 0;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

const void *sl_db_bytea(const sl_db_result *r, int row, int col, size_t *len)
{
    const cell *c = at(r, row, col);
    /* Text output of bytea is hex ("\x..."), bytea_output's default. */
    if (!c || r->types[col] != BYTEAOID || c->len < 2 || c->v[0] != '\\' || c->v[1] != 'x' ||
        (c->len - 2) % 2)
        return NULL;
    size_t n = (c->len - 2) / 2;
    unsigned char *out = sl_alloc(r->rq, n + 1);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(c->v[2 + 2 * i]), lo = hexval(c->v[3 + 2 * i]);
        if (hi < 0 || lo < 0)
            return NULL;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    out[n] = 0;
    if (len)
        *len = n;
    return out;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static bool digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* ISO output, as session_setup asks: "YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM[:SS]]]"
 * (years of 4 digits or more; no BC, no infinity). */
int sl_db_timestamp(const sl_db_result *r, int row, int col, int64_t *usec)
{
    const cell *c = at(r, row, col);
    if (!c)
        return -1;
    const char *s = c->v;
    size_t yl = strspn(s, "0123456789");
    if (yl < 4 || yl > 6 || s[yl] != '-')
        return -1;
    int y, mo, d, h, mi, se;
    if (!digits(s, (int)yl, &y))
        return -1;
    s += yl;
    if (!(s[0] == '-' && digits(s + 1, 2, &mo) && s[3] == '-' && digits(s + 4, 2, &d) &&
          s[6] == ' ' && digits(s + 7, 2, &h) && s[9] == ':' && digits(s + 10, 2, &mi) &&
          s[12] == ':' && digits(s + 13, 2, &se)))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
        return -1;
    s += 15;
    int64_t frac = 0;
    if (*s == '.') {
        s++;
        int n = 0;
        while (*s >= '0' && *s <= '9') {
            if (n < 6)
                frac = frac * 10 + (*s - '0');
            n++;
            s++;
        }
        if (!n)
            return -1;
        for (; n < 6; n++)
            frac *= 10;
    }
    int64_t off = 0;
    if (*s == '+' || *s == '-') {
        int sign = *s == '-' ? -1 : 1, oh, om = 0, os = 0;
        if (!digits(s + 1, 2, &oh))
            return -1;
        s += 3;
        if (*s == ':' && digits(s + 1, 2, &om))
            s += 3;
        if (*s == ':' && digits(s + 1, 2, &os))
            s += 3;
        off = sign * ((int64_t)oh * 3600 + (int64_t)om * 60 + os);
    }
    if (*s)
        return -1;
    int64_t secs = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + (int64_t)h * 3600 +
                   (int64_t)mi * 60 + se - off;
    *usec = secs * 1000000 + frac;
    return 0;
}

bool sl_db_is_null_by(const sl_db_result *r, int row, const char *name)
{
    return sl_db_is_null(r, row, sl_db_column(r, name));
}

int sl_db_int32_by(const sl_db_result *r, int row, const char *name, int32_t *out)
{
    return sl_db_int32(r, row, sl_db_column(r, name), out);
}

int sl_db_int64_by(const sl_db_result *r, int row, const char *name, int64_t *out)
{
    return sl_db_int64(r, row, sl_db_column(r, name), out);
}

int sl_db_double_by(const sl_db_result *r, int row, const char *name, double *out)
{
    return sl_db_double(r, row, sl_db_column(r, name), out);
}

int sl_db_bool_by(const sl_db_result *r, int row, const char *name, bool *out)
{
    return sl_db_bool(r, row, sl_db_column(r, name), out);
}

int sl_db_timestamp_by(const sl_db_result *r, int row, const char *name, int64_t *usec)
{
    return sl_db_timestamp(r, row, sl_db_column(r, name), usec);
}

const char *sl_db_text_by(const sl_db_result *r, int row, const char *name)
{
    return sl_db_text(r, row, sl_db_column(r, name));
}

const void *sl_db_bytea_by(const sl_db_result *r, int row, const char *name, size_t *len)
{
    return sl_db_bytea(r, row, sl_db_column(r, name), len);
}

/* ---- the 503 rule ----------------------------------------------------- */

bool sandlet_lib_db_answer_unavailable(sl_response *rs, int *status, bool force)
{
    int eff = rs->status ? rs->status : *status;
    if (!db.unavailable || (eff < 500 && !force))
        return false;
    if (rs->head_sent) {
        /* Too late to change the answer; at least the log says why the
         * client's session may not hold what the page showed. */
        if (force)
            fprintf(stderr,
                    "libsandlet: %s; the session could not be saved, and the response's head "
                    "was already sent (status %d)\n",
                    db.error, eff);
        return false;
    }
    /* Logged once per outage: the first request that finds it down after
     * one that did not. */
    if (!db.was_down)
        fprintf(stderr, "libsandlet: %s; answering 503 until it is back\n", db.error);
    sandlet_lib_answer_unavailable(rs, status, "the database");
    return true;
}

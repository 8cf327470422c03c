/*
 * session_db.c - the database session store: the sessions of a sandbox
 * with "sessions database" kept in PostgreSQL's sandlet_sessions table,
 * through the worker's one connection (db.c), behind the vtable the
 * memory store also fills (sandlet_session_ops, lib/servlet.h).
 *
 * What a servlet sees (sl_session(3), "Database sessions"): a request
 * that finds or makes a session holds it until the request ends, by an
 * advisory lock on the session taken before its row is read and released
 * after the row is written back.  Requests of one session, on any worker
 * of any host that shares the database, thus take their turns with it:
 * no update of one is lost by another.  Changes are kept in the request
 * and saved once, after the handler returned: a request that crashes, or
 * whose save fails, changes nothing, and the next request of the session
 * sees all of a request's changes or none.  A lock dies with the
 * connection, so a worker killed mid-request frees its session at once.
 *
 * The table is created by the first worker that needs it (the schema is
 * in sandlet.conf(5)); idle sessions expire by the database's clock, the
 * same for every host, and each worker removes a bounded batch of expired
 * rows about once a minute.
 *
 * This file never builds SQL from data (every value is a parameter), never
 * prints a session id, and reads rows as another host's writing: one over
 * the store's bound is refused, never copied.
 */
#include "config.h"

#include "db/db_private.h"
#include "lib/servlet.h"

#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Sessions one request may hold: the one it found, and the one that
 * replaced it (regenerate, or invalidate then a new one). */
#define HELD_MAX 4
/* Expired rows one sweep removes at most, and how often a worker sweeps
 * at most (more often when sessions expire sooner than that). */
#define SWEEP_ROWS "500"
#define SWEEP_S    60u
/* Advisory lock that serialises the workers creating the table. */
#define TABLE_LOCK "7164837561253071921"

static const char create_table[] =
    "BEGIN;"
    "SELECT pg_advisory_xact_lock(" TABLE_LOCK ");"
    "CREATE TABLE IF NOT EXISTS sandlet_sessions ("
    " sandbox text NOT NULL,"
    " id bytea NOT NULL,"
    " data bytea NOT NULL,"
    " expires timestamptz NOT NULL,"
    " PRIMARY KEY (sandbox, id));"
    "CREATE INDEX IF NOT EXISTS sandlet_sessions_expires ON sandlet_sessions (sandbox, expires);"
    "COMMIT";

typedef struct held {
    uint8_t id[SANDLET_SESSION_ID_LEN];
    int64_t lock;     /* the advisory lock's key */
    bool fresh;       /* made in this request: no row yet */
    bool removed;     /* to delete */
    bool dirty;       /* data to write */
    bool touch;       /* the expiry to move on */
    const void *data; /* the blob to write: the request's arena */
    size_t len;
} held;

typedef struct store {
    char *sandbox;
    unsigned timeout; /* idle seconds */
    char timeout_text[16];
    bool table_ready;
    bool refused_reported;      /* the table could not be made: said once */
    unsigned long conn_at_lock; /* sandlet_lib_db_resets() when the locks were taken */
    held h[HELD_MAX];
    size_t n;
    double next_sweep;  /* CLOCK_MONOTONIC seconds */
    double sweep_every; /* seconds */
} store;

static store st;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void *sandlet_lib_session_db_store(const char *sandbox, unsigned timeout)
{
    free(st.sandbox);
    memset(&st, 0, sizeof(st));
    if (!sandbox || !(st.sandbox = strdup(sandbox)))
        return NULL;
    st.timeout = timeout ? timeout : 1;
    snprintf(st.timeout_text, sizeof(st.timeout_text), "%u", st.timeout);
    unsigned every = st.timeout / 2 < SWEEP_S ? st.timeout / 2 : SWEEP_S;
    st.sweep_every = every ? every : 1;
    /* Workers started together sweep at different moments. */
    st.next_sweep =
        now_s() + (double)randombytes_uniform((uint32_t)(st.sweep_every * 1000)) / 1000.0;
    return &st;
}

/* The advisory lock of a session: 64 bits of a hash of the sandbox's name
 * and the id, so that sandboxes sharing a database never wait for each
 * other (unless by a 2^-64 chance, which costs a wait, never a mix-up). */
static int64_t lock_key(const store *s, const uint8_t *id)
{
    crypto_generichash_state hs;
    uint8_t out[8];
    crypto_generichash_init(&hs, NULL, 0, sizeof(out));
    crypto_generichash_update(&hs, (const uint8_t *)s->sandbox, strlen(s->sandbox) + 1);
    crypto_generichash_update(&hs, id, SANDLET_SESSION_ID_LEN);
    crypto_generichash_final(&hs, out, sizeof(out));
    uint64_t k = 0;
    for (int i = 0; i < 8; i++)
        k = k << 8 | out[i];
    return (int64_t)k;
}

static held *find(store *s, const uint8_t *id)
{
    for (size_t i = 0; i < s->n; i++)
        if (memcmp(s->h[i].id, id, SANDLET_SESSION_ID_LEN) == 0)
            return &s->h[i];
    return NULL;
}

/* A failed statement: the connection gone (-EAGAIN, the request becomes
 * 503), the servlet's time up while waiting for the session's lock
 * (-ETIMEDOUT), or anything else (-EIO, logged). */
static int failed(PGresult *r, const char *what)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    sandlet_lib_db_failed(r);
    PQclear(r);
    bool going = !state || !strncmp(state, "08", 2) || !strncmp(state, "57P0", 4);
    if (going)
        return -EAGAIN;
    if (!strcmp(state, "57014") || !strcmp(state, "55P03"))
        return -ETIMEDOUT;
    fprintf(stderr, "libsandlet: database sessions: %s failed: %s (SQLSTATE %s)\n", what,
            sandlet_lib_db_last_error(), state);
    return -EIO;
}

/* Runs a parameterised statement; params are text but for the ones
 * flagged in binary (lengths in lens). */
static PGresult *run(PGconn *c, const char *sql, int n, const char *const *v, const int *lens,
                     const int *bin, int result_binary)
{
    return PQexecParams(c, sql, n, NULL, v, lens, bin, result_binary);
}

/* The connection, idle (no transaction of the servlet's open), or a
 * negative errno. */
static int idle_conn(PGconn **out)
{
    PGconn *c = sandlet_lib_db_conn();
    if (!c)
        return -EAGAIN;
    if (PQtransactionStatus(c) != PQTRANS_IDLE) {
        /* A session read inside the servlet's transaction could see a
         * snapshot older than the lock, and its transaction's fate would
         * be the session's: refused, with the fix. */
        fprintf(stderr, "libsandlet: sl_session_get was called inside an open database "
                        "transaction; get the session before sl_db_begin\n");
        return -EBUSY;
    }
    *out = c;
    return 0;
}

static int ensure_table(store *s, PGconn *c)
{
    if (s->table_ready)
        return 0;
    PGresult *r = PQexec(c, create_table);
    ExecStatusType rs = PQresultStatus(r);
    if (rs == PGRES_COMMAND_OK) {
        PQclear(r);
        s->table_ready = true;
        return 0;
    }
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    bool denied = state && !strcmp(state, "42501");
    int rc = failed(r, "creating the table sandlet_sessions");
    if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE)
        PQclear(PQexec(c, "ROLLBACK"));
    /* Without its table the store is down until the operator acts: the
     * requests that need it are 503, as when the server is. */
    if (denied)
        rc = -EAGAIN;
    if (denied && !s->refused_reported) {
        s->refused_reported = true;
        fprintf(stderr,
                "libsandlet: database sessions of sandbox '%s': the table sandlet_sessions does "
                "not exist and this sandbox's database user may not create it; create it as "
                "the database's owner (the statement is in sandlet.conf(5), SESSIONS IN "
                "POSTGRESQL) or grant CREATE on the schema to the user\n",
                s->sandbox);
    }
    return rc;
}

static int take_lock(PGconn *c, int64_t key)
{
    char k[24];
    snprintf(k, sizeof(k), "%" PRId64, key);
    const char *v[] = {k};
    PGresult *r = run(c, "SELECT pg_advisory_lock($1::int8)", 1, v, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return failed(r, "locking a session");
    PQclear(r);
    return 0;
}

/* Releases the locks this request holds; the connection may be gone, and
 * the locks with it. */
static void release_all(store *s, PGconn *c)
{
    if (!s->n || !c || PQstatus(c) != CONNECTION_OK || sandlet_lib_db_resets() != s->conn_at_lock)
        return;
    char arr[HELD_MAX * 22 + 3];
    size_t p = 0;
    arr[p++] = '{';
    for (size_t i = 0; i < s->n; i++)
        p += (size_t)snprintf(arr + p, sizeof(arr) - p, "%s%" PRId64, i ? "," : "", s->h[i].lock);
    arr[p++] = '}';
    arr[p] = '\0';
    const char *v[] = {arr};
    PGresult *r =
        run(c, "SELECT pg_advisory_unlock(k) FROM unnest($1::int8[]) AS k", 1, v, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        (void)failed(r, "unlocking a session");
    else
        PQclear(r);
}

/* A new held entry for id, its lock taken. */
static int hold(store *s, PGconn *c, const uint8_t *id, held **out)
{
    if (s->n == HELD_MAX)
        return -ENOSPC;
    if (s->n == 0)
        s->conn_at_lock = sandlet_lib_db_resets();
    else if (s->conn_at_lock != sandlet_lib_db_resets())
        return -EAGAIN; /* the connection, and the locks held, were lost */
    held *h = &s->h[s->n];
    memset(h, 0, sizeof(*h));
    memcpy(h->id, id, SANDLET_SESSION_ID_LEN);
    h->lock = lock_key(s, id);
    int rc = take_lock(c, h->lock);
    if (rc < 0)
        return rc;
    s->n++;
    *out = h;
    return 0;
}

/* ---- the vtable ---------------------------------------------------------- */

static int db_get(void *store_, const uint8_t *id, void *buf, size_t cap, size_t *len)
{
    store *s = store_;
    held *h = find(s, id);
    if (h) {
        if (h->removed)
            return -ENOENT;
        if (h->len > cap)
            return -EMSGSIZE;
        if (h->len)
            memcpy(buf, h->data, h->len);
        *len = h->len;
        return 0;
    }
    PGconn *c;
    int rc = idle_conn(&c);
    if (rc == 0)
        rc = ensure_table(s, c);
    if (rc == 0)
        rc = hold(s, c, id, &h);
    if (rc < 0)
        return rc;
    const char *v[] = {s->sandbox, (const char *)id};
    int lens[] = {0, SANDLET_SESSION_ID_LEN};
    int bin[] = {0, 1};
    /* Read after the lock, in a statement of its own: its snapshot is
     * taken now, so it sees what the lock's last holder saved. */
    PGresult *r = run(c,
                      "SELECT data, ceil(extract(epoch FROM expires - now()))::int8 "
                      "FROM sandlet_sessions WHERE sandbox = $1 AND id = $2 AND expires > now()",
                      2, v, lens, bin, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return failed(r, "reading a session");
    if (PQntuples(r) != 1 || PQnfields(r) != 2 || PQgetlength(r, 0, 1) != 8) {
        PQclear(r);
        h->removed = true; /* nothing to write; the lock goes at the end */
        h->fresh = true;
        return -ENOENT;
    }
    size_t n = (size_t)PQgetlength(r, 0, 0);
    if (n > cap) {
        PQclear(r);
        h->removed = h->fresh = true;
        fprintf(stderr,
                "libsandlet: database sessions: a session row holds %zu bytes, more than the "
                "%zu this sandlet takes; it is ignored\n",
                n, cap);
        return -EIO;
    }
    const uint8_t *rem = (const uint8_t *)PQgetvalue(r, 0, 1);
    int64_t left = 0;
    for (int i = 0; i < 8; i++)
        left = (int64_t)((uint64_t)left << 8 | rem[i]);
    if (n)
        memcpy(buf, PQgetvalue(r, 0, 0), n);
    PQclear(r);
    h->data = buf;
    h->len = n;
    /* Moving the expiry is a write: done when a tenth of the idle time
     * (at most a minute) has passed since the last one, or with data. */
    int64_t slack = s->timeout / 10 < 60 ? s->timeout / 10 : 60;
    h->touch = (int64_t)s->timeout - left >= slack;
    *len = n;
    return 0;
}

static int db_create(void *store_, uint8_t *id)
{
    store *s = store_;
    PGconn *c;
    int rc = idle_conn(&c);
    if (rc == 0)
        rc = ensure_table(s, c);
    if (rc < 0)
        return rc;
    randombytes_buf(id, SANDLET_SESSION_ID_LEN);
    held *h;
    if ((rc = hold(s, c, id, &h)) < 0)
        return rc;
    h->fresh = true;
    h->dirty = true;
    h->data = "";
    h->len = 0;
    return 0;
}

static int db_put(void *store_, const uint8_t *id, const void *data, size_t len)
{
    held *h = find(store_, id);
    if (!h || h->removed)
        return -ENOENT;
    h->data = data;
    h->len = len;
    h->dirty = true;
    return 0;
}

static int db_touch(void *store_, const uint8_t *id)
{
    held *h = find(store_, id);
    if (!h || h->removed)
        return -ENOENT;
    h->touch = true;
    return 0;
}

static int db_remove(void *store_, const uint8_t *id)
{
    held *h = find(store_, id);
    if (!h || h->removed)
        return -ENOENT;
    h->removed = true;
    return 0;
}

static int db_new_id(void *store_, const uint8_t *old, uint8_t *fresh)
{
    store *s = store_;
    held *o = find(s, old);
    if (!o || o->removed)
        return -ENOENT;
    PGconn *c = sandlet_lib_db_conn();
    if (!c)
        return -EAGAIN;
    uint8_t id[SANDLET_SESSION_ID_LEN];
    randombytes_buf(id, sizeof(id));
    held *h;
    int rc = hold(s, c, id, &h);
    if (rc < 0)
        return rc;
    h->fresh = h->dirty = true;
    h->data = o->data;
    h->len = o->len;
    o->removed = true;
    memcpy(fresh, id, sizeof(id));
    return 0;
}

/* One row's write; 0 or a negative errno. */
static int save(store *s, PGconn *c, const held *h)
{
    const char *v[] = {s->sandbox, (const char *)h->id, h->data ? h->data : "", s->timeout_text};
    int lens[] = {0, SANDLET_SESSION_ID_LEN, (int)h->len, 0};
    int bin[] = {0, 1, 1, 0};
    const char *sql, *what;
    int n = 4;
    if (h->removed) {
        if (h->fresh)
            return 0; /* never written */
        sql = "DELETE FROM sandlet_sessions WHERE sandbox = $1 AND id = $2";
        what = "removing a session";
        n = 2;
    } else if (h->fresh) {
        /* A new id that is somebody's already (a 2^-128 chance) must not
         * take over that session: nothing is written and it is an error. */
        sql = "INSERT INTO sandlet_sessions (sandbox, id, data, expires) "
              "VALUES ($1, $2, $3, now() + $4::int * interval '1 second') ON CONFLICT DO NOTHING";
        what = "saving a new session";
    } else if (h->dirty) {
        /* An upsert: a row an expiry sweep removed meanwhile comes back. */
        sql = "INSERT INTO sandlet_sessions (sandbox, id, data, expires) "
              "VALUES ($1, $2, $3, now() + $4::int * interval '1 second') "
              "ON CONFLICT (sandbox, id) DO UPDATE SET data = EXCLUDED.data, "
              "expires = EXCLUDED.expires";
        what = "saving a session";
    } else if (h->touch) {
        sql = "UPDATE sandlet_sessions SET expires = now() + $3::int * interval '1 second' "
              "WHERE sandbox = $1 AND id = $2";
        v[2] = s->timeout_text;
        lens[2] = 0;
        bin[2] = 0;
        what = "extending a session";
        n = 3;
    } else {
        return 0;
    }
    PGresult *r = run(c, sql, n, v, lens, bin, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        return failed(r, what);
    bool lost = h->fresh && !h->removed && strcmp(PQcmdTuples(r), "1") != 0;
    PQclear(r);
    if (lost) {
        fprintf(stderr, "libsandlet: database sessions: a new session id was already taken; "
                        "the new session is not saved\n");
        return -EEXIST;
    }
    return 0;
}

/* Expired rows of this sandbox, a batch at a time, skipping rows another
 * statement holds. */
static void sweep(store *s, PGconn *c)
{
    double t = now_s();
    if (t < s->next_sweep)
        return;
    s->next_sweep = t + s->sweep_every;
    const char *v[] = {s->sandbox};
    PGresult *r =
        run(c,
            "DELETE FROM sandlet_sessions WHERE (sandbox, id) IN (SELECT sandbox, id "
            "FROM sandlet_sessions WHERE sandbox = $1 AND expires < now() LIMIT " SWEEP_ROWS
            " FOR UPDATE SKIP LOCKED)",
            1, v, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        (void)failed(r, "removing expired sessions");
    else
        PQclear(r);
}

static int db_finish(void *store_)
{
    store *s = store_;
    if (!s->n && now_s() < s->next_sweep)
        return 0;
    PGconn *c = sandlet_lib_db_conn();
    int rc = 0;
    if (!c) {
        rc = s->n ? -EAGAIN : 0;
    } else if (s->n && sandlet_lib_db_resets() != s->conn_at_lock) {
        /* The connection broke while the session was held: its lock went
         * with it, and another request may have saved the session since.
         * Writing now could undo that, so this request's changes are
         * dropped and the client told to come back. */
        rc = -EAGAIN;
    } else if (s->n) {
        size_t writes = 0;
        for (size_t i = 0; i < s->n; i++) {
            const held *h = &s->h[i];
            writes += h->removed ? !h->fresh : (h->fresh || h->dirty || h->touch);
        }
        /* Several rows (a regenerated id: the old one removed, the new
         * one saved) change together or not at all. */
        bool txn = writes > 1 && PQtransactionStatus(c) == PQTRANS_IDLE;
        if (txn) {
            PGresult *r = PQexec(c, "BEGIN");
            rc = PQresultStatus(r) == PGRES_COMMAND_OK ? (PQclear(r), 0) : failed(r, "BEGIN");
        }
        for (size_t i = 0; rc == 0 && i < s->n; i++)
            rc = save(s, c, &s->h[i]);
        if (txn && PQstatus(c) == CONNECTION_OK) {
            PGresult *r = PQexec(c, rc == 0 ? "COMMIT" : "ROLLBACK");
            if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                int frc = failed(r, "COMMIT");
                if (rc == 0)
                    rc = frc;
            } else {
                PQclear(r);
            }
        }
        release_all(s, c);
    }
    if (c && rc != -EAGAIN && PQstatus(c) == CONNECTION_OK)
        sweep(s, c);
    s->n = 0;
    return rc;
}

const sandlet_session_ops sandlet_lib_session_db_ops = {
    .create = db_create,
    .get = db_get,
    .put = db_put,
    .touch = db_touch,
    .remove = db_remove,
    .new_id = db_new_id,
    .finish = db_finish,
};

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
 * Sessions do not cross sandboxes in the database either (issue 29):
 * - A sandbox's rows are out of other roles' reach: the store keeps them
 *   only in a table of the connecting role's own, in the first schema of
 *   its search_path, on which no other role holds a privilege; a table
 *   another role owns or was granted is refused (503, and the log says
 *   how to give the role a schema of its own).  Row-level security would
 *   leave the table's owner, and roles the operator forgot, able to read
 *   and rewrite every row; ownership is one fact the store can check.
 * - What a row holds is sealed (XChaCha20-Poly1305) under a key derived
 *   from the sandbox's session key, with the sandbox's name and the id as
 *   associated data: whoever reads the database (a backup, a superuser,
 *   a role the operator granted after all) learns no value, and a row he
 *   writes, or moves from another id or sandbox, does not open and counts
 *   as no session.  A row in the clear framing of an earlier sandlet does
 *   not open either: its client gets a new session, and the log says so
 *   once per worker.
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
/* A sealed row: a version byte, the nonce, the ciphertext and its tag. */
#define SEAL_VERSION 1
#define SEAL_NONCE   crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define SEAL_OVER    (1 + SEAL_NONCE + crypto_aead_xchacha20poly1305_ietf_ABYTES)
/* Associated data: the version, the sandbox's name and its NUL, the id. */
#define SEAL_AD_MAX (1 + SANDLET_SESSION_NAME_MAX + 1 + SANDLET_SESSION_ID_LEN)
/* The sealing key's place among keys derived from the session key (the
 * cookie's MAC uses the session key itself, as a BLAKE2b key with no
 * personalisation, so the two never meet). */
#define SEAL_KDF_ID      1
#define SEAL_KDF_CONTEXT "slsessdb"
_Static_assert(sizeof(SEAL_KDF_CONTEXT) - 1 == crypto_kdf_CONTEXTBYTES, "a kdf context");
_Static_assert(SANDLET_SESSION_KEY_LEN == crypto_kdf_KEYBYTES, "the session key is a kdf key");
/* The largest row read back (SANDLET_SESSION_DB_DATA sealed), as SQL. */
#define SESSION_CAP_TEXT "65577"
_Static_assert(SANDLET_SESSION_DB_DATA + SEAL_OVER == 65577, "SESSION_CAP_TEXT follows it");
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

/* Why the table cannot be used, each said once (or again after another). */
enum refusal { REFUSED_NONE, REFUSED_CREATE, REFUSED_NO_SCHEMA, REFUSED_OWNER, REFUSED_SHARED };

typedef struct store {
    char *sandbox;
    unsigned timeout; /* idle seconds */
    char timeout_text[16];
    uint8_t seal_key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES];
    bool keyed;                 /* seal_key is set */
    bool table_ready;           /* the table passed the check on this connection */
    bool prepared;              /* the statements exist on the connection... */
    unsigned long prepared_for; /* ...made at this count of resets */
    enum refusal reported;      /* the last reason logged */
    bool unopened_reported;     /* a row that did not open: said once */
    unsigned long conn_at_lock; /* sandlet_lib_db_resets() when the locks were taken */
    held h[HELD_MAX];
    size_t n;
    double next_sweep;  /* CLOCK_MONOTONIC seconds */
    double sweep_every; /* seconds */
} store;

static store the_store;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void *sandlet_lib_session_db_store(const char *sandbox, unsigned timeout)
{
    free(the_store.sandbox);
    sodium_memzero(&the_store, sizeof(the_store));
    if (!sandbox || !(the_store.sandbox = strdup(sandbox)))
        return NULL;
    the_store.timeout = timeout ? timeout : 1;
    snprintf(the_store.timeout_text, sizeof(the_store.timeout_text), "%u", the_store.timeout);
    unsigned half = the_store.timeout / 2;
    the_store.sweep_every = half < 1 ? 1 : half < SWEEP_S ? half : SWEEP_S;
    /* Workers started together sweep at different moments. */
    the_store.next_sweep =
        now_s() + (double)randombytes_uniform((uint32_t)(the_store.sweep_every * 1000)) / 1000.0;
    return &the_store;
}

/* ---- sealing ------------------------------------------------------------ */

static size_t seal_ad(const store *s, const uint8_t *id, uint8_t *ad)
{
    size_t n = strlen(s->sandbox) + 1;
    ad[0] = SEAL_VERSION;
    memcpy(ad + 1, s->sandbox, n);
    memcpy(ad + 1 + n, id, SANDLET_SESSION_ID_LEN);
    return 1 + n + SANDLET_SESSION_ID_LEN;
}

/* len bytes of data sealed for id into out (len + SEAL_OVER bytes). */
static void seal(const store *s, const uint8_t *id, const void *data, size_t len, uint8_t *out)
{
    uint8_t ad[SEAL_AD_MAX];
    size_t adlen = seal_ad(s, id, ad);
    out[0] = SEAL_VERSION;
    randombytes_buf(out + 1, SEAL_NONCE);
    crypto_aead_xchacha20poly1305_ietf_encrypt(out + 1 + SEAL_NONCE, NULL, data, len, ad, adlen,
                                               NULL, out + 1, s->seal_key);
}

/* A row's n bytes opened into buf (cap bytes): 0 with *len set, -ENOENT
 * when it does not open (not sealed by this sandbox for this id), or
 * -EMSGSIZE when it would not fit. */
static int unseal(const store *s, const uint8_t *id, const uint8_t *row, size_t n, void *buf,
                  size_t cap, size_t *len)
{
    if (n < SEAL_OVER || row[0] != SEAL_VERSION)
        return -ENOENT;
    if (n - SEAL_OVER > cap)
        return -EMSGSIZE;
    uint8_t ad[SEAL_AD_MAX];
    size_t adlen = seal_ad(s, id, ad);
    unsigned long long out = 0;
    if (crypto_aead_xchacha20poly1305_ietf_decrypt(buf, &out, NULL, row + 1 + SEAL_NONCE,
                                                   n - 1 - SEAL_NONCE, ad, adlen, row + 1,
                                                   s->seal_key) != 0)
        return -ENOENT;
    *len = (size_t)out;
    return 0;
}

static int db_set_key(void *store_, const uint8_t *key)
{
    store *s = store_;
    if (!s || !s->sandbox || strlen(s->sandbox) > SANDLET_SESSION_NAME_MAX)
        return -EINVAL;
    if (crypto_kdf_derive_from_key(s->seal_key, sizeof(s->seal_key), SEAL_KDF_ID, SEAL_KDF_CONTEXT,
                                   key) != 0)
        return -EINVAL;
    s->keyed = true;
    return 0;
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

/* The store's statements, prepared once per connection (server
 * session) under names servlets are told not to use (sl_db(3)). */
enum { LOCK, READ, NEW, SAVE, DEL, UNLOCK, NSTMT };
static const struct stmt {
    const char *name, *sql;
    int nparams;
} stmts[NSTMT] = {
    [LOCK] = {"sandlet_session_lock", "SELECT pg_advisory_lock($1::int8)", 1},
    /* Read after the lock, in a statement of its own: its snapshot is
     * taken then, so it sees what the lock's last holder saved. */
    [READ] = {"sandlet_session_read",
              "SELECT CASE WHEN octet_length(data) <= " SESSION_CAP_TEXT " THEN data END, "
              "ceil(extract(epoch FROM expires - now()))::int8 FROM sandlet_sessions "
              "WHERE sandbox = $1 AND id = $2 AND expires > now()",
              2},
    /* A new id that is somebody's already (a 2^-128 chance) must not take
     * over that session: the unique violation aborts the request's
     * transaction, the old row of a regenerated id included. */
    [NEW] =
        {"sandlet_session_new",
         "INSERT INTO sandlet_sessions (sandbox, id, data, expires) VALUES ($1, $2, $3, now() + "
         "$4::int * interval '1 second')",
         4},
    /* An upsert: a row an expiry sweep removed meanwhile comes back. */
    [SAVE] = {"sandlet_session_save",
              "INSERT INTO sandlet_sessions (sandbox, id, data, expires) VALUES ($1, $2, $3, now() "
              "+ $4::int * interval '1 second') ON CONFLICT (sandbox, id) DO UPDATE SET data = "
              "EXCLUDED.data, expires = EXCLUDED.expires",
              4},
    [DEL] = {"sandlet_session_delete",
             "DELETE FROM sandlet_sessions WHERE sandbox = $1 AND id = $2", 2},
    [UNLOCK] = {"sandlet_session_unlock", "SELECT pg_advisory_unlock(k) FROM unnest($1::int8[]) k",
                1},
};

/* One statement of a pipeline: parameters (text unless flagged binary),
 * and whether its implicit transaction ends after it. */
typedef struct step {
    const char *v[4];
    PGresult *r; /* filled in; the caller clears it */
    int lens[4];
    int bin[4];
    int stmt;
    bool sync;
} step;

/* Sends every step, then reads every result: one round trip for all of
 * them.  A step whose transaction an earlier step's error aborted gets a
 * PGRES_PIPELINE_ABORTED result.  -EAGAIN when the connection failed on
 * the way (results of the steps not reached are NULL). */
static int pipeline(PGconn *c, step *st, int n)
{
    for (int i = 0; i < n; i++)
        st[i].r = NULL;
    if (!PQenterPipelineMode(c))
        return -EAGAIN;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const struct stmt *q = &stmts[st[i].stmt];
        /* The unlock is never a prepared statement: a servlet may have
         * deallocated ours, and a lock it could not release would stay
         * for the connection's life. */
        int sent =
            st[i].stmt == UNLOCK
                ? PQsendQueryParams(c, q->sql, q->nparams, NULL, st[i].v, st[i].lens, st[i].bin, 1)
                : PQsendQueryPrepared(c, q->name, q->nparams, st[i].v, st[i].lens, st[i].bin, 1);
        if (!sent || ((st[i].sync || i == n - 1) && !PQpipelineSync(c)))
            rc = -EAGAIN;
    }
    for (int i = 0; i < n && rc == 0; i++) {
        st[i].r = PQgetResult(c);
        if (!st[i].r) {
            rc = -EAGAIN;
            break;
        }
        /* The end of this step's results, then its Sync's marker. */
        PGresult *end;
        while ((end = PQgetResult(c)) != NULL)
            PQclear(end);
        if (st[i].sync || i == n - 1) {
            PGresult *sync = PQgetResult(c);
            bool ok = sync && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
            PQclear(sync);
            if (!ok)
                rc = -EAGAIN;
        }
    }
    if (!PQexitPipelineMode(c) && rc == 0)
        rc = -EAGAIN;
    if (rc < 0)
        sandlet_lib_db_failed(NULL);
    return rc;
}

static int stmt_failed(step *st, const char *what)
{
    ExecStatusType t = PQresultStatus(st->r);
    if (t == PGRES_PIPELINE_ABORTED) {
        PQclear(st->r);
        st->r = NULL;
        return -EIO; /* the step that aborted it has said why */
    }
    PGresult *r = st->r;
    st->r = NULL;
    return failed(r, what);
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

static int prepare(store *s, PGconn *c)
{
    for (int i = 0; i < NSTMT; i++) {
        PGresult *r = PQprepare(c, stmts[i].name, stmts[i].sql, stmts[i].nparams, NULL);
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        /* 42P05: prepared already, by this store before a servlet's
         * statement made us lose count. */
        if (PQresultStatus(r) != PGRES_COMMAND_OK && !(state && !strcmp(state, "42P05")))
            return failed(r, "preparing the session statements");
        PQclear(r);
    }
    s->prepared = true;
    s->prepared_for = sandlet_lib_db_resets();
    return 0;
}

/* What the table check reads, in one row: the connection's first schema
 * (where CREATE TABLE puts the table and where the statements' plain name
 * finds it first; NULL when no schema of the search_path exists) and its
 * role, both quoted as identifiers, and the table there: its owner (NULL:
 * no table), whether that is this role, and whether any other role holds
 * a privilege on it.  Catalogs are named with their schema, so that no
 * table of the search_path stands in for them. */
static const char table_check[] =
    "SELECT quote_ident(current_schema()), quote_ident(current_user), "
    "quote_ident(pg_catalog.pg_get_userbyid(c.relowner)), "
    "c.relowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user), "
    "EXISTS (SELECT 1 FROM pg_catalog.aclexplode(c.relacl) a WHERE a.grantee <> c.relowner) "
    "FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_class c ON c.relname = 'sandlet_sessions' AND "
    "c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = current_schema())";

/* The table cannot be used: said once per reason, and the store is down
 * (the requests that need it are 503, as when the server is) until the
 * operator acts. */
static int refuse(store *s, enum refusal why, const char *schema, const char *role,
                  const char *owner)
{
    s->table_ready = false;
    if (s->reported == why)
        return -EAGAIN;
    s->reported = why;
    char why_text[512] = "";
    switch (why) {
    case REFUSED_CREATE:
        snprintf(why_text, sizeof(why_text),
                 "the table sandlet_sessions does not exist in schema %s and role %s may not "
                 "create it there",
                 schema, role);
        break;
    case REFUSED_NO_SCHEMA:
        snprintf(why_text, sizeof(why_text), "no schema of role %s's search_path exists", role);
        break;
    case REFUSED_OWNER:
        snprintf(why_text, sizeof(why_text),
                 "the table %s.sandlet_sessions is owned by role %s, not by this sandbox's role "
                 "%s: that role, and every role it grants rows to, could read, change or delete "
                 "this sandbox's sessions, so it is not used",
                 schema, owner, role);
        break;
    case REFUSED_SHARED:
        snprintf(why_text, sizeof(why_text),
                 "the table %s.sandlet_sessions of role %s is not used: other roles (or PUBLIC) "
                 "hold privileges on it and could read, change or delete this sandbox's "
                 "sessions; revoke them, or",
                 schema, role);
        break;
    case REFUSED_NONE: break;
    }
    /* One write: the worker's log reader keeps a line whole. */
    fprintf(stderr,
            "libsandlet: database sessions of sandbox '%s': %s%s give the role a schema of its "
            "own, as the database's owner: CREATE SCHEMA %s AUTHORIZATION %s; (its workers make "
            "their table there; sandlet.conf(5), SESSIONS IN POSTGRESQL)\n",
            s->sandbox, why_text, why == REFUSED_SHARED ? "" : ";", role, role);
    return -EAGAIN;
}

/* Makes the table in the connection's first schema. */
static int create(store *s, PGconn *c, const char *schema, const char *role)
{
    PGresult *r = PQexec(c, create_table);
    if (PQresultStatus(r) == PGRES_COMMAND_OK) {
        PQclear(r);
        return 0;
    }
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    bool denied = state && !strcmp(state, "42501");
    int rc = -EIO;
    if (denied)
        PQclear(r);
    else
        rc = failed(r, "creating the table sandlet_sessions");
    if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE)
        PQclear(PQexec(c, "ROLLBACK"));
    return denied ? refuse(s, REFUSED_CREATE, schema, role, NULL) : rc;
}

/* The table, checked (and made when absent) once per connection: only a
 * table of this role's own, which no other role may touch, keeps the
 * sandbox's sessions. */
static int check_table(store *s, PGconn *c)
{
    for (int round = 0; round < 2; round++) {
        PGresult *r = PQexec(c, table_check);
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 5)
            return failed(r, "checking the table sandlet_sessions");
        char schema[160], role[160], owner[160];
        snprintf(schema, sizeof(schema), "%s", PQgetvalue(r, 0, 0));
        snprintf(role, sizeof(role), "%s", PQgetvalue(r, 0, 1));
        snprintf(owner, sizeof(owner), "%s", PQgetvalue(r, 0, 2));
        bool no_schema = PQgetisnull(r, 0, 0), absent = PQgetisnull(r, 0, 2);
        bool mine = !absent && !strcmp(PQgetvalue(r, 0, 3), "t");
        bool shared = !strcmp(PQgetvalue(r, 0, 4), "t");
        PQclear(r);
        if (no_schema)
            return refuse(s, REFUSED_NO_SCHEMA, schema, role, NULL);
        if (absent) {
            /* Made, then checked like any other: a default privilege
             * could have granted it to another role at birth. */
            int rc = round == 0 ? create(s, c, schema, role) : -EIO;
            if (rc < 0)
                return rc;
            continue;
        }
        if (!mine)
            return refuse(s, REFUSED_OWNER, schema, role, owner);
        if (shared)
            return refuse(s, REFUSED_SHARED, schema, role, owner);
        s->table_ready = true;
        s->reported = REFUSED_NONE;
        return 0;
    }
    return -EIO; /* made, and gone at once: the next request tries again */
}

/* The table and the statements, checked and made once per connection. */
static int ready(store *s, PGconn *c)
{
    if (!s->keyed)
        return -EIO; /* never configured: nothing could be sealed */
    if (s->table_ready && s->prepared && s->prepared_for == sandlet_lib_db_resets())
        return 0;
    int rc = check_table(s, c);
    return rc < 0 ? rc : prepare(s, c);
}

/* The lock key as text, for a parameter. */
static void key_text(int64_t key, char *out, size_t cap)
{
    snprintf(out, cap, "%" PRId64, key);
}

/* Releases the locks this request holds: a step to append to the last
 * pipeline of the request.  Not when the connection was made anew since
 * the locks were taken: they went with the old one. */
static bool unlock_step(store *s, step *st, char *arr, size_t cap)
{
    if (!s->n || sandlet_lib_db_resets() != s->conn_at_lock)
        return false;
    size_t p = 0;
    arr[p++] = '{';
    for (size_t i = 0; i < s->n && p < cap; i++)
        p += (size_t)snprintf(arr + p, cap - p, "%s%" PRId64, i ? "," : "", s->h[i].lock);
    if (p + 2 > cap)
        return false; /* cannot happen: HELD_MAX keys fit */
    arr[p++] = '}';
    arr[p] = '\0';
    memset(st, 0, sizeof(*st));
    st->stmt = UNLOCK;
    st->v[0] = arr;
    st->sync = true;
    return true;
}

/* A new held entry for id (its lock not yet taken). */
static int hold(store *s, const uint8_t *id, held **out)
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
    *out = h;
    return 0;
}

/* Takes the lock of a new held entry (the last one) on its own. */
static int lock_new(store *s, PGconn *c)
{
    char k[24];
    key_text(s->h[s->n].lock, k, sizeof(k));
    step st = {.stmt = LOCK, .v = {k}, .sync = true};
    int rc = pipeline(c, &st, 1);
    if (rc == 0 && PQresultStatus(st.r) != PGRES_TUPLES_OK)
        rc = stmt_failed(&st, "locking a session");
    PQclear(st.r);
    if (rc == 0)
        s->n++;
    return rc;
}

/* ---- the vtable ---------------------------------------------------------- */

/* After a statement of ours was not found (a servlet deallocated it):
 * prepared again on the next request. */
static void lost_statements(store *s, const PGresult *r)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (state && !strcmp(state, "26000"))
        s->prepared = false;
}

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
        rc = ready(s, c);
    if (rc == 0)
        rc = hold(s, id, &h);
    if (rc != 0)
        return rc;
    /* Lock and read in one round trip, the read in a statement of its
     * own after the lock. */
    char k[24];
    key_text(h->lock, k, sizeof(k));
    /* The Sync after the lock ends its implicit transaction: the read
     * gets a snapshot taken after the wait at every isolation level (in
     * one transaction, repeatable read would read what was there before
     * the lock's last holder saved). */
    step st[2] = {{.stmt = LOCK, .v = {k}, .sync = true},
                  {.stmt = READ,
                   .v = {s->sandbox, (const char *)id},
                   .lens = {0, SANDLET_SESSION_ID_LEN},
                   .bin = {0, 1},
                   .sync = true}};
    rc = pipeline(c, st, 2);
    if (rc == 0 && PQresultStatus(st[0].r) != PGRES_TUPLES_OK) {
        lost_statements(s, st[0].r);
        rc = stmt_failed(&st[0], "locking a session");
    }
    if (rc == 0)
        s->n++; /* locked: released at the end of the request */
    if (rc == 0 && PQresultStatus(st[1].r) != PGRES_TUPLES_OK) {
        lost_statements(s, st[1].r);
        rc = stmt_failed(&st[1], "reading a session");
    }
    if (rc < 0) {
        PQclear(st[0].r);
        PQclear(st[1].r);
        return rc;
    }
    PQclear(st[0].r);
    PGresult *r = st[1].r;
    if (PQntuples(r) != 1 || PQnfields(r) != 2 || PQgetlength(r, 0, 1) != 8) {
        PQclear(r);
        h->removed = h->fresh = true; /* nothing to write; the lock goes at the end */
        return -ENOENT;
    }
    /* A row over the bound is not even sent (its data is NULL here). */
    size_t n = 0;
    rc = PQgetisnull(r, 0, 0) ? -EMSGSIZE
                              : unseal(s, id, (const uint8_t *)PQgetvalue(r, 0, 0),
                                       (size_t)PQgetlength(r, 0, 0), buf, cap, &n);
    const uint8_t *rem = (const uint8_t *)PQgetvalue(r, 0, 1);
    int64_t left = 0;
    for (int i = 0; i < 8; i++)
        left = (int64_t)((uint64_t)left << 8 | rem[i]);
    PQclear(r);
    if (rc < 0)
        h->removed = h->fresh = true; /* nothing to write; the lock goes at the end */
    if (rc == -EMSGSIZE) {
        fprintf(stderr,
                "libsandlet: database sessions: a session row holds more than the %zu "
                "bytes this sandlet takes; it is ignored\n",
                cap);
        return -EIO;
    }
    if (rc < 0) {
        /* Not sealed for this id by this sandbox: clear data of an
         * earlier sandlet, another session-secret-file, or a row written
         * or moved by another hand.  No session, and a new one for the
         * client; the row itself expires. */
        if (!s->unopened_reported) {
            s->unopened_reported = true;
            fprintf(stderr,
                    "libsandlet: database sessions of sandbox '%s': a row of sandlet_sessions "
                    "does not open with this sandbox's key (written in clear by an earlier "
                    "sandlet, under another session-secret-file, or by another hand); it "
                    "counts as no session (said once per worker)\n",
                    s->sandbox);
        }
        return -ENOENT;
    }
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
        rc = ready(s, c);
    if (rc < 0)
        return rc;
    randombytes_buf(id, SANDLET_SESSION_ID_LEN);
    held *h;
    if ((rc = hold(s, id, &h)) < 0 || (rc = lock_new(s, c)) < 0)
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
    int rc = hold(s, id, &h);
    if (rc < 0 || (rc = lock_new(s, c)) < 0)
        return rc;
    h->fresh = h->dirty = true;
    h->data = o->data;
    h->len = o->len;
    o->removed = true;
    memcpy(fresh, id, sizeof(id));
    return 0;
}

/* The step that saves one held session: 1, or 0 when it needs none, or
 * -ENOMEM.  The data it writes is sealed into *sealed (malloc'd, for the
 * caller to free once the step was sent). */
static int save_step(const store *s, const held *h, step *st, uint8_t **sealed)
{
    memset(st, 0, sizeof(*st));
    *sealed = NULL;
    st->v[0] = s->sandbox;
    st->v[1] = (const char *)h->id;
    st->lens[1] = SANDLET_SESSION_ID_LEN;
    st->bin[1] = 1;
    if (h->removed) {
        st->stmt = DEL;
        return !h->fresh; /* never written: nothing to delete */
    }
    /* Moving the expiry alone rewrites the data read: an upsert, so that
     * a sweep that removed the row as it expired cannot lose a session
     * in use. */
    st->stmt = h->fresh ? NEW : SAVE;
    if (!h->fresh && !h->dirty && !h->touch)
        return 0;
    if (!(*sealed = malloc(h->len + SEAL_OVER)))
        return -ENOMEM;
    seal(s, h->id, h->data ? h->data : "", h->len, *sealed);
    st->v[2] = (const char *)*sealed;
    st->lens[2] = (int)(h->len + SEAL_OVER);
    st->bin[2] = 1;
    st->v[3] = s->timeout_text;
    return 1;
}

/* Expired rows of this sandbox, a batch at a time, skipping rows another
 * statement holds; at most every sweep_every seconds. */
static void sweep(store *s, PGconn *c)
{
    double t = now_s();
    if (t < s->next_sweep)
        return;
    s->next_sweep = t + s->sweep_every;
    const char *v[] = {s->sandbox};
    PGresult *r = PQexecParams(c,
                               "DELETE FROM sandlet_sessions WHERE (sandbox, id) IN (SELECT "
                               "sandbox, id FROM sandlet_sessions WHERE sandbox = $1 AND expires "
                               "< now() LIMIT " SWEEP_ROWS " FOR UPDATE SKIP LOCKED)",
                               1, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        (void)failed(r, "removing expired sessions");
    else
        PQclear(r);
}

/* Every change of the request, then the unlock, in one round trip.  The
 * changes share one implicit transaction (a regenerated id: the old row
 * goes and the new one comes together, or neither), which ends before the
 * unlock runs: whoever takes a lock next sees them committed. */
static int save_all(store *s, PGconn *c)
{
    step st[HELD_MAX + 1];
    uint8_t *sealed[HELD_MAX] = {0};
    int n = 0, rc = 0;
    for (size_t i = 0; i < s->n && rc >= 0; i++)
        if ((rc = save_step(s, &s->h[i], &st[n], &sealed[n])) > 0)
            n++;
    if (rc < 0) {
        /* Nothing saved, and the locks go with a new server session. */
        for (int i = 0; i < n; i++)
            free(sealed[i]);
        sandlet_lib_db_reset();
        return rc;
    }
    if (n)
        st[n - 1].sync = true;
    char arr[HELD_MAX * 22 + 3];
    bool unlocking = unlock_step(s, &st[n], arr, sizeof(arr));
    if (unlocking)
        n++;
    if (!n)
        return 0;
    rc = pipeline(c, st, n);
    bool unlocked = rc == 0 && unlocking && PQresultStatus(st[n - 1].r) == PGRES_TUPLES_OK;
    for (int i = 0; i < n; i++) {
        if (rc == 0 && PQresultStatus(st[i].r) !=
                           (st[i].stmt == UNLOCK ? PGRES_TUPLES_OK : PGRES_COMMAND_OK)) {
            lost_statements(s, st[i].r);
            rc = stmt_failed(&st[i],
                             st[i].stmt == UNLOCK ? "unlocking a session" : "saving a session");
        }
        PQclear(st[i].r);
    }
    for (int i = 0; i < HELD_MAX; i++)
        free(sealed[i]);
    /* A lock that could not be released must not outlive the request:
     * a new server session drops every lock of the old one. */
    if (unlocking && !unlocked)
        sandlet_lib_db_reset();
    return rc;
}

static int db_finish(void *store_)
{
    store *s = store_;
    /* Requests that used no session pay nothing here, a sweep included. */
    if (!s->n)
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
        rc = save_all(s, c);
    }
    if (c && rc != -EAGAIN && s->table_ready && PQstatus(c) == CONNECTION_OK)
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
    .set_key = db_set_key,
};

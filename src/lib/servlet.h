/*
 * servlet.h - libsandlet's private side: what sandletd's worker loop (and
 * the test harness) use to build a request, run a servlet and collect its
 * output.  The sandlet_lib_ functions are exported from libsandlet.so but
 * are not part of the servlet API and may change between releases.
 *
 * Nothing here knows about frames or sockets: output leaves through the
 * sink a driver installs, so the same servlet code runs in a worker and
 * in-process under a test.
 */
#ifndef SANDLET_LIB_SERVLET_H
#define SANDLET_LIB_SERVLET_H

#include <sandlet.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena.c ---------------------------------------------------------- */

typedef struct sandlet_arena_chunk sandlet_arena_chunk;
typedef struct sandlet_arena {
    sandlet_arena_chunk *head; /* newest chunk first */
    sandlet_arena_chunk *keep; /* first chunk, kept across resets */
    size_t used;               /* bytes handed out since the last reset */
    size_t limit;              /* 0: unlimited */
} sandlet_arena;

void sandlet_lib_arena_init(sandlet_arena *a, size_t limit);
void *sandlet_lib_arena_alloc(sandlet_arena *a, size_t size);
/* Frees everything but the first chunk, which is reused. */
void sandlet_lib_arena_reset(sandlet_arena *a);
void sandlet_lib_arena_free(sandlet_arena *a);

/* ---- request.c -------------------------------------------------------- */

/* A body that arrives while the servlet runs (the worker's streamed
 * REQBODY frames): each call hands over the next piece, 1 with *data and
 * *len valid until the next call, 0 at the end of the body, -1 when it
 * will not be complete (the client stopped or sent too much; the driver
 * knows why).  After 0 or -1 it is not called again. */
typedef int (*sandlet_lib_body_pull)(void *ctx, const void **data, size_t *len);

typedef struct sandlet_lib_header {
    const char *name;
    const char *value;
    /* A response header's lengths, measured once by sl_add_header for
     * the frame; zero in the other lists (request headers, cookies,
     * parameters), which are read as C strings. */
    size_t name_len, value_len;
} sandlet_lib_header;

/* A parameter: values may hold NUL bytes (%00, multipart parts). */
typedef struct sandlet_lib_param {
    const char *name;
    const char *value; /* NUL-terminated too */
    size_t value_len;
} sandlet_lib_param;

struct sl_request {
    sandlet_arena arena;
    const char *method;
    const char *target;
    const char *path;
    const char *query;
    const char *peer;
    int version;
    sandlet_lib_header *headers;
    size_t nheaders;
    size_t cap_headers;
    /* The body not read yet: a driver's piece (the whole body when it
     * gave it at once), or body_copy once sl_body or a form needed it
     * whole.  body_pull (NULL: none) yields what follows the piece. */
    const uint8_t *body;
    size_t body_len;
    uint64_t body_pos; /* where body starts in the whole body */
    sandlet_lib_body_pull body_pull;
    void *body_ctx;
    bool body_more;     /* body_pull has more to give */
    bool body_failed;   /* body_pull said -1: the body is incomplete */
    uint8_t *body_copy; /* malloc'd, wiped and freed at the reset */
    size_t body_copy_cap;
    /* Parsed lazily on the first sl_param or sl_file call. */
    sandlet_lib_param *params;
    size_t nparams;
    struct sandlet_lib_file *files;
    size_t nfiles;
    bool params_parsed;
    int form_error; /* errno of a form that could not be read, or 0 */
    /* spool.c: file parts of a streamed body past the threshold are
     * ranges of the acceptor's copy of the body (the worker's spool file);
     * the bytes of them mapped for sl_file.data. */
    size_t spool_mapped;
    /* cookie.c: parsed lazily on first sl_cookie call. */
    sandlet_lib_header *cookies;
    size_t ncookies;
    bool cookies_parsed;
    /* session.c: the session sl_session_get found or made. */
    sl_session *session;
};

struct sl_context {
    const sandlet_lib_header *params;
    size_t nparams;
};

/* Prepares rq for a new request; strings passed to the setters are not
 * copied and must outlive the request (the worker's frame buffer does). */
void sandlet_lib_request_init(sl_request *rq);
void sandlet_lib_request_reset(sl_request *rq);
void sandlet_lib_request_free(sl_request *rq);
int sandlet_lib_request_set(sl_request *rq, const char *method, const char *target,
                            size_t target_len, const char *peer, int version);
int sandlet_lib_request_add_header(sl_request *rq, const char *name, const char *value);
void sandlet_lib_request_set_body(sl_request *rq, const void *body, size_t len);
/* The body continues beyond what set_body gave: pull yields the rest. */
void sandlet_lib_request_set_body_pull(sl_request *rq, sandlet_lib_body_pull pull, void *ctx);
/* The body not read yet, whole: pulls the rest of a streamed body into
 * memory first (bounded by max-body-size, which the acceptor enforces).
 * 0, -ENOMEM, or -ECONNABORTED when the body did not arrive whole. */
int sandlet_lib_body_whole(sl_request *rq);

/* Decodes %XX and '+' into a new string in the arena; NULL on
 * memory shortage.  Invalid escapes are kept literally.  *out_len (may be
 * NULL) receives the decoded length, which counts decoded NUL bytes. */
char *sandlet_lib_url_decode(sandlet_arena *a, const char *s, size_t len, size_t *out_len);

/* Parses rq's query and form body into parameters and files (once);
 * 0 or -ENOMEM.  A malformed multipart body adds nothing, successfully. */
int sandlet_lib_params_parse(sl_request *rq);

/* ---- multipart.c ------------------------------------------------------ */

/* The boundary of a multipart/form-data Content-Type value, or -EINVAL
 * when it is another type or has no valid boundary (1..70 characters).
 * *boundary points into ct or is copied to the arena when quoted. */
int sandlet_lib_multipart_boundary(sandlet_arena *a, const char *ct, const char **boundary,
                                   size_t *blen);

/* RFC 2046 limits a boundary to 70 characters. */
#define SANDLET_MP_BOUNDARY_MAX 70
/* Headers of one part; a browser sends two short lines. */
#define SANDLET_MP_HEAD_MAX ((size_t)8 * 1024)
/* Blanks allowed between a delimiter's boundary and its CRLF (RFC 2046's
 * transport padding): they bound what a delimiter cut between two pieces
 * holds back.  A longer line is data. */
#define SANDLET_MP_PAD_MAX 128
/* A file part of a streamed body larger than this moves from memory to
 * the spool file (spool.c). */
#define SANDLET_SPOOL_THRESHOLD ((size_t)64 * 1024)

/* A file part as the library keeps it: pub is what sl_file_* hand out,
 * first, so that a servlet's pointer leads back here. */
typedef struct sandlet_lib_file {
    sl_file pub;
    bool spooled; /* its bytes are in the spool file, from spool_off */
    uint64_t spool_off;
    void *map; /* pub.data's read-only mapping, or NULL */
    size_t map_len;
} sandlet_lib_file;

/* The incremental parser's state: a few KiB, whatever the body's size. */
typedef struct sandlet_lib_mp {
    sl_request *rq;
    size_t *param_cap, *file_cap;
    uint8_t delim[SANDLET_MP_BOUNDARY_MAX + 4]; /* CRLF "--" boundary */
    size_t dlen;
    int state;
    int err;       /* sticky: once a feed failed, every later one does */
    bool at_start; /* the first delimiter is not resolved yet */
    bool spool;    /* large file parts may go to the spool file */
    /* Bytes from a CR on that may be a delimiter; skip of them (our own
     * CRLF in front of the body or of a part's data) are not data. */
    uint8_t hold[SANDLET_MP_BOUNDARY_MAX + 4 + SANDLET_MP_PAD_MAX + 2];
    size_t hold_len, skip;
    char head[SANDLET_MP_HEAD_MAX + 4]; /* the current part's header block */
    size_t head_len;
    char *name, *filename, *type; /* the current part's, in the arena */
    uint8_t *buf;                 /* its data while in memory (malloc'd) */
    size_t used, cap;
    bool spooled;   /* its data is in the spool file, from spool_off */
    bool unspooled; /* the spool file did not hold this body: memory only */
    uint64_t spool_off, part_len;
    /* Where the piece being fed starts in the body (set by the caller
     * before each feed of a streamed body), and where the current part's
     * data starts: a spooled part is that range of the spool file. */
    uint64_t base, data_start;
} sandlet_lib_mp;

/* Starts a parse of a body with the given boundary: text parts will be
 * appended to rq's parameters, file parts to its files (param_cap and
 * file_cap: their capacities so far).  spool: file parts past
 * SANDLET_SPOOL_THRESHOLD may go to the spool file.  0 or -EBADMSG for a
 * boundary of the wrong length. */
int sandlet_lib_mp_init(sandlet_lib_mp *mp, sl_request *rq, const char *boundary, size_t blen,
                        size_t *param_cap, size_t *file_cap, bool spool);
/* The next n bytes of the body, cut anywhere.  0, -EBADMSG (malformed),
 * -ENOMEM, or -EIO (a spooled part the spool file lost); after an
 * error every later call fails the same way. */
int sandlet_lib_mp_feed(sandlet_lib_mp *mp, const uint8_t *p, size_t n);
/* The body ended: 0, or -EBADMSG when it was not closed. */
int sandlet_lib_mp_finish(sandlet_lib_mp *mp);
/* Frees what the parse holds (never what it added to rq). */
void sandlet_lib_mp_release(sandlet_lib_mp *mp);

/* The whole body at once, through the same parser, never spooled.  All
 * or nothing: -EBADMSG for a malformed body (the caller drops what was
 * added), -ENOMEM.  File data are copies in the arena. */
int sandlet_lib_multipart_parse(sl_request *rq, const uint8_t *body, size_t len,
                                const char *boundary, size_t blen, size_t *param_cap,
                                size_t *file_cap);

/* Appends to rq's parameters or files (arena arrays that grow by
 * doubling); 0 or -ENOMEM. */
int sandlet_lib_param_push(sl_request *rq, size_t *cap, const char *name, const char *value,
                           size_t value_len);
int sandlet_lib_file_push(sl_request *rq, size_t *cap, const sandlet_lib_file *f);

/* ---- spool.c ---------------------------------------------------------- */

/* The worker's spool file: a read-only descriptor of the file the
 * acceptor copies a streamed multipart body into (-1: none, large parts
 * stay in memory).  Kept for the process's life. */
void sandlet_lib_spool_set(int fd);
bool sandlet_lib_spool_enabled(void);
/* Whether the spool file holds the body's first end bytes (the acceptor
 * copied this request's body there). */
bool sandlet_lib_spool_holds(uint64_t end);
/* Makes f a spooled file: len bytes of the body from off, mapped
 * read-only for pub.data when the address space allows (else pub.data is
 * NULL).  0, or -EIO when the spool file does not hold them. */
int sandlet_lib_spool_part(sl_request *rq, sandlet_lib_file *f, uint64_t off, uint64_t len);
/* Unmaps rq's spooled files.  Before the arena that lists them is reset. */
void sandlet_lib_spool_reset(sl_request *rq);

/* ---- response.c ------------------------------------------------------- */

/* One piece of output handed to the sink: the head once (first call),
 * then body data; end marks the last call of a response. */
typedef struct sandlet_lib_output {
    bool head; /* status and headers are in this call */
    int status;
    const sandlet_lib_header *headers;
    size_t nheaders;
    const void *body;
    size_t body_len;
    bool end;
} sandlet_lib_output;

typedef int (*sandlet_lib_sink)(void *ctx, const sandlet_lib_output *out);

/* Body bytes buffered before the response is streamed on its own. */
#define SANDLET_LIB_AUTOFLUSH ((size_t)256 * 1024)

struct sl_response {
    sl_request *rq; /* owns the arena used for headers */
    int status;
    sandlet_lib_header *headers;
    size_t nheaders;
    size_t cap_headers;
    uint8_t *body; /* malloc'd, kept across requests */
    size_t body_len;
    size_t body_cap;
    size_t body_dirty; /* bytes of body used since the last wipe */
    bool head_sent;
    int error; /* sticky: first sink or memory failure */
    sandlet_lib_sink sink;
    void *sink_ctx;
};

void sandlet_lib_response_init(sl_response *rs, sl_request *rq, sandlet_lib_sink sink, void *ctx);
/* Clears per-request state and wipes the body bytes used; keeps the body
 * buffer's memory. */
void sandlet_lib_response_reset(sl_response *rs);
void sandlet_lib_response_free(sl_response *rs);
/* Ends the response with the servlet's return value as status (unless
 * sl_set_status chose one).  Returns 0 or the sticky error. */
int sandlet_lib_response_finish(sl_response *rs, int status);

/* Replaces whatever the handler put in rs (head not sent yet) with a 503
 * "Service Unavailable: WHAT is unavailable" and Retry-After, the answer
 * when a resource the request needs is down; *status becomes 503. */
void sandlet_lib_answer_unavailable(sl_response *rs, int *status, const char *what);

/* ---- db.c: the sandbox's database (sandlet/db.h) ------------------------ */

/* Opens this process's one connection (conninfo as sandlet.conf gives it,
 * password NULL or from database-password-file) and keeps it even when
 * the server cannot be reached: the next call that needs it reconnects.
 * 0, or -1 with libpq's reason in err (a warning: the worker serves). */
int sandlet_lib_db_open(const char *conninfo, const char *password, char *err, size_t errlen);
void sandlet_lib_db_close(void);
bool sandlet_lib_db_configured(void);
/* From now on a broken connection is not reset in this process (which
 * may make no socket of its kind once confined): the request that finds
 * it broken gets 503, and sandlet_lib_db_wants_fresh() becomes true, upon
 * which the worker leaves so that a fresh one connects. */
void sandlet_lib_db_fresh_only(void);
bool sandlet_lib_db_wants_fresh(void);
/* The servlet's timeout (ms, 0: none) for the requests that follow: the
 * connection's statement_timeout is set to 9/10 of it before the next
 * statement when it changed, so that a statement ends with an error the
 * servlet can answer before the worker is ended for the time. */
void sandlet_lib_db_set_timeout(unsigned ms);
/* Around each handler (sandlet_lib_run): the request's error state is
 * reset; afterwards an open transaction is rolled back (1 when one was). */
void sandlet_lib_db_request_start(const sl_request *rq);
int sandlet_lib_db_request_end(void);
bool sandlet_lib_db_request_unavailable(void);
/* Rolls back a transaction the handler left open; 1 when there was one.
 * sandlet_lib_db_request_end does it too; the session store needs it
 * done before it writes. */
int sandlet_lib_db_rollback_open(void);
/* The database was down in this request and the answer is 5xx, or force
 * (the request's session could not be read or saved): makes it 503 with
 * Retry-After (logged once per outage); true when it did. */
bool sandlet_lib_db_answer_unavailable(sl_response *rs, int *status, bool force);

/* True when name is an HTTP token and value holds no CR, LF or NUL: the
 * rule both libsandlet and the acceptor enforce on response headers. */
bool sandlet_lib_header_valid(const char *name, size_t name_len, const char *value,
                              size_t value_len);
/* Headers the server writes itself and servlets may not set. */
bool sandlet_lib_header_reserved(const char *name, size_t name_len);

/* ---- servlet_run.c ---------------------------------------------------- */

/* Runs one servlet on rq, then finishes the response.  Dispatch: service
 * when set, else the handler of rq's method (HEAD falls back to get; the
 * body is still handed to the sink so that its length is known, and a
 * driver speaking HTTP drops it, as the acceptor does); OPTIONS without a
 * handler is 204 and other unhandled methods 405, both with Allow.  A
 * status that is not final (outside 200..599) becomes 502, with a line on
 * stderr. */
int sandlet_lib_run(const sl_servlet *servlet, sl_request *rq, sl_response *rs);

/* True when the servlet has a handler at all (service or a method's):
 * drivers refuse to load one that has none. */
bool sandlet_lib_servlet_runnable(const sl_servlet *servlet);

/* The Allow header value for servlet (no service): the methods it
 * handles, HEAD with GET, OPTIONS always.  Written to buf (cap >= 64). */
void sandlet_lib_allow(const sl_servlet *servlet, char *buf, size_t cap);

/* A servlet as a driver holds it: where it came from, its parameters and
 * whether init ran (so that destroy runs only then). */
typedef struct sandlet_lib_servlet {
    void *handle; /* dlopen handle, or NULL for a linked-in descriptor */
    const sl_servlet *servlet;
    sl_context ctx; /* the parameters init sees */
    bool initialised;
} sandlet_lib_servlet;

/* Opens the shared object lib (RTLD_NOW | RTLD_LOCAL) into s (its
 * parameters are kept) and checks it declares a servlet of this ABI (host
 * names the checker in the ABI message: "sandletd", "library") and, with
 * need_handler, that it has a handler.  Returns 0, or with nothing left
 * open and a sentence naming lib in err (the caller says whose servlet it
 * was): -ENOENT (dlopen failed), -ENOEXEC (no SL_SERVLET), -EPROTO
 * (another ABI), -EINVAL (no handler). */
int sandlet_lib_servlet_open(sandlet_lib_servlet *s, const char *lib, const char *host,
                             bool need_handler, char *err, size_t errlen);
/* Holds a descriptor linked into the program instead (no library). */
void sandlet_lib_servlet_use(sandlet_lib_servlet *s, const sl_servlet *servlet);
/* The parameters init sees; not copied, they must outlive the servlet. */
void sandlet_lib_servlet_params(sandlet_lib_servlet *s, const sandlet_lib_header *params,
                                size_t nparams);
/* Runs init (if any): 0, or init's negative return (s stays uninitialised). */
int sandlet_lib_servlet_init(sandlet_lib_servlet *s);
/* Runs destroy when init ran. */
void sandlet_lib_servlet_destroy(sandlet_lib_servlet *s);
/* dlcloses the library, if s came from one. */
void sandlet_lib_servlet_close(sandlet_lib_servlet *s);

/* One request as a driver hands it over: the strings are not copied and
 * must outlive the run; next_header (may be NULL) yields the headers one
 * at a time and returns false after the last. */
typedef struct sandlet_lib_call {
    const char *method;
    const char *target;
    size_t target_len;
    const char *peer;
    int version; /* 10, 11 */
    bool (*next_header)(void *ctx, const char **name, const char **value);
    void *ctx;
    const void *body; /* the body, or its first part when body_pull is set */
    size_t body_len;
    sandlet_lib_body_pull body_pull; /* NULL: the body is whole */
    void *body_ctx;
} sandlet_lib_call;

/* Resets rq and rs, builds the request from call and runs servlet on it
 * (sandlet_lib_run): 0 with the run's result in *result, or a negative
 * errno when the request could not be built (memory), in which case the
 * servlet did not run and rs holds nothing. */
int sandlet_lib_serve(const sl_servlet *servlet, sl_request *rq, sl_response *rs,
                      const sandlet_lib_call *call, int *result);
/* A request ended: clears rq and rs (the response body's bytes wiped) so
 * that nothing of it reaches the next. */
void sandlet_lib_serve_end(sl_request *rq, sl_response *rs);

/* ---- log.c ----------------------------------------------------------- */

/* Where sl_log's lines go instead of standard error (fn NULL: back to
 * standard error): the test harness keeps them for sl_test_log.  text is
 * whole lines, each ending in a line feed. */
typedef void (*sandlet_lib_log_fn)(void *ctx, const char *text, size_t len);
void sandlet_lib_log_to(sandlet_lib_log_fn fn, void *ctx);

/* ---- syntax.c --------------------------------------------------------- */

/* RFC 9110 tchar; a token is one or more of them. */
bool sandlet_lib_tchar(unsigned char c);
bool sandlet_lib_token(const char *s, size_t len);
/* A field value's bytes (any length, empty too): no control byte but HTAB. */
bool sandlet_lib_field_value(const char *s, size_t len);
/* The value of a hex digit, or -1. */
int sandlet_lib_hexval(unsigned char c);
/* t as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT", 29 bytes and the
 * NUL); -EINVAL when the year is outside 0..9999 or size is too small. */
int sandlet_lib_http_date(long long t, char *out, size_t size);

/* ---- cookie.c --------------------------------------------------------- */

/* Parses every Cookie header of rq (once); 0 or -ENOMEM. */
int sandlet_lib_cookies_parse(sl_request *rq);
/* Drops Set-Cookie headers for this cookie name that rs holds so far, so
 * that a later one is the only one the client sees. */
void sandlet_lib_cookie_unset(sl_response *rs, const char *name);
/* The name under which a browser will send back the cookie of the
 * Set-Cookie value v (len bytes, not NUL-terminated), as a server splits
 * the pair it gets: RFC 6265bis 5.6 (no '=': an empty name; blanks
 * trimmed), and a nameless cookie sent back as its bare value (5.8.3), so
 * that "=SLSESSION_x=T" comes back as the cookie SLSESSION_x.  *name
 * points into v; *name_len may be 0. */
void sandlet_lib_set_cookie_sent_name(const char *v, size_t len, const char **name,
                                      size_t *name_len);
/* True when a servlet whose sandbox's session cookie is own (NULL: none)
 * must not send the Set-Cookie value v (len bytes): the name it will come
 * back under, without __Host- and __Secure- prefixes and ignoring case,
 * is a session cookie's (SL_SESSION_COOKIE "_" and more) and not own.
 * *name, *name_len: that name, into v, for the log. */
bool sandlet_lib_set_cookie_foreign(const char *v, size_t len, const char *own, const char **name,
                                    size_t *name_len);

/* ---- session.c -------------------------------------------------------- */

#define SANDLET_SESSION_ID_LEN 16

/*
 * A session store: what session.c needs from wherever sessions live (the
 * sandbox's shared memory now, PostgreSQL later).  A session's data is one
 * opaque blob that the store keeps whole.  Every function returns 0 or a
 * negative errno; -ENOENT means no such session (never made, removed,
 * expired or evicted).  ids are SANDLET_SESSION_ID_LEN bytes.
 */
typedef struct sandlet_session_ops {
    /* A new empty session with a fresh random id, written to id. */
    int (*create)(void *store, uint8_t *id);
    /* Copies the session's blob (at most cap bytes) and marks it used. */
    int (*get)(void *store, const uint8_t *id, void *buf, size_t cap, size_t *len);
    /* Replaces the blob; -EMSGSIZE when larger than the store takes. */
    int (*put)(void *store, const uint8_t *id, const void *data, size_t len);
    /* Marks the session used now, resetting its idle timer. */
    int (*touch)(void *store, const uint8_t *id);
    int (*remove)(void *store, const uint8_t *id);
    /* Moves the session to a fresh random id, written to fresh; -EEXIST
     * when that id is taken (the caller draws again). */
    int (*new_id)(void *store, const uint8_t *old, uint8_t *fresh);
    /* After the handler returned (NULL: nothing to do): saves what the
     * request changed and lets the sessions it held go.  A store that
     * saves here may keep put's data pointer until then (it lives in the
     * request's arena).  -EAGAIN: the store could not be reached. */
    int (*finish)(void *store);
    /* When the configuration is installed (NULL: the store needs no key):
     * the sandbox's session key (SANDLET_SESSION_KEY_LEN bytes), from
     * which a store that keeps sessions where others can read them
     * derives a key of its own; it keeps no copy of this one. */
    int (*set_key)(void *store, const uint8_t *key);
} sandlet_session_ops;

/*
 * Binding sessions to their sandbox.  A client presents a token: the
 * 16-byte id and a 16-byte keyed MAC (BLAKE2b, libsodium) of the sandbox's
 * name and the id, as 64 hex digits.  The key is the sandbox's own
 * (SANDLET_SESSION_KEY_LEN bytes; only its workers hold it), so an id is
 * valid only in the sandbox that issued it: a token another sandbox made,
 * or one a client or servlet forged, fails the check before any store
 * lookup and counts as no session.
 */
#define SANDLET_SESSION_KEY_LEN   32
#define SANDLET_SESSION_MAC_LEN   16
#define SANDLET_SESSION_TOKEN_LEN (2 * (SANDLET_SESSION_ID_LEN + SANDLET_SESSION_MAC_LEN))
/* Room for a session cookie name with its NUL: SL_SESSION_COOKIE, '_' and
 * at most SANDLET_SESSION_NAME_MAX bytes of the sandbox's name. */
#define SANDLET_SESSION_NAME_MAX    64
#define SANDLET_SESSION_COOKIE_SIZE (sizeof(SL_SESSION_COOKIE) + 1 + SANDLET_SESSION_NAME_MAX)

typedef struct sandlet_session_config {
    const sandlet_session_ops *ops; /* NULL: sessions are off */
    void *store;
    size_t max_data;    /* largest blob put accepts */
    bool cookie_secure; /* add Secure to the session cookie */
    /* The sandbox the sessions belong to (MAC'd with every id), its
     * session cookie's name (sandlet_lib_session_cookie_name) and Path
     * (NULL: "/"), and its key.  The strings are copied. */
    const char *sandbox;
    const char *cookie_name;
    const char *cookie_path;
    uint8_t key[SANDLET_SESSION_KEY_LEN];
} sandlet_session_config;

/* Installs the store sessions use from now on (copied); NULL turns them
 * off.  The worker calls it once before serving.  -EINVAL when a string
 * is missing or too long (nothing is installed then), -ENOMEM. */
int sandlet_lib_session_configure(const sandlet_session_config *cfg);

/* After the handler returned and before the response is finished: the
 * store saves the request's session (ops->finish).  When a session call
 * of this request failed because the store is down or broken, the answer
 * becomes 503 with Retry-After (unless its head was sent), never a page
 * built on a missing session; returns true when it did. */
bool sandlet_lib_session_request_end(sl_response *rs, int *status);

/* The database session store (db/session_db.c): sessions of sandbox in
 * the sandlet_sessions table, through the process's database connection
 * (sandlet_lib_db_open), idle for at most timeout seconds.  Returns the
 * store for sandlet_session_config.store, or NULL (out of memory). */
void *sandlet_lib_session_db_store(const char *sandbox, unsigned timeout);
extern const sandlet_session_ops sandlet_lib_session_db_ops;
/* The largest session the database store keeps (keys, values, framing). */
#define SANDLET_SESSION_DB_DATA (64u * 1024u)

/* The session cookie name of sandbox: SL_SESSION_COOKIE "_" and the name
 * with every byte but ASCII letters, digits, '-' and '.' replaced by '_'
 * (a cookie-name token whatever the sandbox is called).  Distinct names
 * can map to one cookie name: the configuration refuses that.  Returns 0,
 * or -ENAMETOOLONG (name empty or longer than SANDLET_SESSION_NAME_MAX);
 * out holds SANDLET_SESSION_COOKIE_SIZE bytes. */
int sandlet_lib_session_cookie_name(const char *sandbox, char *out);

/* The token for id under the installed configuration: 64 lowercase hex
 * digits and a NUL in out. */
void sandlet_lib_session_token(const uint8_t *id, char *out);
/* True when s (len bytes, not NUL-terminated) is exactly a token that the
 * installed sandbox's key made; the id is then written to id.  The MAC is
 * compared in constant time. */
bool sandlet_lib_session_verify(const char *s, size_t len, uint8_t *id);

#endif /* SANDLET_LIB_SERVLET_H */

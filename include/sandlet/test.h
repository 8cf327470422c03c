/*
 * sandlet/test.h - the servlet test harness (libsandlet-test, sl_test(3)):
 * runs a servlet in-process against synthetic requests, for servlet
 * authors' own cmocka (or any other) tests.
 *
 * Design.  An sl_test is one loaded servlet plus the state a browser and a
 * sandbox would keep around it:
 *
 *   - the servlet: found in a shared object by path (dlopen, as a worker
 *     does, with the same ABI check) or given as a descriptor pointer that
 *     the test program links in; its init runs once with the params the
 *     test passes (what sl_context_param sees), its destroy runs when the
 *     sl_test is freed;
 *   - a session store of its own: the sandbox's real memory store
 *     (session_store.c on a private memfd, no fork), so sessions behave
 *     exactly as under sandletd, 4 KiB limit included;
 *   - a cookie jar: Set-Cookie headers of every response update it
 *     (Max-Age=0 or a past Expires delete), and every request sends what
 *     it holds, so a session started by one request is found by the next.
 *
 * A request is built (method, target, headers, cookies, body, peer), run
 * through sandlet_lib_run in the calling thread - no fork, no socket, so a
 * failing servlet stops under gdb like any other code - and its response
 * is captured whole: status, every header in order (repeated Set-Cookie
 * included), the body (binary-safe, with its length) and how many pieces
 * the servlet flushed it in.
 *
 * Memory: requests and responses belong to their sl_test and are freed
 * with it (or earlier by their _free).  Strings returned by accessors live
 * as long as the object they were read from.  Functions that can fail
 * return NULL or a negative errno; the reason for a failed load is also
 * written to standard error, because a test should say why it cannot run.
 *
 * This harness must never fork or change process-wide state beyond what
 * a worker would (libsandlet's session configuration is switched to the
 * sl_test being run, so several sl_tests may live in one program, but
 * not in several threads at once).
 */
#ifndef SANDLET_TEST_H
#define SANDLET_TEST_H

#include <sandlet.h>

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_test sl_test;                   /* a servlet under test */
typedef struct sl_test_request sl_test_request;   /* a request being built */
typedef struct sl_test_response sl_test_response; /* what the servlet answered */

/* ---- loading ----------------------------------------------------------- */

/* Loads the servlet in the shared object at path and runs its init.
 * params is NULL or a NULL-terminated list of name, value pairs:
 *     const char *params[] = {"dir", "/tmp/x", "limit", "10", NULL};
 * NULL with errno set on failure: ENOENT (cannot load, or no descriptor),
 * EPROTO (other ABI), ECANCELED (init returned < 0), ENOMEM. */
sl_test *sl_test_load(const char *path, const char *const *params);
/* The same for a descriptor linked into the test program. */
sl_test *sl_test_new(const sl_servlet *servlet, const char *const *params);
/* Runs destroy, frees every request and response of t, the store and the
 * jar.  NULL is ignored. */
void sl_test_free(sl_test *t);
/* The database the servlet's sl_db_ calls use (sandlet/db.h), as a
 * sandbox's "database" line under sandletd: one connection for the test
 * process, opened now and kept until the next call (or the process's
 * end); conninfo NULL closes it.  password may be NULL.  0, or -1 with
 * the reason on stderr (the connection is still kept, as a worker keeps
 * it: calls reconnect when the server is back).  A servlet that declares
 * SL_SESSION_DATABASE then keeps its sessions in that database's
 * sandlet_sessions table, as under "sessions database" (other servlets
 * keep theirs in memory either way). */
int sl_test_database(sl_test *t, const char *conninfo, const char *password);

/* ---- requests ------------------------------------------------------------ */

/* A request for target ("/path?query"); method is "GET", "POST", ...
 * Defaults: HTTP/1.1, peer "127.0.0.1:40000", no headers, empty body. */
sl_test_request *sl_test_request_new(sl_test *t, const char *method, const char *target);
/* Adds a header; repeatable.  -EINVAL for CR/LF in name or value. */
int sl_test_request_header(sl_test_request *r, const char *name, const char *value);
/* A cookie for this request only, sent with (and winning over) the jar's. */
int sl_test_request_cookie(sl_test_request *r, const char *name, const char *value);
/* Sets the body (copied; may hold NUL bytes). */
int sl_test_request_body(sl_test_request *r, const void *body, size_t len);
/* Appends name=value, URL-encoded, to an application/x-www-form-urlencoded
 * body and sets that Content-Type. */
int sl_test_request_form(sl_test_request *r, const char *name, const char *value);
int sl_test_request_peer(sl_test_request *r, const char *peer);
/* 10 or 11. */
int sl_test_request_version(sl_test_request *r, int version);
void sl_test_request_free(sl_test_request *r);

/* Runs the servlet on r (which stays usable, e.g. to send it again) and
 * returns its response, or NULL with errno ENOMEM.  The jar is updated. */
sl_test_response *sl_test_run(sl_test_request *r);
/* Shorthands: GET target; POST target with body (as given) and
 * Content-Type application/x-www-form-urlencoded. */
sl_test_response *sl_test_get(sl_test *t, const char *target);
sl_test_response *sl_test_post_form(sl_test *t, const char *target, const char *body);

/* ---- responses ----------------------------------------------------------- */

int sl_test_status(const sl_test_response *rs);
/* What sandlet_lib_run returned: 0, or the response's sticky error. */
int sl_test_result(const sl_test_response *rs);
/* The body, NUL-terminated for convenience (it may hold NULs itself);
 * *len (when not NULL) receives its length. */
const void *sl_test_body(const sl_test_response *rs, size_t *len);
const char *sl_test_body_str(const sl_test_response *rs);
size_t sl_test_body_len(const sl_test_response *rs);
/* Number of pieces the body reached the sink in: 1 unless the servlet
 * flushed or wrote past the autoflush size. */
size_t sl_test_pieces(const sl_test_response *rs);

/* Headers in the order the servlet set them. */
size_t sl_test_header_count(const sl_test_response *rs);
int sl_test_header_at(const sl_test_response *rs, size_t i, const char **name, const char **value);
/* First header with this name (case-insensitive), or NULL; nth picks the
 * n-th (from 0) of the repeated ones; count counts them. */
const char *sl_test_header(const sl_test_response *rs, const char *name);
const char *sl_test_header_nth(const sl_test_response *rs, const char *name, size_t n);
size_t sl_test_header_repeats(const sl_test_response *rs, const char *name);
/* The value of the last Set-Cookie for this cookie name ("" for a deleting
 * one), or NULL when the response sets none; attrs (when not NULL)
 * receives the attributes after the value, e.g. "Path=/; HttpOnly". */
const char *sl_test_set_cookie(const sl_test_response *rs, const char *name, const char **attrs);
void sl_test_response_free(sl_test_response *rs);

/* ---- the cookie jar and the session ------------------------------------------ */

/* The jar's value for name, or NULL. */
const char *sl_test_cookie(const sl_test *t, const char *name);
/* Puts a cookie in the jar (value NULL removes it); -EINVAL for a name or
 * value that would split a Cookie header. */
int sl_test_jar_set(sl_test *t, const char *name, const char *value);
void sl_test_jar_clear(sl_test *t);

/* The servlet under test runs in a sandbox of this name, so its session
 * cookie is SL_TEST_SESSION_COOKIE (sandletd names it after the real
 * sandbox: SLSESSION_<sandbox>, see sl_session(3)), Path=/.  Its ids carry
 * a MAC under a key of the sl_test's own: a token made up by a test is
 * no session, as under sandletd. */
#define SL_TEST_SANDBOX        "test"
#define SL_TEST_SESSION_COOKIE SL_SESSION_COOKIE "_" SL_TEST_SANDBOX

/* The session the jar's SL_TEST_SESSION_COOKIE names, read as the next request
 * would see it (which also marks it used).  str returns NULL when there is
 * no session or no such key; strings live until t is freed. */
const char *sl_test_session_id(const sl_test *t);
const char *sl_test_session_str(sl_test *t, const char *key);
const void *sl_test_session_bytes(sl_test *t, const char *key, size_t *len);
/* Whether the jar names a session the store still has. */
bool sl_test_session_exists(sl_test *t);
/* Store a value in the jar's session, making one (and putting its cookie
 * in the jar) when there is none: a test can start logged in.  Errors as
 * sl_session_set_bytes (sl_session(3)). */
int sl_test_session_set_str(sl_test *t, const char *key, const char *value);
int sl_test_session_set_bytes(sl_test *t, const char *key, const void *data, size_t len);

/* ---- the servlet's log (sl_log(3)) -------------------------------------------- */

/* Every line sl_log wrote while this sl_test ran the servlet (init, its
 * requests, destroy excepted), in order, each ending in a line feed, as
 * the worker would write them ("info: GET /path: message"); "" when none.
 * Each line also goes to standard error.  Valid until the next run or
 * sl_test_log_clear. */
const char *sl_test_log(const sl_test *t);
void sl_test_log_clear(sl_test *t);

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_TEST_H */

/*
 * sandlet.h - the servlet API: everything a servlet author includes.
 *
 * A servlet is a shared object that defines one descriptor with
 * SL_SERVLET().  sandlet loads it into a sandboxed worker process, calls
 * init once, then one handler per request (service, or get, post, ...),
 * then destroy when the worker stops.  A worker serves one request at a time, so servlet code need
 * not be thread-safe.
 *
 * Memory: every string this API returns lives in the request's arena and
 * stays valid until the response is finished; servlets never free it.
 * Errors: functions that can fail return 0 on success and a negative errno
 * value on failure, so that callers can test "< 0" uniformly.
 *
 * This header must stay plain C11 and must never expose the layout of a
 * request or response: the structs are opaque so the ABI can grow.
 */
#ifndef SANDLET_H
#define SANDLET_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever sl_servlet or a function signature changes
 * incompatibly; a worker refuses a servlet built for another ABI. */
#define SL_ABI_VERSION 2

#if defined(__GNUC__)
#define SL_EXPORT       __attribute__((visibility("default")))
#define SL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SL_EXPORT
#define SL_PRINTF(f, a)
#endif

typedef struct sl_request sl_request;   /* one parsed HTTP request */
typedef struct sl_response sl_response; /* the response being built */
typedef struct sl_context sl_context;   /* what init receives */

/* How a servlet keeps state across requests of one client. */
typedef enum sl_session_mode {
    SL_SESSION_NONE = 0,
    SL_SESSION_MEMORY = 1,
    SL_SESSION_DATABASE = 2,
} sl_session_mode;

/* A request handler: returns the HTTP status (100..599); a value out of
 * range answers 500. */
typedef int (*sl_handler)(sl_request *rq, sl_response *rs);

/*
 * The descriptor.  init returns 0, or a negative value to refuse to start
 * (the worker then reports the servlet as failed).
 *
 * Handlers: when service is set it receives every request whatever the
 * method, and the per-method handlers are ignored.  Otherwise the request
 * goes to the handler of its method; HEAD without a head handler runs get
 * (the server sends the headers and drops the body); OPTIONS without an
 * options handler answers 204, and any other method without a handler
 * 405, both with an Allow header naming the methods the servlet has.  A
 * servlet must set service or at least one per-method handler.
 *
 * In C++, where delete is a keyword, the DELETE handler is named delete_.
 */
typedef struct sl_servlet {
    int (*init)(sl_context *ctx);
    sl_handler service;
    void (*destroy)(void);
    sl_session_mode session;
    sl_handler get;
    sl_handler head;
    sl_handler post;
    sl_handler put;
#ifdef __cplusplus
    sl_handler delete_;
#else
    sl_handler delete;
#endif
    sl_handler patch;
    sl_handler options;
} sl_servlet;

/*
 * Defines the servlet descriptor of this shared object:
 *
 *     SL_SERVLET(hello) = { .service = hello };
 *     SL_SERVLET(form) = { .get = show_form, .post = save_form };
 *
 * The name is for logs; the worker finds the descriptor by a fixed symbol.
 */
#ifdef __cplusplus
/* A namespace-scope const has internal linkage in C++: the worker could
 * not find the descriptor. */
#define SL_LINKAGE extern "C"
#else
#define SL_LINKAGE
#endif
#define SL_SERVLET(name)                                                                           \
    SL_LINKAGE SL_EXPORT const unsigned sl_servlet_abi = SL_ABI_VERSION;                           \
    SL_LINKAGE SL_EXPORT const char sl_servlet_name[] = #name;                                     \
    SL_LINKAGE SL_EXPORT const sl_servlet sl_servlet_descriptor

/* ---- init ------------------------------------------------------------ */

/* The value of "param NAME VALUE" in the servlet's configuration block, or
 * fallback when it has none. */
const char *sl_context_param(const sl_context *ctx, const char *name, const char *fallback);

/* ---- request --------------------------------------------------------- */

const char *sl_method(const sl_request *rq); /* "GET", "POST", ... */
const char *sl_target(const sl_request *rq); /* as sent: path and query */
const char *sl_path(const sl_request *rq);   /* target before '?', not decoded */
const char *sl_query(const sl_request *rq);  /* after '?', "" when none */
const char *sl_peer(const sl_request *rq);   /* client address, "ip:port" */
/* HTTP version as 10 * major + minor: 10 or 11. */
int sl_http_version(const sl_request *rq);

/*
 * Repeated names.  sl_headers and sl_params store up to max values of
 * every field with this name, in request order, into values and return
 * how many there are in all (which may exceed max: call with max 0 to
 * count).  The _at functions walk every field: they return the name of
 * the i-th one (from 0) and store its value, or return NULL past the end.
 */

/* Headers; names compare case-insensitively.  A header sent on several
 * lines has one value per line, never joined or split at commas. */
const char *sl_header(const sl_request *rq, const char *name); /* first, or NULL */
size_t sl_headers(const sl_request *rq, const char *name, const char **values, size_t max);
const char *sl_header_at(const sl_request *rq, size_t i, const char **value);

/*
 * Parameters, URL-decoded ('+' is a space, invalid %-escapes are kept as
 * sent): those of the query string first, then those of the body when it
 * is application/x-www-form-urlencoded or multipart/form-data (text parts;
 * file parts are sl_file).  Names compare exactly.  Parsed on the first
 * call; a malformed multipart body contributes nothing.
 */
/* Value of the first parameter with this name, or fallback. */
const char *sl_param(sl_request *rq, const char *name, const char *fallback);
size_t sl_params(sl_request *rq, const char *name, const char **values, size_t max);
/* Binary-safe: the value may hold NUL bytes (%00, or a multipart part);
 * *len receives its length.  NULL when absent.  Always NUL-terminated. */
const char *sl_param_bytes(sl_request *rq, const char *name, size_t *len);
/* value and len may be NULL. */
const char *sl_param_at(sl_request *rq, size_t i, const char **value, size_t *len);

/*
 * A file sent in a multipart/form-data body (a part with a filename).
 * A file part of a body that streams (larger than the acceptor's 1 MiB
 * window) that is larger than 64 KiB is spooled to an unlinked temporary
 * file of the worker's, gone when the request ends: data is then a
 * read-only mapping of it (pages count to the worker's RSS as they are
 * touched), or NULL when the request's mappings would pass a quarter of
 * the sandbox's memory limit (128 MiB by default).  sl_file_read reads any file in constant memory.
 */
typedef struct sl_file {
    const char *name;         /* the form field's name */
    const char *filename;     /* client's name, directories removed; may be "" */
    const char *content_type; /* as sent; "application/octet-stream" if none */
    const void *data;         /* the bytes, binary-safe; may be NULL (see above) */
    size_t len;
} sl_file;

/* The first file sent for field name, or the i-th file (from 0); NULL when
 * there is none (errno is then set when the form could not be read: EFBIG
 * or ENOSPC spooling, ECONNABORTED, ENOMEM).  filename comes from the
 * client: never use it as a path.  Parsing a streamed multipart body reads
 * it: sl_body and sl_body_read then have nothing left. */
const sl_file *sl_file_get(sl_request *rq, const char *name);
const sl_file *sl_file_at(sl_request *rq, size_t i);
/* Reads up to n bytes of f from offset off into buf: the bytes read, 0
 * at (or past) its end, -1 with errno (EINVAL: f is not one of rq's). */
ssize_t sl_file_read(sl_request *rq, const sl_file *f, void *buf, size_t n, size_t off);

/* Raw request body; may contain NUL bytes.  *len receives its length.
 * A large body streams to the worker while the servlet runs: sl_body then
 * reads the rest of it into memory first (at most max-body-size), and
 * returns NULL (*len 0, errno ECONNABORTED or ENOMEM) when it did not
 * arrive whole.  After sl_body_read, only what it has not read yet. */
const void *sl_body(const sl_request *rq, size_t *len);
/* Reads the body incrementally, in constant memory whatever its size:
 * up to n bytes into buf.  Returns the bytes read, 0 at the end of the
 * body, or -1 with errno ECONNABORTED when the body will not be complete
 * (the client stopped or timed out, or it exceeds max-body-size). */
ssize_t sl_body_read(sl_request *rq, void *buf, size_t n);

/* ---- per-request memory ---------------------------------------------- */

/* Memory freed automatically when the response is finished.  NULL only
 * when the worker is out of memory. */
void *sl_alloc(sl_request *rq, size_t size);
char *sl_strdup(sl_request *rq, const char *s);
char *sl_sprintf(sl_request *rq, const char *fmt, ...) SL_PRINTF(2, 3);

/* HTML-escape text for element content and attribute values (& < > " ').
 * Returns "" rather than NULL when s is NULL or memory is short, so that
 * it can be used directly as a printf argument. */
const char *sl_html(sl_request *rq, const char *s);

/* Percent-encode s for use as one URL component (a path segment, a query
 * name or value): every byte but A-Z a-z 0-9 - . _ ~ becomes %XX.  Like
 * sl_html, returns "" rather than NULL. */
const char *sl_url_encode(sl_request *rq, const char *s);

/* ---- response -------------------------------------------------------- */

/* Replace (set) or append (add) a response header.  Refuses names that
 * are not HTTP tokens and values holding CR, LF or NUL (-EINVAL), and
 * headers the server owns (Content-Length, Transfer-Encoding, Connection,
 * Date).  Fails with -EALREADY once the head was flushed. */
int sl_set_header(sl_response *rs, const char *name, const char *value);
int sl_add_header(sl_response *rs, const char *name, const char *value);
int sl_set_content_type(sl_response *rs, const char *type);

/* Set the status now; otherwise service's return value is used. */
int sl_set_status(sl_response *rs, int status);

/* Binary-safe body output. */
int sl_write(sl_response *rs, const void *data, size_t len);
int sl_puts(sl_response *rs, const char *s);
int sl_printf(sl_response *rs, const char *fmt, ...) SL_PRINTF(2, 3);
int sl_vprintf(sl_response *rs, const char *fmt, va_list ap) SL_PRINTF(2, 0);

/* Redirect to location (absolute, or relative to the request) with status
 * 301, 302, 303, 307 or 308: sets the status and Location, and replaces
 * any body written so far with a short HTML link.  Returns status, so that
 * "return sl_redirect(rs, 303, url);" ends a handler; -EINVAL for another
 * status or a location that is empty or holds CR, LF or other controls,
 * -EALREADY once the head was flushed (nothing is changed then). */
int sl_redirect(sl_response *rs, int status, const char *location);

/* Send the head and what was written so far to the client now.  After the
 * first flush the response is streamed (chunked on HTTP/1.1) and headers
 * and status can no longer change. */
int sl_flush(sl_response *rs);

/* ---- logging (sl_log.3) ------------------------------------------------ */

/* Severities, highest first.  Under sandletd a line reaches the error log
 * at its level (debug lines only with sandletd -d); under sl_test it is
 * kept for sl_test_log and written to standard error. */
typedef enum sl_log_level {
    SL_LOG_ERROR = 0,
    SL_LOG_WARNING = 1,
    SL_LOG_INFO = 2,
    SL_LOG_DEBUG = 3,
} sl_log_level;

/* Logs one message, prefixed with its level and the request's method and
 * path (rq may be NULL: in init and destroy).  The sandbox and servlet
 * are added by the server.  A line feed in the message starts another
 * line with the same prefix; longer than 1000 bytes, a message is cut. */
void sl_log(const sl_request *rq, sl_log_level level, const char *fmt, ...) SL_PRINTF(3, 4);
void sl_vlog(const sl_request *rq, sl_log_level level, const char *fmt, va_list ap) SL_PRINTF(3, 0);

/* ---- cookies (sl_cookie.3) ------------------------------------------- */

/* Value of the first cookie with this exact name in the request's Cookie
 * header(s), without surrounding double quotes, or NULL.  Malformed
 * pairs are skipped. */
const char *sl_cookie(sl_request *rq, const char *name);

/* SameSite attribute of a Set-Cookie. */
typedef enum sl_same_site {
    SL_SAME_SITE_UNSET = 0, /* no attribute: the browser's default */
    SL_SAME_SITE_LAX,
    SL_SAME_SITE_STRICT,
    SL_SAME_SITE_NONE, /* browsers require secure with it */
} sl_same_site;

/* Attributes of a Set-Cookie; a zeroed struct (or NULL) sets none. */
typedef struct sl_cookie_options {
    long long max_age;  /* Max-Age in seconds when has_max_age; 0 deletes */
    bool has_max_age;   /* send max_age */
    long long expires;  /* Expires as a Unix time when non-zero */
    const char *path;   /* Path, or NULL */
    const char *domain; /* Domain, or NULL */
    bool secure;        /* Secure: HTTPS only */
    bool http_only;     /* HttpOnly: hidden from scripts */
    sl_same_site same_site;
} sl_cookie_options;

/* Adds a Set-Cookie header.  The name must be an HTTP token; the value
 * RFC 6265 cookie-octets (no space, '"', ',', ';', '\\' or controls),
 * optionally inside one pair of double quotes; path and domain may hold
 * no ';' or controls.  Anything else is refused with -EINVAL and nothing
 * is added, so cookies can never split a response. */
int sl_set_cookie(sl_response *rs, const char *name, const char *value,
                  const sl_cookie_options *opt);

/* ---- sessions (sl_session.3) ----------------------------------------- */

typedef struct sl_session sl_session;

/* Prefix of the session cookie's name.  Each sandbox has its own cookie,
 * SLSESSION_<sandbox> (sl_session_cookie_name), which is also the query
 * and form parameter that carries the id for clients without cookies. */
#define SL_SESSION_COOKIE "SLSESSION"
/* Longest key sl_session_set_str and sl_session_set_bytes accept. */
#define SL_SESSION_KEY_MAX 64

/* The client's session, found by the sandbox's session cookie or, without
 * one, the parameter of that name.  Only ids this sandbox issued count.
 * When there is none (or it expired, or the id is unknown, forged or
 * another sandbox's) and create is true, a new session is made and its
 * cookie added to rs; otherwise no cookie is ever set.  NULL when there is no session and create is
 * false, when the sandbox has "sessions none" (errno ENOTSUP) or on failure. The same pointer is
 * returned for the rest of the request. */
sl_session *sl_session_get(sl_request *rq, sl_response *rs, bool create);

/* The token the client presents for the session: 64 lowercase hex digits
 * (the 128-bit id and the sandbox's MAC of it); a credential, never log it. */
const char *sl_session_id(const sl_session *s);
/* The name of this sandbox's session cookie and parameter, e.g.
 * "SLSESSION_shop"; "" when the sandbox has no sessions. */
const char *sl_session_cookie_name(void);

/* Values; pointers stay valid until the response is finished.  str
 * returns NULL when the key is absent. */
const char *sl_session_str(sl_session *s, const char *key);
const void *sl_session_bytes(sl_session *s, const char *key, size_t *len);
/* Store a value (written through to the sandbox's store at once).
 * -EINVAL: bad key (empty, too long); -EMSGSIZE: the session's data would
 * exceed its slot; -ENOENT: the session was invalidated or expired. */
int sl_session_set_str(sl_session *s, const char *key, const char *value);
int sl_session_set_bytes(sl_session *s, const char *key, const void *data, size_t len);
int sl_session_remove(sl_session *s, const char *key);

/* Ends the session: data gone, the client's cookie deleted.  s must not
 * be used afterwards; sl_session_get may create a new one. */
int sl_session_invalidate(sl_session *s);
/* Gives the session a fresh id, keeping its data, and sends the new
 * cookie: the old id stops working (call it after a login). */
int sl_session_regenerate(sl_session *s);

/* For clients without cookies: url with the session token added as the
 * sl_session_cookie_name() query parameter (before any '#fragment'), and a hidden form
 * field carrying it.  Both return "" only when memory is short. */
const char *sl_session_url(sl_session *s, const char *url);
const char *sl_session_form_field(sl_session *s);

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_H */

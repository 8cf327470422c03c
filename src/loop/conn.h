/*
 * conn.h - what a client connection offers the code that answers on it:
 * static files, the status page, the access log and the worker pool.
 *
 * The connection (http.c) owns its state; everything else reads what it
 * needs through these calls and writes a response only through
 * sandlet_conn_respond, so that the framing and the Connection decision
 * are made in one place.  Nothing declared here may block.
 */
#ifndef SANDLET_LOOP_CONN_H
#define SANDLET_LOOP_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct sandlet_server sandlet_server;
typedef struct sandlet_conn sandlet_conn;
typedef struct sandlet_pool_link sandlet_pool_link;
typedef struct sandlet_page_link sandlet_page_link;
typedef struct sandlet_page sandlet_page;
typedef struct sandlet_servlet_conf sandlet_servlet_conf;

/* The state of a static file being sent, held by the connection for
 * files.c: only files.c writes it; http.c looks at fd (>= 0 while a body
 * is under way, closed with the connection) and job. */
typedef struct sandlet_file_send {
    int fd; /* -1 when none */
    uint64_t off, left;
    /* A large file's sendfile running on libuv's thread pool: it counts
     * as a pending write, so the socket stays open until it is back. */
    uv_work_t work;
    bool job;
    int job_err; /* its errno, 0 when it stopped for no error */
    uint64_t job_sent;
} sandlet_file_send;

/* ---- the request ---------------------------------------------------- */

sandlet_server *sandlet_conn_server(const sandlet_conn *c);
/* "ip:port" or "[ip]:port" of the client. */
const char *sandlet_conn_peer(const sandlet_conn *c);
/* The request target as received (not NUL-ended; len 0 before one was
 * parsed) and, in *path_len, the length of its path before any '?'. */
const char *sandlet_conn_target(const sandlet_conn *c, size_t *len, size_t *path_len);
/* The method (llhttp_method_t) and its name. */
int sandlet_conn_method(const sandlet_conn *c);
const char *sandlet_conn_method_name(const sandlet_conn *c);
void sandlet_conn_version(const sandlet_conn *c, unsigned *major, unsigned *minor);
/* HEAD: no body bytes go out. */
bool sandlet_conn_head_only(const sandlet_conn *c);
/* The value of the first request header called name (any case), or NULL. */
const char *sandlet_conn_header(const sandlet_conn *c, const char *name);
/* For the access log: the status answered (0 until a response began),
 * body bytes sent, and uv_hrtime at the request's first byte. */
void sandlet_conn_outcome(const sandlet_conn *c, int *status, uint64_t *bytes, uint64_t *started);
/* "GET /path HTTP/1.1" (truncated, "" before a request line), for logs. */
const char *sandlet_conn_reqline(const sandlet_conn *c);
/* The servlet that answers the request, or NULL. */
const sandlet_servlet_conf *sandlet_conn_servlet(const sandlet_conn *c);
/* The docroot of the request's host (a directory handle valid until the
 * request ends), or -1 when it has none. */
int sandlet_conn_docroot_fd(const sandlet_conn *c);

/* What the worker pool frames into a REQUEST: pointers into the
 * connection's buffers, valid until the request is done (no copies). */
typedef struct sandlet_request_view {
    const char *method, *target, *peer, *reqline;
    size_t method_len, target_len, peer_len;
    unsigned http_major, http_minor;
    unsigned nheaders;   /* read with sandlet_conn_header_at */
    const uint8_t *body; /* the body held now (all of it unless body_open) */
    size_t body_len;
    bool body_open;                      /* streamed: more follows (sandlet_conn_body) */
    uint64_t body_max;                   /* at most this many body bytes in all */
    const sandlet_servlet_conf *servlet; /* NULL unless a servlet or page answers */
    uint16_t servlet_local;              /* its index among its sandbox's servlets */
    const sandlet_page *page;            /* a page answers (servlet is its view) */
} sandlet_request_view;
void sandlet_conn_request_view(const sandlet_conn *c, sandlet_request_view *v);
/* The i-th request header (i < nheaders), in the order received: name and
 * value point into the connection's buffer and are not NUL-ended. */
void sandlet_conn_header_at(const sandlet_conn *c, unsigned i, const char **name, size_t *name_len,
                            const char **value, size_t *value_len);

/* ---- the worker pool's part ----------------------------------------- */

/* A streamed body (SANDLET_BODY_WINDOW): the bytes held now (returned,
 * *len of them) and whether the client sent the last of it (*done).  A
 * body that ends unfinished never says done: the pool is told with
 * sandlet_pool_forget instead. */
const uint8_t *sandlet_conn_body(const sandlet_conn *c, size_t *len, bool *done);
/* The pool queued the first n held bytes for the worker: they go. */
void sandlet_conn_body_consume(sandlet_conn *c, size_t n);
/* The pool wrote queued body bytes to the worker: reading the client may
 * start again if it had stopped for the window. */
void sandlet_conn_body_drained(sandlet_conn *c);

/* The pool's state for this connection (pool.h); only the pool looks in. */
sandlet_pool_link *sandlet_conn_pool_link(sandlet_conn *c);
const sandlet_pool_link *sandlet_conn_pool_link_const(const sandlet_conn *c);
/* The page table's state for this connection (pages.h). */
sandlet_page_link *sandlet_conn_page_link(sandlet_conn *c);

/* Waiting for a request with nothing unparsed and nothing being written:
 * what the HTTP fuzz target waits for. */
bool sandlet_conn_idle(const sandlet_conn *c);

/* ---- hooks: the only way the connection calls the layers above it ---- */

/* What the connection tells whoever routed its request (dispatch.c), set
 * with the route (sandlet_conn_route).  Any may be NULL: nothing to do. */
typedef struct sandlet_conn_hooks {
    /* The client's output fell below half the high-water mark: what
     * waits for room may be written (a worker read again, a file's next
     * piece). */
    void (*drained)(sandlet_conn *c);
    /* The request will not be answered here: the client left, or its
     * streamed body failed.  Whoever holds it lets it go. */
    void (*gone)(sandlet_conn *c);
    /* The request is answered with an error (sandlet_conn_fail), by
     * whichever part: one that still waits for it stops. */
    void (*failed)(sandlet_conn *c);
    /* A streamed body got more bytes, or ended (sandlet_conn_body). */
    void (*body_more)(sandlet_conn *c);
    /* Bytes of the body queued past the connection and not yet written
     * on: they count in the window (SANDLET_BODY_WINDOW). */
    size_t (*backlog)(const sandlet_conn *c);
    /* Whether a header of a worker's response may go to the client. */
    bool (*header_allowed)(const sandlet_conn *c, const char *name, size_t name_len,
                           const char *value, size_t value_len);
} sandlet_conn_hooks;

/* The server's hooks, set once by main.c before the first connection
 * (sandlet_server.hooks); none may be NULL. */
typedef struct sandlet_server_hooks {
    /* A request's head is parsed: route it (sandlet_conn_route), before a
     * byte of its body is read (its limit depends on the route). */
    void (*request)(sandlet_conn *c);
    /* The request may be served now: its body is whole, or streams. */
    void (*dispatch)(sandlet_conn *c);
    /* Its response is fully queued: log it. */
    void (*done)(sandlet_conn *c);
    /* A connection was freed: the server may have stopped. */
    void (*idle)(sandlet_server *srv);
    /* The request ended: what its route held goes (sandlet_conn_routed). */
    void (*release)(void *held);
} sandlet_server_hooks;

/* What routing decided about the request; kind is the router's own. */
typedef struct sandlet_conn_routed {
    int kind;                            /* route.h's sandlet_route_kind; 0 unrouted */
    bool worker;                         /* a worker answers (servlet or page): it reads the body */
    const sandlet_servlet_conf *servlet; /* a servlet answers; lives in what held keeps */
    uint16_t servlet_local;              /* its index among its sandbox's servlets */
    uint32_t sandbox;                    /* its sandbox's id: the pool is found at dispatch */
    int docroot_fd;                      /* its host's docroot; -1: none */
    void *held;                          /* kept until the request ends, then released */
} sandlet_conn_routed;

/* Sets the request's route and hooks (hooks may be NULL: none), and
 * releases what the previous route held. */
void sandlet_conn_route(sandlet_conn *c, const sandlet_conn_routed *r,
                        const sandlet_conn_hooks *hooks);
const sandlet_conn_routed *sandlet_conn_routing(const sandlet_conn *c);
/* The host the request names: an absolute-form target's authority,
 * else the Host header (*len bytes, not NUL-ended), else NULL. */
const char *sandlet_conn_host(const sandlet_conn *c, size_t *len);
/* Body bytes received so far, against max-body-size. */
uint64_t sandlet_conn_body_total(const sandlet_conn *c);
/* A static file's body is being sent (files.c's sandlet_file_send). */
bool sandlet_conn_sending_file(const sandlet_conn *c);

/* ---- the response --------------------------------------------------- */

/* The one writer of response heads: status line, Date, Server, the
 * caller's extra header lines (each ending in CRLF, already valid), the
 * body's framing and the Connection decision, then body_len bytes of body
 * in the same write.  length is the body's Content-Length (also what the
 * access log counts, 0 for HEAD), SANDLET_LENGTH_UNKNOWN for a body
 * streamed after (chunked for 1.1, ended by the close for 1.0), or
 * SANDLET_LENGTH_NONE for no length line (a worker's 204/304).  0 or a
 * negative errno (-EMSGSIZE: head too large). */
#define SANDLET_LENGTH_NONE (UINT64_MAX - 1)
int sandlet_conn_respond(sandlet_conn *c, int status, const char *extra, size_t extra_len,
                         uint64_t length, const void *body, size_t body_len);
/* Queues bytes (three pieces, one write) to the client. */
int sandlet_conn_write(sandlet_conn *c, const void *a, size_t alen, const void *b, size_t blen,
                       const void *d, size_t dlen);
/* Memory queued to the client but not yet written: the bytes and each
 * queued write's own allocation. */
size_t sandlet_conn_write_backlog(const sandlet_conn *c);
/* The response to the current request is fully queued. */
void sandlet_conn_request_done(sandlet_conn *c);
/* Answers with a short error page (when nothing was sent yet) or cuts the
 * connection (when a response was under way). */
void sandlet_conn_fail(sandlet_conn *c, int status);
/* c waited in the queue of a pool a reload retired, and no worker of it
 * will come: hand it to the server's dispatch again, which routes it
 * under the current configuration. */
void sandlet_conn_redispatch(sandlet_conn *c);
/* The head went out and the body follows from files.c's pump. */
void sandlet_conn_sending(sandlet_conn *c);
/* The file being sent on c, for files.c. */
sandlet_file_send *sandlet_conn_file(sandlet_conn *c);
/* The socket's descriptor, for sendfile (0, or a negative errno). */
int sandlet_conn_socket(const sandlet_conn *c, uv_os_fd_t *fd);
/* A thread-pool sendfile starts on c / is back; job_done is false when c
 * is closing (it is then finished and must not be touched further). */
void sandlet_conn_job_begin(sandlet_conn *c);
bool sandlet_conn_job_done(sandlet_conn *c);

#endif

/*
 * server.h - what the connections (http.c) may see of the acceptor: its
 * limits, the server and its listeners, and http.c's own entry points.
 * It names no function of the layers above the connection (dispatch,
 * pools, pages, files, status, reload, the access log, main): http.c
 * reaches them only through the hooks in conn.h, so that a call up from
 * it does not compile.  acceptor.h, the index of the whole acceptor,
 * includes this.
 */
#ifndef SANDLET_LOOP_SERVER_H
#define SANDLET_LOOP_SERVER_H

#include "common/conf.h"
#include "loop/conn.h"
#include "sandbox/control.h"
#include "sandbox/frame.h"

#include <llhttp.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

/* Request headers beyond this count answer 431 whatever their size. */
#define SANDLET_MAX_HEADERS 100
/* A worker's response head (status line and headers) is bounded too. */
#define SANDLET_MAX_RESPONSE_HEAD ((size_t)64 * 1024)
/* Stop reading a worker while this much is waiting to go to the client;
 * read it again below half of it.  With the frame being handled when the
 * mark is passed and one read's worth behind it, what the acceptor holds
 * for one streaming response stays under HIGH_WATER + SANDLET_FRAME_MAX +
 * 64 KiB, however large the response and however slow the client. */
#define SANDLET_WRITE_HIGH_WATER ((size_t)1024 * 1024)
/* A response whose client left is read and dropped up to this much; past
 * it the worker is killed and restarted (recycled) instead: a large or
 * endless stream would otherwise cost the loop its whole length. */
#define SANDLET_DISCARD_MAX ((size_t)4 * 1024 * 1024)
/* A servlet's (or page's) request body: the acceptor holds at most this
 * much of it per connection.  A body up to this size is read whole and
 * sent with its REQUEST, as before; a larger one is handed to a worker as
 * soon as this much has arrived and streams after it in REQBODY frames.
 * Reading the client stops while the body held here plus the bytes queued
 * for the worker (not yet written to its socketpair) pass the window, and
 * starts again below SANDLET_BODY_LOW_WATER: so one upload costs the
 * acceptor about a window (plus one read of input), whatever its size. */
#define SANDLET_BODY_WINDOW    ((size_t)1024 * 1024)
#define SANDLET_BODY_LOW_WATER (SANDLET_BODY_WINDOW / 2)
#define SANDLET_SHUTDOWN_MS    10000
#define SANDLET_SERVER_HEADER  "Server: sandlet/" PACKAGE_VERSION "\r\n"

typedef struct sandlet_pool sandlet_pool;
typedef struct sandlet_worker sandlet_worker;
typedef struct sandlet_confgen sandlet_confgen;

/* A listening socket and what it was opened for. */
typedef struct sandlet_listener {
    uv_tcp_t tcp; /* tcp.data: this */
    sandlet_server *srv;
    char host[64];
    unsigned port;
    bool paused; /* left unaccepted at max-connections */
} sandlet_listener;

/* ---- http.c ----------------------------------------------------------- */

/* The connection's struct is http.c's (src/loop/conn_private.h); the
 * code answering on a connection uses conn.h. */

void sandlet_http_accept(uv_stream_t *listener, int status);
/* Response side, called by pool.c with what the worker sent. */
int sandlet_conn_response_head(sandlet_conn *c, const sandlet_wire_response *r, bool end);
int sandlet_conn_response_body(sandlet_conn *c, const uint8_t *data, size_t len, bool end);
/* Closes idle connections and marks busy ones to close when done. */
void sandlet_http_shutdown(sandlet_server *srv);
/* Shutdown ran out of time: every connection still open is answered
 * status (or cut, when a response is under way). */
void sandlet_http_fail_all(sandlet_server *srv, int status);
/* Frees what idle connections let go and was kept for reuse. */
void sandlet_http_spares_free(sandlet_server *srv);
/* The time of this loop turn (uv_hrtime, read once per turn): what a
 * request's start and end are stamped with.  Starts the two handles that
 * end a turn; the loop's end closes them with every other. */
void sandlet_http_clock_start(sandlet_server *srv);
uint64_t sandlet_turn_ns(sandlet_server *srv);

/* ---- the server (main.c's) ------------------------------------------- */

struct sandlet_server {
    uv_loop_t *loop;
    const sandlet_server_hooks *hooks; /* main.c's, for the connections (conn.h) */
    sandlet_conf *conf;                /* gen->conf: what new requests and connections see */
    sandlet_confgen *gen;              /* the current configuration */
    sandlet_listener **listeners;
    size_t nlisteners;
    sandlet_pool *pools; /* every pool, retired ones until they are empty */
    /* What connections going idle let go, for the next requests (http.c). */
    struct sandlet_http_spares *http_spares;
    /* Connections accepted at most: max-connections, or fewer when the
     * open-files limit would not leave room for every worker's channel
     * and output and for the supervisor's messages (sandlet_server_caps):
     * a descriptor refused there would lose a worker or a reload. */
    unsigned conn_cap;
    /* LISTEN sockets waiting for their CONF, by listen line. */
    int *pending_listen;
    size_t npending_listen;
    struct sandlet_pagetab *pagetab; /* pages.c; NULL without pages */
    sandlet_conn *conns;
    size_t nconns;
    int ctl;
    uv_poll_t ctl_poll;
    sandlet_ctl_queue ctl_out; /* messages waiting for room on ctl */
    bool ctl_polling_out;
    pid_t supervisor;
    int docroot_fd; /* -1: no docroot configured */
    int access_fd;  /* -1: no access log */
    uv_timer_t access_timer;
    time_t access_sec;
    char access_time[40];
    size_t access_len;
    char access_buf[64 * 1024];
    void *mime;                 /* sandlet_mime */
    struct sandlet_wlog *wlogs; /* workers' output pipes being read */
    bool stopping;
    /* The loop's read buffer (http.c, alloc_cb): a connection with
     * nothing pending reads into it, so that none keeps its own. */
    uint8_t *read_buf;
    bool read_busy;
    time_t date_sec;
    char date[40];
    uint64_t turn_ns; /* sandlet_turn_ns; 0: not read yet this turn */
    unsigned cpus;    /* CPUs this process may run on (its affinity); 0: unknown */
    uv_prepare_t turn_before_poll;
    uv_check_t turn_after_io;
};

#endif /* SANDLET_LOOP_SERVER_H */

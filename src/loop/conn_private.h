/*
 * conn_private.h - the client connection's state.
 *
 * It belongs to http.c, which parses into it and writes every response
 * from it; nothing else may include this file.  Static files, the status
 * page, the access log and the worker pool go through conn.h; the pool's
 * own per-connection state is the embedded sandlet_pool_link (pool.h),
 * which only the pool's files (pool_private.h) look into.
 */
#ifndef SANDLET_LOOP_CONN_PRIVATE_H
#define SANDLET_LOOP_CONN_PRIVATE_H

#include "loop/server.h"
#include "loop/pool.h"
#include "loop/pages.h"

typedef struct sandlet_hdr_ref {
    uint32_t name, name_len, value, value_len; /* offsets into conn->head */
} sandlet_hdr_ref;

enum sandlet_conn_state {
    CONN_READING, /* reading a request (or idle between requests) */
    CONN_WAITING, /* request handed to a pool: queued or at a worker */
    CONN_SENDING, /* response head sent, body streaming from a worker */
    CONN_CLOSING,
};

enum sandlet_conn_phase { PHASE_IDLE, PHASE_HEADERS, PHASE_BODY, PHASE_DONE };

/* What only a request being served needs, apart from the connection so
 * that an idle keep-alive connection does not carry it. */
typedef struct sandlet_conn_req {
    llhttp_t parser;
    sandlet_file_send file; /* files.c's, see conn.h */
    char reqline[160];      /* "GET /path HTTP/1.1", truncated, for logs */
} sandlet_conn_req;

struct sandlet_conn {
    uv_tcp_t tcp;
    /* Runs to the earlier of two deadlines (timer_arm): read_at, the read
     * timeout of the current phase, and send_at, send-timeout, which runs
     * while output waits for the client and restarts whenever a write
     * completes (a client that stalls is cut, which also frees a worker
     * streaming to it).  uv_now values; 0: none. */
    uv_timer_t timer;
    uint64_t read_at, send_at;
    uint64_t armed_at; /* when the timer fires, while it is active */
    int open_handles;  /* tcp and the timer: freed when both are closed */
    enum sandlet_conn_phase phase;
    sandlet_server *srv;
    sandlet_conn *prev, *next; /* all connections, for shutdown */
    enum sandlet_conn_state state;
    /* Received, not yet parsed.  Reads of a connection with nothing
     * pending go to the loop's shared read buffer, which in borrows while
     * they are parsed (on_read): what is left is copied into in's own
     * memory, which an idle connection does not keep. */
    sandlet_buf in;
    bool in_borrowed;
    bool reading;     /* uv_read_start is in effect */
    bool peer_closed; /* EOF seen */
    /* process_input is on the stack: a response completed inside it does
     * not call it again but lets its loop take the next request. */
    bool parsing;
    /* Parsing paused between pipelined requests until the client takes
     * its queued responses (write backlog under half the high-water). */
    bool out_blocked;
    /* The request being parsed or served. */
    sandlet_buf head; /* method, target and header strings, NUL-separated */
    /* sandlet_hdr_ref[nhdrs], at most SANDLET_MAX_HEADERS: grown as a
     * request's headers come, given back with head when idle. */
    sandlet_buf hdrs;
    unsigned nhdrs;
    /* Headers before the body; those parsed after a chunked body are
     * trailer fields, checked and dropped. */
    unsigned nhead;
    /* Fields whose name and value are complete (NUL-terminated in head). */
    unsigned nterminated;
    uint32_t target, target_len;
    /* An absolute-form target's host[:port], in head (0 long: none): it,
     * not Host, names the host the request is for (RFC 9112 3.2.2). */
    uint32_t authority, authority_len;
    bool in_value; /* last header callback was a value */
    /* The input parsed so far ends in a line feed and optional blanks: a
     * header value piece right after it is an obs-fold continuation. */
    bool lf_ws;
    bool expect_continue;
    unsigned nhost; /* Host headers seen */
    sandlet_buf body;
    /* A servlet's or page's body larger than SANDLET_BODY_WINDOW: the
     * request goes to its pool once that much arrived (body_dispatched),
     * the rest is parsed while it is served and handed on by pool.c
     * (sandlet_conn_body), and the head answers it with a close when it
     * comes before the body's end. */
    bool body_stream;
    bool body_dispatched;
    bool body_paused;    /* reading stopped: the window is full */
    uint64_t body_total; /* body bytes received, against max-body-size */
    uint64_t body_max;   /* its Content-Length, else its limit (UINT64_MAX: none) */
    /* Who answers it (dispatch.c), and what it holds until the request
     * ends (the configuration it was routed under: a reload meanwhile
     * changes nothing of it). */
    sandlet_conn_routed rt;
    /* How the connection calls whoever routed it: set with rt. */
    const sandlet_conn_hooks *hooks;
    int error_status; /* set by a parser callback to answer with an error */
    int resp_status;  /* for the access log; 0 until a response began */
    bool keep_alive;
    uint8_t http_major, http_minor;
    /* Response framing. */
    bool chunked;
    bool head_only;          /* HEAD request: no body bytes go out */
    sandlet_pool_link link;  /* the pool's alone (pool.h) */
    sandlet_page_link plink; /* pages.c's alone (pages.h) */
    uint64_t started;        /* uv_hrtime at the request's first byte */
    uint64_t resp_bytes;
    sandlet_conn_req *rq; /* from a request's head until idle (release_idle) */
    size_t pending_writes;
    char peer[56]; /* "[IPv6]:port" at most: 45 + 8 bytes and a NUL */
};

#endif

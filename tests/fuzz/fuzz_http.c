/*
 * fuzz_http.c - libFuzzer target for the acceptor's HTTP glue around
 * llhttp (src/loop/http.c: request heads, targets, bodies, pipelining,
 * error answers) together with what it drives: routing, static files,
 * the status page, the access log and the hand-over of a request to a
 * sandbox worker (src/loop/pool.c).
 *
 * How: the real acceptor runs in-process.  A sandlet_server is built as
 * main.c builds one (configuration parsed from text, a docroot of a few
 * files in /tmp, a status page, an access log to /dev/null, one sandbox of
 * one worker) and listens on an ephemeral 127.0.0.1 port.  The worker is
 * played by this file: the stub of sandlet_server_control takes the
 * worker's end of the socketpair and of the lanes (lane.h) that pool.c
 * reads, answers INIT with READY and every request with a well-formed
 * RESPONSE (an echo of the body, a streamed answer, a 204...), so no
 * process is forked.  Each input
 * is one client connection: its bytes are written at once (pipelining
 * whatever requests they hold), the loop runs until the acceptor has
 * consumed them, then the client half-closes and the loop runs until the
 * acceptor has closed the connection and the worker is idle again.
 *
 * Checked, besides crashes, leaks and UB: every REQUEST frame the acceptor
 * hands to the worker decodes with the worker's own decoder and holds no
 * string a C servlet would read short (a request the client can send must
 * never kill a worker); the acceptor never kills a worker that behaved;
 * the bytes the client receives are a well-formed sequence of HTTP/1.1
 * responses (status line, header lines, Content-Length or chunked framing
 * that matches the bytes, nothing after "Connection: close", no more final
 * responses than requests plus one error).  The loop runs on a thread
 * with a 512 KiB stack, so that recursion per pipelined request overflows
 * within a few kilobytes of input rather than needing megabytes.
 *
 * Speed: about 8,000 to 10,000 inputs per second on one core (a loopback
 * connection, a few loop turns and a socketpair round trip each).  The
 * client resets its end at close, so no TIME_WAIT piles up.  To read a
 * finding, run the target on the input with FUZZ_HTTP_DUMP=1: it prints
 * what the client received.
 */
#include "config.h"

#include "common/log.h"
#include "loop/acceptor.h"
#include "sandbox/control.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define STACK_SIZE ((size_t)512 * 1024)
#define ECHO_MAX   ((size_t)16 * 1024)
#define MAX_REQS   4096
#define CLIENT_MAX ((size_t)8 * 1024 * 1024)

static struct {
    uv_loop_t loop;
    sandlet_server srv;
    sandlet_listener listener;
    sandlet_listener *listeners[1];
    struct sockaddr_in addr;
    char root[64];
    /* The played worker. */
    int wfd;
    uv_poll_t wpoll;
    bool wpoll_on;
    sandlet_buf win;
    sandlet_buf wout; /* frames for the acceptor that wait for room in tx */
    sandlet_lane tx, rx;
    uv_prepare_t bells;  /* looks for the acceptor's doorbells (on_bells) */
    uint32_t bells_seen; /* their count when last looked at */
    bool gathering;
    uint32_t gather_id;
    sandlet_buf reqhead, reqbody;
    unsigned pending;     /* requests taken, not yet answered */
    sandlet_claim *claim; /* the played worker's view of its claim word */
    uint32_t skip;        /* a request taken back: its REQBODY frames are dropped */
    /* The client. */
    int cfd;
    uv_poll_t cpoll;
    bool ceof;
    sandlet_buf cin;
    /* The thread that runs the loop. */
    pthread_t thread;
    sem_t go, done;
    const uint8_t *data;
    size_t size;
} g = {.wfd = -1, .cfd = -1};

static void invariant(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "FUZZ INVARIANT violated: %s\n", what);
        abort();
    }
}

/* ---- what main.c would provide ----------------------------------------- */

static void on_worker(uv_poll_t *h, int status, int events);

int sandlet_server_control(sandlet_server *srv, uint32_t type, uint32_t sandbox, uint32_t slot,
                           uint32_t gen, int32_t status)
{
    (void)srv, (void)sandbox, (void)slot, (void)gen, (void)status;
    /* A played worker answers every request correctly and in time. */
    invariant(type != SANDLET_CTL_KILL, "the acceptor killed a worker that behaved");
    return 0;
}

/* The fuzzed configuration has no pages: nothing asks the supervisor
 * about one. */
int sandlet_server_send(sandlet_server *srv, const sandlet_ctl *msg)
{
    (void)srv;
    invariant(msg->type != SANDLET_CTL_PAGE_CHECK, "a page was asked about without pages");
    return 0;
}

static void worker_send(const sandlet_buf *b);

/* What the supervisor does: make the worker's channel and hand the
 * acceptor its end (the played worker says READY at once, as a real one
 * does after the INIT the supervisor wrote). */
static void start_worker(sandlet_server *srv)
{
    int sv[2];
    invariant(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "no socketpair");
    g.wfd = sv[0];
    uv_poll_init(&g.loop, &g.wpoll, g.wfd);
    uv_poll_start(&g.wpoll, UV_READABLE, on_worker);
    g.wpoll_on = true;
    g.gathering = false;
    g.pending = 0;
    sandlet_buf_reset(&g.win);
    sandlet_buf_reset(&g.wout);
    int claim = sandlet_claim_create();
    invariant(claim >= 0, "no claim word");
    sandlet_claim_unmap(g.claim);
    invariant(sandlet_claim_map(claim, &g.claim) == 0, "cannot map the claim word");
    sandlet_lanes_open(sandlet_claim_lanes(g.claim), false, &g.tx, &g.rx);
    g.bells_seen = sandlet_lane_bell_count(&g.rx);
    /* It sleeps until the first request: the acceptor rings for it. */
    (void)sandlet_lane_wait_data(&g.rx);
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    sandlet_wire_ready_encode(&b);
    worker_send(&b);
    sandlet_buf_free(&b);
    g.skip = 0;
    sandlet_ctl m = {
        .type = SANDLET_CTL_WORKER, .sandbox = 0, .slot = 0, .gen = 1, .pid = (int32_t)getpid()};
    sandlet_pool_worker(srv, &m, sv[1], -1, claim, -1);
}

void sandlet_server_check_stopped(sandlet_server *srv)
{
    (void)srv;
}

/* ---- the played worker --------------------------------------------------- */

/* A doorbell for the acceptor (lane.h). */
static void worker_ring(void)
{
    for (;;) {
        ssize_t n = write(g.wfd, "", 1);
        if (n < 0 && errno == EINTR)
            continue;
        invariant(n == 1, "the played worker could not ring");
        return;
    }
}

/* Into the lane what fits; the rest when the acceptor has made room (it
 * rings: on_worker).  The acceptor runs on this thread, so nothing here
 * may wait for it. */
static void worker_flush(void)
{
    while (g.wout.len) {
        ssize_t k = sandlet_lane_put(&g.tx, g.wout.data, g.wout.len);
        invariant(k >= 0, "the acceptor's position in the worker's lane is impossible");
        if (k > 0)
            sandlet_buf_consume(&g.wout, (size_t)k);
        else if (!sandlet_lane_wait_room(&g.tx))
            break;
    }
    if (sandlet_lane_ring_consumer(&g.tx))
        worker_ring();
}

static void worker_send(const sandlet_buf *b)
{
    invariant(b->error == 0, "the played worker could not build a frame");
    sandlet_buf_put(&g.wout, b->data, b->len);
    invariant(g.wout.error == 0, "out of memory in the played worker");
    worker_flush();
}

static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Prints a string the acceptor sent, escaped, for the report. */
static void show(const char *what, const char *s)
{
    fprintf(stderr, "%s: \"", what);
    for (; *s; s++)
        fprintf(stderr, *s >= 0x20 && *s < 0x7f && *s != '"' ? "%c" : "\\x%02x", (unsigned char)*s);
    fprintf(stderr, "\"\n");
}

/* What a worker's serve() relies on, checked on what the acceptor sent. */
static void check_request(const sandlet_wire_request *wr)
{
    invariant(wr->servlet < 2, "REQUEST for a servlet the sandbox does not have");
    invariant(strlen(wr->method) == wr->method_len && strlen(wr->target) == wr->target_len &&
                  strlen(wr->peer) == wr->peer_len,
              "REQUEST string with a NUL inside");
    invariant(wr->target[0] == '/' || wr->target[0] == '*', "REQUEST target not in origin form");
    sandlet_reader it = wr->headers;
    uint16_t left = wr->nheaders;
    sandlet_wire_header h;
    while (sandlet_wire_headers_next(&it, &left, &h)) {
        bool token = *h.name != '\0';
        for (const char *p = h.name; *p; p++)
            token = token && is_tchar((unsigned char)*p);
        if (!token || strpbrk(h.value, "\r\n")) {
            show("header name", h.name);
            show("header value", h.value);
        }
        invariant(token, "REQUEST header name that is no token");
        invariant(strpbrk(h.value, "\r\n") == NULL, "REQUEST header value with CR or LF");
    }
}

static void respond(uint32_t id, const uint8_t *payload, size_t len, const uint8_t *body,
                    size_t body_len)
{
    sandlet_wire_request wr;
    int rc = sandlet_wire_request_decode(payload, len, &wr);
    if (rc < 0) {
        fprintf(stderr, "the acceptor sent a REQUEST the worker's decoder refuses (%d)\n", rc);
        invariant(false, "a client's request would kill the worker");
    }
    check_request(&wr);
    if (!body) {
        body = wr.body;
        body_len = wr.body_len;
    }
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    const char *t = wr.target;
    if (strstr(t, "stream")) {
        /* Unknown length: chunked for 1.1, close-delimited for 1.0. */
        sandlet_wire_response rs = {
            .status = 200, .nheaders = 1, .content_length = SANDLET_LENGTH_UNKNOWN};
        size_t start = sandlet_wire_response_begin(&b, id, &rs);
        sandlet_wire_header_put(&b, "X-Played", 8, "stream", 6);
        sandlet_buf_put(&b, "first ", 6);
        sandlet_frame_finish(&b, start, 0);
        start = sandlet_wire_body_begin(&b, id);
        sandlet_buf_put(&b, "second", 6);
        sandlet_frame_finish(&b, start, 0);
        start = sandlet_wire_body_begin(&b, id);
        sandlet_frame_finish(&b, start, SANDLET_FRAME_END);
    } else if (strstr(t, "204") || strstr(t, "304")) {
        sandlet_wire_response rs = {.status = strstr(t, "204") ? 204 : 304,
                                    .content_length = SANDLET_LENGTH_UNKNOWN};
        sandlet_frame_finish(&b, sandlet_wire_response_begin(&b, id, &rs), SANDLET_FRAME_END);
    } else {
        size_t n = body_len < ECHO_MAX ? body_len : ECHO_MAX;
        sandlet_wire_response rs = {
            .status = strstr(t, "404") ? 404 : 200, .nheaders = 2, .content_length = n};
        size_t start = sandlet_wire_response_begin(&b, id, &rs);
        sandlet_wire_header_put(&b, "Content-Type", 12, "application/octet-stream", 24);
        sandlet_wire_header_put(&b, "Set-Cookie", 10, "a=b; Path=/", 11);
        sandlet_buf_put(&b, body, n);
        sandlet_frame_finish(&b, start, SANDLET_FRAME_END);
    }
    worker_send(&b);
    sandlet_buf_free(&b);
    g.pending--;
}

static void worker_frames(void)
{
    size_t off = 0;
    for (;;) {
        sandlet_frame_hdr h;
        int rc = sandlet_frame_header_decode(g.win.data + off, g.win.len - off, &h);
        if (rc == -EAGAIN)
            break;
        invariant(rc == 0, "the acceptor sent a bad frame header");
        if (g.win.len - off - SANDLET_FRAME_HEADER < h.length)
            break;
        const uint8_t *payload = g.win.data + off + SANDLET_FRAME_HEADER;
        bool end = h.flags & SANDLET_FRAME_END;
        if (h.type == SANDLET_FRAME_REQUEST && !g.gathering && !sandlet_claim_take(g.claim, h.id)) {
            /* Taken back (a loop turn ran past SANDLET_CLAIM_MS, as
             * under valgrind): as a real worker does, skip it. */
            sandlet_buf b;
            sandlet_buf_init(&b, 0);
            sandlet_wire_skip_encode(&b, h.id);
            worker_send(&b);
            sandlet_buf_free(&b);
            g.skip = h.id;
        } else if (h.type == SANDLET_FRAME_REQBODY && !g.gathering && g.skip && h.id == g.skip) {
            /* the rest of a request taken back */
        } else if (h.type == SANDLET_FRAME_REQUEST && !g.gathering) {
            g.skip = 0;
            g.pending++;
            if (end) {
                respond(h.id, payload, h.length, NULL, 0);
            } else {
                sandlet_wire_request wr;
                invariant(sandlet_wire_request_decode(payload, h.length, &wr) == 0,
                          "a client's request would kill the worker");
                sandlet_buf_reset(&g.reqhead);
                sandlet_buf_reset(&g.reqbody);
                sandlet_buf_put(&g.reqhead, payload, h.length);
                sandlet_buf_put(&g.reqbody, wr.body, wr.body_len);
                g.gathering = true;
                g.gather_id = h.id;
            }
        } else if (h.type == SANDLET_FRAME_REQBODY && g.gathering && h.id == g.gather_id) {
            sandlet_buf_put(&g.reqbody, payload, h.length);
            if (end) {
                g.gathering = false;
                respond(h.id, g.reqhead.data, g.reqhead.len,
                        g.reqbody.len ? g.reqbody.data : (const uint8_t *)"", g.reqbody.len);
            }
        } else {
            invariant(false, "the acceptor sent a frame out of sequence");
        }
        off += SANDLET_FRAME_HEADER + h.length;
    }
    sandlet_buf_consume(&g.win, off);
}

static void worker_run(void);

/* The acceptor writes nothing to the worker's socket after INIT (its
 * doorbells are futex wakes, lane.h): what wakes this is its end. */
static void on_worker(uv_poll_t *h, int status, int events)
{
    (void)h, (void)events;
    invariant(status == 0, "polling the worker's socket failed");
    for (;;) {
        char bytes[256];
        ssize_t n = recv(g.wfd, bytes, sizeof(bytes), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        /* The acceptor closed the worker's socket: not expected while it
         * runs (it does so only to stop or recycle). */
        invariant(n > 0, "the acceptor dropped a worker that behaved");
        invariant(false, "the acceptor wrote to the worker's socket after INIT");
    }
}

/* The acceptor rings by a futex wake, which this thread (the acceptor's
 * own) cannot sleep on.  So it looks at the count before each poll:
 * started before the acceptor's handles, this runs after all of theirs,
 * so a doorbell rung anywhere in a loop turn is seen before the loop
 * sleeps. */
static void on_bells(uv_prepare_t *h)
{
    (void)h;
    if (!g.claim)
        return;
    uint32_t n = sandlet_lane_bell_count(&g.rx);
    if (n == g.bells_seen)
        return;
    g.bells_seen = n;
    worker_run();
}

/* The acceptor rang: its frames are in the lane, or there is room for
 * ours.  Reads the lane dry, then asks for the next doorbell. */
static void worker_run(void)
{
    for (;;) {
        worker_flush();
        if (sandlet_buf_reserve(&g.win, 64 * 1024) < 0)
            invariant(false, "out of memory in the played worker");
        ssize_t n = sandlet_lane_get(&g.rx, g.win.data + g.win.len, 64 * 1024);
        invariant(n >= 0, "the acceptor's position in its lane is impossible");
        if (n == 0) {
            if (!sandlet_lane_wait_data(&g.rx))
                break;
            sandlet_lane_awake(&g.rx);
            continue;
        }
        g.win.len += (size_t)n;
        if (sandlet_lane_ring_producer(&g.rx))
            worker_ring();
        worker_frames();
    }
}

/* ---- the client ------------------------------------------------------------ */

static void on_client(uv_poll_t *h, int status, int events)
{
    (void)h, (void)events;
    invariant(status == 0, "polling the client socket failed");
    for (;;) {
        uint8_t buf[64 * 1024];
        ssize_t n = recv(g.cfd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            /* EOF, or a reset: the acceptor cut the connection. */
            g.ceof = true;
            uv_poll_stop(&g.cpoll);
            return;
        }
        if (g.cin.len + (size_t)n <= CLIENT_MAX)
            sandlet_buf_put(&g.cin, buf, (size_t)n);
        else
            invariant(false, "more than 8 MiB of responses to a small input");
    }
}

/* The requests of the input as llhttp reads them, counted when their head
 * is complete (the acceptor knows the method from then on, even when the
 * body then fails): whether each is HEAD, so that a response's absent
 * body is expected. */
typedef struct reqlist {
    bool head[MAX_REQS];
    size_t n;
} reqlist;

static int on_req_head(llhttp_t *p)
{
    reqlist *l = p->data;
    if (l->n < MAX_REQS)
        l->head[l->n++] = llhttp_get_method(p) == HTTP_HEAD;
    return 0;
}

static void list_requests(const uint8_t *data, size_t size, reqlist *l)
{
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    s.on_headers_complete = on_req_head;
    llhttp_t p;
    llhttp_init(&p, HTTP_REQUEST, &s);
    p.data = l;
    l->n = 0;
    llhttp_execute(&p, (const char *)data, size);
}

static bool starts(const uint8_t *p, const uint8_t *end, const char *s)
{
    size_t n = strlen(s);
    return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

/* Parses one header line [p, e); returns false when it is malformed. */
static bool header_line(const uint8_t *p, const uint8_t *e, long long *cl, bool *chunked,
                        bool *close)
{
    const uint8_t *colon = memchr(p, ':', (size_t)(e - p));
    if (!colon || colon == p)
        return false;
    for (const uint8_t *q = p; q < colon; q++)
        if (!is_tchar(*q))
            return false;
    for (const uint8_t *q = colon + 1; q < e; q++)
        if (*q == '\r' || *q == '\n' || *q == 0)
            return false;
    size_t nl = (size_t)(colon - p);
    const char *v = (const char *)colon + 1;
    size_t vl = (size_t)(e - colon - 1);
    while (vl && *v == ' ')
        v++, vl--;
    if (nl == 14 && strncasecmp((const char *)p, "Content-Length", 14) == 0) {
        if (*cl >= 0 || vl == 0 || vl > 15)
            return false;
        long long n = 0;
        for (size_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9')
                return false;
            n = n * 10 + (v[i] - '0');
        }
        *cl = n;
    } else if (nl == 17 && strncasecmp((const char *)p, "Transfer-Encoding", 17) == 0) {
        if (vl != 7 || strncasecmp(v, "chunked", 7) != 0)
            return false;
        *chunked = true;
    } else if (nl == 10 && strncasecmp((const char *)p, "Connection", 10) == 0) {
        *close = vl == 5 && strncasecmp(v, "close", 5) == 0;
    }
    return true;
}

/* Reads a chunked body at *pp; false when it is malformed or cut. */
static bool chunked_body(const uint8_t **pp, const uint8_t *end)
{
    const uint8_t *p = *pp;
    for (;;) {
        size_t n = 0;
        const uint8_t *s = p;
        while (p < end && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
            if (n > ((size_t)1 << 40))
                return false;
            n = n * 16 + (size_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
            p++;
        }
        if (p == s || !starts(p, end, "\r\n"))
            return false;
        p += 2;
        if (n == 0) {
            if (!starts(p, end, "\r\n"))
                return false;
            *pp = p + 2;
            return true;
        }
        if ((size_t)(end - p) < n + 2 || p[n] != '\r' || p[n + 1] != '\n')
            return false;
        p += n + 2;
    }
}

static void check_responses(const uint8_t *b, size_t n, const reqlist *reqs)
{
    const uint8_t *p = b, *end = b + n;
    size_t finals = 0;
    bool closed = false;
    while (p < end) {
        invariant(!closed, "bytes after a response that said Connection: close");
        const uint8_t *he = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
        invariant(he != NULL, "a response head is cut short");
        invariant(starts(p, he, "HTTP/1.1 ") && he - p >= 13, "a response without a status line");
        int status = 0;
        for (int i = 9; i < 12; i++) {
            invariant(p[i] >= '0' && p[i] <= '9', "a status that is not three digits");
            status = status * 10 + (p[i] - '0');
        }
        invariant(p[12] == ' ' || p[12] == '\r', "a status line without a reason");
        invariant(status == 100 || (status >= 200 && status <= 599), "a status out of range");
        const uint8_t *line = memmem(p, (size_t)(he + 2 - p), "\r\n", 2);
        for (const uint8_t *q = p; q < line; q++)
            invariant(*q != '\n' && *q != 0, "a bare LF or NUL in a status line");
        long long cl = -1;
        bool chunked = false, close = false;
        p = line + 2;
        while (p < he + 2) {
            const uint8_t *e = memmem(p, (size_t)(he + 2 - p), "\r\n", 2);
            invariant(header_line(p, e, &cl, &chunked, &close), "a malformed response header");
            p = e + 2;
        }
        p = he + 4;
        invariant(!(chunked && cl >= 0), "a response with both a length and chunking");
        if (status < 200)
            continue; /* 100 Continue: the final response follows */
        bool head = finals < reqs->n && reqs->head[finals];
        finals++;
        if (status == 204 || status == 304) {
            invariant(!chunked, "a chunked body on a status that has none");
        } else if (chunked && head) {
            /* HEAD of a streamed answer: the framing it would have, no
             * body (error pages, the only answers the acceptor may give
             * before it knows the method, carry a length). */
        } else if (chunked) {
            invariant(chunked_body(&p, end), "a malformed chunked body");
        } else if (cl >= 0) {
            /* HEAD gets the length without the body, but an answer the
             * acceptor gave before it knew the method carries a body. */
            bool skip = head && (p == end || starts(p, end, "HTTP/1.1 "));
            if (!skip) {
                invariant(end - p >= cl, "a body shorter than its Content-Length");
                p += cl;
            }
        } else if (!head) {
            invariant(close, "a body without length, chunking or Connection: close");
            p = end;
        }
        closed = close;
    }
    invariant(finals <= reqs->n + 1, "more responses than requests");
}

/* ---- one input ------------------------------------------------------------ */

static bool acceptor_idle(bool seen)
{
    sandlet_conn *c = g.srv.conns;
    if (!c)
        return seen;
    if (!sandlet_conn_idle(c))
        return false;
    uv_os_fd_t fd;
    int avail = 0;
    if (sandlet_conn_socket(c, &fd) < 0 || ioctl(fd, FIONREAD, &avail) < 0)
        return true;
    return avail == 0;
}

static bool worker_idle(void)
{
    const sandlet_worker *w = &g.srv.gen->pool_of[0]->workers[0];
    return g.pending == 0 && !g.gathering && w->state == W_IDLE && w->rcount == 0;
}

static void run_input(const uint8_t *data, size_t size)
{
    g.cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    invariant(g.cfd >= 0, "no client socket");
    invariant(connect(g.cfd, (struct sockaddr *)&g.addr, sizeof(g.addr)) == 0,
              "cannot connect to the acceptor");
    size_t off = 0;
    while (off < size) {
        ssize_t n = send(g.cfd, data + off, size - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the acceptor already closed: what it said is read below */
        off += (size_t)n;
    }
    g.ceof = false;
    sandlet_buf_reset(&g.cin);
    uv_poll_init(&g.loop, &g.cpoll, g.cfd);
    uv_poll_start(&g.cpoll, UV_READABLE | UV_DISCONNECT, on_client);
    bool seen = false, half_closed = false;
    for (;;) {
        seen = seen || g.srv.conns != NULL;
        if (!half_closed && acceptor_idle(seen)) {
            shutdown(g.cfd, SHUT_WR);
            half_closed = true;
        }
        if (half_closed && g.ceof && g.srv.nconns == 0 && worker_idle())
            break;
        uv_run(&g.loop, UV_RUN_ONCE);
    }
    uv_close((uv_handle_t *)&g.cpoll, NULL);
    uv_run(&g.loop, UV_RUN_NOWAIT);
    /* A reset, not a FIN: no TIME_WAIT left behind per input. */
    struct linger lg = {1, 0};
    setsockopt(g.cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(g.cfd);
    g.cfd = -1;

    /* FUZZ_HTTP_DUMP=1: what the client received, to read a finding. */
    if (getenv("FUZZ_HTTP_DUMP"))
        fprintf(stderr, "---- %zu bytes received:\n%.*s\n----\n", g.cin.len, (int)g.cin.len,
                g.cin.data ? (const char *)g.cin.data : "");
    static reqlist reqs;
    list_requests(data, size, &reqs);
    check_responses(g.cin.data ? g.cin.data : (const uint8_t *)"", g.cin.len, &reqs);
}

/* ---- set-up ------------------------------------------------------------------ */

static void write_file(const char *name, const char *content, size_t len)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", g.root, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    invariant(fd >= 0 && write(fd, content, len) == (ssize_t)len && close(fd) == 0,
              "cannot write the docroot");
}

static void setup(void)
{
    sandlet_log_set_level(SANDLET_LOG_ERROR);
    strcpy(g.root, "/tmp/sandlet-fuzz-http-XXXXXX");
    invariant(mkdtemp(g.root) != NULL, "cannot make the docroot");
    write_file("index.html", "<!DOCTYPE html>\n<title>fuzz</title>\n", 36);
    write_file("a.txt", "hello\n", 6);
    static char big[300 * 1024];
    memset(big, 'b', sizeof(big));
    write_file("big.bin", big, sizeof(big));
    char sub[128];
    snprintf(sub, sizeof(sub), "%s/sub", g.root);
    invariant(mkdir(sub, 0755) == 0, "cannot make the docroot");
    write_file("sub/index.html", "sub\n", 4);

    char text[1024];
    int n = snprintf(text, sizeof(text),
                     "listen 127.0.0.1:0;\n"
                     "docroot %s;\n"
                     "status-page /status;\n"
                     "max-header-size 16k;\n"
                     "max-target-length 2k;\n"
                     "max-body-size 64k;\n"
                     "sandbox app { workers 1; pipeline 4; queue 16; queue-timeout 2000; }\n"
                     "servlet /app/* { library /nonexistent/app.so; sandbox app; }\n"
                     "servlet /small { library /nonexistent/small.so; sandbox app; "
                     "max-body-size 16; }\n",
                     g.root);
    invariant(n > 0 && (size_t)n < sizeof(text), "configuration too long");
    char err[512];
    sandlet_conf *conf;
    if (sandlet_conf_parse(text, (size_t)n, "fuzz.conf", "/", &conf, err, sizeof(err)) < 0) {
        fprintf(stderr, "fuzz_http: %s\n", err);
        abort();
    }
    invariant(uv_loop_init(&g.loop) == 0, "no loop");
    /* First of the prepare handles: the last to run (on_bells). */
    uv_prepare_init(&g.loop, &g.bells);
    uv_prepare_start(&g.bells, on_bells);
    uv_unref((uv_handle_t *)&g.bells);
    sandlet_server *srv = &g.srv;
    static const sandlet_server_hooks hooks = SANDLET_SERVER_HOOKS(sandlet_server_check_stopped);
    srv->loop = &g.loop;
    srv->hooks = &hooks;
    srv->conf = conf;
    srv->gen = sandlet_confgen_new(conf);
    invariant(srv->gen != NULL, "out of memory");
    srv->ctl = -1;
    /* One CPU, as the bench gives the server: the choice of worker packs
     * requests (pick.h), and reads the played worker's notes. */
    srv->cpus = 1;
    invariant(sandlet_files_open(srv) == 0, "cannot open the docroot");
    srv->access_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    sandlet_access_start(srv);
    sandlet_buf_init(&g.win, 0);
    sandlet_buf_init(&g.wout, 0);
    sandlet_buf_init(&g.reqhead, 0);
    sandlet_buf_init(&g.reqbody, 0);
    sandlet_buf_init(&g.cin, 0);

    g.addr.sin_family = AF_INET;
    g.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    uv_tcp_init(&g.loop, &g.listener.tcp);
    g.listener.tcp.data = &g.listener;
    g.listener.srv = srv;
    invariant(uv_tcp_bind(&g.listener.tcp, (struct sockaddr *)&g.addr, 0) == 0, "cannot bind");
    int len = sizeof(g.addr);
    uv_tcp_getsockname(&g.listener.tcp, (struct sockaddr *)&g.addr, &len);
    invariant(uv_listen((uv_stream_t *)&g.listener.tcp, 64, sandlet_http_accept) == 0,
              "cannot listen");
    g.listeners[0] = &g.listener;
    srv->listeners = g.listeners;
    srv->nlisteners = 1;
    invariant(sandlet_pools_start(srv) == 0, "cannot start the sandbox");
    sandlet_server_caps(srv);
    start_worker(srv);
    /* Until the played worker said READY. */
    while (!worker_idle())
        uv_run(&g.loop, UV_RUN_ONCE);
}

static void *loop_thread(void *arg)
{
    (void)arg;
    setup();
    sem_post(&g.done);
    for (;;) {
        sem_wait(&g.go);
        run_input(g.data, g.size);
        sem_post(&g.done);
    }
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    pthread_attr_t attr;
    invariant(sem_init(&g.go, 0, 0) == 0 && sem_init(&g.done, 0, 0) == 0, "no semaphores");
    invariant(pthread_attr_init(&attr) == 0 && pthread_attr_setstacksize(&attr, STACK_SIZE) == 0,
              "no thread attributes");
    invariant(pthread_create(&g.thread, &attr, loop_thread, NULL) == 0, "no loop thread");
    pthread_attr_destroy(&attr);
    sem_wait(&g.done);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g.data = data;
    g.size = size;
    sem_post(&g.go);
    while (sem_wait(&g.done) < 0 && errno == EINTR)
        ;
    return 0;
}

/*
 * http.c - client connections: read, parse with llhttp, answer.
 *
 * It is the bottom of the acceptor's stack: it calls nothing above it
 * but through hooks (conn.h).  The server's, set once by main.c, route a
 * parsed head, dispatch a request, log an answer, and note a connection
 * gone; those the router gives each request (dispatch.c) say that output
 * drained, that the client left, that more body came, and how much of it
 * waits past the connection.  It includes server.h, never acceptor.h.
 *
 * One request per connection is in progress at a time: parsing pauses at
 * the end of each message and resumes when its response is queued, which
 * keeps pipelined responses in order whatever served them.  This file is
 * the only one that writes HTTP; a worker's status and headers are
 * re-validated here before they reach a client, so no servlet can split a
 * response or corrupt the connection.  It must never block and never trust
 * a length it did not check.
 */
#include "config.h"

#include "loop/conn_private.h"
#include "lib/servlet.h"
#include "common/log.h"
#include "loop/static.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK ((size_t)64 * 1024)
/* Unparsed input held while a request is served (pipelining). */

typedef struct wreq {
    uv_write_t req;
    sandlet_conn *c;
    size_t len;
    char data[];
} wreq;

/* The per-request part of a connection that an idle one does not keep. */
static const llhttp_settings_t *parser_settings(void);

/* The per-request part of a connection that an idle one does not keep,
 * made when a request's first bytes are parsed; its parser starts fresh,
 * as it is at the end of any request. */
/* A connection going idle gives back its request object and header
 * buffers (release_idle), so that 10,000 idle connections hold next to
 * nothing.  Most come back at once for the connection's next request:
 * the last SPARE of each are kept here rather than freed and allocated
 * again, which cost a keep-alive request three mallocs, a realloc and
 * four frees, a tenth of the acceptor's instructions per hello request.
 * Bounded, and only buffers of at most SPARE_CAP bytes. */
#define SPARE     64
#define SPARE_CAP ((size_t)4096)
enum { SPARE_HEAD, SPARE_HDRS, SPARE_BUFS };
typedef struct spare_mem {
    uint8_t *data;
    size_t cap;
} spare_mem;
struct sandlet_http_spares {
    sandlet_conn_req *rq[SPARE];
    unsigned nrq;
    spare_mem buf[SPARE_BUFS][SPARE];
    unsigned nbuf[SPARE_BUFS];
};

static struct sandlet_http_spares *spares(sandlet_server *srv)
{
    /* Without it (out of memory) everything is allocated as it comes. */
    if (!srv->http_spares)
        srv->http_spares = calloc(1, sizeof(*srv->http_spares));
    return srv->http_spares;
}

static void spare_buf_put(sandlet_server *srv, sandlet_buf *b, unsigned kind)
{
    struct sandlet_http_spares *s = srv->http_spares;
    if (s && b->data && b->cap <= SPARE_CAP && s->nbuf[kind] < SPARE) {
        s->buf[kind][s->nbuf[kind]++] = (spare_mem){b->data, b->cap};
        sandlet_buf_init(b, b->limit);
        return;
    }
    sandlet_buf_free(b);
}

/* An empty buffer gets a kept one's memory, never more than its limit
 * allows (the fast path of a reserve checks only the capacity). */
static void spare_buf_take(sandlet_server *srv, sandlet_buf *b, unsigned kind)
{
    struct sandlet_http_spares *s = srv->http_spares;
    if (!s || b->data || s->nbuf[kind] == 0)
        return;
    spare_mem *m = &s->buf[kind][s->nbuf[kind] - 1];
    if (b->limit && m->cap > b->limit)
        return;
    b->data = m->data;
    b->cap = m->cap;
    s->nbuf[kind]--;
}

/* A clock read costs 20-40 ns in a virtual machine, and a request was
 * stamped three times (its head, its end, the pool's histogram).  Every
 * request a turn handles arrived when its poll returned, so one read per
 * turn is as true: it is taken at the first stamp after the poll (or
 * after the I/O callbacks, for the timers), and forgotten at both ends. */
static void turn_over(sandlet_server *srv)
{
    srv->turn_ns = 0;
}

static void turn_before_poll(uv_prepare_t *h)
{
    turn_over(h->data);
}

static void turn_after_io(uv_check_t *h)
{
    turn_over(h->data);
}

void sandlet_http_clock_start(sandlet_server *srv)
{
    srv->turn_ns = 0;
    srv->turn_before_poll.data = srv;
    srv->turn_after_io.data = srv;
    uv_prepare_init(srv->loop, &srv->turn_before_poll);
    uv_check_init(srv->loop, &srv->turn_after_io);
    uv_prepare_start(&srv->turn_before_poll, turn_before_poll);
    uv_check_start(&srv->turn_after_io, turn_after_io);
}

uint64_t sandlet_turn_ns(sandlet_server *srv)
{
    if (!srv->turn_ns)
        srv->turn_ns = uv_hrtime();
    return srv->turn_ns;
}

void sandlet_http_spares_free(sandlet_server *srv)
{
    struct sandlet_http_spares *s = srv->http_spares;
    if (!s)
        return;
    for (unsigned i = 0; i < s->nrq; i++)
        free(s->rq[i]);
    for (unsigned k = 0; k < SPARE_BUFS; k++)
        for (unsigned i = 0; i < s->nbuf[k]; i++)
            free(s->buf[k][i].data);
    free(s);
    srv->http_spares = NULL;
}

static sandlet_conn_req *req_new(sandlet_conn *c)
{
    struct sandlet_http_spares *s = spares(c->srv);
    sandlet_conn_req *rq;
    if (s && s->nrq) {
        rq = s->rq[--s->nrq];
        memset(rq, 0, sizeof(*rq));
    } else if (!(rq = calloc(1, sizeof(*rq)))) {
        return NULL;
    }
    spare_buf_take(c->srv, &c->head, SPARE_HEAD);
    spare_buf_take(c->srv, &c->hdrs, SPARE_HDRS);
    rq->file.fd = -1;
    llhttp_init(&rq->parser, HTTP_REQUEST, parser_settings());
    rq->parser.data = c;
    return rq;
}

/* Appends v in decimal. */
static void put_uint(sandlet_buf *b, uint64_t v)
{
    char d[20];
    size_t n = sizeof(d);
    do {
        d[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n);
    sandlet_buf_put(b, d + n, sizeof(d) - n);
}

/* "METHOD TARGET HTTP/M.N" into out (size bytes, cut to fit, NUL-ended),
 * for the logs; built by hand, as it is made for every request. */
static void reqline_set(char *out, size_t size, const char *method, const char *target,
                        size_t target_len, unsigned major, unsigned minor)
{
    const char *parts[] = {method, " ", target, " HTTP/"};
    size_t lens[] = {strlen(method), 1, target_len, 6};
    size_t at = 0;
    for (size_t i = 0; i < 4; i++) {
        size_t k = lens[i] < size - 1 - at ? lens[i] : size - 1 - at;
        memcpy(out + at, parts[i], k);
        at += k;
    }
    if (at + 3 < size) {
        out[at++] = (char)('0' + major % 10);
        out[at++] = '.';
        out[at++] = (char)('0' + minor % 10);
    }
    out[at] = '\0';
}
static sandlet_hdr_ref *hdr_refs(const sandlet_conn *c)
{
    return (sandlet_hdr_ref *)(void *)c->hdrs.data;
}
static llhttp_settings_t settings;
static bool settings_ready;

static void conn_close(sandlet_conn *c);
static void process_input(sandlet_conn *c);
static void set_phase(sandlet_conn *c, enum sandlet_conn_phase phase);

/* ---- small helpers ----------------------------------------------------- */

/* The hooks of a connection whose request nobody routed yet. */
static const sandlet_conn_hooks no_hooks = {0};

/* The request will not be answered: whoever holds it lets it go. */
static void gone(sandlet_conn *c)
{
    if (c->hooks->gone)
        c->hooks->gone(c);
}

static void body_more(sandlet_conn *c)
{
    if (c->hooks->body_more)
        c->hooks->body_more(c);
}

/* Body bytes queued past the connection, not yet written on. */
static size_t backlog(const sandlet_conn *c)
{
    return c->hooks->backlog ? c->hooks->backlog(c) : 0;
}

/* The Date of every response: formatted once per second. */
static const char *http_date(sandlet_server *srv)
{
    time_t now = time(NULL);
    if (now != srv->date_sec) {
        sandlet_static_http_date(now, srv->date, sizeof(srv->date));
        srv->date_sec = now;
    }
    return srv->date;
}

static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: break;
    }
    if (status < 200)
        return "Informational";
    if (status < 300)
        return "Success";
    if (status < 400)
        return "Redirection";
    if (status < 500)
        return "Client Error";
    return "Server Error";
}

static bool body_allowed(int status)
{
    return status >= 200 && status != 204 && status != 304;
}

size_t sandlet_conn_write_backlog(const sandlet_conn *c)
{
    /* Each queued write is an allocation of its own (a wreq): a servlet
     * that flushes a byte at a time to a client that does not read would
     * hold 200 bytes of them per byte of data under a bound on bytes. */
    return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp) +
           (size_t)c->pending_writes * sizeof(wreq);
}

/* ---- what the connection tells the code answering on it (conn.h) -------- */

sandlet_server *sandlet_conn_server(const sandlet_conn *c)
{
    return c->srv;
}

const char *sandlet_conn_peer(const sandlet_conn *c)
{
    return c->peer;
}

const char *sandlet_conn_target(const sandlet_conn *c, size_t *len, size_t *path_len)
{
    const char *t = c->target_len ? (const char *)c->head.data + c->target : "";
    const char *q = memchr(t, '?', c->target_len);
    *len = c->target_len;
    if (path_len)
        *path_len = q ? (size_t)(q - t) : c->target_len;
    return t;
}

int sandlet_conn_method(const sandlet_conn *c)
{
    return c->rq ? c->rq->parser.method : HTTP_GET;
}

const char *sandlet_conn_method_name(const sandlet_conn *c)
{
    return llhttp_method_name((llhttp_method_t)sandlet_conn_method(c));
}

void sandlet_conn_version(const sandlet_conn *c, unsigned *major, unsigned *minor)
{
    *major = c->http_major;
    *minor = c->http_minor;
}

bool sandlet_conn_head_only(const sandlet_conn *c)
{
    return c->head_only;
}

void sandlet_conn_outcome(const sandlet_conn *c, int *status, uint64_t *bytes, uint64_t *started)
{
    *status = c->resp_status;
    *bytes = c->resp_bytes;
    *started = c->started;
}

void sandlet_conn_sending(sandlet_conn *c)
{
    c->state = CONN_SENDING;
}

sandlet_file_send *sandlet_conn_file(sandlet_conn *c)
{
    /* Made with the request's head (on_headers_complete), before any
     * route can send a file. */
    return &c->rq->file;
}

const char *sandlet_conn_reqline(const sandlet_conn *c)
{
    return c->rq ? c->rq->reqline : "";
}

const sandlet_servlet_conf *sandlet_conn_servlet(const sandlet_conn *c)
{
    return c->rt.servlet;
}

int sandlet_conn_docroot_fd(const sandlet_conn *c)
{
    return c->rt.docroot_fd;
}

void sandlet_conn_request_view(const sandlet_conn *c, sandlet_request_view *v)
{
    const char *method = sandlet_conn_method_name(c);
    *v = (sandlet_request_view){
        .method = method,
        .method_len = strlen(method),
        .target = c->target_len ? (const char *)c->head.data + c->target : "",
        .target_len = c->target_len,
        .peer = c->peer,
        .peer_len = strlen(c->peer),
        .reqline = sandlet_conn_reqline(c),
        .http_major = c->http_major,
        .http_minor = c->http_minor,
        .nheaders = c->nhdrs,
        .body = c->body.data,
        .body_len = c->body.len,
        .body_open = c->body_stream && c->phase == PHASE_BODY,
        .body_max = c->body_max,
        .servlet = c->rt.servlet,
        .servlet_local = c->rt.servlet ? c->rt.servlet_local : 0,
        .page = c->plink.page,
    };
}

void sandlet_conn_header_at(const sandlet_conn *c, unsigned i, const char **name, size_t *name_len,
                            const char **value, size_t *value_len)
{
    const char *head = (const char *)c->head.data;
    const sandlet_hdr_ref *h = &hdr_refs(c)[i];
    *name = head + h->name;
    *name_len = h->name_len;
    *value = head + h->value;
    *value_len = h->value_len;
}

sandlet_page_link *sandlet_conn_page_link(sandlet_conn *c)
{
    return &c->plink;
}

sandlet_pool_link *sandlet_conn_pool_link(sandlet_conn *c)
{
    return &c->link;
}

const sandlet_pool_link *sandlet_conn_pool_link_const(const sandlet_conn *c)
{
    return &c->link;
}

bool sandlet_conn_idle(const sandlet_conn *c)
{
    return c->state == CONN_READING && c->in.len == 0 && c->pending_writes == 0;
}

int sandlet_conn_socket(const sandlet_conn *c, uv_os_fd_t *fd)
{
    return uv_fileno((const uv_handle_t *)&c->tcp, fd);
}

void sandlet_conn_job_begin(sandlet_conn *c)
{
    c->pending_writes++;
}

/* ---- writing ------------------------------------------------------------ */

static void on_closed(uv_handle_t *h);

static void close_handles(sandlet_conn *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->timer))
        uv_close((uv_handle_t *)&c->timer, on_closed);
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void after_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    sandlet_conn *c = req->data;
    free(req);
    close_handles(c);
}

/* Ends the connection once everything queued has been written: FIN first,
 * so that the client reads the whole last response. */
static void finish_close(sandlet_conn *c)
{
    if (c->pending_writes || uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    uv_shutdown_t *req = malloc(sizeof(*req));
    if (req) {
        req->data = c;
        if (uv_shutdown(req, (uv_stream_t *)&c->tcp, after_shutdown) == 0)
            return;
        free(req);
    }
    close_handles(c);
}

static void on_timer(uv_timer_t *t);

/* One timer per connection serves both deadlines (read_at, send_at: a
 * handle is 152 bytes, a tenth of an idle connection): it is set to the
 * earlier of the two, and on_timer sees which has passed. */
static void timer_arm(sandlet_conn *c)
{
    uint64_t at = c->read_at;
    if (c->send_at && (!at || c->send_at < at))
        at = c->send_at;
    if (uv_is_closing((uv_handle_t *)&c->timer))
        return;
    /* A deadline that moved later, or went, leaves the timer as it is:
     * it fires early, finds nothing due and is set again here.  Every
     * request of a keep-alive connection moves its deadlines later, and
     * moving a timer in libuv's heap was 2.6% of the acceptor's time. */
    bool active = uv_is_active((uv_handle_t *)&c->timer);
    if (!at || (active && at >= c->armed_at))
        return;
    uint64_t now = uv_now(c->srv->loop);
    c->armed_at = at;
    uv_timer_start(&c->timer, on_timer, at > now ? at - now : 0, 0);
}

/* send-timeout from now (0 stops it): the client must take some of
 * what waits for it by then. */
static void send_deadline(sandlet_conn *c, bool on)
{
    c->send_at = on ? uv_now(c->srv->loop) + c->srv->conf->send_timeout : 0;
    timer_arm(c);
}

/* The client took nothing of what waits for it for send-timeout: it
 * stalled or left without a word.  Writes that will never finish cannot
 * hold the connection (nor the worker streaming to it), so the socket is
 * closed at once rather than shut down after them. */
static void on_send_timeout(sandlet_conn *c)
{
    if (c->pending_writes == 0 || uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    if (c->rq && c->rq->file.job) {
        /* The thread pool holds c until its sendfile is back (it does not
         * block: the socket is non-blocking); look again then. */
        send_deadline(c, true);
        return;
    }
    sandlet_warn("%s: took none of its response for %u ms (send-timeout); closing%s%s", c->peer,
                 c->srv->conf->send_timeout, sandlet_conn_reqline(c)[0] ? " during " : "",
                 sandlet_conn_reqline(c));
    if (c->state != CONN_CLOSING)
        conn_close(c);
    close_handles(c);
}

static void after_write(uv_write_t *req, int status)
{
    wreq *w = (wreq *)req;
    sandlet_conn *c = w->c;
    free(w);
    c->pending_writes--;
    /* Progress: the client gets another send-timeout for what is left. */
    if (c->pending_writes == 0)
        send_deadline(c, false);
    else if (status == 0)
        send_deadline(c, true);
    if (status < 0 && c->state != CONN_CLOSING) {
        conn_close(c);
        return;
    }
    if (c->state == CONN_CLOSING) {
        finish_close(c);
        return;
    }
    if (sandlet_conn_write_backlog(c) < SANDLET_WRITE_HIGH_WATER / 2)
        if (c->hooks->drained)
            c->hooks->drained(c);
    if (c->out_blocked && !c->parsing && c->state == CONN_READING &&
        sandlet_conn_write_backlog(c) < SANDLET_WRITE_HIGH_WATER / 2) {
        c->out_blocked = false;
        set_phase(c, PHASE_IDLE);
        process_input(c);
    }
}

bool sandlet_conn_job_done(sandlet_conn *c)
{
    c->pending_writes--;
    if (c->state == CONN_CLOSING) {
        if (c->peer_closed && c->pending_writes == 0)
            close_handles(c);
        else
            finish_close(c);
        return false;
    }
    return true;
}

/* Pieces this small are gathered into one buffer and sent with send(2):
 * copying a hello's head and body costs less than a second iovec. */
#define SEND_GATHER 1024

/* Hands the pieces to the socket while nothing is queued: what it took,
 * 0 when it would block, or a negative errno.  send/sendmsg rather than
 * libuv's writev, whose path through the file layer cost 2% of a hello
 * request here.  No queue is bypassed: libuv only writes on its own when
 * its queue holds something, and ours is empty. */
static ssize_t send_now(sandlet_conn *c, const uint8_t *piece[3], const size_t plen[3], size_t len)
{
    uv_os_fd_t fd;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) < 0)
        return -EBADF;
    struct iovec iov[3];
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (plen[i])
            iov[n++] = (struct iovec){.iov_base = (void *)(uintptr_t)piece[i], .iov_len = plen[i]};
    uint8_t gather[SEND_GATHER];
    if (n > 1 && len <= sizeof(gather)) {
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            memcpy(gather + at, iov[i].iov_base, iov[i].iov_len);
            at += iov[i].iov_len;
        }
        iov[0] = (struct iovec){.iov_base = gather, .iov_len = len};
        n = 1;
    }
    ssize_t rc;
    do {
        if (n == 1)
            rc = send(fd, iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        else
            rc = sendmsg(fd, &(struct msghdr){.msg_iov = iov, .msg_iovlen = (size_t)n},
                         MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    return rc;
}

/* Sends the concatenation of up to three pieces.  When nothing is queued
 * the socket takes them straight from the caller's buffers (one system
 * call, no allocation: the common case of a small response); only what
 * the kernel did not take is copied and queued. */
int sandlet_conn_write(sandlet_conn *c, const void *a, size_t alen, const void *b, size_t blen,
                       const void *d, size_t dlen)
{
    if (c->state == CONN_CLOSING)
        return -ECONNRESET;
    size_t len = alen + blen + dlen;
    if (len == 0)
        return 0;
    if (len > UINT_MAX)
        return -EMSGSIZE;
    const uint8_t *piece[3] = {a, b, d};
    size_t plen[3] = {alen, blen, dlen};
    size_t done = 0;
    if (c->pending_writes == 0) {
        ssize_t rc = send_now(c, piece, plen, len);
        if (rc < 0)
            return (int)rc;
        done = (size_t)rc;
        if (done == len)
            return 0;
    }
    wreq *w = malloc(sizeof(*w) + (len - done));
    if (!w)
        return -ENOMEM;
    w->c = c;
    w->len = len - done;
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        if (done >= plen[i]) {
            done -= plen[i];
            continue;
        }
        memcpy(w->data + at, piece[i] + done, plen[i] - done);
        at += plen[i] - done;
        done = 0;
    }
    uv_buf_t buf = uv_buf_init(w->data, (unsigned)w->len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, after_write);
    if (rc < 0) {
        free(w);
        return rc;
    }
    if (c->pending_writes++ == 0)
        send_deadline(c, true);
    return 0;
}

/* ---- timeouts ------------------------------------------------------------ */

static void simple_response(sandlet_conn *c, int status, bool close);

/* The request is at its pool and its body still arrives from the client. */
static bool body_streaming(const sandlet_conn *c)
{
    return c->body_dispatched && c->phase == PHASE_BODY && c->state != CONN_CLOSING;
}

/* A streamed body that will not end (timeout, too large, malformed): the
 * pool aborts it at the worker and drops the worker's answer, the client
 * hears status if nothing was sent yet, and the connection closes either
 * way (the rest of the body is not read). */
static void stream_fail(sandlet_conn *c, int status)
{
    gone(c);
    c->keep_alive = false;
    sandlet_conn_fail(c, status);
}

static void on_timeout(sandlet_conn *c)
{
    if (body_streaming(c)) {
        /* The worker waits for the rest: it gets END|ABORT and is free
         * as soon as its servlet returns. */
        sandlet_debug("%s: body timeout while streaming to a worker; answering 408", c->peer);
        stream_fail(c, 408);
        return;
    }
    if (c->state != CONN_READING)
        return;
    if (c->phase == PHASE_IDLE) {
        conn_close(c);
        return;
    }
    sandlet_debug("%s: %s timeout; answering 408", c->peer,
                  c->phase == PHASE_BODY ? "body" : "header");
    c->state = CONN_WAITING;
    simple_response(c, 408, true);
}

/* The header timeout runs from the first byte of a request to the end of
 * its head and is not restarted by progress, so that a client trickling
 * bytes (slowloris) cannot hold a connection; the body timeout bounds the
 * gap between reads; the idle timeout bounds an unused keep-alive. */
static void set_phase(sandlet_conn *c, enum sandlet_conn_phase phase)
{
    uint64_t ms = 0;
    switch (phase) {
    case PHASE_IDLE: ms = c->srv->conf->keepalive_timeout; break;
    case PHASE_HEADERS: ms = c->srv->conf->header_timeout; break;
    case PHASE_BODY: ms = c->srv->conf->body_timeout; break;
    case PHASE_DONE: break;
    }
    c->phase = phase;
    c->read_at = ms ? uv_now(c->srv->loop) + ms : 0;
    timer_arm(c);
}

static void on_timer(uv_timer_t *t)
{
    sandlet_conn *c = t->data;
    uint64_t now = uv_now(c->srv->loop);
    if (c->send_at && now >= c->send_at) {
        c->send_at = 0;
        on_send_timeout(c);
    } else if (c->read_at && now >= c->read_at) {
        c->read_at = 0;
        on_timeout(c);
    }
    timer_arm(c);
}

/* ---- request lifecycle --------------------------------------------------- */

/* An idle connection keeps no buffer: what a request needs is allocated
 * as it comes (the first pieces from malloc's caches, as the connection's
 * last request gave them back), so that thousands of idle keep-alive
 * connections cost their struct and the kernel's socket only. */
static void release_idle(sandlet_conn *c)
{
    /* Not while a file's descriptor or thread-pool job is in it. */
    if (c->rq && c->rq->file.fd < 0 && !c->rq->file.job) {
        struct sandlet_http_spares *s = c->srv->http_spares;
        if (s && s->nrq < SPARE)
            s->rq[s->nrq++] = c->rq;
        else
            free(c->rq);
        c->rq = NULL;
    }
    spare_buf_put(c->srv, &c->head, SPARE_HEAD);
    spare_buf_put(c->srv, &c->hdrs, SPARE_HDRS);
    sandlet_buf_free(&c->body);
    if (!c->in_borrowed && c->in.len == 0)
        sandlet_buf_free(&c->in);
}

/* Lets go of what the request's route held. */
static void unroute(sandlet_conn *c)
{
    void *held = c->rt.held;
    c->rt = (sandlet_conn_routed){.docroot_fd = -1};
    if (held)
        c->srv->hooks->release(held);
}

void sandlet_conn_route(sandlet_conn *c, const sandlet_conn_routed *r,
                        const sandlet_conn_hooks *hooks)
{
    void *held = c->rt.held;
    c->rt = *r;
    c->hooks = hooks ? hooks : &no_hooks;
    if (held)
        c->srv->hooks->release(held);
}

const sandlet_conn_routed *sandlet_conn_routing(const sandlet_conn *c)
{
    return &c->rt;
}

const char *sandlet_conn_host(const sandlet_conn *c, size_t *len)
{
    if (c->authority_len) {
        *len = c->authority_len;
        return (const char *)c->head.data + c->authority;
    }
    const char *host = sandlet_conn_header(c, "host");
    *len = host ? strlen(host) : 0;
    return host;
}

uint64_t sandlet_conn_body_total(const sandlet_conn *c)
{
    return c->body_total;
}

bool sandlet_conn_sending_file(const sandlet_conn *c)
{
    return c->rq && c->rq->file.fd >= 0;
}

static void reset_request(sandlet_conn *c)
{
    sandlet_buf_reset(&c->head);
    sandlet_buf_reset(&c->body);
    /* A large body's buffer is not kept for the small ones after it. */
    sandlet_buf_shrink(&c->body, SANDLET_BODY_WINDOW);
    c->body_stream = c->body_dispatched = c->body_paused = false;
    c->body_total = 0;
    c->nhdrs = c->nhead = c->nterminated = 0;
    sandlet_buf_reset(&c->hdrs);
    c->target = c->target_len = 0;
    c->authority = c->authority_len = 0;
    c->in_value = false;
    c->nhost = 0;
    c->expect_continue = false;
    unroute(c);
    c->error_status = 0;
    sandlet_pool_link_reset(&c->link);
    sandlet_page_link_reset(&c->plink);
    c->chunked = false;
    c->head_only = false;
    if (c->rq)
        c->rq->reqline[0] = '\0';
}

/* The response to the current request is fully queued. */
void sandlet_conn_request_done(sandlet_conn *c)
{
    if (c->state == CONN_CLOSING)
        return;
    c->srv->hooks->done(c);
    c->resp_status = 0;
    c->resp_bytes = 0;
    c->started = sandlet_turn_ns(c->srv);
    reset_request(c);
    /* A client that half-closed after pipelining (printf ... | nc) still
     * gets an answer to every request it sent whole: process_input closes
     * once none is left. */
    if (!c->keep_alive || c->srv->stopping || (c->peer_closed && c->in.len == 0)) {
        conn_close(c);
        return;
    }
    c->state = CONN_READING;
    set_phase(c, PHASE_IDLE);
    if (c->in.len == 0)
        release_idle(c);
    if (c->rq)
        llhttp_resume(&c->rq->parser);
    /* Answered while process_input dispatched it (a file, an error page,
     * the status page...): its loop takes the next pipelined request.
     * Calling it from here would nest one stack frame per request, and a
     * client pipelining thousands would overflow the stack. */
    if (!c->parsing)
        process_input(c);
}

/* The Connection line, the one place that decides it: HTTP/1.1 keeps the
 * connection unless told otherwise, HTTP/1.0 only when asked, and then the
 * answer must say so or the client takes the close as the end. */
static const char *connection_line(const sandlet_conn *c, size_t *len)
{
    if (!c->keep_alive) {
        *len = 19;
        return "Connection: close\r\n";
    }
    if (c->http_minor == 0) {
        *len = 24;
        return "Connection: keep-alive\r\n";
    }
    *len = 0;
    return "";
}

int sandlet_conn_respond(sandlet_conn *c, int status, const char *extra, size_t extra_len,
                         uint64_t length, const void *body, size_t body_len)
{
    /* An answer before the end of a streamed body: the rest of it is not
     * read, so the connection cannot carry another request. */
    if (c->body_stream && c->phase == PHASE_BODY)
        c->keep_alive = false;
    /* 1xx, 204 and 304 have no body and no framing lines (RFC 9110 8.6;
     * a 304 may repeat the 200's length, which saying none also meets). */
    if (!body_allowed(status)) {
        length = SANDLET_LENGTH_NONE;
        body_len = 0;
    }
    /* One loop thread, and the head is copied out (or written) before the
     * function returns: one buffer serves every response, no malloc. */
    static sandlet_buf head = {.limit = SANDLET_MAX_RESPONSE_HEAD};
    sandlet_buf *h = &head;
    sandlet_buf_reset(h);
    /* Written piece by piece, not with snprintf: the head of every
     * response goes through here (printf's machinery was 3% of a hello
     * request's acceptor time). */
    if (status < 100 || status > 999)
        return -EMSGSIZE;
    sandlet_buf_put(h, "HTTP/1.1 ", 9);
    put_uint(h, (uint64_t)status);
    sandlet_buf_put(h, " ", 1);
    const char *why = reason(status);
    sandlet_buf_put(h, why, strlen(why));
    sandlet_buf_put(h, "\r\nDate: ", 8);
    const char *date = http_date(c->srv);
    sandlet_buf_put(h, date, strlen(date));
    sandlet_buf_put(h, "\r\n" SANDLET_SERVER_HEADER, 2 + sizeof(SANDLET_SERVER_HEADER) - 1);
    sandlet_buf_put(h, extra, extra_len);
    c->chunked = false;
    if (length == SANDLET_LENGTH_UNKNOWN) {
        if (c->http_major == 1 && c->http_minor >= 1) {
            c->chunked = true;
            sandlet_buf_put(h, "Transfer-Encoding: chunked\r\n", 28);
        } else {
            /* HTTP/1.0 without a length: the end of the body is the close. */
            c->keep_alive = false;
        }
    } else if (length != SANDLET_LENGTH_NONE) {
        sandlet_buf_put(h, "Content-Length: ", 16);
        put_uint(h, length);
        sandlet_buf_put(h, "\r\n", 2);
    }
    size_t cl;
    const char *conn = connection_line(c, &cl);
    sandlet_buf_put(h, conn, cl);
    sandlet_buf_put(h, "\r\n", 2);
    if (h->error)
        return h->error;
    c->resp_status = status;
    if (length != SANDLET_LENGTH_UNKNOWN && length != SANDLET_LENGTH_NONE)
        c->resp_bytes = c->head_only ? 0 : length;
    return sandlet_conn_write(c, h->data, h->len, body, body_len, NULL, 0);
}

/* A response written by the acceptor itself: error pages, 404. */
static void simple_response(sandlet_conn *c, int status, bool close)
{
    char body[256];
    int blen =
        snprintf(body, sizeof(body), "<!DOCTYPE html>\n<title>%d %s</title>\n<h1>%d %s</h1>\n",
                 status, reason(status), status, reason(status));
    if (blen < 0 || (size_t)blen >= sizeof(body))
        blen = 0;
    if (close)
        c->keep_alive = false;
    char extra[128];
    int elen = snprintf(extra, sizeof(extra), "Content-Type: text/html; charset=utf-8\r\n%s",
                        status == 503 ? "Retry-After: 1\r\n" : "");
    if (elen < 0 || (size_t)elen >= sizeof(extra)) {
        conn_close(c);
        return;
    }
    if (sandlet_conn_respond(c, status, extra, (size_t)elen, (uint64_t)blen, body,
                             c->head_only ? 0 : (size_t)blen) < 0) {
        conn_close(c);
        return;
    }
    sandlet_conn_request_done(c);
}

void sandlet_conn_fail(sandlet_conn *c, int status)
{
    sandlet_pool_link_reset(&c->link);
    if (c->hooks->failed)
        c->hooks->failed(c);
    if (c->state == CONN_WAITING) {
        simple_response(c, status, false);
        return;
    }
    /* Part of a response went out: the only honest signal left is to cut
     * the connection, so that the client does not take it as complete. */
    conn_close(c);
}

/* ---- response from a worker --------------------------------------------- */

int sandlet_conn_response_head(sandlet_conn *c, const sandlet_wire_response *r, bool end)
{
    /* The worker's header lines, checked one by one; one buffer serves
     * every response (one loop thread, copied out before returning). */
    static sandlet_buf extra = {.limit = SANDLET_MAX_RESPONSE_HEAD};
    sandlet_buf *h = &extra;
    sandlet_buf_reset(h);
    sandlet_reader it = r->headers;
    uint16_t left = r->nheaders;
    sandlet_wire_header wh;
    while (sandlet_wire_headers_next(&it, &left, &wh)) {
        size_t nl = wh.name_len, vl = wh.value_len;
        if (!sandlet_lib_header_valid(wh.name, nl, wh.value, vl) ||
            sandlet_lib_header_reserved(wh.name, nl) ||
            (c->hooks->header_allowed && !c->hooks->header_allowed(c, wh.name, nl, wh.value, vl))) {
            return -EPROTO;
        }
        sandlet_buf_put(h, wh.name, nl);
        sandlet_buf_put(h, ": ", 2);
        sandlet_buf_put(h, wh.value, vl);
        sandlet_buf_put(h, "\r\n", 2);
    }
    if (h->error)
        return h->error == -EMSGSIZE ? -EPROTO : h->error;
    bool has_body = body_allowed(r->status);
    /* A length is only believed when the whole body is in this frame: a
     * worker that announced N bytes and sent another number would
     * otherwise desynchronise the client's connection. */
    bool bad_length =
        r->content_length != SANDLET_LENGTH_UNKNOWN && (!end || r->content_length != r->body_len);
    if (bad_length || (!has_body && r->body_len)) {
        return -EPROTO;
    }
    uint64_t length = !has_body ? SANDLET_LENGTH_NONE
                      : end     ? (uint64_t)r->body_len
                                : SANDLET_LENGTH_UNKNOWN;
    /* The common case, head and whole body in one write; a streamed body
     * (chunked) and HEAD go through sandlet_conn_response_body. */
    bool whole = has_body && end && !c->head_only;
    int rc = sandlet_conn_respond(c, (int)r->status, (const char *)h->data, h->len, length,
                                  whole ? r->body : NULL, whole ? r->body_len : 0);
    /* A head too large went nowhere: the client can still get a 502. */
    if (rc == -EMSGSIZE)
        return -EPROTO;
    c->state = CONN_SENDING;
    if (rc == 0 && has_body && !whole)
        return sandlet_conn_response_body(c, r->body, r->body_len, end);
    if (rc == 0 && end)
        sandlet_conn_request_done(c);
    return rc;
}

int sandlet_conn_response_body(sandlet_conn *c, const uint8_t *data, size_t len, bool end)
{
    int rc = 0;
    if (!c->head_only)
        c->resp_bytes += len;
    if (c->head_only) {
        /* Nothing to send for HEAD. */
    } else if (c->chunked) {
        char size[24];
        int n = len ? snprintf(size, sizeof(size), "%zx\r\n", len) : 0;
        const char *tail = end ? (len ? "\r\n0\r\n\r\n" : "0\r\n\r\n") : "\r\n";
        size_t tlen = end ? (len ? 7 : 5) : (len ? 2 : 0);
        rc = sandlet_conn_write(c, size, (size_t)n, data, len, tail, tlen);
    } else {
        rc = sandlet_conn_write(c, data, len, NULL, 0, NULL, 0);
    }
    if (rc == 0 && end)
        sandlet_conn_request_done(c);
    return rc;
}

/* ---- llhttp callbacks ---------------------------------------------------- */

static sandlet_conn *conn_of(llhttp_t *p)
{
    return p->data;
}

/* Appends to the request head, refusing past the header-size limit. */
static int head_put(sandlet_conn *c, const char *at, size_t len, int status)
{
    sandlet_buf_put(&c->head, at, len);
    if (c->head.error) {
        c->error_status = c->head.error == -EMSGSIZE ? status : 500;
        return -1;
    }
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    sandlet_conn *c = conn_of(p);
    reset_request(c);
    c->started = sandlet_turn_ns(c->srv);
    c->resp_status = 0;
    c->resp_bytes = 0;
    if (c->phase == PHASE_IDLE)
        set_phase(c, PHASE_HEADERS);
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    sandlet_conn *c = conn_of(p);
    if (c->target_len == 0)
        c->target = (uint32_t)c->head.len;
    if (len > c->srv->conf->max_target_length - c->target_len) {
        c->error_status = 414;
        return -1;
    }
    c->target_len += (uint32_t)len;
    return head_put(c, at, len, 431);
}

static int on_url_complete(llhttp_t *p)
{
    return head_put(conn_of(p), "", 1, 431);
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    sandlet_conn *c = conn_of(p);
    if (c->nhdrs == 0 || c->in_value) {
        if (c->nhdrs == SANDLET_MAX_HEADERS) {
            c->error_status = 431;
            return -1;
        }
        if (sandlet_buf_reserve(&c->hdrs, sizeof(sandlet_hdr_ref)) < 0) {
            c->error_status = 503;
            return -1;
        }
        sandlet_hdr_ref *h = &hdr_refs(c)[c->nhdrs++];
        c->hdrs.len += sizeof(*h);
        memset(h, 0, sizeof(*h));
        h->name = (uint32_t)c->head.len;
        c->in_value = false;
    }
    hdr_refs(c)[c->nhdrs - 1].name_len += (uint32_t)len;
    return head_put(c, at, len, 431);
}

static int on_header_field_complete(llhttp_t *p)
{
    sandlet_conn *c = conn_of(p);
    if (c->nhdrs == 0) {
        c->error_status = 400; /* a name that never began */
        return -1;
    }
    if (head_put(c, "", 1, 431) < 0)
        return -1;
    hdr_refs(c)[c->nhdrs - 1].value = (uint32_t)c->head.len;
    c->in_value = true;
    return 0;
}

/* Whether the len bytes at data end in a line feed followed by nothing
 * but blanks; `before` answers for the input before data when the blanks
 * reach back to its start. */
static bool ends_in_lf_ws(const char *data, size_t len, bool before)
{
    while (len > 0 && (data[len - 1] == ' ' || data[len - 1] == '\t'))
        len--;
    return len == 0 ? before : data[len - 1] == '\n';
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    sandlet_conn *c = conn_of(p);
    /* llhttp reports an empty value ("Accept-Encoding:") as an empty
     * piece just past its line end: nothing to add, and no fold. */
    if (len == 0)
        return 0;
    if (c->nhdrs == 0 || !c->in_value) {
        c->error_status = 400;
        return -1;
    }
    /* llhttp accepts obs-fold (a value continued on the next line after
     * blanks): as another piece of the value, or as the whole value when
     * the line of the name had none ("X:\r\n b").  Either way the piece
     * follows a line feed and blanks.  RFC 9112 lets a server reject it;
     * folded headers are a smuggling vector. */
    const char *start = (const char *)c->in.data;
    if (ends_in_lf_ws(start, (size_t)(at - start), c->lf_ws)) {
        c->error_status = 400;
        return -1;
    }
    hdr_refs(c)[c->nhdrs - 1].value_len += (uint32_t)len;
    return head_put(c, at, len, 431);
}

static int on_header_value_complete(llhttp_t *p)
{
    sandlet_conn *c = conn_of(p);
    if (head_put(c, "", 1, 431) < 0)
        return -1;
    c->nterminated = c->nhdrs;
    return 0;
}

/* Only fields whose name and value are both NUL-terminated are looked at:
 * a request refused in the middle of a field (a bad byte, a timeout) is
 * still logged, and its last field ends nowhere in particular.  Once the
 * head is complete, trailer fields are not headers. */
const char *sandlet_conn_header(const sandlet_conn *c, const char *name)
{
    unsigned n = c->nhead ? c->nhead : c->nterminated;
    for (unsigned i = 0; i < n; i++)
        if (strcasecmp((const char *)c->head.data + hdr_refs(c)[i].name, name) == 0)
            return (const char *)c->head.data + hdr_refs(c)[i].value;
    return NULL;
}

/* An absolute-form target ("http://host/path?q") is served as its path:
 * the target reference is narrowed to the origin form in place. */
static bool origin_form(sandlet_conn *c)
{
    const char *t = (const char *)c->head.data + c->target;
    if (t[0] == '/' || (t[0] == '*' && c->target_len == 1))
        return true;
    size_t skip;
    if (c->target_len > 7 && strncasecmp(t, "http://", 7) == 0)
        skip = 7;
    else if (c->target_len > 8 && strncasecmp(t, "https://", 8) == 0)
        skip = 8;
    else
        return false;
    const char *path = memchr(t + skip, '/', c->target_len - skip);
    if (!path)
        return false; /* "http://host" without a path: not worth guessing */
    uint32_t cut = (uint32_t)(path - t);
    /* userinfo@ has no place in an http(s) URI (RFC 9110 4.2.4). */
    if (memchr(t + skip, '@', cut - skip))
        return false;
    c->authority = c->target + (uint32_t)skip;
    c->authority_len = cut - (uint32_t)skip;
    c->target += cut;
    c->target_len -= cut;
    return true;
}

/* Every field from the first-th on must be one a worker's frame decoder
 * takes (a name of token characters, never empty; a value without control
 * bytes): one it refused would cost a worker its life.  llhttp alone lets
 * an empty name (": x") and blanks before the colon ("X : y") through, and
 * RFC 9112 wants a 400 for the latter. */
static bool fields_valid(const sandlet_conn *c, unsigned first)
{
    const char *hd = (const char *)c->head.data;
    for (unsigned i = first; i < c->nhdrs; i++) {
        const sandlet_hdr_ref *h = &hdr_refs(c)[i];
        if (!sandlet_lib_header_valid(hd + h->name, h->name_len, hd + h->value, h->value_len))
            return false;
    }
    return true;
}

static int on_headers_complete(llhttp_t *p)
{
    sandlet_conn *c = conn_of(p);
    c->http_major = llhttp_get_http_major(p);
    c->http_minor = llhttp_get_http_minor(p);
    c->keep_alive = llhttp_should_keep_alive(p);
    /* Transfer-Encoding in HTTP/1.0 is faulty framing (RFC 9112 6.1): an
     * intermediary of 1.0 may have framed it otherwise, so what follows
     * on the connection is never taken as a request (smuggling). */
    if (c->http_minor == 0 && (p->flags & F_TRANSFER_ENCODING))
        c->keep_alive = false;
    c->head_only = llhttp_get_method(p) == HTTP_HEAD;
    /* llhttp takes "HTTP/2.0" and a bare "GET /" (0.9) too; this server
     * speaks 1.x only (RFC 9110 15.6.6). */
    if (c->http_major != 1) {
        c->error_status = 505;
        return -1;
    }
    if (c->target_len == 0 || c->head.len == 0 || !origin_form(c)) {
        c->error_status = 400;
        return -1;
    }
    if (!fields_valid(c, 0)) {
        c->error_status = 400;
        return -1;
    }
    c->nhead = c->nhdrs;
    /* RFC 9112: a 1.1 request carries exactly one Host. */
    for (unsigned i = 0; i < c->nhdrs; i++)
        if (strcasecmp((const char *)c->head.data + hdr_refs(c)[i].name, "host") == 0)
            c->nhost++;
    if (c->nhost > 1 || (c->nhost == 0 && c->http_major == 1 && c->http_minor >= 1)) {
        c->error_status = 400;
        return -1;
    }
    const char *expect = sandlet_conn_header(c, "expect");
    if (expect) {
        if (strcasecmp(expect, "100-continue") != 0) {
            c->error_status = 417;
            return -1;
        }
        c->expect_continue = c->http_minor >= 1;
    }
    const char *target = (const char *)c->head.data + c->target;
    if (!c->rq && !(c->rq = req_new(c))) {
        c->error_status = 503;
        return -1;
    }
    reqline_set(c->rq->reqline, sizeof(c->rq->reqline), llhttp_method_name(llhttp_get_method(p)),
                target, c->target_len > 100 ? 100 : c->target_len, c->http_major, c->http_minor);
    c->srv->hooks->request(c);
    if (c->rt.worker) {
        /* Its REQUEST frame must fit one frame: head strings (NUL ended,
         * as in c->head), a 4-byte length per string, method, peer and the
         * fixed fields.  Only a max-header-size near its 1 MiB bound comes
         * close; the client hears 431 rather than a 500 later. */
        size_t method_len = strlen(llhttp_method_name(llhttp_get_method(p)));
        size_t frame =
            6 + 3 * 5 + method_len + strlen(c->peer) + c->head.len + (size_t)8 * c->nhdrs;
        if (frame > SANDLET_FRAME_MAX) {
            c->error_status = 431;
            return -1;
        }
    }
    /* The limit is the servlet's, known only now that the request is
     * routed, and checked before a byte of the body is read. */
    c->body.limit = c->rt.servlet ? c->rt.servlet->max_body_size : c->srv->conf->max_body_size;
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->body.limit) {
        c->error_status = 413;
        return -1;
    }
    c->body_max = (p->flags & F_CONTENT_LENGTH) ? p->content_length
                  : c->body.limit               ? c->body.limit
                                                : UINT64_MAX;
    /* The client waits for our go-ahead before sending the body; give it
     * only when the request will be read (limits were checked above). */
    if (c->expect_continue && (p->flags & (F_CONTENT_LENGTH | F_CHUNKED)) &&
        sandlet_conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25, NULL, 0, NULL, 0) < 0) {
        c->error_status = 500;
        return -1;
    }
    set_phase(c, PHASE_BODY);
    return 0;
}

/* Only a worker reads a request's body; the docroot's and the status
 * page's answers never do. */
static bool body_kept(const sandlet_conn *c)
{
    return c->rt.worker;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    sandlet_conn *c = conn_of(p);
    /* body.limit is max-body-size; what was streamed on counts too. */
    if (len > c->body.limit - c->body_total) {
        c->error_status = 413;
        return -1;
    }
    c->body_total += len;
    set_phase(c, PHASE_BODY); /* progress restarts the gap timer */
    /* Read and dropped: a body sent to a file (405 after it) would
     * otherwise be held whole, up to max-body-size a connection. */
    if (!body_kept(c))
        return 0;
    sandlet_buf_put(&c->body, at, len);
    if (c->body.error) {
        c->error_status = 500;
        return -1;
    }
    /* Past the window a worker's body streams (process_input hands the
     * request over once this input is parsed). */
    if (!c->body_stream && c->body.len > SANDLET_BODY_WINDOW)
        c->body_stream = true;
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    sandlet_conn *c = conn_of(p);
    /* Trailer fields after a chunked body: refused when malformed, like
     * headers, and otherwise dropped, since RFC 9110 (6.5.1) forbids
     * merging them into the header section (a trailing Host or Cookie
     * would reach the servlet unchecked). */
    if (!fields_valid(c, c->nhead)) {
        c->error_status = 400;
        return -1;
    }
    c->nhdrs = c->nterminated = c->nhead;
    c->hdrs.len = c->nhdrs * sizeof(sandlet_hdr_ref);
    set_phase(c, PHASE_DONE);
    /* Stop here: the rest of the input waits until this request is
     * answered, which keeps pipelined responses in order. */
    return HPE_PAUSED;
}

static void init_settings(void)
{
    llhttp_settings_init(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_url = on_url;
    settings.on_url_complete = on_url_complete;
    settings.on_header_field = on_header_field;
    settings.on_header_field_complete = on_header_field_complete;
    settings.on_header_value = on_header_value;
    settings.on_header_value_complete = on_header_value_complete;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;
    settings_ready = true;
}

static const llhttp_settings_t *parser_settings(void)
{
    if (!settings_ready)
        init_settings();
    return &settings;
}

/* ---- input -------------------------------------------------------------- */

/* The request may be served: whoever routed it takes it (dispatch.c). */
static void dispatch(sandlet_conn *c)
{
    c->state = CONN_WAITING;
    c->srv->hooks->dispatch(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void set_reading(sandlet_conn *c, bool on);

/* Stops reading the client while the body held here and queued for the
 * worker fill the window; the body timeout pauses with it, as the wait
 * is the worker's, not the client's. */
static void body_window(sandlet_conn *c)
{
    if (!body_streaming(c) || c->body_paused)
        return;
    if (c->body.len + backlog(c) > SANDLET_BODY_WINDOW) {
        c->body_paused = true;
        set_reading(c, false);
        c->read_at = 0;
        timer_arm(c);
    }
}

/* More of a streamed body was parsed: the request goes to its pool the
 * first time (dispatch), then the pool takes what arrived. */
static void body_progress(sandlet_conn *c)
{
    if (!c->body_dispatched) {
        c->body_dispatched = true;
        dispatch(c);
    } else {
        body_more(c);
    }
    body_window(c);
}

const uint8_t *sandlet_conn_body(const sandlet_conn *c, size_t *len, bool *done)
{
    *len = c->body.len;
    *done = c->phase != PHASE_BODY;
    return c->body.data;
}

void sandlet_conn_body_consume(sandlet_conn *c, size_t n)
{
    sandlet_buf_consume(&c->body, n);
}

void sandlet_conn_body_drained(sandlet_conn *c)
{
    if (!c->body_paused || !body_streaming(c) || c->body.len + backlog(c) >= SANDLET_BODY_LOW_WATER)
        return;
    c->body_paused = false;
    set_phase(c, PHASE_BODY); /* the client's clock runs again */
    set_reading(c, true);
    if (!c->parsing && c->in.len)
        process_input(c);
}

void sandlet_conn_redispatch(sandlet_conn *c)
{
    dispatch(c);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    sandlet_conn *c = h->data;
    sandlet_server *srv = c->srv;
    if (c->in.len == 0 && !srv->read_busy) {
        if (!srv->read_buf)
            srv->read_buf = malloc(READ_CHUNK);
        if (srv->read_buf) {
            /* Taken back by on_read, which libuv calls before asking for
             * another buffer. */
            srv->read_busy = true;
            *buf = uv_buf_init((char *)srv->read_buf, (unsigned)READ_CHUNK);
            return;
        }
    }
    size_t room = c->in.limit - c->in.len;
    size_t want = room < READ_CHUNK ? room : READ_CHUNK;
    if (want == 0 || sandlet_buf_reserve(&c->in, want) < 0) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)c->in.data + c->in.len, (unsigned)want);
}

static void set_reading(sandlet_conn *c, bool on)
{
    if (on == c->reading || c->state == CONN_CLOSING)
        return;
    if (on && uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) < 0) {
        conn_close(c);
        return;
    }
    if (!on)
        uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = on;
}

/* llhttp says HPE_INVALID_METHOD both for a method it does not know and
 * for bytes that are no method at all (binary input, "G@T", a TLS
 * ClientHello).  Only the first is 501 (RFC 9110 9.1): the request starts,
 * after any empty lines, with a token and then a space or the end of what
 * arrived so far. */
static int bad_method_status(const sandlet_conn *c)
{
    const unsigned char *d = c->in.data;
    size_t n = c->in.len, i = 0;
    while (i < n && (d[i] == '\r' || d[i] == '\n'))
        i++;
    size_t token = i;
    while (i < n && sandlet_lib_tchar(d[i]))
        i++;
    return i > token && (i == n || d[i] == ' ') ? 501 : 400;
}

static void process_input(sandlet_conn *c)
{
    if (!c->rq && c->in.len > 0 && !(c->rq = req_new(c))) {
        sandlet_error("%s: out of memory for a request; closing", c->peer);
        conn_close(c);
        return;
    }
    c->parsing = true;
    while ((c->state == CONN_READING || body_streaming(c)) && !c->body_paused && c->in.len > 0) {
        const char *data = (const char *)c->in.data;
        llhttp_errno_t err = llhttp_execute(&c->rq->parser, data, c->in.len);
        if (err == HPE_OK) {
            c->lf_ws = ends_in_lf_ws(data, c->in.len, c->lf_ws);
            sandlet_buf_reset(&c->in);
            if (c->body_stream)
                body_progress(c);
            break;
        }
        if (err == HPE_PAUSED) {
            size_t used = (size_t)(llhttp_get_error_pos(&c->rq->parser) - data);
            c->lf_ws = ends_in_lf_ws(data, used, c->lf_ws);
            sandlet_buf_consume(&c->in, used);
            if (c->body_dispatched) {
                /* The streamed body ended; the next request waits for
                 * this one's answer, as any other. */
                body_more(c);
                break;
            }
            /* Reading goes on while the request is served: stopping and
             * restarting it costs two epoll_ctl calls per request, and a
             * pipelining client's next requests just wait in c->in (see
             * on_read for the bound). */
            dispatch(c);
            /* Answered already, and the client is not taking its answers:
             * the next requests wait until it does, so that what the
             * acceptor queues for one client stays bounded. */
            if (c->state == CONN_READING &&
                sandlet_conn_write_backlog(c) >= SANDLET_WRITE_HIGH_WATER) {
                c->out_blocked = true;
                set_phase(c, PHASE_DONE); /* send-timeout watches the client now */
                set_reading(c, false);
                break;
            }
            continue;
        }
        int status = c->error_status ? c->error_status : 400;
        if (err == HPE_INVALID_METHOD)
            status = bad_method_status(c);
        sandlet_debug("%s: bad request (%s): answering %d", c->peer, llhttp_errno_name(err),
                      status);
        c->parsing = false;
        if (c->body_dispatched) {
            /* Too large or malformed midway: the worker's body aborts. */
            stream_fail(c, status);
            return;
        }
        c->state = CONN_WAITING;
        simple_response(c, status, true);
        return;
    }
    c->parsing = false;
    if (c->state == CONN_READING && !c->out_blocked) {
        if (c->peer_closed) {
            conn_close(c);
            return;
        }
        set_reading(c, true);
    }
}

/* What arrived in the loop's shared buffer is parsed in place, c->in
 * borrowing it; only what the parse leaves (a partial head, requests
 * pipelined behind one being served) is copied into c's own memory. */
static void read_shared(sandlet_conn *c, size_t n)
{
    sandlet_buf own = c->in;
    c->in =
        (sandlet_buf){.data = c->srv->read_buf, .len = n, .cap = READ_CHUNK, .limit = own.limit};
    c->in_borrowed = true;
    if (c->state == CONN_READING || body_streaming(c))
        process_input(c);
    sandlet_buf left = c->in;
    c->in = own;
    c->in_borrowed = false;
    if (left.len) {
        sandlet_buf_put(&c->in, left.data, left.len);
        if (c->in.error) {
            sandlet_error("%s: out of memory for the input; closing", c->peer);
            conn_close(c);
            return;
        }
    }
    if (c->state != CONN_READING && !body_streaming(c) && c->in.limit - c->in.len < READ_CHUNK)
        set_reading(c, false); /* full: resumed when this request is done */
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    sandlet_conn *c = s->data;
    if (buf->base && buf->base == (char *)c->srv->read_buf) {
        c->srv->read_busy = false;
        if (nread > 0) {
            read_shared(c, (size_t)nread);
            return;
        }
    }
    if (nread > 0) {
        c->in.len += (size_t)nread;
        if (c->state == CONN_READING || body_streaming(c))
            process_input(c);
        else if (c->in.limit - c->in.len < READ_CHUNK)
            set_reading(c, false); /* full: resumed when this request is done */
        return;
    }
    if (nread == 0)
        return;
    if (nread == UV_EOF && body_streaming(c)) {
        /* The client stopped midway: its worker's body aborts (forget). */
        sandlet_debug("%s: connection closed in the middle of a streamed body", c->peer);
        conn_close(c);
        return;
    }
    if (nread == UV_EOF && c->state != CONN_READING) {
        c->peer_closed = true;
        set_reading(c, false);
        return;
    }
    conn_close(c);
}

/* ---- connections -------------------------------------------------------- */

static void on_closed(uv_handle_t *h)
{
    sandlet_conn *c = h->data;
    sandlet_server *srv = c->srv;
    if (--c->open_handles > 0)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->nconns--;
    if (c->rq && c->rq->file.fd >= 0)
        close(c->rq->file.fd);
    free(c->rq);
    sandlet_buf_free(&c->in);
    sandlet_buf_free(&c->head);
    sandlet_buf_free(&c->hdrs);
    sandlet_buf_free(&c->body);
    unroute(c);
    free(c);
    for (size_t i = 0; i < srv->nlisteners && !srv->stopping; i++) {
        sandlet_listener *l = srv->listeners[i];
        if (l->paused && srv->nconns < srv->conn_cap) {
            l->paused = false;
            sandlet_http_accept((uv_stream_t *)&l->tcp, 0);
        }
    }
    srv->hooks->idle(srv);
}

static void conn_close(sandlet_conn *c)
{
    if (c->state == CONN_CLOSING) {
        finish_close(c);
        return;
    }
    gone(c);
    c->state = CONN_CLOSING;
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    /* A write error or reset means nothing more can be delivered; the
     * send deadline still bounds the writes that are left. */
    c->read_at = 0;
    timer_arm(c);
    if (c->peer_closed && c->pending_writes == 0) {
        close_handles(c);
        return;
    }
    finish_close(c);
}

void sandlet_http_accept(uv_stream_t *listener, int status)
{
    sandlet_listener *l = listener->data;
    sandlet_server *srv = l->srv;
    if (srv->stopping)
        return; /* its listener is closing */
    if (status < 0) {
        sandlet_log_errno(SANDLET_LOG_WARN, status, "accept");
        return;
    }
    if (srv->nconns >= srv->conn_cap) {
        /* Leave the connection unaccepted: libuv then stops watching this
         * listener until we accept, so nothing spins; the kernel's backlog
         * holds the clients until a connection closes. */
        if (!l->paused) {
            l->paused = true;
            if (srv->conn_cap == srv->conf->max_connections)
                sandlet_warn("max-connections (%u) reached; accepting resumes when one closes",
                             srv->conn_cap);
            else
                sandlet_warn("%u connections open, all the open-files limit leaves room for "
                             "(max-connections is %u); accepting resumes when one closes",
                             srv->conn_cap, srv->conf->max_connections);
        }
        return;
    }
    sandlet_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        sandlet_error("out of memory accepting a connection");
        return;
    }
    c->srv = srv;
    c->rt.docroot_fd = -1;
    c->hooks = &no_hooks;
    c->started = sandlet_turn_ns(c->srv);
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    uv_timer_init(srv->loop, &c->timer);
    c->timer.data = c;
    c->open_handles = 2;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
        c->state = CONN_CLOSING;
        close_handles(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage ss;
    int sl = sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, ip, sizeof(ip));
            port = ntohs(a->sin6_port);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            uv_ip4_name(a, ip, sizeof(ip));
            port = ntohs(a->sin_port);
        }
    }
    snprintf(c->peer, sizeof(c->peer), ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, port);
    const sandlet_conf *conf = c->srv->conf;
    /* Input beyond a whole head plus some body is never needed at once:
     * reading stops while a request is served. */
    sandlet_buf_init(&c->in, conf->max_header_size + 2 * READ_CHUNK);
    sandlet_buf_init(&c->head, conf->max_header_size);
    sandlet_buf_init(&c->hdrs, SANDLET_MAX_HEADERS * sizeof(sandlet_hdr_ref));
    sandlet_buf_init(&c->body, conf->max_body_size);
    c->state = CONN_READING;
    /* A new connection must send its request head in time. */
    set_phase(c, PHASE_HEADERS);
    set_reading(c, true);
}

void sandlet_http_shutdown(sandlet_server *srv)
{
    sandlet_conn *next;
    for (sandlet_conn *c = srv->conns; c; c = next) {
        next = c->next;
        /* Idle between requests: nothing is lost by closing now.  Busy
         * ones close after their response (request_done sees stopping). */
        if (c->state == CONN_READING && c->in.len == 0 && c->head.len == 0)
            conn_close(c);
    }
}

void sandlet_http_fail_all(sandlet_server *srv, int status)
{
    for (sandlet_conn *c = srv->conns; c; c = c->next)
        if (!uv_is_closing((uv_handle_t *)&c->tcp))
            stream_fail(c, status); /* the pool lets go of it first */
}

/*
 * channel.c - a worker's channel as the acceptor uses it: the request
 * frames copied into its lane (lane.h; gathered per loop turn and copied
 * at once, with other sandboxes' session cookies filtered out of the
 * Cookie header), the response frames copied out of its other lane and
 * handed to the client's connection, the doorbells (lane.h),
 * and the worker's Set-Cookie headers judged.
 *
 * Workers are untrusted.  Every frame they send is decoded with bounds
 * checks; a frame that is malformed, unexpected or for another request is
 * the worker's death (the supervisor kills it), never the acceptor's.
 * This file never parses HTTP, never decides which worker serves a
 * request (queue.c) and never starts or replaces a worker (pool.c).
 */
#include "config.h"

#include "common/log.h"
#include "loop/pool_private.h"
#include "loop/pages.h"
#include "sandbox/lane.h"
#include "sandbox/session_store.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <strings.h>

static void violation(sandlet_worker *w, const char *why);

/* Rings the worker: a futex wake in its lane's control (lane.h). */
static void ring_worker(sandlet_worker *w)
{
    sandlet_lane_bell_ring(&w->tx);
}

/* Copies what has gathered in w->out into the worker's lane, as much as
 * it has room for; the rest waits for the worker's doorbell (it rings
 * once it has made room).  -EPROTO: the worker's position in its lane
 * is impossible. */
static int flush_out(sandlet_worker *w)
{
    while (w->out.len && w->pipe_open) {
        ssize_t k = sandlet_lane_put(&w->tx, w->out.data, w->out.len);
        if (k < 0)
            return (int)k;
        if (k > 0) {
            sandlet_buf_consume(&w->out, (size_t)k);
            if (sandlet_lane_ring_consumer(&w->tx))
                ring_worker(w);
        } else if (!sandlet_lane_wait_room(&w->tx)) {
            break;
        }
    }
    return 0;
}

static void flush_or_lose(sandlet_worker *w)
{
    if (flush_out(w) < 0)
        violation(w, "impossible position in its lane");
}

static void flush_pool(sandlet_pool *p)
{
    /* A lost worker's requests go to the others, which may mark one seen
     * earlier in the pass dirty again: pass until none is.  Each pass
     * flushes or loses a worker, so this ends. */
    while (p->ndirty) {
        for (unsigned j = 0; p->ndirty && j < p->nworkers; j++) {
            sandlet_worker *w = &p->workers[j];
            if (!w->dirty)
                continue;
            w->dirty = false;
            p->ndirty--;
            flush_or_lose(w);
            sandlet_body_written(w);
        }
    }
    uv_check_stop(&p->flush);
    uv_prepare_stop(&p->flush_early);
}

static void flush_dirty(uv_check_t *h)
{
    flush_pool(h->data);
}

static void flush_dirty_early(uv_prepare_t *h)
{
    flush_pool(h->data);
}

/* Frames wait in w->out for the end of this loop turn. */
void sandlet_mark_dirty(sandlet_worker *w)
{
    if (w->dirty)
        return;
    w->dirty = true;
    if (w->pool->ndirty++ == 0) {
        uv_check_start(&w->pool->flush, flush_dirty);
        uv_prepare_start(&w->pool->flush_early, flush_dirty_early);
    }
}

/* True when the cookie called name (len bytes) is the session cookie of a
 * sandbox other than p's. */
static bool foreign_session_cookie(const sandlet_pool *p, const char *name, size_t len,
                                   size_t *which)
{
    static const char prefix[] = SL_SESSION_COOKIE "_";
    const sandlet_conf *conf = p->srv->conf;
    if (len < sizeof(prefix) || strncasecmp(name, prefix, sizeof(prefix) - 1) != 0)
        return false;
    /* By name, not index: across a reload the sandbox's own cookie keeps
     * its name whatever the pool serving it. */
    const char *own = p->conf->session_cookie;
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        const char *other = conf->sandboxes[i].session_cookie;
        if (strcasecmp(other, own) != 0 && strlen(other) == len &&
            strncasecmp(other, name, len) == 0) {
            *which = i;
            return true;
        }
    }
    return false;
}

/* The pair of a Cookie header value that starts at pos: [*start, *end) is
 * the pair as sent, *name its name with blanks trimmed (as the worker's
 * parser splits it: ';' between pairs).  Returns where the next one
 * starts, or len. */
static size_t cookie_pair(const char *v, size_t len, size_t pos, size_t *end, const char **name,
                          size_t *name_len)
{
    const char *semi = memchr(v + pos, ';', len - pos);
    *end = semi ? (size_t)(semi - v) : len;
    const char *a = v + pos, *z = v + *end;
    while (a < z && (*a == ' ' || *a == '\t'))
        a++;
    const char *eq = memchr(a, '=', (size_t)(z - a));
    const char *ne = eq ? eq : a;
    while (ne > a && (ne[-1] == ' ' || ne[-1] == '\t'))
        ne--;
    *name = a;
    *name_len = (size_t)(ne - a);
    return semi ? *end + 1 : len;
}

/* A Cookie header's value without the session cookies of other
 * sandboxes: a browser sends every cookie whose Path matches, so when
 * sandboxes' routes nest, a servlet would otherwise be handed the session
 * tokens of its neighbours' clients.  The rest is kept byte for byte.
 * *vp becomes the value to send: unchanged (no copy) when nothing is
 * dropped, else a scratch buffer valid until the next call.  Returns 0 or
 * the scratch buffer's error. */
static int filter_cookie_header(const sandlet_pool *p, const char **vp, size_t *len)
{
    size_t which, end, nlen;
    const char *v = *vp, *name;
    if (p->srv->conf->nsandboxes < 2 || !memchr(v, '_', *len))
        return 0;
    size_t pos = 0;
    while (pos < *len) {
        size_t next = cookie_pair(v, *len, pos, &end, &name, &nlen);
        if (foreign_session_cookie(p, name, nlen, &which))
            break;
        pos = next;
    }
    if (pos >= *len)
        return 0; /* nothing to drop: the common case costs no copy */
    /* One loop thread: one scratch buffer, never larger than a header. */
    static sandlet_buf out = {.limit = SANDLET_MAX_HEADER_SIZE_LIMIT};
    sandlet_buf_reset(&out);
    bool first = true;
    for (pos = 0; pos < *len;) {
        size_t next = cookie_pair(v, *len, pos, &end, &name, &nlen);
        if (!foreign_session_cookie(p, name, nlen, &which)) {
            if (!first)
                sandlet_buf_put(&out, ";", 1);
            sandlet_buf_put(&out, v + pos, end - pos);
            first = false;
        }
        pos = next;
    }
    if (out.error)
        return out.error;
    *len = out.len;
    *vp = out.len ? (const char *)out.data : "";
    return 0;
}

/* Appends c's request (seen through v) to w->out; on failure w->out is
 * left as it was. */
int sandlet_encode_request(sandlet_worker *w, const sandlet_conn *c, const sandlet_request_view *v,
                           uint32_t id, size_t *taken)
{
    sandlet_buf *b = &w->out;
    uint32_t slot = 0;
    if (v->page)
        sandlet_page_servlet(v->page, &slot, NULL);
    sandlet_wire_request rq = {
        .servlet = v->page ? (uint16_t)(w->pool->nservlets + slot) : v->servlet_local,
        .http_major = (uint8_t)v->http_major,
        .http_minor = (uint8_t)v->http_minor,
        .nheaders = (uint16_t)v->nheaders,
        .method = v->method,
        .method_len = v->method_len,
        .target = v->target,
        .target_len = v->target_len,
        .peer = v->peer,
        .peer_len = v->peer_len,
    };
    size_t start = sandlet_wire_request_begin(b, id, &rq);
    for (unsigned i = 0; i < v->nheaders; i++) {
        const char *name, *value;
        size_t name_len, value_len;
        sandlet_conn_header_at(c, i, &name, &name_len, &value, &value_len);
        int rc = 0;
        if (name_len == 6 && strncasecmp(name, "Cookie", 6) == 0)
            rc = filter_cookie_header(w->pool, &value, &value_len);
        if (rc < 0) {
            b->error = rc;
            break;
        }
        sandlet_wire_header_put(b, name, name_len, value, value_len);
    }
    /* A streamed body: the REQUEST carries what fits, the rest follows
     * (body_pump). */
    if (v->body_open)
        return sandlet_wire_request_finish_open(b, start, v->body, v->body_len, taken);
    *taken = v->body_len;
    return sandlet_wire_request_finish(b, start, id, v->body, v->body_len);
}

static void violation(sandlet_worker *w, const char *why)
{
    sandlet_error("worker %d of sandbox '%s' broke the frame protocol (%s)%s%s; killing it",
                  (int)w->pid, sandbox_name(w), why, w->rcount ? " while serving " : "",
                  w->rcount ? w->reqline : "");
    sandlet_kill_worker(w, 0);
}

/* The first request's client left while its answer streams: restart the
 * worker rather than read the rest of a response that may be endless.
 * (The requests behind it it has not claimed go to other workers.) */
static void recycle(sandlet_worker *w)
{
    sandlet_info("worker %d of sandbox '%s': the client of %s left mid-response; dropped "
                 "%" PRIu64 " bytes, recycling the worker rather than read the rest",
                 (int)w->pid, sandbox_name(w), w->reqline, w->dropped);
    w->recycling = true;
    sandlet_kill_worker(w, 502);
}

/* A status that is not a final HTTP status (a 1xx, or anything outside
 * 200-599) would answer the request with an interim or invalid response,
 * and the client would take the next response on the connection for this
 * one's: the client gets 502 and the rest of the worker's answer is
 * dropped (the worker is not at fault for the protocol, only its
 * servlet for the status). */
static void not_final(sandlet_worker *w, sandlet_inflight *f, unsigned status)
{
    sandlet_error("sandbox '%s': servlet %s answered %s with status %u, which is not a final "
                  "HTTP status (200-599); answering 502 instead",
                  sandbox_name(w), w->servlet, w->reqline, status);
    sandlet_conn *c = f->discard ? NULL : f->conn;
    f->discard = true;
    if (c) {
        f->conn = NULL;
        sandlet_conn_fail(c, 502);
    }
}

const uint64_t sandlet_duration_bounds_us[SANDLET_DURATION_BUCKETS] = {
    1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 10000000};

/* One more request of p, whose head arrived at started (sandlet_turn_ns), is
 * over: answered, or failed with its worker (a 502 or 504 counts too: the
 * slowest requests are those). */
void sandlet_pool_observe(sandlet_pool *p, uint64_t started)
{
    uint64_t now = sandlet_turn_ns(p->srv);
    uint64_t us = now > started ? (now - started) / 1000 : 0;
    p->duration_sum_us += us;
    p->duration_count++;
    for (size_t i = 0; i < SANDLET_DURATION_BUCKETS; i++)
        if (us <= sandlet_duration_bounds_us[i]) {
            p->duration_le[i]++;
            break;
        }
}

static void request_finished(sandlet_worker *w)
{
    /* Answering the client may have lost this worker meanwhile (a failed
     * write while handing over that client's next request). */
    if (w->rcount == 0 || !w->pipe_open)
        return;
    /* Answered before its streamed body ended: the worker reads and drops
     * the rest up to this abort before it takes another request. */
    sandlet_body_abort(w, held(w, 0));
    sandlet_pool_observe(w->pool, held(w, 0)->started);
    if (held(w, 0)->servlet)
        sandlet_slow_note(w->pool, held(w, 0)->servlet, uv_now(w->pool->srv->loop) - w->started);
    /* A claim check to come serves the next request (sandlet_start_first);
     * a timeout is this request's alone. */
    if (!w->claim_timer)
        uv_timer_stop(&w->deadline);
    sandlet_tee_end(w, held(w, 0));
    w->rfirst = (w->rfirst + 1) % depth(w);
    w->rcount--;
    w->slow = false;
    w->served++;
    w->pool->served++;
    sandlet_worker_free(w);
}

/* Returns false when the worker was dropped and processing must stop. */
static bool handle_frame(sandlet_worker *w, const sandlet_frame_hdr *h, const uint8_t *payload)
{
    bool end = h->flags & SANDLET_FRAME_END;
    if (w->state == W_STARTING) {
        if (h->type == SANDLET_FRAME_READY) {
            w->state = W_IDLE;
            w->idle_since = uv_now(w->pool->srv->loop);
            w->pool->failing = false;
            sandlet_start_ok(w);
            if (sandlet_worker_extra(w)) {
                sandlet_grow_done(w, false);
                sandlet_idle_watch(w->pool);
            }
            /* The supervisor's back-off is for workers that cannot start. */
            sandlet_server_control(w->pool->srv, SANDLET_CTL_READY, w->pool->id, w->slot, w->gen,
                                   0);
            sandlet_debug("worker %d of sandbox '%s' is ready", (int)w->pid, sandbox_name(w));
            if (w->pages_gen < w->pool->pages_gen && sandlet_may_replace(w->pool)) {
                /* Started just before the code's new version: it would
                 * only ever serve the old code.  Unless the new code has
                 * no worker up yet: then it serves the old code meanwhile
                 * (the new may never start), and goes when one is up. */
                w->pool->canary = true;
                sandlet_worker_retire(w, "it started before the newest code");
                return false;
            }
            /* A worker of the new code is up: the other stale ones may go. */
            sandlet_replace_stale(w->pool, "its code has a new version");
            sandlet_recycle_past_max(w->pool);
            sandlet_pool_submit(w->pool, NULL);
            return true;
        }
        if (h->type == SANDLET_FRAME_FAIL) {
            /* Servlet code (a constructor, init) can write frames too:
             * the message is escaped and cut like any worker output, and
             * a worker says FAIL once -- its channel is closed after it,
             * so a loop of FAIL frames cannot forge or flood the log. */
            const char *msg;
            char shown[512];
            size_t used;
            size_t n = 0;
            if (sandlet_wire_fail_decode(payload, h->length, &msg) == 0)
                n = sandlet_workerlog_escape(shown, sizeof(shown) - 1, (const uint8_t *)msg,
                                             strlen(msg), &used);
            shown[n] = '\0';
            sandlet_error(
                "sandbox '%s' cannot start: %s%s", sandbox_name(w), n ? shown : "(no message)",
                sandlet_any_worker_up(w->pool) ? "" : "; answering 503 until a worker starts");
            if (!sandlet_any_worker_up(w->pool)) {
                w->pool->failing = true;
                sandlet_fail_queue(w->pool);
            }
            /* It exits; the supervisor backs off its restart (an extra
             * slot's is not restarted: the pool backs off its GROW). */
            sandlet_grow_done(w, true);
            sandlet_start_failed(w);
            sandlet_close_pipe(w);
            w->state = W_DYING;
            return false;
        }
        violation(w, "expected READY");
        return false;
    }
    if (sandlet_worker_stalled(w)) {
        /* For a request taken back the worker has nothing to say but
         * SKIP: it never started it. */
        if (h->type != SANDLET_FRAME_SKIP || h->id != held(w, 0)->id) {
            violation(w, "expected SKIP for the request taken back");
            return false;
        }
        uv_timer_stop(&w->deadline);
        sandlet_tee_end(w, held(w, 0));
        w->rfirst = (w->rfirst + 1) % depth(w);
        w->rcount--;
        w->nrevoked--;
        sandlet_worker_free(w);
        return true;
    }
    if (w->state != W_BUSY || w->rcount == 0 || h->id != held(w, 0)->id) {
        violation(w, w->state == W_BUSY ? "frame for another request" : "frame while idle");
        return false;
    }
    /* A worker claims a request before it answers it: an answer to one
     * it did not claim could meet a second answer from the worker it is
     * then handed to. */
    if (!sandlet_request_started(w)) {
        violation(w, "answer to a request it has not claimed");
        return false;
    }
    sandlet_inflight *f = held(w, 0);
    int rc = 0;
    if (h->type == SANDLET_FRAME_RESPONSE && !w->got_head) {
        sandlet_wire_response r;
        int drc = sandlet_wire_response_decode(payload, h->length, &r);
        if (drc < 0 && drc != -ERANGE) {
            violation(w, "malformed RESPONSE");
            return false;
        }
        w->got_head = true;
        if (drc == -ERANGE)
            not_final(w, f, r.status);
        else if (f->conn && !f->discard)
            rc = sandlet_conn_response_head(f->conn, &r, end);
    } else if (h->type == SANDLET_FRAME_BODY && w->got_head &&
               !sandlet_wire_body_valid(h->length, h->flags)) {
        violation(w, "empty BODY frame that does not end the response");
        return false;
    } else if (h->type == SANDLET_FRAME_BODY && w->got_head) {
        if (f->conn && !f->discard)
            rc = sandlet_conn_response_body(f->conn, payload, h->length, end);
    } else {
        violation(w, sandlet_frame_type_name(h->type));
        return false;
    }
    if (rc == -EPROTO) {
        violation(w, "invalid status or header");
        return false;
    }
    if (rc < 0 && w->rcount && held(w, 0) == f && f->conn) {
        /* The client cannot take the response; drop the rest of it. */
        f->discard = true;
    }
    if (end) {
        request_finished(w);
    } else if (w->rcount && held(w, 0) == f && (f->discard || !f->conn)) {
        /* Frames count with their header: a flood of tiny frames to a
         * client that left costs the acceptor as much as bytes do. */
        w->dropped += SANDLET_FRAME_HEADER + (uint64_t)h->length;
        if (w->dropped > SANDLET_DISCARD_MAX) {
            recycle(w);
            return false;
        }
    }
    return true;
}

static void worker_process(sandlet_worker *w)
{
    size_t off = 0;
    w->processing = true;
    while (w->pipe_open) {
        sandlet_frame_hdr h;
        int rc = sandlet_frame_header_decode(w->in.data + off, w->in.len - off, &h);
        if (rc == -EAGAIN)
            break;
        if (rc < 0) {
            w->processing = false;
            violation(w, rc == -EMSGSIZE ? "frame length over the maximum" : "bad frame header");
            return;
        }
        if (w->in.len - off - SANDLET_FRAME_HEADER < h.length)
            break;
        if (!handle_frame(w, &h, w->in.data + off + SANDLET_FRAME_HEADER)) {
            w->processing = false;
            return;
        }
        off += SANDLET_FRAME_HEADER + h.length;
        /* Backpressure: let the client catch up before reading more. */
        sandlet_conn *c = w->rcount ? held(w, 0)->conn : NULL;
        if (c && sandlet_conn_write_backlog(c) > SANDLET_WRITE_HIGH_WATER) {
            if (w->reading) {
                uv_read_stop((uv_stream_t *)&w->pipe);
                w->reading = false;
            }
            break;
        }
    }
    w->processing = false;
    sandlet_buf_consume(&w->in, off);
}

/* A worker notes when a request whose servlet blocked ended (lane.h): for
 * a second after that, the pool spreads requests over its workers
 * (pick.h).  Far longer than a request, so that a servlet that
 * blocks now and then keeps its sandbox spreading while it is used, and
 * short enough that a sandbox whose servlets stopped blocking soon
 * packs again. */
#define BLOCKING_SPREAD_NS ((uint64_t)1000 * 1000 * 1000)

bool sandlet_pool_blocks(sandlet_pool *p)
{
    uint64_t now = 0;
    for (unsigned i = 0; i < p->nworkers; i++) {
        sandlet_worker *w = &p->workers[i];
        if (!w->pipe_open)
            continue;
        uint64_t at = atomic_load_explicit(&w->rx.ctl->blocked_at, memory_order_relaxed);
        if (!at)
            continue;
        if (!now)
            now = sandlet_turn_ns(p->srv);
        /* Later than this turn's clock: it ended during the turn. */
        if (at > now || now - at < BLOCKING_SPREAD_NS)
            return true;
    }
    return false;
}

/* Copies what the worker's lane holds into w->in and handles it, until
 * the lane is empty or the first request's client must catch up.  The
 * bytes are the worker's: copied before they are decoded, and decoded
 * with every bound checked (worker_process). */
static void drain(sandlet_worker *w)
{
    if (w->processing)
        return;
    while (w->reading && w->pipe_open) {
        size_t room = w->in.limit - w->in.len;
        size_t want = room < READ_CHUNK ? room : READ_CHUNK;
        if (want == 0) {
            violation(w, "frame larger than the buffer");
            return;
        }
        if (sandlet_buf_reserve(&w->in, want) < 0) {
            sandlet_error("out of memory reading worker %d of sandbox '%s'; killing it",
                          (int)w->pid, sandbox_name(w));
            sandlet_kill_worker(w, 0);
            return;
        }
        ssize_t n = sandlet_lane_get(&w->rx, w->in.data + w->in.len, want);
        if (n < 0) {
            violation(w, "impossible position in its lane");
            return;
        }
        if (n == 0)
            return;
        w->in.len += (size_t)n;
        /* It waits for room to say more (a long answer). */
        if (sandlet_lane_ring_producer(&w->rx))
            ring_worker(w);
        worker_process(w);
    }
}

/* The worker rang: it made room in its lane for what waits in w->out,
 * or wrote frames while this loop slept. */
static void worker_rung(sandlet_worker *w)
{
    flush_or_lose(w);
    if (!w->pipe_open)
        return;
    sandlet_body_written(w);
    drain(w);
}

/* The socketpair carries the worker's doorbells only (lane.h): the bytes
 * go here, their count is what matters. */
void sandlet_worker_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    static char bells[256];
    *buf = uv_buf_init(bells, sizeof(bells));
}

void sandlet_worker_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    sandlet_worker *w = s->data;
    if (nread > 0) {
        worker_rung(w);
        return;
    }
    if (nread == 0)
        return;
    /* EOF or error: the worker is gone or going; its EXITED report says
     * why.  What it wrote before it left is read first (a last answer, a
     * FAIL); its client learns the rest now, not after the report. */
    drain(w);
    if (w->pipe_open)
        sandlet_worker_lost(w);
}

/* Reads w again after a pause, starting with what is already buffered.
 * Never from inside worker_process, whose loop goes on by itself. */
void sandlet_worker_resume(sandlet_worker *w)
{
    if (w->reading || !w->pipe_open || w->processing || w->state != W_BUSY)
        return;
    int rc = uv_read_start((uv_stream_t *)&w->pipe, sandlet_worker_alloc, sandlet_worker_read);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "reading from worker %d of sandbox '%s'",
                          (int)w->pid, sandbox_name(w));
        sandlet_kill_worker(w, 0);
        return;
    }
    w->reading = true;
    worker_process(w);
    drain(w);
}

/* The loop is about to sleep (or just woke): whether w's answers need a
 * doorbell to be seen.  Awake, the loop looks at every lane each turn
 * (sandlet_lanes_awake), so a worker that answers while the acceptor is
 * busy rings nobody.  Going to sleep, it asks each worker to ring and
 * looks once more: what came between the two looks is read without
 * sleeping (the pool's idle handle makes the poll return at once). */
void sandlet_lanes_watch(sandlet_worker *w)
{
    if (!w->pipe_open || !w->reading)
        return;
    if (sandlet_lane_wait_data(&w->rx)) {
        sandlet_lane_awake(&w->rx);
        uv_idle_start(&w->pool->lanes_look, sandlet_lanes_look);
    }
}

void sandlet_lanes_look(uv_idle_t *h)
{
    /* Its being active is what matters: the check below reads. */
    uv_idle_stop(h);
}

void sandlet_lanes_asleep(uv_prepare_t *h)
{
    sandlet_pool *p = h->data;
    for (unsigned j = 0; j < p->nworkers; j++)
        sandlet_lanes_watch(&p->workers[j]);
}

void sandlet_lanes_awake(uv_check_t *h)
{
    sandlet_pool *p = h->data;
    for (unsigned j = 0; j < p->nworkers; j++) {
        sandlet_worker *w = &p->workers[j];
        if (!w->pipe_open || !w->reading)
            continue;
        sandlet_lane_awake(&w->rx);
        drain(w);
    }
}

void sandlet_pool_resume(sandlet_conn *c)
{
    sandlet_worker *w = sandlet_conn_pool_link(c)->worker;
    if (w)
        sandlet_worker_resume(w);
}

bool sandlet_pool_header_allowed(const sandlet_conn *c, const char *name, size_t name_len,
                                 const char *value, size_t value_len)
{
    const sandlet_pool *pool = sandlet_conn_pool_link_const(c)->pool;
    if (name_len != 10 || strncasecmp(name, "Set-Cookie", 10) != 0 || !pool)
        return true;
    return sandlet_setcookie_allowed(c, pool->conf, value, value_len);
}

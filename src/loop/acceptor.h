/*
 * acceptor.h - the acceptor process's private index: the server, client
 * connections (http.c) and the per-sandbox worker pools (pool.c, queue.c,
 * channel.c, stream.c: see pool_private.h).
 *
 * The acceptor is one libuv loop that owns every client connection.  It
 * never runs servlet code and never trusts a worker: everything a worker
 * sends is checked as if it came from the network.
 */
#ifndef SANDLET_ACCEPTOR_H
#define SANDLET_ACCEPTOR_H

#include "loop/server.h"
#include "sandbox/claim.h"
#include "sandbox/lane.h"

/* ---- reload.c ----------------------------------------------------------- */

/* One configuration as the acceptor serves it: the start's, then each
 * reload's.  A request routed under it holds it (its servlet lives in
 * conf) until the request ends, and so does each pool whose sandbox
 * settings live in conf; the server holds the current one.  pool_of maps
 * its sandboxes to the pools serving them. */
typedef struct sandlet_confgen {
    sandlet_conf *conf;
    sandlet_pool **pool_of; /* per sandbox of conf */
    uint16_t *local_index;  /* per servlet: its index in its sandbox's INIT */
    uint16_t *nservlets;    /* per sandbox: its configured servlets */
    /* Per host block: its docroot, opened when the generation is made (so
     * a reload may add hosts and move their docroots); -1: none, or it
     * could not be opened (logged): its files answer 404. */
    int *host_fd;
    unsigned refs;
} sandlet_confgen;

/* A configuration taken over (conf is the generation's now): its
 * servlets' indexes computed, its hosts' docroots opened, no pool yet.
 * NULL when out of memory. */
sandlet_confgen *sandlet_confgen_new(sandlet_conf *conf);
sandlet_confgen *sandlet_confgen_hold(sandlet_confgen *g);
void sandlet_confgen_put(sandlet_confgen *g);

/* Starts accepting on fd (bound and listening), for listen line l.
 * Returns 0 or -errno (fd closed). */
int sandlet_listener_add(sandlet_server *srv, const sandlet_listen_conf *l, int fd);
/* Stops accepting on every listener and closes them. */
void sandlet_listeners_close(sandlet_server *srv);

/* The supervisor's LISTEN (a new address's socket, for line m->slot of
 * the CONF that follows) and CONF messages; both take fd. */
void sandlet_reload_listen(sandlet_server *srv, const sandlet_ctl *m, int fd);
/* -1 when it cannot be applied (logged): the caller stops, since the
 * supervisor runs the new configuration's workers already and serving
 * the old one on would only fail. */
int sandlet_reload_apply(sandlet_server *srv, int fd);
void sandlet_reload_free(sandlet_server *srv);
/* Sets srv->conn_cap from the configuration and the open-files limit;
 * warns, once per value, when the limit is the smaller. */
void sandlet_server_caps(sandlet_server *srv);

/* ---- accesslog.c ------------------------------------------------------- */

/* ---- dispatch.c -------------------------------------------------------- */

/* The server's request hook: routes c's request whose head is parsed. */
void sandlet_dispatch_route(sandlet_conn *c);
/* The server's dispatch hook: hands c's request to whoever answers it. */
void sandlet_dispatch(sandlet_conn *c);
/* The server's release hook: what a route held (its generation) goes. */
void sandlet_dispatch_release(void *held);
/* The server's hooks as the acceptor wires them (main.c, and the HTTP
 * fuzz target in its place): dispatch.c routes and dispatches, the access
 * log hears each answer, and idle is the caller's (main.c's
 * sandlet_server_check_stopped). */
#define SANDLET_SERVER_HOOKS(idle_)                                                                \
    {                                                                                              \
        .request = sandlet_dispatch_route, .dispatch = sandlet_dispatch,                           \
        .done = sandlet_access_log, .idle = (idle_), .release = sandlet_dispatch_release,          \
    }

void sandlet_access_start(sandlet_server *srv);
/* One line for the request c just answered. */
void sandlet_access_log(sandlet_conn *c);
void sandlet_access_flush(sandlet_server *srv);
/* Takes fd (freshly opened by the supervisor) as the new log. */
void sandlet_access_reopen(sandlet_server *srv, int fd);

/* ---- status.c --------------------------------------------------------- */

/* Answers the status page (route.c decided c is for it). */
void sandlet_status_serve(sandlet_conn *c);
/* Whether sandletd was started as root, so that the status page can say
 * which uid a sandbox without a user runs as (main.c, before the drop). */
void sandlet_status_root_start(bool root);

/* ---- files.c ---------------------------------------------------------- */

/* Answers a request no servlet routes: a file under the docroot. */
void sandlet_files_serve(sandlet_conn *c);
/* Sends more of a large file once the client has drained. */
void sandlet_files_pump(sandlet_conn *c);
int sandlet_files_open(sandlet_server *srv);
/* The status answering a failed open beneath the docroot (static.h's
 * errors): 404, 403, 414, 503 or 500. */
int sandlet_files_status(int err);
void sandlet_files_close(sandlet_server *srv);

/* ---- pages.c ---------------------------------------------------------- */

typedef struct sandlet_page sandlet_page;
int sandlet_pages_open(sandlet_server *srv);
void sandlet_pages_free(sandlet_server *srv);
/* Answers a request route.c sent to a page. */
void sandlet_pages_serve(sandlet_conn *c);
/* The supervisor's answer (PAGE) about a page; takes fd (-1: none). */
void sandlet_pages_answer(sandlet_server *srv, const sandlet_ctl *m, int fd);
/* The connection's request no longer waits for its page (closing). */
void sandlet_pages_forget(sandlet_conn *c);
/* What the pool hands a worker for a page: its servlet view, its slot
 * among the sandbox's pages and the generation a worker must have. */
const sandlet_servlet_conf *sandlet_page_servlet(const sandlet_page *p, uint32_t *slot,
                                                 uint32_t *gen);

/* ---- pool.c, queue.c, channel.c, stream.c (pool_private.h) ------------ */

enum sandlet_worker_state { W_DOWN, W_STARTING, W_IDLE, W_BUSY, W_DYING };

/* One request handed to a worker and not yet answered in full. */
typedef struct sandlet_inflight {
    sandlet_conn *conn; /* NULL once its client left */
    uint32_t id;
    bool discard;     /* client gone or failed: drop the rest of the answer */
    unsigned timeout; /* ms it may run once the worker starts it; 0: none */
    uint64_t started; /* uv_hrtime when its head arrived (the duration histogram) */
    const sandlet_servlet_conf *servlet; /* while conn holds its configuration */
    char reqline[160];
    /* A streamed body (SANDLET_BODY_WINDOW): its last REQBODY (END, or
     * END|ABORT) has not been queued yet. */
    bool body_open;
    /* Bytes at the front of the connection's held body that the REQUEST
     * carried already: dropped only once the worker started the request
     * (request_started), so that an unstarted request can still be taken
     * back whole. */
    size_t body_sent;
    /* Taken back before the worker claimed it (claim.h) and queued for
     * another worker: the worker owes a SKIP for it, nothing else. */
    bool revoked;
    /* Its streamed multipart body is being copied into the worker's
     * spool file (stream.c): tee_at bytes so far, of tee_reserved counted
     * against the sandbox's spool-size. */
    bool teed;
    uint64_t tee_at, tee_reserved;
} sandlet_inflight;

struct sandlet_worker {
    sandlet_pool *pool;
    unsigned slot;
    uint32_t gen;
    pid_t pid;
    enum sandlet_worker_state state; /* W_BUSY while it holds requests */
    uv_pipe_t pipe;
    bool pipe_open;
    /* The previous worker's pipe handle is still closing: the next one,
     * handed over meanwhile, waits here until it is closed. */
    bool pipe_closing;
    sandlet_ctl next;
    int next_channel, next_output, next_spool; /* -1 when none waits */
    bool reading;                              /* off while the first request's client catches up */
    bool processing;                           /* worker_process is on the stack */
    bool dirty;                                /* out holds frames for the end of this loop turn */
    bool exited;                               /* the supervisor reported its exit */
    sandlet_claim *next_claim;
    /* Shared with the worker (claim.h): decides whether a request written
     * to it is served by it or taken back for another worker. */
    sandlet_claim *claim;
    /* Requests taken back from it whose SKIP has not come yet: until
     * then it gets nothing else (it is stopped, or slow on the request
     * they waited behind). */
    unsigned nrevoked;
    /* Its requests queued behind the one it serves were taken back
     * (on_behind): no more are queued behind that one. */
    bool slow;
    /* Progress mark of on_behind: the first request it had not claimed
     * at the last look; the same one at the next look means no progress. */
    uint32_t behind_id;
    uint32_t next_id;  /* its requests are numbered 1, 2, ... (claim.h) */
    uv_timer_t behind; /* looks for requests stuck behind a slow one */
    bool claimed;      /* its first request's claim was seen (request_started) */
    bool claim_timer;  /* deadline was last started for the claim check */
    /* Its spool file, writable (-1: its sandbox has none): the worker
     * reads the streamed multipart bodies copied here (stream.c).
     * spool_len: the bytes written since it was last emptied. */
    int spool_fd;
    uint64_t spool_len;
    /* Its lanes (lane.h), in the claim word's mapping: tx carries the
     * frames for it, rx its frames back. */
    sandlet_lane tx, rx;
    sandlet_buf in;  /* frames from the worker, copied out of rx */
    sandlet_buf out; /* frames for it that wait for room in tx */
    /* The requests written to the worker and not yet answered, oldest
     * first: the one it serves, then those queued in its lane (at most
     * the pool's depth, "pipeline"). */
    sandlet_inflight *ring;
    unsigned rfirst, rcount;
    bool got_head;     /* the first request's RESPONSE frame arrived */
    uint64_t dropped;  /* bytes of the first request's answer thrown away */
    bool recycling;    /* killed on purpose (client left): not a crash */
    char reqline[160]; /* the first request, kept for the log of its end */
    char servlet[96];
    uv_timer_t deadline; /* the first request's timeout */
    bool timed_out;
    uint64_t started;    /* uv_now when the first request became first */
    uint64_t served;     /* by this incarnation, for max-requests */
    uint32_t pages_gen;  /* the pages generation its INIT carried */
    bool retired;        /* replaced on purpose (retire()): its exit is no news */
    uint64_t idle_since; /* uv_now when it last became idle (extras retire on it) */
    uint64_t start_no;   /* its pool's count of workers taken, when it was taken */
    bool past_max_said;  /* "serves on past max-requests" was logged */
};

/* The request-duration histogram's upper bounds, in microseconds (+Inf
 * is the count itself). */
#define SANDLET_DURATION_BUCKETS 12
extern const uint64_t sandlet_duration_bounds_us[SANDLET_DURATION_BUCKETS];

struct sandlet_pool {
    sandlet_server *srv;
    uint32_t id;                      /* the sandbox's (sandlet_sandbox_conf.id) */
    sandlet_confgen *gen;             /* held: conf lives in it */
    const sandlet_sandbox_conf *conf; /* workers is fixed: reloads keep only equal ones */
    sandlet_pool *next;               /* the server's list */
    bool retired;                     /* a reload changed or removed its sandbox */
    unsigned closing;                 /* handles still closing once it is empty */
    /* max-workers slots: the first conf->workers always run (the
     * supervisor restarts them); the others ("extras") are W_DOWN until a
     * waiting request makes the pool ask for one (GROW), and retired after
     * worker-idle-timeout idle. */
    unsigned nworkers;
    sandlet_worker *workers;
    /* A GROW was sent for extra slot grow_slot at grow_at and its worker
     * has not said READY (or failed) yet: at most one at a time, so a
     * burst grows the pool by one worker per start, not all at once. */
    bool growing;
    unsigned grow_slot;
    uint64_t grow_at;
    uint64_t grow_after; /* no GROW before this uv_now: an extra failed to start */
    uv_timer_t idle;     /* retires idle extras; runs while one is up */
    uint64_t grown;      /* extra workers started, for the status page */
    uint64_t maxed_at;   /* uv_now of the last "all max-workers busy" warning */
    sandlet_conn *qhead, *qtail;
    size_t queued;
    uv_timer_t qtimer;  /* expires requests that waited too long */
    uint16_t nservlets; /* configured servlets: pages' indexes follow them */
    unsigned depth;     /* "pipeline": ring size of each worker, fixed */
    /* The newest code generation (pages, or servlets after a reload)
     * the supervisor announced: workers with an older one are replaced,
     * one first, then the others once a new one has said READY, so that
     * code that no longer starts leaves the old workers serving. */
    uint32_t pages_gen;
    bool canary; /* one stale worker was retired; its successor has not said READY */
    /* Workers taken so far (each one's start_no), and the start_no of the
     * newest that failed to start (its servlets did not load or init, or
     * it died first), 0 once a worker taken after it said READY: while
     * set, what is on disk may not start, and the last worker up is not
     * recycled for max-requests (sandlet_may_recycle). */
    uint64_t starts;
    uint64_t failed_start;
    /* Run once per loop turn while workers are dirty, so that everything
     * handed to a worker in one turn leaves in one write: the check after
     * all I/O callbacks, the prepare after the timers and before the poll
     * (which would otherwise first wait for the next event). */
    uv_check_t flush;
    uv_prepare_t flush_early;
    unsigned ndirty;
    /* The workers' answers in their lanes (lane.h): read every loop turn
     * after the poll (lanes_awake), doorbells asked for before it
     * (lanes_asleep), and lanes_look active when one had something
     * between the two, so that the poll does not sleep. */
    uv_check_t lanes_awake;
    uv_prepare_t lanes_asleep;
    uv_idle_t lanes_look;
    /* The last worker start failed (its servlet would not load or init)
     * and no worker is up: requests get 503 at once instead of waiting
     * queue-timeout for a worker that will not come. */
    bool failing;
    /* Bytes of spool-size held by the bodies being copied to its
     * workers' spool files, and when "spool full" was last said. */
    uint64_t spool_used;
    uint64_t spool_full_at;
    uint64_t spool_full; /* forms not copied for want of room, for the status page */
    /* Counters for the status page, since start. */
    uint64_t served, restarts, crashes, timeouts, seccomp_kills, rejected;
    uint64_t landlock_denials; /* the kernel's records, as the supervisor counted them */
    /* Requests taken back from a worker that did not start them in
     * SANDLET_CLAIM_MS and handed to another. */
    uint64_t moved;
    /* Requests written to a worker that still held others ("pipeline"). */
    uint64_t batched;
    /* How long requests of each servlet (or page) ran, recently: a small
     * table keyed by the servlet's configuration view, 8 times the
     * moving average in ms (sandlet_slow_note, queue.c). */
    struct {
        const void *servlet;
        uint32_t avg8;
    } slow[64];
    /* How long requests answered by a worker took, from their head's
     * arrival to the worker's last byte (queue time included): counts per
     * upper bound of SANDLET_DURATION_BOUNDS (cumulative when shown) and
     * the sum, for the Prometheus histogram. */
    uint64_t duration_le[SANDLET_DURATION_BUCKETS];
    uint64_t duration_sum_us, duration_count;
};

int sandlet_pools_start(sandlet_server *srv);
/* Hands a parsed request to its sandbox: a worker now, or the queue. */
void sandlet_pool_submit(sandlet_pool *p, sandlet_conn *c);
/* The client of c went away while c waited or was served. */
void sandlet_pool_forget(sandlet_conn *c);
/* The supervisor announced code generation gen for p's sandbox (a
 * page's new version, or a reload): workers started before it are
 * replaced as they go idle, one at first, the rest once a worker of the
 * new generation is up. */
void sandlet_pool_pages(sandlet_pool *p, uint32_t gen);
/* The client drained below the high-water mark: read the worker again. */
void sandlet_pool_resume(sandlet_conn *c);
/* c's streamed body got more bytes, or ended (sandlet_conn_body): queue
 * what may go to its worker.  Nothing while c waits in the queue. */
void sandlet_pool_body_more(sandlet_conn *c);
/* Bytes of c's body queued for its worker and not yet copied into its
 * lane (0 when c is at no worker). */
size_t sandlet_pool_body_backlog(const sandlet_conn *c);
void sandlet_pools_stop(sandlet_server *srv);
/* A report from the supervisor about one worker. */
void sandlet_pool_control(sandlet_server *srv, const sandlet_ctl *m);
/* The supervisor started a worker (WORKER message): channel is its end of
 * the worker's socketpair with INIT already written, output the read end
 * of the worker's stdout/stderr pipe, claim its claim word's memfd
 * (claim.h), spool its spool file, writable (stream.c); any may be -1.
 * Takes all four. */
void sandlet_pool_worker(sandlet_server *srv, const sandlet_ctl *m, int channel, int output,
                         int claim, int spool);

/* ---- workerlog.c -------------------------------------------------------- */

/* Reads worker w's standard output and error from fd (taking it) and
 * writes them to the error log, line by line, never blocking the loop. */
int sandlet_workerlog_attach(sandlet_server *srv, sandlet_worker *w, int fd);
void sandlet_pools_free(sandlet_server *srv);
/* The pool of sandbox id, or NULL. */
sandlet_pool *sandlet_pool_find(sandlet_server *srv, uint32_t id);
/* A pool for sandbox index of g (g held by it), linked into the server's
 * list.  NULL when out of memory. */
sandlet_pool *sandlet_pool_new(sandlet_server *srv, sandlet_confgen *g, size_t index);
/* A reload kept p's sandbox: its settings are now index of g's. */
void sandlet_pool_rebase(sandlet_pool *p, sandlet_confgen *g, size_t index);
/* A reload changed or removed p's sandbox: p takes no new request; its
 * queue is served, then its workers are closed one by one as they go
 * idle, then it is freed. */
void sandlet_pool_retire(sandlet_pool *p);
/* False (after logging why) when a response header of c's worker may not
 * reach the client: a Set-Cookie for another sandbox's session cookie,
 * with which a servlet could plant a session id (fixation) or erase a
 * session in the client's jar. */
bool sandlet_pool_header_allowed(const sandlet_conn *c, const char *name, size_t name_len,
                                 const char *value, size_t value_len);

/* ---- setcookie.c ------------------------------------------------------- */

/* False (after logging why) when c's servlet, of sandbox own, may not send
 * the Set-Cookie value (len bytes): the cookie would come back to the
 * server, as a browser reads it (RFC 6265bis), as a session cookie other
 * than own's. */
bool sandlet_setcookie_allowed(const sandlet_conn *c, const sandlet_sandbox_conf *own,
                               const char *value, size_t value_len);

/* ---- workerlog.c ------------------------------------------------------- */

/* What workers write to standard output and error reaches the error log
 * only through here: read from each worker's own pipe without blocking,
 * one line at a time, escaped, cut at SANDLET_WORKERLOG_LINE bytes,
 * prefixed with pid, sandbox and servlet, at most
 * SANDLET_WORKERLOG_RATE lines a second (bursts of twice that) and a
 * byte budget; what is dropped is counted and reported. */
#define SANDLET_WORKERLOG_LINE 1024
#define SANDLET_WORKERLOG_RATE 100
/* Takes fd (the read end of w's output pipe, w->pid set) and reads it
 * until its end; 0, or -errno with fd closed. */
int sandlet_workerlog_attach(sandlet_server *srv, sandlet_worker *w, int fd);
/* Writes the n bytes at in to out (cap bytes) as a log line may show
 * them: bytes below 0x20 but tab, 0x7f, backslash, C1 controls and
 * whatever is not valid UTF-8 become \xNN.  Returns the length written;
 * *used gets how many input bytes it covers (fewer than n when out is
 * full). */
size_t sandlet_workerlog_escape(char *out, size_t cap, const uint8_t *in, size_t n, size_t *used);
/* Frees the readers left when the loop has ended. */
void sandlet_workerlog_free(sandlet_server *srv);
/* p goes (a reload retired it): readers of its workers' output stop
 * looking at them. */
void sandlet_workerlog_forget_pool(sandlet_server *srv, const sandlet_pool *p);

/* ---- main.c ------------------------------------------------------------ */

/* Sends a control message to the supervisor; logs and returns the error. */
int sandlet_server_control(sandlet_server *srv, uint32_t type, uint32_t sandbox, uint32_t slot,
                           uint32_t gen, int32_t status);
/* Sends a whole control message (a PAGE_CHECK); as above. */
int sandlet_server_send(sandlet_server *srv, const sandlet_ctl *msg);
/* Called whenever a connection or worker finishes during shutdown. */
void sandlet_server_check_stopped(sandlet_server *srv);

#endif /* SANDLET_ACCEPTOR_H */

/*
 * worker.c - the worker: start with nothing it was not given, read INIT,
 * confine itself (identity, limits, Landlock) before it loads a servlet,
 * load the sandbox's servlets and run their init, load the seccomp
 * allowlist onto every thread, then read one request frame at a time, run
 * the servlet, write the response frames; run destroy when the acceptor
 * closes the socketpair.
 *
 * A worker serves one request at a time with blocking I/O: it has nothing
 * else to do while a servlet runs, and blocking calls keep the system-call
 * surface (the future seccomp allowlist) small.  It must never speak HTTP:
 * the acceptor owns the client connection and the framing of responses.
 * Its clients do not trust each other: when a request ends, what it left
 * in the worker's buffers, arena and stack is wiped before the next one,
 * and requests queued behind it wait in the socket, unread (read_frame):
 * a servlet's over-read finds neither the previous client's request nor
 * the next one's.  (A servlet that reads the socket itself sees what is
 * queued there: the trust boundary is the sandbox, sandlet-security(7).)
 * No servlet code -- a library constructor included -- ever runs before
 * the first confinement step, nor as root.
 */
#include "config.h"

#include "sandbox/worker.h"
#include "lib/servlet.h"
#include "common/conf.h"
#include "common/log.h"
#include "sandbox/claim.h"
#include "sandbox/lane.h"
#include "sandbox/confine.h"
#include "sandbox/crashreport.h"
#include "sandbox/denial.h"
#include "sandbox/filehint.h"
#include "sandbox/frame.h"
#include "sandbox/session_store.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

typedef struct loaded {
    const char *path; /* route, for logs */
    sandlet_lib_servlet run;
    bool page;        /* a C Server Page: one that fails to load is only absent */
    bool absent;      /* a page slot with nothing loaded: its requests get 500 */
    int slot;         /* a page's crash-report slot + 1; 0 for a servlet */
    char *lines;      /* a page's line table path, for the crash report */
    unsigned timeout; /* ms; the database's statement timeout follows it */
} loaded;

static struct {
    int fd;
    sandlet_buf in;      /* bytes read from the acceptor, not yet consumed */
    size_t in_dirty;     /* bytes of in's memory written since the last wipe */
    uint8_t *init;       /* the INIT payload; servlet params point into it */
    loaded *servlets;    /* the configured servlets, then the pages */
    size_t nservlets;    /* both */
    sandlet_buf head;    /* scratch for the response head frame */
    sandlet_buf reqhead; /* REQUEST payload of a request whose body streams */
    uint32_t id;         /* request being served */
    /* A streamed body (REQUEST without END): REQBODY frames of id are to
     * come (body_open); the piece handed to the servlet last is the frame
     * at the front of in, body_consume bytes, dropped at the next pull. */
    bool body_open;
    bool body_broken; /* a frame that is no REQBODY of id: a protocol error */
    size_t body_consume;
    /* A request the acceptor took back before we claimed it.  It sends no
     * REQBODY for one it took back (it streams a body only once the
     * request is claimed); one on its way anyway is dropped.  0: none. */
    uint32_t skip;
    sandlet_claim *claim;    /* shared with the acceptor (claim.h) */
    sandlet_lane tx, rx;     /* our frames out, the acceptor's in (lane.h) */
    bool on_lanes;           /* past INIT, which the supervisor writes to fd */
    sandlet_confine confine; /* applied around the loading of the servlets */
    bool confine_on;
    pid_t supervisor;                /* the parent at exec: we die with it */
    sandlet_session_store *sessions; /* the sandbox's shared store, or NULL */
    unsigned session_mode;           /* SANDLET_SESSIONS_* */
    sandlet_session_config session;  /* from INIT, installed once servlets are loaded */
    /* The sandbox's database (sandlet.conf "database"), from INIT only:
     * the conninfo points into w.init; the password is our own copy, the
     * INIT buffer's is wiped.  NULL: no database. */
    const char *db_conninfo;
    char *db_password;
    char gaps[512]; /* what the kernel cannot fence, warned after init */
    /* wipe_stack: the minor faults counted after the pages below the
     * stack's hot part were last given back; ok: that worked. */
    long stack_faults;
    bool stack_faults_ok;
    size_t stack_keep;       /* the top of the window zeroed every time */
    unsigned stack_wipes;    /* counted up to STACK_SETTLED */
    struct timespec started; /* CLOCK_MONOTONIC at start, for uptime_ms() */
    /* The thread's voluntary context switches at the last wipe, and our
     * own sleeps for a doorbell since: a request that switched more often
     * than we slept blocked in its servlet (count_blocked). */
    long nvcsw;
    unsigned bell_sleeps;
    /* Development mode where the kernel records no Landlock denial: the
     * refused file calls are noted (filehint.c) and explained here, each
     * (call, path) once; hint_ctx holds the paths they are judged by. */
    bool hints;
    sandlet_hint_ctx hint_ctx;
    uint64_t hinted[64];
    size_t nhinted, next_hinted; /* filled, and the next to forget once full */
} w;

/* A worker whose database connection broke leaves after its request, but
 * not before this much life (sandlet_lib_db_wants_fresh). */
#define FRESH_AFTER_MS 1000

static long long uptime_ms(void)
{
    struct timespec now;
    if (clock_gettime(CLOCK_MONOTONIC, &now) < 0)
        return 0;
    return (long long)(now.tv_sec - w.started.tv_sec) * 1000 +
           (now.tv_nsec - w.started.tv_nsec) / 1000000;
}

/* Sleeps until the acceptor rings (the futex in our lane's control,
 * lane.h; count is what it read before its last look) or says it is
 * done with us.  Returns 1 when rung, 0 when done, or -errno.
 *
 * Now and then it also looks at the socketpair, which the acceptor
 * writes nothing to after INIT (non-blocking since then): its end of
 * file says that the acceptor's process ended without a word.  A close
 * reads as a reset when a doorbell of ours was still unread in the
 * acceptor's end: ended all the same. */
static int wait_bell(uint32_t count)
{
    for (;;) {
        w.bell_sleeps++;
        int rc = sandlet_lane_bell_wait(&w.rx, count, SANDLET_LANE_LOOK_MS);
        if (rc != -ETIMEDOUT)
            return rc;
        char b;
        ssize_t n = read(w.fd, &b, 1);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 0;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -errno;
    }
}

/* Rings the acceptor when it asked to be (it sleeps, or waits for room
 * in our lane).  Its socket buffer holds a doorbell or two at most: it
 * asks once per loop turn and we answer once.  An acceptor that closed
 * our channel meanwhile (it read our answer by itself and retired us:
 * max-requests, a reload) needs no doorbell: our next read says so. */
static int ring_acceptor(bool asked)
{
    if (!asked)
        return 0;
    static const char bell = 0;
    for (;;) {
        if (write(w.fd, &bell, 1) == 1)
            return 0;
        /* Full: the acceptor has doorbells of ours it has not read yet. */
        if (errno == EPIPE || errno == ECONNRESET || errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

/* Copies the pieces into our lane, waiting for room while the acceptor
 * catches up, as a blocking socket write would. */
static int write_all(const struct iovec *iov, int n)
{
    for (int i = 0; i < n; i++) {
        const unsigned char *p = iov[i].iov_base;
        size_t left = iov[i].iov_len;
        while (left) {
            ssize_t k = sandlet_lane_put(&w.tx, p, left);
            if (k < 0)
                return (int)k;
            p += k;
            left -= (size_t)k;
            if (k > 0)
                continue;
            /* Full: what it holds must reach the acceptor before we sleep. */
            int rc = ring_acceptor(sandlet_lane_ring_consumer(&w.tx));
            if (rc < 0)
                return rc;
            uint32_t bells = sandlet_lane_bell_count(&w.rx);
            if (sandlet_lane_wait_room(&w.tx))
                continue;
            rc = wait_bell(bells);
            if (rc <= 0)
                return rc ? rc : -EPIPE;
        }
    }
    return ring_acceptor(sandlet_lane_ring_consumer(&w.tx));
}

/* Bytes into our lane as they are, for the tests that play a hostile
 * worker (tests/fixtures: forged frames, garbage, FAIL floods).  Exported
 * (filehint.sym) because a servlet is the only code that can play one;
 * it gains nothing by it that writing into its lane's memory, mapped in
 * its own address space, would not give it.  Returns 0 or -errno. */
int sandlet_worker_raw(const void *p, size_t len);
int sandlet_worker_raw(const void *p, size_t len)
{
    struct iovec iov = {(void *)p, len};
    return write_all(&iov, 1);
}

/* Sends the frame in w.head (begun at 0) followed by len more bytes of
 * its payload, which are not copied. */
static int send_frame(uint16_t flags, const void *data, size_t len)
{
    int rc = sandlet_frame_finish_more(&w.head, 0, flags, len);
    if (rc == 0) {
        struct iovec iov[2] = {{w.head.data, w.head.len}, {(void *)data, len}};
        rc = write_all(iov, len ? 2 : 1);
    }
    /* The head may hold the response's headers (a session cookie). */
    sandlet_buf_wipe(&w.head, 0, w.head.len);
    sandlet_buf_reset(&w.head);
    return rc;
}

/* The response sink: turns output pieces into RESPONSE and BODY frames. */
static int sink(void *ctx, const sandlet_lib_output *out)
{
    (void)ctx;
    const uint8_t *body = out->body;
    size_t left = out->body_len;
    sandlet_buf_reset(&w.head);
    if (out->head) {
        sandlet_wire_response rs = {
            .status = (uint16_t)out->status,
            .nheaders = (uint16_t)out->nheaders,
            .content_length = out->end ? out->body_len : SANDLET_LENGTH_UNKNOWN,
        };
        sandlet_wire_response_begin(&w.head, w.id, &rs);
        for (size_t i = 0; i < out->nheaders; i++)
            sandlet_wire_header_put(&w.head, out->headers[i].name, out->headers[i].name_len,
                                    out->headers[i].value, out->headers[i].value_len);
        if (w.head.error)
            return w.head.error;
        if (w.head.len - SANDLET_FRAME_HEADER > SANDLET_FRAME_MAX)
            return -EMSGSIZE;
    } else {
        sandlet_wire_body_begin(&w.head, w.id);
    }
    for (;;) {
        size_t room = SANDLET_FRAME_MAX - (w.head.len - SANDLET_FRAME_HEADER);
        size_t n = left < room ? left : room;
        bool last = n == left;
        int rc = send_frame(last && out->end ? SANDLET_FRAME_END : 0, body, n);
        if (rc < 0)
            return rc;
        body += n;
        left -= n;
        if (last)
            return 0;
        sandlet_wire_body_begin(&w.head, w.id);
    }
}

static int read_frame(sandlet_frame_hdr *h);

/* Drops the REQBODY frame whose bytes were handed out last. */
static void drop_piece(void)
{
    if (w.body_consume) {
        sandlet_buf_consume(&w.in, w.body_consume);
        w.body_consume = 0;
    }
}

/* Zeroes what of the input buffer was written and is consumed: the
 * frames of a request that is over, ours or another client's. */
static void wipe_consumed_input(void)
{
    sandlet_buf_wipe(&w.in, w.in.len, w.in_dirty);
    w.in_dirty = w.in.len;
}

/* Drops a frame of a request taken back from us, another client's that
 * was never ours to serve: wiped at once, as a served one is after it,
 * since the next servlet to run here may be any client's. */
static void drop_skipped(const sandlet_frame_hdr *h)
{
    sandlet_buf_consume(&w.in, SANDLET_FRAME_HEADER + h->length);
    wipe_consumed_input();
}

/* The servlet's pull of a streamed body (sandlet_lib_body_pull): reads
 * the next REQBODY frame of the request into in and hands out its bytes
 * where they lie.  END|ABORT, or any other frame, ends the body as
 * incomplete; the other frame also ends the worker after the request. */
static int pull_body(void *ctx, const void **data, size_t *len)
{
    (void)ctx;
    drop_piece();
    while (w.body_open) {
        sandlet_frame_hdr h;
        int rc = read_frame(&h);
        if (rc <= 0 || h.type != SANDLET_FRAME_REQBODY || h.id != w.id) {
            if (rc < 0)
                sandlet_log_errno(SANDLET_LOG_ERROR, rc, "reading a request body");
            w.body_open = false;
            w.body_broken = true;
            return -1;
        }
        w.body_consume = SANDLET_FRAME_HEADER + h.length;
        if (h.flags & SANDLET_FRAME_END)
            w.body_open = false;
        if (h.flags & SANDLET_FRAME_ABORT)
            return -1;
        if (h.length) {
            *data = w.in.data + SANDLET_FRAME_HEADER;
            *len = h.length;
            return 1;
        }
        drop_piece();
    }
    return 0;
}

/* After the servlet returned: the rest of its streamed body, which it
 * did not read, is read and dropped up to its END, so that the next frame
 * is the next request's.  False on a protocol error. */
static bool body_skip(void)
{
    const void *data;
    size_t len;
    while (pull_body(NULL, &data, &len) > 0) {
    }
    drop_piece();
    return !w.body_broken;
}

/* Writes the one frame an encoder just put in w.head; rc is the
 * encoder's result. */
static int send_head(int rc)
{
    if (rc == 0) {
        struct iovec iov = {w.head.data, w.head.len};
        rc = write_all(&iov, 1);
    }
    sandlet_buf_reset(&w.head);
    return rc;
}

/* READY, or FAIL with msg. */
static int send_simple(const char *msg)
{
    sandlet_buf_reset(&w.head);
    return send_head(msg ? sandlet_wire_fail_encode(&w.head, msg)
                         : sandlet_wire_ready_encode(&w.head));
}

/* The acceptor took request id back before we claimed it (claim.h):
 * another worker serves it. */
static int send_skip(uint32_t id)
{
    sandlet_buf_reset(&w.head);
    return send_head(sandlet_wire_skip_encode(&w.head, id));
}

/* Reads until a whole frame is buffered.  Returns 1 with the header, 0 at
 * a clean end of stream, or a negative errno for I/O or protocol errors.
 *
 * Never copies past the end of that frame but for the next frame's
 * 12-byte header: the acceptor may have queued several requests
 * (pipeline), and those the worker has not started stay in its lane
 * (lane.h), never in its memory, where a servlet's over-read could find
 * them.  The header (type, flags, id, length) carries nothing of a
 * client's, and taking it with the frame before it saves a copy. */
static int read_frame(sandlet_frame_hdr *h)
{
    for (;;) {
        int rc = sandlet_frame_header_decode(w.in.data, w.in.len, h);
        size_t need = SANDLET_FRAME_HEADER;
        if (rc == 0) {
            need += h->length;
            if (w.in.len >= need)
                return 1;
        } else if (rc != -EAGAIN) {
            return rc;
        }
        size_t want = need + (w.on_lanes ? SANDLET_FRAME_HEADER : 0) - w.in.len;
        if (sandlet_buf_reserve(&w.in, want) < 0)
            return w.in.error;
        ssize_t n;
        if (!w.on_lanes) {
            /* INIT, exactly: the socket carries doorbells after it. */
            n = read(w.fd, w.in.data + w.in.len, want);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -errno;
            if (n == 0)
                return w.in.len ? -EPROTO : 0;
        } else {
            n = sandlet_lane_get(&w.rx, w.in.data + w.in.len, want);
        }
        if (n < 0)
            return (int)n;
        if (n == 0) {
            /* Nothing queued: sleep until the acceptor rings. */
            uint32_t bells = sandlet_lane_bell_count(&w.rx);
            if (sandlet_lane_wait_data(&w.rx))
                continue;
            rc = wait_bell(bells);
            sandlet_lane_awake(&w.rx);
            if (rc < 0)
                return rc;
            if (rc == 0)
                return w.in.len ? -EPROTO : 0;
            continue;
        }
        /* The acceptor waits for room to hand us more (a body). */
        rc = ring_acceptor(sandlet_lane_ring_producer(&w.rx));
        if (rc < 0)
            return rc;
        w.in.len += (size_t)n;
        if (w.in.len > w.in_dirty)
            w.in_dirty = w.in.len;
    }
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sandlet_error("%s", msg);
    send_simple(msg);
    exit(1);
}

/* Reads the confinement part of INIT into w.confine.  The library paths
 * become readable under Landlock, with what dlopen() needs to load them. */
static void confine_settings(const sandlet_wire_init *in, const char *sandbox, const char **libs,
                             size_t nlibs, bool write_blocked)
{
    sandlet_confine *c = &w.confine;
    memset(c, 0, sizeof(*c));
    c->sandbox = sandbox;
    w.confine_on = in->confine;
    c->uid = in->uid == SANDLET_WIRE_KEEP_ID ? (uid_t)-1 : (uid_t)in->uid;
    c->gid = in->gid == SANDLET_WIRE_KEEP_ID ? (gid_t)-1 : (gid_t)in->gid;
    c->memory = (unsigned long long)in->memory_mib << 20;
    c->open_files = in->open_files;
    c->cpu_seconds = in->cpu_seconds;
    c->core_dumps = in->core_dumps;
    c->groups = sandlet_confine_groups(in->syscalls);
    c->learn = in->learn;
    /* No unix socket once confined, whatever the database: one on a unix
     * socket is connected before (below), and reconnected by a fresh
     * worker (sandlet_lib_db_fresh_only), so that no servlet can
     * connect() to another pathname socket (issue 29). */
    c->unix_sockets = false;
    c->read_paths = in->readable;
    c->nread = in->nreadable;
    c->lib_paths = libs;
    c->nlibs = nlibs;
    c->write_paths = in->writable;
    c->nwrite = in->nwritable;
    c->file_size = in->max_file_size;
    c->connect_ports = in->ports;
    c->nports = in->nports;
    c->write_blocked = write_blocked;
}

/* The upload spool: a read-only descriptor of the file the acceptor
 * copies streamed multipart bodies into (lib/spool.c), from the
 * supervisor.  The worker never makes, names or writes a spool file, so
 * it has no right in the spool folder at all.  Anything but a read-only
 * regular file there is refused: large file parts then stay in memory. */
static void spool_settings(const sandlet_wire_init *in, const char *sandbox)
{
    int fd = SANDLET_SPOOL_FD;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return; /* no spool: none given */
    if (!in->spool || !in->spool[0]) {
        /* INIT names the spool folder only when the supervisor gave us a
         * file there: whatever else sits on 6 was left by someone else. */
        close(fd);
        return;
    }
    struct stat st;
    if ((fl & O_ACCMODE) != O_RDONLY || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        sandlet_warn("sandbox '%s': descriptor %d is not a read-only spool file; large multipart "
                     "file parts stay in memory",
                     sandbox, fd);
        close(fd);
        return;
    }
    sandlet_lib_spool_set(fd);
}

static void database_settings(const sandlet_wire_init *in)
{
    w.db_conninfo = in->database && in->database[0] ? in->database : NULL;
    char *pw = (char *)in->database_password;
    if (!pw || !pw[0])
        return;
    w.db_password = strdup(pw);
    sodium_memzero(pw, strlen(pw));
    if (!w.db_password)
        fail("out of memory keeping the database password");
}

/* Reads the session part of INIT and maps the sandbox's store, which the
 * supervisor passed on SANDLET_SESSION_FD.  Runs before confinement:
 * afterwards the mapping needs no system call but futex (the store's
 * lock) and getrandom (new ids), both in the base allowlist.  Without
 * memory sessions, descriptor 4 is not ours: closed. */
static void session_settings(const sandlet_wire_init *in, const char *sandbox)
{
    unsigned mode = in->sessions;
    unsigned timeout = in->session_timeout;
    bool secure = in->cookie_secure;
    const char *cookie = in->cookie_name;
    const char *path = in->cookie_path;
    /* The key lies in w.init, our own copy, which is wiped below (hence
     * no const). */
    size_t keylen = SANDLET_WIRE_KEY_LEN;
    uint8_t *key = (uint8_t *)in->key;
    sandlet_session_config cfg = {.ops = &sandlet_session_memory_ops,
                                  .max_data = SANDLET_SESSION_SLOT_DATA,
                                  .cookie_secure = secure,
                                  .sandbox = sandbox,
                                  .cookie_name = cookie,
                                  .cookie_path = path};
    memcpy(cfg.key, key, SANDLET_SESSION_KEY_LEN);
    /* One copy until the servlets are loaded, none in the INIT buffer,
     * which servlets' parameters point into for the worker's life. */
    sodium_memzero(key, keylen);
    w.session = cfg;
    sodium_memzero(cfg.key, sizeof(cfg.key));
    if (mode > SANDLET_SESSIONS_DATABASE)
        fail("the INIT frame names session store %u, which this worker does not know", mode);
    w.session_mode = mode;
    if (mode == SANDLET_SESSIONS_DATABASE) {
        /* Sessions go through the database connection opened below; the
         * store's state is libsandlet's. */
        w.session.ops = &sandlet_lib_session_db_ops;
        w.session.max_data = SANDLET_SESSION_DB_DATA;
        w.session.store = sandlet_lib_session_db_store(sandbox, timeout);
        if (!w.session.store)
            fail("out of memory setting up the database sessions of sandbox '%s'", sandbox);
    }
    if (mode != SANDLET_SESSIONS_MEMORY) {
        if (mode != SANDLET_SESSIONS_DATABASE)
            sodium_memzero(w.session.key, sizeof(w.session.key));
        close(SANDLET_SESSION_FD);
        return;
    }
    w.sessions = sandlet_session_store_attach(SANDLET_SESSION_FD, timeout);
    if (!w.sessions)
        fail("cannot map the session store of sandbox '%s' on descriptor %d: %s", sandbox,
             SANDLET_SESSION_FD, strerror(errno));
    /* The mapping stays; the descriptor is of no further use. */
    close(SANDLET_SESSION_FD);
}

/* Once the servlets are loaded: what they ask of sessions against what
 * the sandbox offers, then the sessions' settings installed. */
static void session_configure(const char *sandbox)
{
    for (size_t i = 0; i < w.nservlets; i++) {
        if (w.servlets[i].absent)
            continue;
        /* A servlet that needs sessions runs on either store; one that
         * asks for the database needs sessions that outlive the worker. */
        sl_session_mode want = w.servlets[i].run.servlet->session;
        if (want == SL_SESSION_MEMORY && w.session_mode == SANDLET_SESSIONS_NONE)
            fail("servlet %s wants memory sessions but sandbox '%s' has 'sessions none'; "
                 "set 'sessions memory' (or 'sessions database') in its sandbox block",
                 w.servlets[i].path, sandbox);
        if (want == SL_SESSION_DATABASE && w.session_mode != SANDLET_SESSIONS_DATABASE)
            fail("servlet %s wants database sessions but sandbox '%s' has 'sessions %s'; set "
                 "'sessions database' and 'database \"CONNINFO\";' in its sandbox block",
                 w.servlets[i].path, sandbox,
                 w.session_mode == SANDLET_SESSIONS_MEMORY ? "memory" : "none");
        if (want != SL_SESSION_NONE && want != SL_SESSION_MEMORY && want != SL_SESSION_DATABASE)
            fail("servlet %s asks for session mode %d, which this sandletd does not know; "
                 "use SL_SESSION_NONE, SL_SESSION_MEMORY or SL_SESSION_DATABASE",
                 w.servlets[i].path, (int)want);
    }
    if (w.session_mode == SANDLET_SESSIONS_NONE)
        return;
    if (w.session_mode == SANDLET_SESSIONS_MEMORY)
        w.session.store = w.sessions;
    int rc = sandlet_lib_session_configure(&w.session);
    sodium_memzero(w.session.key, sizeof(w.session.key));
    if (rc < 0)
        fail("sandbox '%s': cannot set up sessions with cookie '%s': %s", sandbox,
             w.session.cookie_name,
             rc == -EINVAL ? "the INIT frame does not match the sandbox" : strerror(-rc));
}

/* Dies when the supervisor is gone: set again after every identity change
 * (which clears it), then checked, since the supervisor may have died
 * before it was set. */
static void die_with_supervisor(void)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
        sandlet_error("prctl(PR_SET_PDEATHSIG): %s; exiting", strerror(errno));
        _exit(1);
    }
    /* The supervisor is a fork of sandletd, never pid 1: a parent of 1
     * means it died before we looked. */
    if (w.supervisor == 1 || getppid() != w.supervisor) {
        sandlet_error("the supervisor (pid %d) is gone; exiting", (int)w.supervisor);
        _exit(1);
    }
}

/* Learning mode: Landlock has no mode that only logs, and its refusals
 * (EACCES, or EXDEV for a rename) reach the servlet alone; the kernel
 * records them only when its audit is on.  So the worker says once what
 * its servlets may open, and how to allow more. */
static void say_file_fence(const sandlet_confine *c)
{
    char list[1024];
    size_t n = 0;
    list[0] = '\0';
    for (size_t i = 0; i < c->nread + c->nwrite; i++) {
        bool rd = i < c->nread;
        const char *p = rd ? c->read_paths[i] : c->write_paths[i - c->nread];
        int k = snprintf(list + n, sizeof(list) - n, "%s%s %s", n ? ", " : "",
                         rd ? "readable" : "writable", p);
        if (k < 0 || (size_t)k >= sizeof(list) - n) {
            snprintf(list + (n < sizeof(list) - 5 ? n : sizeof(list) - 5), 5, "...");
            break;
        }
        n += (size_t)k;
    }
    sandlet_warn("sandbox '%s' (learning mode): its servlets may open their libraries%s%s and "
                 "nothing else: any other file fails with EACCES, which only the kernel's audit "
                 "log records (Linux 6.15 or later with audit on: 'ausearch -m "
                 "LANDLOCK_ACCESS'); to allow a path, add 'readable PATH;' or 'writable DIR;' "
                 "to the sandbox",
                 c->sandbox, n ? ", " : "", list);
}

/* Development mode where the kernel records no Landlock denial (INIT's
 * file hints): the wrappers of filehint.c note refused file calls from
 * now on, judged against the paths this worker's Landlock was given. */
static void hints_start(const char *sandbox, const char *cwd)
{
    const sandlet_confine *c = &w.confine;
    const char **writable = calloc(c->nwrite + 1, sizeof(*writable));
    if (!writable) {
        sandlet_warn("sandbox '%s': out of memory for development mode's file hints; none will "
                     "be given",
                     sandbox);
        return;
    }
    for (size_t i = 0; i < c->nwrite; i++)
        writable[i] = c->write_paths[i];
    size_t nw = c->nwrite; /* the spool is not the worker's (spool_settings) */
    size_t nsys;
    const char *const *sys = sandlet_confine_system_libs(&nsys);
    w.hint_ctx = (sandlet_hint_ctx){.sandbox = sandbox,
                                    .readable = c->read_paths,
                                    .nreadable = c->nread,
                                    .writable = writable,
                                    .nwritable = nw,
                                    .system = sys,
                                    .nsystem = nsys,
                                    .write_blocked = c->write_blocked};
    sandlet_filehint_start(cwd);
    w.hints = true;
}

/* What the wrappers noted since sandlet_filehint_begin, said on our
 * standard error (the acceptor logs it as a warning, with this worker's
 * sandbox and servlet): for what (a method and a target, of which the
 * path part is shown), or, without a target, the init of servlet.  Each
 * (call, path) once in a worker's life. */
static void hint(const char *what, const char *target, size_t target_len, const char *servlet)
{
    static sandlet_filehint h; /* 1 KiB: off the servlet's stack */
    if (!sandlet_filehint_end(&h))
        return;
    uint64_t key = 0xcbf29ce484222325ull;
    for (const char *p = h.call; *p; p++)
        key = (key ^ (unsigned char)*p) * 0x100000001b3ull;
    for (const char *p = h.path; *p; p++)
        key = (key ^ (unsigned char)*p) * 0x100000001b3ull;
    for (size_t i = 0; i < w.nhinted; i++)
        if (w.hinted[i] == key)
            return;
    const size_t cap = sizeof(w.hinted) / sizeof(w.hinted[0]);
    if (w.nhinted < cap) {
        w.hinted[w.nhinted++] = key;
    } else {
        w.hinted[w.next_hinted] = key;
        w.next_hinted = (w.next_hinted + 1) % cap;
    }
    static char line[3000];
    sandlet_denial_hint(&h, &w.hint_ctx, line, sizeof(line));
    size_t plen = 0;
    while (plen < target_len && plen < 200 && target[plen] != '?')
        plen++;
    if (target_len)
        sandlet_warn("%s %.*s: %s", what, (int)plen, target, line);
    else
        sandlet_warn("init of servlet %s: %s", servlet, line);
}

static void load_servlets(const char *sandbox, bool write_blocked)
{
    sandlet_frame_hdr h;
    int rc = read_frame(&h);
    if (rc <= 0 || h.type != SANDLET_FRAME_INIT)
        fail("expected an INIT frame from the acceptor (%s)", rc < 0 ? strerror(-rc) : "got none");
    w.init = malloc(h.length ? h.length : 1);
    if (!w.init)
        fail("out of memory reading the servlet list");
    memcpy(w.init, w.in.data + SANDLET_FRAME_HEADER, h.length);
    /* The frame holds the session key: no copy stays in the read buffer. */
    sodium_memzero(w.in.data, SANDLET_FRAME_HEADER + h.length);
    sandlet_buf_consume(&w.in, SANDLET_FRAME_HEADER + h.length);
    w.on_lanes = true;
    /* From now on the socketpair carries our doorbells out and, inward,
     * only its end, which wait_bell looks for without blocking. */
    int fl = fcntl(w.fd, F_GETFL);
    if (fl < 0 || fcntl(w.fd, F_SETFL, fl | O_NONBLOCK) < 0)
        fail("cannot make the acceptor's socketpair (descriptor %d) non-blocking: %s", w.fd,
             strerror(errno));

    /* The whole frame is read before anything is loaded: the libraries
     * are opened only once the worker is confined.  The decoded message
     * stays for the worker's life: the confinement and the servlets'
     * parameters point into it. */
    static sandlet_wire_init in;
    rc = sandlet_wire_init_decode(w.init, h.length, &in);
    if (rc == -ENOMEM)
        fail("out of memory reading the servlet list");
    if (rc < 0)
        fail("malformed INIT frame from the acceptor");
    w.nservlets = (size_t)in.nservlets + in.npages;
    w.servlets = calloc(w.nservlets ? w.nservlets : 1, sizeof(*w.servlets));
    /* Room for the pages' line tables after the libraries. */
    const char **libs = calloc(w.nservlets + in.npages + 1, sizeof(*libs));
    if (!w.servlets || !libs)
        fail("out of memory loading %zu servlets and pages", w.nservlets);
    for (size_t i = 0; i < in.nservlets; i++) {
        loaded *s = &w.servlets[i];
        const sandlet_wire_servlet *ws = &in.servlets[i];
        s->path = ws->path;
        s->timeout = ws->timeout;
        libs[i] = ws->library;
        size_t np = ws->nparams;
        sandlet_lib_header *params = calloc(np ? np : 1, sizeof(*params));
        if (!params)
            fail("out of memory loading servlet %s", s->path);
        for (size_t j = 0; j < np; j++) {
            params[j].name = ws->params[j].name;
            params[j].value = ws->params[j].value;
        }
        sandlet_lib_servlet_params(&s->run, params, np);
    }
    /* Pages follow the servlets; an empty slot loads nothing.  Only the
     * libraries there are become readable. */
    size_t nlibs = in.nservlets;
    for (size_t i = 0; i < in.npages; i++) {
        loaded *s = &w.servlets[in.nservlets + i];
        s->path = in.pages[i].path;
        s->timeout = in.page_timeout;
        s->page = true;
        s->absent = !in.pages[i].library[0];
        s->slot = (int)i + 1;
        if (!s->absent)
            libs[nlibs++] = in.pages[i].library;
        sandlet_lib_servlet_params(&s->run, NULL, 0);
    }
    /* Each page's line table becomes readable beside its library: the
     * crash report reads it once the worker is confined. */
    size_t nread = nlibs;
    for (size_t i = 0; i < in.npages; i++) {
        loaded *s = &w.servlets[in.nservlets + i];
        char path[4096];
        if (s->absent || sandlet_crash_lines_path(in.pages[i].library, path, sizeof(path)) < 0)
            continue;
        if (!(s->lines = strdup(path)))
            fail("out of memory loading page %s", s->path);
        libs[nread++] = s->lines;
    }
    confine_settings(&in, sandbox, libs, nread, write_blocked);
    spool_settings(&in, sandbox);
    if (in.npages && (rc = sandlet_crash_init(in.npages)) < 0)
        sandlet_warn("sandbox '%s': crash reports of pages are off: %s", sandbox, strerror(-rc));
    session_settings(&in, sandbox);
    database_settings(&in);
    /* The connection is opened here, as the sandbox's user, before
     * Landlock and the allowlist: libpq may read the user database and
     * its own files on the first connect.  Later reconnects reuse what
     * it resolved now.  An unreachable database is only a warning: the
     * rest of the sandbox serves, and the next request that needs the
     * database tries again. */
    if (w.db_conninfo) {
        char dberr[512];
        if (w.confine_on && sandlet_conf_database_unix(w.db_conninfo))
            sandlet_lib_db_fresh_only();
        if (sandlet_lib_db_open(w.db_conninfo, w.db_password, dberr, sizeof(dberr)) < 0)
            sandlet_warn("sandbox '%s': the database cannot be reached yet (%s); requests that "
                         "need it get 503 until it can",
                         sandbox, dberr);
        if (w.db_password) {
            sodium_memzero(w.db_password, strlen(w.db_password));
            free(w.db_password);
            w.db_password = NULL;
        }
    }

    /* Identity, limits, no_new_privs, Landlock and no exec or fork, before
     * the first byte of servlet code (a library constructor) runs. */
    char err[512];
    const char *gap = NULL;
    if (w.confine_on) {
        /* What this kernel leaves open of the sandbox's fence, so that an
         * operator on an older kernel knows what is not enforced (asked
         * before the filter, which refuses the question). */
        gap = sandlet_confine_kernel_gaps(&w.confine, w.gaps, sizeof(w.gaps));
        sandlet_filehint_resolve();
        char cwd[512];
        if (!getcwd(cwd, sizeof(cwd)))
            snprintf(cwd, sizeof(cwd), "/");
        bool landlock = false;
        if (sandlet_confine_begin(&w.confine, &landlock, err, sizeof(err)) < 0)
            fail("%s", err);
        if (in.file_hints && landlock)
            hints_start(sandbox, cwd);
        if (w.confine.learn)
            say_file_fence(&w.confine);
    } else {
        sandlet_warn("confinement is OFF (SANDLET_NO_CONFINEMENT is set): for "
                     "benchmarks only, never in production");
    }
    /* The supervisor starts workers as their sandbox's own uid; a worker
     * that finds itself root was started by something else, and no
     * servlet code runs as root, confined or not. */
    uid_t ruid, euid, suid;
    if (getresuid(&ruid, &euid, &suid) < 0 || ruid == 0 || euid == 0 || suid == 0)
        fail("sandbox '%s': this worker runs as root, and servlets never do; start sandletd "
             "itself (its supervisor gives every sandbox a uid of its own) rather than "
             "'sandletd --worker'",
             sandbox);
    die_with_supervisor();

    for (size_t i = 0, lib = 0; i < w.nservlets; i++) {
        loaded *s = &w.servlets[i];
        if (s->absent)
            continue;
        rc = sandlet_lib_servlet_open(&s->run, libs[lib++], "sandletd", true, err, sizeof(err));
        if (rc < 0 && s->page) {
            /* One page that will not load must not keep the sandbox's
             * servlets and other pages from serving. */
            sandlet_error("page %s: %s; its requests get 500 until it is compiled again", s->path,
                          err);
            s->absent = true;
            continue;
        }
        int crc;
        if (rc == 0 && s->page && s->lines &&
            (crc = sandlet_crash_add_page((size_t)s->slot - 1, s->path, s->run.servlet, s->lines)) <
                0)
            sandlet_warn("page %s: its line table %s is unusable (%s); a crash names no line",
                         s->path, s->lines, strerror(-crc));
        if (rc == -ENOENT)
            fail("servlet %s: %s%s", s->path, err,
                 w.confine_on ? " (a library it needs outside the system's library directories "
                                "and its RUNPATH must be among the sandbox's readable paths)"
                              : "");
        if (rc == -EPROTO)
            fail("servlet %s: %s; rebuild it", s->path, err);
        if (rc < 0)
            fail("servlet %s: %s", s->path, err);
    }
    session_configure(sandbox);
    /* Init only after every library loaded, so that a load failure never
     * leaves a half-initialised set behind. */
    for (size_t i = 0; i < w.nservlets; i++) {
        loaded *s = &w.servlets[i];
        if (s->absent)
            continue;
        if (w.hints)
            sandlet_filehint_begin();
        rc = sandlet_lib_servlet_init(&s->run);
        if (w.hints)
            hint("init", NULL, 0, s->path);
        if (rc < 0 && s->page) {
            sandlet_error("page %s: its init section returned %d; its requests get 500", s->path,
                          rc);
            s->absent = true;
            continue;
        }
        if (rc < 0)
            fail("servlet %s: init returned %d", s->path, rc);
    }
    /* Servlets are loaded and initialised (database connections opened,
     * files read, threads started): from here on the worker only serves,
     * under the allowlist, every thread of it. */
    if (w.confine_on) {
        if (sandlet_confine_finish(&w.confine, err, sizeof(err)) < 0)
            fail("%s", err);
        if (gap)
            sandlet_warn("%s", gap);
        if (w.confine.write_blocked)
            sandlet_warn("sandbox '%s' is over its write quota: its writable directories are "
                         "read-only for this worker",
                         sandbox);
    }
    w.confine.lib_paths = NULL;
    w.confine.nlibs = 0;
    free(libs);
}

static void destroy_servlets(void)
{
    for (size_t i = w.nservlets; i-- > 0;)
        sandlet_lib_servlet_destroy(&w.servlets[i].run);
}

/* Overwrites the stack below the caller, where the servlet's frames were
 * (its locals, printf buffers, copies of the request), with zeros: the
 * page-aligned window of up to 64 KiB below this frame, which covers
 * ordinary servlets; a servlet with deeper frames leaves what lies below
 * that to its own next request.
 *
 * Only what a request touched is wiped, without reading the rest: zeroing
 * the whole window cost about 2 us a request here, a third of a hello
 * request, for a servlet that touches a few KiB.  The top of the window
 * that this worker's requests use (stack_keep: 4 KiB at first, a page
 * more each time a request's frames are found below it, 16 KiB at most)
 * is zeroed each time: a hello request's frames fit in the first pages,
 * and zeroing 16 KiB for it was a sixth of the worker's time.  The
 * pages below are given back to the kernel (MADV_DONTNEED): they
 * read as zeros, and a request that touches one takes a page fault.  So
 * when the thread's count of minor faults has not moved since the last
 * wipe, no page below was touched and there is nothing to do there;
 * when it has (a deep servlet, or a fault anywhere else: the test is
 * conservative), those pages are given back again.  The thread's count,
 * not the process's: the window is this thread's stack, and the
 * process's count sums every thread's under a lock, twice the cost of a
 * hello request's whole wipe.  Transparent huge
 * pages are off for the window, as khugepaged could otherwise make a page
 * resident without a fault of ours.  Where any of this is refused, the
 * whole window is zeroed every time, as before. */
#define STACK_WIPE     ((size_t)64 * 1024)
#define STACK_KEEP_MIN ((size_t)4 * 1024)
#define STACK_KEEP_MAX ((size_t)16 * 1024)
#define STACK_SETTLED  64u /* wipes before the kept part may grow */

/* Whether the page at p holds a byte that is not zero.  Only to size the
 * kept part of the window after a fault: what it misses is given back
 * with the pages below all the same. */
static bool page_used(uintptr_t p)
{
    const unsigned char *b = (const unsigned char *)p;
    unsigned char any = 0;
    for (size_t i = 0; i < 4096; i++)
        any |= b[i];
    return any != 0;
}

/* Tells the acceptor when the request that just ended blocked (lane.h):
 * it then spreads its sandbox's requests over idle workers rather than
 * queueing them behind busy ones, which only pays when servlets do not
 * block (pick.h).  ru is the thread's usage after the request. */
static void count_blocked(const struct rusage *ru)
{
    struct timespec now;
    if (ru->ru_nvcsw - w.nvcsw > (long)w.bell_sleeps && clock_gettime(CLOCK_MONOTONIC, &now) == 0)
        atomic_store_explicit(&w.tx.ctl->blocked_at,
                              (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec,
                              memory_order_relaxed);
    w.nvcsw = ru->ru_nvcsw;
    w.bell_sleeps = 0;
}

static __attribute__((noinline)) void wipe_stack(void)
{
    unsigned char area[STACK_WIPE];
    /* Whatever frames left here: the compiler must not take it as unset. */
    __asm__ volatile("" : : "r"(area) : "memory");
    const uintptr_t page = 4096;
    uintptr_t lo = ((uintptr_t)area + page - 1) & ~(page - 1), hi = (uintptr_t)area + STACK_WIPE;
    if (w.stack_keep < STACK_KEEP_MIN)
        w.stack_keep = STACK_KEEP_MIN;
    uintptr_t cut = (hi - w.stack_keep) & ~(page - 1);
    explicit_bzero((void *)cut, hi - cut);
    struct rusage ru;
    bool have = w.stack_faults_ok && getrusage(RUSAGE_THREAD, &ru) == 0;
    if (have)
        count_blocked(&ru);
    if (have && ru.ru_minflt == w.stack_faults) {
        __asm__ volatile("" : : "r"(area) : "memory");
        return;
    }
    if (!w.stack_faults_ok)
        w.stack_faults_ok =
            madvise((void *)lo, ((hi - STACK_KEEP_MIN) & ~(page - 1)) - lo, MADV_NOHUGEPAGE) == 0;
    /* This request's frames reached below the kept part when the page
     * under it holds anything: the next requests would fault there too,
     * so it is kept (zeroed each time) from now on.  Not during the first
     * requests: the worker's start left its frames there, and the
     * dynamic linker's first calls into each library (lazy binding,
     * which saves the vector registers on the stack) go deep once. */
    if (w.stack_wipes < STACK_SETTLED)
        w.stack_wipes++;
    while (w.stack_faults_ok && w.stack_wipes >= STACK_SETTLED && w.stack_keep < STACK_KEEP_MAX &&
           cut - page >= lo && page_used(cut - page)) {
        cut -= page;
        explicit_bzero((void *)cut, page);
        w.stack_keep += page;
    }
    if (!w.stack_faults_ok || madvise((void *)lo, cut - lo, MADV_DONTNEED) < 0 ||
        getrusage(RUSAGE_THREAD, &ru) < 0) {
        w.stack_faults_ok = false;
        explicit_bzero((void *)lo, cut - lo);
    } else {
        w.stack_faults = ru.ru_minflt;
        w.nvcsw = ru.ru_nvcsw;
        w.bell_sleeps = 0;
    }
    __asm__ volatile("" : : "r"(area) : "memory");
}

/* A request ended: nothing of it may reach the next, another client's.
 * Wipes what was used (not whole capacities): the consumed input, the
 * gathered head and body, the arena, the response body, the stack. */
static void request_wipe(sl_request *rq, sl_response *rs)
{
    wipe_consumed_input();
    sandlet_buf_wipe(&w.reqhead, 0, w.reqhead.len);
    sandlet_buf_reset(&w.reqhead);
    sandlet_lib_serve_end(rq, rs);
    wipe_stack();
}

/* The request's headers as the frame holds them, handed out one by one. */
typedef struct wire_headers {
    sandlet_reader it;
    uint16_t left;
} wire_headers;

static bool next_wire_header(void *ctx, const char **name, const char **value)
{
    wire_headers *hs = ctx;
    sandlet_wire_header hd;
    if (!sandlet_wire_headers_next(&hs->it, &hs->left, &hd))
        return false;
    *name = hd.name;
    *value = hd.value;
    return true;
}

/* Runs the request in payload; streamed: its body goes on in REQBODY
 * frames, pulled while the servlet runs. */
static int serve(const uint8_t *payload, size_t len, bool streamed, sl_request *rq, sl_response *rs)
{
    sandlet_wire_request wr;
    if (sandlet_wire_request_decode(payload, len, &wr) < 0 || wr.servlet >= w.nservlets)
        return -EPROTO;
    wire_headers hs = {wr.headers, wr.nheaders};
    sandlet_lib_call call = {.method = wr.method,
                             .target = wr.target,
                             .target_len = wr.target_len,
                             .peer = wr.peer,
                             .version = wr.http_major * 10 + wr.http_minor,
                             .next_header = next_wire_header,
                             .ctx = &hs,
                             .body = wr.body,
                             .body_len = wr.body_len,
                             .body_pull = streamed ? pull_body : NULL};
    int result = 0, rc;
    if (w.servlets[wr.servlet].absent) {
        /* A page that failed to load here (the error log says why). */
        sandlet_lib_response_reset(rs);
        return sandlet_lib_response_finish(rs, 500);
    }
    sandlet_lib_db_set_timeout(w.servlets[wr.servlet].timeout);
    sandlet_crash_serving = w.servlets[wr.servlet].slot;
    if (w.hints)
        sandlet_filehint_begin();
    rc = sandlet_lib_serve(w.servlets[wr.servlet].run.servlet, rq, rs, &call, &result);
    sandlet_crash_serving = 0;
    if (w.hints)
        hint(wr.method, wr.target, wr.target_len, w.servlets[wr.servlet].path);
    if (rc < 0) {
        /* Out of memory before the servlet ran: answer for it. */
        sandlet_lib_response_reset(rs);
        return sandlet_lib_response_finish(rs, 500);
    }
    return result;
}

/* A worker has only what it was given: standard input, output and error,
 * its channel (3), the session store (4, closed when the sandbox has
 * none), its claim word (5, mapped then closed) and its spool file (6,
 * read-only, when the sandbox has a spool); every other descriptor the starting process
 * left open goes, as does the environment (the supervisor starts us with an empty one; this holds
 * when it does not). */
static void start_clean(void)
{
    if (close_range(SANDLET_SPOOL_FD + 1, ~0U, 0) < 0) {
        /* Linux before 5.9: close them one by one. */
        long max = sysconf(_SC_OPEN_MAX);
        if (max < 0 || max > 1 << 20)
            max = 1 << 20;
        for (int fd = SANDLET_SPOOL_FD + 1; fd < max; fd++)
            close(fd);
    }
    /* The strings themselves lie at the top of our stack, where a servlet
     * could still find them after clearenv() drops the pointers. */
    for (char **e = environ; e && *e; e++)
        explicit_bzero(*e, strlen(*e));
    if (clearenv() != 0) {
        sandlet_error("cannot clear the environment; exiting");
        _exit(1);
    }
}

int sandlet_worker_main(const char *sandbox, pid_t supervisor, bool write_blocked)
{
    char role[64];
    snprintf(role, sizeof(role), "worker %s", sandbox);
    sandlet_log_set_role(role);
    sandlet_log_set_bare(true);
    memset(&w, 0, sizeof(w));
    clock_gettime(CLOCK_MONOTONIC, &w.started);
    w.fd = SANDLET_WORKER_FD;
    /* The supervisor named itself on our command line: the parent we
     * must have, and die with (checked in die_with_supervisor, which also
     * catches a supervisor that died before the death signal was set). */
    w.supervisor = supervisor;
    start_clean();
    int crc = sandlet_claim_map(SANDLET_CLAIM_FD, &w.claim);
    close(SANDLET_CLAIM_FD);
    if (crc < 0)
        fail("cannot map the claim word the supervisor passed on descriptor %d: %s; restart "
             "sandletd (a worker started by another sandletd binary?)",
             SANDLET_CLAIM_FD, strerror(-crc));
    sandlet_lanes_open(sandlet_claim_lanes(w.claim), false, &w.tx, &w.rx);
    /* Die with the supervisor (set again after the identity drop). */
    die_with_supervisor();
    /* Started through fexecve, the process would show in ps and top as
     * the number of the descriptor it came from; name it for its sandbox
     * (the kernel keeps 15 bytes). */
    char comm[16];
    snprintf(comm, sizeof(comm), "sl-%s", sandbox);
    prctl(PR_SET_NAME, comm, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    /* Stopping is the acceptor's call: it closes our socketpair once our
     * request is answered.  A signal to the whole daemon must not cut a
     * response short. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGUSR1, SIG_IGN);
    /* Room for one whole frame plus the next one's header; small frames
     * never move (read_frame reads no more than a frame, whatever room). */
    sandlet_buf_init(&w.in, (size_t)2 * SANDLET_FRAME_HEADER + SANDLET_FRAME_MAX);
    sandlet_buf_init(&w.head, SANDLET_FRAME_HEADER + SANDLET_FRAME_MAX);
    sandlet_buf_init(&w.reqhead, SANDLET_FRAME_MAX);
    w.in.wipe = w.head.wipe = w.reqhead.wipe = true;
    if (sandlet_buf_reserve(&w.in, (size_t)64 * 1024) < 0)
        fail("out of memory for the input buffer");

    load_servlets(sandbox, write_blocked);
    if (send_simple(NULL) < 0)
        return 1;

    sl_request rq;
    sl_response rs;
    sandlet_lib_request_init(&rq);
    sandlet_lib_response_init(&rs, &rq, sink, NULL);
    int status = 0;
    for (;;) {
        sandlet_frame_hdr h;
        int rc = read_frame(&h);
        if (rc == 0)
            break;
        if (rc < 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, rc, "reading from the acceptor");
            status = 1;
            break;
        }
        const uint8_t *payload = w.in.data + SANDLET_FRAME_HEADER;
        bool end = h.flags & SANDLET_FRAME_END;
        if (h.type == SANDLET_FRAME_REQBODY && w.skip && h.id == w.skip) {
            /* The rest of a request taken back: not ours. */
            drop_skipped(&h);
        } else if (h.type != SANDLET_FRAME_REQUEST) {
            /* A REQBODY is only ever read by pull_body, inside a request. */
            rc = -EPROTO;
        } else if (!sandlet_claim_take(w.claim, h.id)) {
            /* Written to us while we could not run (stopped, or not
             * scheduled), and taken back since: serving it too would run
             * it twice. */
            w.skip = h.id;
            drop_skipped(&h);
            rc = send_skip(h.id);
        } else if (end) {
            w.id = h.id;
            w.skip = 0;
            rc = serve(payload, h.length, false, &rq, &rs);
            sandlet_buf_consume(&w.in, SANDLET_FRAME_HEADER + h.length);
            request_wipe(&rq, &rs);
        } else {
            /* The body continues in REQBODY frames: the servlet starts now
             * and pulls them as it reads (a large upload never sits here
             * whole).  The head is kept aside, as in is reused for them. */
            w.id = h.id;
            w.skip = 0;
            sandlet_buf_reset(&w.reqhead);
            sandlet_buf_put(&w.reqhead, payload, h.length);
            sandlet_buf_consume(&w.in, SANDLET_FRAME_HEADER + h.length);
            rc = w.reqhead.error;
            if (rc == 0) {
                w.body_open = true;
                w.body_broken = false;
                w.body_consume = 0;
                rc = serve(w.reqhead.data, w.reqhead.len, true, &rq, &rs);
                if (!body_skip() && rc >= 0)
                    rc = -EPROTO;
            }
            request_wipe(&rq, &rs);
        }
        if (rc < 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, rc, "request %u (%s frame)", h.id,
                              sandlet_frame_type_name(h.type));
            status = 1;
            break;
        }
        /* Its database connection broke and it may not make a new one:
         * a fresh worker reconnects before it confines itself.  Not before
         * a second of life, so that a database that stays down costs at
         * most one restart a second per worker (its requests get 503). */
        if (sandlet_lib_db_wants_fresh() && uptime_ms() >= FRESH_AFTER_MS) {
            sandlet_info("sandbox '%s': its database connection is lost; this worker leaves so "
                         "that a fresh one reconnects (a worker makes no unix socket once "
                         "confined)",
                         sandbox);
            break;
        }
    }
    destroy_servlets();
    sandlet_lib_response_free(&rs);
    sandlet_lib_request_free(&rq);
    return status;
}

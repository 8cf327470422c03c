/*
 * supervisor.c - the privileged side: decides, starts and reaps every
 * worker.
 *
 * It is forked from sandletd before any client connects and is the only
 * process that may keep root.  From its own parsed configuration it sizes
 * each sandbox's pool (one live child per slot, the generation increasing
 * with each start, restarts backing off when a slot crash-loops), makes
 * each worker's channel and writes its INIT frame, and starts the worker
 * already under its sandbox's identity, with an empty environment and
 * nothing but its descriptors 0-4.  The acceptor then gets the channel and
 * the worker's output pipe.  It must never read network input, servlet
 * output or frames, and never let the acceptor choose a worker's
 * libraries, identity, confinement or count: the acceptor may only ask
 * for a live worker's death and for a log reopen, and every message it
 * sends is checked as hostile.  It signals only its own children.
 */
#include "config.h"

#include "sandbox/supervisor.h"
#include "common/log.h"
#include "sandbox/control.h"
#include "sandbox/harden.h"
#include "sandbox/identity.h"
#include "sandbox/init.h"
#include "sandbox/pages.h"
#include "sandbox/quota.h"
#include "sandbox/session_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

/* How long workers get to leave on their own at shutdown. */
#define SHUTDOWN_GRACE_MS 3000
/* How often the writable directories of sandboxes with a write quota are
 * measured: what a sandbox can write past its quota is what it writes in
 * this time (each file at most its max-file-size). */
#define QUOTA_CHECK_MS 2000
/* How often the session stores' headers are checked.  Only a sandbox's
 * own workers can write its store; one that wrote over the header makes
 * the sandbox's session calls fail (EIO) until the next check rebuilds
 * it, so this bounds that outage.  A check is three loads per store. */
#define STORE_CHECK_MS 1000
/* A live worker seen holding its store's lock at this many consecutive
 * checks is stuck or hostile (no operation holds it for more than
 * microseconds): it is killed, and its exit releases the lock. */
#define STORE_HOLD_CHECKS 5
/* Crash-looping slots back off: 0, 100 ms, 200 ms, ... up to this. */
#define RESTART_MAX_MS 30000u
/* A worker that lived this long was not crash-looping, even if the
 * acceptor never said it became ready. */
#define HEALTHY_MS 10000u
/* Log reopens done per second; more asks wait for the next second (they
 * are coalesced into one), so a flood costs nothing and none is lost. */
#define REOPEN_PER_SEC 2
/* Refusals logged per second; the rest are counted and summarised. */
#define REFUSALS_PER_SEC 10
/* Messages read from the acceptor per loop turn: a flood must not keep
 * the supervisor from reaping and restarting. */
#define READS_PER_TURN 256

typedef struct slot slot;

/* One started worker, until libuv has closed its process handle. */
typedef struct child {
    uv_process_t proc;
    slot *slot;
    uint32_t gen;
    uint64_t started;
    bool kill_asked; /* by the acceptor, max-requests or a quota: no crash */
    bool ready;      /* the acceptor said it started its servlets */
    uint32_t pages;  /* the pages generation of its INIT */
} child;

/* One place in a sandbox's pool.  It has at most one live child. */
struct slot {
    uint32_t sandbox, index;
    uint32_t gen;
    unsigned failures; /* consecutive short-lived crashes */
    child *live;
    uv_timer_t restart;
};

static struct {
    const sandlet_conf *conf;
    uv_loop_t loop;
    uv_poll_t poll;
    bool polling_out;
    uv_timer_t grace;
    uv_timer_t quota;
    uv_timer_t stores;       /* STORE_CHECK_MS */
    uv_timer_t reopen;       /* a reopen deferred by REOPEN_PER_SEC */
    uv_timer_t reload_timer; /* a reload deferred to the end of its second */
    bool *write_blocked;     /* per sandbox: over its write quota */
    int ctl;
    sandlet_ctl_queue out; /* to the acceptor, waiting for room */
    char exe[32];          /* "/proc/self/fd/N" */
    char parent[16];       /* our pid, for the workers' argv */
    char *env[5];          /* what a worker's environment holds, NULL-ended */
    bool confine;
    sandlet_id acceptor;
    sandlet_id *ids; /* per sandbox */
    uint8_t (*keys)[SANDLET_SESSION_KEY_LEN];
    slot *slots;
    size_t nslots;
    size_t nlive;
    int *session_fds;                     /* per sandbox: its memory session store, or -1 */
    sandlet_session_store **session_maps; /* our mapping of each, to check it */
    pid_t *store_holder;                  /* per sandbox: the live holder last seen */
    unsigned *store_held;                 /* per sandbox: checks it has been seen at */
    uint64_t last_reload;                 /* uv_now of the last reload carried out */
    uint64_t reopen_window, refusal_window;
    unsigned reopens, refusals, suppressed;
    bool closing;
    bool finished;
} sv;

/* Refusals are logged, but a flood of them must not become a flood of
 * log lines: at most REFUSALS_PER_SEC a second, then one summary. */
static void refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void refuse(const char *fmt, ...)
{
    uint64_t sec = uv_now(&sv.loop) / 1000;
    if (sec != sv.refusal_window) {
        if (sv.suppressed)
            sandlet_error("%u more control messages from the acceptor were refused", sv.suppressed);
        sv.refusal_window = sec;
        sv.refusals = 0;
        sv.suppressed = 0;
    }
    if (sv.refusals >= REFUSALS_PER_SEC) {
        sv.suppressed++;
        return;
    }
    sv.refusals++;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sandlet_error("refused a control message from the acceptor: %s", msg);
}

static void update_poll(void);

/* Sends to the acceptor, or queues when its socket is full: nothing the
 * acceptor must learn (a worker, an exit) is ever dropped. */
static void tell(const sandlet_ctl *m, const int *fds, size_t nfd)
{
    if (sv.ctl < 0) {
        for (size_t i = 0; i < nfd; i++)
            close(fds[i]);
        return;
    }
    int rc = sandlet_ctl_queue_send(&sv.out, sv.ctl, m, fds, nfd);
    if (rc < 0)
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot report to the acceptor");
    update_poll();
}

static void on_ctl(uv_poll_t *p, int status, int events);

static void update_poll(void)
{
    if (sv.ctl < 0 || sv.closing)
        return;
    bool want = sv.out.head != NULL;
    if (want == sv.polling_out)
        return;
    sv.polling_out = want;
    uv_poll_start(&sv.poll, UV_READABLE | UV_DISCONNECT | (want ? UV_WRITABLE : 0), on_ctl);
}

static void maybe_finish(void)
{
    if (sv.closing && sv.nlive == 0 && !sv.finished) {
        sv.finished = true;
        uv_timer_stop(&sv.grace);
        uv_close((uv_handle_t *)&sv.grace, NULL);
        for (size_t i = 0; i < sv.nslots; i++)
            uv_close((uv_handle_t *)&sv.slots[i].restart, NULL);
    }
}

static void child_closed(uv_handle_t *h)
{
    free(h->data);
}

static void spawn(slot *s);
static void check_session_store(size_t i);

static void on_restart(uv_timer_t *t)
{
    spawn(t->data);
}

static void schedule_restart(slot *s)
{
    if (sv.closing)
        return;
    uint64_t delay = 0;
    if (s->failures > 1) {
        unsigned shift = s->failures - 2 > 9 ? 9 : s->failures - 2;
        delay = 100u << shift;
        if (delay > RESTART_MAX_MS)
            delay = RESTART_MAX_MS;
    }
    uv_timer_start(&s->restart, on_restart, delay, 0);
}

/* A queued WORKER message of the given slot and generation. */
static int same_worker(const sandlet_ctl *m, void *arg)
{
    const sandlet_ctl *id = arg;
    return m->type == SANDLET_CTL_WORKER && m->sandbox == id->sandbox && m->slot == id->slot &&
           m->gen == id->gen;
}

static void child_exited(uv_process_t *p, int64_t status, int term_signal)
{
    child *c = p->data;
    slot *s = c->slot;
    sandlet_ctl m = {.type = SANDLET_CTL_EXITED,
                     .sandbox = s->sandbox,
                     .slot = s->index,
                     .gen = c->gen,
                     .pid = p->pid,
                     .status = (int32_t)status,
                     .signal = term_signal};
    /* When the acceptor has not even taken the worker yet, neither
     * message is sent: what waits for it stays bounded by the slots. */
    if (sandlet_ctl_queue_drop(&sv.out, same_worker, &m) == 0)
        tell(&m, NULL, 0);
    bool healthy = uv_now(&sv.loop) - c->started >= HEALTHY_MS;
    /* Back off only a slot whose workers die before they are ready: a
     * servlet that cannot start.  One that a client's request crashes is
     * restarted at once, or any client could make the sandbox answer 503
     * for as long as the back-off lasts. */
    bool died = !c->kill_asked && !c->ready && (status != 0 || term_signal != 0);
    if (c->kill_asked || c->ready || healthy || (status == 0 && term_signal == 0))
        s->failures = 0;
    else if (died && sandlet_pages_worker_died(s->sandbox, c->pages))
        s->failures = 0; /* the page that killed it is left out now */
    else
        s->failures++;
    /* A worker killed (or crashed) while holding its store's lock: the
     * lock is ours to release, after repairing what it was writing.
     * Before the restart, so its pid cannot be reused meanwhile. */
    if (sv.session_maps && sv.session_maps[s->sandbox])
        sandlet_session_store_release(sv.session_maps[s->sandbox], p->pid);
    if (s->live == c)
        s->live = NULL;
    sv.nlive--;
    uv_close((uv_handle_t *)p, child_closed);
    schedule_restart(s);
    maybe_finish();
}

static void spawn_failed(slot *s, int err)
{
    sandlet_log_errno(SANDLET_LOG_ERROR, err, "cannot start a worker of sandbox '%s'",
                      sv.conf->sandboxes[s->sandbox].name);
    sandlet_ctl m = {.type = SANDLET_CTL_SPAWN_FAILED,
                     .sandbox = s->sandbox,
                     .slot = s->index,
                     .gen = s->gen,
                     .status = err};
    tell(&m, NULL, 0);
    s->failures++;
    schedule_restart(s);
}

/* Writes the INIT frame into the worker's end of its channel before the
 * worker or the acceptor hold it: what the worker loads is ours to say. */
static int write_init(slot *s, int fd)
{
    sandlet_buf b;
    sandlet_buf_init(&b, SANDLET_FRAME_HEADER + SANDLET_FRAME_MAX);
    b.wipe = true; /* it holds the sandbox's session key */
    const sandlet_id *id = &sv.ids[s->sandbox];
    int rc = sandlet_init_encode(&b, sv.conf, s->sandbox, sv.confine, id->uid, id->gid,
                                 sv.keys[s->sandbox], sandlet_pages_of(s->sandbox));
    if (rc == 0) {
        /* The frame must fit the socket's buffer: the worker has not
         * started, and the supervisor never blocks on a worker. */
        int size = (int)b.len + 4096;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
        ssize_t n;
        do
            n = send(fd, b.data, b.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        rc = n < 0 ? -errno : (size_t)n == b.len ? 0 : -EMSGSIZE;
    }
    sandlet_buf_free(&b);
    return rc;
}

static void spawn(slot *s)
{
    if (sv.closing || s->live)
        return;
    const sandlet_sandbox_conf *sb = &sv.conf->sandboxes[s->sandbox];
    int ch[2] = {-1, -1}, out[2] = {-1, -1};
    s->gen++;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ch) < 0 || pipe2(out, O_CLOEXEC) < 0) {
        int err = -errno;
        for (int i = 0; i < 2; i++) {
            if (ch[i] >= 0)
                close(ch[i]);
        }
        spawn_failed(s, err);
        return;
    }
    int rc = write_init(s, ch[0]);
    child *c = rc == 0 ? calloc(1, sizeof(*c)) : NULL;
    if (!c) {
        close(ch[0]);
        close(ch[1]);
        close(out[0]);
        close(out[1]);
        spawn_failed(s, rc < 0 ? rc : -ENOMEM);
        return;
    }
    c->slot = s;
    c->gen = s->gen;
    const sandlet_init_pages *ip = sandlet_pages_of(s->sandbox);
    c->pages = ip ? ip->gen : 0;
    c->proc.data = c;
    char blocked[] = "--write-blocked";
    char *args[] = {"sandletd", "--worker", sb->name,
                    "--parent", sv.parent,  sv.write_blocked[s->sandbox] ? blocked : NULL,
                    NULL};
    /* Descriptor 4: the sandbox's session store, shared by its workers so
     * that a session is found whichever worker serves the request. */
    int store = sv.session_fds ? sv.session_fds[s->sandbox] : -1;
    check_session_store(s->sandbox);
    uv_stdio_container_t stdio[5] = {
        {.flags = UV_IGNORE}, /* /dev/null */
        {.flags = UV_INHERIT_FD, .data.fd = out[1]},
        {.flags = UV_INHERIT_FD, .data.fd = out[1]},
        {.flags = UV_INHERIT_FD, .data.fd = ch[1]},
        {.flags = UV_INHERIT_FD, .data.fd = store},
    };
    const sandlet_id *id = &sv.ids[s->sandbox];
    uv_process_options_t opts = {
        .exit_cb = child_exited,
        /* A fresh exec of this very binary: its own address-space layout
         * and none of our memory. */
        .file = sv.exe,
        .args = args,
        .env = sv.env,
        .stdio_count = store >= 0 ? 5 : 4,
        .stdio = stdio,
    };
    /* The identity is dropped in the child before exec (libuv:
     * setgroups(0), setgid, setuid): nothing of the worker, not even the
     * dynamic loader, runs as root. */
    if (id->uid != UINT32_MAX) {
        opts.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID;
        opts.uid = (uv_uid_t)id->uid;
        opts.gid = (uv_gid_t)id->gid;
    }
    rc = uv_spawn(&sv.loop, &c->proc, &opts);
    close(ch[1]);
    close(out[1]);
    if (rc < 0) {
        close(ch[0]);
        close(out[0]);
        uv_close((uv_handle_t *)&c->proc, child_closed);
        spawn_failed(s, rc);
        return;
    }
    c->started = uv_now(&sv.loop);
    s->live = c;
    sv.nlive++;
    const sandlet_init_pages *pages = sandlet_pages_of(s->sandbox);
    sandlet_ctl m = {.type = SANDLET_CTL_WORKER,
                     .sandbox = s->sandbox,
                     .slot = s->index,
                     .gen = s->gen,
                     .pid = c->proc.pid,
                     .pages = pages ? pages->gen : 0};
    int fds[2] = {ch[0], out[0]};
    tell(&m, fds, 2);
}

/* The slot a message from the acceptor names, or NULL (refused). */
static slot *find_slot(const sandlet_ctl *m)
{
    if (m->sandbox >= sv.conf->nsandboxes || m->slot >= sv.conf->sandboxes[m->sandbox].workers) {
        refuse("type %u for worker %u/%u, which does not exist", m->type, m->sandbox, m->slot);
        return NULL;
    }
    size_t k = m->slot;
    for (size_t i = 0; i < m->sandbox; i++)
        k += sv.conf->sandboxes[i].workers;
    return &sv.slots[k];
}

static void kill_child(const sandlet_ctl *m)
{
    if (m->status != SIGKILL) {
        refuse("KILL with signal %d", m->status);
        return;
    }
    slot *s = find_slot(m);
    if (!s)
        return;
    /* Only the generation the acceptor was given, and once: an older one
     * is gone already (its EXITED crossed this message). */
    if (s->live && s->live->gen == m->gen && !s->live->kill_asked) {
        s->live->kill_asked = true;
        uv_process_kill(&s->live->proc, SIGKILL);
    }
}

static int same_logfd(const sandlet_ctl *m, void *arg)
{
    const sandlet_ctl *kind = arg;
    return m->type == SANDLET_CTL_LOGFD && m->status == kind->status;
}

/* SIGHUP, passed on by the acceptor.  The file is read again here, as
 * root (it may name files only root reads), and checked in full: a file
 * that does not load is reported and changes nothing.  What a reload
 * applies so far is the code: every sandbox gets a new code generation,
 * so its workers are replaced, a few at a time as they finish their
 * requests, by workers that load the servlets and pages now on disk; the
 * memory session stores stay (this process holds them).  A changed
 * configuration is only reported, with the restart that applies it.
 * At most one a second: the request comes from the acceptor, which a
 * client may have taken over. */
static void reload(void);

static void on_reload_timer(uv_timer_t *t)
{
    (void)t;
    reload();
}

static int same_gen(const sandlet_ctl *m, void *arg)
{
    const sandlet_ctl *kind = arg;
    return m->type == SANDLET_CTL_GEN && m->sandbox == kind->sandbox;
}

static void reload(void)
{
    uint64_t now = uv_now(&sv.loop);
    if (sv.last_reload && now - sv.last_reload < 1000) {
        /* Another within the second: carried out when it ends, once for
         * all that came meanwhile (a deploy that follows another at once
         * is not lost, and a flood costs one reload a second). */
        if (!sv.closing && !uv_is_active((uv_handle_t *)&sv.reload_timer))
            uv_timer_start(&sv.reload_timer, on_reload_timer, 1000 - (now - sv.last_reload), 0);
        return;
    }
    sv.last_reload = now;
    sandlet_conf *fresh = NULL;
    char err[1024];
    int rc =
        sv.conf->source ? sandlet_conf_load(sv.conf->source, &fresh, err, sizeof(err)) : -ENOENT;
    if (rc < 0) {
        sandlet_error("reload: %s; still serving with the configuration loaded before (fix the "
                      "file, check it with 'sandletd -t -c %s', and send SIGHUP again)",
                      rc == -ENOENT && !sv.conf->source ? "no configuration file to read" : err,
                      sv.conf->file);
        return;
    }
    bool same = memcmp(fresh->digest, sv.conf->digest, sizeof(fresh->digest)) == 0;
    sandlet_conf_free(fresh);
    for (size_t i = 0; i < sv.conf->nsandboxes; i++) {
        uint32_t gen = sandlet_pages_new_code(i);
        if (!gen)
            continue;
        sandlet_ctl m = {.type = SANDLET_CTL_GEN, .sandbox = (uint32_t)i, .pages = gen};
        /* Only the newest generation of a sandbox need wait for the
         * acceptor: reloads never crowd out workers' messages. */
        sandlet_ctl_queue_drop(&sv.out, same_gen, &m);
        tell(&m, NULL, 0);
    }
    if (same)
        sandlet_info("reload: %s is unchanged; the workers of every sandbox are being replaced, "
                     "as they finish their requests, by ones that load the servlets and pages "
                     "now on disk",
                     sv.conf->file);
    else
        sandlet_warn("reload: %s has changed (it is valid), but a reload applies only new "
                     "servlet and page code so far: restart sandletd to apply the configuration "
                     "itself; the workers are being replaced with the code now on disk",
                     sv.conf->file);
}

static void worker_ready(const sandlet_ctl *m)
{
    slot *s = find_slot(m);
    if (!s)
        return;
    if (s->live && s->live->gen == m->gen) {
        if (s->live->ready)
            refuse("READY twice for worker %u/%u generation %u", m->sandbox, m->slot, m->gen);
        s->live->ready = true;
        s->failures = 0;
        sandlet_pages_worker_ready(s->sandbox, s->live->pages);
    }
}

/* logrotate moved the files away: open them again (we may be the only
 * process still allowed to), in the folders checked at start and without
 * following links (the acceptor's user may control those folders), take
 * the error log as our own standard error, and hand both to the
 * acceptor.  Workers never hold either. */
static void reopen_logs(void);

static void on_reopen(uv_timer_t *t)
{
    (void)t;
    reopen_logs();
}

static void reopen_logs(void)
{
    uint64_t now = uv_now(&sv.loop);
    uint64_t sec = now / 1000;
    if (sec != sv.reopen_window) {
        sv.reopen_window = sec;
        sv.reopens = 0;
    }
    if (sv.reopens >= REOPEN_PER_SEC) {
        if (!sv.closing && !uv_is_active((uv_handle_t *)&sv.reopen))
            uv_timer_start(&sv.reopen, on_reopen, (sec + 1) * 1000 - now, 0);
        return;
    }
    sv.reopens++;
    const char *paths[SANDLET_LOG_FILES] = {sv.conf->access_log, sv.conf->error_log};
    for (unsigned which = 0; which < SANDLET_LOG_FILES; which++) {
        if (!paths[which])
            continue;
        /* Only one of each kind waits for the acceptor. */
        sandlet_ctl kind = {.type = SANDLET_CTL_LOGFD, .status = (int32_t)which};
        sandlet_ctl_queue_drop(&sv.out, same_logfd, &kind);
        int fd = sandlet_log_file_reopen(which);
        if (fd < 0)
            continue; /* logged, naming the file and why */
        if (which == SANDLET_LOG_ERROR_FILE) {
            dup2(fd, STDERR_FILENO);
            sandlet_log_nonblocking();
        }
        sandlet_ctl m = {.type = SANDLET_CTL_LOGFD, .status = (int32_t)which};
        tell(&m, &fd, 1);
    }
}

static void on_grace(uv_timer_t *t)
{
    (void)t;
    for (size_t i = 0; i < sv.nslots; i++) {
        child *c = sv.slots[i].live;
        if (!c)
            continue;
        sandlet_warn("worker %d of sandbox '%s' did not stop in time; killing it", c->proc.pid,
                     sv.conf->sandboxes[c->slot->sandbox].name);
        uv_process_kill(&c->proc, SIGKILL);
    }
}

/* The acceptor is gone or asked us to go: workers leave when their
 * channels close (the ones still waiting in our queue are closed here);
 * the grace timer catches any that hang. */
static void begin_shutdown(void)
{
    if (sv.closing)
        return;
    sv.closing = true;
    for (size_t i = 0; i < sv.nslots; i++)
        uv_timer_stop(&sv.slots[i].restart);
    uv_timer_stop(&sv.quota);
    uv_close((uv_handle_t *)&sv.quota, NULL);
    uv_timer_stop(&sv.stores);
    uv_close((uv_handle_t *)&sv.stores, NULL);
    uv_timer_stop(&sv.reopen);
    uv_close((uv_handle_t *)&sv.reopen, NULL);
    uv_timer_stop(&sv.reload_timer);
    uv_close((uv_handle_t *)&sv.reload_timer, NULL);
    sandlet_pages_stop();
    uv_poll_stop(&sv.poll);
    uv_close((uv_handle_t *)&sv.poll, NULL);
    sandlet_ctl_queue_clear(&sv.out);
    close(sv.ctl);
    sv.ctl = -1;
    uv_timer_start(&sv.grace, on_grace, SHUTDOWN_GRACE_MS, 0);
    maybe_finish();
}

static void on_ctl(uv_poll_t *p, int status, int events)
{
    (void)p;
    if (status < 0) {
        begin_shutdown();
        return;
    }
    if (events & UV_WRITABLE) {
        int rc = sandlet_ctl_queue_flush(&sv.out, sv.ctl);
        if (rc < 0 && rc != -EAGAIN) {
            begin_shutdown();
            return;
        }
        update_poll();
    }
    for (int n = 0; n < READS_PER_TURN; n++) {
        sandlet_ctl m;
        int fd;
        int rc = sandlet_ctl_recv(sv.ctl, &m, &fd, 1);
        if (rc == -EAGAIN)
            return;
        if (rc == -EPROTO) {
            refuse("malformed (wrong size, empty, or more than one descriptor)");
            continue;
        }
        if (rc <= 0) {
            begin_shutdown();
            return;
        }
        if (fd >= 0) {
            /* No message from the acceptor carries a descriptor; closing
             * one must not wait on it (see sandlet_ctl_discard_fd). */
            sandlet_ctl_discard_fd(fd);
            refuse("type %u with a descriptor attached", m.type);
            continue;
        }
        switch (m.type) {
        case SANDLET_CTL_KILL: kill_child(&m); break;
        case SANDLET_CTL_REOPEN: reopen_logs(); break;
        case SANDLET_CTL_READY: worker_ready(&m); break;
        case SANDLET_CTL_PAGE_CHECK: sandlet_pages_check(&m); break;
        case SANDLET_CTL_RELOAD: reload(); break;
        case SANDLET_CTL_SPAWN: refuse("SPAWN: workers are started by the supervisor alone"); break;
        default: refuse("unknown type %u", m.type); break;
        }
        if (sv.closing)
            return;
    }
}

static bool has_quota(const sandlet_sandbox_conf *sb)
{
    return sb->nwritable && (sb->write_quota || sb->write_files);
}

/* Measures every sandbox with a write quota.  One that passes it gets its
 * workers restarted with the writable directories read-only (the
 * --write-blocked flag), and again with them writable once an operator has
 * made room: Landlock is fixed for a process's life, so a restart is the
 * only way to change it.  The restart kills: a servlet filling the disk
 * does not get to finish its request. */
static void check_quotas(void)
{
    for (size_t i = 0; i < sv.conf->nsandboxes; i++) {
        const sandlet_sandbox_conf *sb = &sv.conf->sandboxes[i];
        if (!has_quota(sb))
            continue;
        sandlet_usage u;
        bool over = sandlet_quota_measure((const char *const *)sb->writable, sb->nwritable,
                                          sb->write_quota, sb->write_files, &u);
        if (over == sv.write_blocked[i])
            continue;
        sv.write_blocked[i] = over;
        if (over)
            sandlet_error("sandbox '%s' is over its write quota (%s%llu bytes, %llu entries in "
                          "its writable directories; write-quota %llu, write-files %u): its "
                          "workers restart with them read-only until they are below; remove "
                          "files, or raise write-quota/write-files",
                          sb->name, u.too_deep ? "nested too deep to measure; " : "", u.bytes,
                          u.entries, sb->write_quota, sb->write_files);
        else
            sandlet_info("sandbox '%s' is below its write quota again (%llu bytes, %llu "
                         "entries): its workers restart with their directories writable",
                         sb->name, u.bytes, u.entries);
        for (size_t j = 0; j < sv.nslots; j++) {
            child *c = sv.slots[j].live;
            if (c && sv.slots[j].sandbox == i) {
                c->kill_asked = true;
                uv_process_kill(&c->proc, SIGKILL);
            }
        }
    }
}

static void on_quota(uv_timer_t *t)
{
    (void)t;
    check_quotas();
}

/* One memory session store per sandbox that uses one, made before any
 * worker starts and kept for the daemon's life: workers come and go
 * (crashes, max-requests), sessions stay.  We keep a mapping of each to
 * check its header: the workers of the sandbox can write over it. */
static int create_session_stores(void)
{
    size_t n = sv.conf->nsandboxes + 1;
    sv.session_fds = malloc(n * sizeof(*sv.session_fds));
    sv.session_maps = calloc(n, sizeof(*sv.session_maps));
    sv.store_holder = calloc(n, sizeof(*sv.store_holder));
    sv.store_held = calloc(n, sizeof(*sv.store_held));
    if (!sv.session_fds || !sv.session_maps || !sv.store_holder || !sv.store_held) {
        sandlet_error("out of memory creating the session stores");
        return -1;
    }
    /* Every entry is valid before the first can fail: cleanup() reads
     * them all. */
    for (size_t i = 0; i < n; i++)
        sv.session_fds[i] = -1;
    for (size_t i = 0; i < sv.conf->nsandboxes; i++) {
        const sandlet_sandbox_conf *sb = &sv.conf->sandboxes[i];
        sv.session_fds[i] = -1;
        if (sb->sessions != SANDLET_SESSIONS_MEMORY)
            continue;
        int fd = sandlet_session_store_create(sb->name, sb->session_size);
        if (fd < 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, fd,
                              "%s:%d: cannot create the session store of sandbox '%s' (%zu "
                              "bytes); lower session-size or set 'sessions none'",
                              sv.conf->file, sb->line, sb->name, sb->session_size);
            return -1;
        }
        sv.session_fds[i] = fd;
        sv.session_maps[i] = sandlet_session_store_attach(fd, 0);
        if (!sv.session_maps[i]) {
            sandlet_log_errno(SANDLET_LOG_ERROR, -errno,
                              "%s:%d: cannot map the session store of sandbox '%s' (%zu "
                              "bytes); lower session-size or set 'sessions none'",
                              sv.conf->file, sb->line, sb->name, sb->session_size);
            return -1;
        }
    }
    return 0;
}

/* The rebuild hook: a store whose header is not the one we wrote is made
 * empty again, so that the sandbox's workers (running ones and new ones)
 * can use it.  Called before each spawn and every STORE_CHECK_MS. */
static void check_session_store(size_t i)
{
    if (!sv.session_maps || i >= sv.conf->nsandboxes || !sv.session_maps[i] ||
        sandlet_session_store_intact(sv.session_maps[i]))
        return;
    sandlet_session_store_rebuild(sv.session_maps[i]);
    sandlet_error("sandbox '%s': its session store was written over by one of its workers; "
                  "rebuilt it empty, every session of the sandbox is lost; a servlet of this "
                  "sandbox is buggy or hostile (only its workers can write the store)",
                  sv.conf->sandboxes[i].name);
}

/* The live worker of sandbox i with this pid, or NULL. */
static child *live_child(size_t i, pid_t pid)
{
    for (size_t k = 0; k < sv.nslots; k++) {
        const slot *s = &sv.slots[k];
        if (s->sandbox == i && s->live && s->live->proc.pid == pid)
            return s->live;
    }
    return NULL;
}

/* The lock hook: workers never take the store's lock from its holder
 * (a stalled holder would wake and write into reused slots), so a lock
 * left held is cleared here.  A word naming no live worker of the
 * sandbox (forged, or a holder reaped already) is released at once; a
 * live worker holding it for STORE_HOLD_CHECKS checks in a row is
 * killed, and child_exited releases the lock. */
static void check_store_lock(size_t i)
{
    if (!sv.session_maps || !sv.session_maps[i] || !sv.store_holder)
        return;
    sandlet_session_store *st = sv.session_maps[i];
    pid_t holder = sandlet_session_store_holder(st);
    child *c = holder > 0 ? live_child(i, holder) : NULL;
    if (holder > 0 && !c) {
        if (sandlet_session_store_release(st, holder))
            sandlet_warn("sandbox '%s': its session store's lock named pid %d, which is no "
                         "live worker of the sandbox (a servlet forged it); released it",
                         sv.conf->sandboxes[i].name, (int)holder);
        holder = 0;
    }
    if (holder == 0 || holder != sv.store_holder[i]) {
        sv.store_holder[i] = holder;
        sv.store_held[i] = holder ? 1 : 0;
        return;
    }
    if (++sv.store_held[i] < STORE_HOLD_CHECKS || c->kill_asked)
        return;
    sandlet_error("sandbox '%s': worker %d has held the session store's lock for %d s (the "
                  "sandbox's session calls fail meanwhile); killing it, a servlet of this "
                  "sandbox is stuck or hostile",
                  sv.conf->sandboxes[i].name, (int)holder,
                  STORE_HOLD_CHECKS * STORE_CHECK_MS / 1000);
    c->kill_asked = true;
    uv_process_kill(&c->proc, SIGKILL);
}

static void on_stores(uv_timer_t *t)
{
    (void)t;
    for (size_t i = 0; i < sv.conf->nsandboxes; i++) {
        check_session_store(i);
        check_store_lock(i);
    }
}

/* (See supervisor.h.)  close_range when the kernel has it; else each
 * descriptor /proc lists. */
void sandlet_cloexec_inherited(void)
{
#ifdef CLOSE_RANGE_CLOEXEC
    if (close_range(3, ~0u, CLOSE_RANGE_CLOEXEC) == 0)
        return;
#endif
    DIR *d = opendir("/proc/self/fd");
    if (!d) {
        /* No /proc: every descriptor number a process may hold. */
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
            fcntl((int)fd, F_SETFD, FD_CLOEXEC);
        return;
    }
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd < 3 || fd == self)
            continue;
        fcntl((int)fd, F_SETFD, FD_CLOEXEC);
    }
    closedir(d);
}

/* Every sandbox's identity and session key, and its slots, decided from
 * our own configuration before any worker starts. */
static int prepare(const sandlet_conf *conf)
{
    sv.ids = calloc(conf->nsandboxes + 1, sizeof(*sv.ids));
    sv.keys = calloc(conf->nsandboxes + 1, sizeof(*sv.keys));
    sv.write_blocked = calloc(conf->nsandboxes + 1, sizeof(*sv.write_blocked));
    for (size_t i = 0; i < conf->nsandboxes; i++)
        sv.nslots += conf->sandboxes[i].workers;
    sv.slots = calloc(sv.nslots + 1, sizeof(*sv.slots));
    if (!sv.ids || !sv.keys || !sv.write_blocked || !sv.slots) {
        sandlet_error("out of memory starting the supervisor");
        return -ENOMEM;
    }
    if (sandlet_identity_acceptor(conf, &sv.acceptor) < 0 ||
        sandlet_identity_sandboxes(conf, &sv.acceptor, sv.ids) < 0)
        return -EPERM;
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        int rc = sandlet_session_key_make(conf->session_secret_set ? conf->session_secret : NULL,
                                          conf->sandboxes[i].name, sv.keys[i]);
        if (rc < 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, rc, "sandbox '%s': cannot make a session key",
                              conf->sandboxes[i].name);
            return rc;
        }
    }
    /* The keys are made; the secret they come from is of no further use.
     * (The configuration is ours alone since the fork.) */
    sodium_memzero(((sandlet_conf *)conf)->session_secret, sizeof(conf->session_secret));
    size_t k = 0;
    for (size_t i = 0; i < conf->nsandboxes; i++)
        for (unsigned j = 0; j < conf->sandboxes[i].workers; j++) {
            sv.slots[k].sandbox = (uint32_t)i;
            sv.slots[k].index = j;
            k++;
        }
    /* The acceptor's queue to us holds at most a KILL per slot and a
     * REOPEN; ours to it a WORKER and an EXITED per slot and two log
     * descriptors.  Twice that is room to spare, never a bound hit in
     * normal operation. */
    sv.out.max = 4 * sv.nslots + 16;
    /* And an answer per page the acceptor asks about at once. */
    if (conf->npages)
        sv.out.max += 8192;
    return 0;
}

/* Nothing of our environment reaches a servlet (a database password in
 * it would be every servlet's), except the dynamic loader's search path
 * when sandletd itself was started with one: the worker is this binary,
 * which needs it to find libsandlet (a build tree, an unusual prefix); it
 * is no secret and gives nothing new, the supervisor itself was loaded
 * with it.  A sanitizer build also passes the sanitizers' options, so
 * that its workers crash as the tests expect. */
static int worker_environment(void)
{
    static const char *const passed[] = {
        "LD_LIBRARY_PATH",
#ifdef SANDLET_SANITIZERS
        "ASAN_OPTIONS",
        "UBSAN_OPTIONS",
        "LSAN_OPTIONS",
#endif
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++) {
        const char *v = getenv(passed[i]);
        if (!v || !*v)
            continue;
        size_t len = strlen(passed[i]) + 1 + strlen(v) + 1;
        char *e = malloc(len);
        if (!e) {
            sandlet_error("out of memory preparing the workers' environment");
            return -ENOMEM;
        }
        snprintf(e, len, "%s=%s", passed[i], v);
        sv.env[n++] = e;
    }
    sv.env[n] = NULL;
    return 0;
}

static void cleanup(void)
{
    sandlet_ctl_queue_clear(&sv.out);
    if (sv.keys)
        sodium_memzero(sv.keys, (sv.conf->nsandboxes + 1) * sizeof(*sv.keys));
    for (size_t i = 0; sv.session_fds && i < sv.conf->nsandboxes; i++) {
        if (sv.session_maps)
            sandlet_session_store_detach(sv.session_maps[i]);
        if (sv.session_fds[i] >= 0)
            close(sv.session_fds[i]);
    }
    free(sv.session_maps);
    free(sv.session_fds);
    free(sv.store_holder);
    free(sv.store_held);
    free(sv.write_blocked);
    free(sv.ids);
    free(sv.keys);
    free(sv.slots);
    for (size_t i = 0; i < sizeof(sv.env) / sizeof(sv.env[0]); i++)
        free(sv.env[i]);
}

int sandlet_supervisor_run(const sandlet_conf *conf, int ctl_fd, int exe_fd)
{
    sandlet_log_set_role("supervisor");
    /* Out of the terminal's process group: a Ctrl-C reaches the acceptor,
     * which then stops everything in order.  SIGTERM is ignored for the
     * same reason: service managers signal every process of the daemon,
     * and only the acceptor knows which requests are still in flight; we
     * leave when it closes the control socket. */
    setsid();
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGUSR1, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    memset(&sv, 0, sizeof(sv));
    sv.conf = conf;
    sv.ctl = ctl_fd;
    /* Read from our own environment, never from the acceptor. */
    sv.confine = !getenv("SANDLET_NO_CONFINEMENT");
    /* Whatever started the daemon (or a test) may have left descriptors
     * open without close-on-exec: none reaches a worker. */
    sandlet_cloexec_inherited();
    snprintf(sv.exe, sizeof(sv.exe), "/proc/self/fd/%d", exe_fd);
    snprintf(sv.parent, sizeof(sv.parent), "%d", (int)getpid());
    if (worker_environment() < 0) {
        cleanup();
        return 1;
    }
    int rc = prepare(conf);
    if (rc == 0)
        rc = create_session_stores();
    sandlet_pages_env penv = {.loop = &sv.loop,
                              .conf = conf,
                              .ids = sv.ids,
                              .exe = sv.exe,
                              .env = sv.env,
                              .tell = tell,
                              .refuse = refuse};
    /* Before hardening: the cache folders are made as root. */
    if (rc == 0)
        rc = sandlet_pages_start(&penv);
    if (rc < 0) {
        cleanup();
        return 1;
    }
    /* Everything needing more is done: the session stores exist, the
     * identities are resolved.  Sanitizer runs (SANDLET_NO_CONFINEMENT)
     * keep ptrace and the rest for their tools. */
    if (sv.confine && sandlet_harden_supervisor() < 0) {
        cleanup();
        return 1;
    }
    /* A sandbox already over its quota starts with its writes blocked. */
    check_quotas();
    rc = uv_loop_init(&sv.loop);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot start the event loop");
        cleanup();
        return 1;
    }
    uv_timer_init(&sv.loop, &sv.grace);
    uv_timer_init(&sv.loop, &sv.quota);
    uv_timer_init(&sv.loop, &sv.stores);
    uv_timer_init(&sv.loop, &sv.reopen);
    uv_timer_init(&sv.loop, &sv.reload_timer);
    uv_timer_start(&sv.stores, on_stores, STORE_CHECK_MS, STORE_CHECK_MS);
    for (size_t i = 0; i < conf->nsandboxes; i++)
        if (has_quota(&conf->sandboxes[i])) {
            uv_timer_start(&sv.quota, on_quota, QUOTA_CHECK_MS, QUOTA_CHECK_MS);
            break;
        }
    rc = uv_poll_init(&sv.loop, &sv.poll, ctl_fd);
    if (rc == 0)
        rc = uv_poll_start(&sv.poll, UV_READABLE | UV_DISCONNECT, on_ctl);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot watch the control socket");
        cleanup();
        return 1;
    }
    for (size_t i = 0; i < sv.nslots; i++) {
        uv_timer_init(&sv.loop, &sv.slots[i].restart);
        sv.slots[i].restart.data = &sv.slots[i];
    }
    for (size_t i = 0; i < sv.nslots; i++)
        spawn(&sv.slots[i]);
    maybe_finish();
    uv_run(&sv.loop, UV_RUN_DEFAULT);
    uv_loop_close(&sv.loop);
    cleanup();
    return 0;
}

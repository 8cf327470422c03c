/*
 * supervisor.c - the guardian: forks and execs workers on the acceptor's
 * request, reports their deaths, kills the ones the acceptor gives up on.
 *
 * It is forked from sandletd before any client connects and is the only
 * process that may keep root, so it must never read network input,
 * servlet output or frames: its whole input is the fixed-size control
 * messages, each checked before use.  It signals only its own children.
 */
#include "config.h"

#include "sandbox/supervisor.h"
#include "loop/log.h"
#include "sandbox/control.h"
#include "sandbox/quota.h"
#include "sandbox/session_store.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

typedef struct child {
    uv_process_t proc;
    uint32_t sandbox, slot, gen;
    struct child *next;
} child;

static struct {
    const sandlet_conf *conf;
    uv_loop_t loop;
    uv_poll_t poll;
    uv_timer_t grace;
    uv_timer_t quota;
    uv_timer_t stores;   /* STORE_CHECK_MS */
    bool *write_blocked; /* per sandbox: over its write quota */
    int ctl;
    char exe[32]; /* "/proc/self/fd/N" */
    child *children;
    int *session_fds;                     /* per sandbox: its memory session store, or -1 */
    sandlet_session_store **session_maps; /* our mapping of each, to check it */
    bool closing;
    bool finished;
} sv;

static void reply_fd(const sandlet_ctl *req, uint32_t type, int32_t pid, int32_t status,
                     int32_t sig, int32_t core, int fd)
{
    if (sv.ctl < 0)
        return;
    sandlet_ctl m = {.type = type,
                     .sandbox = req->sandbox,
                     .slot = req->slot,
                     .gen = req->gen,
                     .pid = pid,
                     .status = status,
                     .signal = sig,
                     .core = core};
    int rc = sandlet_ctl_send(sv.ctl, &m, fd);
    if (rc < 0)
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot report to the acceptor");
}

static void reply(const sandlet_ctl *req, uint32_t type, int32_t pid, int32_t status, int32_t sig,
                  int32_t core)
{
    reply_fd(req, type, pid, status, sig, core, -1);
}

static void child_closed(uv_handle_t *h)
{
    free(h->data);
}

static void maybe_finish(void)
{
    if (sv.closing && !sv.children && !sv.finished) {
        sv.finished = true;
        uv_timer_stop(&sv.grace);
        uv_close((uv_handle_t *)&sv.grace, NULL);
    }
}

static void child_exited(uv_process_t *p, int64_t status, int term_signal)
{
    child *c = p->data;
    sandlet_ctl id = {.sandbox = c->sandbox, .slot = c->slot, .gen = c->gen};
    reply(&id, SANDLET_CTL_EXITED, p->pid, (int32_t)status, term_signal, 0);
    for (child **pp = &sv.children; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    uv_close((uv_handle_t *)p, child_closed);
    maybe_finish();
}

static void check_session_store(size_t i);

static void spawn(const sandlet_ctl *m, int fd)
{
    if (m->sandbox >= sv.conf->nsandboxes || fd < 0) {
        sandlet_error("refusing SPAWN for sandbox %u: %s", m->sandbox,
                      fd < 0 ? "no socket attached" : "no such sandbox");
        reply(m, SANDLET_CTL_SPAWN_FAILED, 0, -EINVAL, 0, 0);
        return;
    }
    child *c = calloc(1, sizeof(*c));
    if (!c) {
        reply(m, SANDLET_CTL_SPAWN_FAILED, 0, -ENOMEM, 0, 0);
        return;
    }
    c->sandbox = m->sandbox;
    c->slot = m->slot;
    c->gen = m->gen;
    c->proc.data = c;

    char blocked[] = "--write-blocked";
    char *args[] = {"sandletd", "--worker", sv.conf->sandboxes[m->sandbox].name,
                    sv.write_blocked[m->sandbox] ? blocked : NULL, NULL};
    /* Descriptor 4: the sandbox's session store, shared by its workers so
     * that a session is found whichever worker serves the request. */
    int store = sv.session_fds ? sv.session_fds[m->sandbox] : -1;
    check_session_store(m->sandbox);
    /* Standard output and error: a pipe of its own, read by the
     * acceptor, never the daemon's log (a servlet could forge lines in
     * it, truncate it or, with nobody reading, stall the daemon). */
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0) {
        int err = -errno;
        sandlet_log_errno(SANDLET_LOG_ERROR, err,
                          "cannot make the output pipe of a worker of "
                          "sandbox '%s'",
                          sv.conf->sandboxes[m->sandbox].name);
        reply(m, SANDLET_CTL_SPAWN_FAILED, 0, err, 0, 0);
        free(c);
        return;
    }
    uv_stdio_container_t stdio[5] = {
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = out[1]},
        {.flags = UV_INHERIT_FD, .data.fd = out[1]},
        {.flags = UV_INHERIT_FD, .data.fd = fd},
        {.flags = UV_INHERIT_FD, .data.fd = store},
    };
    uv_process_options_t opts = {
        .exit_cb = child_exited,
        /* A fresh exec of this very binary: its own address-space layout
         * and none of the acceptor's memory. */
        .file = sv.exe,
        .args = args,
        .stdio_count = store >= 0 ? 5 : 4,
        .stdio = stdio,
    };
    int rc = uv_spawn(&sv.loop, &c->proc, &opts);
    close(out[1]);
    if (rc < 0) {
        close(out[0]);
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot start a worker of sandbox '%s'",
                          sv.conf->sandboxes[m->sandbox].name);
        reply(m, SANDLET_CTL_SPAWN_FAILED, 0, rc, 0, 0);
        uv_close((uv_handle_t *)&c->proc, child_closed);
        return;
    }
    c->next = sv.children;
    sv.children = c;
    /* The read end goes to the acceptor, which owns the log; we never
     * read what a worker writes. */
    reply_fd(m, SANDLET_CTL_SPAWNED, c->proc.pid, 0, 0, 0, out[0]);
    close(out[0]);
}

static void kill_child(const sandlet_ctl *m)
{
    if (m->status != SIGKILL) {
        sandlet_error("refusing KILL with signal %d", m->status);
        return;
    }
    for (child *c = sv.children; c; c = c->next)
        if (c->sandbox == m->sandbox && c->slot == m->slot && c->gen == m->gen) {
            uv_process_kill(&c->proc, m->status);
            return;
        }
    /* Already gone: its EXITED report is on its way or was sent. */
}

/* logrotate moved the files away: open them again (we may be the only
 * process still allowed to), in the folders checked at start and without
 * following links (the acceptor's user may control those folders), take
 * the error log as our own standard error, and hand both to the
 * acceptor.  Workers never hold either. */
static void reopen_logs(const sandlet_ctl *req)
{
    const char *paths[SANDLET_LOG_FILES] = {sv.conf->access_log, sv.conf->error_log};
    for (unsigned which = 0; which < SANDLET_LOG_FILES; which++) {
        if (!paths[which])
            continue;
        int fd = sandlet_log_file_reopen(which);
        if (fd < 0)
            continue; /* logged, naming the file and why */
        if (which == SANDLET_LOG_ERROR_FILE) {
            dup2(fd, STDERR_FILENO);
            sandlet_log_nonblocking();
        }
        sandlet_ctl m = {
            .type = SANDLET_CTL_LOGFD, .sandbox = req->sandbox, .status = (int32_t)which};
        int rc = sandlet_ctl_send(sv.ctl, &m, fd);
        if (rc < 0)
            sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot hand %s to the acceptor",
                              paths[which]);
        close(fd);
    }
}

static void on_grace(uv_timer_t *t)
{
    (void)t;
    for (child *c = sv.children; c; c = c->next) {
        sandlet_warn("worker %d of sandbox '%s' did not stop in time; killing it", c->proc.pid,
                     sv.conf->sandboxes[c->sandbox].name);
        uv_process_kill(&c->proc, SIGKILL);
    }
}

/* The acceptor is gone or asked us to go: workers leave when their
 * socketpairs close; the grace timer catches any that hang. */
static void begin_shutdown(void)
{
    if (sv.closing)
        return;
    sv.closing = true;
    uv_timer_stop(&sv.quota);
    uv_close((uv_handle_t *)&sv.quota, NULL);
    uv_timer_stop(&sv.stores);
    uv_close((uv_handle_t *)&sv.stores, NULL);
    uv_poll_stop(&sv.poll);
    uv_close((uv_handle_t *)&sv.poll, NULL);
    close(sv.ctl);
    sv.ctl = -1;
    uv_timer_start(&sv.grace, on_grace, SHUTDOWN_GRACE_MS, 0);
    maybe_finish();
}

static void on_ctl(uv_poll_t *p, int status, int events)
{
    (void)p;
    (void)events;
    if (status < 0) {
        begin_shutdown();
        return;
    }
    for (;;) {
        sandlet_ctl m;
        int fd;
        int rc = sandlet_ctl_recv(sv.ctl, &m, &fd);
        if (rc == -EAGAIN)
            return;
        if (rc == 0 || (rc < 0 && rc != -EPROTO)) {
            begin_shutdown();
            return;
        }
        if (rc == -EPROTO) {
            sandlet_error("malformed control message from the acceptor; ignored");
            continue;
        }
        switch (m.type) {
        case SANDLET_CTL_SPAWN: spawn(&m, fd); break;
        case SANDLET_CTL_KILL: kill_child(&m); break;
        case SANDLET_CTL_REOPEN: reopen_logs(&m); break;
        default: sandlet_error("unknown control message type %u; ignored", m.type); break;
        }
        if (fd >= 0)
            close(fd);
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
        for (child *c = sv.children; c; c = c->next)
            if (c->sandbox == i)
                uv_process_kill(&c->proc, SIGKILL);
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
    if (!sv.session_fds || !sv.session_maps) {
        sandlet_error("out of memory creating the session stores");
        return -1;
    }
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

static void on_stores(uv_timer_t *t)
{
    (void)t;
    for (size_t i = 0; i < sv.conf->nsandboxes; i++)
        check_session_store(i);
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
    snprintf(sv.exe, sizeof(sv.exe), "/proc/self/fd/%d", exe_fd);
    if (create_session_stores() < 0)
        return 1;
    sv.write_blocked = calloc(conf->nsandboxes + 1, sizeof(*sv.write_blocked));
    if (!sv.write_blocked) {
        sandlet_error("out of memory starting the supervisor");
        return 1;
    }
    /* A sandbox already over its quota starts with its writes blocked. */
    check_quotas();
    int rc = uv_loop_init(&sv.loop);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot start the event loop");
        return 1;
    }
    uv_timer_init(&sv.loop, &sv.grace);
    uv_timer_init(&sv.loop, &sv.quota);
    uv_timer_init(&sv.loop, &sv.stores);
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
        return 1;
    }
    uv_run(&sv.loop, UV_RUN_DEFAULT);
    uv_loop_close(&sv.loop);
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        sandlet_session_store_detach(sv.session_maps[i]);
        if (sv.session_fds[i] >= 0)
            close(sv.session_fds[i]);
    }
    free(sv.session_maps);
    free(sv.session_fds);
    free(sv.write_blocked);
    return 0;
}

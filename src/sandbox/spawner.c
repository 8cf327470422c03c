/*
 * spawner.c - the spawner: a small process forked from the supervisor
 * before the supervisor confines itself, and the supervisor's side of
 * asking it for children (issue 29).
 *
 * Workers, page compiles and an upgrade's new daemon are started as
 * another user or as root; that takes CAP_SETUID/CAP_SETGID, and a
 * process they are forked from passes its seccomp filter on to them.  So
 * the spawner keeps those capabilities effective and the denylist filter
 * the children inherit (sandlet_harden_spawner), while the supervisor
 * drops both and runs under an allowlist of its own calls.  The rest of
 * what sandletd was started with stays permitted here, never effective:
 * an upgrade's new daemon can start with nothing more.  Its memory is a
 * copy of the supervisor's at the fork, before any session key or store
 * exists, with the session secret wiped.
 *
 * The spawner's only input is the supervisor's socket: one fixed-size
 * request per child (every length, count, index and string checked;
 * anything else refused, never guessed), with its descriptors by
 * SCM_RIGHTS.  It starts the child with uv_spawn exactly as the
 * supervisor did, answers with its pid and a pidfd, and reports its exit.
 * It execs only sandletd's own binary (as a user that is not root, when
 * root) or, for an upgrade, the path and argv sandletd was started with
 * and its own environment: the supervisor chooses neither the file nor,
 * for root, the arguments.  It never reads anything else, signals no
 * process but a child whose pidfd it could not make, and leaves as soon
 * as the supervisor is gone (its children then die with it:
 * PR_SET_PDEATHSIG).
 */
#include "config.h"

#include "sandbox/spawner.h"
#include "common/log.h"
#include "sandbox/control.h"
#include "sandbox/harden.h"
#include "sandbox/upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

#define SPAWN_MAGIC  0x736e7731u /* "snw1" */
#define FORGET_MAGIC 0x66676e31u /* "fgn1" */
#define LOG_MAGIC    0x6c6f6731u /* "log1" */
/* The strings of one request: argv then env, each NUL-ended.  A page
 * compile's paths, or an upgrade's environment, are the largest. */
#define SPAWN_STRINGS     65536
#define SPAWN_MAX_STRINGS 1024
/* A spawner that does not answer a request in this time is hung: the
 * supervisor ends rather than wait with it. */
#define SPAWN_ANSWER_MS 30000
/* The spawner's name in ps and /proc/PID/comm (at most 15 characters). */
#define SPAWNER_NAME "sandlet-spawner"

/* Supervisor to spawner. */
typedef struct {
    uint32_t magic;
    uint32_t file; /* enum sandlet_spawn_file */
    uint32_t uid, gid;
    uint32_t detached;
    uint32_t nfds;                     /* the child's descriptors 0..nfds-1 */
    int32_t fd[SANDLET_SPAWN_MAX_FDS]; /* index into the descriptors sent, or -1 */
    uint32_t npassed;                  /* descriptors sent (SCM_RIGHTS) */
    uint32_t nargs, nenv;
    uint32_t len; /* bytes of strings that follow */
    char strings[SPAWN_STRINGS];
} spawn_req;

/* Supervisor to spawner, unanswered.  FORGET_MAGIC: the upgrade's new
 * daemon serves and is its own; it is no longer reaped here, so that
 * whoever it is reparented to when we are gone (the service manager)
 * learns its end, as before the split.  LOG_MAGIC (pid 0, one
 * descriptor): the error log was reopened; it becomes our standard error
 * too, so that our own lines follow logrotate. */
typedef struct {
    uint32_t magic;
    int32_t pid;
} note_req;

enum { MSG_SPAWNED = 1, MSG_EXITED = 2 };

/* Spawner to supervisor: SPAWNED answers each request in order (with the
 * pidfd when err is 0); EXITED comes once per child. */
typedef struct {
    uint32_t type;
    int32_t pid;
    int32_t err;
    int32_t signal;
    int64_t status;
} spawn_msg;

/* ---- the spawner process --------------------------------------------------- */

static struct {
    int sock;
    const char *exe;
    uv_loop_t loop;
    uv_poll_t poll;
    uv_process_t *upgrade; /* the upgrade's new daemon, until reported or forgotten */
    spawn_req req;
} sp;

/* Sends len bytes of p on sock in one message, with the nfd descriptors
 * of fds (at most SANDLET_SPAWN_MAX_FDS).  Returns what sendmsg did. */
static ssize_t send_fds(int sock, const void *p, size_t len, const int *fds, size_t nfd)
{
    struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * SANDLET_SPAWN_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfd) {
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfd);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfd);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfd);
    }
    ssize_t n;
    do
        n = sendmsg(sock, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
}

static void spawner_send(const spawn_msg *m, int fd)
{
    ssize_t n = send_fds(sp.sock, m, sizeof(*m), &fd, fd >= 0);
    if (n != (ssize_t)sizeof(*m)) {
        /* The supervisor is gone: so are we (our children with us). */
        _exit(n < 0 && errno == EPIPE ? 0 : 1);
    }
}

static void kid_closed(uv_handle_t *h)
{
    free(h);
}

static void kid_exited(uv_process_t *p, int64_t status, int term_signal)
{
    spawn_msg m = {.type = MSG_EXITED, .pid = p->pid, .signal = term_signal, .status = status};
    if (p == sp.upgrade)
        sp.upgrade = NULL;
    spawner_send(&m, -1);
    uv_close((uv_handle_t *)p, kid_closed);
}

static bool env_has(const char *s)
{
    for (char **e = environ; e && *e; e++)
        if (strcmp(*e, s) == 0)
            return true;
    return false;
}

/* An upgrade's environment is ours (the daemon's, as it was started) and
 * the upgrade's three variables: nothing else, so that the supervisor
 * cannot preload a library into a process that runs as root. */
static bool upgrade_env_ok(const char *s)
{
    static const char *const vars[] = {SANDLET_ENV_LISTEN_FDS "=", SANDLET_ENV_UPGRADE_FD "=",
                                       SANDLET_ENV_STORE_FDS "="};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (strncmp(s, vars[i], strlen(vars[i])) == 0)
            return true;
    return env_has(s);
}

/* Checks the request in sp.req (n bytes, npassed descriptors) and fills
 * argv and env with pointers into it; NULL, or why it is refused. */
static const char *check(ssize_t n, size_t npassed, char **argv, char **env)
{
    spawn_req *r = &sp.req;
    size_t head = offsetof(spawn_req, strings);
    if (n < (ssize_t)head)
        return "shorter than a request";
    if (r->magic != SPAWN_MAGIC)
        return "not a request";
    if (r->len > SPAWN_STRINGS || (size_t)n != head + r->len)
        return "its length is not the one it announces";
    if (r->npassed != npassed)
        return "it carries another number of descriptors than it announces";
    if (r->nfds > SANDLET_SPAWN_MAX_FDS)
        return "too many descriptors for the child";
    for (uint32_t i = 0; i < r->nfds; i++)
        if (r->fd[i] < -1 || (r->fd[i] >= 0 && (size_t)r->fd[i] >= npassed))
            return "a descriptor index out of range";
    if (r->nargs < 1 || r->nargs > SPAWN_MAX_STRINGS || r->nenv > SPAWN_MAX_STRINGS)
        return "a bad number of arguments or variables";
    size_t at = 0;
    for (uint32_t i = 0; i < r->nargs + r->nenv; i++) {
        const char *s = r->strings + at;
        const char *end = at < r->len ? memchr(s, '\0', r->len - at) : NULL;
        if (!end)
            return "a string runs past the request";
        if (i < r->nargs)
            argv[i] = (char *)s;
        else
            env[i - r->nargs] = (char *)s;
        at += (size_t)(end - s) + 1;
    }
    if (at != r->len)
        return "bytes after its strings";
    argv[r->nargs] = NULL;
    env[r->nenv] = NULL;
    bool root = geteuid() == 0;
    if (r->file == SANDLET_SPAWN_SELF) {
        /* Root starts nothing as root but the upgrade. */
        if (root && (r->uid == 0 || r->gid == 0 || r->uid == UINT32_MAX || r->gid == UINT32_MAX))
            return "a worker or compile as root";
        if (!root && (r->uid != UINT32_MAX || r->gid != UINT32_MAX))
            return "another identity, and we are not root";
        return NULL;
    }
    if (r->file != SANDLET_SPAWN_UPGRADE)
        return "an unknown file";
    if (r->uid != UINT32_MAX || r->gid != UINT32_MAX || !r->detached)
        return "an upgrade that is not a detached start as ourselves";
    if (sp.upgrade)
        return "a second upgrade while one runs";
    for (uint32_t i = 0; i < r->nenv; i++)
        if (!upgrade_env_ok(env[i]))
            return "an upgrade with a variable of its own";
    return NULL;
}

/* One request: received, checked, started, answered. */
static void serve(void)
{
    spawn_req *r = &sp.req;
    struct iovec iov = {.iov_base = r, .iov_len = sizeof(*r)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * SANDLET_SPAWN_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n = recvmsg(sp.sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0)
        _exit(0); /* the supervisor is gone */
    int passed[SANDLET_SPAWN_MAX_FDS];
    bool extra = false;
    size_t npassed = sandlet_ctl_take_fds(&mh, passed, SANDLET_SPAWN_MAX_FDS, &extra);
    if (n == (ssize_t)sizeof(note_req) && r->magic == LOG_MAGIC) {
        if (npassed != 1 || extra)
            sandlet_error("the supervisor sent a new error log without exactly one descriptor; "
                          "refused (only a mismatched or taken-over supervisor does: restart "
                          "sandletd)");
        else if (dup2(passed[0], STDERR_FILENO) < 0)
            sandlet_log_errno(SANDLET_LOG_WARN, -errno,
                              "cannot take the reopened error log; the spawner's lines go to the "
                              "previous file");
        for (size_t i = 0; i < npassed; i++)
            close(passed[i]);
        return;
    }
    if (n == (ssize_t)sizeof(note_req) && r->magic == FORGET_MAGIC) {
        note_req f;
        memcpy(&f, r, sizeof(f));
        for (size_t i = 0; i < npassed; i++)
            close(passed[i]);
        if (!npassed && !extra && !sp.upgrade)
            return; /* its exit crossed the request: reported, reaped */
        if (npassed || extra || sp.upgrade->pid != f.pid)
            sandlet_error("the supervisor asked to forget pid %d, which is not the upgrade's new "
                          "daemon; refused (only a mismatched or taken-over supervisor does: "
                          "restart sandletd)",
                          (int)f.pid);
        else {
            uv_close((uv_handle_t *)sp.upgrade, kid_closed);
            sp.upgrade = NULL;
        }
        return;
    }
    static char *argv[SPAWN_MAX_STRINGS + 1], *env[SPAWN_MAX_STRINGS + 1];
    const char *why = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? "truncated"
                      : extra                                   ? "descriptors it cannot carry"
                                                                : check(n, npassed, argv, env);
    spawn_msg m = {.type = MSG_SPAWNED, .err = -EINVAL};
    int pidfd = -1;
    if (why) {
        sandlet_error("a request of the supervisor is refused: %s (only a mismatched or "
                      "taken-over supervisor sends one: restart sandletd, and report it if it "
                      "recurs)",
                      why);
    } else {
        uv_stdio_container_t stdio[SANDLET_SPAWN_MAX_FDS];
        for (uint32_t i = 0; i < r->nfds; i++) {
            stdio[i].flags = r->fd[i] >= 0 ? UV_INHERIT_FD : UV_IGNORE;
            stdio[i].data.fd = r->fd[i] >= 0 ? passed[r->fd[i]] : -1;
        }
        const char *path = sp.exe;
        char *const *args = argv;
        if (r->file == SANDLET_SPAWN_UPGRADE && !sandlet_upgrade_exec(&path, &args))
            path = NULL;
        uv_process_options_t opts = {
            .exit_cb = kid_exited,
            .file = path,
            .args = (char **)args,
            .env = env,
            .stdio_count = (int)r->nfds,
            .stdio = stdio,
            .flags = r->detached ? UV_PROCESS_DETACHED : 0,
        };
        /* The identity is dropped in the child before exec (libuv:
         * setgroups(0), setgid, setuid): nothing of it runs as root. */
        if (r->uid != UINT32_MAX) {
            opts.flags |= UV_PROCESS_SETUID | UV_PROCESS_SETGID;
            opts.uid = (uv_uid_t)r->uid;
            opts.gid = (uv_gid_t)r->gid;
        }
        uv_process_t *p = path ? calloc(1, sizeof(*p)) : NULL;
        int rc = !path ? -ENOENT : !p ? -ENOMEM : uv_spawn(&sp.loop, p, &opts);
        if (rc < 0) {
            if (p)
                uv_close((uv_handle_t *)p, kid_closed);
            m.err = rc;
        } else {
            /* Our child, not reaped before its exit callback: the pid is
             * its own, and so is the pidfd. */
            pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
            if (pidfd < 0 && errno == ENOSYS) {
                /* A kernel before 5.3, or valgrind (3.19 knows no
                 * pidfd_open): the supervisor signals by pid, which stays
                 * this child's until we reap it and report its exit. */
                m.err = 0;
            } else if (pidfd < 0) {
                m.err = -errno;
                sandlet_log_errno(SANDLET_LOG_ERROR, m.err,
                                  "cannot make a pidfd for child %d (Linux 5.3 or later is "
                                  "needed); it is killed and its start fails",
                                  (int)p->pid);
                uv_process_kill(p, SIGKILL); /* its exit is still reported */
            } else
                m.err = 0;
            m.pid = p->pid;
            if (r->file == SANDLET_SPAWN_UPGRADE)
                sp.upgrade = p;
        }
    }
    for (size_t i = 0; i < npassed; i++)
        close(passed[i]);
    spawner_send(&m, pidfd);
    if (pidfd >= 0)
        close(pidfd);
}

static void on_request(uv_poll_t *p, int status, int events)
{
    (void)p;
    if (status < 0)
        _exit(1);
    if (events & UV_READABLE)
        serve();
    else if (events & UV_DISCONNECT)
        _exit(0);
}

static _Noreturn void spawner_main(pid_t supervisor)
{
    sandlet_log_set_role("spawner");
    /* Named apart from the workers and the daemon in ps and /proc. */
    if (prctl(PR_SET_NAME, SPAWNER_NAME, 0, 0, 0) < 0)
        sandlet_log_errno(SANDLET_LOG_WARN, -errno, "cannot set the spawner's name");
    /* Nothing of the inherited sessions (upgrade.c) is ours to hold. */
    sandlet_upgrade_stores_close();
    /* As the supervisor: sanitizer runs keep ptrace for their tools. */
    if (!getenv("SANDLET_NO_CONFINEMENT") && sandlet_harden_spawner() < 0)
        _exit(1);
    /* Gone with the supervisor, whatever ends it: the workers, whose
     * parent we are, then die too (their own PR_SET_PDEATHSIG).  After
     * the capabilities change, which could clear it. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != supervisor)
        _exit(1);
    int rc = uv_loop_init(&sp.loop);
    if (rc == 0)
        rc = uv_poll_init(&sp.loop, &sp.poll, sp.sock);
    if (rc == 0)
        rc = uv_poll_start(&sp.poll, UV_READABLE | UV_DISCONNECT, on_request);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "the spawner cannot start its event loop");
        _exit(1);
    }
    uv_run(&sp.loop, UV_RUN_DEFAULT);
    _exit(0);
}

/* ---- the supervisor's side ------------------------------------------------- */

static struct {
    int sock;
    pid_t pid;
    uv_poll_t poll;
    bool watching;
    bool closing; /* unwatch once the last child's exit is reported */
    void (*lost)(void);
    /* Exits read while waiting for an answer, handled at the loop's next
     * idle phase: never from a timer, since a 0 ms timer started by what
     * an exit restarts runs in the same pass of the loop's timers, which
     * would then never reach its poll (a worker that restarts and exits
     * at once, its acceptor gone, kept the supervisor from ever reading
     * that end). */
    uv_idle_t later;
    sandlet_proc *live;
    spawn_msg *queued;
    size_t nqueued, head, cap;
    spawn_req req;
} cl = {.sock = -1};

pid_t sandlet_spawner_fork(const char *exe, int close_fd, void *wipe, size_t wipe_len)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        int err = -errno;
        sandlet_log_errno(SANDLET_LOG_ERROR, err, "cannot make the spawner's socket");
        return err;
    }
    pid_t me = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int err = -errno;
        sandlet_log_errno(SANDLET_LOG_ERROR, err, "cannot fork the spawner");
        close(sv[0]);
        close(sv[1]);
        return err;
    }
    if (pid == 0) {
        close(sv[0]);
        if (close_fd >= 0)
            close(close_fd);
        sodium_memzero(wipe, wipe_len);
        sp.sock = sv[1];
        sp.exe = exe;
        spawner_main(me);
    }
    close(sv[1]);
    cl.sock = sv[0];
    cl.pid = pid;
    return pid;
}

static _Noreturn void spawner_lost(const char *why)
{
    sandlet_error("the spawner (pid %d) that starts the workers %s: the supervisor exits, and "
                  "with it the daemon, so that its service manager starts it again; if it "
                  "recurs, look above for the spawner's own error",
                  (int)cl.pid, why);
    if (cl.lost)
        cl.lost();
    _exit(1);
}

/* One message from the spawner, waiting or not; false when none is
 * there (only when not waiting).  A pidfd comes only with a SPAWNED
 * that succeeded, and not always (no pidfd_open: sandlet_proc_kill). */
static bool receive(spawn_msg *m, int *pidfd, bool wait)
{
    struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr mh;
    ssize_t n;
    for (;;) {
        if (wait) {
            struct pollfd pfd = {.fd = cl.sock, .events = POLLIN};
            int rc;
            do
                rc = poll(&pfd, 1, SPAWN_ANSWER_MS);
            while (rc < 0 && errno == EINTR);
            if (rc == 0)
                spawner_lost("has not answered in 30 s");
            if (rc < 0)
                spawner_lost("cannot be waited for");
        }
        mh = (struct msghdr){.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = u.buf,
                             .msg_controllen = sizeof(u.buf)};
        do
            n = recvmsg(cl.sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n >= 0 || errno != EAGAIN)
            break;
        if (!wait)
            return false;
    }
    if (n == 0)
        spawner_lost("is gone");
    if (n < 0)
        spawner_lost("cannot be read from");
    int fds[4], nfd = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && nfd < 4; i++)
            memcpy(&fds[nfd++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    bool ok = n == (ssize_t)sizeof(*m) && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
              ((m->type == MSG_SPAWNED && (m->err == 0 ? nfd <= 1 : nfd == 0)) ||
               (m->type == MSG_EXITED && nfd == 0));
    if (!ok) {
        for (int i = 0; i < nfd; i++)
            close(fds[i]);
        spawner_lost("sent what it never sends");
    }
    *pidfd = nfd ? fds[0] : -1;
    return true;
}

static void close_watch(void)
{
    cl.watching = false;
    uv_poll_stop(&cl.poll);
    uv_close((uv_handle_t *)&cl.poll, NULL);
    uv_idle_stop(&cl.later);
    uv_close((uv_handle_t *)&cl.later, NULL);
}

static void exited(const spawn_msg *m)
{
    for (sandlet_proc **pp = &cl.live; *pp; pp = &(*pp)->next) {
        sandlet_proc *p = *pp;
        if (p->pid != m->pid)
            continue;
        *pp = p->next;
        p->next = NULL;
        if (p->pidfd >= 0)
            close(p->pidfd);
        p->pidfd = -1;
        p->exit_cb(p, m->status, m->signal);
        if (cl.closing && cl.watching && !cl.live)
            close_watch();
        return;
    }
    /* A forgotten child's (an upgrade's new daemon). */
}

static void dispatch_queued(void)
{
    while (cl.head < cl.nqueued) {
        spawn_msg m = cl.queued[cl.head++];
        exited(&m);
    }
    cl.head = cl.nqueued = 0;
}

static void on_later(uv_idle_t *h)
{
    uv_idle_stop(h);
    dispatch_queued();
}

static void on_spawner(uv_poll_t *p, int status, int events)
{
    (void)p;
    (void)events;
    if (status < 0)
        spawner_lost("cannot be watched");
    dispatch_queued();
    spawn_msg m;
    int fd;
    /* A bounded turn: reaping must not keep the loop from the rest. */
    for (int i = 0; i < 256 && cl.watching && receive(&m, &fd, false); i++) {
        if (m.type != MSG_EXITED)
            spawner_lost("answered a request it was not sent");
        exited(&m);
    }
}

int sandlet_spawner_watch(uv_loop_t *loop, void (*lost)(void))
{
    cl.lost = lost;
    int rc = uv_poll_init(loop, &cl.poll, cl.sock);
    if (rc == 0)
        rc = uv_poll_start(&cl.poll, UV_READABLE | UV_DISCONNECT, on_spawner);
    if (rc == 0)
        rc = uv_idle_init(loop, &cl.later);
    if (rc == 0)
        cl.watching = true;
    return rc;
}

void sandlet_spawner_unwatch(void)
{
    cl.closing = true;
    if (cl.watching && !cl.live)
        close_watch();
}

/* Appends s to the request's strings; false when they are full. */
static bool put_string(spawn_req *r, const char *s)
{
    size_t len = strlen(s) + 1;
    if (len > SPAWN_STRINGS - r->len)
        return false;
    memcpy(r->strings + r->len, s, len);
    r->len += (uint32_t)len;
    return true;
}

int sandlet_spawn(sandlet_proc *p, const sandlet_spawn_opts *o)
{
    p->pid = 0;
    p->pidfd = -1;
    p->next = NULL;
    spawn_req *r = &cl.req;
    memset(r, 0, offsetof(spawn_req, strings));
    r->magic = SPAWN_MAGIC;
    r->file = (uint32_t)o->file;
    r->uid = o->uid;
    r->gid = o->gid;
    r->detached = o->detached;
    if (o->nfds > SANDLET_SPAWN_MAX_FDS)
        return -E2BIG;
    r->nfds = (uint32_t)o->nfds;
    int passed[SANDLET_SPAWN_MAX_FDS] = {0};
    for (size_t i = 0; i < o->nfds; i++) {
        r->fd[i] = -1;
        if (o->fds[i] < 0)
            continue;
        /* A descriptor given for several places is sent once. */
        for (uint32_t k = 0; k < r->npassed && r->fd[i] < 0; k++)
            if (passed[k] == o->fds[i])
                r->fd[i] = (int32_t)k;
        if (r->fd[i] < 0) {
            passed[r->npassed] = o->fds[i];
            r->fd[i] = (int32_t)r->npassed++;
        }
    }
    for (char *const *a = o->args; *a; a++, r->nargs++)
        if (r->nargs == SPAWN_MAX_STRINGS || !put_string(r, *a))
            return -E2BIG;
    for (char *const *e = o->env; e && *e; e++, r->nenv++)
        if (r->nenv == SPAWN_MAX_STRINGS || !put_string(r, *e))
            return -E2BIG;
    ssize_t n = send_fds(cl.sock, r, offsetof(spawn_req, strings) + r->len, passed, r->npassed);
    if (n < 0)
        spawner_lost("cannot be written to");
    /* Exits that come first are kept for the loop: the caller is in the
     * middle of its own bookkeeping. */
    for (;;) {
        spawn_msg m;
        int pidfd;
        receive(&m, &pidfd, true);
        if (m.type == MSG_SPAWNED) {
            if (m.err < 0)
                return m.err;
            p->pid = m.pid;
            p->pidfd = pidfd;
            p->next = cl.live;
            cl.live = p;
            break;
        }
        if (cl.nqueued == cl.cap) {
            size_t cap = cl.cap ? 2 * cl.cap : 16;
            spawn_msg *q = realloc(cl.queued, cap * sizeof(*q));
            if (!q)
                spawner_lost("reported more exits than memory holds");
            cl.queued = q;
            cl.cap = cap;
        }
        cl.queued[cl.nqueued++] = m;
    }
    if (cl.nqueued > cl.head && cl.watching)
        uv_idle_start(&cl.later, on_later);
    return 0;
}

void sandlet_spawner_log(int fd)
{
    note_req f = {.magic = LOG_MAGIC};
    if (send_fds(cl.sock, &f, sizeof(f), &fd, 1) != (ssize_t)sizeof(f))
        spawner_lost("cannot be written to");
}

int sandlet_proc_kill(sandlet_proc *p, int sig)
{
    /* No pidfd: the spawner could not make one (no pidfd_open: an old
     * kernel, valgrind).  The pid is the child's until its exit is
     * reported, but for the moment between the spawner's reaping it and
     * the report reaching us. */
    if (p->pidfd < 0) {
        for (const sandlet_proc *q = cl.live; q; q = q->next)
            if (q == p)
                return kill(p->pid, sig) < 0 ? -errno : 0;
        return -ESRCH;
    }
    if (syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0) < 0)
        return -errno;
    return 0;
}

void sandlet_proc_forget(sandlet_proc *p)
{
    bool live = false;
    for (sandlet_proc **pp = &cl.live; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            live = true;
            break;
        }
    p->next = NULL;
    if (live) {
        note_req f = {.magic = FORGET_MAGIC, .pid = p->pid};
        if (send_fds(cl.sock, &f, sizeof(f), NULL, 0) != (ssize_t)sizeof(f))
            spawner_lost("cannot be written to");
    }
    if (p->pidfd >= 0)
        close(p->pidfd);
    p->pidfd = -1;
}

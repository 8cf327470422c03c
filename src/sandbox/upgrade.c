/*
 * upgrade.c - a binary upgrade as nginx does one, the supervisor's side.
 *
 * "sandletd -s upgrade" sends SIGUSR2 to the acceptor, which hands its
 * listening sockets over (HANDOVER) and asks for the UPGRADE.  The
 * supervisor has its spawner (spawner.c), the one process that may start
 * a daemon as root, start the binary at the path sandletd was started
 * from (the new one, once a package replaced the file) with the same
 * arguments, the listeners as
 * descriptors 3... named by SANDLET_LISTEN_FDS, and the write end of a
 * pipe named by SANDLET_UPGRADE_FD.  The new daemon checks each listener
 * against its own listen lines, binds what it was not given, and writes
 * 'R' on the pipe once it serves.  Then the acceptor is told (UPGRADED):
 * it stops accepting and finishes its requests, as at a stop.  A new
 * daemon that exits first, or is not ready within SANDLET_UPGRADE_READY_MS
 * (then it is stopped), leaves the old one serving as if nothing happened.
 *
 * The memory session stores go too (SANDLET_STORE_FDS): the new daemon's
 * supervisor copies their sessions into stores of its own
 * (sandlet_session_store_adopt); the two daemons never share one.  The
 * new daemon's side of that, taking the descriptors the variable names,
 * is here as well.
 *
 * It never reads what the new daemon writes beyond that one byte, never
 * passes on a descriptor that is not a listening socket or a session
 * store, and signals only the child it started.
 */
#include "config.h"

#include "sandbox/upgrade.h"
#include "common/log.h"
#include "sandbox/spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

static struct {
    const char *path;
    char *const *argv;
    int fds[SANDLET_UPGRADE_MAX_FDS];
    size_t nfds;
    sandlet_upgrade_env env;
    bool busy;         /* from UPGRADE to its outcome */
    bool running;      /* the new daemon was started and has not failed */
    sandlet_proc proc; /* started by the spawner (spawner.c) */
    bool proc_open;    /* its exit is still to come */
    uv_poll_t poll;
    int pipe_fd; /* read end, or -1 */
    bool poll_open;
    uv_timer_t timer;
    bool timer_open;
    bool termed; /* the timer sent SIGTERM; next, SIGKILL */
} up = {.pipe_fd = -1};

/* The new daemon's inherited stores (sandlet_upgrade_stores_inherit). */
static struct {
    char name[SANDLET_UPGRADE_MAX_STORES][64];
    int fd[SANDLET_UPGRADE_MAX_STORES];
    size_t n;
} inherited;

void sandlet_upgrade_set_exec(const char *path, char *const *argv)
{
    up.path = path;
    up.argv = argv;
}

bool sandlet_upgrade_exec(const char **path, char *const **argv)
{
    if (!up.path || !up.argv)
        return false;
    *path = up.path;
    *argv = up.argv;
    return true;
}

bool sandlet_upgrade_busy(void)
{
    return up.busy;
}

static void drop_fds(void)
{
    for (size_t i = 0; i < up.nfds; i++)
        close(up.fds[i]);
    up.nfds = 0;
}

int sandlet_upgrade_handover(int fd)
{
    int type = 0, listening = 0;
    socklen_t len = sizeof(type);
    int rc = 0;
    if (up.busy)
        rc = -EBUSY;
    else if (up.nfds >= SANDLET_UPGRADE_MAX_FDS)
        rc = -E2BIG;
    else if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_STREAM ||
             ((len = sizeof(listening)),
              getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0) ||
             !listening)
        rc = -EINVAL;
    if (rc < 0) {
        close(fd); /* a listener has no linger to wait for (control.c) */
        return rc;
    }
    /* Never a worker's: only the new daemon gets it, placed by uv_spawn. */
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    up.fds[up.nfds++] = fd;
    return 0;
}

static void proc_forget(void)
{
    if (!up.proc_open)
        return;
    sandlet_proc_forget(&up.proc);
    up.proc_open = false;
}

static void handle_closed(uv_handle_t *h)
{
    if (h == (uv_handle_t *)&up.poll)
        up.poll_open = false;
    else if (h == (uv_handle_t *)&up.timer)
        up.timer_open = false;
}

static void close_watch(void)
{
    if (up.poll_open && !uv_is_closing((uv_handle_t *)&up.poll))
        uv_close((uv_handle_t *)&up.poll, handle_closed);
    if (up.pipe_fd >= 0) {
        close(up.pipe_fd);
        up.pipe_fd = -1;
    }
    if (up.timer_open && !uv_is_closing((uv_handle_t *)&up.timer))
        uv_close((uv_handle_t *)&up.timer, handle_closed);
}

/* The outcome, once: the supervisor's state file and the acceptor. */
static void finish(bool handed, int err, const char *message)
{
    if (!up.busy)
        return;
    up.busy = false;
    close_watch();
    long pid = up.proc_open ? (long)up.proc.pid : 0;
    if (handed) {
        /* The new daemon is its own: its exit is not ours to wait for
         * (once we are gone it is the service manager's), and a handle
         * left open would keep this loop, and the old daemon, alive. */
        proc_forget();
        sandlet_info("%s", message);
    } else {
        up.running = false;
        sandlet_error("%s", message);
    }
    up.env.done(handed, pid, message);
    sandlet_ctl m = {.type = SANDLET_CTL_UPGRADED, .pid = (int32_t)pid, .status = handed ? 0 : err};
    up.env.tell(&m, NULL, 0);
}

static void on_exit_cb(sandlet_proc *p, int64_t status, int term_signal)
{
    char msg[512];
    snprintf(msg, sizeof(msg),
             "upgrade failed: the new sandletd (pid %d, %s) exited with %s %d before it was ready "
             "(its reason is in the error log above); this one serves on",
             p->pid, up.path, term_signal ? "signal" : "status",
             term_signal ? term_signal : (int)status);
    finish(false, -ECHILD, msg);
    up.proc_open = false; /* reported: the spawner has reaped it */
}

static void on_ready(uv_poll_t *p, int status, int events)
{
    (void)events;
    char c = 0;
    ssize_t n = 0;
    if (status == 0 && (n = read(up.pipe_fd, &c, 1)) < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n == 1 && c == 'R') {
        char msg[512];
        snprintf(msg, sizeof(msg),
                 "upgrade: the new sandletd (pid %d, %s) serves; this one stops accepting and "
                 "finishes its requests",
                 up.proc.pid, up.path);
        finish(true, 0, msg);
        return;
    }
    /* End of file, an error or a wrong byte: only the exit, soon, or the
     * timer tells the end. */
    uv_poll_stop(p);
}

/* Not ready in time: SIGTERM (it stops as any daemon does), and SIGKILL
 * when it has not exited SANDLET_UPGRADE_KILL_MS later; its exit is the
 * failure (on_exit_cb). */
static void on_timeout(uv_timer_t *t)
{
    if (!up.termed) {
        sandlet_error("upgrade: the new sandletd (pid %d) is not ready after %d ms; stopping it",
                      up.proc.pid, SANDLET_UPGRADE_READY_MS);
        up.termed = true;
        (void)sandlet_proc_kill(&up.proc, SIGTERM); /* -ESRCH: its exit is on its way */
        uv_timer_start(t, on_timeout, SANDLET_UPGRADE_KILL_MS, 0);
        return;
    }
    sandlet_error("upgrade: the new sandletd (pid %d) did not stop in %d ms; killing it",
                  up.proc.pid, SANDLET_UPGRADE_KILL_MS);
    (void)sandlet_proc_kill(&up.proc, SIGKILL);
}

/* environ without our three variables, then them (stores only when
 * given): a malloc'd array. */
static char **child_env(char *listen, char *ready, char *stores)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 4, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], SANDLET_ENV_LISTEN_FDS "=", sizeof(SANDLET_ENV_LISTEN_FDS)) != 0 &&
            strncmp(environ[i], SANDLET_ENV_UPGRADE_FD "=", sizeof(SANDLET_ENV_UPGRADE_FD)) != 0 &&
            strncmp(environ[i], SANDLET_ENV_STORE_FDS "=", sizeof(SANDLET_ENV_STORE_FDS)) != 0)
            env[k++] = environ[i];
    env[k++] = listen;
    env[k++] = ready;
    if (stores)
        env[k++] = stores;
    env[k] = NULL;
    return env;
}

/* A sandbox name as the configuration allows it, and short enough for
 * the table: nothing else is put in, or taken from, the variable. */
static bool store_name_ok(const char *name, size_t len)
{
    if (len == 0 || len >= sizeof(inherited.name[0]))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

/* Starts the new daemon; 0, or -errno with msg set. */
static int spawn_new(char *msg, size_t cap)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
        int err = -errno;
        snprintf(msg, cap, "upgrade failed: cannot make a pipe: %s", strerror(-err));
        return err;
    }
    int stdio[3 + SANDLET_UPGRADE_MAX_FDS + 1 + SANDLET_UPGRADE_MAX_STORES];
    stdio[0] = -1; /* /dev/null */
    stdio[1] = 1;
    stdio[2] = 2;
    char listen[32 + 5 * SANDLET_UPGRADE_MAX_FDS], ready[48];
    size_t used = (size_t)snprintf(listen, sizeof(listen), "%s=", SANDLET_ENV_LISTEN_FDS);
    for (size_t i = 0; i < up.nfds; i++) {
        stdio[3 + i] = up.fds[i];
        used +=
            (size_t)snprintf(listen + used, sizeof(listen) - used, "%s%zu", i ? " " : "", 3 + i);
    }
    stdio[3 + up.nfds] = p[1];
    snprintf(ready, sizeof(ready), "%s=%zu", SANDLET_ENV_UPGRADE_FD, 3 + up.nfds);
    /* The memory session stores, after the pipe: the new daemon copies
     * their sessions (it never shares them with us). */
    int sfds[SANDLET_UPGRADE_MAX_STORES];
    const char *snames[SANDLET_UPGRADE_MAX_STORES];
    size_t nstores = up.env.stores ? up.env.stores(sfds, snames, SANDLET_UPGRADE_MAX_STORES) : 0;
    char stores[sizeof(SANDLET_ENV_STORE_FDS) + (size_t)SANDLET_UPGRADE_MAX_STORES * (64 + 6)];
    size_t sused = (size_t)snprintf(stores, sizeof(stores), "%s=", SANDLET_ENV_STORE_FDS);
    size_t given = 0;
    for (size_t j = 0; j < nstores; j++) {
        size_t at = 4 + up.nfds + given;
        if (!store_name_ok(snames[j], strlen(snames[j]))) {
            /* The variable carries names as words: said, not hidden. */
            sandlet_warn("upgrade: the memory sessions of sandbox '%s' are not handed over (its "
                         "name has characters other than letters, digits, '-', '_' and '.')",
                         snames[j]);
            continue;
        }
        int w = snprintf(stores + sused, sizeof(stores) - sused, "%s%s:%zu", given ? " " : "",
                         snames[j], at);
        if (w < 0 || (size_t)w >= sizeof(stores) - sused)
            break;
        sused += (size_t)w;
        stdio[at] = sfds[j];
        given++;
    }
    char **env = child_env(listen, ready, given ? stores : NULL);
    if (!env) {
        close(p[0]);
        close(p[1]);
        snprintf(msg, cap, "upgrade failed: out of memory");
        return -ENOMEM;
    }
    /* The spawner execs the file and argv it has (up.path and up.argv,
     * the same as ours), as root with its capabilities: we have neither
     * the capabilities nor the right to exec. */
    sandlet_spawn_opts opt = {
        .file = SANDLET_SPAWN_UPGRADE,
        .args = up.argv,
        .env = env,
        .uid = UINT32_MAX,
        .gid = UINT32_MAX,
        .fds = stdio,
        .nfds = 3 + up.nfds + 1 + given,
        /* Its own session, as a daemon started by an init script. */
        .detached = true,
    };
    up.proc.exit_cb = on_exit_cb;
    int rc = sandlet_spawn(&up.proc, &opt);
    free(env);
    close(p[1]);
    if (rc < 0) {
        close(p[0]);
        snprintf(msg, cap,
                 "upgrade failed: cannot start %s: %s (is the file there and executable?)", up.path,
                 strerror(-rc));
        return rc;
    }
    up.proc_open = true;
    up.termed = false;
    up.pipe_fd = p[0];
    uv_poll_init(up.env.loop, &up.poll, p[0]);
    up.poll_open = true;
    uv_poll_start(&up.poll, UV_READABLE | UV_DISCONNECT, on_ready);
    uv_timer_init(up.env.loop, &up.timer);
    up.timer_open = true;
    uv_timer_start(&up.timer, on_timeout, SANDLET_UPGRADE_READY_MS, 0);
    return 0;
}

void sandlet_upgrade_start(const sandlet_upgrade_env *env, uint32_t count)
{
    up.env = *env;
    char msg[512];
    int rc = 0;
    if (up.busy) {
        snprintf(msg, sizeof(msg), "upgrade refused: one is under way already");
        sandlet_error("%s", msg);
        sandlet_ctl m = {.type = SANDLET_CTL_UPGRADED, .status = -EBUSY};
        up.env.tell(&m, NULL, 0);
        return;
    }
    up.busy = true;
    if (!up.path || !up.argv) {
        rc = -ENOENT;
        snprintf(msg, sizeof(msg), "upgrade failed: the daemon's own path is unknown");
    } else if (count != up.nfds || count == 0) {
        rc = -EPROTO;
        snprintf(msg, sizeof(msg),
                 "upgrade failed: the acceptor announced %u listener(s) and handed over %zu", count,
                 up.nfds);
    } else {
        sandlet_info("upgrade: starting %s with %zu listener(s) handed over", up.path, up.nfds);
        rc = spawn_new(msg, sizeof(msg));
    }
    drop_fds(); /* the new daemon has its copies */
    if (rc < 0) {
        finish(false, rc, msg);
        return;
    }
    up.running = true;
}

bool sandlet_upgrade_stop(void)
{
    drop_fds();
    bool running = up.running;
    up.busy = false;
    close_watch();
    proc_forget();
    return running;
}

/* An open regular file (a memfd is one): never a listener or the pipe
 * this daemon also inherited, which closing the stores must not touch. */
static bool is_file(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

void sandlet_upgrade_stores_inherit(void)
{
    const char *list = getenv(SANDLET_ENV_STORE_FDS);
    for (const char *p = list; p && *p && inherited.n < SANDLET_UPGRADE_MAX_STORES;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        const char *colon = strchr(p, ':');
        char *end = NULL;
        long fd = colon ? (errno = 0, strtol(colon + 1, &end, 10)) : -1;
        if (!colon || !store_name_ok(p, (size_t)(colon - p)) || errno || end == colon + 1 ||
            (*end && *end != ' ') || fd < 3 || fd > 1023 || !is_file((int)fd)) {
            sandlet_error("%s='%s': expected SANDBOX:DESCRIPTOR pairs as the previous sandletd "
                          "sets them at an upgrade; its memory sessions are not carried over",
                          SANDLET_ENV_STORE_FDS, list);
            break;
        }
        size_t len = (size_t)(colon - p);
        memcpy(inherited.name[inherited.n], p, len);
        inherited.name[inherited.n][len] = '\0';
        inherited.fd[inherited.n++] = (int)fd;
        if (fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0)
            sandlet_log_errno(SANDLET_LOG_WARN, -errno, "cannot mark descriptor %ld close-on-exec",
                              fd);
        p = end;
    }
    unsetenv(SANDLET_ENV_STORE_FDS);
}

int sandlet_upgrade_store_take(const char *sandbox)
{
    for (size_t i = 0; i < inherited.n; i++)
        if (inherited.fd[i] >= 0 && strcmp(inherited.name[i], sandbox) == 0) {
            int fd = inherited.fd[i];
            inherited.fd[i] = -1;
            return fd;
        }
    return -1;
}

void sandlet_upgrade_stores_close(void)
{
    for (size_t i = 0; i < inherited.n; i++)
        if (inherited.fd[i] >= 0)
            close(inherited.fd[i]);
    inherited.n = 0;
}

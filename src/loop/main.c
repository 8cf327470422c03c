/*
 * main.c - sandletd: read the configuration, bind the listeners, fork the
 * supervisor, drop privileges, run the acceptor loop; stop in order.
 *
 * The same binary is also the worker ("sandletd --worker SANDBOX", exec'd
 * by the supervisor): that mode is decided before anything else runs, so a
 * worker never parses the configuration or touches a listener.
 */
#include "config.h"

#include "loop/acceptor.h"
#include "loop/check.h"
#include "loop/command.h"
#include "common/listen.h"
#include "common/log.h"
#include "common/state.h"
#include "sandbox/control.h"
#include "sandbox/identity.h"
#include "sandbox/supervisor.h"
#include "sandbox/upgrade.h"
#include "sandbox/worker.h"
#include "csp/build.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_CONF       SANDLET_SYSCONFDIR "/sandlet/sandlet.conf"
#define SUPERVISOR_WAIT_MS 8000

static struct {
    sandlet_server srv;
    uv_loop_t loop;
    uv_signal_t sigterm, sigint, sigchld, sigusr1, sigusr2, sighup;
    uv_timer_t drain, reap;
    bool ctl_closed;
    int exit_status;
    bool upgrading; /* SIGUSR2 passed on, no UPGRADED yet */
    /* Started by an upgrade: the pipe on which the previous daemon waits
     * for 'R' (SANDLET_UPGRADE_FD), until we are ready; else -1. */
    int upgrade_fd;
    char self[4096]; /* the path we were started from, for an upgrade */
    char **argv;     /* main's, for an upgrade */
} m = {.upgrade_fd = -1};

static void usage(FILE *to)
{
    fprintf(to, "usage: sandletd [-t] [-T] [-d] [-c FILE] [-s reload|upgrade|wait-ready|pid]\n"
                "  -c FILE  configuration file (default " DEFAULT_CONF ")\n"
                "  -t       check the configuration and exit\n"
                "  -T       print the configuration as read (includes expanded, defaults\n"
                "           written out) and exit\n"
                "  -s CMD   tell the daemon running FILE: reload (and wait for its verdict),\n"
                "           upgrade (start the installed binary on the same listeners, wait\n"
                "           until it serves), wait-ready (until it serves), pid (print its\n"
                "           pid); exit 0, 1 (refused) or 7 (not running)\n"
                "  -W MS    how long -s waits for the answer (default 30000)\n"
                "  -d       log debug messages\n"
                "  -V       print the version and exit\n");
}

static void on_ctl(uv_poll_t *p, int status, int events);

/* Watches the control socket for writability only while messages wait. */
static void ctl_watch(sandlet_server *srv)
{
    if (srv->ctl < 0)
        return;
    bool want = srv->ctl_out.head != NULL;
    if (want == srv->ctl_polling_out)
        return;
    srv->ctl_polling_out = want;
    uv_poll_start(&srv->ctl_poll, UV_READABLE | (want ? UV_WRITABLE : 0), on_ctl);
}

int sandlet_server_control(sandlet_server *srv, uint32_t type, uint32_t sandbox, uint32_t slot,
                           uint32_t gen, int32_t status)
{
    if (srv->ctl < 0)
        return -EPIPE;
    sandlet_ctl msg = {
        .type = type, .sandbox = sandbox, .slot = slot, .gen = gen, .status = status};
    /* Queued when the socket is full: a KILL that is lost would leave a
     * hung worker in its slot for ever. */
    int rc = sandlet_ctl_queue_send(&srv->ctl_out, srv->ctl, &msg, NULL, 0);
    if (rc < 0)
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot reach the supervisor");
    ctl_watch(srv);
    return rc;
}

int sandlet_server_send(sandlet_server *srv, const sandlet_ctl *msg)
{
    if (srv->ctl < 0)
        return -EPIPE;
    int rc = sandlet_ctl_queue_send(&srv->ctl_out, srv->ctl, msg, NULL, 0);
    if (rc < 0)
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot reach the supervisor");
    ctl_watch(srv);
    return rc;
}

/* ---- listeners ------------------------------------------------------------ */

/* Binds before the privilege drop, so that ports below 1024 work. */
static int bind_listener(const sandlet_listen_conf *l, int *out)
{
    int fd;
    int rc = sandlet_listen_bind(l, &fd);
    if (rc < 0)
        return rc;
    if (listen(fd, 511) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

/* "listening on HOST:PORT": init scripts and tests read the port here. */
static void say_listening(const sandlet_listen_conf *l, int fd, const char *how)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    memset(&ss, 0, sizeof(ss));
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        sandlet_info("listening on %s:%u%s", l->host, l->port, how);
        return;
    }
    unsigned port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    sandlet_info("listening on %s%s%s:%u%s", ss.ss_family == AF_INET6 ? "[" : "", l->host,
                 ss.ss_family == AF_INET6 ? "]" : "", port, how);
}

/* A number of the environment variable name, 3 to 1023, into *fd; what
 * is wrong (naming the variable, its value and the fix) on stderr. */
static int env_fd(const char *name, const char *text, int *fd)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || v < 3 || v > 1023) {
        sandlet_error("%s='%s': expected descriptor numbers from 3 to 1023, as the previous "
                      "sandletd sets them at an upgrade; unset %s to start afresh",
                      name, getenv(name), name);
        return -EINVAL;
    }
    *fd = (int)v;
    return (int)(end - text);
}

/* Started by an upgrade (upgrade.c): the listeners the previous daemon
 * handed over (SANDLET_LISTEN_FDS) go to the listen lines they match,
 * checked (a listening TCP socket on that address and port); one that
 * matches no line is closed.  The pipe of SANDLET_UPGRADE_FD is kept for
 * tell_previous.  Both variables are removed, so that nothing started
 * later sees them.  fds[i] is set (else -1) for each line; 0 or -1. */
static int adopt_inherited(const sandlet_conf *conf, int *fds)
{
    for (size_t i = 0; i < conf->nlistens; i++)
        fds[i] = -1;
    /* The memory session stores (SANDLET_STORE_FDS): the supervisor's to
     * copy, which it is forked with. */
    sandlet_upgrade_stores_inherit();
    const char *ready = getenv(SANDLET_ENV_UPGRADE_FD);
    if (ready) {
        struct stat st;
        if (env_fd(SANDLET_ENV_UPGRADE_FD, ready, &m.upgrade_fd) < 0)
            return -1;
        if (fstat(m.upgrade_fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
            sandlet_error("%s=%s: descriptor %d is no pipe; unset %s to start afresh",
                          SANDLET_ENV_UPGRADE_FD, ready, m.upgrade_fd, SANDLET_ENV_UPGRADE_FD);
            m.upgrade_fd = -1;
            return -1;
        }
    }
    const char *list = getenv(SANDLET_ENV_LISTEN_FDS);
    for (const char *p = list; p && *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        int fd, used = env_fd(SANDLET_ENV_LISTEN_FDS, p, &fd);
        if (used < 0)
            return -1;
        p += used;
        bool taken = false, bad = false;
        for (size_t i = 0; !taken && !bad && i < conf->nlistens; i++) {
            if (fds[i] >= 0)
                continue;
            int rc = sandlet_listen_matches(fd, &conf->listens[i]);
            if (rc < 0) {
                sandlet_log_errno(SANDLET_LOG_WARN, rc,
                                  "%s: descriptor %d is no listening TCP socket; not used (the "
                                  "listen lines are bound afresh)",
                                  SANDLET_ENV_LISTEN_FDS, fd);
                bad = true;
                if (rc != -EBADF)
                    close(fd);
            }
            if (rc == 1) {
                fds[i] = fd;
                taken = true;
                say_listening(&conf->listens[i], fd, " (handed over by the previous daemon)");
            }
        }
        if (!taken && !bad) {
            sandlet_info("%s: descriptor %d matches no listen line of %s; closed",
                         SANDLET_ENV_LISTEN_FDS, fd, conf->file);
            close(fd);
        }
    }
    unsetenv(SANDLET_ENV_LISTEN_FDS);
    unsetenv(SANDLET_ENV_UPGRADE_FD);
    return 0;
}

/* Becomes the acceptor's identity (identity.c): never root once started
 * as root. */
static int drop_privileges(const sandlet_id *id)
{
    if (geteuid() != 0 || id->uid == UINT32_MAX)
        return 0;
    if (setgroups(0, NULL) < 0 || setresgid(id->gid, id->gid, id->gid) < 0 ||
        setresuid(id->uid, id->uid, id->uid) < 0)
        return -errno;
    if (setuid(0) == 0) {
        sandlet_error("could drop privileges to uid %u but regain root; refusing to run", id->uid);
        return -EPERM;
    }
    return 0;
}

/* Checks every identity before anything starts, so that a typo stops
 * sandletd with a message instead of a crash-looping sandbox.  The
 * supervisor decides them again from its own copy of the configuration;
 * the acceptor never learns or sends them. */
static int check_identities(const sandlet_conf *conf, sandlet_id *acceptor)
{
    sandlet_id *ids = calloc(conf->nsandboxes + 1, sizeof(*ids));
    if (!ids)
        return -1;
    int rc = sandlet_identity_resolve(conf, acceptor, false, ids);
    free(ids);
    return rc;
}

/* ---- stopping ---------------------------------------------------------------- */

/* The signals that end a process with no handler for them and that
 * operators send: a stop (TERM, INT) and a log reopen (USR1). */
static sigset_t stop_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    return set;
}

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Ends the loop.  Closing a signal watcher gives its signal back its
 * default action, which for these is to end the process: one more stop
 * (a service manager's second SIGTERM) or a reload in the last
 * milliseconds would turn a clean exit into a death by signal.  Held
 * pending instead, they go with the process. */
static void end_loop(void)
{
    sigset_t held = stop_signals();
    sigaddset(&held, SIGHUP);
    sigprocmask(SIG_BLOCK, &held, NULL);
    uv_walk(&m.loop, close_any, NULL);
}

static void on_reap_timeout(uv_timer_t *t)
{
    (void)t;
    sandlet_error("the supervisor (pid %d) did not exit; leaving it", (int)m.srv.supervisor);
    m.exit_status = 1;
    end_loop();
}

void sandlet_server_check_stopped(sandlet_server *srv)
{
    if (!srv->stopping || srv->nconns || m.ctl_closed)
        return;
    /* Every client is answered: close the workers' socketpairs and the
     * control socket; the supervisor sees it, waits for the workers and
     * exits, and its SIGCHLD ends this loop. */
    m.ctl_closed = true;
    uv_timer_stop(&m.drain);
    sandlet_pools_stop(srv);
    uv_poll_stop(&srv->ctl_poll);
    uv_close((uv_handle_t *)&srv->ctl_poll, NULL);
    close(srv->ctl);
    srv->ctl = -1;
    uv_timer_start(&m.reap, on_reap_timeout, SUPERVISOR_WAIT_MS, 0);
}

/* How the connections (http.c) call up: the acceptor's layers, wired
 * here once, so that http.c names none of them. */
static const sandlet_server_hooks server_hooks = SANDLET_SERVER_HOOKS(sandlet_server_check_stopped);

static void on_drain_timeout(uv_timer_t *t)
{
    (void)t;
    sandlet_warn("connections still open after %u ms; closing them", SANDLET_SHUTDOWN_MS);
    sandlet_http_fail_all(&m.srv, 503);
}

static void begin_stop(int status)
{
    sandlet_server *srv = &m.srv;
    if (srv->stopping)
        return;
    srv->stopping = true;
    if (status)
        m.exit_status = status;
    sandlet_info("stopping: finishing %zu connection(s)", srv->nconns);
    sandlet_listeners_close(srv);
    sandlet_http_shutdown(srv);
    uv_timer_start(&m.drain, on_drain_timeout, SANDLET_SHUTDOWN_MS, 0);
    sandlet_server_check_stopped(srv);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    sandlet_info("received %s", strsignal(signum));
    begin_stop(0);
}

static void on_sigchld(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        if (pid != m.srv.supervisor)
            continue;
        m.srv.supervisor = 0;
        if (!m.srv.stopping) {
            sandlet_error("the supervisor exited unexpectedly (%s %d); stopping",
                          WIFSIGNALED(st) ? "signal" : "status",
                          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            begin_stop(1);
        }
    }
    if (m.srv.supervisor == 0 && m.ctl_closed)
        end_loop();
}

static const char *conf_path(const char *p)
{
    return p ? p : "(none)";
}

/* logrotate's signal: the supervisor, which may keep the right to open
 * the files, reopens them and sends the new descriptors back. */
static void on_sigusr1(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    sandlet_access_flush(&m.srv);
    if (m.srv.conf->access_log || m.srv.conf->error_log)
        sandlet_server_control(&m.srv, SANDLET_CTL_REOPEN, 0, 0, 0, 0);
}

/* SIGHUP: the supervisor reads the configuration again (it is root; the
 * file may name files only root reads) and does what a reload does. */
static void on_sighup(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    if (m.srv.stopping) {
        sandlet_info("received SIGHUP while stopping; ignored");
        return;
    }
    sandlet_info("received SIGHUP: reloading %s", m.srv.conf->file);
    sandlet_server_control(&m.srv, SANDLET_CTL_RELOAD, 0, 0, 0, 0);
}

/* SIGUSR2, a binary upgrade ("sandletd -s upgrade"): every listener goes
 * to the supervisor (HANDOVER), which starts the binary at our path with
 * them (UPGRADE, upgrade.c); we serve on until it answers UPGRADED. */
static void on_sigusr2(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    sandlet_server *srv = &m.srv;
    if (srv->stopping || m.upgrading) {
        sandlet_info("received SIGUSR2 while %s; ignored",
                     srv->stopping ? "stopping" : "upgrading already");
        return;
    }
    sandlet_info("received SIGUSR2: upgrading to %s", m.self);
    for (size_t i = 0; i < srv->nlisteners; i++) {
        uv_os_fd_t fd;
        int rc = uv_fileno((uv_handle_t *)&srv->listeners[i]->tcp, &fd);
        int copy = rc < 0 ? rc : fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy < 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, copy < -1 ? copy : -errno,
                              "upgrade: cannot hand over the listener on %s:%u; not upgrading",
                              srv->listeners[i]->host, srv->listeners[i]->port);
            /* The count below no longer matches: the supervisor refuses. */
            break;
        }
        sandlet_ctl msg = {.type = SANDLET_CTL_HANDOVER, .slot = (uint32_t)i};
        if (sandlet_ctl_queue_send(&srv->ctl_out, srv->ctl, &msg, &copy, 1) < 0)
            sandlet_error("upgrade: cannot reach the supervisor; not upgrading");
    }
    sandlet_ctl msg = {.type = SANDLET_CTL_UPGRADE, .status = (int32_t)srv->nlisteners};
    if (sandlet_server_send(srv, &msg) == 0)
        m.upgrading = true;
    ctl_watch(srv);
}

/* The supervisor's answer to UPGRADE.  Taken over: systemd follows the
 * new main process (MAINPID, which only the main process may send under
 * NotifyAccess=main), and we stop as at SIGTERM: no more accepting, the
 * requests in flight finish. */
static void upgraded(const sandlet_ctl *msg)
{
    m.upgrading = false;
    if (msg->status < 0) {
        sandlet_error("upgrade failed (the supervisor's reason is above); still serving");
        return;
    }
    char note[64];
    snprintf(note, sizeof(note), "MAINPID=%d", (int)msg->pid);
    int nrc = sandlet_notify(note);
    if (nrc < 0)
        sandlet_log_errno(SANDLET_LOG_WARN, nrc,
                          "cannot tell the service manager that pid %d is the daemon now",
                          (int)msg->pid);
    sandlet_info("upgrade: pid %d took over", (int)msg->pid);
    begin_stop(0);
}

/* Started by an upgrade: says 'R' to the previous daemon once, when we
 * are ready (its supervisor then stops it). */
static void tell_previous(void)
{
    if (m.upgrade_fd < 0)
        return;
    char r = 'R';
    if (write(m.upgrade_fd, &r, 1) != 1)
        sandlet_log_errno(SANDLET_LOG_WARN, -errno,
                          "cannot tell the previous daemon that this one serves (it stops at its "
                          "own timeout)");
    close(m.upgrade_fd);
    m.upgrade_fd = -1;
}

/* Opens the logs before privileges are dropped: the error log becomes
 * standard error of the acceptor and the supervisor (never of a worker),
 * the access log stays with the acceptor.  The acceptor's user may own
 * the logs and their folder, never anyone else. */
static int open_logs(sandlet_server *srv, const sandlet_id *acceptor)
{
    srv->access_fd = -1;
    const sandlet_conf *conf = srv->conf;
    if (!conf->error_log && !conf->access_log)
        return 0;
    uid_t uid = geteuid() == 0 ? (uid_t)acceptor->uid : getuid();
    gid_t gid = geteuid() == 0 ? (gid_t)acceptor->gid : getgid();
    if (sandlet_log_is_syslog(conf->error_log)) {
        int rc = sandlet_log_syslog_open(); /* the supervisor inherits it */
        if (rc < 0)
            return rc;
    } else if (conf->error_log) {
        int fd = sandlet_log_file_open(SANDLET_LOG_ERROR_FILE, conf->error_log, uid, gid);
        if (fd < 0)
            return fd; /* logged, with the fix */
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    if (conf->access_log) {
        srv->access_fd = sandlet_log_file_open(SANDLET_LOG_ACCESS, conf->access_log, uid, gid);
        if (srv->access_fd < 0)
            return srv->access_fd;
    }
    return 0;
}

static void on_ctl(uv_poll_t *p, int status, int events)
{
    (void)p;
    sandlet_server *srv = &m.srv;
    if (status == 0 && (events & UV_WRITABLE)) {
        int rc = sandlet_ctl_queue_flush(&srv->ctl_out, srv->ctl);
        if (rc < 0 && rc != -EAGAIN)
            status = rc;
        else
            ctl_watch(srv);
    }
    for (;;) {
        sandlet_ctl msg;
        int fds[SANDLET_CTL_MAXFD];
        int rc = status < 0 ? status : sandlet_ctl_recv(srv->ctl, &msg, fds, SANDLET_CTL_MAXFD);
        int fd = rc > 0 ? fds[0] : -1;
        if (rc == -EAGAIN)
            return;
        if (rc == -EPROTO) {
            sandlet_error("malformed message from the supervisor; ignored");
            continue;
        }
        if (rc <= 0) {
            sandlet_error("lost the supervisor's control socket; stopping");
            uv_poll_stop(&srv->ctl_poll);
            sandlet_ctl_queue_clear(&srv->ctl_out);
            begin_stop(1);
            return;
        }
        if (msg.type == SANDLET_CTL_WORKER) {
            /* pool.c takes all four descriptors, whatever it makes of
             * them. */
            sandlet_pool_worker(srv, &msg, fds[0], fds[1], fds[2], fds[3]);
            continue;
        }
        for (int i = 1; i < SANDLET_CTL_MAXFD; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        if (msg.type == SANDLET_CTL_PAGE) {
            sandlet_pages_answer(srv, &msg, fd); /* takes fd */
            continue;
        }
        if (msg.type == SANDLET_CTL_GEN) {
            if (fd >= 0)
                close(fd);
            sandlet_pool *pool = sandlet_pool_find(srv, msg.sandbox);
            if (pool)
                sandlet_pool_pages(pool, msg.pages);
            continue;
        }
        if (msg.type == SANDLET_CTL_DENIALS) {
            if (fd >= 0)
                close(fd);
            /* The supervisor logged each; the pool counts them. */
            sandlet_pool *pool = sandlet_pool_find(srv, msg.sandbox);
            if (pool && msg.pages > pool->landlock_denials)
                pool->landlock_denials = msg.pages;
            continue;
        }
        if ((msg.type == SANDLET_CTL_LISTEN || msg.type == SANDLET_CTL_CONF) && srv->stopping) {
            /* A reload that crossed the stop: nothing new is served. */
            if (fd >= 0)
                close(fd);
            continue;
        }
        if (msg.type == SANDLET_CTL_LISTEN) {
            sandlet_reload_listen(srv, &msg, fd); /* takes fd */
            continue;
        }
        if (msg.type == SANDLET_CTL_CONF) {
            if (sandlet_reload_apply(srv, fd) < 0) /* takes fd */
                begin_stop(1);
            if (srv->ctl < 0)
                return;
            continue;
        }
        if (msg.type == SANDLET_CTL_LOGFD && fd >= 0) {
            if (msg.status == SANDLET_LOG_ACCESS) {
                sandlet_access_reopen(srv, fd);
            } else {
                dup2(fd, STDERR_FILENO);
                close(fd);
                sandlet_log_nonblocking();
            }
            sandlet_info("reopened %s", msg.status == 0 ? conf_path(srv->conf->access_log)
                                                        : conf_path(srv->conf->error_log));
            continue;
        }
        if (fd >= 0)
            close(fd); /* only LOGFD and WORKER carry descriptors */
        if (msg.type == SANDLET_CTL_UPGRADED) {
            upgraded(&msg);
            /* A stop with no connection left closes the socket at once. */
            if (srv->ctl < 0)
                return;
            continue;
        }
        if (msg.type == SANDLET_CTL_NOTIFY) {
            /* Started by an upgrade, we are not the main process yet:
             * the previous one moves MAINPID to us once told, and the
             * service is active already. */
            if (m.upgrade_fd >= 0) {
                tell_previous();
                continue;
            }
            /* sd_notify's protocol (state.c): the unit's NotifyAccess=main
             * takes it from this process only. */
            int nrc = sandlet_notify("READY=1\nSTATUS=serving");
            if (nrc < 0)
                sandlet_log_errno(SANDLET_LOG_WARN, nrc,
                                  "cannot tell the service manager that sandletd is ready "
                                  "(NOTIFY_SOCKET=%s)",
                                  getenv("NOTIFY_SOCKET"));
            continue;
        }
        sandlet_pool_control(srv, &msg);
    }
}

/* ---- start ---------------------------------------------------------------- */

/* Opens sandletd's own binary for the supervisor to exec workers from.
 * readlink, not open, of /proc/self/exe: tools that run us (valgrind)
 * answer readlink with our path but would hand their own binary to open. */
static int open_self(void)
{
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (n <= 0 || (size_t)n >= sizeof(path) - 1)
        return -ENAMETOOLONG;
    path[n] = '\0';
    snprintf(m.self, sizeof(m.self), "%s", path);
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* Above the descriptors a worker is given (0-3), which the spawn
     * overwrites before exec. */
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    int err = errno;
    close(fd);
    return high < 0 ? -err : high;
}

/* sandlet_conf_check_databases in a child that exits, as identity.c looks
 * up users: checking a database string loads libpq, and with it some
 * twenty libraries (OpenSSL, Kerberos, LDAP...) that this process, the
 * future acceptor, would map for its whole life.  The supervisor checks
 * again for itself (its ports); this check is the start's verdict, with
 * the message sandletd -t gives.  0, or a negative errno with err set. */
static int check_databases_apart(sandlet_conf *conf, char *err, size_t errlen)
{
    if (!conf->databases_unchecked)
        return 0;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot check the database strings: pipe: %s", strerror(e));
        return -e;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        snprintf(err, errlen, "cannot check the database strings: fork: %s", strerror(e));
        return -e;
    }
    if (pid == 0) {
        close(fds[0]);
        /* Sent whole: zeroed, so that no byte of this stack goes out
         * unset (valgrind's check of the start). */
        char msg[1024] = "";
        /* The child's copy: what the check fills in stays here. */
        int32_t rc = sandlet_conf_check_databases(conf, msg, sizeof(msg));
        bool ok = sandlet_pipe_all(fds[1], &rc, sizeof(rc), true) == 0 &&
                  sandlet_pipe_all(fds[1], msg, sizeof(msg), true) == 0;
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    int32_t rc = 0;
    char msg[1024];
    if (sandlet_pipe_all(fds[0], &rc, sizeof(rc), false) < 0 ||
        sandlet_pipe_all(fds[0], msg, sizeof(msg), false) < 0 || rc > 0) {
        rc = -EIO;
        snprintf(msg, sizeof(msg),
                 "the process that checks the database strings ended without an answer (out "
                 "of memory, or killed); start sandletd again");
    }
    msg[sizeof(msg) - 1] = '\0';
    close(fds[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (rc < 0)
        snprintf(err, errlen, "%s", msg);
    return rc;
}

/* Takes conf (*taken set) once the acceptor's configuration generation
 * holds it. */
static int run(sandlet_conf *conf, bool *taken)
{
    sandlet_server *srv = &m.srv;
    /* "listening on" is logged at bind, and init scripts and tests take it
     * as the sign that sandletd is up; the acceptor's handlers come a fork
     * and a privilege drop later.  Held pending until then, a stop or a
     * log reopen sent early is handled as it would be later, not a death
     * by signal.  The supervisor ignores these and clears the mask. */
    sigset_t held = stop_signals();
    sigprocmask(SIG_BLOCK, &held, NULL);
    /* Before anything listens: a configuration that would run a servlet
     * as root or as the acceptor never serves a request. */
    sandlet_id acceptor;
    if (check_identities(conf, &acceptor) < 0)
        return 1;
    int exe = open_self();
    if (exe < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, exe,
                          "cannot open sandletd's own binary through "
                          "/proc/self/exe (is /proc mounted?)");
        return 1;
    }
    srv->conf = conf;
    srv->hooks = &server_hooks;
    srv->ctl = -1;
    /* The hard limit is the operator's (LimitNOFILE, ulimit -Hn); the
     * soft one is often left at 1024, too few for max-connections. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int *fds = calloc(conf->nlistens + 1, sizeof(int));
    if (!fds) {
        sandlet_error("out of memory");
        free(fds);
        return 1;
    }
    if (adopt_inherited(conf, fds) < 0) {
        free(fds);
        return 1;
    }
    for (size_t i = 0; i < conf->nlistens; i++) {
        if (fds[i] >= 0)
            continue; /* handed over */
        int rc = bind_listener(&conf->listens[i], &fds[i]);
        if (rc < 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, rc, "%s:%d: cannot listen on %s port %u",
                              conf->file, conf->listens[i].line, conf->listens[i].host,
                              conf->listens[i].port);
            for (size_t j = 0; j < conf->nlistens; j++)
                if (fds[j] >= 0)
                    close(fds[j]);
            free(fds);
            return 1;
        }
        say_listening(&conf->listens[i], fds[i], "");
    }
    for (size_t i = 0; conf->development && i < conf->nlistens; i++) {
        const char *h = conf->listens[i].host;
        if (strncmp(h, "127.", 4) != 0 && strcmp(h, "::1") != 0) {
            sandlet_warn("*** development is ON and %s listens on %s: every client that asks "
                         "for a page that does not compile sees the compiler's diagnostics, "
                         "with lines of its code; turn it off on a public server ***",
                         conf->file, h);
            break;
        }
    }
    for (size_t i = 0; i < conf->nsandboxes; i++)
        if (conf->sandboxes[i].learn)
            sandlet_warn("*** sandbox '%s': syscall-violations log is ON: forbidden system calls "
                         "are ALLOWED and only logged by the kernel (dmesg / audit.log); for "
                         "development only, never in production ***",
                         conf->sandboxes[i].name);
    if (sandlet_files_open(srv) < 0 || open_logs(srv, &acceptor) < 0) {
        for (size_t i = 0; i < conf->nlistens; i++)
            close(fds[i]);
        free(fds);
        return 1;
    }
    int ctl[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, -errno, "control socketpair");
        return 1;
    }
    /* The privileged supervisor gets only what starting workers takes. */
    sandlet_conf *plan = sandlet_conf_plan(conf);
    if (!plan) {
        sandlet_error("out of memory while preparing the supervisor");
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, -errno, "cannot fork the supervisor");
        sandlet_conf_free(plan);
        return 1;
    }
    if (pid == 0) {
        for (size_t i = 0; i < conf->nlistens; i++)
            close(fds[i]);
        free(fds);
        close(ctl[0]);
        /* The previous daemon waits for the acceptor's 'R', or its end. */
        if (m.upgrade_fd >= 0)
            close(m.upgrade_fd);
        sandlet_upgrade_set_exec(m.self, m.argv);
        sandlet_files_close(srv); /* the supervisor serves nothing */
        if (srv->access_fd >= 0)
            close(srv->access_fd);
        sandlet_log_nonblocking();
        /* log.c reopens the log files by the very strings it was given:
         * those move into the plan, and the rest of the configuration
         * (listeners, docroot, client limits...) is forgotten here. */
        char *keep[2] = {conf->access_log, conf->error_log};
        conf->access_log = plan->access_log;
        conf->error_log = plan->error_log;
        plan->access_log = keep[0];
        plan->error_log = keep[1];
        sandlet_conf_free(conf);
        int st = sandlet_supervisor_run(plan, ctl[1], exe);
        sandlet_conf_free(plan);
        _exit(st);
    }
    sandlet_conf_free(plan);
    /* Sessions never live in the acceptor: inherited stores are the
     * supervisor's alone. */
    sandlet_upgrade_stores_close();
    /* The databases' connection strings and passwords are the
     * supervisor's and the workers' alone: the acceptor faces clients and
     * serves the status page. */
    sandlet_conf_forget_secrets(conf);
    srv->gen = sandlet_confgen_new(conf);
    if (!srv->gen) {
        sandlet_error("out of memory starting the acceptor");
        return 1; /* the supervisor sees its socket close and leaves */
    }
    /* As for the docroot: a start does not serve a host without its files
     * (the generation logged which); a reload serves it with 404s. */
    for (size_t i = 0; i < conf->nhosts; i++)
        if (conf->hosts[i].docroot && srv->gen->host_fd[i] < 0)
            return 1;
    *taken = true;
    close(ctl[1]);
    close(exe);
    srv->ctl = ctl[0];
    /* What the supervisor needs outstanding at most: a KILL per worker
     * and a REOPEN; the bound only guards against a bug. */
    srv->ctl_out.max = 64;
    for (size_t i = 0; i < conf->nsandboxes; i++)
        srv->ctl_out.max += 2 * (size_t)conf->sandboxes[i].workers;
    /* And a PAGE_CHECK per page asked about at once. */
    if (conf->npages)
        srv->ctl_out.max += 8192;
    srv->supervisor = pid;
    sandlet_log_set_role("acceptor");

    /* Only the supervisor reopens the logs, in the folders it keeps. */
    sandlet_log_file_forget();
    /* Before the privilege drop, which may forbid reopening our own
     * standard error through /proc. */
    int rc = sandlet_log_nonblocking();
    if (rc < 0)
        sandlet_log_errno(SANDLET_LOG_WARN, rc,
                          "cannot make log writes non-blocking; a stalled reader of standard "
                          "error would stall the daemon (set error-log to a file)");
    /* The acceptor faces the network: never as root.  Without a "user"
     * line it gets the first uid of sandletd's reserved range (identity.h),
     * shared with no other program. */
    if (geteuid() == 0 && !conf->user)
        sandlet_info("started as root without a 'user' line: the acceptor runs as uid %u "
                     "(name a user with 'user' in %s to choose)",
                     acceptor.uid, conf->file);
    sandlet_status_root_start(geteuid() == 0);
    rc = drop_privileges(&acceptor);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot become uid %u", acceptor.uid);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    /* Request bodies pass through buffers of a window (about 1 MiB) that
     * are freed after each large request.  glibc raises its mmap
     * threshold to the size of any mmapped block freed, after which such
     * buffers come from the heap and their pages are rarely returned: a
     * fixed threshold keeps them mmapped, so a burst of uploads leaves no
     * resident memory behind (issue 20). */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    uv_loop_init(&m.loop);
    srv->loop = &m.loop;
    uv_timer_init(&m.loop, &m.drain);
    uv_timer_init(&m.loop, &m.reap);
    uv_signal_init(&m.loop, &m.sigterm);
    uv_signal_init(&m.loop, &m.sigint);
    uv_signal_init(&m.loop, &m.sigchld);
    uv_signal_start(&m.sigterm, on_signal, SIGTERM);
    uv_signal_start(&m.sigint, on_signal, SIGINT);
    uv_signal_start(&m.sigchld, on_sigchld, SIGCHLD);
    uv_signal_init(&m.loop, &m.sigusr1);
    uv_signal_start(&m.sigusr1, on_sigusr1, SIGUSR1);
    uv_signal_init(&m.loop, &m.sigusr2);
    uv_signal_start(&m.sigusr2, on_sigusr2, SIGUSR2);
    uv_signal_init(&m.loop, &m.sighup);
    uv_signal_start(&m.sighup, on_sighup, SIGHUP);
    sigprocmask(SIG_UNBLOCK, &held, NULL);
    sandlet_access_start(srv);
    sandlet_http_clock_start(srv);
    /* The workers inherit this process's CPUs: no more of them run at
     * once than those allow, which the choice of worker heeds (pick.h).
     * Unknown (a host of more CPUs than a cpu_set_t holds): 0. */
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0)
        srv->cpus = (unsigned)CPU_COUNT(&cpus);
    uv_poll_init(&m.loop, &srv->ctl_poll, srv->ctl);
    uv_poll_start(&srv->ctl_poll, UV_READABLE, on_ctl);

    for (size_t i = 0; i < conf->nlistens; i++) {
        rc = srv->stopping ? (close(fds[i]), 0)
                           : sandlet_listener_add(srv, &conf->listens[i], fds[i]);
        if (rc < 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot listen");
            begin_stop(1);
        }
    }
    free(fds);
    if (!srv->stopping && (sandlet_pools_start(srv) < 0 || sandlet_pages_open(srv) < 0)) {
        sandlet_error("out of memory starting the sandboxes");
        begin_stop(1);
    }
    sandlet_server_caps(srv);
    /* Only the supervisor's exit may end the loop (on_sigchld closes every
     * handle), so that no worker or supervisor outlives sandletd. */
    uv_run(&m.loop, UV_RUN_DEFAULT);
    if (m.srv.supervisor) {
        int st;
        waitpid(m.srv.supervisor, &st, 0);
    }
    sandlet_access_flush(srv);
    if (srv->access_fd >= 0)
        close(srv->access_fd);
    sandlet_workerlog_free(srv);
    sandlet_ctl_queue_clear(&srv->ctl_out);
    sandlet_pools_free(srv);
    sandlet_http_spares_free(srv);
    sandlet_pages_free(srv);
    sandlet_files_close(srv);
    sandlet_reload_free(srv);
    uv_loop_close(&m.loop);
    sandlet_info("stopped");
    return m.exit_status;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--worker") == 0) {
        /* sandletd --worker SANDBOX --parent PID [--write-blocked]:
         * "--write-blocked": the sandbox is over its write quota. */
        bool blocked = argc == 6 && strcmp(argv[5], "--write-blocked") == 0;
        char *end = NULL;
        long parent = argc >= 5 && strcmp(argv[3], "--parent") == 0 ? strtol(argv[4], &end, 10) : 0;
        if ((argc != 5 && !blocked) || parent <= 1 || !end || *end) {
            fprintf(stderr, "sandletd: --worker is internal: started by the supervisor\n");
            return 2;
        }
        return sandlet_worker_main(argv[2], (pid_t)parent, blocked);
    }
    if (argc >= 2 && strcmp(argv[1], "--compile-page") == 0) {
        /* sandletd --compile-page --docroot DIR --page REL --workdir DIR
         * [--cc CC] [-I DIR]... [--cpu S] [--memory MIB] [--wall MS]:
         * started by the supervisor as the page sandbox's user (build.h);
         * exits with SANDLET_BUILD_*, the diagnostics are in the work dir.
         * _exit: nothing of a confined process's exit handlers may need
         * what its fence refuses (a sanitizer build's leak check reads
         * /proc), and it has nothing left to release. */
        int rc = sandlet_page_build_main(argc - 2, argv + 2);
        fflush(NULL);
        _exit(rc);
    }
    m.argv = argv;
    /* A descriptor left open by whoever started us (a shell, a service
     * manager, a careless wrapper) must never reach a worker: every one
     * above standard error is closed at exec from here on. */
    sandlet_cloexec_inherited();
    /* A reload that comes while sandletd starts must not end it: ignored
     * until the acceptor's loop handles it, and for good by the
     * supervisor (which inherits this) and the workers (ignored signals
     * stay ignored across exec), which a terminal's hang-up reaches too. */
    signal(SIGHUP, SIG_IGN);
    const char *file = DEFAULT_CONF;
    bool check = false, dump = false;
    const char *command = NULL;
    /* 30 s: a reload waits at most a second for its turn, then for the
     * supervisor to read the file and bind new addresses. */
    unsigned long wait_ms = 30000;
    char *end = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "c:tTdVhs:W:")) != -1) {
        switch (opt) {
        case 'c': file = optarg; break;
        case 't': check = true; break;
        case 'T': dump = true; break;
        case 's': command = optarg; break;
        case 'W':
            errno = 0;
            wait_ms = strtoul(optarg, &end, 10);
            if (errno || !end || *end || optarg[0] == '-' || wait_ms > 3600000) {
                fprintf(stderr, "sandletd: -W %s: expected milliseconds, 0 to 3600000\n", optarg);
                return 2;
            }
            break;
        case 'd': sandlet_log_set_level(SANDLET_LOG_DEBUG); break;
        case 'V': printf("sandletd %s\n", PACKAGE_VERSION); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    char err[1024];
    sandlet_conf *conf;
    /* -t, -T and -s are short-lived and check everything in this process;
     * a start parses without libpq, and checks the database strings in a
     * child (check_databases_apart). */
    bool serve = !dump && !command && !check;
    int rc = serve ? sandlet_conf_load_no_pq(file, &conf, err, sizeof(err))
                   : sandlet_conf_load(file, &conf, err, sizeof(err));
    if (rc == 0 && serve && (rc = check_databases_apart(conf, err, sizeof(err))) < 0)
        sandlet_conf_free(conf);
    if (rc < 0) {
        fprintf(stderr, "sandletd: %s\n", err);
        return 1;
    }
    if (dump) {
        rc = sandlet_conf_dump(conf, stdout);
        if (rc < 0)
            fprintf(stderr, "sandletd: cannot write the configuration: %s\n", strerror(-rc));
        sandlet_conf_free(conf);
        return rc < 0 ? 1 : 0;
    }
    if (command) {
        rc = sandlet_command(conf, command, (unsigned)wait_ms);
        sandlet_conf_free(conf);
        return rc;
    }
    if (check) {
        /* As a start would see it: users, folders, libraries. */
        rc = sandlet_check_deep(conf);
        if (rc == 0)
            printf("sandletd: configuration file %s OK\n", file);
        else
            fprintf(stderr,
                    "sandletd: configuration file %s would not start: fix the lines "
                    "above\n",
                    file);
        sandlet_conf_free(conf);
        return rc == 0 ? 0 : 1;
    }
    bool taken = false;
    int st = run(conf, &taken);
    if (!taken)
        sandlet_conf_free(conf);
    return st;
}

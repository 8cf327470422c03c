/*
 * command.c - "sandletd -s reload", "-s upgrade", "-s wait-ready" and
 * "-s pid": what an init script, a package's postinst (or an operator used
 * to "nginx -s reload") runs to talk to the daemon of a configuration
 * file.
 *
 * The daemon's supervisor keeps a state file (state.h) with the pid that
 * takes signals, its phase, and a count of reload verdicts with the last
 * one.  A reload reads the count, sends SIGHUP, and waits for the count to
 * change: the daemon's own verdict, with its reason, instead of "the
 * signal was delivered".  An upgrade sends SIGUSR2 and waits for the file
 * to name another pid, ready (the new daemon took over), or for a refused
 * verdict (it failed, and the old one serves on).  It never writes anything, and signals only a
 * pid that its state file names and that still runs sandletd.
 */
#include "config.h"

#include "loop/command.h"
#include "common/state.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 50

static void nap(void)
{
    struct timespec ts = {0, POLL_MS * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* True when pid runs a program called sandletd: a state file left by a
 * daemon killed with SIGKILL must not make us signal the pid's next
 * owner.  Where /proc cannot say (another user's process, as non-root),
 * the pid is trusted: kill(2) then decides. */
static bool runs_sandletd(long pid)
{
    char link[64], exe[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/%ld/exe", pid);
    ssize_t n = readlink(link, exe, sizeof(exe) - 1);
    if (n < 0)
        return errno == EACCES || errno == EPERM;
    exe[n] = '\0';
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    return strncmp(base, "sandletd", 8) == 0 || strncmp(base, "lt-sandletd", 11) == 0;
}

/* The running daemon's state, or a status and a message saying why
 * there is none. */
static int running(const sandlet_conf *conf, const char *path, sandlet_state *st)
{
    int rc = sandlet_state_read(path, st);
    if (rc == -ENOENT) {
        fprintf(stderr,
                "sandletd: no sandletd runs with %s (its state file %s does not exist); start "
                "it first (a daemon that runs but could not write the file says so in its "
                "error log: set 'state-file' to a file in a folder it may write)\n",
                conf->file, path);
        return SANDLET_COMMAND_NOT_RUNNING;
    }
    if (rc < 0) {
        fprintf(stderr, "sandletd: cannot read the state file %s: %s\n", path,
                rc == -EPROTO ? "not a sandletd state file" : strerror(-rc));
        return SANDLET_COMMAND_FAILED;
    }
    if ((kill((pid_t)st->pid, 0) < 0 && errno == ESRCH) || !runs_sandletd(st->pid)) {
        fprintf(stderr,
                "sandletd: the state file %s names pid %ld, which is not a running sandletd "
                "(the daemon was killed?); start it again\n",
                path, st->pid);
        return SANDLET_COMMAND_NOT_RUNNING;
    }
    return SANDLET_COMMAND_OK;
}

static int reload(const sandlet_conf *conf, const char *path, unsigned timeout_ms)
{
    sandlet_state st;
    int rc = running(conf, path, &st);
    if (rc != SANDLET_COMMAND_OK)
        return rc;
    unsigned long before = st.reloads;
    long pid = st.pid;
    if (kill((pid_t)pid, SIGHUP) < 0) {
        fprintf(stderr, "sandletd: cannot send SIGHUP to pid %ld: %s\n", pid, strerror(errno));
        return SANDLET_COMMAND_FAILED;
    }
    for (unsigned waited = 0; waited < timeout_ms; waited += POLL_MS) {
        nap();
        rc = sandlet_state_read(path, &st);
        if (rc == -ENOENT || (rc == 0 && st.pid != pid)) {
            fprintf(stderr, "sandletd: the daemon (pid %ld) stopped during the reload\n", pid);
            return SANDLET_COMMAND_FAILED;
        }
        if (rc < 0 || st.reloads == before)
            continue;
        bool applied = strcmp(st.verdict, "applied") == 0;
        fprintf(applied ? stdout : stderr, "sandletd: %s\n", st.message);
        return applied ? SANDLET_COMMAND_OK : SANDLET_COMMAND_FAILED;
    }
    fprintf(stderr,
            "sandletd: no reload verdict from pid %ld within %u ms (see the error log; is it "
            "stopping?)\n",
            pid, timeout_ms);
    return SANDLET_COMMAND_FAILED;
}

static int upgrade(const sandlet_conf *conf, const char *path, unsigned timeout_ms)
{
    sandlet_state st;
    int rc = running(conf, path, &st);
    if (rc != SANDLET_COMMAND_OK)
        return rc;
    if (strcmp(st.phase, "ready") != 0) {
        fprintf(stderr, "sandletd: pid %ld is still %s; upgrade it once it serves\n", st.pid,
                st.phase);
        return SANDLET_COMMAND_FAILED;
    }
    unsigned long before = st.reloads;
    long pid = st.pid;
    if (kill((pid_t)pid, SIGUSR2) < 0) {
        fprintf(stderr, "sandletd: cannot send SIGUSR2 to pid %ld: %s\n", pid, strerror(errno));
        return SANDLET_COMMAND_FAILED;
    }
    for (unsigned waited = 0; waited < timeout_ms; waited += POLL_MS) {
        nap();
        rc = sandlet_state_read(path, &st);
        if (rc < 0)
            continue; /* between two writers, or the new one's first */
        if (st.pid != pid && strcmp(st.phase, "ready") == 0 && kill((pid_t)st.pid, 0) == 0) {
            printf("sandletd: pid %ld serves now; pid %ld finishes its requests and stops\n",
                   st.pid, pid);
            return SANDLET_COMMAND_OK;
        }
        if (st.pid == pid && st.reloads != before && strcmp(st.verdict, "refused") == 0) {
            fprintf(stderr, "sandletd: %s\n", st.message);
            return SANDLET_COMMAND_FAILED;
        }
    }
    fprintf(stderr,
            "sandletd: no new daemon took over from pid %ld within %u ms (see the error log)\n",
            pid, timeout_ms);
    return SANDLET_COMMAND_FAILED;
}

static int print_pid(const sandlet_conf *conf, const char *path)
{
    sandlet_state st;
    int rc = running(conf, path, &st);
    if (rc == SANDLET_COMMAND_OK)
        printf("%ld\n", st.pid);
    return rc;
}

static int wait_ready(const sandlet_conf *conf, const char *path, unsigned timeout_ms)
{
    sandlet_state st;
    int rc = SANDLET_COMMAND_NOT_RUNNING;
    for (unsigned waited = 0; waited < timeout_ms; waited += POLL_MS) {
        rc = sandlet_state_read(path, &st);
        if (rc == 0 && strcmp(st.phase, "ready") == 0 && kill((pid_t)st.pid, 0) == 0 &&
            runs_sandletd(st.pid)) {
            printf("sandletd: pid %ld is ready\n", st.pid);
            return SANDLET_COMMAND_OK;
        }
        nap();
    }
    if (rc == 0)
        fprintf(stderr, "sandletd: pid %ld is still %s after %u ms (see the error log)\n", st.pid,
                st.phase, timeout_ms);
    else
        fprintf(stderr, "sandletd: no sandletd for %s said it was ready within %u ms (%s)\n",
                conf->file, timeout_ms, path);
    return SANDLET_COMMAND_FAILED;
}

int sandlet_command(const sandlet_conf *conf, const char *command, unsigned timeout_ms)
{
    char path[4096];
    if (sandlet_state_path(conf, path, sizeof(path)) < 0) {
        fprintf(stderr, "sandletd: the state file's path is too long\n");
        return SANDLET_COMMAND_FAILED;
    }
    if (strcmp(command, "reload") == 0)
        return reload(conf, path, timeout_ms);
    if (strcmp(command, "upgrade") == 0)
        return upgrade(conf, path, timeout_ms);
    if (strcmp(command, "wait-ready") == 0)
        return wait_ready(conf, path, timeout_ms);
    if (strcmp(command, "pid") == 0)
        return print_pid(conf, path);
    fprintf(stderr,
            "sandletd: unknown command '%s' for -s (expected reload, upgrade, wait-ready or "
            "pid)\n",
            command);
    return SANDLET_COMMAND_USAGE;
}

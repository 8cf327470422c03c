/*
 * test_upgrade.c - "sandletd -s upgrade" against a real daemon: a client
 * polling every 20 ms across the upgrade gets every answer, the state
 * file names the new daemon, which serves on the same port and was handed
 * the listener (its log says so), and the old one exits; the service
 * manager hears READY=1 from the old daemon at its start, then MAINPID=
 * with the new pid from it, and nothing from the new one; an upgrade whose
 * new daemon cannot start exits 1 with the reason and leaves the old one
 * serving; a daemon given a descriptor that is no listener in
 * SANDLET_LISTEN_FDS says so and binds afresh.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define POLLS   150 /* every 20 ms: 3 s, across the upgrade */
#define POLL_MS 20

/* The pid the state file names, or -1. */
/* A hex capability line ("CapBnd") of /proc/PID/status; 0 when absent. */
static unsigned long long caps_of(pid_t pid, const char *name)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    size_t len = strlen(name);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, name, len) == 0 && line[len] == ':')
            v = strtoull(line + len + 1, NULL, 16);
    if (f)
        fclose(f);
    return v;
}

/* The daemon an upgrade starts has every capability a start has (issue
 * 29: the spawner that execs it keeps them), not only what the old
 * supervisor kept: its acceptor's bounding set is ours, and so is its
 * new spawner's permitted set. */
static void assert_full_caps(pid_t acceptor)
{
    if (geteuid() != 0)
        return;
    unsigned long long ours = caps_of(getpid(), "CapBnd");
    assert_int_equal(caps_of(acceptor, "CapBnd"), ours);
    pid_t sup;
    assert_int_equal(th_children_of(acceptor, &sup, 1), 1);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)sup, (int)sup);
    char *kids = th_slurp(path, NULL);
    assert_non_null(kids);
    bool found = false;
    for (char *p = kids; *p;) {
        pid_t k = (pid_t)strtol(p, &p, 10);
        if (k <= 0)
            break;
        char comm[64];
        snprintf(comm, sizeof(comm), "/proc/%d/comm", (int)k);
        char *c = th_slurp(comm, NULL);
        if (c && strcmp(c, "sandlet-spawner\n") == 0) {
            found = true;
            assert_int_equal(caps_of(k, "CapPrm"), ours);
        }
        free(c);
    }
    free(kids);
    assert_true(found);
}

static long state_pid(const th_daemon *d)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/run/s.state", d->dir);
    char *s = th_slurp(path, NULL);
    long pid = -1;
    if (s && strncmp(s, "pid ", 4) == 0)
        pid = strtol(s + 4, NULL, 10);
    free(s);
    return pid;
}

/* A child that asks GET /st every POLL_MS, POLLS times; its exit status
 * is the number of answers that were not 200 (at most 255). */
static pid_t poller(unsigned port)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid > 0)
        return pid;
    int bad = 0;
    for (int i = 0; i < POLLS; i++) {
        th_response r;
        if (th_request(port, "GET", "/st", NULL, NULL, 0, &r) < 0) {
            fprintf(stderr, "poll %d: no answer\n", i);
            bad++;
        } else {
            if (r.status != 200) {
                fprintf(stderr, "poll %d: status %d\n", i, r.status);
                bad++;
            }
            th_response_free(&r);
        }
        struct timespec ts = {0, POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    _exit(bad > 255 ? 255 : bad);
}

/* A service manager's notification socket: an abstract datagram socket
 * that learns each sender's pid (SO_PASSCRED). */
static int notify_socket(char *name, size_t cap)
{
    snprintf(name, cap, "@sandlet-test-notify-%d", (int)getpid());
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    int one = 1;
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)), 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    memcpy(sa.sun_path, name, len);
    sa.sun_path[0] = '\0';
    assert_int_equal(
        bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)),
        0);
    return fd;
}

/* The next notification within ms into msg (NUL-ended), its sender's pid
 * into *pid; false when none came. */
static bool notification(int fd, int ms, char *msg, size_t cap, pid_t *pid)
{
    for (int waited = 0; waited <= ms; waited += 10) {
        union {
            char buf[CMSG_SPACE(sizeof(struct ucred))];
            struct cmsghdr align;
        } u;
        struct iovec iov = {.iov_base = msg, .iov_len = cap - 1};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = u.buf,
                            .msg_controllen = sizeof(u.buf)};
        ssize_t n = recvmsg(fd, &mh, 0);
        if (n >= 0) {
            msg[n] = '\0';
            *pid = 0;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
                    struct ucred cred;
                    memcpy(&cred, CMSG_DATA(c), sizeof(cred));
                    *pid = cred.pid;
                }
            return true;
        }
        assert_true(errno == EAGAIN || errno == EINTR);
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

static void set_notify(void *ctx)
{
    setenv("NOTIFY_SOCKET", ctx, 1);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void remove_dir(const th_daemon *d)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
    assert_int_equal(system(cmd), 0);
}

static void test_upgrade_loses_nothing(void **state)
{
    (void)state;
    th_daemon d;
    char name[64];
    int nfd = notify_socket(name, sizeof(name));
    assert_int_equal(th_start_with(&d,
                                   "state-file run/s.state;\nstatus-page /st;\n"
                                   "sandbox a { workers 1; }\n",
                                   false, set_notify, name),
                     0);
    char out[4096];
    assert_int_equal(th_sandletd("-s wait-ready", d.conf, out, sizeof(out)), 0);
    assert_int_equal(state_pid(&d), (long)d.pid);
    char note[256];
    pid_t from;
    assert_true(notification(nfd, 5000, note, sizeof(note), &from));
    assert_non_null(strstr(note, "READY=1"));
    assert_int_equal(from, d.pid);

    /* A new daemon that cannot start: the old one serves on, and says why. */
    size_t len;
    char *good = th_slurp(d.conf, &len);
    assert_non_null(good);
    char broken[8192];
    snprintf(broken, sizeof(broken), "%ssandbox b { workers 1; user no-such-user-x; }\n", good);
    put(d.conf, broken);
    int rc = th_sandletd("-s upgrade", d.conf, out, sizeof(out));
    if (rc != 1 || !strstr(out, "upgrade failed"))
        fail_msg("an upgrade whose new daemon fails exited %d: %s", rc, out);
    assert_true(th_log_contains(&d, "no-such-user-x"));
    assert_int_equal(state_pid(&d), (long)d.pid);
    assert_int_equal(kill(d.pid, 0), 0);
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/st", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    put(d.conf, good);
    free(good);

    /* The upgrade, under polling. */
    pid_t client = poller(d.port);
    struct timespec ts = {0, 500 * 1000000L};
    nanosleep(&ts, NULL);
    rc = th_sandletd("-s upgrade", d.conf, out, sizeof(out));
    if (rc != 0)
        fail_msg("sandletd -s upgrade exited %d: %s", rc, out);
    long now = state_pid(&d);
    assert_true(now > 0);
    assert_int_not_equal(now, (long)d.pid);
    assert_true(th_log_contains(&d, "(handed over by the previous daemon)"));
    assert_full_caps((pid_t)now);
    /* The old acceptor finishes and exits 0; the new one serves. */
    int st;
    assert_true(th_wait_exit(d.pid, 15000, &st));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_true(th_wait_exit(client, 30000, &st));
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) != 0)
        fail_msg("%d of %d polls across the upgrade got no 200", WEXITSTATUS(st), POLLS);
    /* The failed upgrade said nothing; the good one, MAINPID from the old
     * main process, and the new daemon nothing (it is not main yet when
     * it is ready). */
    char want[64];
    snprintf(want, sizeof(want), "MAINPID=%ld", now);
    assert_true(notification(nfd, 5000, note, sizeof(note), &from));
    if (strcmp(note, want) != 0 || from != d.pid)
        fail_msg("the service manager heard '%s' from pid %d, not '%s' from %d", note, (int)from,
                 want, (int)d.pid);
    if (notification(nfd, 200, note, sizeof(note), &from))
        fail_msg("the service manager heard '%s' from pid %d after MAINPID", note, (int)from);
    close(nfd);
    assert_int_equal(th_request(d.port, "GET", "/st", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    char pidline[32];
    assert_int_equal(th_sandletd("-s pid", d.conf, out, sizeof(out)), 0);
    snprintf(pidline, sizeof(pidline), "%ld\n", now);
    assert_string_equal(out, pidline);

    /* The new daemon is the subreaper's (th_prepare): stop it as th_stop. */
    assert_int_equal(kill((pid_t)now, SIGTERM), 0);
    assert_true(th_wait_exit((pid_t)now, 15000, &st));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    remove_dir(&d);
}

/* A previous acceptor that does not stop after the hand-over (hung, or
 * taken over by a client and keeping the listeners it shares with the new
 * daemon) is killed by its supervisor SANDLET_UPGRADE_OUTLIVE_MS (15 s)
 * after it: here it is stopped (SIGSTOP) while a slow request keeps it
 * draining. */
static void test_outliving_acceptor_killed(void **state)
{
    (void)state;
    th_daemon d;
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "state-file run/s.state;\n"
             "sandbox a { workers 1; timeout 60000; }\n"
             "servlet /p/* { library \"%s\"; sandbox a; }\n",
             th_fixture("probe"));
    assert_int_equal(th_start(&d, conf, false), 0);
    char out[4096];
    assert_int_equal(th_sandletd("-s wait-ready", d.conf, out, sizeof(out)), 0);
    pid_t slow = fork();
    assert_true(slow >= 0);
    if (slow == 0) {
        th_response r;
        if (th_request(d.port, "GET", "/p/sleep?ms=30000", NULL, NULL, 0, &r) == 0)
            th_response_free(&r);
        _exit(0);
    }
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    int rc = th_sandletd("-s upgrade", d.conf, out, sizeof(out));
    if (rc != 0)
        fail_msg("sandletd -s upgrade exited %d: %s", rc, out);
    long now = state_pid(&d);
    assert_true(now > 0 && now != (long)d.pid);
    assert_int_equal(kill(d.pid, SIGSTOP), 0);
    int st;
    assert_true(th_wait_exit(d.pid, 25000, &st));
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGKILL);
    assert_true(th_log_wait(&d, "still runs 15 s after the new daemon took over", 5000));
    /* The new daemon serves on. */
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/p/sleep?ms=1", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(kill((pid_t)now, SIGTERM), 0);
    assert_true(th_wait_exit((pid_t)now, 15000, &st));
    kill(slow, SIGKILL);
    waitpid(slow, &st, 0);
    remove_dir(&d);
}

/* GET /session with the client's cookie (none when token is ""): the
 * answer's body into body, its session token (from Set-Cookie) into
 * token when it sets one. */
static void count(unsigned port, char *token, char *body, size_t cap)
{
    char headers[256] = "";
    if (token[0])
        snprintf(headers, sizeof(headers), "Cookie: SLSESSION_shop=%s\r\n", token);
    th_response r;
    assert_int_equal(th_request(port, "GET", "/session", headers, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    snprintf(body, cap, "%s", r.body);
    char cookie[256];
    if (th_header(&r, "Set-Cookie", cookie, sizeof(cookie)) &&
        strncmp(cookie, "SLSESSION_shop=", 15) == 0) {
        size_t n = strcspn(cookie + 15, ";");
        assert_true(n > 0 && n < 200);
        memcpy(token, cookie + 15, n);
        token[n] = '\0';
    }
    th_response_free(&r);
}

/* Memory sessions outlive an upgrade under session-secret-file: the new
 * daemon copies the previous one's store, and a client's cookie finds its
 * session there, its counter where it was. */
static void test_sessions_carried_over(void **state)
{
    (void)state;
    char dir[64], secret[128];
    assert_int_equal(th_tempdir(dir, sizeof(dir), "upgrade-secret", 0700), 0);
    snprintf(secret, sizeof(secret), "%s/session.key", dir);
    int fd = open(secret, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789abcdef0123456789abcdef", 32), 32);
    assert_int_equal(close(fd), 0);
    th_daemon d;
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "state-file run/s.state;\n"
             "session-secret-file \"%s\";\n"
             "sandbox shop { workers 1; session-size 64k; }\n"
             "servlet /session { library \"%s\"; sandbox shop; }\n",
             secret, th_fixture("session"));
    assert_int_equal(th_start(&d, conf, false), 0);
    char out[4096], token[256] = "", body[512];
    assert_int_equal(th_sandletd("-s wait-ready", d.conf, out, sizeof(out)), 0);
    count(d.port, token, body, sizeof(body));
    assert_true(strncmp(body, "count=1 ", 8) == 0);
    assert_true(token[0] != '\0');
    count(d.port, token, body, sizeof(body));
    assert_true(strncmp(body, "count=2 ", 8) == 0);
    int rc = th_sandletd("-s upgrade", d.conf, out, sizeof(out));
    if (rc != 0)
        fail_msg("sandletd -s upgrade exited %d: %s", rc, out);
    long now = state_pid(&d);
    assert_true(now > 0 && now != (long)d.pid);
    assert_true(th_log_wait(&d, "sandbox 'shop': 1 memory session carried over", 5000));
    int st;
    assert_true(th_wait_exit(d.pid, 15000, &st));
    count(d.port, token, body, sizeof(body));
    if (strncmp(body, "count=3 ", 8) != 0)
        fail_msg("after the upgrade the session answered '%s', not count=3", body);
    assert_int_equal(kill((pid_t)now, SIGTERM), 0);
    assert_true(th_wait_exit((pid_t)now, 15000, &st));
    remove_dir(&d);
    unlink(secret);
    rmdir(dir);
}

/* Descriptor 3 is /dev/null, named a listener by the variable. */
static void fake_listener(void *ctx)
{
    (void)ctx;
    int fd = open("/dev/null", O_RDONLY);
    if (fd != 3 && (fd < 0 || dup2(fd, 3) < 0))
        _exit(99);
    setenv("SANDLET_LISTEN_FDS", "3", 1);
}

static void test_inherited_not_a_listener(void **state)
{
    (void)state;
    th_daemon d;
    assert_int_equal(th_start_with(&d, "status-page /st;\n", false, fake_listener, NULL), 0);
    assert_true(th_log_contains(&d, "SANDLET_LISTEN_FDS: descriptor 3 is no listening TCP socket"));
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/st", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(th_stop(&d), 0);
    remove_dir(&d);
}

int main(void)
{
    th_prepare();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upgrade_loses_nothing),
        cmocka_unit_test(test_inherited_not_a_listener),
        cmocka_unit_test(test_outliving_acceptor_killed),
        cmocka_unit_test(test_sessions_carried_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_privsep.c - privilege separation (issue 14), tried as the process
 * that faces the network would try it once taken over.
 *
 * A fake acceptor forks the REAL supervisor (sandlet_supervisor_run with a
 * parsed test configuration and a control socketpair) and sends it forged
 * SPAWN and INIT messages, garbage, empty and oversized messages,
 * descriptors of every kind, KILLs for workers that do not exist or for
 * old generations, and floods of thousands: the supervisor must survive,
 * start exactly the configured workers, each under its configured
 * identity, with an empty environment and only descriptors 0-4.  Then the
 * real daemon: a servlet sees no environment and no descriptor of ours,
 * and a configuration of 2 x 200 workers starts (and serves with) exactly
 * 400.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "common/conf.h"
#include "sandbox/claim.h"
#include "sandbox/control.h"
#include "sandbox/frame.h"
#include "sandbox/harden.h"
#include "sandbox/identity.h"
#include "sandbox/lane.h"
#include "sandbox/supervisor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SECRET "SANDLET_TEST_SECRET=hunter2"

/* ---- the fake acceptor ---------------------------------------------------- */

#define MAX_WORKERS 16

typedef struct seen {
    uint32_t sandbox, slot, gen;
    pid_t pid;
    int channel, output;
    sandlet_claim *claim; /* and its lanes (lane.h), as the acceptor maps them */
} seen;

static struct {
    char dir[64];
    char conf_path[128];
    char log[128];
    sandlet_conf *conf;
    pid_t sup;
    int ctl;
    seen workers[MAX_WORKERS]; /* the live one per slot, by arrival */
    size_t nworkers;
    unsigned exited;
    unsigned spawned; /* WORKER messages received in all */
    int leaked;       /* a descriptor we leave open without CLOEXEC */
} fa;

static bool root(void)
{
    return geteuid() == 0;
}

static seen *find(uint32_t sandbox, uint32_t slot)
{
    for (size_t i = 0; i < fa.nworkers; i++)
        if (fa.workers[i].sandbox == sandbox && fa.workers[i].slot == slot)
            return &fa.workers[i];
    return NULL;
}

/* Reads what the supervisor says for up to ms (or until none is waiting
 * after the first quiet 50 ms when ms is 0). */
static void pump(int ms)
{
    unsigned long long end = th_now_ms() + (unsigned long long)ms;
    for (;;) {
        int left = (int)(end > th_now_ms() ? end - th_now_ms() : 0);
        struct pollfd p = {.fd = fa.ctl, .events = POLLIN};
        int rc = poll(&p, 1, left > 50 ? 50 : left);
        if (rc <= 0) {
            if (th_now_ms() >= end)
                return;
            continue;
        }
        sandlet_ctl m;
        int fds[SANDLET_CTL_MAXFD];
        rc = sandlet_ctl_recv(fa.ctl, &m, fds, SANDLET_CTL_MAXFD);
        if (rc <= 0)
            return;
        if (m.type == SANDLET_CTL_WORKER) {
            fa.spawned++;
            seen *w = find(m.sandbox, m.slot);
            if (!w) {
                assert_true(fa.nworkers < MAX_WORKERS);
                w = &fa.workers[fa.nworkers++];
            } else {
                close(w->channel);
                close(w->output);
                sandlet_claim_unmap(w->claim);
            }
            *w = (seen){m.sandbox, m.slot, m.gen, m.pid, fds[0], fds[1], NULL};
            assert_true(fds[0] >= 0);
            assert_true(fds[1] >= 0);
            /* Each worker's claim word and lanes, its own (claim.h). */
            assert_true(fds[2] >= 0);
            assert_int_equal(sandlet_claim_map(fds[2], &w->claim), 0);
            close(fds[2]);
        } else {
            for (int i = 0; i < SANDLET_CTL_MAXFD; i++)
                if (fds[i] >= 0)
                    close(fds[i]);
            if (m.type == SANDLET_CTL_EXITED)
                fa.exited++;
        }
    }
}

/* Waits until n workers are known. */
static void wait_workers(size_t n, int ms)
{
    unsigned long long end = th_now_ms() + (unsigned long long)ms;
    while (fa.nworkers < n && th_now_ms() < end)
        pump(100);
    assert_int_equal(fa.nworkers, n);
}

/* Reads the READY frame the worker sends once its servlets started,
 * from its lane, sleeping on its channel for the doorbell as the
 * acceptor does. */
static void expect_ready(const seen *w)
{
    sandlet_lane tx, rx;
    sandlet_lanes_open(sandlet_claim_lanes(w->claim), true, &tx, &rx);
    uint8_t buf[SANDLET_FRAME_HEADER];
    size_t got = 0;
    while (got < sizeof(buf)) {
        ssize_t n = sandlet_lane_get(&rx, buf + got, sizeof(buf) - got);
        assert_true(n >= 0);
        got += (size_t)n;
        if (n > 0 || sandlet_lane_wait_data(&rx))
            continue;
        struct pollfd p = {.fd = w->channel, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 10000), 1);
        char bell[16];
        assert_true(read(w->channel, bell, sizeof(bell)) > 0);
    }
    sandlet_frame_hdr h;
    assert_int_equal(sandlet_frame_header_decode(buf, sizeof(buf), &h), 0);
    assert_int_equal(h.type, SANDLET_FRAME_READY);
}

static int children_of_supervisor(void)
{
    return th_children_of(fa.sup, NULL, 0);
}

static bool supervisor_alive(void)
{
    int st;
    return waitpid(fa.sup, &st, WNOHANG) == 0;
}

static void send_raw(const void *data, size_t len, const int *fds, size_t nfd)
{
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfd) {
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfd);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfd);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfd);
    }
    /* Blocking: a flood waits for the supervisor to read, as a real
     * attacker's would; nothing is dropped on our side. */
    for (;;) {
        ssize_t n = sendmsg(fa.ctl, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0)
            return;
        assert_true(errno == EAGAIN || errno == EINTR);
        pump(5); /* keep reading what it says meanwhile */
    }
}

static void send_msg(uint32_t type, uint32_t sandbox, uint32_t slot, uint32_t gen, int32_t status,
                     const int *fds, size_t nfd)
{
    sandlet_ctl m = {.type = type, .sandbox = sandbox, .slot = slot, .gen = gen, .status = status};
    send_raw(&m, sizeof(m), fds, nfd);
}

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    th_become_subreaper();
    snprintf(fa.dir, sizeof(fa.dir), "/tmp/sandlet-privsep-XXXXXX");
    if (!mkdtemp(fa.dir))
        return -1;
    chmod(fa.dir, 0755);
    snprintf(fa.conf_path, sizeof(fa.conf_path), "%s/sandlet.conf", fa.dir);
    snprintf(fa.log, sizeof(fa.log), "%s/supervisor.log", fa.dir);
    FILE *f = fopen(fa.conf_path, "w");
    if (!f)
        return -1;
    /* Sandbox a: no user (a uid of its own when root); b: nobody. */
    fprintf(f,
            "listen 127.0.0.1:0;\n"
            /* Not the default under /var: a test leaves nothing there. */
            "spool-dir %s/spool;\n"
            "sandbox a { workers 2; sessions memory; }\n"
            /* b may grow to 4: slot 3 runs a worker only on GROW. */
            "sandbox b { workers 3; max-workers 4; %s }\n"
            "servlet /a/* { library \"%s\"; sandbox a; }\n"
            "servlet /b/* { library \"%s\"; sandbox b; }\n",
            fa.dir, root() ? "user nobody; group nogroup;" : "",
            th_build_path("tests/fixtures/.libs/probe.so"),
            th_build_path("tests/fixtures/.libs/probe.so"));
    fclose(f);
    char err[512];
    if (sandlet_conf_load(fa.conf_path, &fa.conf, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    int ctl[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
        return -1;
    const char *self = th_build_path(".libs/sandletd");
    int exe = open(self, O_PATH | O_CLOEXEC);
    if (exe < 0)
        return -1;
    /* A secret in the environment and a descriptor left open without
     * close-on-exec, as a careless service manager would leave them. */
    putenv((char *)SECRET);
    fa.leaked = open("/etc/hostname", O_RDONLY);
    fa.sup = fork();
    if (fa.sup < 0)
        return -1;
    if (fa.sup == 0) {
        int fd = open(fa.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0)
            dup2(fd, STDERR_FILENO);
        close(ctl[0]);
        _exit(sandlet_supervisor_run(fa.conf, ctl[1], exe));
    }
    close(ctl[1]);
    close(exe);
    fa.ctl = ctl[0];
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (fa.sup > 0) {
        kill(fa.sup, SIGKILL);
        waitpid(fa.sup, NULL, 0);
    }
    sandlet_conf_free(fa.conf);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fa.dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The identity a worker of sandbox i must have. */
static void expected_ids(uint32_t sandbox, uid_t *uid, gid_t *gid)
{
    *uid = getuid();
    *gid = getgid();
    if (!root())
        return;
    if (sandbox == 0) {
        *uid = sandlet_identity_dynamic_uid("a");
        *gid = *uid;
    } else {
        struct passwd *pw = getpwnam("nobody");
        struct group *gr = getgrnam("nogroup");
        assert_non_null(pw);
        assert_non_null(gr);
        *uid = pw->pw_uid;
        *gid = gr->gr_gid;
    }
}

/* Uid, Gid, Groups, environment and descriptors of worker w. */

/* What the supervisor passes on of its environment: the loader's path,
 * and in a sanitizer build the sanitizers' options. */
static bool passed_on(const char *var)
{
    static const char *const names[] = {
        "LD_LIBRARY_PATH=",
#ifdef SANDLET_SANITIZERS
        "ASAN_OPTIONS=",
        "UBSAN_OPTIONS=",
        "LSAN_OPTIONS=",
#endif
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strncmp(var, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

static void check_worker(const seen *w)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)w->pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    uid_t uid;
    gid_t gid;
    expected_ids(w->sandbox, &uid, &gid);
    char want_uid[64], want_gid[64];
    snprintf(want_uid, sizeof(want_uid), "Uid:\t%u\t%u\t%u\t%u\n", uid, uid, uid, uid);
    snprintf(want_gid, sizeof(want_gid), "Gid:\t%u\t%u\t%u\t%u\n", gid, gid, gid, gid);
    bool uid_ok = false, gid_ok = false, groups_ok = !root();
    while (fgets(line, sizeof(line), f)) {
        uid_ok |= strcmp(line, want_uid) == 0;
        gid_ok |= strcmp(line, want_gid) == 0;
        if (strncmp(line, "Groups:", 7) == 0 && root())
            groups_ok = strspn(line + 7, " \t\n") == strlen(line + 7);
    }
    fclose(f);
    if (!uid_ok || !gid_ok)
        fprintf(stderr, "worker %d of sandbox %u: want %s/%s\n", (int)w->pid, w->sandbox, want_uid,
                want_gid);
    assert_true(uid_ok);
    assert_true(gid_ok);
    assert_true(groups_ok);
    if (root())
        assert_int_not_equal(uid, 0);

    /* The environment it was started with: nothing of ours.  Only the
     * loader's search path may be passed (a build tree needs it). */
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)w->pid);
    f = fopen(path, "r");
    if (!f && errno == EACCES && !root() && !getenv("SANDLET_NO_CONFINEMENT")) {
        /* A confined worker is not dumpable: its /proc files are root's. */
        printf("SKIP: not root: worker %d's environment and descriptors were not checked\n",
               (int)w->pid);
        return;
    }
    assert_non_null(f);
    char env[8192];
    size_t n = fread(env, 1, sizeof(env) - 1, f);
    fclose(f);
    env[n] = '\0';
    for (size_t off = 0; off < n; off += strlen(env + off) + 1) {
        /* The worker wipes the strings it was given before it clears its
         * environment: what /proc still shows of them is zeros. */
        if (env[off] == '\0')
            continue;
        if (!passed_on(env + off))
            fprintf(stderr, "worker %d has %s in its environment\n", (int)w->pid, env + off);
        assert_true(passed_on(env + off));
    }

    /* Descriptors: 0-4 at most (stdin, output pipe twice, channel, the
     * session store, which the worker closes once mapped), and 6, its
     * spool file, which must be open for reading only (issue 29: the
     * acceptor writes it, the worker never). */
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)w->pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        if (fd == 6) {
            snprintf(path, sizeof(path), "/proc/%d/fdinfo/6", (int)w->pid);
            char *info = th_slurp(path, NULL);
            const char *flags = info ? strstr(info, "flags:") : NULL;
            unsigned long fl = flags ? strtoul(flags + 6, NULL, 8) : 1;
            free(info);
            assert_int_equal(fl & O_ACCMODE, O_RDONLY);
            continue;
        }
        if (fd > 4) {
            char target[256] = "";
            snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)w->pid, fd);
            ssize_t k = readlink(path, target, sizeof(target) - 1);
            target[k > 0 ? k : 0] = '\0';
            fprintf(stderr, "worker %d holds descriptor %d (%s)\n", (int)w->pid, fd, target);
        }
        assert_true(fd <= 4);
    }
    closedir(d);
    /* Standard input is /dev/null, output is a pipe (not our log). */
    char target[256];
    snprintf(path, sizeof(path), "/proc/%d/fd/0", (int)w->pid);
    ssize_t k = readlink(path, target, sizeof(target) - 1);
    assert_true(k > 0);
    target[k] = '\0';
    assert_string_equal(target, "/dev/null");
    snprintf(path, sizeof(path), "/proc/%d/fd/2", (int)w->pid);
    k = readlink(path, target, sizeof(target) - 1);
    assert_true(k > 0);
    target[k] = '\0';
    assert_true(strncmp(target, "pipe:", 5) == 0);
}

static void assert_count_ok(void)
{
    /* Never more live children than the configuration's 2 + 4 (b's
     * max-workers). */
    int n = children_of_supervisor();
    assert_true(n >= 0);
    assert_true(n <= 6);
}

/* The value of a "Name:\t..." line of /proc/PID/status, as hex (CapEff)
 * or decimal; ~0 when it is not there. */
static unsigned long long status_field(pid_t pid, const char *name, int base)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long v = ~0ull;
    size_t len = strlen(name);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, name, len) == 0 && line[len] == ':')
            v = strtoull(line + len + 1, NULL, base);
    if (f)
        fclose(f);
    return v;
}

/* The supervisor's direct children named sandlet-spawner (th_children_of
 * looks through them), into out (max); returns the count. */
static int spawners_of(pid_t sup, pid_t *out, int max)
{
    int n = 0;
    DIR *dir = opendir("/proc");
    assert_non_null(dir);
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        char *got = fgets(comm, sizeof(comm), f);
        fclose(f);
        pid_t pid = (pid_t)atol(e->d_name);
        if (got && strcmp(comm, "sandlet-spawner\n") == 0 &&
            status_field(pid, "PPid", 10) == (unsigned long long)sup) {
            if (n < max)
                out[n] = pid;
            n++;
        }
    }
    closedir(dir);
    return n;
}

#define CAP_BIT(c) (1ull << (c))

/* Issue 29: the supervisor no longer holds CAP_SETUID or CAP_SETGID, and
 * runs under an allowlist; its one spawner, under the workers' denylist,
 * holds them and is the workers' parent. */
static void test_spawner_holds_setuid(void **state)
{
    (void)state;
    if (getenv("SANDLET_NO_CONFINEMENT"))
        return;
    pid_t sp[4];
    assert_int_equal(spawners_of(fa.sup, sp, 4), 1);
    for (size_t i = 0; i < fa.nworkers; i++)
        assert_int_equal(status_field(fa.workers[i].pid, "PPid", 10), (unsigned long long)sp[0]);
    /* One filter each: the supervisor's allowlist is not the spawner's
     * denylist stacked on another, nor inherited by it. */
    assert_int_equal(status_field(fa.sup, "Seccomp_filters", 10), 1);
    assert_int_equal(status_field(sp[0], "Seccomp_filters", 10), 1);
    assert_int_equal(status_field(sp[0], "NoNewPrivs", 10), 1);
    if (!root())
        return;
    unsigned long long ids = CAP_BIT(CAP_SETUID) | CAP_BIT(CAP_SETGID);
    assert_int_equal(status_field(fa.sup, "CapEff", 16) & ids, 0);
    assert_int_equal(status_field(fa.sup, "CapPrm", 16) & ids, 0);
    assert_int_equal(status_field(fa.sup, "CapBnd", 16) & ids, 0);
    /* CAP_KILL: its children's death signal. */
    assert_int_equal(status_field(sp[0], "CapEff", 16), ids | CAP_BIT(CAP_KILL));
    assert_int_equal(status_field(sp[0], "CapEff", 16), sandlet_harden_spawner_caps());
    /* Whole, for an upgrade's new daemon. */
    assert_int_equal(status_field(sp[0], "CapPrm", 16), status_field(sp[0], "CapBnd", 16));
    for (size_t i = 0; i < fa.nworkers; i++)
        assert_int_equal(status_field(fa.workers[i].pid, "CapPrm", 16), 0);
}

/* The supervisor's filter is an allowlist: what it never calls fails
 * (exec above all, which only the spawner does), what it calls works. */
static void test_supervisor_allowlist(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        if (sandlet_harden_supervisor() < 0)
            _exit(100);
        /* false: should the exec happen, the test fails. */
        char *argv[] = {"false", NULL}, *envp[] = {NULL};
        errno = 0;
        bad |= (execve("/bin/false", argv, envp) == 0 || errno != EPERM) << 0;
        errno = 0;
        bad |= (setuid(getuid()) == 0 || errno != EPERM) << 1;
        errno = 0;
        bad |= (unshare(CLONE_NEWUSER) == 0 || errno != EPERM) << 2;
        errno = 0;
        bad |= (ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0 || errno != EPERM) << 3;
        errno = 0;
        bad |= (syscall(SYS_clone3, NULL, 0) == 0 || errno != ENOSYS) << 4;
        errno = 0;
        bad |=
            (syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0) >= 0 || errno != EPERM)
            << 5;
        /* What it does use. */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bad |= (fd < 0) << 6;
        if (fd >= 0)
            close(fd);
        pid_t child = fork(); /* a reload's look-up child */
        if (child == 0)
            _exit(0);
        int st;
        bad |= (child < 0 || waitpid(child, &st, 0) != child) << 7;
        _exit(bad);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_starts_configured_workers(void **state)
{
    (void)state;
    wait_workers(5, 15000);
    for (size_t i = 0; i < fa.nworkers; i++) {
        expect_ready(&fa.workers[i]);
        check_worker(&fa.workers[i]);
    }
    assert_int_equal(children_of_supervisor(), 5);
    /* The supervisor itself keeps only what it needs, under a filter. */
    if (getenv("SANDLET_NO_CONFINEMENT"))
        return;
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)fa.sup);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char want[64];
    snprintf(want, sizeof(want), "CapEff:\t%016llx\n",
             root() ? (unsigned long long)sandlet_harden_caps() : 0ull);
    bool nnp = false, seccomp = false, caps = false, bound = !root();
    while (fgets(line, sizeof(line), f)) {
        nnp |= strcmp(line, "NoNewPrivs:\t1\n") == 0;
        seccomp |= strcmp(line, "Seccomp:\t2\n") == 0;
        caps |= strcmp(line, want) == 0;
        if (root() && strncmp(line, "CapBnd:", 7) == 0)
            bound = strtoull(line + 7, NULL, 16) == sandlet_harden_caps();
    }
    fclose(f);
    assert_true(nnp);
    assert_true(seccomp);
    assert_true(caps);
    assert_true(bound);
}

/* Forged SPAWNs (with an attached socket, as the old protocol had, and
 * with an INIT frame in the payload) start nothing: 60 for one slot of a
 * 2-worker sandbox used to give 60 root children. */
static void test_forged_spawn(void **state)
{
    (void)state;
    for (int i = 0; i < 60; i++) {
        int sp[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        send_msg(SANDLET_CTL_SPAWN, 0, 0, 100 + (uint32_t)i, 0, &sp[1], 1);
        close(sp[0]);
        close(sp[1]);
        send_msg(SANDLET_CTL_SPAWN, 0, 0, 200 + (uint32_t)i, 0, NULL, 0);
        assert_count_ok();
    }
    /* An INIT frame naming another library and uid 0, as a message. */
    uint8_t init[256] = {SANDLET_FRAME_VERSION, SANDLET_FRAME_INIT};
    snprintf((char *)init + 20, sizeof(init) - 20, "/tmp/evil.so");
    send_raw(init, sizeof(init), NULL, 0);
    pump(500);
    assert_true(supervisor_alive());
    assert_int_equal(fa.spawned, 5);
    assert_int_equal(children_of_supervisor(), 5);
}

/* Garbage of every size, empty messages (not the end of the stream),
 * oversized ones, and descriptors of other types on otherwise valid
 * messages: all refused, the supervisor survives and keeps no
 * descriptor. */
static void test_garbage(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)fa.sup);
    int before = 0;
    DIR *d = opendir(path);
    assert_non_null(d);
    while (readdir(d))
        before++;
    closedir(d);
    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 7 + 3);
    size_t sizes[] = {1, 7, sizeof(sandlet_ctl) - 1, sizeof(sandlet_ctl) + 1, 64, 4096};
    for (int round = 0; round < 50; round++) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
            send_raw(junk, sizes[i], NULL, 0);
        send_raw("", 0, NULL, 0);
        int pfd[2];
        assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
        int file = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
        assert_true(file >= 0);
        int fds[3] = {pfd[0], pfd[1], file};
        send_msg(SANDLET_CTL_KILL, 0, 0, fa.workers[0].gen, SIGKILL, fds, 1);
        send_msg(SANDLET_CTL_REOPEN, 0, 0, 0, 0, &fds[1], 1);
        send_msg(SANDLET_CTL_KILL, 1, 0, 0, SIGKILL, fds, 3);
        send_raw(junk, 4096, fds, 3);
        close(pfd[0]);
        close(pfd[1]);
        close(file);
        send_msg(99, 0, 0, 0, 0, NULL, 0);
    }
    pump(500);
    assert_true(supervisor_alive());
    assert_int_equal(fa.exited, 0); /* the KILL with a descriptor was refused */
    assert_int_equal(children_of_supervisor(), 5);
    int after = 0;
    d = opendir(path);
    assert_non_null(d);
    while (readdir(d))
        after++;
    closedir(d);
    assert_int_equal(after, before);
}

/* KILL only reaches the live worker of the named generation, once. */
static void test_kill_rules(void **state)
{
    (void)state;
    seen *w = find(1, 2);
    assert_non_null(w);
    pid_t pids[MAX_WORKERS];
    for (size_t i = 0; i < fa.nworkers; i++)
        pids[i] = fa.workers[i].pid;
    send_msg(SANDLET_CTL_KILL, 7, 0, 1, SIGKILL, NULL, 0);          /* no such sandbox */
    send_msg(SANDLET_CTL_KILL, 1, 3, 1, SIGKILL, NULL, 0);          /* no such slot */
    send_msg(SANDLET_CTL_KILL, 1, 2, w->gen + 1, SIGKILL, NULL, 0); /* future */
    send_msg(SANDLET_CTL_KILL, 1, 2, w->gen - 1, SIGKILL, NULL, 0); /* past */
    send_msg(SANDLET_CTL_KILL, 1, 2, w->gen, SIGTERM, NULL, 0);     /* not SIGKILL */
    send_msg(SANDLET_CTL_KILL, UINT32_MAX, UINT32_MAX, UINT32_MAX, SIGKILL, NULL, 0);
    pump(500);
    assert_int_equal(fa.exited, 0);
    for (size_t i = 0; i < fa.nworkers; i++)
        assert_int_equal(kill(pids[i], 0), 0);
    /* The real one: it dies and its slot gets the next generation. */
    uint32_t gen = w->gen;
    pid_t old = w->pid;
    for (int i = 0; i < 20; i++)
        send_msg(SANDLET_CTL_KILL, 1, 2, gen, SIGKILL, NULL, 0);
    unsigned long long end = th_now_ms() + 10000;
    while ((fa.exited < 1 || find(1, 2)->gen == gen) && th_now_ms() < end) {
        pump(100);
        assert_count_ok();
    }
    w = find(1, 2);
    assert_int_equal(fa.exited, 1);
    assert_int_equal(w->gen, gen + 1);
    assert_int_not_equal(w->pid, old);
    expect_ready(w);
    check_worker(w);
    assert_int_equal(children_of_supervisor(), 5);
}

/* Reads the supervisor's log from offset from on; the caller frees. */
static char *log_since(off_t from)
{
    size_t len = 0;
    char *all = th_slurp(fa.log, &len);
    assert_non_null(all);
    if ((size_t)from > len)
        from = (off_t)len;
    memmove(all, all + from, len - (size_t)from + 1);
    return all;
}

/* GROW starts the worker of an extra slot (b's slot 3: workers 3,
 * max-workers 4) and nothing else: a normal slot, a slot out of range, an
 * unknown sandbox and a slot that already has a worker are refused and
 * logged, and a burst of GROWs starts one worker.  An extra worker whose
 * channel is closed exits and is not restarted. */
static void test_grow(void **state)
{
    (void)state;
    unsigned spawned0 = fa.spawned, exited0 = fa.exited;
    struct stat st0;
    assert_int_equal(stat(fa.log, &st0), 0);
    send_msg(SANDLET_CTL_GROW, 1, 2, 0, 0, NULL, 0); /* a normal slot, live */
    send_msg(SANDLET_CTL_GROW, 0, 0, 0, 0, NULL, 0); /* a normal slot of a */
    send_msg(SANDLET_CTL_GROW, 0, 2, 0, 0, NULL, 0); /* a: max-workers 2 */
    send_msg(SANDLET_CTL_GROW, 1, 4, 0, 0, NULL, 0); /* past b's max-workers */
    send_msg(SANDLET_CTL_GROW, 7, 3, 0, 0, NULL, 0); /* no such sandbox */
    send_msg(SANDLET_CTL_GROW, 1, UINT32_MAX, 0, 0, NULL, 0);
    pump(500);
    assert_int_equal(fa.spawned, spawned0);
    assert_int_equal(children_of_supervisor(), 5);
    char *log = log_since(st0.st_size);
    assert_non_null(strstr(log, "GROW for worker 1/2 of sandbox 'b', which is not an extra slot"));
    assert_non_null(strstr(log, "GROW for worker 0/0 of sandbox 'a', which is not an extra slot"));
    assert_non_null(strstr(log, "type 15 for worker 0/2, which does not exist"));
    assert_non_null(strstr(log, "type 15 for worker 1/4, which does not exist"));
    assert_non_null(strstr(log, "type 15 for worker 7/3, which does not exist"));
    free(log);
    /* The valid one, sent 20 times at once: one worker. */
    assert_null(find(1, 3));
    for (int i = 0; i < 20; i++)
        send_msg(SANDLET_CTL_GROW, 1, 3, 0, 0, NULL, 0);
    unsigned long long end = th_now_ms() + 10000;
    while (!find(1, 3) && th_now_ms() < end)
        pump(100);
    pump(500);
    assert_int_equal(fa.spawned, spawned0 + 1);
    assert_int_equal(children_of_supervisor(), 6);
    seen *w = find(1, 3);
    assert_non_null(w);
    expect_ready(w);
    check_worker(w);
    log = log_since(st0.st_size);
    assert_non_null(strstr(log, "which already has a live worker"));
    free(log);
    /* Retired as the acceptor retires an idle extra: its channel closed.
     * It exits 0, is reported, and its slot stays empty. */
    pid_t pid = w->pid;
    close(w->channel);
    close(w->output);
    *w = fa.workers[--fa.nworkers];
    end = th_now_ms() + 10000;
    while (fa.exited == exited0 && th_now_ms() < end)
        pump(100);
    assert_int_equal(fa.exited, exited0 + 1);
    assert_true(kill(pid, 0) < 0);
    pump(1000);
    assert_null(find(1, 3));
    assert_int_equal(fa.spawned, spawned0 + 1);
    assert_int_equal(children_of_supervisor(), 5);
}

/* A descriptor the acceptor attaches is closed by the supervisor, and a
 * socket's close can wait: a TCP socket with unsent data and SO_LINGER set
 * to an hour would have held the supervisor in close() for that long, so
 * that it reaped and restarted nothing.  It must still obey a KILL at once. */
static void test_lingering_socket(void **state)
{
    (void)state;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l, 4), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &alen), 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(connect(c, (struct sockaddr *)&a, sizeof(a)) == 0 || errno == EINPROGRESS);
    int peer = accept(l, NULL, NULL); /* connected, and never read */
    assert_true(peer >= 0);
    int small = 4096;
    setsockopt(peer, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    static char junk[65536];
    for (int i = 0; i < 1000 && send(c, junk, sizeof(junk), MSG_DONTWAIT) > 0; i++)
        ;
    struct linger hour = {.l_onoff = 1, .l_linger = 3600};
    assert_int_equal(setsockopt(c, SOL_SOCKET, SO_LINGER, &hour, sizeof(hour)), 0);
    send_msg(SANDLET_CTL_REOPEN, 0, 0, 0, 0, &c, 1);
    close(c); /* the supervisor holds the last reference now */
    seen *w = find(0, 0);
    assert_non_null(w);
    uint32_t gen = w->gen;
    unsigned long long start = th_now_ms();
    send_msg(SANDLET_CTL_KILL, 0, 0, gen, SIGKILL, NULL, 0);
    while (find(0, 0)->gen == gen && th_now_ms() - start < 10000)
        pump(50);
    assert_int_equal(find(0, 0)->gen, gen + 1);
    assert_true(th_now_ms() - start < 5000);
    expect_ready(find(0, 0));
    close(peer);
    close(l);
}

/* Thousands of messages: refused ones, rate-limited REOPENs, stale KILLs.
 * The supervisor survives, its log stays bounded, the count holds. */
static void test_flood(void **state)
{
    (void)state;
    unsigned exited0 = fa.exited, spawned0 = fa.spawned;
    struct stat st0;
    assert_int_equal(stat(fa.log, &st0), 0);
    for (int i = 0; i < 5000; i++) {
        send_msg(SANDLET_CTL_SPAWN, 0, (uint32_t)i % 2, (uint32_t)i, 0, NULL, 0);
        send_msg(SANDLET_CTL_KILL, 0, 0, 1000 + (uint32_t)i, SIGKILL, NULL, 0);
        send_msg(SANDLET_CTL_REOPEN, 0, 0, 0, 0, NULL, 0);
        send_raw("", 0, NULL, 0);
        if (i % 500 == 0)
            assert_count_ok();
    }
    pump(1000);
    assert_true(supervisor_alive());
    /* Nothing it sent started or stopped a worker. */
    assert_int_equal(fa.exited, exited0);
    assert_int_equal(fa.spawned, spawned0);
    assert_int_equal(children_of_supervisor(), 5);
    /* 15,000 refusals in a second or two: tens of log lines, not
     * thousands. */
    struct stat st1;
    assert_int_equal(stat(fa.log, &st1), 0);
    assert_true(st1.st_size - st0.st_size < 64 * 1024);
    /* Still answering: a valid KILL is obeyed. */
    seen *w = find(0, 1);
    uint32_t gen = w->gen;
    send_msg(SANDLET_CTL_KILL, 0, 1, gen, SIGKILL, NULL, 0);
    unsigned long long end = th_now_ms() + 10000;
    while (find(0, 1)->gen == gen && th_now_ms() < end)
        pump(100);
    assert_int_equal(find(0, 1)->gen, gen + 1);
    expect_ready(find(0, 1));
}

/* The acceptor goes away: every worker and then the supervisor leave. */
static void test_acceptor_gone(void **state)
{
    (void)state;
    pid_t pids[MAX_WORKERS];
    size_t n = fa.nworkers;
    for (size_t i = 0; i < n; i++) {
        pids[i] = fa.workers[i].pid;
        close(fa.workers[i].channel);
        close(fa.workers[i].output);
        sandlet_claim_unmap(fa.workers[i].claim);
    }
    close(fa.ctl);
    int st = -1;
    for (int i = 0; i < 100 && waitpid(fa.sup, &st, WNOHANG) == 0; i++)
        usleep(50000);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    fa.sup = 0;
    for (size_t i = 0; i < n; i++)
        assert_true(kill(pids[i], 0) < 0 || waitpid(pids[i], NULL, WNOHANG) == pids[i]);
}

/* ---- the real daemon ------------------------------------------------------ */

static unsigned long status_value(unsigned port, const char *metric)
{
    th_response r;
    if (th_request(port, "GET", "/status?format=prometheus", NULL, NULL, 0, &r) < 0)
        return 0;
    const char *p = r.body ? strstr(r.body, metric) : NULL;
    unsigned long v = p ? strtoul(p + strlen(metric), NULL, 10) : 0;
    th_response_free(&r);
    return v;
}

/* A servlet sees no environment of ours and no descriptor but its own,
 * even when sandletd's starter leaves a secret in the environment. */
static void test_servlet_sees_nothing(void **state)
{
    (void)state;
    if (getenv("SANDLET_NO_CONFINEMENT")) {
        printf("SKIP: SANDLET_NO_CONFINEMENT is set\n");
        return;
    }
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "sandbox s { workers 1; }\n"
             "servlet /p/* { library \"%s\"; sandbox s; }\n",
             th_build_path("tests/fixtures/.libs/probe.so"));
    th_daemon d;
    assert_int_equal(th_start(&d, conf, false), 0);
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/p/environ", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    /* "fds 0 1 2 3 6\n" (6: its spool file, read-only) then one line per
     * variable. */
    static const char fds[] = "fds 0 1 2 3 6\n";
    if (strncmp(r.body, fds, sizeof(fds) - 1) != 0)
        fprintf(stderr, "servlet sees: %s\n", r.body);
    assert_true(strncmp(r.body, fds, sizeof(fds) - 1) == 0);
    /* Only what the worker set for itself (confine.c's libc
     * preparation) and the loader's path. */
    for (char *line = strtok(r.body + sizeof(fds) - 1, "\n"); line; line = strtok(NULL, "\n")) {
        bool ok = passed_on(line) || strcmp(line, "TZ=:/etc/localtime") == 0 ||
                  strcmp(line, "LIBC_FATAL_STDERR_=1") == 0;
        if (!ok)
            fprintf(stderr, "servlet sees %.60s\n", line);
        assert_true(ok);
    }
    th_response_free(&r);
    assert_int_equal(th_stop(&d), 0);
}

/* 2 x 200 workers: exactly 400 start (no control message lost on a full
 * socket), each ready and each serving a request. */
static void test_two_hundred_each(void **state)
{
    (void)state;
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "status-page /status;\n"
             "max-connections 1000;\n"
             "sandbox x { workers 200; memory 256; }\n"
             "sandbox y { workers 200; memory 256; }\n"
             "servlet /x/* { library \"%s\"; sandbox x; }\n"
             "servlet /y/* { library \"%s\"; sandbox y; }\n",
             th_build_path("tests/fixtures/.libs/probe.so"),
             th_build_path("tests/fixtures/.libs/probe.so"));
    th_daemon d;
    assert_int_equal(th_start(&d, conf, false), 0);
    unsigned long long end = th_now_ms() + 60000;
    unsigned long x = 0, y = 0;
    while (th_now_ms() < end) {
        x = status_value(d.port, "sandlet_ready_workers{sandbox=\"x\"} ");
        y = status_value(d.port, "sandlet_ready_workers{sandbox=\"y\"} ");
        if (x == 200 && y == 200)
            break;
        usleep(200000);
    }
    assert_int_equal(x, 200);
    assert_int_equal(y, 200);
    /* The daemon's one child is the supervisor; its children the workers. */
    pid_t sup;
    assert_int_equal(th_children_of(d.pid, &sup, 1), 1);
    assert_int_equal(th_children_of(sup, NULL, 0), 400);
    /* 400 requests at once, each held 1.5 s: every worker serves one. */
    static th_conn *c[400];
    for (int i = 0; i < 400; i++) {
        c[i] = th_connect(d.port, false);
        assert_non_null(c[i]);
        char req[128];
        snprintf(req, sizeof(req), "GET /%c/sleep?ms=1500 HTTP/1.1\r\nHost: t\r\n\r\n",
                 i % 2 ? 'y' : 'x');
        assert_int_equal(th_send_str(c[i], req), 0);
    }
    static long pids[400];
    for (int i = 0; i < 400; i++) {
        th_response r;
        assert_int_equal(th_read(c[i], &r, false), 0);
        assert_int_equal(r.status, 200);
        pids[i] = atol(r.body);
        th_response_free(&r);
        th_close(c[i]);
    }
    for (int i = 0; i < 400; i++)
        for (int j = i + 1; j < 400; j++)
            assert_true(pids[i] != pids[j]);
    assert_int_equal(th_stop(&d), 0);
}

/* The control queue keeps every message, in order, with its
 * descriptors, whatever the socket's room; and an empty message is not
 * the end of the stream, a closed peer is. */
static void test_ctl_queue(void **state)
{
    (void)state;
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    sandlet_ctl_queue q = {.max = 100000};
    int queued_at = -1;
    for (int i = 0; i < 5000; i++) {
        sandlet_ctl m = {.type = SANDLET_CTL_EXITED, .gen = (uint32_t)i};
        int fd = i % 100 == 0 ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
        assert_int_equal(sandlet_ctl_queue_send(&q, sp[0], &m, &fd, fd >= 0 ? 1 : 0), 0);
        if (queued_at < 0 && q.len)
            queued_at = i;
    }
    assert_true(queued_at > 0); /* the socket filled up: the rest waited */
    uint32_t next = 0;
    while (next < 5000) {
        int rc = sandlet_ctl_queue_flush(&q, sp[0]);
        assert_true(rc == 0 || rc == -EAGAIN);
        for (;;) {
            sandlet_ctl m;
            int fds[SANDLET_CTL_MAXFD];
            rc = sandlet_ctl_recv(sp[1], &m, fds, SANDLET_CTL_MAXFD);
            if (rc == -EAGAIN)
                break;
            assert_int_equal(rc, 1);
            assert_int_equal(m.gen, next);
            assert_int_equal(fds[0] >= 0, next % 100 == 0);
            if (fds[0] >= 0)
                close(fds[0]);
            next++;
        }
    }
    assert_int_equal(q.len, 0);
    /* Empty messages: refused, not taken for the end. */
    assert_int_equal(send(sp[0], "", 0, 0), 0);
    sandlet_ctl m;
    int fds[SANDLET_CTL_MAXFD];
    assert_int_equal(sandlet_ctl_recv(sp[1], &m, fds, SANDLET_CTL_MAXFD), -EPROTO);
    assert_int_equal(sandlet_ctl_recv(sp[1], &m, fds, SANDLET_CTL_MAXFD), -EAGAIN);
    close(sp[0]);
    assert_int_equal(sandlet_ctl_recv(sp[1], &m, fds, SANDLET_CTL_MAXFD), 0);
    close(sp[1]);
}

/* Whether pid is gone within 2 s: no such process, reaped here (orphans
 * come to this test, a subreaper), or a zombie whose parent has not
 * reaped it yet. */
static bool gone_soon(pid_t pid)
{
    for (int t = 0; t < 100; t++) {
        if (kill(pid, 0) < 0 || waitpid(pid, NULL, WNOHANG) == pid)
            return true;
        char path[64], st[512] = "";
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        size_t k = f ? fread(st, 1, sizeof(st) - 1, f) : 0;
        if (f)
            fclose(f);
        st[k] = '\0';
        const char *rp = strrchr(st, ')');
        if (!f || (rp && rp[1] == ' ' && rp[2] == 'Z'))
            return true;
        usleep(20000);
    }
    return false;
}

/* Workers die with their supervisor, even as a sandbox's user (the death
 * signal is set after the identity change, which clears it). */
static void test_workers_die_with_supervisor(void **state)
{
    (void)state;
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "sandbox s { workers 3; %s }\n"
             "servlet /p/* { library \"%s\"; sandbox s; }\n",
             root() ? "user nobody; group nogroup;" : "",
             th_build_path("tests/fixtures/.libs/probe.so"));
    th_daemon d;
    assert_int_equal(th_start(&d, conf, false), 0);
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/p/pid", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    pid_t sup, workers[8];
    assert_int_equal(th_children_of(d.pid, &sup, 1), 1);
    /* The first one may serve while the supervisor still starts the
     * others. */
    int n = 0;
    for (int t = 0; t < 250 && (n = th_children_of(sup, workers, 8)) < 3; t++)
        usleep(20000);
    assert_int_equal(n, 3);
    /* The acceptor is stopped, so that it cannot close the workers'
     * channels: only the death signal can end them. */
    kill(d.pid, SIGSTOP);
    kill(sup, SIGKILL);
    /* Orphans come to us (subreaper): gone means reaped or a zombie. */
    for (int i = 0; i < n; i++)
        assert_true(gone_soon(workers[i]));
    kill(d.pid, SIGCONT);
    th_stop(&d);
}

/* A spawner gone (killed, or crashed) ends the supervisor at once and
 * loudly, and with it the daemon, rather than leave a supervisor that can
 * start nothing; the workers die with the spawner. */
static void test_spawner_gone(void **state)
{
    (void)state;
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "sandbox s { workers 2; %s }\n"
             "servlet /p/* { library \"%s\"; sandbox s; }\n",
             root() ? "user nobody; group nogroup;" : "",
             th_build_path("tests/fixtures/.libs/probe.so"));
    th_daemon d;
    assert_int_equal(th_start(&d, conf, false), 0);
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/p/pid", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    pid_t sup, sp[2], workers[4];
    assert_int_equal(th_children_of(d.pid, &sup, 1), 1);
    assert_int_equal(spawners_of(sup, sp, 2), 1);
    int n = 0;
    for (int t = 0; t < 250 && (n = th_children_of(sup, workers, 4)) < 2; t++)
        usleep(20000);
    assert_int_equal(n, 2);
    assert_int_equal(kill(sp[0], SIGKILL), 0);
    assert_true(th_log_wait(&d, "the spawner (pid", 5000));
    int st;
    assert_true(th_wait_exit(d.pid, 15000, &st));
    for (int i = 0; i < n; i++)
        assert_true(gone_soon(workers[i]));
    d.pid = 0; /* reaped: th_stop must not signal a reused pid */
}

/* Started as root, no servlet runs as uid 0 or as the acceptor: such a
 * configuration does not start. */
static void test_refused_identities(void **state)
{
    (void)state;
    if (!root()) {
        printf("SKIP: not root: identities cannot be chosen\n");
        return;
    }
    const char *bad[] = {
        "sandbox s { workers 1; user root; }\n",
        "sandbox s { workers 1; user nobody; group root; }\n",
        "user nobody;\nsandbox s { workers 1; user nobody; group nogroup; }\n",
        "user nobody;\nsandbox s { workers 1; user daemon; group nogroup; }\n",
    };
    const char *why[] = {"uid or gid 0", "uid or gid 0", "the acceptor's", "the acceptor's group"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char conf[1024];
        snprintf(conf, sizeof(conf), "%sservlet /p/* { library \"%s\"; sandbox s; }\n", bad[i],
                 th_build_path("tests/fixtures/.libs/probe.so"));
        th_daemon d;
        int rc = th_start(&d, conf, false);
        if (rc == 0)
            th_stop(&d);
        assert_int_equal(rc, -1);
        assert_true(th_log_contains(&d, why[i]));
    }
}

/* Issue 29: two sandboxes that name one user are one to the kernel
 * (signals, ptrace and cores of dumpable workers, files Landlock does not
 * fence, peer authentication): refused unless both blocks accept it. */
static void test_shared_user(void **state)
{
    (void)state;
    const char *probe = th_build_path("tests/fixtures/.libs/probe.so");
    const char *shared[] = {"", "shared-user on;", "shared-user on;"};
    const char *other[] = {"", "", "shared-user on;"};
    for (size_t i = 0; i < 3; i++) {
        char conf[1024];
        snprintf(conf, sizeof(conf),
                 "sandbox a { workers 1; user nobody; group nogroup; %s }\n"
                 "sandbox b { workers 1; user nobody; group nogroup; core-dumps on; %s }\n"
                 "servlet /a/* { library \"%s\"; sandbox a; }\n"
                 "servlet /b/* { library \"%s\"; sandbox b; }\n",
                 shared[i], other[i], probe, probe);
        th_daemon d;
        int rc = th_start(&d, conf, false);
        if (rc == 0)
            th_stop(&d);
        if (i < 2) {
            assert_int_equal(rc, -1);
            assert_true(th_log_contains(&d, "sandboxes 'a' (line 2) and 'b' both run as user "
                                            "'nobody'"));
            assert_true(th_log_contains(&d, "'shared-user on;' in both blocks"));
        } else {
            assert_int_equal(rc, 0);
        }
    }
}

/* Issue 29: a reload that adds a sandbox writing to the filesystem
 * another writes to is told what bounds them there, as a start is. */
static void test_shared_filesystem_reload(void **state)
{
    (void)state;
    const char *probe = th_build_path("tests/fixtures/.libs/probe.so");
    char a[64], b[64];
    assert_int_equal(th_tempdir(a, sizeof(a), "wa", 0777), 0);
    assert_int_equal(th_tempdir(b, sizeof(b), "wb", 0777), 0);
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "sandbox a { workers 1; syscalls files; writable \"%s\"; }\n"
             "servlet /a/* { library \"%s\"; sandbox a; }\n",
             a, probe);
    th_daemon d;
    assert_int_equal(th_start(&d, conf, false), 0);
    assert_false(th_log_contains(&d, "write to one filesystem"));
    FILE *f = fopen(d.conf, "a");
    assert_non_null(f);
    fprintf(f,
            "sandbox b { workers 1; syscalls files; writable \"%s\"; }\n"
            "servlet /b/* { library \"%s\"; sandbox b; }\n",
            b, probe);
    fclose(f);
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    assert_true(th_log_wait(&d, "sandboxes 'a' and 'b' write to one filesystem", 5000));
    th_stop(&d);
    rmdir(a);
    rmdir(b);
}

int main(void)
{
    const struct CMUnitTest fake_acceptor[] = {
        cmocka_unit_test(test_starts_configured_workers),
        cmocka_unit_test(test_spawner_holds_setuid),
        cmocka_unit_test(test_forged_spawn),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_kill_rules),
        cmocka_unit_test(test_grow),
        cmocka_unit_test(test_lingering_socket),
        cmocka_unit_test(test_flood),
        cmocka_unit_test(test_acceptor_gone),
        cmocka_unit_test(test_supervisor_allowlist),
    };
    const struct CMUnitTest daemon[] = {
        cmocka_unit_test(test_ctl_queue),
        cmocka_unit_test(test_servlet_sees_nothing),
        cmocka_unit_test(test_two_hundred_each),
        cmocka_unit_test(test_workers_die_with_supervisor),
        cmocka_unit_test(test_spawner_gone), /* issue 29 */
        cmocka_unit_test(test_refused_identities),
        cmocka_unit_test(test_shared_user),
        cmocka_unit_test(test_shared_filesystem_reload),
    };
    if (!root())
        printf("SKIP: not root: identities are not checked (everything runs as this user)\n");
    int failed =
        cmocka_run_group_tests_name("fake acceptor", fake_acceptor, group_setup, group_teardown);
    failed += cmocka_run_group_tests_name("daemon", daemon, NULL, NULL);
    return failed;
}

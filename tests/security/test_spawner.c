/*
 * test_spawner.c - the spawner (src/sandbox/spawner.c, issue 29) as the
 * supervisor uses it, and against requests a taken-over supervisor could
 * make.
 *
 * This process plays the supervisor: it forks a real spawner, asks it for
 * children and checks what it refuses (a worker as root, an upgrade with a
 * variable of its own, more strings than a request holds), what it starts
 * (as the identity asked, with the descriptors asked, the exit status and
 * signal reported back), and that a kill through the pidfd reaches the
 * child.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sandbox/spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uv_loop_t loop;
static int exe_fd = -1;
static char exe[32];

typedef struct {
    bool done;
    int64_t status;
    int signal;
} outcome;

static void on_exit_cb(sandlet_proc *p, int64_t status, int term_signal)
{
    outcome *o = p->data;
    o->done = true;
    o->status = status;
    o->signal = term_signal;
}

static void run_until(const outcome *o)
{
    for (int i = 0; i < 1000 && !o->done; i++)
        uv_run(&loop, UV_RUN_ONCE);
    assert_true(o->done);
}

/* As a worker is asked for: as nobody when we are root. */
static sandlet_spawn_opts opts_for(char *const *args, const int *fds, size_t nfds)
{
    static char *env[] = {"A=1", NULL};
    bool root = geteuid() == 0;
    return (sandlet_spawn_opts){.file = SANDLET_SPAWN_SELF,
                                .args = args,
                                .env = env,
                                .uid = root ? 65534 : UINT32_MAX,
                                .gid = root ? 65534 : UINT32_MAX,
                                .fds = fds,
                                .nfds = nfds};
}

static int group_setup(void **state)
{
    (void)state;
    /* The "binary" the spawner execs is the shell: the tests need a
     * program that takes arguments, not sandletd. */
    exe_fd = open("/bin/sh", O_PATH | O_CLOEXEC);
    if (exe_fd < 0)
        return -1;
    snprintf(exe, sizeof(exe), "/proc/self/fd/%d", exe_fd);
    char secret[16] = "secret";
    if (sandlet_spawner_fork(exe, -1, secret, sizeof(secret)) <= 0)
        return -1;
    if (uv_loop_init(&loop) < 0)
        return -1;
    return sandlet_spawner_watch(&loop, NULL) < 0 ? -1 : 0;
}

/* Started as asked: status and signal come back; standard output is the
 * descriptor given; the identity is the one asked. */
static void test_start_and_exit(void **state)
{
    (void)state;
    int out[2];
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    char *args[] = {"sh", "-c", "id -u; exit 7", NULL};
    int fds[3] = {-1, out[1], 2};
    sandlet_spawn_opts o = opts_for(args, fds, 3);
    outcome got = {0};
    sandlet_proc p = {.data = &got, .exit_cb = on_exit_cb};
    assert_int_equal(sandlet_spawn(&p, &o), 0);
    close(out[1]);
    assert_true(p.pid > 0);
    assert_true(p.pidfd >= 0);
    char buf[32] = "";
    ssize_t n = read(out[0], buf, sizeof(buf) - 1);
    close(out[0]);
    assert_true(n > 0);
    assert_int_equal(atoi(buf), geteuid() == 0 ? 65534 : (int)geteuid());
    run_until(&got);
    assert_int_equal(got.status, 7);
    assert_int_equal(got.signal, 0);
    assert_int_equal(p.pidfd, -1);
}

/* A kill goes through the pidfd, and the death by signal is reported. */
static void test_kill(void **state)
{
    (void)state;
    char *args[] = {"sh", "-c", "exec sleep 30", NULL};
    int fds[3] = {-1, -1, 2};
    sandlet_spawn_opts o = opts_for(args, fds, 3);
    outcome got = {0};
    sandlet_proc p = {.data = &got, .exit_cb = on_exit_cb};
    assert_int_equal(sandlet_spawn(&p, &o), 0);
    assert_int_equal(sandlet_proc_kill(&p, SIGKILL), 0);
    run_until(&got);
    assert_int_equal(got.signal, SIGKILL);
    /* Reported gone: no signal can reach whatever reuses its pid. */
    assert_int_equal(sandlet_proc_kill(&p, SIGKILL), -ESRCH);
}

/* What a taken-over supervisor could ask for is refused, and the
 * spawner serves on. */
static void test_refusals(void **state)
{
    (void)state;
    char *args[] = {"sh", "-c", "exit 0", NULL};
    int fds[3] = {-1, -1, 2};
    sandlet_proc p = {0};
    if (geteuid() == 0) {
        /* A worker as root, or keeping root. */
        sandlet_spawn_opts o = opts_for(args, fds, 3);
        o.uid = 0;
        assert_int_equal(sandlet_spawn(&p, &o), -EINVAL);
        o.uid = o.gid = UINT32_MAX;
        assert_int_equal(sandlet_spawn(&p, &o), -EINVAL);
    }
    /* An upgrade (as root, with the daemon's own environment) with a
     * variable of the asker's: a library preloaded into a root process. */
    char *env[] = {"LD_PRELOAD=/tmp/evil.so", NULL};
    sandlet_spawn_opts up = {.file = SANDLET_SPAWN_UPGRADE,
                             .args = args,
                             .env = env,
                             .uid = UINT32_MAX,
                             .gid = UINT32_MAX,
                             .fds = fds,
                             .nfds = 3,
                             .detached = true};
    assert_int_equal(sandlet_spawn(&p, &up), -EINVAL);
    /* An unknown file. */
    sandlet_spawn_opts bad = opts_for(args, fds, 3);
    bad.file = (enum sandlet_spawn_file)7;
    assert_int_equal(sandlet_spawn(&p, &bad), -EINVAL);
    /* More than a request holds: never sent. */
    static char big[70000];
    memset(big, 'x', sizeof(big) - 1);
    char *many[] = {"sh", big, NULL};
    sandlet_spawn_opts o = opts_for(many, fds, 3);
    assert_int_equal(sandlet_spawn(&p, &o), -E2BIG);
    /* And it still starts what it should. */
    outcome got = {0};
    sandlet_proc ok = {.data = &got, .exit_cb = on_exit_cb};
    sandlet_spawn_opts good = opts_for(args, fds, 3);
    assert_int_equal(sandlet_spawn(&ok, &good), 0);
    run_until(&got);
    assert_int_equal(got.status, 0);
}

/* An upgrade when sandletd's own path is unknown (none was set in this
 * process): an error, nothing started. */
static void test_no_upgrade_path(void **state)
{
    (void)state;
    char *args[] = {"sh", NULL};
    int fds[1] = {-1};
    sandlet_spawn_opts o = opts_for(args, fds, 1);
    o.file = SANDLET_SPAWN_UPGRADE; /* no upgrade path was set here */
    o.uid = o.gid = UINT32_MAX;
    o.detached = true;
    o.env = NULL;
    sandlet_proc p = {0};
    assert_int_equal(sandlet_spawn(&p, &o), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_and_exit),
        cmocka_unit_test(test_kill),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_no_upgrade_path),
    };
    return cmocka_run_group_tests_name("spawner", tests, group_setup, NULL);
}

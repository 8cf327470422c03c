/*
 * test_workerstart.c - a worker's start (issue 14): no servlet code, not
 * even a library constructor, runs with more than its sandbox's identity
 * and fence; a thread started in init is fenced as the worker is; workers
 * die with their supervisor; a worker holds no descriptor and no
 * environment it was not given.
 *
 * The hostile servlet is tests/fixtures/workerstart.c.  Runs for real as
 * root; not root, the identity checks and the /proc inspections print
 * SKIP (the Landlock checks still run); SANDLET_NO_CONFINEMENT skips all.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static th_daemon d;
static char dir[64]; /* allowed.txt, secret.txt, w/ */
static char allowed[128], secret[128], writable[128];
static bool root;

static bool have_landlock(void)
{
    return syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) >= 1;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(path, 0644);
}

static const char *so(void)
{
    return th_fixture("workerstart");
}

static int group_setup(void **state)
{
    (void)state;
    if (th_unconfined())
        return 0;
    th_prepare();
    root = geteuid() == 0;
    if (th_tempdir(dir, sizeof(dir), "ws", 0755) < 0)
        return -1;
    snprintf(allowed, sizeof(allowed), "%s/allowed.txt", dir);
    snprintf(secret, sizeof(secret), "%s/secret.txt", dir);
    snprintf(writable, sizeof(writable), "%s/w", dir);
    write_text(allowed, "allowed\n");
    write_text(secret, "secret\n");
    if (mkdir(writable, 0777) < 0 || chmod(writable, 0777) < 0)
        return -1;
    /* The daemon's environment holds a secret no worker may see. */
    setenv("SANDLET_TEST_SECRET", "database-password", 1);
    char conf[4096];
    snprintf(conf, sizeof(conf),
             "sandbox ws { workers 1; %s syscalls files; readable \"%s\"; writable \"%s\"; timeout "
             "20000; }\n"
             "servlet /ws/* { library \"%s\"; sandbox ws; param allowed \"%s\";\n"
             "                param secret \"%s\"; param writable \"%s\"; }\n",
             root ? "user nobody; group nogroup;" : "", allowed, writable, so(), allowed, secret,
             writable);
    return th_start(&d, conf, false);
}

static int group_teardown(void **state)
{
    (void)state;
    if (th_confinement_off(NULL))
        return 0;
    int rc = th_stop(&d);
    /* Left behind only when an attack succeeded (the old order). */
    unlink("/root/sandlet-workerstart-ctor");
    unlink("/root/sandlet-workerstart-init");
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return -1;
    return rc == 0 ? 0 : -1;
}

static void get(unsigned port, const char *target, th_response *r)
{
    assert_int_equal(th_request(port, "GET", target, NULL, NULL, 0, r), 0);
}

/* Asserts that body has the line "name=value". */
static void expect_line(const char *body, const char *name, const char *value)
{
    char line[160];
    snprintf(line, sizeof(line), "%s=%s\n", name, value);
    if (!strstr(body, line))
        print_message("expected \"%s=%s\" in:\n%s", name, value, body);
    assert_non_null(strstr(body, line));
}

/* Asserts that body has "name=" followed by anything but a success. */
static void expect_refused(const char *body, const char *name)
{
    char key[80];
    snprintf(key, sizeof(key), "%s=", name);
    const char *p = strstr(body, key);
    if (!p || strncmp(p + strlen(key), "0\n", 2) == 0)
        print_message("expected \"%s\" refused in:\n%s", name, body);
    assert_non_null(p);
    assert_true(strncmp(p + strlen(key), "0\n", 2) != 0);
}

/* The constructor and init ran as the sandbox's user, under Landlock:
 * /etc/shadow, /root and every file outside the sandbox's paths were out
 * of reach, the sandbox's own paths were not, and the daemon's
 * environment was gone. */
static void test_constructor_and_init(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    th_response r;
    get(d.port, "/ws/report", &r);
    assert_int_equal(r.status, 200);
    const char *b = r.body;
    expect_line(b, "ctor secret-env", "0");
    expect_line(b, "init allowed", "0");
    expect_line(b, "init writable", "0");
    expect_line(b, "init thread", "0");
    if (have_landlock()) {
        expect_refused(b, "ctor passwd");
        expect_refused(b, "init passwd");
        expect_refused(b, "init secret");
    } else {
        printf("SKIP: no Landlock: reads outside the sandbox's paths are not fenced\n");
    }
    if (root) {
        assert_null(strstr(b, "ctor uid=0 "));
        assert_non_null(strstr(b, "ctor uid=65534 euid=65534 "));
        assert_non_null(strstr(b, "init uid=65534 euid=65534\n"));
        expect_refused(b, "ctor shadow");
        expect_refused(b, "ctor root");
        expect_refused(b, "init shadow");
        expect_refused(b, "init root");
        assert_int_equal(access("/root/sandlet-workerstart-ctor", F_OK), -1);
        assert_int_equal(access("/root/sandlet-workerstart-init", F_OK), -1);
    } else {
        printf("SKIP: not root: the identity of the constructor and init was not checked\n");
    }
    th_response_free(&r);
}

/* A thread started in init is under Landlock too (the sandbox has the
 * files group, so that its open() reaches Landlock past the allowlist). */
static void test_thread_read(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    if (!have_landlock()) {
        printf("SKIP: no Landlock: the thread's read is not fenced\n");
        skip();
    }
    th_response r;
    get(d.port, "/ws/thread-read", &r);
    assert_int_equal(r.status, 200);
    expect_refused(r.body, "thread passwd");
    th_response_free(&r);
}

/* ... and under the allowlist: its forbidden call kills the worker. */
static void test_thread_syscall(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    th_response r;
    get(d.port, "/ws/thread-syscall", &r);
    if (r.status != 502)
        print_message("thread-syscall answered %d: %s\n", r.status, r.body);
    assert_int_equal(r.status, 502);
    th_response_free(&r);
    assert_true(th_log_wait(&d, "seccomp: forbidden system call getppid", 3000));
    /* The sandbox comes back with a fresh worker. */
    for (int i = 0; i < 50; i++) {
        get(d.port, "/ws/report", &r);
        int st = r.status;
        th_response_free(&r);
        if (st == 200)
            return;
        usleep(100000);
    }
    fail_msg("the sandbox did not come back");
}

/* ---- a daemon of its own per test below --------------------------------- */

/* th_start_with's hook: descriptors left open for sandletd as a careless
 * starter would: fd 4 (where a worker's session store goes) and fd 20,
 * both a root-only file, neither close-on-exec. */
static void leave_strays(void *stray)
{
    int s = open(stray, O_RDONLY); /* no O_CLOEXEC: the point */
    if (s < 0 || dup2(s, 4) != 4 || dup2(s, 20) != 20)
        _exit(126);
    if (s != 4 && s != 20)
        close(s);
}

static int start_with_strays(th_daemon *dm, const char *body, const char *stray)
{
    return th_start_with(dm, body, false, leave_strays, (void *)stray);
}

static void remove_dir(const char *path)
{
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

/* The worker has 0-3, and 6 (its spool file, read-only, with no name in
 * the sandbox's spool folder), and nothing else: neither the stray
 * descriptors sandletd was started with (on 4 and 20) nor any other. */
static void test_no_stray_descriptors(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    if (th_skip_unless_root(": a confined worker's /proc/PID/fd is readable by root only"))
        skip();
    char stray[128];
    snprintf(stray, sizeof(stray), "%s/root-only.txt", dir);
    write_text(stray, "root only\n");
    chmod(stray, 0600);
    th_daemon dm;
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "sandbox p { workers 1; user nobody; group nogroup; }\n"
             "servlet /p/* { library \"%s\"; sandbox p; }\n",
             th_fixture("probe"));
    assert_int_equal(start_with_strays(&dm, conf, stray), 0);
    th_response r;
    get(dm.port, "/p/pid", &r);
    assert_int_equal(r.status, 200);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%s/fd", r.body);
    th_response_free(&r);
    DIR *fds = opendir(path);
    assert_non_null(fds);
    struct dirent *e;
    char seen[256] = "";
    bool extra = false;
    while ((e = readdir(fds))) {
        if (e->d_name[0] == '.')
            continue;
        size_t len = strlen(seen);
        if (len + strlen(e->d_name) + 2 <= sizeof(seen)) {
            seen[len] = ' ';
            memcpy(seen + len + 1, e->d_name, strlen(e->d_name) + 1);
        }
        int fd = atoi(e->d_name);
        if (fd == 6) {
            char link[128], target[512], want[160];
            snprintf(link, sizeof(link), "%s/6", path);
            ssize_t k = readlink(link, target, sizeof(target) - 1);
            target[k > 0 ? k : 0] = '\0';
            snprintf(want, sizeof(want), "%s/spool/p/", dm.dir);
            if (strncmp(target, want, strlen(want)) != 0 || !strstr(target, "(deleted)")) {
                print_message("descriptor 6 is %s, not a spool file in %s\n", target, want);
                extra = true;
            }
            continue;
        }
        extra |= fd > 3;
    }
    closedir(fds);
    if (extra)
        print_message("the worker holds descriptors%s\n", seen);
    assert_false(extra);
    assert_int_equal(th_stop(&dm), 0);
    remove_dir(dm.dir);
}

/* Dead or a zombie: gone as far as running code goes.  Reaps it when it
 * is ours (we are the subreaper of the daemon's orphans). */
static bool gone(pid_t pid)
{
    if (waitpid(pid, NULL, WNOHANG) == pid)
        return true;
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return true;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    char *s = th_slurp(path, NULL);
    const char *rp = s ? strrchr(s, ')') : NULL;
    bool dead = !rp || rp[2] == 'Z' || rp[2] == 'X';
    free(s);
    return dead;
}

/* kill -9 of the supervisor takes its workers with it, a busy one (which
 * no closed socket would stop) included, though they run as another user
 * (which clears the death signal set before the switch). */
static void test_workers_die_with_supervisor(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    if (th_skip_unless_root(": workers run as the daemon's user, the case this guards"))
        skip();
    th_daemon dm;
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "sandbox k { workers 2; user nobody; group nogroup; timeout 60000; }\n"
             "servlet /k/* { library \"%s\"; sandbox k; }\n",
             so());
    assert_int_equal(th_start(&dm, conf, false), 0);
    th_response r;
    get(dm.port, "/k/report", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    pid_t sup[4], workers[8];
    assert_int_equal(th_children_of(dm.pid, sup, 4), 1);
    int n = 0;
    for (int i = 0; i < 100 && (n = th_children_of(sup[0], workers, 8)) < 2; i++)
        usleep(50000);
    assert_int_equal(n, 2);
    /* One worker busy for longer than the test lasts. */
    th_conn *c = th_connect(dm.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /k/sleep?ms=30000 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    usleep(300000);

    assert_int_equal(kill(sup[0], SIGKILL), 0);
    unsigned long long t0 = th_now_ms();
    bool all_gone = false;
    while (!all_gone && th_now_ms() - t0 < 3000) {
        all_gone = true;
        for (int i = 0; i < n; i++)
            all_gone &= gone(workers[i]);
        if (!all_gone)
            usleep(20000);
    }
    for (int i = 0; i < n; i++)
        if (!gone(workers[i])) {
            print_message("worker %d outlived its supervisor\n", (int)workers[i]);
            kill(workers[i], SIGKILL);
            waitpid(workers[i], NULL, 0);
        }
    th_close(c);
    /* The acceptor ends with its supervisor. */
    th_stop(&dm);
    remove_dir(dm.dir);
    assert_true(all_gone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constructor_and_init),
        cmocka_unit_test(test_thread_read),
        cmocka_unit_test(test_thread_syscall),
        cmocka_unit_test(test_no_stray_descriptors),
        cmocka_unit_test(test_workers_die_with_supervisor),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

/*
 * test_logs.c - the error log against hostile workers and a hostile
 * acceptor user (issue 14): workers write only to a pipe of their own,
 * whose lines reach the log prefixed, escaped, cut and rate-limited; a
 * stalled reader of standard error never stalls the daemon; log files are
 * opened and reopened without following links, in checked folders.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static th_daemon d;
/* Started by a test that may fail halfway: the teardown stops them. */
static pid_t strays[4];

static void stray(pid_t pid)
{
    for (size_t i = 0; i < sizeof(strays) / sizeof(strays[0]); i++)
        if (!strays[i]) {
            strays[i] = pid;
            return;
        }
}

/* pid was reaped: its number may be reused. */
static void unstray(pid_t pid)
{
    for (size_t i = 0; i < sizeof(strays) / sizeof(strays[0]); i++)
        if (strays[i] == pid)
            strays[i] = 0;
}

static const char *conf_body(void)
{
    static char conf[2048];
    const char *lib = th_fixture("logger");
    snprintf(conf, sizeof(conf),
             "sandbox logs { workers 1; syscalls files; timeout 30000; }\n"
             "servlet /log { library \"%s\"; sandbox logs; }\n"
             "sandbox calm { workers 1; }\n"
             "servlet /calm { library \"%s\"; sandbox calm; }\n",
             lib, lib);
    return conf;
}

static bool file_wait(const char *path, const char *needle, int ms)
{
    for (int waited = 0; waited <= ms; waited += 20) {
        char *s = th_slurp(path, NULL);
        bool found = s && strstr(s, needle);
        free(s);
        if (found)
            return true;
        usleep(20000);
    }
    return false;
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* The whole log line holding needle, copied into out; false if none. */
static bool log_line(const char *needle, char *out, size_t cap)
{
    char *s = th_slurp(d.log, NULL);
    const char *p = s ? strstr(s, needle) : NULL;
    if (p) {
        const char *b = p;
        while (b > s && b[-1] != '\n')
            b--;
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - b) : strlen(b);
        if (n >= cap)
            n = cap - 1;
        memcpy(out, b, n);
        out[n] = '\0';
    }
    free(s);
    return p != NULL;
}

static void expect(unsigned port, const char *target, int status, const char *body_prefix)
{
    th_response r;
    assert_int_equal(th_request(port, "GET", target, NULL, NULL, 0, &r), 0);
    if (r.status != status)
        printf("# %s: %d\n", target, r.status);
    assert_int_equal(r.status, status);
    if (body_prefix)
        assert_memory_equal(r.body, body_prefix, strlen(body_prefix));
    th_response_free(&r);
}

static int group_setup(void **state)
{
    (void)state;
    th_prepare();
    return th_start(&d, conf_body(), false);
}

static int group_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(strays) / sizeof(strays[0]); i++)
        if (strays[i] > 0 && kill(strays[i], SIGKILL) == 0)
            waitpid(strays[i], NULL, 0);
    return th_stop(&d) == 0 ? 0 : -1;
}

/* Lines a worker writes are the acceptor's lines about that worker: a
 * forged line never starts a log line, and escapes reach no terminal. */
static void test_prefixed_and_escaped(void **state)
{
    (void)state;
    expect(d.port, "/log?do=say&text=hi", 200, "said");
    assert_true(th_log_wait(&d, "sandbox 'logs' /log: err: hi", 3000));
    assert_true(th_log_wait(&d, "sandbox 'logs' /log: out: hi", 3000));
    char line[4096];
    assert_true(log_line("sandbox 'logs' /log: err: hi", line, sizeof(line)));
    assert_non_null(strstr(line, " acceptor warning: worker "));

    expect(d.port, "/log?do=forge", 200, "forge: ");
    assert_true(th_log_wait(&d, "FORGED-LINE", 3000));
    assert_true(th_log_wait(&d, "BAD h\xc3\xa9llo", 3000));
    size_t len;
    char *s = th_slurp(d.log, &len);
    assert_non_null(s);
    /* Every line begins with the writer's own time stamp and pid. */
    for (const char *p = s; p < s + len; p = strchr(p, '\n') + 1) {
        assert_false(strncmp(p, "2026-01-01T00:00:00Z", 20) == 0);
        if (!strchr(p, '\n'))
            break;
    }
    assert_true(log_line("FORGED-LINE", line, sizeof(line)));
    assert_non_null(strstr(line, " acceptor warning: worker "));
    assert_non_null(
        strstr(line, "sandbox 'logs' /log: 2026-01-01T00:00:00Z sandletd[1] acceptor error: "));
    /* Control bytes, a C1 CSI and invalid UTF-8 appear as \xNN; valid
     * UTF-8 passes unchanged. */
    assert_true(th_log_contains(&d, "\\x1b[31mANSI-RED\\x1b[0m\\x07\\x0dCR-HIDE\\x7f \\xc2\\x9b2J "
                                    "C1 \\xff\\xfe BAD h\xc3\xa9llo"));
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        assert_false(c < 0x20 && c != '\n' && c != '\t');
        assert_false(c == 0x7f || c == 0xff);
    }
    assert_null(memmem(s, len, "\xc2\x9b", 2));
    free(s);
}

/* sl_log (issue 31): each line at its level, named by sandbox, servlet
 * and request; a line feed in a logged value starts no line of its own
 * (the next line carries the same prefix), and a '%' stays text. */
static void test_sl_log(void **state)
{
    (void)state;
    expect(d.port, "/log?do=sllog&text=a%25sb%0AFAKE-LINE", 200, "logged");
    assert_true(th_log_wait(&d, "and this is an error", 3000));
    char line[4096];
    assert_true(log_line("client said a%sb", line, sizeof(line)));
    assert_non_null(strstr(line, " acceptor info: worker "));
    assert_non_null(strstr(line, "sandbox 'logs' /log: GET /log: client said a%sb"));
    assert_true(log_line("FAKE-LINE", line, sizeof(line)));
    assert_non_null(strstr(line, " acceptor info: worker "));
    assert_non_null(strstr(line, "sandbox 'logs' /log: GET /log: FAKE-LINE"));
    assert_true(log_line("and this is an error", line, sizeof(line)));
    assert_non_null(strstr(line, " acceptor error: worker "));
    assert_non_null(strstr(line, "sandbox 'logs' /log: GET /log: and this is an error"));
}

/* A line past 1 KiB is cut with a mark. */
static void test_long_line_cut(void **state)
{
    (void)state;
    char target[2200] = "/log?do=say&text=";
    size_t n = strlen(target);
    memset(target + n, 'y', 1500);
    target[n + 1500] = '\0';
    expect(d.port, target, 200, "said");
    assert_true(th_log_wait(&d, "[cut: longer than 1024 bytes]", 3000));
    char line[4096];
    assert_true(log_line("[cut: longer than 1024 bytes]", line, sizeof(line)));
    char run[1100];
    memset(run, 'y', 1100);
    assert_null(memmem(line, strlen(line), run, sizeof(run)));
    assert_non_null(memmem(line, strlen(line), run, 1000));
}

/* What a servlet holding the log as fd 2 did to it (issue 14): the log
 * keeps its history whatever the worker does with its descriptor. */
static void test_fd_tricks(void **state)
{
    (void)state;
    off_t before = file_size(d.log);
    assert_true(before > 0);
    expect(d.port, "/log?do=fdtricks", 200, "fdtricks: ");
    expect(d.port, "/calm?do=hello", 200, "hello");
    usleep(200000);
    assert_true(file_size(d.log) >= before);
    assert_true(th_log_contains(&d, "listening on 127.0.0.1:"));
    char *s = th_slurp(d.log, NULL);
    assert_non_null(s);
    assert_false(strncmp(s, "OVERWRITTEN-HISTORY", 19) == 0);
    free(s);
}

/* CPU time (ms) and resident memory (KiB) of process pid so far. */
static void usage_of(pid_t pid, unsigned long long *cpu_ms, unsigned long long *rss_kib)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    char *s = th_slurp(path, NULL);
    assert_non_null(s);
    const char *rp = strrchr(s, ')');
    assert_non_null(rp);
    unsigned long long ut = 0, st = 0;
    /* After "pid (comm)": state is field 3, utime 14, stime 15. */
    assert_int_equal(
        sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st), 2);
    free(s);
    *cpu_ms = (ut + st) * 1000ull / (unsigned long long)sysconf(_SC_CLK_TCK);
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    s = th_slurp(path, NULL);
    assert_non_null(s);
    const char *rss = strstr(s, "VmRSS:");
    assert_non_null(rss);
    *rss_kib = strtoull(rss + 6, NULL, 10);
    free(s);
}

/* 32 MiB of output as fast as a worker can write: the log takes a bounded
 * part of it and says how much it dropped; another sandbox keeps
 * answering quickly meanwhile. */
static void test_flood(void **state)
{
    (void)state;
    off_t before = file_size(d.log);
    unsigned long long cpu0, rss0, cpu1, rss1;
    usage_of(d.pid, &cpu0, &rss0); /* the acceptor: the process we started */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        th_response r;
        int rc = th_request(d.port, "GET", "/log?do=flood&n=33554432", NULL, NULL, 0, &r);
        _exit(rc == 0 && r.status == 200 && strncmp(r.body, "flood: 33554432 ", 16) == 0 ? 0 : 1);
    }
    stray(pid);
    unsigned long long start = th_now_ms(), worst = 0;
    int st = -1, n = 0;
    while (th_now_ms() - start < 60000) {
        unsigned long long t = th_now_ms();
        expect(d.port, "/calm?do=hello", 200, "hello");
        if (th_now_ms() - t > worst)
            worst = th_now_ms() - t;
        n++;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            unstray(pid);
            break;
        }
        usleep(20000);
    }
    printf("# flood: %d requests to another sandbox meanwhile, slowest %llu ms, flood took "
           "%llu ms\n",
           n, worst, th_now_ms() - start);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    usage_of(d.pid, &cpu1, &rss1);
    printf("# flood: the acceptor used %llu ms of CPU, its memory grew by %lld KiB\n", cpu1 - cpu0,
           (long long)rss1 - (long long)rss0);
    assert_true(worst < 1500);
    /* Reading 32 MiB and writing a few hundred lines: well under a
     * second of CPU, and no memory that grows with the flood. */
    assert_true(cpu1 - cpu0 < 1000);
    assert_true(rss1 < rss0 + 8 * 1024);
    assert_true(th_log_wait(&d, "lines from worker ", 3000));
    assert_true(th_log_contains(&d, "(rate limit)"));
    /* What reached the log: a few seconds' worth of 100 lines a second,
     * not 32 MiB. */
    off_t grown = file_size(d.log) - before;
    printf("# flood: the log grew by %lld bytes\n", (long long)grown);
    assert_true(grown < 1024 * 1024);
}

/* A daemon whose standard error is a pipe nobody reads keeps serving:
 * log lines are dropped and counted, never waited for. */
static void test_stderr_unread(void **state)
{
    (void)state;
    char dir[32], conf[128];
    assert_int_equal(th_tempdir(dir, sizeof(dir), "logs", 0755), 0);
    snprintf(conf, sizeof(conf), "%s/sandlet.conf", dir);
    FILE *f = fopen(conf, "w");
    assert_non_null(f);
    /* The spool in the test's folder: nothing left under /var. */
    fprintf(f, "listen 127.0.0.1:0;\nspool-dir %s/spool;\n%s", dir, conf_body());
    fclose(f);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    fcntl(p[1], F_SETPIPE_SZ, 4096);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], STDERR_FILENO);
        dup2(p[1], STDOUT_FILENO);
        const char *exe = getenv("SANDLETD");
        execl(exe ? exe : "./sandletd", "sandletd", "-d", "-c", conf, (char *)NULL);
        _exit(127);
    }
    stray(pid);
    close(p[1]);
    /* Read only as far as the port; never again. */
    char buf[8192];
    size_t len = 0;
    unsigned port = 0;
    while (!port && len < sizeof(buf) - 1) {
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        assert_int_equal(poll(&pfd, 1, 15000), 1);
        ssize_t n = read(p[0], buf + len, 1);
        assert_true(n == 1);
        len++;
        buf[len] = '\0';
        const char *at = strstr(buf, "listening on 127.0.0.1:");
        if (at && buf[len - 1] == '\n')
            port = (unsigned)atoi(at + strlen("listening on 127.0.0.1:"));
    }
    assert_true(port > 0);
    /* A worker floods its output; the pipe fills. */
    pid_t flood = fork();
    assert_true(flood >= 0);
    if (flood == 0) {
        th_response r;
        int rc = th_request(port, "GET", "/log?do=flood&n=1048576", NULL, NULL, 0, &r);
        _exit(rc == 0 && r.status == 200 ? 0 : 1);
    }
    stray(flood);
    usleep(300000);
    /* Each bad request makes the acceptor log a line (-d); each must be
     * answered, and so must the other sandbox. */
    unsigned long long worst = 0;
    for (int i = 0; i < 20; i++) {
        unsigned long long t = th_now_ms();
        th_conn *c = th_connect(port, false);
        assert_non_null(c);
        assert_int_equal(th_send_str(c, "G@T / HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
        th_response r;
        assert_int_equal(th_read(c, &r, false), 0);
        assert_int_equal(r.status, 400);
        th_response_free(&r);
        th_close(c);
        expect(port, "/calm?do=hello", 200, "hello");
        expect(port, "/log?do=say&text=still", 200, "said");
        if (th_now_ms() - t > worst)
            worst = th_now_ms() - t;
    }
    printf("# unread stderr: slowest round %llu ms\n", worst);
    assert_true(worst < 3000);
    /* Read again: the lines that did not fit are counted and reported. */
    assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    size_t cap = (size_t)4 << 20, got = 0;
    char *seen = malloc(cap);
    assert_non_null(seen);
    bool reported = false;
    const char *dropped_note = "log line(s) dropped: standard error was not taking them";
    for (int i = 0; i < 100 && !reported; i++) {
        ssize_t k;
        while (got < cap && (k = read(p[0], seen + got, cap - got)) > 0)
            got += (size_t)k;
        reported = memmem(seen, got, dropped_note, strlen(dropped_note)) != NULL;
        th_conn *c = th_connect(port, false);
        assert_non_null(c);
        th_send_str(c, "G@T / HTTP/1.1\r\nHost: x\r\n\r\n");
        th_close(c);
        usleep(50000);
    }
    free(seen);
    assert_true(reported);
    int st;
    bool reaped = false;
    for (int waited = 0; waited < 10000 && !reaped; waited += 20) {
        reaped = waitpid(flood, &st, WNOHANG) == flood;
        if (!reaped)
            usleep(20000);
    }
    if (!reaped) {
        kill(flood, SIGKILL);
        waitpid(flood, &st, 0);
    }
    unstray(flood);
    kill(pid, SIGTERM);
    bool stopped = false;
    for (int waited = 0; waited < 15000 && !stopped; waited += 20) {
        stopped = waitpid(pid, &st, WNOHANG) == pid;
        if (!stopped)
            usleep(20000);
    }
    if (!stopped) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    unstray(pid);
    close(p[0]);
    assert_true(stopped && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Starts sandletd with conf_extra, expecting it to refuse: returns what it
 * printed (to free), or NULL if it kept running. */
static char *refused(const char *dir, const char *conf_extra)
{
    char conf[256], out[256];
    snprintf(conf, sizeof(conf), "%s/refuse.conf", dir);
    snprintf(out, sizeof(out), "%s/refuse.out", dir);
    FILE *f = fopen(conf, "w");
    if (!f)
        return NULL;
    fprintf(f, "listen 127.0.0.1:0;\nspool-dir %s/spool;\n%s%s", dir, conf_extra, conf_body());
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, STDERR_FILENO);
        const char *exe = getenv("SANDLETD");
        execl(exe ? exe : "./sandletd", "sandletd", "-c", conf, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    for (int waited = 0; waited < 5000; waited += 20) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) && WEXITSTATUS(st) == 1 ? th_slurp(out, NULL) : NULL;
        usleep(20000);
    }
    kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
    return NULL;
}

/* A log folder others may write is refused at start, naming the fix. */
static void test_folder_checked(void **state)
{
    (void)state;
    char dir[32], logs[64], extra[256];
    assert_int_equal(th_tempdir(dir, sizeof(dir), "logs", 0755), 0);
    snprintf(logs, sizeof(logs), "%s/logs", dir);
    assert_int_equal(mkdir(logs, 0777), 0);
    chmod(logs, 0777);
    snprintf(extra, sizeof(extra), "error-log %s/error.log;\n", logs);
    char *out = refused(dir, extra);
    assert_non_null(out);
    assert_non_null(strstr(out, "is writable by everyone"));
    assert_non_null(strstr(out, "chmod o-w"));
    free(out);
    /* The same for the access log. */
    snprintf(extra, sizeof(extra), "access-log %s/access.log;\n", logs);
    out = refused(dir, extra);
    assert_non_null(out);
    assert_non_null(strstr(out, "access-log"));
    free(out);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* With the log folder owned by the acceptor's user, logrotate's reopen
 * (done as root by the supervisor) neither follows a link nor writes
 * through a hard link swapped in for the log, and a file it creates
 * there belongs to that user, not root. */
static void test_reopen_no_links(void **state)
{
    (void)state;
    if (th_skip_unless_root("; the reopen is only privileged when sandletd starts as root"))
        skip();
    char dir[32], logs[64], secret[64], extra[256];
    assert_int_equal(th_tempdir(dir, sizeof(dir), "logs", 0755), 0);
    snprintf(logs, sizeof(logs), "%s/logs", dir);
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    assert_int_equal(mkdir(logs, 0755), 0);
    assert_int_equal(mkdir(secret, 0700), 0);
    /* The acceptor runs as nobody ('user nobody'), who owns the folder. */
    assert_int_equal(chown(logs, 65534, 65534), 0);
    char log[128], old[128], target[128], victim[128];
    snprintf(log, sizeof(log), "%s/error.log", logs);
    snprintf(old, sizeof(old), "%s/error.log.1", logs);
    snprintf(target, sizeof(target), "%s/created-by-root", secret);
    snprintf(victim, sizeof(victim), "%s/root-only", secret);
    int fd = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    close(fd);
    snprintf(extra, sizeof(extra), "user nobody;\nerror-log %s;\n", log);

    th_daemon e;
    char body[3072];
    snprintf(body, sizeof(body), "%s%s", extra, conf_body());
    assert_int_equal(th_start(&e, body, false), 0);
    stray(e.pid);
    expect(e.port, "/calm?do=hello", 200, "hello");
    assert_true(file_wait(log, "is ready", 5000));
    struct stat st;
    assert_int_equal(stat(log, &st), 0);
    assert_int_equal(st.st_uid, 65534);

    /* A symbolic link to a root-only folder in the log's place. */
    assert_int_equal(rename(log, old), 0);
    assert_int_equal(symlink(target, log), 0);
    kill(e.pid, SIGUSR1);
    assert_true(file_wait(old, "is a symbolic link", 5000));
    assert_int_equal(access(target, F_OK), -1);
    expect(e.port, "/calm?do=hello", 200, "hello");

    /* A hard link to a root-only file. */
    assert_int_equal(unlink(log), 0);
    assert_int_equal(link(victim, log), 0);
    kill(e.pid, SIGUSR1);
    assert_true(file_wait(old, "has other hard links", 5000));
    assert_int_equal(file_size(victim), 0);

    /* Gone: a fresh file, the acceptor's user's. */
    assert_int_equal(unlink(log), 0);
    kill(e.pid, SIGUSR1);
    assert_true(file_wait(log, "reopened", 5000));
    assert_int_equal(stat(log, &st), 0);
    assert_int_equal(st.st_uid, 65534);
    assert_int_equal(file_size(victim), 0);
    unstray(e.pid);
    assert_int_equal(th_stop(&e), 0);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, e.dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefixed_and_escaped),
        cmocka_unit_test(test_sl_log),
        cmocka_unit_test(test_long_line_cut),
        cmocka_unit_test(test_fd_tricks),
        cmocka_unit_test(test_flood),
        cmocka_unit_test(test_stderr_unread),
        cmocka_unit_test(test_folder_checked),
        cmocka_unit_test(test_reopen_no_links),
    };
    /* One test alone, to check it against older code: SANDLET_TEST_ONLY=name. */
    if (getenv("SANDLET_TEST_ONLY"))
        cmocka_set_test_filter(getenv("SANDLET_TEST_ONLY"));
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

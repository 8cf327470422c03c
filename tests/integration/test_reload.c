/*
 * test_reload.c - SIGHUP on a running sandletd: a servlet library replaced
 * on disk (atomic rename) is served in its new version after a reload,
 * with no request failed under load meanwhile and the memory sessions
 * kept; a configuration that does not load, or changes what only a
 * restart applies, is reported and changes nothing; a new library that no
 * longer loads leaves the old workers serving; a reload that changes
 * nothing keeps the workers; 20 reloads alternating two configurations
 * (sandboxes kept, changed, added and removed, a listener added and
 * removed) under load fail no request and refuse no connection.
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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static th_daemon d;
static char dir[64];
static char lib[128];
static char conf[1024];

/* Copies from to lib through a temporary name and a rename, as a deploy
 * does: a worker that opens lib sees the old file or the new, whole. */
static void install(const char *from)
{
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.new", lib);
    size_t len = 0;
    char *bytes = th_slurp(from, &len);
    assert_non_null(bytes);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    close(fd);
    free(bytes);
    assert_int_equal(rename(tmp, lib), 0);
}

static void install_text(const char *text)
{
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.new", lib);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(rename(tmp, lib), 0);
}

static void write_conf(const char *text)
{
    int fd = open(d.conf, O_WRONLY | O_TRUNC | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    /* As th_start does: the spool in the test's folder, not under /var. */
    if (!strstr(text, "spool-dir"))
        dprintf(fd, "spool-dir %s/spool;\n", d.dir);
    close(fd);
}

/* SIGHUP, at most one a second (the supervisor's rate limit). */
static void reload(void)
{
    static unsigned long long last;
    unsigned long long now = th_now_ms();
    if (last && now - last < 1100)
        usleep((useconds_t)(1100 - (now - last)) * 1000);
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    last = th_now_ms();
}

static int setup(void **state)
{
    (void)state;
    th_prepare();
    if (th_tempdir(dir, sizeof(dir), "reload", 0755) != 0)
        return -1;
    snprintf(lib, sizeof(lib), "%s/app.so", dir);
    snprintf(conf, sizeof(conf),
             "sandbox app { workers 2; }\n"
             "servlet /v { library \"%s\"; sandbox app; }\n",
             lib);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (d.pid > 0)
        th_stop(&d); /* a test that failed left it running */
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The version that answered /v (with the cookie, counting), or -status. */
static int version(const char *cookie, long *count)
{
    char hdr[300];
    snprintf(hdr, sizeof(hdr), "Cookie: %s\r\n", cookie ? cookie : "");
    th_response r;
    if (th_request(d.port, "GET", cookie ? "/v?count=1" : "/v", cookie ? hdr : NULL, NULL, 0, &r) !=
        0)
        return -1;
    int v = -r.status;
    const char *p = r.status == 200 ? strstr(r.body, "version=") : NULL;
    if (p)
        v = (int)strtol(p + 8, NULL, 10);
    p = strstr(r.body, "count=");
    if (count && p)
        *count = strtol(p + 6, NULL, 10);
    th_response_free(&r);
    return v;
}

/* Waits until every answer is version want (a few in a row). */
static bool settles_on(int want)
{
    int streak = 0;
    for (int i = 0; i < 400 && streak < 6; i++) {
        int v = version(NULL, NULL);
        streak = v == want ? streak + 1 : 0;
        if (streak < 6)
            usleep(25 * 1000);
    }
    return streak >= 6;
}

/* A client that sends requests until stopped, on keep-alive connections
 * and new ones; exits with the number of failures (capped). */
static pid_t load(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid)
        return pid;
    unsigned failed = 0, done = 0;
    unsigned long long until = th_now_ms() + 60000;
    while (th_now_ms() < until) {
        /* A keep-alive connection for ten requests, then a new one. */
        th_conn *c = th_connect(d.port, false);
        for (int i = 0; c && i < 10; i++) {
            th_response r;
            if (th_send_str(c, "GET /v HTTP/1.1\r\nHost: t\r\n\r\n") != 0 ||
                th_read(c, &r, false) != 0) {
                failed++;
                break;
            }
            failed += r.status != 200;
            done++;
            th_response_free(&r);
        }
        if (!c)
            failed++;
        th_close(c);
        th_response r;
        if (th_request(d.port, "GET", "/v", NULL, NULL, 0, &r) != 0) {
            failed++;
        } else {
            failed += r.status != 200;
            done++;
            th_response_free(&r);
        }
        /* The parent ends the run by making this file. */
        char flag[128];
        snprintf(flag, sizeof(flag), "%s/stop", dir);
        if (access(flag, F_OK) == 0)
            break;
    }
    printf("load: %u requests, %u failed\n", done, failed);
    fflush(stdout);
    _exit(failed > 250 ? 250 : (int)failed);
}

/* Ends a load client (load, mixed_load): makes dir/stop, reaps it and
 * returns how many of its requests failed. */
static int stop_load(pid_t client)
{
    char flag[128];
    snprintf(flag, sizeof(flag), "%s/stop", dir);
    int fd = open(flag, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    close(fd);
    int st;
    assert_int_equal(waitpid(client, &st, 0), client);
    unlink(flag);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* The session cookie a response set ("NAME=VALUE"), into cookie. */
static void take_cookie(const th_response *r, char *cookie, size_t cap)
{
    const char *p = strstr(r->head, "Set-Cookie: ");
    assert_non_null(p);
    p += strlen("Set-Cookie: ");
    size_t n = strcspn(p, ";\r\n");
    assert_true(n < cap);
    memcpy(cookie, p, n);
    cookie[n] = '\0';
}

static void test_new_code_no_failed_request(void **state)
{
    (void)state;
    char v1[256], v2[256];
    snprintf(v1, sizeof(v1), "%s", th_fixture("version1"));
    snprintf(v2, sizeof(v2), "%s", th_fixture("version2"));
    install(v1);
    assert_int_equal(th_start(&d, conf, false), 0);
    /* A memory session, to see it survive the reloads. */
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/v?count=1", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "version=1 count=1"));
    char cookie[256] = "";
    take_cookie(&r, cookie, sizeof(cookie));
    th_response_free(&r);

    pid_t client = load();
    long count = 1;
    for (int i = 0; i < 6; i++) {
        int want = i % 2 ? 1 : 2;
        install(want == 1 ? v1 : v2);
        reload();
        if (!settles_on(want)) {
            char *log = th_slurp(d.log, NULL);
            fail_msg("reload %d: version %d never took over; log:\n%s", i, want,
                     log ? log : "(none)");
        }
        long c = 0;
        assert_int_equal(version(cookie, &c), want);
        assert_int_equal(c, ++count); /* the session stayed */
    }
    assert_int_equal(stop_load(client), 0);
    assert_true(th_log_contains(&d, "is unchanged: 1 sandbox(es) kept (1 with a servlet library "
                                    "changed on disk"));
}

/* The pid of the worker that answered a GET /v. */
static int answering_pid(void)
{
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/v", NULL, NULL, 0, &r), 0);
    const char *p = strstr(r.body, "pid=");
    assert_non_null(p);
    int pid = atoi(p + 4);
    th_response_free(&r);
    return pid;
}

static void test_broken_configuration_changes_nothing(void **state)
{
    (void)state;
    char *good = th_slurp(d.conf, NULL);
    assert_non_null(good);
    write_conf("sandbox app { workers two; }\n");
    reload();
    assert_true(th_log_wait(&d, "still serving with the configuration loaded before", 5000));
    if (!th_log_contains(&d, "invalid number 'two' for 'workers'")) {
        char *log = th_slurp(d.log, NULL);
        fprintf(stderr, "%s\n", log ? log : "(none)");
        fail_msg("the error does not quote the bad value");
    }
    int v = version(NULL, NULL);
    assert_true(v == 1 || v == 2);
    /* Valid, but what only a restart applies: refused, naming it. */
    char changed[1200];
    snprintf(changed, sizeof(changed), "docroot /tmp;\n%s", good);
    write_conf(changed);
    reload();
    if (!th_log_wait(&d, "changes 'docroot', which only a restart applies", 5000)) {
        char *log = th_slurp(d.log, NULL);
        fprintf(stderr, "%s\n", log ? log : "(none)");
        fail_msg("the refusal does not name docroot");
    }
    assert_int_equal(version(NULL, NULL), v);
    /* A comment changes the file and nothing else: applied, and the
     * workers stay (their library did not change). */
    int pids[2] = {0, 0};
    for (int i = 0; i < 20; i++) {
        int pid = answering_pid();
        if (pid != pids[0] && !pids[1] && pids[0])
            pids[1] = pid;
        if (!pids[0])
            pids[0] = pid;
    }
    snprintf(changed, sizeof(changed), "%s# a comment changes the file\n", good);
    write_conf(changed);
    reload();
    assert_true(th_log_wait(&d, "applied: 1 sandbox(es) kept (0 with a servlet library", 5000));
    usleep(300 * 1000);
    for (int i = 0; i < 20; i++) {
        int pid = answering_pid();
        if (pid != pids[0] && pid != pids[1])
            fail_msg("worker %d answered after a reload that changed nothing it runs", pid);
    }
    write_conf(good);
    free(good);
    assert_int_equal(version(NULL, NULL), v);
}

static void test_library_that_no_longer_loads(void **state)
{
    (void)state;
    int before = version(NULL, NULL);
    assert_true(before == 1 || before == 2);
    install_text("this is not a shared object\n");
    reload();
    if (!th_log_wait(&d, "cannot load", 5000)) {
        char *log = th_slurp(d.log, NULL);
        fprintf(stderr, "%s\n", log ? log : "(none)");
        fail_msg("no load error in the log");
    }
    /* The old code keeps serving: one worker was tried, the other stays. */
    for (int i = 0; i < 30; i++) {
        assert_int_equal(version(NULL, NULL), before);
        usleep(50 * 1000);
    }
    install(th_fixture(before == 1 ? "version2" : "version1"));
    reload();
    assert_true(settles_on(before == 1 ? 2 : 1));
    /* Two deploys in quick succession, a SIGHUP each: the second is
     * carried out when the first's second is over, not lost. */
    install(th_fixture(before == 1 ? "version1" : "version2"));
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    usleep(300 * 1000);
    install(th_fixture(before == 1 ? "version2" : "version1"));
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    usleep(1500 * 1000);
    assert_true(settles_on(before == 1 ? 2 : 1));
    assert_int_equal(th_stop(&d), 0);
}

/* Whether all n workers of sandbox app are up (the status page's
 * ready_workers), waiting up to 5 s: a start is ready once one worker per
 * sandbox is, and one still starting would load whatever library is on
 * disk by then, not the old code these tests mean. */
static bool workers_up(long n)
{
    const char *series = "sandlet_ready_workers{sandbox=\"app\"} ";
    for (int i = 0; i < 200 && th_metric(d.port, "/status?format=prometheus", series) != n; i++)
        usleep(25 * 1000);
    return th_metric(d.port, "/status?format=prometheus", series) == n;
}

/* Old workers past max-requests would come back with the code now on
 * disk: while the new code has no worker up, they serve on. */
static void test_recycling_waits_for_new_code(void **state)
{
    (void)state;
    char text[1024];
    snprintf(text, sizeof(text),
             "status-page /status;\n"
             "sandbox app { workers 2; max-requests 5; }\n"
             "servlet /v { library \"%s\"; sandbox app; }\n",
             lib);
    install(th_fixture("version1"));
    assert_int_equal(th_start(&d, text, false), 0);
    assert_true(workers_up(2));
    assert_int_equal(version(NULL, NULL), 1);
    install_text("not a shared object either\n");
    reload();
    assert_true(th_log_wait(&d, "cannot load", 5000));
    for (int i = 0; i < 40; i++)
        assert_int_equal(version(NULL, NULL), 1);
    assert_int_equal(th_stop(&d), 0);
}

/* The log, on stderr, and a failure saying why. */
#define FAIL_WITH_LOG(...)                                                                         \
    do {                                                                                           \
        char *log_ = th_slurp(d.log, NULL);                                                        \
        fprintf(stderr, "%s\n", log_ ? log_ : "(no log)");                                         \
        free(log_);                                                                                \
        fail_msg(__VA_ARGS__);                                                                     \
    } while (0)

/* Version 1 from worker pid, n times. */
static void served_by(int pid, int n, const char *when)
{
    for (int i = 0; i < n; i++) {
        th_response r;
        if (th_request(d.port, "GET", "/v", NULL, NULL, 0, &r) != 0)
            FAIL_WITH_LOG("%s, request %d: no answer", when, i);
        const char *p = r.status == 200 ? strstr(r.body, "pid=") : NULL;
        int status = r.status, by = p ? atoi(p + 4) : 0;
        bool v1 = r.status == 200 && strstr(r.body, "version=1 ");
        th_response_free(&r);
        if (!v1 || by != pid)
            FAIL_WITH_LOG("%s, request %d: status %d from worker %d, expected version 1 from "
                          "worker %d",
                          when, i, status, by, pid);
    }
}

/* Starts version 1 in a sandbox of two workers with the given extra
 * settings, waits for both to be up and names them in workers[0..1]. */
static void start_two(const char *extra, pid_t workers[4])
{
    char text[1024];
    snprintf(text, sizeof(text),
             "status-page /status;\n"
             "sandbox app { workers 2;%s }\n"
             "servlet /v { library \"%s\"; sandbox app; }\n",
             extra, lib);
    install(th_fixture("version1"));
    assert_int_equal(th_start(&d, text, false), 0);
    assert_true(workers_up(2));
    pid_t sup[4];
    assert_int_equal(th_children_of(d.pid, sup, 4), 1);
    assert_int_equal(th_children_of(sup[0], workers, 4), 2);
}

/* CI's sanitizer run before f59445f: one old worker up, the other
 * starting, when a library that does not load was installed; the one
 * starting loaded it and failed, and the one up, past max-requests, was
 * recycled before the reload's new code generation reached the acceptor:
 * it exited cleanly, its successor loaded the broken library too, and
 * requests got 503.  Here the second worker is made to start after the
 * deploy (killed, so that its slot restarts): the lone old worker serves
 * on past max-requests, before the reload and after it, until new code
 * that loads is deployed. */
static void test_lone_old_worker_serves_on(void **state)
{
    (void)state;
    pid_t workers[4];
    start_two(" max-requests 5;", workers);
    int lone = answering_pid();
    int other = workers[0] == lone ? workers[1] : workers[0];
    assert_true(other == workers[0] || other == workers[1]);
    install_text("not a shared object at all\n");
    /* The other slot's next worker loads what is on disk now. */
    assert_int_equal(kill(other, SIGKILL), 0);
    if (!th_log_wait(&d, "cannot load", 5000))
        FAIL_WITH_LOG("the restarted worker did not fail to load the new library");
    /* Before any reload (the window a SIGHUP on its way leaves), past
     * max-requests 5 twice over. */
    served_by(lone, 12, "before the reload");
    reload();
    if (!th_log_wait(&d, "1 with a servlet library changed on disk", 5000))
        FAIL_WITH_LOG("the reload was not applied");
    served_by(lone, 20, "after the reload");
    char exited[96];
    snprintf(exited, sizeof(exited), "worker %d of sandbox 'app' exited", lone);
    if (th_log_contains(&d, exited))
        FAIL_WITH_LOG("the lone old worker exited");
    /* A library that loads takes over, as after any failed deploy. */
    install(th_fixture("version2"));
    reload();
    if (!settles_on(2))
        FAIL_WITH_LOG("version 2 never took over from the lone old worker");
    assert_int_equal(th_stop(&d), 0);
}

/* max-requests 1 promises each request a process no earlier request
 * touched: after a failed start the last worker up is recycled all the
 * same, and the sandbox answers 503 rather than reuse it. */
static void test_max_requests_1_is_kept(void **state)
{
    (void)state;
    pid_t workers[4];
    start_two(" max-requests 1;", workers);
    install_text("not a shared object\n");
    assert_int_equal(kill(workers[0], SIGKILL), 0);
    if (!th_log_wait(&d, "cannot load", 5000))
        FAIL_WITH_LOG("the restarted worker did not fail to load the new library");
    int by[4] = {0};
    for (int i = 0; i < 4; i++) {
        th_response r;
        assert_int_equal(th_request(d.port, "GET", "/v", NULL, NULL, 0, &r), 0);
        const char *p = r.status == 200 ? strstr(r.body, "pid=") : NULL;
        by[i] = p ? atoi(p + 4) : 0;
        th_response_free(&r);
        if (i == 0 && by[0] != workers[1])
            FAIL_WITH_LOG("the first request was not answered by the worker up");
        for (int j = 0; by[i] && j < i; j++)
            if (by[j] == by[i])
                FAIL_WITH_LOG("worker %d answered a second request (max-requests 1)", by[i]);
    }
    assert_int_equal(th_stop(&d), 0);
}

/* How many times needle is in the log. */
static int log_count(const char *needle)
{
    char *log = th_slurp(d.log, NULL);
    int n = 0;
    for (const char *p = log; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(log);
    return n;
}

/* A slot whose workers do not start backs off, up to 30 s between
 * tries; a reload with new code has it try that at once, for the old
 * worker left up serves the old code until one of the new is. */
static void test_backing_off_slot_tries_new_code(void **state)
{
    (void)state;
    pid_t workers[4];
    start_two("", workers);
    install_text("not a shared object\n");
    assert_int_equal(kill(workers[0], SIGKILL), 0);
    /* After the 8th failed start in a row, the slot backs off 6.4 s.
     * Counted by exits: a worker's FAIL frame ("cannot start") may be
     * read after its exit is reported, or not at all. */
    const char *failed = "of sandbox 'app' exited with status 1";
    for (int i = 0; i < 1500 && log_count(failed) < 8; i++)
        usleep(20 * 1000);
    if (log_count(failed) < 8)
        FAIL_WITH_LOG("the slot did not fail 8 times in 30 s");
    install(th_fixture("version2"));
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    unsigned long long t0 = th_now_ms();
    while (version(NULL, NULL) != 2 && th_now_ms() - t0 < 4000)
        usleep(25 * 1000);
    if (version(NULL, NULL) != 2)
        FAIL_WITH_LOG("version 2 did not answer within 4 s of the reload");
    assert_int_equal(th_stop(&d), 0);
}

/* development on (issue 31): a rebuilt servlet is served without a
 * reload, as an edited page is; off, the old code serves until one. */
static void test_development_watches_libraries(void **state)
{
    (void)state;
    char text[1024];
    snprintf(text, sizeof(text),
             "development on;\n"
             "sandbox app { workers 2; }\n"
             "servlet /v { library \"%s\"; sandbox app; }\n",
             lib);
    install(th_fixture("version1"));
    assert_int_equal(th_start(&d, text, false), 0);
    assert_int_equal(version(NULL, NULL), 1);
    install(th_fixture("version2"));
    assert_true(settles_on(2));
    assert_true(th_log_contains(&d, "sandbox 'app': a servlet library changed; its workers are "
                                    "replaced (development on)"));
    assert_int_equal(th_stop(&d), 0);

    snprintf(text, sizeof(text),
             "status-page /status;\n"
             "sandbox app { workers 2; }\n"
             "servlet /v { library \"%s\"; sandbox app; }\n",
             lib);
    install(th_fixture("version1"));
    assert_int_equal(th_start(&d, text, false), 0);
    assert_true(workers_up(2));
    assert_int_equal(version(NULL, NULL), 1);
    install(th_fixture("version2"));
    for (int i = 0; i < 20; i++) {
        assert_int_equal(version(NULL, NULL), 1);
        usleep(50 * 1000);
    }
    assert_int_equal(th_stop(&d), 0);
}

/* A loopback port nothing listens on now. */
static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* GET path on port: the status, and whether the body holds want. */
static int get(unsigned port, const char *path, const char *want, bool *has)
{
    th_response r;
    if (th_request(port, "GET", path, NULL, NULL, 0, &r) != 0)
        return -1;
    int st = r.status;
    if (has)
        *has = want && r.body && strstr(r.body, want);
    th_response_free(&r);
    return st;
}

/* Whether configuration b (or a) is what answers now: every difference
 * between the two, seen from a client. */
static bool serves(bool b, unsigned port2)
{
    bool has = false;
    if (get(d.port, "/x", b ? "who=b" : "who=a", &has) != 200 || !has)
        return false;
    if (get(d.port, "/y", NULL, NULL) != (b ? 200 : 404))
        return false;
    if (get(d.port, b ? "/status-b" : "/status-a", NULL, NULL) != 200 ||
        get(d.port, b ? "/status-a" : "/status-b", NULL, NULL) != 404)
        return false;
    if (b)
        return get(port2, "/index.html", "static", &has) == 200 && has;
    th_conn *c = th_connect(port2, false);
    th_close(c);
    return c == NULL; /* refused: configuration a has no such listener */
}

/* A client that loads every kind of request a reload must not fail,
 * until the parent makes dir/stop: /v (a kept sandbox, with its memory
 * session), /x (a sandbox changed by every reload) and a static file, on
 * keep-alive connections and new ones.  Exits with the failures (capped);
 * a refused connection is one. */
static pid_t mixed_load(const char *cookie)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid)
        return pid;
    static const char *const paths[] = {"/v", "/x", "/index.html"};
    char req[512];
    unsigned failed = 0, done = 0, refused = 0;
    unsigned long long until = th_now_ms() + 120000;
    char flag[128];
    snprintf(flag, sizeof(flag), "%s/stop", dir);
    for (unsigned round = 0; th_now_ms() < until && access(flag, F_OK) != 0; round++) {
        th_conn *c = th_connect(d.port, false);
        if (!c) {
            refused++;
            failed++;
            continue;
        }
        for (int i = 0; i < 12; i++) {
            th_response r;
            snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\nCookie: %s\r\n\r\n",
                     paths[(round + (unsigned)i) % 3], cookie);
            if (th_send_str(c, req) != 0 || th_read(c, &r, false) != 0) {
                fprintf(stderr, "load: %s: no answer\n", paths[(round + (unsigned)i) % 3]);
                failed++;
                break;
            }
            if (r.status != 200)
                fprintf(stderr, "load: %s: %d\n", paths[(round + (unsigned)i) % 3], r.status);
            failed += r.status != 200;
            done++;
            th_response_free(&r);
        }
        th_close(c);
        for (int i = 0; i < 3; i++) {
            th_response r;
            if (th_request(d.port, "GET", paths[i], NULL, NULL, 0, &r) != 0) {
                failed++;
                continue;
            }
            failed += r.status != 200;
            done++;
            th_response_free(&r);
        }
    }
    printf("load: %u requests, %u failed, %u connections refused\n", done, failed, refused);
    fflush(stdout);
    _exit(failed > 250 ? 250 : (int)failed);
}

static void test_configuration_changes_under_load(void **state)
{
    (void)state;
    char root[128], file[192];
    snprintf(root, sizeof(root), "%s/www", dir);
    assert_int_equal(mkdir(root, 0755), 0);
    snprintf(file, sizeof(file), "%s/index.html", root);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("static\n", f);
    fclose(f);
    install(th_fixture("version1"));
    unsigned port2 = free_port();
    /* a: sandboxes app (kept throughout) and gone (only in a); b: app,
     * extra changed (workers and param), added (only in b), a second
     * listener, other timeouts, another status page. */
    char a[2048], b[2048];
    snprintf(a, sizeof(a),
             "docroot %s;\n"
             "status-page /status-a;\n"
             "header-timeout 9000;\n"
             "sandbox app { workers 2; }\n"
             "servlet /v { library \"%s\"; sandbox app; }\n"
             "sandbox extra { workers 1; queue-timeout 8000; }\n"
             "servlet /x { library \"%s\"; sandbox extra; param who a; }\n"
             "sandbox gone { workers 1; }\n"
             "servlet /g { library \"%s\"; sandbox gone; }\n",
             root, lib, lib, lib);
    snprintf(b, sizeof(b),
             "listen 127.0.0.1:0;\n"
             "listen 127.0.0.1:%u;\n"
             "docroot %s;\n"
             "status-page /status-b;\n"
             "header-timeout 8000;\n"
             "sandbox added { workers 1; }\n"
             "servlet /y { library \"%s\"; sandbox added; }\n"
             "sandbox app { workers 2; }\n"
             "servlet /v { library \"%s\"; sandbox app; }\n"
             "sandbox extra { workers 2; queue-timeout 8000; }\n"
             "servlet /x { library \"%s\"; sandbox extra; param who b; }\n",
             port2, root, lib, lib, lib);
    assert_int_equal(th_start(&d, a, false), 0);
    char full_a[2200];
    snprintf(full_a, sizeof(full_a), "listen 127.0.0.1:0;\n%s", a);
    assert_true(serves(false, port2));
    /* A memory session in the kept sandbox. */
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/v?count=1", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    char cookie[256] = "";
    take_cookie(&r, cookie, sizeof(cookie));
    th_response_free(&r);

    pid_t client = mixed_load(cookie);
    long count = 1;
    for (int i = 0; i < 20; i++) {
        bool to_b = i % 2 == 0;
        write_conf(to_b ? b : full_a);
        reload();
        bool ok = false;
        for (int t = 0; t < 200 && !ok; t++) {
            ok = serves(to_b, port2);
            if (!ok)
                usleep(25 * 1000);
        }
        if (!ok) {
            char *log = th_slurp(d.log, NULL);
            fail_msg("reload %d: configuration %s never took over; log:\n%s", i, to_b ? "b" : "a",
                     log ? log : "(none)");
        }
        long c = 0;
        char hdr[300];
        snprintf(hdr, sizeof(hdr), "Cookie: %s\r\n", cookie);
        assert_int_equal(th_request(d.port, "GET", "/v?count=1", hdr, NULL, 0, &r), 0);
        const char *p = strstr(r.body, "count=");
        assert_non_null(p);
        c = strtol(p + 6, NULL, 10);
        th_response_free(&r);
        assert_int_equal(c, ++count); /* the kept sandbox kept its sessions */
    }
    int failed = stop_load(client);
    if (failed != 0) {
        char *log = th_slurp(d.log, NULL);
        fail_msg("%d requests failed during the reloads; log:\n%s", failed, log ? log : "(none)");
    }
    /* The last configuration (a) is what serves, and nothing of b's
     * sandboxes is left running: a's workers are app 2, extra 1, gone 1. */
    assert_true(serves(false, port2));
    assert_false(th_log_contains(&d, "cannot apply the reloaded configuration"));
    pid_t sup[4], workers[16];
    assert_int_equal(th_children_of(d.pid, sup, 4), 1);
    int nw = 0;
    for (int t = 0; t < 100; t++) {
        nw = th_children_of(sup[0], workers, 16);
        if (nw == 4)
            break;
        usleep(50 * 1000);
    }
    if (nw != 4) {
        char *log = th_slurp(d.log, NULL);
        fail_msg("%d workers after the last reload, expected 4; log:\n%s", nw, log ? log : "");
    }
    assert_true(th_log_contains(&d, "applied: 1 sandbox(es) kept (0 with a servlet library "
                                    "changed on disk"));
    assert_true(th_log_contains(&d, "2 started, 2 retired once their requests are answered"));
    assert_int_equal(th_stop(&d), 0);
}

/* A request whose body is still arriving when a reload changes (and so
 * retires) its sandbox is routed again at dispatch, never handed to the
 * retired pool (found in review: the acceptor used the freed pool). */
static void test_body_across_reload(void **state)
{
    (void)state;
    install(th_fixture("version1"));
    char a[1024], b[1024];
    snprintf(a, sizeof(a),
             "sandbox extra { workers 1; }\n"
             "servlet /x { library \"%s\"; sandbox extra; param who a; }\n",
             lib);
    snprintf(b, sizeof(b),
             "listen 127.0.0.1:0;\nsandbox extra { workers 1; }\n"
             "servlet /x { library \"%s\"; sandbox extra; param who b; }\n",
             lib);
    assert_int_equal(th_start(&d, a, false), 0);
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n"
                                    "\r\nhello"),
                     0);
    usleep(200 * 1000);
    write_conf(b);
    reload();
    assert_true(th_log_wait(&d, "1 started, 1 retired", 5000));
    /* Until the retired pool is gone: its one worker closed and reaped. */
    assert_true(th_log_wait(&d, "replaced by a reload, is done", 5000));
    assert_int_equal(th_send_str(c, "world"), 0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "who=b"));
    th_response_free(&r);
    th_close(c);
    bool has = false;
    assert_int_equal(get(d.port, "/x", "who=b", &has), 200);
    assert_true(has);
    assert_int_equal(th_stop(&d), 0);
}

/* A SIGHUP that comes while sandletd stops changes nothing: no new
 * listener opens during the drain (found in review). */
static void test_reload_while_stopping(void **state)
{
    (void)state;
    unsigned port2 = free_port();
    char a[1024], b[1200];
    snprintf(a, sizeof(a), "servlet /p/* { library \"%s\"; }\n", th_fixture("probe"));
    assert_int_equal(th_start(&d, a, false), 0);
    snprintf(b, sizeof(b), "listen 127.0.0.1:0;\nlisten 127.0.0.1:%u;\n%s", port2, a);
    /* A request in flight for 1.5 s keeps the drain going. */
    pid_t slow = fork();
    assert_true(slow >= 0);
    if (slow == 0) {
        int st = get(d.port, "/p/sleep?ms=1500", NULL, NULL);
        _exit(st == 200 ? 0 : 1);
    }
    usleep(300 * 1000);
    write_conf(b);
    assert_int_equal(kill(d.pid, SIGTERM), 0);
    usleep(100 * 1000);
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    for (int i = 0; i < 10; i++) {
        th_conn *c = th_connect(port2, false);
        if (c) {
            th_close(c);
            fail_msg("port %u accepted a connection while sandletd stopped", port2);
        }
        usleep(100 * 1000);
    }
    int st;
    assert_int_equal(waitpid(slow, &st, 0), slow);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* the drain answered it */
    assert_int_equal(th_stop(&d), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_code_no_failed_request),
        cmocka_unit_test(test_broken_configuration_changes_nothing),
        cmocka_unit_test(test_library_that_no_longer_loads),
        cmocka_unit_test(test_recycling_waits_for_new_code),
        cmocka_unit_test(test_lone_old_worker_serves_on),
        cmocka_unit_test(test_backing_off_slot_tries_new_code),
        cmocka_unit_test(test_max_requests_1_is_kept),
        cmocka_unit_test(test_development_watches_libraries),
        cmocka_unit_test(test_configuration_changes_under_load),
        cmocka_unit_test(test_body_across_reload),
        cmocka_unit_test(test_reload_while_stopping),
    };
    /* One test alone, to check it against older code: SANDLET_TEST_ONLY=name. */
    if (getenv("SANDLET_TEST_ONLY"))
        cmocka_set_test_filter(getenv("SANDLET_TEST_ONLY"));
    return cmocka_run_group_tests(tests, setup, teardown);
}

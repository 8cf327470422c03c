/*
 * test_db.c - a sandbox's database through the real sandletd, against a
 * throwaway PostgreSQL (tests/db/pgtest.h): the connection string and the
 * password reach the workers only in their INIT frame, never a command
 * line, an environment or the log; a worker that crashes inside a
 * transaction leaves nothing behind; a database that goes away makes the
 * requests that need it 503 (logged once) while the rest of the sandbox
 * serves, and they succeed again once it is back; and a worker reaches
 * its database's TCP port but no other (Landlock).
 */
#define _GNU_SOURCE
#include "harness.h"
#include "../db/pgtest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

/* Markers no other text holds: one in the conninfo, one the password. */
#define CONNINFO_MARK "sl-dbtest-conninfo-9c41"
#define PASSWORD_MARK "sl-dbtest-password-5e27"

static pgtest pg;
static th_daemon d;
static char dir[64];
static char pwfile[128];
static char badpwfile[128];

/* Writes text to path, mode 0600; 0 or -1. */
static int write_file(const char *path, const char *text, int flags)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0600);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -1;
    close(fd);
    return rc;
}

/* The role 'pwuser' must give its password (scram), over TCP and the
 * socket; everyone else keeps trust. */
static int require_password(char *err, size_t errlen)
{
    if (pgtest_exec(&pg,
                    "CREATE ROLE pwuser LOGIN PASSWORD '" PASSWORD_MARK "';"
                    "GRANT ALL ON TABLE items TO pwuser",
                    err, errlen) != 0)
        return -1;
    char hba[256];
    snprintf(hba, sizeof(hba), "%s/pg_hba.conf", pg.data);
    char *old = th_slurp(hba, NULL);
    if (!old)
        return -1;
    char *text = NULL;
    int rc = asprintf(&text,
                      "local all pwuser scram-sha-256\n"
                      "host all pwuser 127.0.0.1/32 scram-sha-256\n%s",
                      old);
    free(old);
    if (rc < 0 || write_file(hba, text, O_TRUNC) != 0) {
        free(text);
        return -1;
    }
    free(text);
    return pgtest_exec(&pg, "SELECT pg_reload_conf()", err, errlen);
}

static int setup(void **state)
{
    (void)state;
    th_prepare();
    char err[512];
    if (pgtest_start_or_say(&pg) != 0)
        return -1;
    if (th_tempdir(dir, sizeof(dir), "db", 0700) != 0)
        return -1;
    snprintf(pwfile, sizeof(pwfile), "%s/pw", dir);
    int fd = open(pwfile, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, PASSWORD_MARK "\n", sizeof(PASSWORD_MARK)) != sizeof(PASSWORD_MARK))
        return -1;
    close(fd);
    snprintf(badpwfile, sizeof(badpwfile), "%s/badpw", dir);
    if (write_file(badpwfile, "not-the-password\n", O_EXCL) != 0)
        return -1;
    if (pgtest_exec(&pg, "CREATE TABLE items (name text)", err, sizeof(err)) != 0 ||
        require_password(err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    /* Over TCP: the port comes from the string, into Landlock's rules;
     * as a role that must give its password. */
    static char conf[3072];
    snprintf(conf, sizeof(conf),
             "sandbox db { workers 2; database \"host=127.0.0.1 port=%u dbname=postgres "
             "user=pwuser application_name=" CONNINFO_MARK "\";\n"
             "  database-password-file \"%s\"; }\n"
             "servlet /probe/* { library \"%s\"; sandbox db; }\n"
             "servlet /db/* { library \"%s\"; sandbox db; }\n"
             "servlet /slow/* { library \"%s\"; sandbox db; timeout 1000; }\n"
             "servlet /dbcrash { library \"%s\"; sandbox db; }\n"
             "sandbox unix { workers 1; database \"%s\"; }\n"
             "servlet /unix/* { library \"%s\"; sandbox unix; }\n"
             "sandbox badpw { workers 1; database \"%s user=pwuser\";\n"
             "  database-password-file \"%s\"; }\n"
             "servlet /badpw/* { library \"%s\"; sandbox badpw; }\n",
             pg.port, pwfile, th_fixture("probe"), th_fixture("dbprobe"), th_fixture("dbprobe"),
             th_fixture("crash"), pg.conninfo, th_fixture("dbprobe"), pg.conninfo_tcp, badpwfile,
             th_fixture("dbprobe"));
    return th_start(&d, conf, false) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    int rc = d.pid ? th_stop(&d) : 0;
    pgtest_destroy(&pg);
    unlink(pwfile);
    unlink(badpwfile);
    rmdir(dir);
    return rc == 0 ? 0 : -1;
}

static bool file_holds(const char *path, const char *needle)
{
    size_t len = 0;
    char *s = th_slurp(path, &len);
    if (!s)
        return false;
    bool found = memmem(s, len, needle, strlen(needle)) != NULL;
    free(s);
    return found;
}

/* Every process of the daemon (acceptor, supervisor, workers), by parent
 * links from d.pid; checks their cmdline and environ for both markers. */
static int scan_tree(pid_t root)
{
    pid_t todo[256];
    int n = 0, seen = 0;
    todo[n++] = root;
    while (n) {
        pid_t p = todo[--n];
        seen++;
        static const char *const files[] = {"cmdline", "environ"};
        for (size_t i = 0; i < 2; i++) {
            char path[64];
            snprintf(path, sizeof(path), "/proc/%d/%s", (int)p, files[i]);
            if (file_holds(path, CONNINFO_MARK) || file_holds(path, PASSWORD_MARK))
                fail_msg("%s holds the database's conninfo or password", path);
        }
        n += th_children_of(p, todo + n, (int)(sizeof(todo) / sizeof(todo[0])) - n);
    }
    return seen;
}

static void test_secrets_only_in_init(void **state)
{
    (void)state;
    th_response r;
    /* A sandbox with a database starts and serves. */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(th_request(d.port, "GET", "/probe/pid", NULL, NULL, 0, &r), 0);
        if (r.status != 200) {
            char *log = th_slurp(d.log, NULL);
            fail_msg("status %d; log:\n%s", r.status, log ? log : "(none)");
        }
        th_response_free(&r);
    }
    assert_int_equal(th_request(d.port, "GET", "/probe/environ", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_null(memmem(r.body, r.body_len, CONNINFO_MARK, strlen(CONNINFO_MARK)));
    assert_null(memmem(r.body, r.body_len, PASSWORD_MARK, strlen(PASSWORD_MARK)));
    th_response_free(&r);
    /* Acceptor, supervisor and two workers at least.  The daemon answers
     * once one worker of a sandbox is ready, so the others may still be
     * starting (a child between fork and exec still has the spawner's
     * name and is not counted): scan until they are there, each scan
     * checking every process it finds. */
    int seen = 0;
    for (int i = 0; i < 100 && (seen = scan_tree(d.pid)) < 4; i++)
        usleep(100 * 1000);
    assert_true(seen >= 4);
    assert_false(file_holds(d.log, CONNINFO_MARK));
    assert_false(file_holds(d.log, PASSWORD_MARK));
    assert_false(file_holds(d.conf, PASSWORD_MARK)); /* the file names it, never holds it */
}

static int get(const char *target, th_response *r)
{
    assert_int_equal(th_request(d.port, "GET", target, NULL, NULL, 0, r), 0);
    return r->status;
}

static void test_query(void **state)
{
    (void)state;
    th_response r;
    /* The password from the file is what logs the role in: the wrong one
     * is refused by the server; a warning at start, 503 on use. */
    assert_int_equal(get("/badpw/ping", &r), 503);
    th_response_free(&r);
    assert_true(th_log_wait(&d, "password authentication failed for user \"pwuser\"", 2000));
    assert_true(th_log_contains(&d, "the database cannot be reached yet"));
    if (get("/unix/ping", &r) != 200) /* a unix socket needs no port */
        fail_msg("%d %s", r.status, r.body);
    th_response_free(&r);
    for (int i = 0; i < 4; i++) { /* both workers */
        if (get("/db/ping", &r) != 200)
            fail_msg("%d %s", r.status, r.body);
        assert_string_equal(r.body, "up");
        th_response_free(&r);
    }
}

/* The worker dies inside a transaction: its connection goes with it, the
 * server rolls back, and the next request (on a new worker or the other)
 * sees nothing of it. */
static void test_rollback_after_crash(void **state)
{
    (void)state;
    th_response r;
    get("/db/crash", &r);
    assert_true(r.status >= 500);
    th_response_free(&r);
    for (int i = 0; i < 4; i++) {
        if (get("/db/count", &r) != 200)
            fail_msg("%d %s", r.status, r.body);
        assert_string_equal(r.body, "0");
        th_response_free(&r);
    }
    char err[512];
    /* and no session of the server is left inside a transaction */
    assert_int_equal(pgtest_exec(&pg,
                                 "DO $$BEGIN IF EXISTS (SELECT 1 FROM pg_stat_activity WHERE "
                                 "state LIKE 'idle in transaction%') THEN RAISE 'open'; END IF; "
                                 "END$$",
                                 err, sizeof(err)),
                     0);
}

/* Down: 503 with Retry-After for what needs it, the rest serves, one log
 * line per worker and outage; back: answers again. */
static void test_database_restart(void **state)
{
    (void)state;
    th_response r;
    char err[512];
    if (pgtest_stop(&pg, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    for (int i = 0; i < 6; i++) {
        if (get("/db/ping", &r) != 503)
            fail_msg("%d %s", r.status, r.body);
        char ra[16];
        assert_true(th_header(&r, "Retry-After", ra, sizeof(ra)));
        assert_string_equal(ra, "5");
        th_response_free(&r);
        assert_int_equal(get("/probe/pid", &r), 200);
        th_response_free(&r);
    }
    assert_true(th_log_wait(&d, "answering 503 until it is back", 2000));
    size_t len;
    char *log = th_slurp(d.log, &len);
    assert_non_null(log);
    /* Sandbox db's lines only (badpw said it at its own outage): at
     * most one per worker, never one per request. */
    int lines = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
        lines += strstr(line, "sandbox 'db'") && strstr(line, "answering 503 until it is back");
    free(log);
    if (lines < 1 || lines > 2)
        fail_msg("%d lines of sandbox 'db' say it answers 503 (expected one per worker)", lines);
    assert_int_equal(get("/unix/ping", &r), 503);
    th_response_free(&r);
    /* Both workers of 'db' die and are replaced while the database is
     * down: their first connect fails (a warning, not a refusal), and
     * their first login (SCRAM) happens confined, on reconnect. */
    for (int i = 0; i < 2; i++) {
        get("/dbcrash?how=segv", &r);
        th_response_free(&r);
    }
    assert_true(th_log_wait(&d, "sandbox 'db': the database cannot be reached yet", 3000));
    if (pgtest_restart(&pg, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    /* reconnected by confined workers, over TCP and over the socket */
    for (int i = 0; i < 4; i++) {
        if (get("/db/ping", &r) != 200)
            fail_msg("%d %s", r.status, r.body);
        th_response_free(&r);
    }
    /* Over the socket a confined worker makes no unix socket (issue 29):
     * the one that found the database down leaves (after a second of
     * life at least) and a fresh one connects before it confines itself,
     * so 503 lasts at most about a second longer there. */
    int status = 0;
    for (int i = 0; i < 40 && status != 200; i++) {
        status = get("/unix/ping", &r);
        th_response_free(&r);
        if (status != 200)
            usleep(100000);
    }
    assert_int_equal(status, 200);
    /* Unconfined (the sanitizer run), a worker may make a unix socket and
     * reconnects in place: none leaves. */
    if (!th_unconfined())
        assert_true(th_log_contains(&d, "sandbox 'unix': its database connection is lost; this "
                                        "worker leaves so that a fresh one reconnects"));
}

/* The statement timeout follows the servlet's (1000 ms here: 900 ms for
 * the statement), and goes back for a servlet without one. */
static void test_statement_timeout(void **state)
{
    (void)state;
    th_response r;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (get("/slow/sleep", &r) != 200)
        fail_msg("%d %s", r.status, r.body);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_string_equal(r.body, "57014"); /* query_canceled */
    th_response_free(&r);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(s < 1.0);
    /* the same workers serve /db with the sandbox's default timeout */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(get("/db/ping", &r), 200);
        th_response_free(&r);
    }
}

/* Landlock lets a worker connect to its database's port and no other. */
static void test_other_port_refused(void **state)
{
    (void)state;
    if (th_skip_unless_root("Landlock connect rules of a sandbox with a database") ||
        th_unconfined())
        return;
    th_response r;
    char target[64];
    snprintf(target, sizeof(target), "/db/connect?port=%u", pg.port);
    assert_int_equal(get(target, &r), 200);
    assert_string_equal(r.body, "ok");
    th_response_free(&r);
    /* sandletd's own port listens on loopback: only Landlock stops it */
    snprintf(target, sizeof(target), "/db/connect?port=%u", d.port);
    assert_int_equal(get(target, &r), 200);
    if (strcmp(r.body, "EACCES") != 0) {
        if (strcmp(r.body, "ok") == 0 && !th_log_contains(&d, "no Landlock network rules"))
            fail_msg("a worker connected to port %u, not its database's", d.port);
        printf("SKIP: this kernel has no Landlock network rules (Linux 6.7)\n");
    }
    th_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secrets_only_in_init), cmocka_unit_test(test_query),
        cmocka_unit_test(test_rollback_after_crash), cmocka_unit_test(test_database_restart),
        cmocka_unit_test(test_statement_timeout),    cmocka_unit_test(test_other_port_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

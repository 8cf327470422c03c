/*
 * test_command.c - "sandletd -s reload" and "sandletd -s wait-ready"
 * against a real daemon: a reload the daemon refuses (a change only a
 * restart applies) exits 1 with the daemon's reason, one it applies exits
 * 0, wait-ready answers once the sandboxes have workers, and with no
 * daemon both say so with 7.  Also "sandletd -t" beside the running daemon
 * of the same file: no warning that its own port is in use.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/identity.h"

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void test_reload_verdicts(void **state)
{
    (void)state;
    th_daemon d;
    /* Relative: beside the configuration, in the test's own folder. */
    assert_int_equal(th_start(&d,
                              "state-file run/s.state;\n"
                              "sandbox a { workers 1; }\n",
                              false),
                     0);
    char out[4096];
    assert_int_equal(th_sandletd("-s wait-ready", d.conf, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "is ready"));
    size_t len;
    char *good = th_slurp(d.conf, &len);
    assert_non_null(good);

    /* sandletd -t of the running daemon's own file: its port is its own. */
    int rc = th_sandletd("-t", d.conf, out, sizeof(out));
    assert_int_equal(rc, 0);
    assert_null(strstr(out, "in use"));

    /* A change only a restart applies: refused, and said so, with 1. */
    char changed[8192];
    snprintf(changed, sizeof(changed), "%sdocroot %s;\n", good, d.dir);
    put(d.conf, changed);
    rc = th_sandletd("-s reload", d.conf, out, sizeof(out));
    assert_int_equal(rc, 1);
    if (!strstr(out, "changes 'docroot', which only a restart applies"))
        fail_msg("the refused reload does not say why: %s", out);

    /* A new sandbox: applied, with 0. */
    snprintf(changed, sizeof(changed), "%ssandbox b { workers 1; }\n", good);
    put(d.conf, changed);
    rc = th_sandletd("-s reload", d.conf, out, sizeof(out));
    if (rc != 0)
        fail_msg("a good reload exited %d: %s", rc, out);
    assert_non_null(strstr(out, "applied"));
    assert_non_null(strstr(out, "1 started"));
    assert_true(th_log_contains(&d, "sandbox 'b'"));

    char state_path[256];
    snprintf(state_path, sizeof(state_path), "%s/run/s.state", d.dir);
    struct stat st;
    assert_int_equal(stat(state_path, &st), 0);
    assert_int_equal(th_stop(&d), 0);
    /* Gone with the daemon; then nobody to reload. */
    assert_int_equal(stat(state_path, &st), -1);
    rc = th_sandletd("-s reload", d.conf, out, sizeof(out));
    assert_int_equal(rc, 7);
    assert_non_null(strstr(out, "start it first"));
    rc = th_sandletd("-s wait-ready -W 100", d.conf, out, sizeof(out));
    assert_int_equal(rc, 1);
    rc = th_sandletd("-s restart", d.conf, out, sizeof(out));
    assert_int_equal(rc, 2);
    free(good);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d.dir);
    assert_int_equal(system(cmd), 0);
}

/* The status page names who each sandbox's workers run as: ps shows a
 * dynamic uid as a bare number. */
static void test_status_names_uid(void **state)
{
    (void)state;
    th_daemon d;
    assert_int_equal(th_start(&d,
                              "state-file run/s.state;\nstatus-page /st;\n"
                              "dynamic-uids 1879048192-1879113727;\n"
                              "sandbox shop { workers 1; }\n",
                              false),
                     0);
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/st", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, " user\n"));
    char want[64];
    if (geteuid() == 0)
        snprintf(want, sizeof(want), " %u\n", sandlet_identity_dynamic_uid("shop"));
    else
        snprintf(want, sizeof(want), " -\n"); /* everything runs as the starter */
    const char *line = strstr(r.body, "\nshop ");
    assert_non_null(line);
    const char *end = strchr(line + 1, '\n');
    assert_non_null(end);
    if (strncmp(end - strlen(want) + 1, want, strlen(want)) != 0)
        fail_msg("the status line of shop does not end in '%s': %s", want, r.body);
    th_response_free(&r);
    if (geteuid() == 0) {
        char needle[96];
        snprintf(needle, sizeof(needle), "sandbox 'shop' runs as uid %u",
                 sandlet_identity_dynamic_uid("shop"));
        /* The supervisor says so as it starts the worker: it may still be
         * on its way to the log when the status page answers. */
        assert_true(th_log_wait(&d, needle, 5000));
    }
    assert_int_equal(th_stop(&d), 0);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d.dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    th_prepare();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reload_verdicts),
        cmocka_unit_test(test_status_names_uid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

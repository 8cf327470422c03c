/*
 * test_check.c - "sandletd -t" finds what a start would refuse, not only
 * syntax: a missing user, docroot or log folder, a servlet library that is
 * missing, not a shared object, defines no servlet or has no handler; each
 * is a line naming the file, the line and the fix, and the exit status
 * is 1.  A configuration that starts passes.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];

static int setup(void **state)
{
    (void)state;
    th_prepare();
    return th_tempdir(dir, sizeof(dir), "check", 0755);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Runs sandletd -t on text; its exit status, its output in out. */
static int check(const char *text, char *out, size_t cap)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/t.conf", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return th_check_conf(path, out, cap);
}

static void expect(const char *out, const char *needle)
{
    if (!strstr(out, needle))
        fail_msg("expected '%s' in:\n%s", needle, out);
}

static void test_good_configuration_passes(void **state)
{
    (void)state;
    char text[512], out[4096];
    snprintf(text, sizeof(text),
             "docroot \"%s\";\nerror-log \"%s/error.log\";\nsandbox a { }\n"
             "servlet /p { library \"%s\"; sandbox a; }\n",
             dir, dir, th_fixture("probe"));
    assert_int_equal(check(text, out, sizeof(out)), 0);
    expect(out, "OK");
}

static void test_what_a_start_refuses(void **state)
{
    (void)state;
    char text[2048], out[8192];
    snprintf(text, sizeof(text),
             "docroot \"%s/nowhere\";\n"
             "access-log \"%s/nologs/access.log\";\n"
             "sandbox a { }\n"
             "servlet /missing { library \"%s/missing.so\"; sandbox a; }\n"
             "servlet /text { library \"%s/t.conf\"; sandbox a; }\n"
             "servlet /nohandler { library \"%s\"; sandbox a; }\n"
             "servlet /notservlet { library \"%s\"; sandbox a; }\n",
             dir, dir, dir, dir, th_fixture("nohandler"), th_build_path(".libs/libsandlet.so"));
    assert_int_equal(check(text, out, sizeof(out)), 1);
    expect(out, "t.conf:1: docroot '");
    expect(out, "/nowhere' does not exist (create it: mkdir -p ");
    expect(out, "t.conf:2: the folder of access-log '");
    expect(out, "t.conf:4: servlet /missing: library '");
    expect(out, "missing.so' does not exist (build it, or fix the path)");
    expect(out, "t.conf:5: servlet /text: cannot load ");
    expect(out, "t.conf:6: servlet /nohandler: ");
    expect(out, "has no handler");
    expect(out, "t.conf:7: servlet /notservlet: ");
    expect(out, "defines no servlet (declare one with SL_SERVLET)");
    expect(out, "would not start");
    assert_null(strstr(out, " OK"));
}

/* Two listeners on one port are refused; a port taken now is a warning
 * (the daemon checked may be the one holding it), not a failure. */
static void test_listeners(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(check("listen 127.0.0.1:18779;\nlisten 0.0.0.0:18779;\n", out, sizeof(out)),
                     1);
    expect(out, "t.conf:2:8: listen 0.0.0.0:18779 overlaps the listen on line 1");
    th_daemon busy;
    assert_int_equal(th_start(&busy, "", false), 0);
    char text[128];
    snprintf(text, sizeof(text), "listen 127.0.0.1:%u;\n", busy.port);
    int rc = check(text, out, sizeof(out));
    th_stop(&busy);
    assert_int_equal(rc, 0);
    expect(out, "warning: ");
    expect(out, "Address already in use (a running sandletd or another program holds it");
}

/* A start keeps large uploads in worker memory when it cannot use its
 * spool-dir, and says so: -t says the same, as a warning with the fix. */
static void test_spool_dir(void **state)
{
    (void)state;
    char text[512], out[4096], path[128];
    snprintf(path, sizeof(path), "%s/open-spool", dir);
    assert_int_equal(mkdir(path, 0777), 0);
    assert_int_equal(chmod(path, 01777), 0);
    snprintf(text, sizeof(text), "listen 127.0.0.1:0;\nspool-dir \"%s\";\n", path);
    assert_int_equal(check(text, out, sizeof(out)), 0);
    expect(out, "warning: ");
    expect(out, "t.conf:2: spool-dir '");
    expect(out, "open-spool' is writable by others (mode 1777): chmod 0711 '");
    expect(out, "large uploaded files stay in worker memory");
    snprintf(text, sizeof(text), "listen 127.0.0.1:0;\nspool-dir \"%s/t.conf\";\n", dir);
    assert_int_equal(check(text, out, sizeof(out)), 0);
    expect(out, "t.conf' is not a folder: name a folder");
    /* One that a start makes: nothing to say. */
    snprintf(text, sizeof(text), "listen 127.0.0.1:0;\nspool-dir \"%s/new/spool\";\n", dir);
    assert_int_equal(check(text, out, sizeof(out)), 0);
    assert_null(strstr(out, "warning"));
    /* One it cannot make, for a user who may not write there. */
    if (geteuid() != 0) {
        snprintf(text, sizeof(text), "listen 127.0.0.1:0;\nspool-dir \"/proc/sandlet/spool\";\n");
        assert_int_equal(check(text, out, sizeof(out)), 0);
        expect(out, "does not exist and cannot be made in '/proc'");
    }
}

static void test_missing_user(void **state)
{
    (void)state;
    if (th_skip_unless_root(": users are checked by a start as root"))
        return;
    char text[512], out[4096];
    /* Reported at the line that names the user, with the command. */
    snprintf(text, sizeof(text),
             "sandbox a {\n  workers 1;\n  user sandlet-no-such-user;\n}\n"
             "servlet /p { library \"%s\"; sandbox a; }\n",
             th_fixture("probe"));
    assert_int_equal(check(text, out, sizeof(out)), 1);
    expect(out, "t.conf:3: sandbox 'a' runs as user 'sandlet-no-such-user', which does not exist; "
                "create it (adduser --system sandlet-no-such-user)");
    snprintf(text, sizeof(text), "listen 127.0.0.1:0;\nuser sandlet-no-such-acceptor;\n");
    assert_int_equal(check(text, out, sizeof(out)), 1);
    expect(out, "t.conf:2: user 'sandlet-no-such-acceptor' does not exist");
}

/* A writable folder the sandbox's uid cannot write, and a readable file it
 * cannot read: Landlock would allow them, the uid does not, and the
 * servlet would only ever see EACCES.  -t says so, naming the uid and the
 * fix; a folder the uid may use passes. */
static void test_paths_as_sandbox_uid(void **state)
{
    (void)state;
    if (th_skip_unless_root(": paths are checked as the sandbox's uid by a check as root"))
        return;
    char closed[128], secret[128], open_dir[128], text[1024], out[4096];
    snprintf(closed, sizeof(closed), "%s/closed", dir);
    snprintf(secret, sizeof(secret), "%s/secret.txt", dir);
    snprintf(open_dir, sizeof(open_dir), "%s/open", dir);
    assert_int_equal(mkdir(closed, 0700), 0);
    assert_int_equal(mkdir(open_dir, 0777), 0);
    assert_int_equal(chmod(open_dir, 01777), 0);
    FILE *f = fopen(secret, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(secret, 0600), 0);
    snprintf(text, sizeof(text),
             "sandbox a {\n  writable \"%s\";\n  readable \"%s\";\n  writable \"%s\";\n}\n"
             "servlet /p { library \"%s\"; sandbox a; }\n",
             closed, secret, open_dir, th_fixture("probe"));
    assert_int_equal(check(text, out, sizeof(out)), 1);
    expect(out, "t.conf:2: sandbox 'a': its workers run as uid ");
    expect(out, "which cannot write in '");
    expect(out, "/closed', so its servlets would get EACCES there (chown ");
    expect(out, "t.conf:3: sandbox 'a': its workers run as uid ");
    expect(out, "which cannot read '");
    assert_null(strstr(out, "/open'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_configuration_passes),
        cmocka_unit_test(test_what_a_start_refuses),
        cmocka_unit_test(test_listeners),
        cmocka_unit_test(test_spool_dir),
        cmocka_unit_test(test_missing_user),
        cmocka_unit_test(test_paths_as_sandbox_uid),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * test_conf_include.c - "include GLOB;" (src/common/conf.c): drop-in files
 * read in sorted order relative to the including file, errors that name
 * the included file and its line, cycles and depth refused without
 * recursion; and the state file (src/common/state.c) that "sandletd -s"
 * reads.  Real files in a temporary folder; no daemon.
 */
#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/state.h"

static char dir[64];

static void put(const char *rel, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_conf_include-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char sub[128];
    snprintf(sub, sizeof(sub), "%s/conf.d", dir);
    return mkdir(sub, 0755);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int load(const char *rel, sandlet_conf **c, char *err, size_t errlen)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    return sandlet_conf_load(path, c, err, errlen);
}

/* Sandboxes from conf.d/ in the order of their names, whatever order the
 * folder lists them in, between the lines around the include. */
static void test_include_sorted(void **state)
{
    (void)state;
    put("main.conf", "listen 127.0.0.1:0;\n"
                     "sandbox first { }\n"
                     "    include conf.d/*.conf;  # drop-ins\n"
                     "sandbox last { }\n");
    put("conf.d/20-b.conf", "sandbox b {\n    workers 3;\n}\n");
    put("conf.d/10-a.conf", "sandbox a { workers 1; }");
    put("conf.d/ignored.txt", "this is not configuration\n");
    char err[512] = "";
    sandlet_conf *c = NULL;
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), 0);
    assert_int_equal(c->nsandboxes, 4);
    assert_string_equal(c->sandboxes[0].name, "first");
    assert_string_equal(c->sandboxes[1].name, "a");
    assert_string_equal(c->sandboxes[2].name, "b");
    assert_string_equal(c->sandboxes[3].name, "last");
    assert_int_equal(c->sandboxes[2].workers, 3);
    /* Every line maps back to its own file and line. */
    int local;
    const char *f = sandlet_conf_where(c, c->sandboxes[2].line, &local);
    assert_non_null(strstr(f, "conf.d/20-b.conf"));
    assert_int_equal(local, 1);
    f = sandlet_conf_where(c, c->sandboxes[3].line, &local);
    assert_non_null(strstr(f, "main.conf"));
    assert_int_equal(local, 4);
    f = sandlet_conf_where(c, c->sandboxes[0].line, &local);
    assert_int_equal(local, 2);
    sandlet_conf_free(c);
}

/* An error in an included file names that file and its own line. */
static void test_include_error_names_file(void **state)
{
    (void)state;
    put("main.conf", "listen 127.0.0.1:0;\n\ninclude conf.d/*.conf;\n");
    put("conf.d/10-a.conf", "sandbox a { }\n");
    put("conf.d/20-b.conf", "# comment\n\nsandbox b {\n    workerz 2;\n}\n");
    char err[512] = "";
    sandlet_conf *c = NULL;
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), -EINVAL);
    assert_null(c);
    assert_non_null(strstr(err, "conf.d/20-b.conf:4:5: unknown directive 'workerz'"));
    /* Found after the whole text is read: still the right file. */
    put("conf.d/20-b.conf", "\n\nservlet /x {\n    library x.so;\n    sandbox nope;\n}\n");
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "conf.d/20-b.conf:5:"));
    assert_non_null(strstr(err, "undefined sandbox 'nope'"));
}

static void test_include_refusals(void **state)
{
    (void)state;
    char err[512] = "";
    sandlet_conf *c = NULL;
    put("conf.d/10-a.conf", "sandbox a { }\n");
    put("conf.d/20-b.conf", "sandbox b { }\n");
    /* A cycle, through another file. */
    put("main.conf", "include conf.d/*.conf;\n");
    put("conf.d/20-b.conf", "include ../main.conf;\n");
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), -ELOOP);
    assert_non_null(strstr(err, "conf.d/20-b.conf:1:1: include of"));
    assert_non_null(strstr(err, "makes a cycle"));
    /* Itself. */
    put("conf.d/20-b.conf", "include 20-b.conf;\n");
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), -ELOOP);
    /* Too deep, without a cycle: a chain of distinct files. */
    for (int i = 0; i < 12; i++) {
        char name[32], text[64];
        snprintf(name, sizeof(name), "conf.d/d%d.inc", i);
        snprintf(text, sizeof(text), "include d%d.inc;\n", i + 1);
        put(name, text);
    }
    put("conf.d/d12.inc", "\n");
    put("conf.d/20-b.conf", "include d0.inc;\n");
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), -ELOOP);
    assert_non_null(strstr(err, "nested"));
    /* Inside a block. */
    put("conf.d/20-b.conf", "sandbox b {\n  include x.conf;\n}\n");
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "conf.d/20-b.conf:2:3: 'include' inside a block"));
    /* A block that does not end in its file. */
    put("conf.d/20-b.conf", "sandbox b {\n  workers 1;\n");
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "conf.d/20-b.conf:1:1: a block opened here is still open"));
    /* A named file that is missing; a pattern that matches nothing is
     * fine (an empty conf.d/). */
    put("conf.d/20-b.conf", "include missing.conf;\n");
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "missing.conf: no such file"));
    put("conf.d/20-b.conf", "include none-*.conf;\n");
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), 0);
    assert_int_equal(c->nsandboxes, 1);
    sandlet_conf_free(c);
    /* No ';'. */
    put("conf.d/20-b.conf", "include x.conf\n");
    assert_int_equal(load("main.conf", &c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "expected ';' after 'include x.conf'"));
}

/* A changed included file changes the digest a reload compares. */
static void test_include_digest(void **state)
{
    (void)state;
    char err[512] = "";
    sandlet_conf *a = NULL, *b = NULL;
    put("main.conf", "include conf.d/*.conf;\n");
    put("conf.d/10-a.conf", "sandbox a { }\n");
    assert_int_equal(load("main.conf", &a, err, sizeof(err)), 0);
    put("conf.d/10-a.conf", "sandbox a { workers 3; }\n");
    assert_int_equal(load("main.conf", &b, err, sizeof(err)), 0);
    assert_memory_not_equal(a->digest, b->digest, sizeof(a->digest));
    sandlet_conf_free(a);
    sandlet_conf_free(b);
}

static void test_state_file(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/run/x.state", dir);
    sandlet_state st = {.pid = 1234, .reloads = 7};
    snprintf(st.phase, sizeof(st.phase), "ready");
    snprintf(st.verdict, sizeof(st.verdict), "refused");
    snprintf(st.message, sizeof(st.message), "line one\nline two");
    assert_int_equal(sandlet_state_write(path, &st), 0); /* makes run/ */
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644);
    sandlet_state got;
    assert_int_equal(sandlet_state_read(path, &got), 0);
    assert_int_equal(got.pid, 1234);
    assert_int_equal(got.reloads, 7);
    assert_string_equal(got.phase, "ready");
    assert_string_equal(got.verdict, "refused");
    assert_string_equal(got.message, "line one line two"); /* one line */
    /* Not a state file: refused, never a pid to signal. */
    put("run/x.state", "pid -1\nphase ready\n");
    assert_int_equal(sandlet_state_read(path, &got), -EPROTO);
    put("run/x.state", "garbage\n");
    assert_int_equal(sandlet_state_read(path, &got), -EPROTO);
    /* The default path is named after the configuration file. */
    sandlet_conf c = {.file = "/etc/sandlet/second.conf"};
    assert_int_equal(sandlet_state_path(&c, path, sizeof(path)), 0);
    assert_string_equal(path, SANDLET_STATE_DIR "/second.state");
}

/* sandletd -T: what it writes reads back to the same configuration, and
 * writes the same text again.  The file uses what the dump must get
 * right: includes, IPv6, syslog, quoted values, prefix routes, params,
 * the implicit "default" and "pages" sandboxes, "off" and "unlimited",
 * host blocks with their names, docroot and servlets. */
static char *dump(const sandlet_conf *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(sandlet_conf_dump(c, f), 0);
    assert_int_equal(fclose(f), 0);
    return text;
}

static void test_dump_round_trip(void **state)
{
    (void)state;
    put("main.conf", "listen [::1]:8089;\nlisten 127.0.0.1:0;\n"
                     "docroot www;\nerror-log syslog;\nstatus-page /st;\n"
                     "max-body-size 2m;\npage-compiler off;\n"
                     "include conf.d/*.conf;\n"
                     "pages /p/ { }\n");
    put("conf.d/10-a.conf", "sandbox a {\n  workers 3; max-workers 5; memory unlimited;\n"
                            "  timeout off; max-requests 100; syscalls files; syscalls database;\n"
                            "  writable \"/tmp/with space\"; readable /usr/share;\n"
                            "  database \"host=db.example port=6543 dbname=x\";\n"
                            "  sessions none; syscall-violations log;\n}\n");
    put("conf.d/20-b.conf", "servlet /app/* {\n  library lib/app.so;\n  sandbox a;\n"
                            "  param greeting \"Hello, \\\"you\\\"\";\n  timeout 5;\n}\n"
                            "servlet /x { library x.so; }\n"
                            "host shop.test {\n  name *.shop.test;\n  docroot www;\n"
                            "  servlet /cart { library x.so; sandbox a; }\n}\n");
    char err[512] = "";
    sandlet_conf *a = NULL, *b = NULL;
    assert_int_equal(load("main.conf", &a, err, sizeof(err)), 0);
    char *text = dump(a);
    assert_non_null(strstr(text, "conf.d/20-b.conf")); /* the files read */
    assert_non_null(strstr(text, "listen [::1]:8089;"));
    assert_non_null(strstr(text, "error-log syslog;"));
    assert_non_null(strstr(text, "header-timeout 10000;")); /* a default */
    assert_non_null(strstr(text, "servlet /app/* {"));
    assert_non_null(strstr(text, "sandbox default {")); /* implicit */
    assert_non_null(strstr(text, "state-file " SANDLET_STATE_DIR "/main.state;"));
    put("dumped.conf", text);
    if (load("dumped.conf", &b, err, sizeof(err)) != 0)
        fail_msg("the dump does not read back: %s\n%s", err, text);
    char *again = dump(b);
    /* The same text, but for the header that names the file. */
    const char *body1 = strstr(text, "\nlisten"), *body2 = strstr(again, "\nlisten");
    assert_non_null(body1);
    assert_non_null(body2);
    assert_string_equal(body1, body2);
    /* And the same configuration, as a reload would judge it. */
    assert_null(sandlet_conf_restart_needed(a, b));
    assert_int_equal(a->nsandboxes, b->nsandboxes);
    for (size_t i = 0; i < a->nsandboxes; i++)
        assert_true(sandlet_conf_sandbox_same(a, i, b, i));
    assert_int_equal(a->nservlets, b->nservlets);
    assert_string_equal(a->servlets[0].params[0].value, b->servlets[0].params[0].value);
    assert_int_equal(a->servlets[0].prefix, b->servlets[0].prefix);
    assert_int_equal(a->servlets[1].max_body_size, 2 * 1024 * 1024);
    assert_int_equal(b->servlets[1].max_body_size, 2 * 1024 * 1024);
    /* Host blocks keep their names, docroot and servlets. */
    assert_int_equal(b->nhosts, 1);
    assert_int_equal(b->hosts[0].nnames, 2);
    assert_string_equal(b->hosts[0].names[1], "*.shop.test");
    assert_string_equal(a->hosts[0].docroot, b->hosts[0].docroot);
    assert_int_equal(b->servlets[2].host, 0);
    assert_int_equal(b->servlets[1].host, SANDLET_HOST_DEFAULT);
    assert_int_equal(b->unknown_hosts, SANDLET_UNKNOWN_HOSTS_SERVE);
    free(text);
    free(again);
    sandlet_conf_free(a);
    sandlet_conf_free(b);
}

/* dynamic-uids: where sandboxes without a user get their uids. */
static void test_dynamic_uids(void **state)
{
    (void)state;
    char err[512] = "";
    sandlet_conf *a = NULL, *b = NULL;
    put("main.conf", "dynamic-uids 70000-70999;\n");
    assert_int_equal(load("main.conf", &a, err, sizeof(err)), 0);
    assert_int_equal(a->dynamic_uid_first, 70000);
    assert_int_equal(a->dynamic_uid_last, 70999);
    char *text = dump(a);
    assert_non_null(strstr(text, "dynamic-uids 70000-70999;"));
    free(text);
    put("main.conf", "listen 127.0.0.1:0;\n");
    assert_int_equal(load("main.conf", &b, err, sizeof(err)), 0);
    text = dump(b); /* the default, written out */
    char want[64];
    snprintf(want, sizeof(want), "dynamic-uids %u-%u;", SANDLET_DEFAULT_DYNAMIC_UID_FIRST,
             SANDLET_DEFAULT_DYNAMIC_UID_LAST);
    assert_non_null(strstr(text, want));
    free(text);
    /* Running workers keep their uids: only a restart moves the range. */
    assert_string_equal(sandlet_conf_restart_needed(b, a), "dynamic-uids");
    sandlet_conf_free(a);
    sandlet_conf_free(b);
    const char *bad[] = {"dynamic-uids 70000;\n", "dynamic-uids 70999-70000;\n",
                         "dynamic-uids 0-100;\n", "dynamic-uids 70000-4294967295;\n",
                         "dynamic-uids -5-10;\n", "dynamic-uids 70000-;\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put("main.conf", bad[i]);
        assert_int_equal(load("main.conf", &a, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "main.conf:1:14: invalid dynamic-uids"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_include_sorted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_include_error_names_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_include_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_include_digest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_uids, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_conf.c - unit tests of the sandlet.conf parser (src/loop/conf.c):
 * a full file parsed field by field, defaults, a table of broken files
 * whose messages must point at the exact line and column, routing, and
 * loading real files.  Nothing here needs the network or a daemon.
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
#include "sandbox/control.h"
#include <sys/mman.h>

static sandlet_conf *parse_ok(const char *text, const char *basedir)
{
    char err[512] = "";
    sandlet_conf *conf = NULL;
    int rc = sandlet_conf_parse(text, strlen(text), "test.conf", basedir, &conf, err, sizeof(err));
    if (rc != 0)
        fail_msg("parse failed (%d): %s", rc, err);
    assert_non_null(conf);
    return conf;
}

/* Parses text that must fail; returns the message in err. */
static int parse_bad(const char *text, size_t len, char *err, size_t errlen)
{
    sandlet_conf *conf = (sandlet_conf *)&conf; /* must be reset to NULL */
    int rc = sandlet_conf_parse(text, len, "test.conf", "/etc/sandlet", &conf, err, errlen);
    assert_null(conf);
    return rc;
}

static size_t sandbox_index(const sandlet_conf *conf, const char *name)
{
    for (size_t i = 0; i < conf->nsandboxes; i++)
        if (strcmp(conf->sandboxes[i].name, name) == 0)
            return i;
    fail_msg("no sandbox '%s'", name);
    return SIZE_MAX;
}

/* ---- good files ----------------------------------------------------------- */

static const char full_conf[] = "# sandlet test configuration\n"
                                "listen 127.0.0.1:8080;\n"
                                "listen [::1]:8443;   # IPv6 in brackets\n"
                                "listen \"0.0.0.0:0\";\n"
                                "user sandlet;\n"
                                "docroot \"/var/www/my site\";\n"
                                "\n"
                                "sandbox shop {\n"
                                "    workers 4;\n"
                                "    queue 0;       # no waiting room\n"
                                "}\n"
                                "sandbox \"big\" { workers 256; queue 65535; }\n"
                                "sandbox lazy{}\n"
                                "servlet /hello {\n"
                                "    library hello.so;\n"
                                "    sandbox shop;\n"
                                "    param greeting \"Hello, \\\"world\\\"\";\n"
                                "    param path \"C:\\\\temp\\\\\";\n"
                                "    param empty \"\";\n"
                                "    param hash \"#not a comment;{}\";\n"
                                "}\n"
                                "servlet /app/* {\n"
                                "\tlibrary /usr/lib/sandlet/app.so;\r\n"
                                "\tsandbox big;\n"
                                "}\n"
                                "servlet /plain{library sub/plain.so;}\n";

static void test_full_example(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok(full_conf, "/etc/sandlet");

    assert_string_equal(c->file, "test.conf");
    assert_string_equal(c->user, "sandlet");
    assert_string_equal(c->docroot, "/var/www/my site");

    assert_int_equal(c->nlistens, 3);
    assert_string_equal(c->listens[0].host, "127.0.0.1");
    assert_int_equal(c->listens[0].port, 8080);
    assert_int_equal(c->listens[0].line, 2);
    assert_string_equal(c->listens[1].host, "::1");
    assert_int_equal(c->listens[1].port, 8443);
    assert_int_equal(c->listens[1].line, 3);
    assert_string_equal(c->listens[2].host, "0.0.0.0");
    assert_int_equal(c->listens[2].port, 0);

    /* Declared sandboxes in order, then "default", created for /plain. */
    assert_int_equal(c->nsandboxes, 4);
    assert_string_equal(c->sandboxes[0].name, "shop");
    assert_int_equal(c->sandboxes[0].workers, 4);
    assert_int_equal(c->sandboxes[0].queue, 0);
    assert_int_equal(c->sandboxes[0].line, 8);
    assert_string_equal(c->sandboxes[1].name, "big");
    assert_int_equal(c->sandboxes[1].workers, SANDLET_MAX_WORKERS);
    assert_int_equal(c->sandboxes[1].queue, 65535);
    assert_string_equal(c->sandboxes[2].name, "lazy");
    assert_int_equal(c->sandboxes[2].workers, SANDLET_DEFAULT_WORKERS);
    assert_int_equal(c->sandboxes[2].queue, SANDLET_DEFAULT_QUEUE);
    assert_string_equal(c->sandboxes[3].name, SANDLET_DEFAULT_SANDBOX);
    assert_int_equal(c->sandboxes[3].workers, SANDLET_DEFAULT_WORKERS);
    assert_int_equal(c->sandboxes[3].queue, SANDLET_DEFAULT_QUEUE);
    /* No max-workers: a fixed pool, whatever workers is (the implicit
     * default sandbox included). */
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(c->sandboxes[i].max_workers, c->sandboxes[i].workers);
    assert_int_equal(c->sandboxes[0].worker_idle_timeout, SANDLET_DEFAULT_WORKER_IDLE_TIMEOUT);

    assert_int_equal(c->nservlets, 3);
    const sandlet_servlet_conf *s = &c->servlets[0];
    assert_string_equal(s->path, "/hello");
    assert_false(s->prefix);
    assert_string_equal(s->library, "/etc/sandlet/hello.so");
    assert_int_equal(s->sandbox, 0);
    assert_int_equal(s->line, 14);
    assert_int_equal(s->nparams, 4);
    assert_string_equal(s->params[0].name, "greeting");
    assert_string_equal(s->params[0].value, "Hello, \"world\"");
    assert_string_equal(s->params[1].name, "path");
    assert_string_equal(s->params[1].value, "C:\\temp\\");
    assert_string_equal(s->params[2].name, "empty");
    assert_string_equal(s->params[2].value, "");
    assert_string_equal(s->params[3].value, "#not a comment;{}");

    s = &c->servlets[1];
    assert_string_equal(s->path, "/app/");
    assert_true(s->prefix);
    assert_string_equal(s->library, "/usr/lib/sandlet/app.so");
    assert_int_equal(s->sandbox, 1);
    assert_int_equal(s->nparams, 0);
    assert_null(s->params);

    s = &c->servlets[2];
    assert_string_equal(s->path, "/plain");
    assert_false(s->prefix);
    assert_string_equal(s->library, "/etc/sandlet/sub/plain.so");
    assert_int_equal(s->sandbox, 3);
    assert_int_equal(s->line, 26);

    sandlet_conf_free(c);
}

static void test_empty_gets_defaults(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("  # nothing but a comment\n\n", NULL);
    assert_int_equal(c->nlistens, 1);
    assert_string_equal(c->listens[0].host, "127.0.0.1");
    assert_int_equal(c->listens[0].port, 8080);
    assert_null(c->user);
    assert_null(c->docroot);
    assert_int_equal(c->nsandboxes, 0);
    assert_int_equal(c->nservlets, 0);
    sandlet_conf_free(c);

    /* No text at all. */
    sandlet_conf *conf = NULL;
    assert_int_equal(sandlet_conf_parse(NULL, 0, "test.conf", NULL, &conf, NULL, 0), 0);
    assert_int_equal(conf->nlistens, 1);
    sandlet_conf_free(conf);
}

static void test_queue_timeout(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("sandbox a { queue-timeout 250; }\nsandbox b { }\n", NULL);
    assert_int_equal(c->nsandboxes, 2);
    assert_int_equal(c->sandboxes[0].queue_timeout, 250);
    assert_int_equal(c->sandboxes[1].queue_timeout, SANDLET_DEFAULT_QUEUE_TIMEOUT);
    sandlet_conf_free(c);
}

static void test_send_timeout(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("send-timeout 2500;\n", NULL);
    assert_int_equal(c->send_timeout, 2500);
    assert_int_equal(c->keepalive_timeout, SANDLET_DEFAULT_KEEPALIVE_TIMEOUT);
    sandlet_conf_free(c);
    c = parse_ok("", NULL);
    assert_int_equal(c->send_timeout, SANDLET_DEFAULT_SEND_TIMEOUT);
    sandlet_conf_free(c);
    char err[512];
    const char *t = "send-timeout 0;\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    t = "send-timeout 100; send-timeout 200;\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    t = "sandbox a { send-timeout 100; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
}

/* "pipeline": how many requests one worker's channel may queue; the
 * default where unset, and a change of it is no longer the same sandbox
 * for a reload (the acceptor's ring is sized by it), while the plan the
 * supervisor keeps compares equal to the file it came from. */
static void test_pipeline(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("sandbox a { pipeline 64; }\nsandbox b { }\n", NULL);
    assert_int_equal(c->nsandboxes, 2);
    assert_int_equal(c->sandboxes[0].pipeline, 64);
    assert_int_equal(c->sandboxes[1].pipeline, SANDLET_DEFAULT_PIPELINE);
    sandlet_conf *d = parse_ok("sandbox a { pipeline 1; }\nsandbox b { }\n", NULL);
    assert_false(sandlet_conf_sandbox_same(c, 0, d, 0));
    assert_true(sandlet_conf_sandbox_same(c, 1, d, 1));
    sandlet_conf *plan = sandlet_conf_plan(c);
    assert_non_null(plan);
    assert_true(sandlet_conf_sandbox_same(plan, 0, c, 0));
    sandlet_conf_free(plan);
    sandlet_conf_free(d);
    sandlet_conf_free(c);
    char err[256];
    const char *t = "sandbox a { pipeline 257; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
}

/* Without a timeout line a sandbox gets the default; "off" and 0 lift
 * it; a servlet's own timeout still overrides. */
static void test_default_timeout(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("sandbox a { }\nsandbox b { timeout 500; }\n"
                               "sandbox c { timeout off; }\nsandbox d { timeout 0; }\n",
                               NULL);
    assert_int_equal(SANDLET_DEFAULT_TIMEOUT, 30000);
    assert_int_equal(c->sandboxes[0].timeout, SANDLET_DEFAULT_TIMEOUT);
    assert_int_equal(c->sandboxes[1].timeout, 500);
    assert_int_equal(c->sandboxes[2].timeout, 0);
    assert_int_equal(c->sandboxes[3].timeout, 0);
    sandlet_conf_free(c);
    /* The implicit default sandbox gets it too. */
    c = parse_ok("servlet /a { library a.so; }\n", "/x");
    assert_int_equal(c->nsandboxes, 1);
    assert_int_equal(c->sandboxes[0].timeout, SANDLET_DEFAULT_TIMEOUT);
    sandlet_conf_free(c);
    char err[256];
    const char *t = "sandbox a { timeout never; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
}

static void test_size_limits(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("servlet /a { library a.so; }\n", "/x");
    assert_int_equal(c->max_header_size, SANDLET_DEFAULT_MAX_HEADER_SIZE);
    assert_int_equal(c->max_target_length, SANDLET_DEFAULT_MAX_TARGET_LENGTH);
    assert_int_equal(c->max_body_size, SANDLET_DEFAULT_MAX_BODY_SIZE);
    assert_int_equal(c->servlets[0].max_body_size, SANDLET_DEFAULT_MAX_BODY_SIZE);
    sandlet_conf_free(c);

    /* A servlet without its own limit takes the global one, even when
     * that is set after the servlet's block. */
    c = parse_ok("max-header-size 16k;\nmax-target-length 1024;\n"
                 "servlet /a { library a.so; }\n"
                 "servlet /b { library b.so; max-body-size 0; }\n"
                 "servlet /c { library c.so; max-body-size 1g; }\n"
                 "max-body-size 2M;\n",
                 "/x");
    assert_int_equal(c->max_header_size, 16384);
    assert_int_equal(c->max_target_length, 1024);
    assert_int_equal(c->max_body_size, 2 * 1024 * 1024);
    assert_int_equal(c->servlets[0].max_body_size, 2 * 1024 * 1024);
    assert_int_equal(c->servlets[1].max_body_size, 0);
    assert_int_equal(c->servlets[2].max_body_size, 1024 * 1024 * 1024);
    sandlet_conf_free(c);

    char err[256];
    assert_int_equal(parse_bad("max-body-size 2g;\n", 18, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "'max-body-size 2g' out of range (expected 0..1073741824 bytes)"));
    assert_int_equal(parse_bad("max-body-size 10x;\n", 19, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "invalid size '10x' for 'max-body-size'"));
    assert_int_equal(parse_bad("max-body-size 1kk;\n", 19, err, sizeof(err)), -EINVAL);
    assert_int_equal(parse_bad("max-body-size k;\n", 17, err, sizeof(err)), -EINVAL);
    assert_int_equal(parse_bad("max-header-size 100;\n", 21, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "expected 1024..1048576 bytes"));
    const char *wide = "max-header-size 2k;\nmax-target-length 4k;\n";
    assert_int_equal(parse_bad(wide, strlen(wide), err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "max-target-length 4096 is larger than max-header-size 2048"));
}

static void test_session_settings(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("sandbox a { sessions none; }\n"
                               "sandbox b { session-size 64k; session-timeout 60;\n"
                               "            session-cookie-secure on; }\n"
                               "sandbox c { }\n",
                               NULL);
    assert_int_equal(c->sandboxes[0].sessions, SANDLET_SESSIONS_NONE);
    assert_int_equal(c->sandboxes[1].sessions, SANDLET_SESSIONS_MEMORY);
    assert_int_equal(c->sandboxes[1].session_size, 64 * 1024);
    assert_int_equal(c->sandboxes[1].session_timeout, 60);
    assert_true(c->sandboxes[1].session_cookie_secure);
    assert_int_equal(c->sandboxes[2].sessions, SANDLET_SESSIONS_MEMORY);
    assert_int_equal(c->sandboxes[2].session_size, SANDLET_DEFAULT_SESSION_SIZE);
    assert_int_equal(c->sandboxes[2].session_timeout, SANDLET_DEFAULT_SESSION_TIMEOUT);
    assert_false(c->sandboxes[2].session_cookie_secure);
    sandlet_conf_free(c);

    char err[256];
    const char *t = "sandbox a { sessions disk; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    assert_non_null(
        strstr(err, "unknown session store 'disk' (expected memory, database or none)"));
    t = "sandbox a { session-size 1k; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "'session-size 1k' out of range (expected 16384..1073741824"));
    t = "sandbox a { session-size 2g; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    t = "sandbox a { session-size lots; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "invalid size 'lots' for 'session-size'"));
    t = "sandbox a { session-timeout 0; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    t = "sandbox a { session-cookie-secure yes; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "expected on or off"));
    t = "sandbox a { sessions memory; sessions none; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
}

/* Each sandbox's session cookie: its own name, and a Path covering just
 * its routes (whole segments), so that another sandbox's routes never
 * receive it where the routes allow. */
static void test_session_cookies(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("sandbox shop { }\n"
                               "sandbox \"my shop.v-2\" { }\n"
                               "sandbox pair { }\n"
                               "sandbox near { }\n"
                               "sandbox deep { }\n"
                               "sandbox root { }\n"
                               "sandbox odd { }\n"
                               "sandbox none { }\n"
                               "servlet /shop/cart { library a.so; sandbox shop; }\n"
                               "servlet /shop/pay/* { library a.so; sandbox shop; }\n"
                               "servlet /shop { library a.so; sandbox shop; }\n"
                               "servlet /one { library a.so; sandbox \"my shop.v-2\"; }\n"
                               "servlet /app/x { library a.so; sandbox pair; }\n"
                               "servlet /app/y { library a.so; sandbox pair; }\n"
                               "servlet /shopping { library a.so; sandbox near; }\n"
                               "servlet /shopkeeper/x { library a.so; sandbox near; }\n"
                               "servlet /d/e/* { library a.so; sandbox deep; }\n"
                               "servlet /* { library a.so; sandbox root; }\n"
                               "servlet \"/odd;x/a\" { library a.so; sandbox odd; }\n"
                               "servlet \"/odd;x/b\" { library a.so; sandbox odd; }\n",
                               NULL);
    static const char *const want[][3] = {
        {"shop", "SLSESSION_shop", "/shop"},
        {"my shop.v-2", "SLSESSION_my_shop.v-2", "/one"},
        {"pair", "SLSESSION_pair", "/app"},
        {"near", "SLSESSION_near", "/"}, /* "/shop" would not match "/shopping" */
        {"deep", "SLSESSION_deep", "/d/e"},
        {"root", "SLSESSION_root", "/"},
        {"odd", "SLSESSION_odd", "/"}, /* no ';' in a Path attribute */
        {"none", "SLSESSION_none", "/"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const sandlet_sandbox_conf *sb = &c->sandboxes[sandbox_index(c, want[i][0])];
        assert_string_equal(sb->session_cookie, want[i][1]);
        assert_string_equal(sb->session_path, want[i][2]);
    }
    sandlet_conf_free(c);

    /* Two sandboxes that would share a cookie are refused, naming both. */
    char err[512];
    const char *t = "sandbox \"a b\" { }\nsandbox a_b { }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "test.conf:2:1: sandboxes 'a b' (line 1) and 'a_b' would share "
                                "the session cookie 'SLSESSION_a_b'"));
    assert_non_null(strstr(err, "rename one"));
    t = "sandbox Shop { }\nsandbox shop { }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "would share the session cookie 'SLSESSION_shop'"));
    t = "sandbox aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa { }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "is too long (expected at most 64 bytes"));
}

/* Writes len bytes to a fresh file in dir with mode; returns its path. */
static const char *secret_file(const char *dir, const char *name, size_t len, mode_t mode)
{
    static char path[4][256];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof(path[0]), "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)(i * 7 + 1);
        assert_int_equal(write(fd, &b, 1), 1);
    }
    close(fd);
    assert_int_equal(chmod(p, mode), 0);
    return p;
}

static int parse_secret(const char *path, char *err, size_t errlen, sandlet_conf **out)
{
    char text[512];
    snprintf(text, sizeof(text), "session-secret-file \"%s\";\n", path);
    return sandlet_conf_parse(text, strlen(text), "test.conf", "/", out, err, errlen);
}

/* session-secret-file: read at load, its contents hashed, and refused with
 * the fix named when others could read or replace it. */
static void test_session_secret_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_conf-secret-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char err[512];
    sandlet_conf *c = parse_ok("", NULL);
    assert_false(c->session_secret_set);
    sandlet_conf_free(c);

    const char *good = secret_file(dir, "good", 32, 0600);
    assert_int_equal(parse_secret(good, err, sizeof(err), &c), 0);
    assert_true(c->session_secret_set);
    unsigned char first[32];
    memcpy(first, c->session_secret, 32);
    sandlet_conf_free(c);
    /* The same file gives the same secret (stable across restarts); read
     * only is fine too. */
    assert_int_equal(chmod(good, 0400), 0);
    assert_int_equal(parse_secret(good, err, sizeof(err), &c), 0);
    assert_memory_equal(c->session_secret, first, 32);
    sandlet_conf_free(c);
    const char *other = secret_file(dir, "other", 33, 0600);
    assert_int_equal(parse_secret(other, err, sizeof(err), &c), 0);
    assert_memory_not_equal(c->session_secret, first, 32);
    sandlet_conf_free(c);

    c = (sandlet_conf *)&c;
    assert_int_equal(parse_secret(secret_file(dir, "open", 32, 0640), err, sizeof(err), &c),
                     -EINVAL);
    assert_null(c);
    assert_non_null(strstr(err, "test.conf:1:21: session-secret-file '"));
    assert_non_null(strstr(err, "may be read or written by group or others"));
    assert_non_null(strstr(err, "chmod 600"));
    assert_int_equal(parse_secret(secret_file(dir, "short", 31, 0600), err, sizeof(err), &c),
                     -EINVAL);
    assert_non_null(strstr(err, "has the wrong size (expected 32 to 4096 random bytes"));
    assert_int_equal(parse_secret(secret_file(dir, "long", 4097, 0600), err, sizeof(err), &c),
                     -EINVAL);
    assert_non_null(strstr(err, "has the wrong size"));
    assert_int_equal(parse_secret("/nonexistent/secret", err, sizeof(err), &c), -EINVAL);
    assert_non_null(strstr(err, "cannot be opened: No such file or directory"));
    assert_int_equal(parse_secret(dir, err, sizeof(err), &c), -EINVAL);
    assert_non_null(strstr(err, "is not a regular file"));
    char link[300];
    snprintf(link, sizeof(link), "%s/link", dir);
    assert_int_equal(symlink(good, link), 0);
    assert_int_equal(parse_secret(link, err, sizeof(err), &c), -EINVAL);
    assert_non_null(strstr(err, "cannot be opened"));
    const char *theirs = secret_file(dir, "theirs", 32, 0600);
    if (geteuid() == 0) {
        /* Root may give the file away: another owner is refused. */
        assert_int_equal(chown(theirs, 65534, 65534), 0);
        assert_int_equal(parse_secret(theirs, err, sizeof(err), &c), -EINVAL);
        assert_non_null(strstr(err, "is owned by another user"));
    }
    /* Database sessions: a database and the secret (sessions must verify
     * after a restart and on other hosts), each missing one named. */
    char text[512];
    good = secret_file(dir, "db", 32, 0600);
    snprintf(text, sizeof(text),
             "session-secret-file \"%s\";\n"
             "sandbox s { database \"dbname=shop\"; sessions database; }\n",
             good);
    if (sandlet_conf_parse(text, strlen(text), "test.conf", "/", &c, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(c->sandboxes[0].sessions, SANDLET_SESSIONS_DATABASE);
    sandlet_conf_free(c);
    const char *t = "sandbox s { database \"dbname=shop\"; sessions database; }\n";
    assert_int_equal(parse_bad(t, strlen(t), err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "sandbox 's' has 'sessions database' but there is no "
                                "'session-secret-file FILE;'"));
    assert_non_null(strstr(err, "head -c 32 /dev/urandom"));
    snprintf(text, sizeof(text), "session-secret-file \"%s\";\nsandbox s { sessions database; }\n",
             good);
    assert_int_equal(sandlet_conf_parse(text, strlen(text), "test.conf", "/", &c, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "sandbox 's' has 'sessions database' but no 'database"));
    /* A reload reads the file through the link it was named by. */
    char conf_path[300], link_path[300];
    snprintf(conf_path, sizeof(conf_path), "%s/real.conf", dir);
    snprintf(link_path, sizeof(link_path), "%s/link.conf", dir);
    FILE *cf = fopen(conf_path, "w");
    assert_non_null(cf);
    fputs("sandbox x { }\n", cf);
    fclose(cf);
    assert_int_equal(symlink(conf_path, link_path), 0);
    assert_int_equal(sandlet_conf_load(link_path, &c, err, sizeof(err)), 0);
    assert_string_equal(c->source, link_path);
    sandlet_conf_free(c);
    unlink(link_path);
    unlink(conf_path);
    static const char *const names[] = {"good", "other", "open",   "short",
                                        "long", "link",  "theirs", "db"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char p[300];
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        unlink(p);
    }
    assert_int_equal(rmdir(dir), 0);
}

static int parse_db(const char *conninfo, const char *pwfile, char *err, size_t errlen,
                    sandlet_conf **out)
{
    char text[1024];
    int n = snprintf(text, sizeof(text), "sandbox db {\n  database \"%s\";\n", conninfo);
    if (pwfile)
        n += snprintf(text + n, sizeof(text) - (size_t)n, "  database-password-file \"%s\";\n",
                      pwfile);
    snprintf(text + n, sizeof(text) - (size_t)n, "}\n");
    *out = NULL;
    return sandlet_conf_parse(text, strlen(text), "test.conf", "/", out, err, errlen);
}

static const sandlet_sandbox_conf *db_sandbox(const sandlet_conf *c)
{
    return &c->sandboxes[sandbox_index(c, "db")];
}

/* database "CONNINFO": checked by libpq's parser, never with a password
 * in it; it brings the database group and exactly its TCP ports (none for
 * a unix socket) into the sandbox's Landlock connect rules. */
/* Sandboxes that log in to one database as one role, one of them keeping
 * its sessions there (issue 29): each could rewrite the other's sessions
 * with sl_db, so the file is refused, naming both and the fix. */
static void test_database_roles(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_conf-roles-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *secret = secret_file(dir, "s", 32, 0600);
    static const struct {
        const char *a, *b; /* the sandbox blocks' insides */
        bool refused;
    } cases[] = {
        /* The same string. */
        {"database \"dbname=shop user=shop\"; sessions database;",
         "database \"dbname=shop user=shop\"; sessions database;", true},
        /* A URI and a string, the dbname left to default to the role. */
        {"database \"postgresql://shop@db.example/shop\"; sessions database;",
         "database \"host=/run/postgresql user=shop\"; sessions memory;", true},
        /* A role left to libpq (the name of the user the workers run
         * as, which the file cannot tell) may be the other's. */
        {"user www; database \"dbname=x\"; sessions database;", "database \"dbname=x user=www\";",
         true},
        {"database \"dbname=x\";", "database \"dbname=x\"; sessions database;", true},
        {"database \"user=shop\"; sessions database;", "database \"dbname=shop\";", true},
        /* Roles of their own, or databases of their own. */
        {"database \"dbname=shop user=shop\"; sessions database;",
         "database \"dbname=shop user=board\"; sessions database;", false},
        {"database \"dbname=shop user=app\"; sessions database;",
         "database \"dbname=board user=app\"; sessions database;", false},
        {"database \"dbname=shop user=shop\"; sessions database;", "database \"dbname=board\";",
         false},
        /* No sessions in the database: the role's data is theirs to share. */
        {"database \"dbname=x user=app\";", "database \"dbname=x user=app\";", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[1024], err[768] = "";
        snprintf(text, sizeof(text),
                 "session-secret-file \"%s\";\nsandbox a { %s }\nsandbox b {\n  %s\n}\n", secret,
                 cases[i].a, cases[i].b);
        sandlet_conf *c = NULL;
        int rc = sandlet_conf_parse(text, strlen(text), "t.conf", "/", &c, err, sizeof(err));
        if (!cases[i].refused) {
            if (rc != 0)
                fail_msg("case %zu refused: %s", i, err);
            sandlet_conf_free(c);
            continue;
        }
        if (rc != -EINVAL)
            fail_msg("case %zu accepted (%d)", i, rc);
        if (!strstr(err, "t.conf:4:1: sandboxes 'a' (line 2) and 'b' log in to database"))
            fail_msg("case %zu: %s", i, err);
        assert_non_null(strstr(err, "give each sandbox a role of its own"));
    }
    unlink(secret);
    assert_int_equal(rmdir(dir), 0);
}

static void test_database(void **state)
{
    (void)state;
    char err[512];
    sandlet_conf *c;
    assert_int_equal(
        parse_db("host=/run/postgresql dbname=shop user=shop", NULL, err, sizeof(err), &c), 0);
    const sandlet_sandbox_conf *sb = db_sandbox(c);
    assert_string_equal(sb->database, "host=/run/postgresql dbname=shop user=shop");
    assert_null(sb->database_password);
    assert_true(sb->syscalls & SANDLET_SYSCALLS_DATABASE);
    assert_int_equal(sb->ndatabase_ports, 0); /* a unix socket needs no port */
    /* The supervisor's plan carries it; the acceptor forgets it. */
    sandlet_conf *plan = sandlet_conf_plan(c);
    assert_non_null(plan);
    assert_string_equal(db_sandbox(plan)->database, sb->database);
    sandlet_conf_free(plan);
    sandlet_conf_forget_secrets(c);
    assert_null(db_sandbox(c)->database);
    sandlet_conf_free(c);

    assert_int_equal(parse_db("dbname=shop", NULL, err, sizeof(err), &c), 0);
    assert_int_equal(db_sandbox(c)->ndatabase_ports, 0); /* libpq's default socket */
    sandlet_conf_free(c);

    assert_int_equal(parse_db("host=db.example dbname=shop", NULL, err, sizeof(err), &c), 0);
    sb = db_sandbox(c);
    assert_int_equal(sb->ndatabase_ports, 1);
    assert_int_equal(sb->database_ports[0], 5432);
    sandlet_conf_free(c);

    assert_int_equal(parse_db("postgresql://shop@127.0.0.1:6543/shop", NULL, err, sizeof(err), &c),
                     0);
    sb = db_sandbox(c);
    assert_int_equal(sb->ndatabase_ports, 1);
    assert_int_equal(sb->database_ports[0], 6543);
    sandlet_conf_free(c);

    assert_int_equal(parse_db("host=a,/tmp,b port=7000,7001,7000", NULL, err, sizeof(err), &c), 0);
    sb = db_sandbox(c);
    assert_int_equal(sb->ndatabase_ports, 2);
    assert_int_equal(sb->database_ports[0], 7000);
    assert_int_equal(sb->database_ports[1], 7001);
    sandlet_conf_free(c);

    assert_int_equal(parse_db("hostaddr=10.0.0.1 port=6000", NULL, err, sizeof(err), &c), 0);
    assert_int_equal(db_sandbox(c)->database_ports[0], 6000);
    sandlet_conf_free(c);

    /* With database-port lines too, no port twice. */
    const char *both = "sandbox db {\n database \"host=h port=5432\";\n database-port 5432;\n"
                       " database-port 6432;\n}\n";
    c = parse_ok(both, NULL);
    assert_int_equal(db_sandbox(c)->ndatabase_ports, 2);
    sandlet_conf_free(c);

    assert_int_equal(parse_db("host=h password=hunter2", NULL, err, sizeof(err), &c), -EINVAL);
    assert_null(c);
    assert_non_null(
        strstr(err, "test.conf:2:12: database: the connection string holds a password"));
    assert_non_null(strstr(err, "database-password-file"));
    assert_null(strstr(err, "hunter2"));
    assert_int_equal(parse_db("host=h bogus=1", NULL, err, sizeof(err), &c), -EINVAL);
    assert_non_null(strstr(err, "database: not a libpq connection string"));
    assert_int_equal(parse_db("host=h port=99999", NULL, err, sizeof(err), &c), -EINVAL);
    assert_non_null(strstr(err, "database port '99999' is not a number 1-65535"));
    assert_int_equal(parse_db("host=h port=x", NULL, err, sizeof(err), &c), -EINVAL);
    assert_non_null(strstr(err, "database port 'x'"));
    assert_int_equal(parse_db("", NULL, err, sizeof(err), &c), -EINVAL);
    const char *nodb = "sandbox db {\n database-password-file /etc/passwd;\n}\n";
    assert_int_equal(parse_bad(nodb, strlen(nodb), err, sizeof(err)), -EINVAL);
}

/* Writes text into dir/name; returns the path (one of four). */
static const char *text_file(const char *dir, const char *name, const char *text)
{
    static char path[4][256];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof(path[0]), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    return p;
}

static bool libpq_mapped(void)
{
    char *maps = NULL;
    size_t cap = 0, len = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            maps = realloc(maps, cap);
            assert_non_null(maps);
        }
        size_t n = fread(maps + len, 1, cap - len - 1, f);
        if (n == 0)
            break;
        len += n;
    }
    fclose(f);
    maps[len] = '\0';
    bool found = strstr(maps, "/libpq.so") != NULL;
    free(maps);
    return found;
}

/* The acceptor's parse (sandlet_conf_load_no_pq) keeps each database
 * string unchecked and loads no libpq: the first test of this program,
 * since libpq stays loaded once a parse loaded it.  The check loads it. */
static void test_no_pq_parse_loads_no_libpq(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_conf-nopq-XXXXXX";
    assert_non_null(mkdtemp(dir));
    if (libpq_mapped())
        fail_msg("libpq is loaded before the first test: this test must run first");
    const char *path = text_file(dir, "t.conf", "sandbox db {\n  database \"host=h\";\n}\n");
    char err[512] = "";
    sandlet_conf *c = NULL;
    assert_int_equal(sandlet_conf_load_no_pq(path, &c, err, sizeof(err)), 0);
    assert_false(libpq_mapped());
    assert_true(c->databases_unchecked);
    assert_int_equal(db_sandbox(c)->ndatabase_ports, 0);
    assert_int_equal(sandlet_conf_check_databases(c, err, sizeof(err)), 0);
    assert_true(libpq_mapped()); /* so that the first look could fail */
    assert_int_equal(db_sandbox(c)->ndatabase_ports, 1);
    sandlet_conf_free(c);
    unlink(path);
    assert_int_equal(rmdir(dir), 0);
}

/* sandlet_conf_check_databases after a _no_pq parse gives what the full
 * parse gives: the same ports, or the same message (FILE:LINE:COL and the
 * fix), for each string and for two sandboxes on one role, in an included
 * file too; on the supervisor's plan of such a parse as well. */
static void test_check_databases(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_conf-check-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *secret = secret_file(dir, "s", 32, 0600);
    char role_clash[512];
    snprintf(role_clash, sizeof(role_clash),
             "session-secret-file \"%s\";\ninclude \"%s/more.conf\";\n", secret, dir);
    char more[256]; /* text_file's buffers are reused below */
    snprintf(more, sizeof(more), "%s",
             text_file(dir, "more.conf",
                       "sandbox a { database \"dbname=x user=app\"; sessions database; }\n"
                       "sandbox b {\n  database \"dbname=x user=app\";\n}\n"));
    static const char *const conninfos[] = {
        "host=/run/postgresql dbname=shop user=shop",
        "dbname=shop",
        "host=db.example dbname=shop",
        "postgresql://shop@127.0.0.1:6543/shop",
        "host=a,/tmp,b port=7000,7001,7000",
        "hostaddr=10.0.0.1 port=6000",
        "host=h password=hunter2",
        "host=h bogus=1",
        "host=h port=99999",
        "host=h port=x",
        "host=h port=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17",
        NULL, /* role_clash */
    };
    for (size_t i = 0; i < sizeof(conninfos) / sizeof(conninfos[0]); i++) {
        char text[1024];
        if (conninfos[i])
            snprintf(text, sizeof(text), "sandbox db {\n  database \"%s\";\n  workers 2;\n}\n",
                     conninfos[i]);
        else
            snprintf(text, sizeof(text), "%s", role_clash);
        const char *path = text_file(dir, "t.conf", text);
        char want[768] = "", got[768] = "";
        sandlet_conf *full = NULL, *c = NULL;
        int want_rc = sandlet_conf_load(path, &full, want, sizeof(want));
        assert_int_equal(sandlet_conf_load_no_pq(path, &c, got, sizeof(got)), 0);
        assert_true(c->databases_unchecked);
        sandlet_conf *plan = sandlet_conf_plan(c);
        assert_non_null(plan);
        for (int round = 0; round < 2; round++) {
            sandlet_conf *x = round ? plan : c;
            int rc = sandlet_conf_check_databases(x, got, sizeof(got));
            if (rc != want_rc)
                fail_msg("case %zu: %d (%s), the full parse %d (%s)", i, rc, got, want_rc, want);
            if (rc) {
                assert_string_equal(got, want);
                continue;
            }
            assert_false(x->databases_unchecked);
            for (size_t k = 0; k < full->nsandboxes; k++) {
                const sandlet_sandbox_conf *a = &full->sandboxes[k], *b = &x->sandboxes[k];
                assert_int_equal(a->ndatabase_ports, b->ndatabase_ports);
                assert_memory_equal(a->database_ports, b->database_ports,
                                    sizeof(a->database_ports));
                assert_int_equal(a->syscalls, b->syscalls);
            }
            /* Once is enough: a second check changes nothing. */
            size_t n = x->sandboxes[0].ndatabase_ports;
            assert_int_equal(sandlet_conf_check_databases(x, got, sizeof(got)), 0);
            assert_int_equal(x->sandboxes[0].ndatabase_ports, n);
        }
        if (!conninfos[i])
            assert_non_null(strstr(want, "more.conf:3:1: sandboxes 'a' (line "));
        sandlet_conf_free(plan);
        sandlet_conf_free(c);
        sandlet_conf_free(full);
        unlink(path);
    }
    /* Nothing to check: 0 at once. */
    sandlet_conf *c = parse_ok("sandbox s { workers 1; }\n", NULL);
    char err[64] = "x";
    assert_int_equal(sandlet_conf_check_databases(c, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    sandlet_conf_free(c);
    unlink(more);
    unlink(secret);
    assert_int_equal(rmdir(dir), 0);
}

/* database-password-file: read at parse time with session-secret-file's
 * owner and mode rules; one trailing newline is not the password's. */
static void test_database_password_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_conf-dbpw-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char err[512], p[300];
    sandlet_conf *c;
    static const struct {
        const char *name;
        const char *text;
        mode_t mode;
        const char *want; /* the password, or NULL: refused with this message */
        const char *msg;
    } cases[] = {
        {"nl", "pa ss\n", 0600, "pa ss", NULL},
        {"crlf", "pa ss\r\n", 0400, "pa ss", NULL},
        {"plain", "x", 0600, "x", NULL},
        {"open", "x\n", 0644, NULL, "may be read or written by group or others"},
        {"empty", "", 0600, NULL, "is empty"},
        {"nlonly", "\n", 0600, NULL, "is empty"},
        {"two", "a\nb\n", 0600, NULL, "holds more than one line"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, cases[i].name);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs(cases[i].text, f);
        fclose(f);
        assert_int_equal(chmod(p, cases[i].mode), 0);
        int rc = parse_db("host=/run/postgresql", p, err, sizeof(err), &c);
        if (cases[i].want) {
            if (rc != 0)
                fail_msg("%s: %s", cases[i].name, err);
            assert_string_equal(db_sandbox(c)->database_password, cases[i].want);
            sandlet_conf *plan = sandlet_conf_plan(c);
            assert_string_equal(db_sandbox(plan)->database_password, cases[i].want);
            sandlet_conf_free(plan);
            sandlet_conf_forget_secrets(c);
            assert_null(db_sandbox(c)->database_password);
            sandlet_conf_free(c);
        } else {
            assert_int_equal(rc, -EINVAL);
            assert_non_null(strstr(err, "database-password-file '"));
            assert_non_null(strstr(err, cases[i].msg));
        }
        unlink(p);
    }
    snprintf(p, sizeof(p), "%s/long", dir);
    char *big = malloc(2000);
    assert_non_null(big);
    memset(big, 'a', 1999);
    big[1999] = '\0';
    FILE *f = fopen(p, "w");
    fputs(big, f);
    fclose(f);
    free(big);
    assert_int_equal(chmod(p, 0600), 0);
    assert_int_equal(parse_db("host=/x", p, err, sizeof(err), &c), -EINVAL);
    assert_non_null(strstr(err, "is too long"));
    if (geteuid() == 0) {
        assert_int_equal(chown(p, 65534, 65534), 0);
        assert_int_equal(parse_db("host=/x", p, err, sizeof(err), &c), -EINVAL);
        assert_non_null(strstr(err, "is owned by another user"));
    }
    unlink(p);
    assert_int_equal(parse_db("host=/x", "/nonexistent/pw", err, sizeof(err), &c), -EINVAL);
    assert_non_null(strstr(err, "cannot be opened"));
    assert_int_equal(rmdir(dir), 0);
}

static void test_confinement_settings(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("sandbox a {\n user www; group web;\n readable /srv/ro;\n"
                               " readable data;\n writable /srv/rw;\n memory 256;\n"
                               " open-files 64; cpu-seconds 30; core-dumps on;\n"
                               " syscalls files; syscalls database;\n"
                               " syscall-violations log; timeout 5000; max-requests 1000;\n}\n"
                               "servlet /x { library x.so; sandbox a; timeout 100; }\n",
                               "/etc/sandlet");
    const sandlet_sandbox_conf *sb = &c->sandboxes[0];
    assert_string_equal(sb->user, "www");
    assert_string_equal(sb->group, "web");
    assert_int_equal(sb->nreadable, 2);
    assert_string_equal(sb->readable[0], "/srv/ro");
    assert_string_equal(sb->readable[1], "/etc/sandlet/data");
    assert_int_equal(sb->nwritable, 1);
    assert_string_equal(sb->writable[0], "/srv/rw");
    assert_int_equal(sb->memory_mib, 256);
    assert_int_equal(sb->open_files, 64);
    assert_int_equal(sb->cpu_seconds, 30);
    assert_true(sb->core_dumps);
    assert_int_equal(sb->syscalls, SANDLET_SYSCALLS_FILES | SANDLET_SYSCALLS_DATABASE);
    assert_true(sb->learn);
    assert_int_equal(sb->timeout, 5000);
    assert_int_equal(sb->max_requests, 1000);
    assert_int_equal(c->servlets[0].timeout, 100);
    sandlet_conf_free(c);
}

/* Without a line, every limit has a bounded default; "unlimited" lifts one. */
static void test_limit_defaults(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("sandbox a { writable /srv/a; }\n"
                               "sandbox b {\n memory unlimited; open-files unlimited;\n"
                               " max-file-size unlimited; write-quota unlimited;\n"
                               " write-files unlimited;\n}\n"
                               "sandbox c {\n max-file-size 1m; write-quota 2g; write-files 50;\n"
                               " syscalls database; database-port 5432; database-port 6432;\n"
                               " database-port 5432;\n}\n",
                               "/srv");
    const sandlet_sandbox_conf *a = &c->sandboxes[0], *b = &c->sandboxes[1], *d = &c->sandboxes[2];
    assert_int_equal(a->memory_mib, SANDLET_DEFAULT_MEMORY_MIB);
    assert_int_equal(a->open_files, SANDLET_DEFAULT_OPEN_FILES);
    assert_true(a->max_file_size == SANDLET_DEFAULT_MAX_FILE_SIZE);
    assert_true(a->write_quota == SANDLET_DEFAULT_WRITE_QUOTA);
    assert_int_equal(a->write_files, SANDLET_DEFAULT_WRITE_FILES);
    assert_int_equal(a->ndatabase_ports, 0);
    assert_int_equal(b->memory_mib, 0);
    assert_int_equal(b->open_files, 0);
    assert_true(b->max_file_size == 0);
    assert_true(b->write_quota == 0);
    assert_int_equal(b->write_files, 0);
    assert_true(d->max_file_size == 1024 * 1024);
    assert_true(d->write_quota == 2ULL * 1024 * 1024 * 1024);
    assert_int_equal(d->write_files, 50);
    assert_int_equal(d->ndatabase_ports, 2); /* the repeated one once */
    assert_int_equal(d->database_ports[0], 5432);
    assert_int_equal(d->database_ports[1], 6432);
    sandlet_conf_free(c);
    /* The on-demand default sandbox is bounded as well; a sandbox that
     * can write no file has no file-size limit unless one is set (it
     * would only silence its standard error, the error log). */
    c = parse_ok("servlet /a { library a.so; }\n"
                 "sandbox f { syscalls files; }\n"
                 "sandbox n { }\n"
                 "sandbox s { max-file-size 1k; }\n",
                 "/srv");
    assert_int_equal(c->sandboxes[3].memory_mib, SANDLET_DEFAULT_MEMORY_MIB);
    assert_true(c->sandboxes[3].max_file_size == 0);
    assert_true(c->sandboxes[0].max_file_size == SANDLET_DEFAULT_MAX_FILE_SIZE);
    assert_true(c->sandboxes[1].max_file_size == 0);
    assert_true(c->sandboxes[2].max_file_size == 1024);
    sandlet_conf_free(c);
}

/* What a reload keeps: a sandbox is "the same" only when everything that
 * starts its workers is; what only a restart applies is named. */
static void test_reload_rules(void **state)
{
    (void)state;
    static const char base[] = "docroot /srv;\n"
                               "sandbox a { workers 2; memory 256; }\n"
                               "sandbox b { workers 1; }\n"
                               "servlet /x { library x.so; sandbox a; param p 1; }\n"
                               "servlet /y { library y.so; sandbox b; }\n";
    sandlet_conf *c = parse_ok(base, "/etc/sandlet");
    assert_int_equal(c->sandboxes[0].id, 0);
    assert_int_equal(c->sandboxes[1].id, 1);
    struct {
        const char *text;
        bool a_same, b_same;
        const char *restart;
    } cases[] = {
        {base, true, true, NULL},
        /* order of blocks and acceptor-only settings do not matter */
        {"docroot /srv;\nheader-timeout 5;\nsandbox b { workers 1; }\n"
         "sandbox a { workers 2; memory 256; queue 3; queue-timeout 9; max-requests 4; }\n"
         "servlet /x { library x.so; sandbox a; param p 1; max-body-size 1k; }\n"
         "servlet /y { library y.so; sandbox b; }\n",
         true, true, NULL},
        {"docroot /srv;\nsandbox a { workers 3; memory 256; }\nsandbox b { workers 1; }\n"
         "servlet /x { library x.so; sandbox a; param p 1; }\n"
         "servlet /y { library y.so; sandbox b; }\n",
         false, true, NULL},
        /* max-workers equal to workers is the default; worker-idle-timeout
         * is the acceptor's (a kept pool takes the new value) */
        {"docroot /srv;\nsandbox a { workers 2; max-workers 2; memory 256; }\n"
         "sandbox b { workers 1; worker-idle-timeout 500; }\n"
         "servlet /x { library x.so; sandbox a; param p 1; }\n"
         "servlet /y { library y.so; sandbox b; }\n",
         true, true, NULL},
        /* a pool that may grow is another sandbox to the supervisor */
        {"docroot /srv;\nsandbox a { workers 2; max-workers 4; memory 256; }\n"
         "sandbox b { workers 1; }\n"
         "servlet /x { library x.so; sandbox a; param p 1; }\n"
         "servlet /y { library y.so; sandbox b; }\n",
         false, true, NULL},
        {"docroot /srv;\nsandbox a { workers 2; memory 256; }\nsandbox b { workers 1; }\n"
         "servlet /x { library x.so; sandbox a; param p 2; }\n"
         "servlet /y { library y.so; sandbox b; }\n",
         false, true, NULL},
        {"docroot /srv;\nsandbox a { workers 2; memory 256; }\nsandbox b { workers 1; }\n"
         "servlet /x { library x.so; sandbox a; param p 1; }\n"
         "servlet /y { library y.so; sandbox b; }\nservlet /z { library z.so; sandbox b; }\n",
         true, false, NULL},
        {"docroot /srv;\nsandbox a { workers 2; memory 128; }\nsandbox b { workers 1; }\n"
         "servlet /x { library x.so; sandbox a; param p 1; }\n"
         "servlet /y { library y2.so; sandbox b; }\n",
         false, false, NULL},
        {"docroot /other;\nsandbox a { workers 2; memory 256; }\nsandbox b { workers 1; }\n"
         "servlet /x { library x.so; sandbox a; param p 1; }\n"
         "servlet /y { library y.so; sandbox b; }\n",
         true, true, "docroot"},
        {"user nobody;\ndocroot /srv;\nsandbox a { workers 2; memory 256; }\n"
         "sandbox b { workers 1; }\nservlet /x { library x.so; sandbox a; param p 1; }\n"
         "servlet /y { library y.so; sandbox b; }\n",
         true, true, "user"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        sandlet_conf *n = parse_ok(cases[k].text, "/etc/sandlet");
        size_t ia = 0, ib = 0;
        for (size_t j = 0; j < n->nsandboxes; j++) {
            if (strcmp(n->sandboxes[j].name, "a") == 0)
                ia = j;
            if (strcmp(n->sandboxes[j].name, "b") == 0)
                ib = j;
        }
        if (sandlet_conf_sandbox_same(c, 0, n, ia) != cases[k].a_same ||
            sandlet_conf_sandbox_same(c, 1, n, ib) != cases[k].b_same)
            fail_msg("case %zu: sandboxes a/b judged wrongly", k);
        assert_false(sandlet_conf_sandbox_same(c, 0, n, ib));
        const char *why = sandlet_conf_restart_needed(c, n);
        if (cases[k].restart)
            assert_string_equal(why, cases[k].restart);
        else
            assert_null(why);
        sandlet_conf_free(n);
    }
    sandlet_conf_free(c);
}

/* The supervisor compares the file it reads again with its own copy (the
 * plan): a file that did not change needs no restart, secret file
 * included. */
static void test_reload_same_file(void **state)
{
    (void)state;
    char secret[] = "/tmp/sandlet-secret-XXXXXX";
    int fd = mkstemp(secret);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789abcdef0123456789abcdef", 32), 32);
    close(fd);
    char text[512];
    snprintf(text, sizeof(text),
             "session-secret-file %s;\nuser nobody;\ndocroot /srv;\nerror-log /tmp/e.log;\n"
             "sandbox a { sessions memory; }\nservlet /x { library x.so; sandbox a; }\n",
             secret);
    sandlet_conf *c = parse_ok(text, "/etc/sandlet");
    sandlet_conf *p = sandlet_conf_plan(c);
    assert_non_null(p);
    assert_null(sandlet_conf_restart_needed(p, c));
    assert_true(sandlet_conf_sandbox_same(p, 0, c, 0));
    sandlet_conf_free(p);
    sandlet_conf_free(c);
    unlink(secret);
}

/* The acceptor parses a reload's text without reading secret files (it
 * may not), and gets the same sandboxes, servlets and settings. */
static void test_parse_public(void **state)
{
    (void)state;
    static const char text[] =
        "session-secret-file /nonexistent/secret;\n"
        "sandbox shop { database \"dbname=shop\"; database-password-file /nonexistent/pw; "
        "sessions database; }\n"
        "servlet /s { library s.so; sandbox shop; }\n";
    char err[512];
    sandlet_conf *c = NULL;
    /* The full parse reads the files, and fails on their absence... */
    assert_true(sandlet_conf_parse(text, strlen(text), "t.conf", "/etc", &c, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "/nonexistent/secret"));
    /* ...the acceptor's does not read them. */
    assert_int_equal(
        sandlet_conf_parse_public(text, strlen(text), "t.conf", "/etc", &c, err, sizeof(err)), 0);
    assert_int_equal(c->nsandboxes, 1);
    assert_null(c->sandboxes[0].database_password);
    assert_true(c->session_secret_set);
    assert_string_equal(c->servlets[0].library, "/etc/s.so");
    sandlet_conf_free(c);
}

/* A reload's configuration crosses from the supervisor to the acceptor in
 * a sealed memfd: bytes, folder, name and ids, read back whole; a blob
 * cut short or lying about its counts is refused. */
static void test_reload_blob(void **state)
{
    (void)state;
    static char text[] = "sandbox a { workers 1; }\nsandbox b { workers 1; }\n"
                         "servlet /x { library x.so; sandbox b; }\n";
    sandlet_conf_text t = {.text = text, .len = strlen(text), .basedir = "/srv/app"};
    uint32_t ids[2] = {7, 42};
    int fd = sandlet_ctl_conf_write(&t, "app.conf", ids, 2);
    assert_true(fd >= 0);
    /* Sealed: nobody can change what was checked. */
    assert_true(write(fd, "x", 1) < 0);
    char err[512];
    sandlet_conf *c = NULL;
    assert_int_equal(sandlet_ctl_conf_read(fd, &c, err, sizeof(err)), 0);
    assert_string_equal(c->file, "app.conf");
    assert_int_equal(c->sandboxes[0].id, 7);
    assert_int_equal(c->sandboxes[1].id, 42);
    assert_string_equal(c->servlets[0].library, "/srv/app/x.so");
    sandlet_conf_free(c);
    close(fd);
    /* Wrong id count: two sandboxes, one id. */
    fd = sandlet_ctl_conf_write(&t, "app.conf", ids, 1);
    assert_true(fd >= 0);
    assert_int_equal(sandlet_ctl_conf_read(fd, &c, err, sizeof(err)), -EPROTO);
    assert_null(c);
    close(fd);
    /* Truncated: every prefix of a good blob is refused. */
    fd = sandlet_ctl_conf_write(&t, "app.conf", ids, 2);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char *blob = malloc((size_t)st.st_size);
    assert_non_null(blob);
    assert_int_equal(pread(fd, blob, (size_t)st.st_size, 0), st.st_size);
    close(fd);
    for (off_t n = 1; n < st.st_size; n++) {
        int m = memfd_create("cut", MFD_CLOEXEC);
        assert_true(m >= 0);
        assert_int_equal(write(m, blob, (size_t)n), n);
        if (sandlet_ctl_conf_read(m, &c, err, sizeof(err)) == 0)
            fail_msg("a blob cut at %lld of %lld bytes was read", (long long)n,
                     (long long)st.st_size);
        close(m);
    }
    free(blob);
}

/* The supervisor's copy holds what starting workers takes and nothing
 * the acceptor alone uses, and outlives the configuration it came from. */
static void test_plan(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("listen 127.0.0.1:8081;\nuser web;\ndocroot www;\n"
                               "access-log a.log;\nerror-log e.log;\nstatus-page /st;\n"
                               "header-timeout 500;\nmax-body-size 1m;\n"
                               "sandbox shop {\n workers 3; queue 7; queue-timeout 90;\n"
                               " timeout 800; max-requests 9;\n user www; group web;\n"
                               " readable ro; writable rw;\n memory 256; open-files 64;\n"
                               " cpu-seconds 5; core-dumps on; syscalls files;\n"
                               " syscalls database; database-port 5432;\n"
                               " syscall-violations log; max-file-size 1m; write-quota 2m;\n"
                               " write-files 10;\n session-size 64k; session-timeout 60;\n"
                               " session-cookie-secure on;\n}\n"
                               "servlet /shop/* {\n library shop.so; sandbox shop;\n"
                               " param a b; param c \"\";\n timeout 50; max-body-size 2k;\n}\n"
                               "servlet /x { library x.so; }\n",
                               "/etc/sandlet");
    sandlet_conf *p = sandlet_conf_plan(c);
    assert_non_null(p);
    /* Copies, not shared pointers: the original can go first. */
    sandlet_conf_free(c);

    assert_string_equal(p->file, "test.conf");
    assert_string_equal(p->user, "web");
    assert_string_equal(p->access_log, "/etc/sandlet/a.log");
    assert_string_equal(p->error_log, "/etc/sandlet/e.log");
    /* The listen addresses: a reload binds only new ones. */
    assert_int_equal(p->nlistens, 1);
    assert_string_equal(p->listens[0].host, "127.0.0.1");
    /* acceptor-only settings are absent */
    /* The supervisor compiles pages from the docroot. */
    assert_string_equal(p->docroot, "/etc/sandlet/www");
    assert_null(p->status_page);
    assert_int_equal(p->header_timeout, 0);
    assert_int_equal(p->max_body_size, 0);
    assert_int_equal(p->max_connections, 0);

    assert_int_equal(p->nsandboxes, 2);
    const sandlet_sandbox_conf *sb = &p->sandboxes[0];
    assert_string_equal(sb->name, "shop");
    assert_int_equal(sb->workers, 3);
    assert_string_equal(sb->user, "www");
    assert_string_equal(sb->group, "web");
    assert_int_equal(sb->nreadable, 1);
    assert_string_equal(sb->readable[0], "/etc/sandlet/ro");
    assert_int_equal(sb->nwritable, 1);
    assert_string_equal(sb->writable[0], "/etc/sandlet/rw");
    assert_int_equal(sb->memory_mib, 256);
    assert_int_equal(sb->open_files, 64);
    assert_int_equal(sb->cpu_seconds, 5);
    assert_true(sb->core_dumps);
    assert_int_equal(sb->syscalls, SANDLET_SYSCALLS_FILES | SANDLET_SYSCALLS_DATABASE);
    assert_true(sb->learn);
    assert_int_equal(sb->ndatabase_ports, 1);
    assert_int_equal(sb->database_ports[0], 5432);
    assert_true(sb->max_file_size == 1024 * 1024);
    assert_true(sb->write_quota == 2 * 1024 * 1024);
    assert_int_equal(sb->write_files, 10);
    assert_int_equal(sb->sessions, SANDLET_SESSIONS_MEMORY);
    assert_int_equal(sb->session_size, 64 * 1024);
    assert_int_equal(sb->session_timeout, 60);
    assert_true(sb->session_cookie_secure);
    assert_string_equal(sb->session_cookie, "SLSESSION_shop");
    assert_string_equal(sb->session_path, "/shop");
    assert_int_equal(sb->line, 9);
    /* the acceptor's queue and guardian settings are not the supervisor's,
     * but the request timeout is (the database's statement timeout
     * follows it) */
    assert_int_equal(sb->queue, 0);
    assert_int_equal(sb->queue_timeout, 0);
    assert_int_equal(sb->timeout, 800);
    assert_int_equal(sb->max_requests, 0);
    assert_string_equal(p->sandboxes[1].name, SANDLET_DEFAULT_SANDBOX);
    assert_int_equal(p->sandboxes[1].nreadable, 0);
    assert_null(p->sandboxes[1].readable);

    assert_int_equal(p->nservlets, 2);
    const sandlet_servlet_conf *s = &p->servlets[0];
    assert_string_equal(s->path, "/shop/");
    assert_true(s->prefix);
    assert_string_equal(s->library, "/etc/sandlet/shop.so");
    assert_int_equal(s->sandbox, 0);
    assert_int_equal(s->nparams, 2);
    assert_string_equal(s->params[0].name, "a");
    assert_string_equal(s->params[0].value, "b");
    assert_string_equal(s->params[1].name, "c");
    assert_string_equal(s->params[1].value, "");
    assert_int_equal(s->timeout, 50); /* the statement timeout follows it */
    assert_int_equal(s->max_body_size, 0);
    assert_int_equal(p->servlets[1].sandbox, 1);
    assert_int_equal(p->servlets[1].nparams, 0);
    sandlet_conf_free(p);
    assert_null(sandlet_conf_plan(NULL));
}

static void test_default_sandbox(void **state)
{
    (void)state;
    /* A declared "default" is used as is, never duplicated. */
    sandlet_conf *c = parse_ok("servlet /a { library a.so; }\n"
                               "sandbox default { workers 8; }\n"
                               "servlet /b { library b.so; sandbox default; }\n",
                               "/srv");
    assert_int_equal(c->nsandboxes, 1);
    assert_int_equal(c->sandboxes[0].workers, 8);
    assert_int_equal(c->servlets[0].sandbox, 0);
    assert_int_equal(c->servlets[1].sandbox, 0);
    sandlet_conf_free(c);

    /* Naming "default" explicitly creates it on demand too, once. */
    c = parse_ok("servlet /a { library a.so; sandbox default; }\n"
                 "servlet /b { library b.so; }\n",
                 "/srv");
    assert_int_equal(c->nsandboxes, 1);
    assert_string_equal(c->sandboxes[0].name, SANDLET_DEFAULT_SANDBOX);
    assert_int_equal(c->sandboxes[0].workers, SANDLET_DEFAULT_WORKERS);
    assert_int_equal(c->sandboxes[0].queue, SANDLET_DEFAULT_QUEUE);
    assert_int_equal(c->servlets[1].sandbox, 0);
    sandlet_conf_free(c);

    /* Without servlets nothing needs it. */
    c = parse_ok("sandbox x { }\n", "/srv");
    assert_int_equal(c->nsandboxes, 1);
    sandlet_conf_free(c);
}

static void test_sandbox_declared_later(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("servlet /x { library x.so; sandbox late; }\n"
                               "sandbox early { }\n"
                               "sandbox late { workers 3; }\n",
                               "/srv");
    assert_int_equal(c->nsandboxes, 2);
    assert_int_equal(c->servlets[0].sandbox, sandbox_index(c, "late"));
    assert_int_equal(c->sandboxes[c->servlets[0].sandbox].workers, 3);
    sandlet_conf_free(c);
}

static void test_library_paths(void **state)
{
    (void)state;
    const char *text = "servlet /a { library a.so; }\n"
                       "servlet /b { library ../lib/b.so; }\n"
                       "servlet /c { library /abs/c.so; }\n";
    sandlet_conf *c = parse_ok(text, "/");
    assert_string_equal(c->servlets[0].library, "/a.so");
    assert_string_equal(c->servlets[1].library, "/../lib/b.so");
    assert_string_equal(c->servlets[2].library, "/abs/c.so");
    sandlet_conf_free(c);

    c = parse_ok(text, "/etc/sandlet/");
    assert_string_equal(c->servlets[0].library, "/etc/sandlet/a.so");
    sandlet_conf_free(c);

    c = parse_ok(text, NULL);
    assert_string_equal(c->servlets[0].library, "a.so");
    assert_string_equal(c->servlets[2].library, "/abs/c.so");
    sandlet_conf_free(c);
}

static void test_paths(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("servlet /* { library a.so; }\n"
                               "servlet / { library a.so; }\n"
                               "servlet /a/ { library a.so; }\n"
                               "servlet /a/* { library a.so; }\n",
                               "/srv");
    assert_int_equal(c->nservlets, 4);
    assert_string_equal(c->servlets[0].path, "/");
    assert_true(c->servlets[0].prefix);
    assert_string_equal(c->servlets[1].path, "/");
    assert_false(c->servlets[1].prefix);
    assert_string_equal(c->servlets[2].path, "/a/");
    assert_false(c->servlets[2].prefix);
    assert_string_equal(c->servlets[3].path, "/a/");
    assert_true(c->servlets[3].prefix);
    sandlet_conf_free(c);
}

/* error-log syslog is the word, not a file beside the configuration; a
 * file of that name is quoted with its folder.  The lines a start needs
 * for its messages are kept. */
static void test_error_log_syslog(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("\nerror-log syslog;\n", "/etc/sandlet");
    assert_string_equal(c->error_log, "syslog");
    assert_int_equal(c->error_log_line, 2);
    sandlet_conf_free(c);
    c = parse_ok("error-log \"./syslog\";\ndocroot www;\nservlet /x {\n  library x.so;\n}\n",
                 "/etc/sandlet");
    assert_string_equal(c->error_log, "/etc/sandlet/./syslog");
    assert_int_equal(c->docroot_line, 2);
    assert_int_equal(c->servlets[0].library_line, 4);
    sandlet_conf_free(c);
}

static void test_text_not_nul_terminated(void **state)
{
    (void)state;
    /* Only the first len bytes count: the rest would be an error. */
    const char text[] = "user alice;user bob; garbage {";
    char err[256];
    sandlet_conf *c = NULL;
    int rc = sandlet_conf_parse(text, 11, "test.conf", NULL, &c, err, sizeof(err));
    assert_int_equal(rc, 0);
    assert_string_equal(c->user, "alice");
    sandlet_conf_free(c);

    /* A word cut by len ends there; the missing ';' is then reported. */
    rc = parse_bad(text, 9, err, sizeof(err));
    assert_int_equal(rc, -EINVAL);
    assert_string_equal(err, "test.conf:1:10: expected ';' after 'user alic', found end of file "
                             "(add ';' here)");
}

/* ---- bad files ------------------------------------------------------------ */

struct bad_case {
    const char *text;
    int line;
    int col;
    const char *keyword;
};

static const struct bad_case bad_cases[] = {
    /* unknown and misplaced directives */
    {"listen 127.0.0.1:8080;\nfoo bar;\n", 2, 1, "unknown directive 'foo' at top level"},
    {"servlet /x {\n    librari x.so;\n}\n", 2, 5,
     "unknown directive 'librari' in servlet block; did you mean 'library'? (expected library, "
     "timeout, max-body-size, sandbox or param)"},
    /* the whole list, however long, and the likely word */
    {"servelt /x { }\n", 1, 1,
     "unknown directive 'servelt' at top level; did you mean 'servlet'? (expected listen, "},
    {"servelt /x { }\n", 1, 1,
     "development, unknown-hosts, state-file, dynamic-uids, sandbox, servlet, pages or host)"},
    {"sandbox a { wokers 2; }\n", 1, 13, "did you mean 'workers'?"},
    /* what other formats write */
    {"listen = 127.0.0.1:8091;\n", 1, 8,
     "'listen =': sandlet.conf has no '=' between a directive and its value (expected 'listen "
     "ADDR:PORT;')"},
    /* at the '#', where the quotes go, not at the '}' found after it */
    {"servlet /x {\n  param color #fff;\n}\n", 2, 15,
     "'#' starts a comment: put a value that holds one in quotes"},
    {"sandbox a {\n  threads 2;\n}\n", 2, 3,
     "(expected workers, max-workers, worker-idle-timeout, queue, queue-timeout, pipeline, user,"},
    {"sandbox a {\n  pipeline 0;\n}\n", 2, 12, "'pipeline 0' out of range (expected 1..256)"},
    {"sandbox a {\n  syscalls network;\n}\n", 2, 12, "unknown system-call group 'network'"},
    {"sandbox a {\n  core-dumps maybe;\n}\n", 2, 14, "(expected on or off)"},
    {"sandbox a {\n  syscall-violations trace;\n}\n", 2, 22, "(expected log or kill)"},
    {"sandbox a {\n  memory 1;\n}\n", 2, 10, "out of range"},
    /* a directive whose word "unlimited" or "off" stands for no limit says so */
    {"sandbox a {\n  memory 1;\n}\n", 2, 10,
     "'memory 1' out of range (expected 16..1048576, or "
     "unlimited)"},
    {"sandbox a {\n  timeout 1h;\n}\n", 2, 11,
     "invalid number '1h' for 'timeout' (expected milliseconds as a decimal number "
     "0..86400000 without a unit, or off, e.g. 'timeout 30000;')"},
    {"sandbox a {\n  max-file-size 0;\n}\n", 2, 17, "or unlimited for no limit"},
    {"sandbox a {\n  write-quota lots;\n}\n", 2, 15, "invalid size 'lots' for 'write-quota'"},
    {"sandbox a {\n  write-files 0;\n}\n", 2, 15, "out of range"},
    {"sandbox a {\n  database-port 70000;\n}\n", 2, 17, "out of range (expected 1..65535)"},
    {"sandbox a {\n  database-port 5432;\n}\n", 1, 1,
     "sandbox 'a' has a database-port but no 'syscalls database;'"},
    {"sandbox a {\n  session-size 512m;\n}\n", 1, 1,
     "session-size 536870912 bytes does not fit in memory 512 (MiB) with room for the worker "
     "itself; set memory to at least 544"},
    {"sandbox a {\n  user a;\n  user b;\n}\n", 3, 3, "user"},
    {"sandbox a {\n  queue-timeout 0;\n}\n", 2, 17, "out of range (expected 1..3600000)"},
    {"sandbox a {\n  queue-timeout 5;\n  queue-timeout 6;\n}\n", 3, 3, "queue-timeout"},
    {"param x y;\n", 1, 1, "'param' is not allowed at top level"},
    {"workers 4;\n", 1, 1, "not allowed at top level"},
    {"sandbox a {\n    workers 2;\nservlet /x {\n    library x.so;\n}\n", 3, 1, "'}' missing"},
    {"\"user\" a;\n", 1, 1, "expected a directive at top level, found string \"user\""},
    {"user a;\n;\n", 2, 1, "expected a directive"},
    {"servlet /x { { } }\n", 1, 14, "expected a directive in servlet block, found '{'"},
    /* argument counts, ';', '{' and '}' */
    {"user;\n", 1, 5, "missing argument for 'user'"},
    {"\tuser;\n", 1, 6, "missing argument"},
    {"# user x\nuser; # c\n", 2, 5, "missing argument"},
    {"servlet /x {\n    param a;\n}\n", 2, 12, "expected 'param NAME VALUE'"},
    {"sandbox { }\n", 1, 9, "missing argument for 'sandbox'"},
    {"user a b;\n", 1, 8, "expected ';' after 'user a', found 'b'"},
    {"sandbox a {\n  workers 4 }\n", 2, 13, "expected ';' after 'workers 4', found '}'"},
    /* a ';' missing at the end of a line is reported there */
    {"sandbox a {\n    workers 4\n    queue 8;\n}\n", 2, 14,
     "found 'queue' on line 3 (add ';' here)"},
    {"listen 1.2.3.4:80", 1, 18, "expected ';' after 'listen 1.2.3.4:80', found end of file"},
    {"user \"\xc3\xa9\" x;\n", 1, 11, "expected ';'"}, /* columns count bytes */
    {"sandbox a\n    workers 4;\n}\n", 1, 10,
     "expected '{' after 'sandbox a', found 'workers' on line 2 (add '{' here)"},
    {"servlet /x;\n", 1, 11, "expected '{'"},
    {"}\n", 1, 1, "unexpected '}'"},
    {"sandbox a { }\n}\n", 2, 1, "unexpected '}'"},
    {"servlet /x {\n    library x.so;\n", 1, 1, "unterminated servlet block '/x'"},
    {"\n  sandbox a { workers 2;", 2, 3, "unterminated sandbox block"},
    /* strings */
    {"user \"abc\n;\n", 1, 6, "unterminated string"},
    {"docroot \"abc", 1, 9, "unterminated string"},
    {"docroot \"abc\\", 1, 9, "unterminated string"},
    {"user \"a\\nb\";\n", 1, 8, "unknown escape '\\n'"},
    {"user \"\";\n", 1, 6, "empty argument for 'user'"},
    /* numbers */
    {"sandbox a { workers 0; }\n", 1, 21, "out of range (expected 1..256)"},
    {"sandbox a { workers 257; }\n", 1, 21, "out of range"},
    {"sandbox a { workers 99999999999999999999999; }\n", 1, 21, "out of range"},
    {"sandbox a { workers -1; }\n", 1, 21, "invalid number '-1'"},
    {"sandbox a { workers 4x; }\n", 1, 21, "invalid number"},
    {"sandbox a { workers +4; }\n", 1, 21, "invalid number"},
    {"sandbox a { queue 65536; }\n", 1, 19, "out of range (expected 0..65535)"},
    {"sandbox a { queue \"\"; }\n", 1, 19, "invalid number"},
    /* listen */
    {"listen 1.2.3.4;\n", 1, 8, "missing ':PORT'"},
    {"listen 1.2.3.256:80;\n", 1, 8, "invalid IPv4 address '1.2.3.256'"},
    {"listen localhost:80;\n", 1, 8, "invalid IPv4 address"},
    {"listen :80;\n", 1, 8, "invalid IPv4 address"},
    {"listen 1.2.3.4:65536;\n", 1, 8, "invalid port '65536'"},
    {"listen 1.2.3.4:+80;\n", 1, 8, "invalid port"},
    {"listen 1.2.3.4: 80;\n", 1, 17, "after 'listen 1.2.3.4:', found '80'"},
    {"listen 1.2.3.4:80x;\n", 1, 8, "invalid port"},
    {"listen 1.2.3.4:;\n", 1, 8, "invalid port ''"},
    {"listen [::1:80;\n", 1, 8, "missing ']'"},
    {"listen ::1:80;\n", 1, 8, "in brackets"},
    {"listen [::1]80;\n", 1, 8, "missing ':PORT' after ']'"},
    {"listen [::1]:;\n", 1, 8, "invalid port"},
    {"listen [1.2.3.4]:80;\n", 1, 8, "invalid IPv6 address"},
    {"listen []:80;\n", 1, 8, "invalid IPv6 address"},
    {"listen [fe80::1%lo]:80;\n", 1, 8, "invalid IPv6 address"},
    /* duplicates */
    {"sandbox a { }\nsandbox b { }\nsandbox a { }\n", 3, 9,
     "duplicate sandbox 'a' (already defined at line 1"},
    {"servlet /x { library a.so; }\nservlet /x { library b.so; }\n", 2, 9,
     "duplicate servlet path '/x'"},
    {"servlet /x/* { library a.so; }\nservlet \"/x/*\" { library b.so; }\n", 2, 9,
     "duplicate servlet path '/x/*'"},
    {"user a;\nuser b;\n", 2, 1, "duplicate 'user'"},
    {"docroot /a;\n docroot /b;\n", 2, 2, "duplicate 'docroot'"},
    {"sandbox a {\n  workers 1;\n  workers 2;\n}\n", 3, 3,
     "duplicate 'workers' in sandbox block (already set at line 2"},
    {"sandbox a { queue 1; queue 1; }\n", 1, 22, "duplicate 'queue'"},
    {"servlet /x {\n library a.so;\n library b.so;\n}\n", 3, 2, "duplicate 'library'"},
    {"sandbox s { }\nservlet /x {\n library a.so;\n sandbox s;\n sandbox s;\n}\n", 5, 2,
     "duplicate 'sandbox' in servlet block"},
    /* servlets */
    {"servlet /x {\n    param a b;\n}\n", 1, 1, "servlet '/x' has no library"},
    {"servlet /x/* { }\n", 1, 1, "servlet '/x/*' has no library"},
    {"servlet hello { library a.so; }\n", 1, 9, "must start with '/'"},
    {"servlet \"\" { library a.so; }\n", 1, 9, "must start with '/'"},
    {"servlet * { library a.so; }\n", 1, 9, "must start with '/'"},
    {"servlet /a* { library a.so; }\n", 1, 9, "'*' in servlet path '/a*'"},
    {"servlet /a*/b { library a.so; }\n", 1, 9, "only as a trailing '/*'"},
    {"servlet /a/*/b { library a.so; }\n", 1, 9, "'*' in servlet path"},
    {"servlet /** { library a.so; }\n", 1, 9, "'*' in servlet path"},
    {"servlet \"/a b\" { library a.so; }\n", 1, 9, "invalid character"},
    {"servlet /a?b { library a.so; }\n", 1, 9, "invalid character"},
    {"servlet /x { library \"\"; }\n", 1, 22, "empty library path"},
    {"servlet /x { library a.so; sandbox \"\"; }\n", 1, 36, "empty sandbox name"},
    {"servlet /x { library a.so; param \"\" v; }\n", 1, 34, "empty parameter name"},
    {"sandbox shop { }\nservlet /x {\n    library a.so;\n    sandbox shpo;\n}\n", 4, 13,
     "servlet '/x' uses undefined sandbox 'shpo'"},
    /* a later syntax error is reported before the undefined sandbox */
    {"servlet /x {\n  library a.so;\n  sandbox nope;\n}\nfoo;\n", 5, 1, "unknown directive"},
    /* file text is shown made printable, never used as a format */
    {"%s%n%s { }\n", 1, 1, "unknown directive '%s%n%s'"},
    {"user\x1b[31m x;\n", 1, 1, "unknown directive 'user?[31m'"},
    /* host blocks: names, their uniqueness, what goes inside, 421 */
    {"host a.example.org { }\nhost b.example.org { name A.example.org; }\n", 2, 27,
     "duplicate host name 'a.example.org' (already named at line 1; expected each name in one "
     "host block)"},
    {"host shop.example.org:8080 { }\n", 1, 6, "invalid host name 'shop.example.org:8080'"},
    {"host www.*.org { }\n", 1, 6, "no port, no other '*', no trailing '.'"},
    {"host example.org. { }\n", 1, 6, "invalid host name"},
    {"host *. { }\n", 1, 6, "invalid host name"},
    {"host a..b { }\n", 1, 6, "invalid host name"},
    {"host a {\n  listen 127.0.0.1:80;\n}\n", 2, 3,
     "'listen' is not allowed in host block; it belongs at top level (expected name, docroot or "
     "servlet; is a '}' missing?)"},
    {"host a {\n  pages / { }\n}\n", 2, 3,
     "'pages' is not allowed in host block: C Server Pages are served on the default host only"},
    {"host a {\n  servlet /x { library x.so; }\n  servlet /x { library y.so; }\n}\n", 3, 11,
     "duplicate servlet path '/x' (already defined at line 2; expected each path once per host)"},
    {"host a {\n  docroot /a;\n  docroot /b;\n}\n", 3, 3,
     "duplicate 'docroot' in host block (already set at line 2"},
    {"unknown-hosts refuse;\nservlet /x { library x.so; }\nhost a { }\n", 2, 1,
     "'unknown-hosts refuse' (line 1) answers 421 to every request no host block names, so a "
     "servlet outside a host block would never be served"},
    {"unknown-hosts refuse;\n", 1, 1, "so everything outside a host block"},
    {"unknown-hosts deny;\n", 1, 15, "(expected serve or refuse)"},
    {"server {\n}\n", 1, 1, "a name-based virtual server is 'host NAME {"},
};

static void test_bad_files(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *b = &bad_cases[i];
        char err[1024], where[64];
        memset(err, 'x', sizeof(err));
        int rc = parse_bad(b->text, strlen(b->text), err, sizeof(err));
        snprintf(where, sizeof(where), "test.conf:%d:%d: ", b->line, b->col);
        if (rc != -EINVAL || strncmp(err, where, strlen(where)) != 0 || !strstr(err, b->keyword) ||
            strchr(err, '\n')) {
            /* Report every broken case, not only the first. */
            print_error("bad case %zu: rc %d, message \"%s\", expected \"%s...%s\"\n", i, rc, err,
                        where, b->keyword);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* host blocks: names lowercased, servlets and docroot per host, each
 * host's path space its own; a file without them has every servlet on
 * the default host. */
static void test_hosts(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("docroot /srv/www;\n"
                               "servlet /x { library x.so; }\n"
                               "host Shop.Example.org {\n"
                               "    name www.shop.example.org;\n"
                               "    docroot shop;\n"
                               "    servlet /x { library shop.so; }\n"
                               "    name \"*.shop.example.org\";\n"
                               "}\n"
                               "host *.example.org { servlet /x/* { library y.so; sandbox y; } }\n"
                               "sandbox y { }\n",
                               "/etc/sandlet");
    assert_int_equal(c->nhosts, 2);
    assert_int_equal(c->unknown_hosts, SANDLET_UNKNOWN_HOSTS_SERVE);
    const sandlet_host_conf *h = &c->hosts[0];
    assert_int_equal(h->nnames, 3);
    assert_string_equal(h->names[0], "shop.example.org");
    assert_string_equal(h->names[1], "www.shop.example.org");
    assert_string_equal(h->names[2], "*.shop.example.org");
    assert_int_equal(h->name_lines[2], 7);
    assert_string_equal(h->docroot, "/etc/sandlet/shop");
    assert_int_equal(h->docroot_line, 5);
    assert_int_equal(h->line, 3);
    assert_null(c->hosts[1].docroot);
    assert_int_equal(c->nservlets, 3);
    assert_int_equal(c->servlets[0].host, SANDLET_HOST_DEFAULT);
    assert_int_equal(c->servlets[1].host, 0);
    assert_string_equal(c->servlets[1].library, "/etc/sandlet/shop.so");
    assert_int_equal(c->servlets[2].host, 1);
    assert_true(c->servlets[2].prefix);
    assert_string_equal(c->sandboxes[c->servlets[2].sandbox].name, "y");
    /* The supervisor's plan keeps which host a servlet is of. */
    sandlet_conf *plan = sandlet_conf_plan(c);
    assert_non_null(plan);
    assert_int_equal(plan->servlets[2].host, 1);
    sandlet_conf_free(plan);
    sandlet_conf_free(c);

    c = parse_ok("unknown-hosts refuse;\nhost a { servlet /x { library x.so; } }\n", "/etc");
    assert_int_equal(c->unknown_hosts, SANDLET_UNKNOWN_HOSTS_REFUSE);
    sandlet_conf_free(c);
    c = parse_ok("servlet /x { library x.so; }\n", "/etc");
    assert_int_equal(c->nhosts, 0);
    assert_int_equal(c->servlets[0].host, SANDLET_HOST_DEFAULT);
    sandlet_conf_free(c);
}

static void test_nul_byte(void **state)
{
    (void)state;
    char err[256];
    static const char word[] = "user a\0b;";
    assert_int_equal(parse_bad(word, sizeof(word) - 1, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "test.conf:1:7: NUL byte in word (expected text)");
    static const char str[] = "user \"a\0b\";";
    assert_int_equal(parse_bad(str, sizeof(str) - 1, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "test.conf:1:8: NUL byte in string (expected text)");
}

static void test_error_buffer(void **state)
{
    (void)state;
    const char *text = "servlet /x {\n    librari x.so;\n}\n";
    char err[16];
    memset(err, 'x', sizeof(err));
    assert_int_equal(parse_bad(text, strlen(text), err, sizeof(err)), -EINVAL);
    assert_int_equal(strlen(err), sizeof(err) - 1);
    assert_memory_equal(err, "test.conf:2:5: ", 15);

    /* No buffer at all is fine. */
    assert_int_equal(parse_bad(text, strlen(text), NULL, 0), -EINVAL);
    memset(err, 'x', sizeof(err));
    assert_int_equal(parse_bad(text, strlen(text), err, 0), -EINVAL);
    assert_int_equal(err[0], 'x');

    /* Long tokens are cut in messages. */
    char big[400], msg[512];
    memset(big, 'a', sizeof(big));
    big[sizeof(big) - 2] = ';';
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(parse_bad(big, strlen(big), msg, sizeof(msg)), -EINVAL);
    char run[81];
    memset(run, 'a', 80);
    run[80] = '\0';
    assert_null(strstr(msg, run)); /* the 398-byte token is cut */
    assert_non_null(strstr(msg, "...' at top level"));
}

/* ---- routing -------------------------------------------------------------- */

static void test_route(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("servlet /a { library x.so; }\n"       /* 0 */
                               "servlet /a/* { library x.so; }\n"     /* 1 */
                               "servlet /a/b/* { library x.so; }\n"   /* 2 */
                               "servlet /a/b/c { library x.so; }\n"   /* 3 */
                               "servlet /a/b/c/* { library x.so; }\n" /* 4 */
                               "servlet /* { library x.so; }\n",      /* 5 */
                               "/srv");
    static const struct {
        const char *path;
        int servlet;
    } cases[] = {
        {"/a", 0},       {"/a/", 1},    {"/a/x", 1},    {"/a/b", 1},    {"/a/b/", 2},
        {"/a/b/x/y", 2}, {"/a/b/c", 3}, {"/a/b/cd", 2}, {"/a/b/c/", 4}, {"/ab", 5},
        {"/", 5},        {"/zzz/a", 5}, {"", -1},       {"a", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const sandlet_servlet_conf *s = sandlet_conf_route(c, cases[i].path, strlen(cases[i].path));
        const sandlet_servlet_conf *want =
            cases[i].servlet < 0 ? NULL : &c->servlets[cases[i].servlet];
        if (s != want)
            fail_msg("route \"%s\": got servlet %td, expected %d", cases[i].path,
                     s ? s - c->servlets : -1, cases[i].servlet);
    }
    sandlet_conf_free(c);
}

static void test_route_no_match(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("servlet /a { library x.so; }\n"
                               "servlet /app/* { library x.so; }\n",
                               "/srv");
    assert_null(sandlet_conf_route(c, "/b", 2));
    assert_null(sandlet_conf_route(c, "/ab", 3));
    assert_null(sandlet_conf_route(c, "/app", 4)); /* the prefix route needs the slash */
    assert_null(sandlet_conf_route(c, "/", 1));
    assert_null(sandlet_conf_route(c, "", 0));
    assert_null(sandlet_conf_route(NULL, "/a", 2));
    assert_ptr_equal(sandlet_conf_route(c, "/app/", 5), &c->servlets[1]);
    sandlet_conf_free(c);

    c = parse_ok("", NULL);
    assert_null(sandlet_conf_route(c, "/", 1));
    sandlet_conf_free(c);
}

static void test_route_not_nul_terminated(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("servlet /a { library x.so; }\n"
                               "servlet /a/b { library x.so; }\n"
                               "servlet /p/* { library x.so; }\n",
                               "/srv");
    /* The request path is a slice of a larger buffer, as in a request line. */
    const char buf[] = {'/', 'a', '/', 'b', '?', 'q', '=', '1'};
    assert_ptr_equal(sandlet_conf_route(c, buf, 2), &c->servlets[0]);
    assert_ptr_equal(sandlet_conf_route(c, buf, 4), &c->servlets[1]);
    assert_null(sandlet_conf_route(c, buf, 3));
    assert_null(sandlet_conf_route(c, buf, 1));
    const char p[] = {'/', 'p', '/', 'x'};
    assert_ptr_equal(sandlet_conf_route(c, p, sizeof(p)), &c->servlets[2]);
    assert_null(sandlet_conf_route(c, p, 2));
    sandlet_conf_free(c);
}

/* ---- loading files ---------------------------------------------------------- */

static void write_file(int fd, const char *text, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, text, len);
        assert_true(n > 0);
        text += n;
        len -= (size_t)n;
    }
}

static void test_load_missing(void **state)
{
    (void)state;
    const char *path = "/nonexistent-sandlet-dir/sandlet.conf";
    char err[256];
    sandlet_conf *c = (sandlet_conf *)&c;
    assert_int_equal(sandlet_conf_load(path, &c, err, sizeof(err)), -ENOENT);
    assert_null(c);
    assert_string_equal(err, "/nonexistent-sandlet-dir/sandlet.conf: cannot read: No such file "
                             "or directory");
}

static void test_load_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_conf-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof(path), "%s/sandlet-XXXXXX", dir);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "listen [::]:0;\n"
                       "servlet /hello {\n"
                       "    library hello.so;\n"
                       "    param who \"world\";\n"
                       "}\n";
    write_file(fd, text, strlen(text));
    close(fd);

    char err[256], want[128];
    sandlet_conf *c = NULL;
    assert_int_equal(sandlet_conf_load(path, &c, err, sizeof(err)), 0);
    assert_string_equal(c->file, path);
    assert_int_equal(c->nlistens, 1);
    assert_string_equal(c->listens[0].host, "::");
    assert_int_equal(c->listens[0].port, 0);
    snprintf(want, sizeof(want), "%s/hello.so", dir);
    assert_string_equal(c->servlets[0].library, want);
    assert_string_equal(c->servlets[0].params[0].value, "world");
    sandlet_conf_free(c);

    /* A bare file name: relative to the working directory, made absolute
     * so that it does not depend on where processes later run. */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(dir), 0);
    int rc = sandlet_conf_load(strrchr(path, '/') + 1, &c, err, sizeof(err));
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(rc, 0);
    assert_string_equal(c->servlets[0].library, want);
    sandlet_conf_free(c);

    /* Errors in a loaded file carry its name. */
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    write_file(fd, "user a;\nuser b;\n", 16);
    close(fd);
    assert_int_equal(sandlet_conf_load(path, &c, err, sizeof(err)), -EINVAL);
    assert_null(c);
    snprintf(want, sizeof(want), "%s:2:1: duplicate 'user'", path);
    assert_memory_equal(err, want, strlen(want));

    /* A directory cannot be read. */
    assert_int_equal(sandlet_conf_load(dir, &c, err, sizeof(err)), -EISDIR);
    assert_non_null(strstr(err, "cannot read"));
    assert_memory_equal(err, dir, strlen(dir));

    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void test_load_too_large(void **state)
{
    (void)state;
    char path[] = "/tmp/test_conf-big-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static char block[64 * 1024];
    memset(block, '#', sizeof(block));
    for (int i = 0; i < 16; i++) /* exactly 1 MiB of comment: accepted */
        write_file(fd, block, sizeof(block));

    char err[256];
    sandlet_conf *c = NULL;
    assert_int_equal(sandlet_conf_load(path, &c, err, sizeof(err)), 0);
    sandlet_conf_free(c);

    write_file(fd, "\n", 1); /* one byte more: refused */
    close(fd);
    assert_int_equal(sandlet_conf_load(path, &c, err, sizeof(err)), -EFBIG);
    assert_null(c);
    assert_memory_equal(err, path, strlen(path));
    assert_non_null(strstr(err, "1 MiB"));
    assert_int_equal(unlink(path), 0);
}

/* pages blocks: the longest folder wins, "pages" is made on demand, and
 * the session cookie's Path covers a pages-only sandbox's folder. */
static void test_pages(void **state)
{
    (void)state;
    sandlet_conf *c = parse_ok("docroot /srv/www;\n"
                               "pages / { }\n"
                               "pages /admin { sandbox admin; }\n"
                               "sandbox admin { workers 1; }\n"
                               "page-cache /tmp/pc;\npage-compiler off;\n"
                               "spool-dir /tmp/spool;\n"
                               "development on;\npage-compile-timeout 5000;\n",
                               "/etc/sandlet");
    assert_int_equal(c->npages, 2);
    assert_string_equal(c->pages[1].prefix, "/admin/");
    size_t admin = sandbox_index(c, "admin"), pages = sandbox_index(c, "pages");
    assert_int_equal(c->pages[0].sandbox, pages);
    assert_int_equal(c->pages[1].sandbox, admin);
    assert_true(c->sandboxes[admin].pages);
    assert_string_equal(c->sandboxes[admin].session_path, "/admin");
    assert_ptr_equal(sandlet_conf_pages_for(c, "admin/x.csp"), &c->pages[1]);
    assert_ptr_equal(sandlet_conf_pages_for(c, "administrator.csp"), &c->pages[0]);
    assert_ptr_equal(sandlet_conf_pages_for(c, "x.csp"), &c->pages[0]);
    assert_null(c->page_compiler);
    assert_string_equal(c->page_cache, "/tmp/pc");
    assert_true(c->development);
    assert_int_equal(c->page_compile_timeout, 5000);
    sandlet_conf *p = sandlet_conf_plan(c);
    assert_non_null(p);
    assert_int_equal(p->npages, 2);
    assert_string_equal(p->pages[1].prefix, "/admin/");
    assert_true(p->sandboxes[admin].pages);
    assert_string_equal(p->spool_dir, "/tmp/spool"); /* the supervisor's plan has it */
    sandlet_conf_free(p);
    sandlet_conf_free(c);

    c = parse_ok("docroot /srv/www;\npages /shop/ { }\n", "/etc/sandlet");
    assert_string_equal(c->page_compiler, "cc");
    assert_string_equal(c->page_cache, SANDLET_DEFAULT_PAGE_CACHE);
    assert_string_equal(c->spool_dir, SANDLET_DEFAULT_SPOOL_DIR);
    assert_null(sandlet_conf_pages_for(c, "x.csp"));
    assert_false(c->development);
    sandlet_conf_free(c);

    char err[512];
    const char *bad[][2] = {
        {"pages / { }\n", "without a docroot"},
        {"docroot /d;\npages admin/ { }\n", "must start with '/'"},
        {"docroot /d;\npages /a/../b/ { }\n", "invalid pages folder"},
        {"docroot /d;\npages /a//b/ { }\n", "invalid pages folder"},
        {"docroot /d;\npages / { }\npages / { }\n", "duplicate pages folder"},
        {"docroot /d;\npages / { sandbox nope; }\n", "undefined sandbox 'nope'"},
        {"docroot /d;\npages / { workers 2; }\n", "in pages block"},
        {"page-compiler \"gcc -O0\";\n", "invalid page-compiler"},
        {"page-compiler bin/cc;\n", "invalid page-compiler"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_true(parse_bad(bad[i][0], strlen(bad[i][0]), err, sizeof(err)) < 0);
        if (!strstr(err, bad[i][1]))
            fail_msg("'%s': got '%s', expected '%s'", bad[i][0], err, bad[i][1]);
    }
}

static void test_free_null(void **state)
{
    (void)state;
    sandlet_conf_free(NULL);
}

/* Which database strings keep a worker's AF_UNIX sockets (issue 29):
 * those that may reach the server through a unix socket, and only those. */
static void test_database_unix(void **state)
{
    (void)state;
    static const char *const unix_ones[] = {
        "dbname=x",                       /* libpq's default socket directory */
        "host=/run/postgresql dbname=x",  /* a socket directory */
        "host=@pg dbname=x",              /* an abstract socket */
        "host=db.example,/tmp dbname=x",  /* one of several */
        "host=db.example, dbname=x",      /* an empty entry: the default */
        "service=shop",                   /* the service file decides */
        "host=db.example port=5432 user", /* unparsable: libpq decides */
    };
    static const char *const tcp_ones[] = {
        "host=127.0.0.1 dbname=x",
        "host=db.example,10.0.0.2 port=5432,5433",
        "hostaddr=10.0.0.2 dbname=x",
        "host=/tmp hostaddr=10.0.0.2",
    };
    for (size_t i = 0; i < sizeof(unix_ones) / sizeof(unix_ones[0]); i++)
        if (!sandlet_conf_database_unix(unix_ones[i]))
            fail_msg("'%s' taken for TCP only", unix_ones[i]);
    for (size_t i = 0; i < sizeof(tcp_ones) / sizeof(tcp_ones[0]); i++)
        if (sandlet_conf_database_unix(tcp_ones[i]))
            fail_msg("'%s' taken for a unix socket", tcp_ones[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* First: it looks at a process that never loaded libpq. */
        cmocka_unit_test(test_no_pq_parse_loads_no_libpq),
        cmocka_unit_test(test_full_example),
        cmocka_unit_test(test_empty_gets_defaults),
        cmocka_unit_test(test_queue_timeout),
        cmocka_unit_test(test_send_timeout),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_default_timeout),
        cmocka_unit_test(test_size_limits),
        cmocka_unit_test(test_session_settings),
        cmocka_unit_test(test_session_cookies),
        cmocka_unit_test(test_session_secret_file),
        cmocka_unit_test(test_database),
        cmocka_unit_test(test_database_roles),
        cmocka_unit_test(test_check_databases),
        cmocka_unit_test(test_database_password_file),
        cmocka_unit_test(test_confinement_settings),
        cmocka_unit_test(test_limit_defaults),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_reload_rules),
        cmocka_unit_test(test_reload_same_file),
        cmocka_unit_test(test_parse_public),
        cmocka_unit_test(test_reload_blob),
        cmocka_unit_test(test_default_sandbox),
        cmocka_unit_test(test_sandbox_declared_later),
        cmocka_unit_test(test_library_paths),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_error_log_syslog),
        cmocka_unit_test(test_text_not_nul_terminated),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_hosts),
        cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_error_buffer),
        cmocka_unit_test(test_route),
        cmocka_unit_test(test_route_no_match),
        cmocka_unit_test(test_route_not_nul_terminated),
        cmocka_unit_test(test_load_missing),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_load_too_large),
        cmocka_unit_test(test_pages),
        cmocka_unit_test(test_free_null),
        cmocka_unit_test(test_database_unix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

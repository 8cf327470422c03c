/*
 * test_hostile.c - hostile servlets in confined sandboxes next to a
 * well-behaved one: every attack fails, the log names what happened, and
 * the well-behaved servlet keeps answering 200 throughout.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "common/conf.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <unistd.h>

static th_daemon d;
static char dir_a[64], dir_b[64], dir_q[64], secret_b[128];
static int listener = -1, other_listener = -1, abstract_listener = -1, path_listener = -1;
static unsigned listen_port, other_port;
static char abstract_name[64], path_name[108];

/* A loopback TCP listener on a free port. */
static int tcp_listener(unsigned *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 8) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

static int group_setup(void **state)
{
    (void)state;
    if (th_unconfined())
        return 0;
    th_prepare();
    if (th_tempdir(dir_a, sizeof(dir_a), "a", 0) < 0 ||
        th_tempdir(dir_b, sizeof(dir_b), "b", 0) < 0 ||
        th_tempdir(dir_q, sizeof(dir_q), "q", 0) < 0)
        return -1;
    snprintf(secret_b, sizeof(secret_b), "%s/secret", dir_b);
    FILE *f = fopen(secret_b, "w");
    if (!f)
        return -1;
    fputs("other sandbox's data", f);
    fclose(f);
    bool root = geteuid() == 0;
    if (root) {
        /* Sandbox b runs as nobody: its directory must be its own. */
        if (chmod(dir_a, 0777) < 0 || chmod(dir_q, 0777) < 0 || chown(dir_b, 65534, 65534) < 0 ||
            chown(secret_b, 65534, 65534) < 0 || chmod(dir_b, 0700) < 0 ||
            chmod(secret_b, 0600) < 0) {
            perror("test_hostile: preparing the sandboxes' folders");
            return -1;
        }
    }
    /* Loopback listeners: the database group's configured port, and one
     * it must not reach. */
    listener = tcp_listener(&listen_port);
    other_listener = tcp_listener(&other_port);
    if (listener < 0 || other_listener < 0)
        return -1;
    /* An abstract unix socket of ours (root's, when run as root). */
    snprintf(abstract_name, sizeof(abstract_name), "sandlet-test-%d", (int)getpid());
    abstract_listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    memcpy(un.sun_path + 1, abstract_name, strlen(abstract_name));
    socklen_t unlen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(abstract_name));
    if (abstract_listener < 0 || bind(abstract_listener, (struct sockaddr *)&un, unlen) < 0 ||
        listen(abstract_listener, 8) < 0)
        return -1;

    /* A pathname socket anyone may connect to, as journald's, the system
     * bus's or a PostgreSQL's are. */
    snprintf(path_name, sizeof(path_name), "/tmp/sandlet-test-%d.sock", (int)getpid());
    unlink(path_name);
    path_listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un pun = {.sun_family = AF_UNIX};
    snprintf(pun.sun_path, sizeof(pun.sun_path), "%s", path_name);
    if (path_listener < 0 || bind(path_listener, (struct sockaddr *)&pun, sizeof(pun)) < 0 ||
        listen(path_listener, 8) < 0 || chmod(path_name, 0777) < 0)
        return -1;

    const char *hostile = th_fixture("hostile");
    char conf[8192];
    snprintf(conf, sizeof(conf),
             "status-page /status;\n"
             "sandbox good { workers 1; }\n"
             "servlet /good/* { library \"%s\"; sandbox good; }\n"
             "sandbox evil { workers 1; memory 128; timeout 3000; }\n"
             "servlet /evil { library \"%s\"; sandbox evil; }\n"
             "sandbox files { workers 1; syscalls files; writable \"%s\"; }\n"
             "servlet /files { library \"%s\"; sandbox files; }\n"
             "sandbox other { workers 1; %s syscalls files; writable \"%s\"; }\n"
             "servlet /other { library \"%s\"; sandbox other; }\n"
             "servlet /other-probe/* { library \"%s\"; sandbox other; }\n"
             "sandbox db { workers 1; syscalls database; database-port %u; }\n"
             "servlet /db { library \"%s\"; sandbox db; param unix-path \"%s\"; }\n"
             "sandbox udb { workers 1; database \"host=/nonexistent/sandlet dbname=x\"; }\n"
             "servlet /udb { library \"%s\"; sandbox udb; param unix-path \"%s\"; }\n"
             "sandbox nolimit { workers 1; }\n"
             "servlet /nolimit { library \"%s\"; sandbox nolimit; }\n"
             "sandbox quota { workers 1; syscalls files; writable \"%s\"; write-quota 1m;\n"
             "                max-file-size 768k; }\n"
             "servlet /quota { library \"%s\"; sandbox quota; }\n",
             th_fixture("probe"), hostile, dir_a, hostile,
             root ? "user nobody; group nogroup;" : "", dir_b, hostile, th_fixture("probe"),
             listen_port, hostile, path_name, hostile, path_name, hostile, dir_q, hostile);
    return th_start(&d, conf, false);
}

static int group_teardown(void **state)
{
    (void)state;
    if (th_confinement_off(NULL))
        return 0;
    if (listener >= 0)
        close(listener);
    if (other_listener >= 0)
        close(other_listener);
    if (abstract_listener >= 0)
        close(abstract_listener);
    if (path_listener >= 0)
        close(path_listener);
    unlink(path_name);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s' '%s'", dir_a, dir_b, dir_q);
    if (system(cmd) != 0)
        return -1;
    return th_stop(&d) == 0 ? 0 : -1;
}

static void get(const char *target, th_response *r)
{
    assert_int_equal(th_request(d.port, "GET", target, NULL, NULL, 0, r), 0);
}

static void assert_good_alive(void)
{
    th_response r;
    get("/good/param?v=fine", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "fine");
    th_response_free(&r);
}

/* An attack that must kill its worker with the given status, with the
 * log naming the forbidden system call; the sandbox then recovers. */
static void attack_dies(const char *path, const char *what, const char *arg, int status,
                        const char *log_needle)
{
    char target[256];
    snprintf(target, sizeof(target), "%s?do=%s&arg=%s", path, what, arg);
    th_response r;
    get(target, &r);
    assert_int_equal(r.status, status);
    th_response_free(&r);
    if (log_needle)
        assert_true(th_log_wait(&d, log_needle, 3000));
    assert_good_alive();
    /* The attacker's sandbox serves again (and its crash count resets). */
    snprintf(target, sizeof(target), "%s?do=nothing", path);
    get(target, &r);
    assert_int_equal(r.status, 404);
    th_response_free(&r);
}

static void test_worker_status(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    th_response r;
    get("/other-probe/pid", &r);
    assert_int_equal(r.status, 200);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%s/status", r.body);
    th_response_free(&r);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256];
    bool nnp = false, seccomp = false, capeff = false, uid_ok = geteuid() != 0;
    while (fgets(line, sizeof(line), f)) {
        nnp |= strcmp(line, "NoNewPrivs:\t1\n") == 0;
        seccomp |= strcmp(line, "Seccomp:\t2\n") == 0;
        capeff |= strcmp(line, "CapEff:\t0000000000000000\n") == 0;
        if (strncmp(line, "Uid:", 4) == 0 && geteuid() == 0)
            uid_ok = strcmp(line, "Uid:\t65534\t65534\t65534\t65534\n") == 0;
    }
    fclose(f);
    assert_true(nnp);
    assert_true(seccomp);
    assert_true(capeff);
    assert_true(uid_ok);
    if (th_skip_unless_root(": the other-uid check of sandbox 'other' and the acceptor's "
                            "dropped privileges were not checked"))
        return;
    /* Started as root without a "user" line: the acceptor, which faces
     * the network, runs as the first uid of sandletd's reserved range
     * (not nobody, which other daemons share), with no capability left. */
    snprintf(path, sizeof(path), "/proc/%d/status", (int)d.pid);
    f = fopen(path, "r");
    assert_non_null(f);
    bool uid_reserved = false, no_eff = false, no_prm = false, no_groups = false;
    char want_uid[96], want_log[64];
    unsigned first = SANDLET_DEFAULT_DYNAMIC_UID_FIRST;
    snprintf(want_uid, sizeof(want_uid), "Uid:\t%u\t%u\t%u\t%u\n", first, first, first, first);
    snprintf(want_log, sizeof(want_log), "the acceptor runs as uid %u", first);
    while (fgets(line, sizeof(line), f)) {
        uid_reserved |= strcmp(line, want_uid) == 0;
        no_eff |= strcmp(line, "CapEff:\t0000000000000000\n") == 0;
        no_prm |= strcmp(line, "CapPrm:\t0000000000000000\n") == 0;
        if (strncmp(line, "Groups:", 7) == 0)
            no_groups = strspn(line + 7, " \t\n") == strlen(line + 7);
    }
    fclose(f);
    assert_true(uid_reserved);
    assert_true(no_eff);
    assert_true(no_prm);
    assert_true(no_groups);
    assert_true(th_log_contains(&d, want_log));
}

static long seccomp_kills(void)
{
    th_response r;
    get("/status?format=prometheus", &r);
    const char *series = "sandlet_seccomp_kills_total{sandbox=\"evil\"} ";
    const char *p = strstr(r.body, series);
    long n = p ? atol(p + strlen(series)) : -1;
    th_response_free(&r);
    return n;
}

static void test_forbidden_syscalls(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    attack_dies("/evil", "exec", "", 502, "forbidden system call execve (59); never allowed");
    attack_dies("/evil", "fork", "", 502, "forbidden system call clone");
    attack_dies("/evil", "shadow", "", 502,
                "forbidden system call openat (257); 'syscalls files;' in the sandbox's block");
    attack_dies("/evil", "connect", "1", 502,
                "forbidden system call socket (41); only a sandbox with a 'database' line");
    attack_dies("/evil", "ptrace", "1", 502, "forbidden system call ptrace");
    attack_dies("/evil", "setuid", "", 502,
                "forbidden system call setuid (105); no 'syscalls' group allows it");
    attack_dies("/evil", "wx", "", 502,
                "forbidden system call mmap (9); allowed only with other arguments");
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)d.pid);
    attack_dies("/evil", "kill", pid, 502, "forbidden system call kill");
    assert_int_equal(kill(d.pid, 0), 0);
    /* Nor can it kill another sandbox's worker: the same one answers. */
    th_response w;
    get("/good/pid", &w);
    assert_int_equal(w.status, 200);
    snprintf(pid, sizeof(pid), "%s", w.body);
    th_response_free(&w);
    assert_true(atoi(pid) > 1);
    attack_dies("/evil", "kill", pid, 502, "forbidden system call kill");
    assert_int_equal(kill((pid_t)atoi(pid), 0), 0);
    get("/good/pid", &w);
    assert_string_equal(w.body, pid);
    th_response_free(&w);
    /* Every one of them was logged with the sandbox and the request. */
    assert_true(th_log_contains(&d, "worker evil"));
    assert_true(th_log_contains(&d, "killed by signal 31"));
    assert_true(th_log_contains(&d, "GET /evil?do=exec&arg= HTTP/1.1"));
    /* And counted as such on the status page: from the kernel's records,
     * which the supervisor reads when it may (as root). */
    if (geteuid() == 0)
        assert_true(seccomp_kills() >= 9);
}

/* How many times needle is in the daemon's log. */
static int log_count(const char *needle)
{
    char *log = th_slurp(d.log, NULL);
    int n = 0;
    for (const char *p = log; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(log);
    return n;
}

/* Issue 29: a worker that sends itself SIGSYS dies as a seccomp kill
 * would (same signal, same status), but only the kernel's seccomp record
 * counts, and the worker cannot write one. */
static void test_self_sent_sigsys(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    long before = seccomp_kills();
    assert_true(before >= 0);
    attack_dies("/evil", "sigsys", "", 502, "none (SIGSYS sent by a process)");
    assert_int_equal(seccomp_kills(), before);
    assert_true(th_log_wait(&d, "no seccomp record from the kernel", 3000));
    /* A real one still counts, named by the kernel's record, when the
     * supervisor may read /dev/kmsg (root, or dmesg_restrict off). */
    attack_dies("/evil", "setuid", "", 502, "forbidden system call setuid (105)");
    if (geteuid() == 0) {
        assert_true(th_log_wait(&d,
                                "killed by seccomp: the kernel reports the forbidden system "
                                "call setuid (105)",
                                3000));
        assert_int_equal(seccomp_kills(), before + 1);
    }
    /* system() blocks every signal before it forks: the worker's own
     * report cannot run, and the supervisor's line says what happened
     * (issue 31: it died by SIGSYS with no hint). */
    static const char hint[] = "; never allowed: a servlet may not run programs or start "
                               "processes (fork(), exec, system(), popen() and posix_spawn() "
                               "all do)";
    int had = log_count(hint);
    attack_dies("/evil", "system", "", 502, NULL);
    if (geteuid() == 0) {
        for (int i = 0; i < 60 && log_count(hint) == had; i++)
            usleep(50 * 1000);
        assert_int_equal(log_count(hint), had + 1);
    }
}

/* "?do=setcookie&arg=" and value percent-encoded. */
static void setcookie_target(char *out, size_t size, const char *path, const char *value)
{
    int n = snprintf(out, size, "%s?do=setcookie&arg=", path);
    assert_true(n > 0 && (size_t)n < size);
    size_t o = (size_t)n;
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        assert_true(o + 4 < size);
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '_' || *p == '-')
            out[o++] = (char)*p;
        else
            o += (size_t)snprintf(out + o, size - o, "%%%02X", *p);
    }
    out[o] = '\0';
}

/* A Set-Cookie is judged by the name a browser will send the cookie back
 * under (RFC 6265bis 5.6, 5.8.3), not by what precedes its first '=':
 * sandbox evil may not plant good's session cookie (fixation) by any
 * spelling, nor any other session cookie name; its own cookies, and
 * cookies that only carry such a name in their value, go out.  The
 * nameless, bare and prefixed spellings were delivered before. */
static void test_foreign_set_cookie(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    static const char *const refused[] = {
        "=SLSESSION_good=TOKEN; Path=/good", /* issue 29: comes back as SLSESSION_good=TOKEN */
        " =\t slsession_GOOD = TOKEN ;Path=/",
        "SLSESSION_good",          /* comes back bare: a name with no value to many parsers */
        "=SLSESSION_good",         /* the same, nameless */
        "SLSESSION_good=TOKEN",    /* the plain spelling, refused before too */
        "=SLSESSION_future=TOKEN", /* no sandbox yet: a reload may add one */
        "__Host-SLSESSION_good=TOKEN; Secure; Path=/",
        "=__Secure-__Host-SLSESSION_good=TOKEN",
    };
    char target[512];
    th_response r;
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        setcookie_target(target, sizeof(target), "/evil", refused[i]);
        get(target, &r);
        if (r.status != 502)
            fail_msg("Set-Cookie: %s: status %d, expected 502", refused[i], r.status);
        char sc[256];
        assert_false(th_header(&r, "Set-Cookie", sc, sizeof(sc)));
        assert_null(strstr(r.body, "TOKEN"));
        th_response_free(&r);
    }
    assert_true(
        th_log_wait(&d,
                    "servlet /evil of sandbox 'evil' tried to set the session cookie "
                    "SLSESSION_good of sandbox 'good' (GET /evil?do=setcookie&arg=%3DSLSESSION",
                    3000));
    assert_true(th_log_wait(&d,
                            "servlet /evil of sandbox 'evil' tried to set the session cookie "
                            "SLSESSION_future, which is not its own",
                            3000));
    assert_good_alive();
    static const char *const allowed[] = {
        "=theme=dark",                /* nameless, but no session cookie */
        "SLSESSION_evil=x; Path=/",   /* its own */
        "=slsession_EVIL=x",          /* its own, nameless */
        "theme=SLSESSION_good=TOKEN", /* comes back as the cookie theme */
        "==SLSESSION_good=TOKEN",     /* comes back as \"=SLSESSION...\": an empty name */
    };
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
        setcookie_target(target, sizeof(target), "/evil", allowed[i]);
        get(target, &r);
        if (r.status != 200)
            fail_msg("Set-Cookie: %s: status %d, expected 200", allowed[i], r.status);
        char sc[256];
        assert_true(th_header(&r, "Set-Cookie", sc, sizeof(sc)));
        assert_string_equal(sc, allowed[i]);
        th_response_free(&r);
    }
}

static void test_runaway_servlets(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    /* An endless loop: killed at the timeout, 504. */
    attack_dies("/evil", "spin", "", 504, "ran past its timeout");
    /* Allocating without end: the address-space limit stops it. */
    th_response r;
    get("/evil?do=alloc", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "survived: malloc failed at the limit");
    th_response_free(&r);
    assert_good_alive();
}

static void test_files_fenced(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    th_response r;
    char target[256];
    /* Its own writable directory: allowed. */
    snprintf(target, sizeof(target), "/files?do=write&arg=%s/mine", dir_a);
    get(target, &r);
    assert_string_equal(r.body + strlen(r.body) - 3, ": 1");
    th_response_free(&r);
    /* Anywhere else: refused. */
    get("/files?do=write&arg=/tmp/sandlet-escape", &r);
    assert_non_null(strstr(r.body, ": -13"));
    th_response_free(&r);
    assert_int_equal(access("/tmp/sandlet-escape", F_OK), -1);
    /* Another sandbox's directory: refused. */
    snprintf(target, sizeof(target), "/files?do=read&arg=%s", secret_b);
    get(target, &r);
    assert_non_null(strstr(r.body, ": -13"));
    assert_null(strstr(r.body, "other sandbox's data"));
    th_response_free(&r);
    get("/files?do=read&arg=/etc/shadow", &r);
    assert_non_null(strstr(r.body, ": -13"));
    th_response_free(&r);
    /* The owner reads its own file. */
    snprintf(target, sizeof(target), "/other?do=read&arg=%s", secret_b);
    get(target, &r);
    assert_non_null(strstr(r.body, "other sandbox's data"));
    th_response_free(&r);
    assert_good_alive();
}

/* The upload spool (issue 29): a worker holds a read-only descriptor of
 * its spool file and no right in the spool folder, so it can neither
 * make a file there (named or not) nor grow its own.  With the base
 * allowlist it cannot open anything at all. */
static void test_spool_fenced(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    th_response r;
    char target[512];
    snprintf(target, sizeof(target), "/files?do=tmpfile&arg=%s/spool/files", d.dir);
    get(target, &r);
    printf("  %s\n", r.body);
    assert_non_null(strstr(r.body, ": -13"));
    th_response_free(&r);
    snprintf(target, sizeof(target), "/files?do=write&arg=%s/spool/files/planted", d.dir);
    get(target, &r);
    printf("  %s\n", r.body);
    assert_non_null(strstr(r.body, ": -13"));
    th_response_free(&r);
    snprintf(target, sizeof(target), "%s/spool/files/planted", d.dir);
    assert_int_equal(access(target, F_OK), -1);
    get("/files?do=fdwrite&arg=6", &r);
    printf("  %s\n", r.body);
    assert_non_null(strstr(r.body, ": -9")); /* EBADF: open for reading only */
    th_response_free(&r);
    snprintf(target, sizeof(target), "%s/spool/evil", d.dir);
    attack_dies("/evil", "tmpfile", target, 502, "openat");
}

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

static void test_broken_streams(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    /* A worker that drops its socketpair mid-response: the client sees a
     * cut connection, never a response that looks complete. */
    th_conn *c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /evil?do=halfclose HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    th_response r;
    assert_int_equal(th_read(c, &r, false), -1);
    th_response_free(&r);
    th_close(c);
    assert_good_alive();
    get("/evil?do=nothing", &r);
    assert_int_equal(r.status, 404);
    th_response_free(&r);

    /* A 1 GiB response to a client that does not read: backpressure keeps
     * the acceptor's memory bounded. */
    long before = rss_kb(d.pid);
    c = th_connect(d.port, false);
    assert_non_null(c);
    assert_int_equal(th_send_str(c, "GET /evil?do=flood HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    sleep(2);
    long during = rss_kb(d.pid);
    assert_true(before > 0 && during > 0);
    if (during - before > 32 * 1024)
        fail_msg("acceptor grew from %ld to %ld KiB", before, during);
    assert_good_alive();
    th_close(c);
}

/* GET target and expect 200 with exactly body. */
static void expect_body(const char *target, const char *body)
{
    th_response r;
    get(target, &r);
    if (r.status != 200 || strcmp(r.body, body) != 0)
        print_message("%s: %d %s (expected 200 %s)\n", target, r.status, r.body, body);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, body);
    th_response_free(&r);
}

static void test_database_group(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    char target[128], want[64];
    /* Its database port: allowed. */
    snprintf(target, sizeof(target), "/db?do=connect&arg=%u", listen_port);
    expect_body(target, "connect: 0");
    /* Any other TCP port on loopback, the acceptor's own listener (and
     * its loopback-only status page) included: refused by Landlock. */
    snprintf(target, sizeof(target), "/db?do=connect&arg=%u", other_port);
    snprintf(want, sizeof(want), "connect: %d", -EACCES);
    expect_body(target, want);
    snprintf(target, sizeof(target), "/db?do=connect&arg=%u", d.port);
    expect_body(target, want);
    /* Unix sockets: a sandbox whose database is not one makes none, so
     * it reaches no pathname socket (which Landlock does not fence),
     * neither in init (EACCES) nor later (killed), and no abstract one. */
    snprintf(want, sizeof(want), "init connect: %d", -EACCES);
    expect_body("/db?do=init_path", want);
    attack_dies("/db", "path", path_name, 502,
                "forbidden system call socket (41); allowed only with other arguments");
    attack_dies("/db", "abstract", abstract_name, 502, "forbidden system call socket (41)");
    /* Nor does a sandbox whose database is on a unix socket: its worker
     * connected before it confined itself, and a fresh worker reconnects
     * (here the database does not even exist: a warning, then 503s). */
    expect_body("/udb?do=init_path", want);
    attack_dies("/udb", "path", path_name, 502, "forbidden system call socket (41)");
    /* UDP (and raw, netlink...): no such socket at all. */
    attack_dies("/db", "udp", "", 502, "forbidden system call socket");
    /* Signals to other processes: refused. */
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)d.pid);
    attack_dies("/db", "kill", pid, 502, "forbidden system call kill");
    assert_int_equal(kill(d.pid, 0), 0);
}

/* W^X: once confined, no page becomes executable, whichever way. */
static void test_wx_bypass(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    attack_dies("/evil", "mremap_alias", "", 502, "forbidden system call mremap");
    attack_dies("/evil", "mremap_dontunmap", "", 502, "forbidden system call mremap");
    attack_dies("/evil", "mprotect_exec", "", 502, "forbidden system call mprotect");
    attack_dies("/evil", "memfd_double", "", 502, "forbidden system call mmap");
    /* Also from a sandbox with every group. */
    attack_dies("/files", "mremap_alias", "", 502, "forbidden system call mremap");
    attack_dies("/db", "memfd_double", "", 502, "forbidden system call mmap");
}

/* A sandbox with no memory line is still bounded. */
static void test_default_memory(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    expect_body("/nolimit?do=alloc", "survived: malloc failed at the limit");
    assert_good_alive();
}

/* max-file-size: 64m by default; a write past it fails with EFBIG and the
 * worker lives on (SIGXFSZ would kill it). */
static void test_file_size(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    char target[256], want[64];
    snprintf(target, sizeof(target), "/files?do=fill&arg=%s/big&n=%lld", dir_a,
             64LL * 1024 * 1024 + 1);
    snprintf(want, sizeof(want), "fill: %lld %d", 64LL * 1024 * 1024, EFBIG);
    expect_body(target, want);
    snprintf(target, sizeof(target), "%s/big", dir_a);
    struct stat st;
    assert_int_equal(stat(target, &st), 0);
    assert_int_equal(st.st_size, 64LL * 1024 * 1024);
    unlink(target);
    th_response r;
    get("/files?do=nothing", &r);
    assert_int_equal(r.status, 404);
    th_response_free(&r);
}

/* Writes one byte to dir_q/probe until the answer is want (the supervisor
 * measures every two seconds), for at most 10 s. */
static bool quota_wait(const char *want)
{
    char target[256];
    snprintf(target, sizeof(target), "/quota?do=fill&arg=%s/probe&n=1", dir_q);
    for (unsigned long long end = th_now_ms() + 10000; th_now_ms() < end;) {
        th_response r;
        get(target, &r);
        bool done = r.status == 200 && strcmp(r.body, want) == 0;
        th_response_free(&r);
        if (done)
            return true;
        usleep(200 * 1000);
    }
    return false;
}

static void test_write_quota(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    char target[256], want[64];
    /* Two files under max-file-size, together over write-quota 1m. */
    for (int i = 0; i < 2; i++) {
        snprintf(target, sizeof(target), "/quota?do=fill&arg=%s/f%d&n=%d", dir_q, i, 700 * 1024);
        snprintf(want, sizeof(want), "fill: %d 0", 700 * 1024);
        expect_body(target, want);
    }
    /* Within a check or two, the workers lose write access... */
    snprintf(want, sizeof(want), "fill: 0 %d", EACCES);
    assert_true(quota_wait(want));
    assert_true(th_log_contains(&d, "sandbox 'quota' is over its write quota"));
    assert_good_alive();
    /* ...and get it back once room is made. */
    for (int i = 0; i < 2; i++) {
        snprintf(target, sizeof(target), "%s/f%d", dir_q, i);
        assert_int_equal(unlink(target), 0);
    }
    assert_true(quota_wait("fill: 1 0"));
    assert_true(th_log_contains(&d, "sandbox 'quota' is below its write quota again"));
}

/* Issue 29: sandboxes whose writable directories share a filesystem are
 * told at start what bounds them there (open-files x max-file-size per
 * worker, files deleted while open being invisible to write-quota's
 * walk), with the fix.  Here 'files', 'other' and 'quota' all write to
 * the test's /tmp. */
static void test_shared_filesystem(void **state)
{
    (void)state;
    if (th_unconfined())
        skip();
    assert_true(th_log_contains(&d, "sandboxes 'files' and 'other' write to one filesystem"));
    assert_true(th_log_contains(&d, "'quota' 768 MiB (write-quota 1024 KiB)"));
    assert_true(th_log_contains(&d, "'files' 64 GiB (write-quota 1024 MiB)"));
    assert_true(th_log_contains(&d, "a filesystem of their own, or a user or project quota"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_status),      cmocka_unit_test(test_forbidden_syscalls),
        cmocka_unit_test(test_self_sent_sigsys),   cmocka_unit_test(test_runaway_servlets),
        cmocka_unit_test(test_foreign_set_cookie), cmocka_unit_test(test_files_fenced),
        cmocka_unit_test(test_broken_streams),     cmocka_unit_test(test_database_group),
        cmocka_unit_test(test_wx_bypass),          cmocka_unit_test(test_default_memory),
        cmocka_unit_test(test_file_size),          cmocka_unit_test(test_write_quota),
        cmocka_unit_test(test_shared_filesystem),  cmocka_unit_test(test_spool_fenced),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

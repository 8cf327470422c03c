/*
 * test_scaleout.c - the scale-out setup of the README ("Several hosts
 * behind a load balancer") as users run it, on loopback: a throwaway
 * PostgreSQL (tests/db/pgtest.h), two sandletd serving the cart from a
 * sandbox with "sessions database" and one session-secret-file, and
 * Debian's HAProxy in front, round robin, no stickiness, with health
 * checks, retries and redispatch.  The cart flow runs through HAProxy with
 * a cookie while requests alternate hosts, goes on when one host is
 * stopped mid-flow (no request may fail) and after it is started again.
 *
 * Which host answered is told twice, and both must agree: HAProxy names
 * the server in a response header (X-Served-By, set by this test's
 * configuration), and each sandletd's own access log counts what it
 * served.  Everything started here is stopped in the teardown, also when
 * a test failed; haproxy also dies with this process (PDEATHSIG).
 *
 * It must never reach beyond 127.0.0.1, and it FAILS (never skips) when
 * haproxy or the PostgreSQL server binaries are missing: the message
 * names scripts/install-deps.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "../db/pgtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* How long a stopped or restarted host may take to leave or rejoin. */
#define REJOIN_MS 10000

static pgtest pg;
static th_daemon host[2];
static char hostconf[2][4096];
static const char *const hostname[2] = {"a", "b"};
static char dir[64], docroot[64];
static char secret[128], accesslog[2][128], hacfg[128], halog[128], hasock[128];
static pid_t haproxy;
static unsigned haport;

/* The haproxy binary: $HAPROXY, or Debian's. */
static const char *haproxy_path(void)
{
    const char *p = getenv("HAPROXY");
    return p && *p ? p : "/usr/sbin/haproxy";
}

/* A loopback port nobody listens on right now, for haproxy's frontend
 * (haproxy cannot report a port the kernel chose); 0 on failure. */
static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    unsigned port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    int rc = write(fd, text, len) == (ssize_t)len ? 0 : -1;
    return close(fd) == 0 ? rc : -1;
}

/* haproxy's configuration: a global section of the test's own (a stats
 * socket, the log to haproxy's stderr), then the shipped
 * examples/scaleout/haproxy.cfg with only its addresses changed (the
 * frontend's bind and servers a and b to the test's loopback ports), and
 * one line added to its backend: the header that names the server.  The
 * example's health checks, retries and redispatch are the ones tested.  A
 * host that stops is noticed by the checks only after about three
 * seconds, so the requests right after the stop do reach its closed port
 * and must be redispatched. */
static int write_haproxy_cfg(void)
{
    const char *srcdir = getenv("SANDLET_SRCDIR");
    char example[512];
    snprintf(example, sizeof(example), "%s/examples/scaleout/haproxy.cfg", srcdir ? srcdir : ".");
    char *text = th_slurp(example, NULL);
    if (!text) {
        fprintf(stderr, "%s: %s\n", example, strerror(errno));
        return -1;
    }
    FILE *out = fopen(hacfg, "we");
    if (!out) {
        free(text);
        return -1;
    }
    fprintf(out,
            "global\n"
            "    maxconn 200\n"
            "    log stderr format short local0\n"
            "    stats socket %s mode 600 level user\n",
            hasock);
    int binds = 0, servers[2] = {0};
    char section[64] = "";
    for (char *line = text, *next; *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        else
            next = line + strlen(line);
        const char *p = line + strspn(line, " ");
        if (line[0] != ' ' && line[0] != '#' && line[0] != '\0')
            snprintf(section, sizeof(section), "%s", line);
        if (strncmp(p, "bind ", 5) == 0) {
            fprintf(out, "    bind 127.0.0.1:%u\n", haport);
            binds++;
            continue;
        }
        bool server = false;
        for (int h = 0; h < 2; h++) {
            char prefix[16];
            snprintf(prefix, sizeof(prefix), "server %s ", hostname[h]);
            if (strncmp(p, prefix, strlen(prefix)) != 0)
                continue;
            const char *rest = p + strlen(prefix);
            rest += strspn(rest, " ");
            rest += strcspn(rest, " "); /* the example's address */
            fprintf(out, "    server %s 127.0.0.1:%u%s\n", hostname[h], host[h].port, rest);
            servers[h]++;
            server = true;
        }
        if (!server)
            fprintf(out, "%s\n", line);
    }
    fprintf(out, "    http-response set-header X-Served-By %%[srv_name]\n");
    free(text);
    if (fclose(out) != 0)
        return -1;
    if (binds != 1 || servers[0] != 1 || servers[1] != 1 || strcmp(section, "backend sandlet")) {
        fprintf(stderr,
                "%s: the test expects one bind, servers a and b, and \"backend sandlet\" as the "
                "last section (found %d binds, %d a, %d b, last \"%s\")\n",
                example, binds, servers[0], servers[1], section);
        return -1;
    }
    return 0;
}

/* Starts haproxy in the foreground (-db) and waits until it answers; 0 or
 * -1 with the reason printed. */
static int start_haproxy(void)
{
    if (access(haproxy_path(), X_OK) != 0) {
        fprintf(stderr, "%s: not found; run scripts/install-deps (it installs haproxy)\n",
                haproxy_path());
        return -1;
    }
    pid_t parent = getpid();
    haproxy = fork();
    if (haproxy < 0)
        return -1;
    if (haproxy == 0) {
        int fd = open(halog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        execl(haproxy_path(), "haproxy", "-db", "-f", hacfg, (char *)NULL);
        _exit(127);
    }
    for (unsigned long long t0 = th_now_ms(); th_now_ms() - t0 < REJOIN_MS;) {
        th_response r;
        if (th_request(haport, "GET", "/health.txt", NULL, NULL, 0, &r) == 0) {
            int status = r.status;
            th_response_free(&r);
            if (status == 200)
                return 0;
        }
        int st;
        if (waitpid(haproxy, &st, WNOHANG) == haproxy) {
            haproxy = 0;
            break;
        }
        usleep(50 * 1000);
    }
    char *log = th_slurp(halog, NULL);
    fprintf(stderr, "haproxy did not answer on 127.0.0.1:%u; its output:\n%s\n", haport,
            log ? log : "(none)");
    free(log);
    return -1;
}

static void stop_haproxy(void)
{
    if (haproxy <= 0)
        return;
    kill(haproxy, SIGTERM);
    int st;
    for (int waited = 0; waited < 5000; waited += 10) {
        if (waitpid(haproxy, &st, WNOHANG) == haproxy) {
            haproxy = 0;
            return;
        }
        usleep(10 * 1000);
    }
    kill(haproxy, SIGKILL);
    waitpid(haproxy, &st, 0);
    haproxy = 0;
}

/* Set once the flow has passed; until then the teardown shows the logs. */
static bool passed;

/* The last 40 lines of a log, for a failure's diagnosis. */
static void show_log(const char *what, const char *path)
{
    size_t len = 0;
    char *log = path[0] ? th_slurp(path, &len) : NULL;
    const char *from = log;
    for (int lines = 0; log && len > 0 && from == log; len--)
        if (log[len - 1] == '\n' && ++lines > 40)
            from = log + len;
    fprintf(stderr, "--- %s (%s), the end:\n%s\n", what, path, from ? from : "(none)");
    free(log);
}

static int teardown(void **state)
{
    (void)state;
    stop_haproxy();
    if (!passed) {
        show_log("haproxy", halog);
        for (int h = 0; h < 2; h++)
            if (host[h].log[0])
                show_log(hostname[h], host[h].log);
    }
    int rc = 0;
    for (int h = 0; h < 2; h++)
        if (host[h].pid && th_stop(&host[h]) != 0)
            rc = -1;
    pgtest_destroy(&pg);
    const char *files[] = {secret, accesslog[0], accesslog[1], hacfg, halog, hasock};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (files[i][0])
            unlink(files[i]);
    if (docroot[0]) {
        char path[128];
        snprintf(path, sizeof(path), "%s/health.txt", docroot);
        unlink(path);
        rmdir(docroot);
    }
    if (dir[0])
        rmdir(dir);
    return rc;
}

static int setup_steps(void)
{
    th_prepare();
    if (pgtest_start_or_say(&pg) != 0)
        return -1;
    if (th_tempdir(dir, sizeof(dir), "scaleout", 0700) != 0 ||
        th_tempdir(docroot, sizeof(docroot), "scaleout-www", 0755) != 0)
        return -1;
    char path[128];
    snprintf(path, sizeof(path), "%s/health.txt", docroot);
    if (write_file(path, "ok\n", 0644) != 0)
        return -1;
    /* One secret on both hosts (copied there in a real setup): an id that
     * one host minted verifies on the other. */
    snprintf(secret, sizeof(secret), "%s/session.key", dir);
    int fd = open(secret, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    uint8_t key[32];
    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (uint8_t)(i * 53 + 7);
    if (fd < 0 || write(fd, key, sizeof(key)) != (ssize_t)sizeof(key))
        return -1;
    close(fd);
    snprintf(hacfg, sizeof(hacfg), "%s/haproxy.cfg", dir);
    snprintf(halog, sizeof(halog), "%s/haproxy.log", dir);
    snprintf(hasock, sizeof(hasock), "%s/haproxy.sock", dir);
    for (int h = 0; h < 2; h++) {
        snprintf(accesslog[h], sizeof(accesslog[h]), "%s/access-%s.log", dir, hostname[h]);
        int n = snprintf(hostconf[h], sizeof(hostconf[h]),
                         "session-secret-file \"%s\";\n"
                         "access-log \"%s\";\n"
                         "docroot \"%s\";\n"
                         "sandbox shop { workers 2; database \"%s\"; sessions database; }\n"
                         "servlet /cart { library \"%s\"; sandbox shop; }\n",
                         secret, accesslog[h], docroot, pg.conninfo,
                         th_build_path("examples/cart/.libs/cart.so"));
        if (n < 0 || (size_t)n >= sizeof(hostconf[h]))
            return -1;
        if (th_start(&host[h], hostconf[h], false) != 0) {
            char *log = th_slurp(host[h].log, NULL);
            fprintf(stderr, "sandletd %s did not start; its log:\n%s\n", hostname[h],
                    log ? log : "(none)");
            free(log);
            return -1;
        }
    }
    for (int tries = 0; tries < 3; tries++) {
        haport = free_port();
        if (haport && write_haproxy_cfg() == 0 && start_haproxy() == 0)
            return 0;
        stop_haproxy();
    }
    return -1;
}

static int setup(void **state)
{
    if (setup_steps() == 0)
        return 0;
    teardown(state);
    return -1;
}

/* A field of haproxy's "show stat" (CSV) for proxy px, server sv
 * ("BACKEND" for the backend's own line), copied into out; "" when the
 * line is not there. */
static void ha_field(const char *px, const char *sv, const char *field, char *out, size_t cap)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(fd >= 0 && strlen(hasock) < sizeof(sa.sun_path));
    memcpy(sa.sun_path, hasock, strlen(hasock) + 1);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    static const char cmd[] = "show stat\n";
    assert_int_equal(write(fd, cmd, sizeof(cmd) - 1), (ssize_t)sizeof(cmd) - 1);
    static char csv[64 * 1024];
    size_t len = 0;
    for (ssize_t n; len < sizeof(csv) - 1 && (n = read(fd, csv + len, sizeof(csv) - 1 - len)) > 0;)
        len += (size_t)n;
    close(fd);
    csv[len] = '\0';
    /* The header names the columns: "# pxname,svname,qcur,...". */
    if (strncmp(csv, "# ", 2) != 0)
        fail_msg("haproxy's show stat: %s", csv);
    int col = -1, i = 0;
    for (const char *p = csv + 2; *p && *p != '\n'; i++) {
        size_t n = strcspn(p, ",\n");
        if (n == strlen(field) && strncmp(p, field, n) == 0)
            col = i;
        p += n + (p[n] == ',');
    }
    assert_true(col >= 0);
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "\n%s,%s,", px, sv);
    const char *p = strstr(csv, prefix);
    p = p ? p + 1 : NULL;
    for (i = 0; i < col && p; i++) {
        p = strpbrk(p, ",\n");
        p = p && *p == ',' ? p + 1 : NULL;
    }
    size_t n = p ? strcspn(p, ",\n") : 0;
    assert_true(n < cap);
    memcpy(out, p ? p : "", n);
    out[n] = '\0';
}

/* A counter of "show stat"; -1 when not there. */
static long long ha_stat(const char *px, const char *sv, const char *field)
{
    char v[32];
    ha_field(px, sv, field, v, sizeof(v));
    return v[0] ? strtoll(v, NULL, 10) : -1;
}

/* Server sv's state as the health checks see it: "UP", "DOWN", or a
 * transition ("UP 1/3", "DOWN 1/2"). */
static void ha_status(const char *sv, char *out, size_t cap)
{
    ha_field("sandlet", sv, "status", out, cap);
}

/* What the flow has seen: responses per host, and the last host. */
static struct {
    char cookie[160]; /* "Cookie: SLSESSION_shop=...\r\n" */
    int served[2];
    int last;
    int switches, requests;
    unsigned long long slowest_ms;
} flow = {.last = -1};

/* Which host answered r (X-Served-By), 0 or 1; fails the test otherwise. */
static int served_by(const th_response *r)
{
    char who[16];
    if (!th_header(r, "X-Served-By", who, sizeof(who)))
        fail_msg("no X-Served-By in the answer (status %d):\n%s", r->status, r->head);
    for (int h = 0; h < 2; h++)
        if (strcmp(who, hostname[h]) == 0)
            return h;
    fail_msg("X-Served-By names an unknown server '%s'", who);
    return -1;
}

/* One request of the flow through haproxy; form NULL: GET.  Every answer
 * must be the expected status, carry no new session cookie once there is
 * one, and is counted for the host that served it.  Returns that host. */
static int cart(const char *target, const char *form, int expect, th_response *r)
{
    char headers[512];
    snprintf(headers, sizeof(headers), "%s%s", flow.cookie,
             form ? "Content-Type: application/x-www-form-urlencoded\r\n" : "");
    unsigned long long t0 = th_now_ms();
    if (th_request(haport, form ? "POST" : "GET", target, headers, form, form ? strlen(form) : 0,
                   r) != 0)
        fail_msg("%s %s through haproxy: no answer", form ? "POST" : "GET", target);
    unsigned long long took = th_now_ms() - t0;
    if (took > flow.slowest_ms)
        flow.slowest_ms = took;
    if (r->status != expect)
        fail_msg("%s %s: status %d, expected %d; body:\n%s", form ? "POST" : "GET", target,
                 r->status, expect, r->body);
    int h = served_by(r);
    char sc[256];
    if (flow.cookie[0] && th_header(r, "Set-Cookie", sc, sizeof(sc)))
        fail_msg("host %s set a new session cookie for a client that has one: %s", hostname[h], sc);
    flow.served[h]++;
    flow.requests++;
    if (flow.last >= 0 && h != flow.last)
        flow.switches++;
    flow.last = h;
    return h;
}

/* POST action=add/remove item; the body says the new quantity, which is
 * the one the other host saved plus or minus one when the session is
 * shared, and 1 (or 0) when it is not. */
static int change(const char *action, const char *item, unsigned expect_qty)
{
    char form[64], want[64];
    snprintf(form, sizeof(form), "action=%s&item=%s", action, item);
    snprintf(want, sizeof(want), "%s: %u\n", item, expect_qty);
    th_response r;
    int h = cart("/cart", form, 303, &r);
    if (strcmp(r.body, want) != 0)
        fail_msg("%s %s on host %s answered \"%s\", expected \"%s\": the session was not "
                 "shared",
                 action, item, hostname[h], r.body, want);
    th_response_free(&r);
    return h;
}

/* GET the cart and compare it with the quantities the flow put there. */
static int show(const unsigned qty[4])
{
    static const char *const names[4] = {"Apple", "Loaf of bread", "Cheese, 200 g",
                                         "Coffee beans, 500 g"};
    static const unsigned cents[4] = {45, 260, 399, 790};
    th_response r;
    int h = cart("/cart?action=show", NULL, 200, &r);
    unsigned total = 0;
    for (int i = 0; i < 4; i++) {
        char row[96];
        snprintf(row, sizeof(row), "<td>%u</td><td>%s</td>", qty[i], names[i]);
        if (qty[i] && !strstr(r.body, row))
            fail_msg("host %s shows a cart without \"%s\":\n%s", hostname[h], row, r.body);
        if (!qty[i] && strstr(r.body, names[i]))
            fail_msg("host %s shows %s, never added:\n%s", hostname[h], names[i], r.body);
        total += qty[i] * cents[i];
    }
    char line[64];
    snprintf(line, sizeof(line), "Total: %u.%02u", total / 100, total % 100);
    if (!strstr(r.body, line))
        fail_msg("host %s: no \"%s\" in\n%s", hostname[h], line, r.body);
    th_response_free(&r);
    return h;
}

/* Requests for /cart in host h's access log (its own count of what it
 * served), waiting for the once-a-second flush to reach want. */
static int logged(int h, int want)
{
    int n = 0;
    for (unsigned long long t0 = th_now_ms(); th_now_ms() - t0 < 3000; usleep(100 * 1000)) {
        char *log = th_slurp(accesslog[h], NULL);
        n = 0;
        for (const char *p = log; p && (p = strstr(p, "\"GET /cart")) != NULL; p++)
            n++;
        for (const char *p = log; p && (p = strstr(p, "\"POST /cart")) != NULL; p++)
            n++;
        free(log);
        if (n >= want)
            break;
    }
    return n;
}

/* A second client of the same session that shows the cart again and
 * again until told to stop (stop_fd reads EOF; 20 s at most), for
 * requests in flight while a host stops.  It writes what it saw to out_fd: int[4] = served
 * on a, served on b, failed, total.  A child of the test: no cmocka. */
static void show_until_told(int stop_fd, int out_fd, const char *cookie, const char *want)
{
    int seen[4] = {0};
    for (unsigned long long t0 = th_now_ms(); th_now_ms() - t0 < 20000;) {
        struct pollfd pfd = {.fd = stop_fd, .events = POLLIN};
        if (poll(&pfd, 1, 0) != 0)
            break;
        th_response r;
        seen[3]++;
        if (th_request(haport, "GET", "/cart?action=show", cookie, NULL, 0, &r) != 0) {
            seen[2]++;
            continue;
        }
        char who[16];
        if (r.status != 200 || !strstr(r.body, want) ||
            !th_header(&r, "X-Served-By", who, sizeof(who)) ||
            (strcmp(who, "a") && strcmp(who, "b")))
            seen[2]++;
        else
            seen[who[0] == 'a' ? 0 : 1]++;
        th_response_free(&r);
    }
    _exit(write(out_fd, seen, sizeof(seen)) == (ssize_t)sizeof(seen) ? 0 : 1);
}

static void test_cart_through_the_balancer(void **state)
{
    (void)state;
    enum { APPLE, BREAD, CHEESE, COFFEE };
    static const char *const ids[4] = {"apple", "bread", "cheese", "coffee"};
    unsigned qty[4] = {0};

    /* The start page makes the session; its cookie is the client's. */
    th_response r;
    cart("/cart", NULL, 200, &r);
    char sc[256];
    assert_true(th_header(&r, "Set-Cookie", sc, sizeof(sc)));
    size_t n = strcspn(sc, ";");
    assert_memory_equal(sc, "SLSESSION_shop=", 15);
    snprintf(flow.cookie, sizeof(flow.cookie), "Cookie: %.*s\r\n", (int)n, sc);
    th_response_free(&r);

    /* Round robin, no stickiness: each request goes to the other host, and
     * each add sees every earlier one, whichever host saved it. */
    static const int adds[] = {APPLE, APPLE, BREAD, CHEESE, APPLE, CHEESE};
    for (size_t i = 0; i < sizeof(adds) / sizeof(adds[0]); i++) {
        int before = flow.last;
        int h = change("add", ids[adds[i]], ++qty[adds[i]]);
        assert_int_not_equal(h, before);
    }
    show(qty);
    assert_int_equal(flow.switches, flow.requests - 1);
    assert_true(flow.served[0] >= 3 && flow.served[1] >= 3);

    /* Host a stops mid-flow (SIGTERM: it finishes what it has and exits).
     * The balancer has not noticed yet, so the next requests are sent to
     * a closed port: haproxy retries them on b, and no request fails. */
    int served_a = flow.served[0];
    /* Meanwhile another tab of the same client keeps reading the cart, so
     * that requests are in flight on both hosts when a stops. */
    char total[64];
    snprintf(total, sizeof(total), "Total: %u.%02u",
             (qty[APPLE] * 45 + qty[BREAD] * 260 + qty[CHEESE] * 399 + qty[COFFEE] * 790) / 100,
             (qty[APPLE] * 45 + qty[BREAD] * 260 + qty[CHEESE] * 399 + qty[COFFEE] * 790) % 100);
    int stop_pipe[2], out_pipe[2];
    assert_int_equal(pipe2(stop_pipe, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out_pipe, O_CLOEXEC), 0);
    pid_t tab = fork();
    assert_true(tab >= 0);
    if (tab == 0) {
        close(stop_pipe[1]);
        show_until_told(stop_pipe[0], out_pipe[1], flow.cookie, total);
    }
    close(stop_pipe[0]);
    close(out_pipe[1]);
    usleep(100 * 1000);
    assert_int_equal(th_stop(&host[0]), 0);
    usleep(300 * 1000);
    close(stop_pipe[1]);
    int seen[4] = {0}, st;
    ssize_t got = read(out_pipe[0], seen, sizeof(seen));
    close(out_pipe[0]);
    assert_int_equal(waitpid(tab, &st, 0), tab);
    assert_true(got == (ssize_t)sizeof(seen) && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    print_message("the other tab: %d requests while a stopped, %d failed, %d on a, %d on b\n",
                  seen[3], seen[2], seen[0], seen[1]);
    assert_int_equal(seen[2], 0);
    assert_true(seen[0] >= 1 && seen[1] >= 1);
    served_a += seen[0];
    flow.served[0] += seen[0];
    flow.served[1] += seen[1];
    flow.requests += seen[0] + seen[1];
    change("add", ids[COFFEE], ++qty[COFFEE]);
    change("add", ids[APPLE], ++qty[APPLE]);
    change("remove", ids[BREAD], --qty[BREAD]);
    change("add", ids[BREAD], ++qty[BREAD]);
    show(qty);
    show(qty);
    assert_int_equal(flow.served[0], served_a);
    /* Those requests did try the stopped host first: haproxy counted its
     * failed connections and sent them on to b. */
    long long redispatched = ha_stat("sandlet", "a", "wredis");
    assert_true(redispatched >= 1);

    /* The checks take a out; from then on no request goes near it, and
     * none needs a retry. */
    char hstate[32] = "";
    unsigned long long t0 = th_now_ms();
    for (ha_status("a", hstate, sizeof(hstate)); strcmp(hstate, "DOWN") != 0;
         ha_status("a", hstate, sizeof(hstate))) {
        if (th_now_ms() - t0 > REJOIN_MS)
            fail_msg("haproxy did not mark the stopped host down within %d ms (\"%s\")", REJOIN_MS,
                     hstate);
        show(qty);
        usleep(100 * 1000);
    }
    unsigned long long down_ms = th_now_ms() - t0;
    long long retries = ha_stat("sandlet", "BACKEND", "wretr");
    for (int i = 0; i < 4; i++)
        show(qty);
    assert_int_equal(ha_stat("sandlet", "BACKEND", "wretr"), retries);
    assert_int_equal(flow.served[0], served_a);

    /* Host a comes back on its port: once the health check passes it
     * serves again, from the same session. */
    unsigned port = host[0].port;
    char conf[sizeof(hostconf[0]) + 64];
    snprintf(conf, sizeof(conf), "%slisten 127.0.0.1:%u;\n", hostconf[0], port);
    assert_int_equal(th_start(&host[0], conf, false), 0);
    char listening[64];
    snprintf(listening, sizeof(listening), "listening on 127.0.0.1:%u", port);
    assert_true(th_log_wait(&host[0], listening, REJOIN_MS));
    t0 = th_now_ms();
    for (ha_status("a", hstate, sizeof(hstate)); strcmp(hstate, "UP") != 0;
         ha_status("a", hstate, sizeof(hstate))) {
        if (th_now_ms() - t0 > REJOIN_MS)
            fail_msg("haproxy did not bring the restarted host back within %d ms (\"%s\")",
                     REJOIN_MS, hstate);
        show(qty);
        usleep(100 * 1000);
    }
    unsigned long long up_ms = th_now_ms() - t0;
    assert_int_equal(flow.served[0], served_a);
    /* The restarted host serves the session it had, and alternation
     * resumes (which host the rejoined rotation starts with is haproxy's
     * choice). */
    flow.last = -1;
    for (int i = 0; i < 4; i++) {
        int before = flow.last;
        int h = change("add", ids[i], ++qty[i]);
        assert_true(before < 0 || h != before);
    }
    show(qty);
    assert_true(flow.served[0] > served_a);
    print_message("%d requests through haproxy: %d on a, %d on b, %lld redispatched from the "
                  "stopped a; slowest %llu ms; a marked down %llu ms after its stop, up %llu "
                  "ms after its restart\n",
                  flow.requests, flow.served[0], flow.served[1], redispatched, flow.slowest_ms,
                  down_ms, up_ms);

    /* Each host's own access log agrees with what haproxy said.  Host a's
     * log holds its lines from before and after its restart. */
    assert_int_equal(logged(0, flow.served[0]), flow.served[0]);
    assert_int_equal(logged(1, flow.served[1]), flow.served[1]);
    passed = true;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cart_through_the_balancer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

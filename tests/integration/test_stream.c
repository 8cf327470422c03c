/*
 * test_stream.c - streaming: a servlet writes 1 GiB and neither the
 * acceptor nor the worker may hold more than a bounded amount of it,
 * whether the client reads at full speed, stalls mid-response, leaves, or
 * stops reading for good; other clients are served meanwhile.
 *
 * Memory is sampled from /proc/PID/status (VmRSS while streaming, VmHWM at
 * the end) of the acceptor (the daemon's pid) and of every worker (the
 * supervisor's children).  SANDLET_TEST_STREAM_BYTES shrinks the stream
 * for slow (sanitizer) builds; the default is 1 GiB.  This file must never
 * read a whole response into memory: that would hide the very buffering it
 * looks for behind its own.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* What a bounded acceptor or worker may reach (resident), whatever the
 * size of the stream; unbounded buffering of 1 GiB goes far past it. */
#define RSS_BOUND_KB (64L * 1024)
/* The client that stops reading is cut after this long (send-timeout). */
#define SEND_TIMEOUT_MS 3000
#define STALL_MS        2000

static th_daemon d;
static uint64_t stream_bytes = (uint64_t)1 << 30;

static char *make_conf(void)
{
    static char conf[4096];
    snprintf(conf, sizeof(conf),
             "status-page /sandlet-status;\n"
             "send-timeout %d;\n"
             "sandbox stream { workers 2; }\n"
             "sandbox other { workers 1; }\n"
             "servlet /stream/* { library \"%s\"; sandbox stream; }\n"
             "servlet /other/* { library \"%s\"; sandbox other; }\n",
             SEND_TIMEOUT_MS, th_build_path("tests/fixtures/.libs/probe.so"),
             th_build_path("tests/fixtures/.libs/probe.so"));
    return conf;
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static int group_setup(void **state)
{
    (void)state;
    th_become_subreaper();
    signal(SIGPIPE, SIG_IGN);
#ifdef UNDER_ASAN
    /* AddressSanitizer keeps up to 256 MiB of freed memory in quarantine
     * by default, which would count as the daemon's own: a small one
     * leaves the daemon's real footprint measurable (it inherits this). */
    th_asan_small_quarantine();
#endif
    const char *env = getenv("SANDLET_TEST_STREAM_BYTES");
    if (env && *env)
        stream_bytes = strtoull(env, NULL, 10);
    if (stream_bytes < ((uint64_t)16 << 20))
        stream_bytes = (uint64_t)16 << 20;
    return th_start(&d, make_conf(), false);
}

static int group_teardown(void **state)
{
    (void)state;
    return th_stop(&d) == 0 ? 0 : -1;
}

/* ---- memory of the daemon's processes ------------------------------------ */

/* The workers: children of the supervisor, the acceptor's only child. */
static int worker_pids(pid_t *out, int max)
{
    pid_t sup[4];
    int ns = th_children_of(d.pid, sup, 4);
    int n = 0;
    for (int i = 0; i < ns && i < 4; i++) {
        int k = th_children_of(sup[i], out + n, max - n);
        if (k > 0)
            n += k < max - n ? k : max - n;
    }
    return n;
}

typedef struct peaks {
    long acceptor_rss, worker_rss; /* largest VmRSS seen, KiB */
    unsigned samples;
} peaks;

static void sample(peaks *p)
{
    long a = th_status_kb(d.pid, "VmRSS");
    if (a > p->acceptor_rss)
        p->acceptor_rss = a;
    pid_t w[16];
    int n = worker_pids(w, 16);
    for (int i = 0; i < n; i++) {
        long k = th_status_kb(w[i], "VmRSS");
        if (k > p->worker_rss)
            p->worker_rss = k;
    }
    p->samples++;
}

/* Peak resident memory over each process's whole life so far. */
static void check_hwm(const char *what, const peaks *p)
{
    long a = th_status_kb(d.pid, "VmHWM");
    long wmax = 0;
    pid_t w[16];
    int n = worker_pids(w, 16);
    for (int i = 0; i < n; i++) {
        long k = th_status_kb(w[i], "VmHWM");
        if (k > wmax)
            wmax = k;
    }
    printf("%s: %llu bytes; acceptor VmRSS peak %ld KiB, VmHWM %ld KiB; worker VmRSS peak %ld "
           "KiB, VmHWM %ld KiB (%u samples)\n",
           what, (unsigned long long)stream_bytes, p->acceptor_rss, a, p->worker_rss, wmax,
           p->samples);
    assert_true(p->samples > 0);
    assert_true(a > 0 && n > 0 && wmax > 0);
    if (p->acceptor_rss > RSS_BOUND_KB || a > RSS_BOUND_KB)
        fail_msg("%s: the acceptor reached %ld KiB (VmHWM %ld KiB), bound %ld", what,
                 p->acceptor_rss, a, RSS_BOUND_KB);
    if (p->worker_rss > RSS_BOUND_KB || wmax > RSS_BOUND_KB)
        fail_msg("%s: a worker reached %ld KiB (VmHWM %ld KiB), bound %ld", what, p->worker_rss,
                 wmax, RSS_BOUND_KB);
}

/* ---- a streaming client -------------------------------------------------- */

enum chunk_state { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER, CH_DONE };

typedef struct client {
    int fd;
    enum chunk_state st;
    uint64_t chunk_left;
    char line[40];
    size_t line_len;
    uint64_t got;  /* body bytes decoded so far */
    bool bad;      /* framing or pattern error */
    bool eof;      /* the server closed */
    char why[128]; /* what was bad */
} client;

/* The probe's pattern: blocks of 4096 bytes, 'a' + i % 26 in each. */
static unsigned char expected(uint64_t off)
{
    return (unsigned char)('a' + (off % 4096) % 26);
}

static void set_bad(client *c, const char *why)
{
    if (!c->bad)
        snprintf(c->why, sizeof(c->why), "%s at body offset %llu", why, (unsigned long long)c->got);
    c->bad = true;
}

/* Feeds received bytes to the chunked decoder, checking every body byte. */
static void decode(client *c, const unsigned char *p, size_t n)
{
    while (n > 0 && !c->bad && c->st != CH_DONE) {
        if (c->st == CH_DATA) {
            size_t k = c->chunk_left < n ? (size_t)c->chunk_left : n;
            for (size_t i = 0; i < k; i++)
                if (p[i] != expected(c->got + i)) {
                    c->got += i;
                    set_bad(c, "wrong byte");
                    return;
                }
            c->got += k;
            c->chunk_left -= k;
            p += k;
            n -= k;
            if (c->chunk_left == 0)
                c->st = CH_DATA_END;
            continue;
        }
        /* Lines: the size line, the CRLF after data, the trailer. */
        char ch = (char)*p++;
        n--;
        if (ch != '\n') {
            if (c->line_len + 1 >= sizeof(c->line)) {
                set_bad(c, "overlong chunk line");
                return;
            }
            c->line[c->line_len++] = ch;
            continue;
        }
        if (c->line_len == 0 || c->line[c->line_len - 1] != '\r') {
            set_bad(c, "bare LF");
            return;
        }
        c->line[c->line_len - 1] = '\0';
        c->line_len = 0;
        if (c->st == CH_DATA_END) {
            if (c->line[0] != '\0')
                set_bad(c, "no CRLF after chunk data");
            c->st = CH_SIZE;
        } else if (c->st == CH_SIZE) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(c->line, &end, 16);
            if (end == c->line || *end != '\0' || errno) {
                set_bad(c, "bad chunk size");
                return;
            }
            c->chunk_left = v;
            c->st = v ? CH_DATA : CH_TRAILER;
        } else if (c->st == CH_TRAILER && c->line[0] == '\0') {
            c->st = CH_DONE;
        }
    }
    if (n > 0 && c->st == CH_DONE)
        set_bad(c, "bytes after the last chunk");
}

static int connect_to(unsigned port, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* Set before connect, so that the window it announces is small too. */
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Connects, asks for target and reads the response head; the body's
 * first bytes go to the decoder. */
static void client_start(client *c, int rcvbuf, const char *target)
{
    memset(c, 0, sizeof(*c));
    c->fd = connect_to(d.port, rcvbuf);
    assert_true(c->fd >= 0);
    char req[512];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     target);
    assert_true(n > 0 && (size_t)n < sizeof(req));
    assert_int_equal(send(c->fd, req, (size_t)n, MSG_NOSIGNAL), n);
    char head[4096];
    size_t len = 0;
    char *end = NULL;
    while (!end) {
        struct pollfd pfd = {c->fd, POLLIN, 0};
        assert_int_equal(poll(&pfd, 1, 15000), 1);
        ssize_t k = recv(c->fd, head + len, sizeof(head) - 1 - len, 0);
        assert_true(k > 0);
        len += (size_t)k;
        head[len] = '\0';
        end = strstr(head, "\r\n\r\n");
        if (!end)
            assert_true(len < sizeof(head) - 1);
    }
    size_t hlen = (size_t)(end - head) + 4;
    if (strncmp(head, "HTTP/1.1 200 ", 13) != 0 || !strstr(head, "Transfer-Encoding: chunked"))
        fail_msg("unexpected head: %.*s", (int)hlen, head);
    decode(c, (const unsigned char *)head + hlen, len - hlen);
}

/* Reads until want body bytes arrived (or the end), sampling memory every
 * 50 ms; false on timeout. */
static bool client_read(client *c, uint64_t want, int timeout_ms, peaks *pk)
{
    static unsigned char buf[256 * 1024];
    uint64_t deadline = th_now_ms() + (uint64_t)timeout_ms, next_sample = 0;
    while (c->got < want && c->st != CH_DONE && !c->bad && !c->eof) {
        uint64_t t = th_now_ms();
        if (t >= deadline)
            return false;
        if (pk && t >= next_sample) {
            sample(pk);
            next_sample = t + 50;
        }
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        /* Past want only a little (the next chunk line), so that a
         * pause at want leaves the rest in the server's buffers. */
        uint64_t room = want - c->got;
        size_t cap = room < sizeof(buf) - 64 ? (size_t)room + 64 : sizeof(buf);
        ssize_t k = recv(c->fd, buf, cap, 0);
        if (k <= 0) {
            c->eof = true;
            break;
        }
        decode(c, buf, (size_t)k);
    }
    return true;
}

static void client_end(client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* Waits until no worker of the stream sandbox is busy; false on timeout. */
static bool stream_workers_idle(int timeout_ms)
{
    uint64_t deadline = th_now_ms() + (uint64_t)timeout_ms;
    do {
        th_response r;
        if (th_request(d.port, "GET", "/sandlet-status", NULL, NULL, 0, &r) == 0) {
            const char *line = strstr(r.body, "\nstream ");
            unsigned workers = 0, busy = 99;
            bool ok = line && sscanf(line, " stream %u %u", &workers, &busy) == 2;
            th_response_free(&r);
            if (ok && busy == 0)
                return true;
        }
        usleep(50000);
    } while (th_now_ms() < deadline);
    return false;
}

/* ---- tests --------------------------------------------------------------- */

static void test_fast_client(void **state)
{
    (void)state;
    peaks pk = {0};
    sample(&pk);
    client c;
    char target[128];
    snprintf(target, sizeof(target), "/stream/big?n=%llu", (unsigned long long)stream_bytes);
    uint64_t t0 = th_now_ms();
    client_start(&c, 0, target);
    assert_true(client_read(&c, UINT64_MAX, 25000, &pk));
    if (c.bad)
        fail_msg("%s", c.why);
    assert_int_equal(c.st, CH_DONE);
    assert_true(c.got == stream_bytes);
    printf("fast client: %llu bytes in %llu ms\n", (unsigned long long)c.got,
           (unsigned long long)(th_now_ms() - t0));
    client_end(&c);
    check_hwm("fast client", &pk);
}

/* Another client is answered promptly by the other sandbox and by the
 * stream sandbox's second worker. */
static void check_others_served(void)
{
    uint64_t t0 = th_now_ms();
    th_response r;
    assert_int_equal(th_request(d.port, "GET", "/other/pid", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    /* Several at once: none may be handed to the worker whose client
     * stalls, where it would wait for the stall (pipelining). */
    th_conn *cs[4];
    for (int i = 0; i < 4; i++) {
        cs[i] = th_connect(d.port, false);
        assert_non_null(cs[i]);
        assert_int_equal(th_send_str(cs[i], "GET /stream/sleep?ms=50 HTTP/1.1\r\nHost: x\r\n\r\n"),
                         0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(th_read(cs[i], &r, false), 0);
        assert_int_equal(r.status, 200);
        th_response_free(&r);
        th_close(cs[i]);
    }
    uint64_t took = th_now_ms() - t0;
    printf("other clients served in %llu ms\n", (unsigned long long)took);
    if (took > STALL_MS / 2)
        fail_msg("other clients waited %llu ms while one client stalled", (unsigned long long)took);
}

static void test_slow_client(void **state)
{
    (void)state;
    peaks pk = {0};
    sample(&pk);
    client c;
    char target[128];
    snprintf(target, sizeof(target), "/stream/flushed?n=%llu&every=65536",
             (unsigned long long)stream_bytes);
    client_start(&c, 4096, target);
    /* Some of it, then a stall long enough for every buffer to fill. */
    assert_true(client_read(&c, 1 << 20, 15000, &pk));
    assert_false(c.bad || c.eof);
    uint64_t stall_end = th_now_ms() + STALL_MS;
    bool others_checked = false;
    while (th_now_ms() < stall_end) {
        sample(&pk);
        if (!others_checked && th_now_ms() + STALL_MS / 2 >= stall_end) {
            check_others_served();
            others_checked = true;
        }
        usleep(50000);
    }
    assert_true(others_checked);
    /* The rest, with a normal buffer from here on. */
    int big = 1 << 20;
    setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    assert_true(client_read(&c, UINT64_MAX, 25000, &pk));
    if (c.bad)
        fail_msg("%s", c.why);
    assert_int_equal(c.st, CH_DONE);
    assert_true(c.got == stream_bytes);
    client_end(&c);
    check_hwm("slow client", &pk);
}

/* A client that leaves mid-stream frees its worker: what the worker still
 * sends is dropped or the worker is recycled, never waited on. */
static void test_client_leaves(void **state)
{
    (void)state;
    peaks pk = {0};
    client c;
    char target[128];
    snprintf(target, sizeof(target), "/stream/big?n=%llu", (unsigned long long)stream_bytes);
    client_start(&c, 4096, target);
    assert_true(client_read(&c, 256 * 1024, 15000, &pk));
    usleep(300000); /* every buffer on the way fills */
    client_end(&c);
    if (!stream_workers_idle(5000))
        fail_msg("a worker still streams to a client that left");
    /* And both serve again. */
    check_others_served();
    check_hwm("client leaves", &pk);
}

/* A client that never reads again is cut after send-timeout, and the
 * worker streaming to it is freed. */
static void test_client_stops_reading(void **state)
{
    (void)state;
    peaks pk = {0};
    client c;
    char target[128];
    snprintf(target, sizeof(target), "/stream/big?n=%llu", (unsigned long long)stream_bytes);
    client_start(&c, 4096, target);
    assert_true(client_read(&c, 64 * 1024, 15000, &pk));
    uint64_t t0 = th_now_ms();
    if (!stream_workers_idle(SEND_TIMEOUT_MS + 4000))
        fail_msg("a worker still streams to a client that stopped reading");
    uint64_t took = th_now_ms() - t0;
    printf("stalled client's worker freed after %llu ms\n", (unsigned long long)took);
    assert_true(took >= SEND_TIMEOUT_MS - 500);
    /* The connection was cut: reading on ends before the whole body. */
    assert_true(client_read(&c, UINT64_MAX, 15000, NULL));
    assert_true(c.eof);
    assert_true(c.got < stream_bytes);
    assert_true(c.st != CH_DONE);
    client_end(&c);
    check_others_served();
    assert_true(th_log_contains(&d, "send-timeout"));
}

/* A servlet that flushes one byte at a time to a client that does not
 * read: each byte is a write of its own to the client, and the acceptor
 * counts what each queued write costs, not only its bytes, against the
 * 1 MiB it queues for a client (it held ~37 MiB before). */
static void test_tiny_flushes_bounded(void **state)
{
    (void)state;
    long before = th_status_kb(d.pid, "VmRSS");
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)d.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
    const char *req = "GET /stream/flushed?n=3000000&every=1 HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(write(s, req, strlen(req)), (ssize_t)strlen(req));
    long peak = 0;
    for (int i = 0; i < 30; i++) {
        usleep(100 * 1000);
        long k = th_status_kb(d.pid, "VmRSS") - before;
        if (k > peak)
            peak = k;
    }
    printf("  one client not reading a 1-byte-flush stream: acceptor +%ld MiB\n", peak / 1024);
    close(s);
    assert_true(peak < 8 * 1024);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_client),          cmocka_unit_test(test_slow_client),
        cmocka_unit_test(test_client_leaves),        cmocka_unit_test(test_client_stops_reading),
        cmocka_unit_test(test_tiny_flushes_bounded),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

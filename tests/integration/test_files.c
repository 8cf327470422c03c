/*
 * test_files.c - static files from the docroot: content types, validators
 * and 304, ranges, directories, methods, large files streamed, paths that
 * try to leave the docroot, and many concurrent keep-alive clients.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define BIG (3u * 1024 * 1024 + 7)
/* More than the kernel's largest send buffer (tcp_wmem's 4 MiB), so a
 * slow reader makes sendfile hit EAGAIN. */
#define HUGE (12u * 1024 * 1024 + 3)
/* Seconds before the acceptor caches a small file (filecache.h). */
#define SETTLE 2

static th_daemon d;
static char root[64], outside[64];

static void put(const char *dir, const char *name, const void *data, size_t len)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static unsigned char big_byte(size_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13);
}

static int group_setup(void **state)
{
    (void)state;
    th_become_subreaper();
    signal(SIGPIPE, SIG_IGN);
    /* Room for the many-clients test, in us and in the daemon we start. */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    snprintf(root, sizeof(root), "/tmp/sandlet-root-XXXXXX");
    snprintf(outside, sizeof(outside), "/tmp/sandlet-out-XXXXXX");
    if (!mkdtemp(root) || !mkdtemp(outside))
        return -1;
    chmod(root, 0755);
    put(root, "index.html", "<h1>home</h1>\n", 14);
    put(root, "a.txt", "0123456789", 10);
    char sub[128];
    snprintf(sub, sizeof(sub), "%s/sub", root);
    mkdir(sub, 0755);
    put(sub, "index.html", "sub index", 9);
    snprintf(sub, sizeof(sub), "%s/empty", root);
    mkdir(sub, 0755);
    put(outside, "secret", "TOP SECRET", 10);
    char link[128], target[128];
    snprintf(link, sizeof(link), "%s/escape", root);
    snprintf(target, sizeof(target), "%s/secret", outside);
    if (symlink(target, link) < 0)
        return -1;
    unsigned char *big = malloc(HUGE);
    if (!big)
        return -1;
    for (size_t i = 0; i < HUGE; i++)
        big[i] = big_byte(i);
    put(root, "big.bin", big, BIG);
    put(root, "huge.bin", big, HUGE);
    free(big);
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "docroot \"%s\";\naccess-log \"%s/access.log\";\nerror-log \"%s/error.log\";\n", root,
             outside, outside);
    return th_start(&d, conf, false);
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", root, outside);
    int rc = system(cmd);
    return th_stop(&d) == 0 && rc == 0 ? 0 : -1;
}

static void get(const char *target, const char *headers, th_response *r)
{
    assert_int_equal(th_request(d.port, "GET", target, headers, NULL, 0, r), 0);
}

static void test_files_and_types(void **state)
{
    (void)state;
    th_response r;
    char v[128];
    get("/", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "<h1>home</h1>\n");
    assert_true(th_header(&r, "Content-Type", v, sizeof(v)));
    assert_string_equal(v, "text/html; charset=utf-8");
    th_response_free(&r);
    get("/a.txt", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "0123456789");
    assert_true(th_header(&r, "Content-Type", v, sizeof(v)));
    assert_non_null(strstr(v, "text/plain"));
    assert_true(th_header(&r, "Accept-Ranges", v, sizeof(v)));
    th_response_free(&r);
    get("/sub/", NULL, &r);
    assert_string_equal(r.body, "sub index");
    th_response_free(&r);
    get("/sub?x=1", NULL, &r);
    assert_int_equal(r.status, 301);
    assert_true(th_header(&r, "Location", v, sizeof(v)));
    assert_string_equal(v, "/sub/?x=1");
    th_response_free(&r);
    get("/empty/", NULL, &r); /* no index, no listing */
    assert_int_equal(r.status, 404);
    th_response_free(&r);
    get("/missing.txt", NULL, &r);
    assert_int_equal(r.status, 404);
    th_response_free(&r);
}

static void test_conditional(void **state)
{
    (void)state;
    th_response r;
    char etag[128], lastmod[128], hdr[300];
    get("/a.txt", NULL, &r);
    assert_true(th_header(&r, "ETag", etag, sizeof(etag)));
    assert_true(th_header(&r, "Last-Modified", lastmod, sizeof(lastmod)));
    th_response_free(&r);
    snprintf(hdr, sizeof(hdr), "If-None-Match: %s\r\n", etag);
    get("/a.txt", hdr, &r);
    assert_int_equal(r.status, 304);
    assert_int_equal(r.body_len, 0);
    th_response_free(&r);
    snprintf(hdr, sizeof(hdr), "If-Modified-Since: %s\r\n", lastmod);
    get("/a.txt", hdr, &r);
    assert_int_equal(r.status, 304);
    th_response_free(&r);
    get("/a.txt", "If-None-Match: \"other\"\r\n", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

static void test_ranges(void **state)
{
    (void)state;
    th_response r;
    char v[128];
    get("/a.txt", "Range: bytes=2-5\r\n", &r);
    assert_int_equal(r.status, 206);
    assert_string_equal(r.body, "2345");
    assert_true(th_header(&r, "Content-Range", v, sizeof(v)));
    assert_string_equal(v, "bytes 2-5/10");
    th_response_free(&r);
    get("/a.txt", "Range: bytes=-3\r\n", &r);
    assert_int_equal(r.status, 206);
    assert_string_equal(r.body, "789");
    th_response_free(&r);
    get("/a.txt", "Range: bytes=50-\r\n", &r);
    assert_int_equal(r.status, 416);
    assert_true(th_header(&r, "Content-Range", v, sizeof(v)));
    assert_string_equal(v, "bytes */10");
    th_response_free(&r);
}

static void test_big_file_streams(void **state)
{
    (void)state;
    th_response r;
    get("/big.bin", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, BIG);
    for (size_t i = 0; i < BIG; i++)
        if ((unsigned char)r.body[i] != big_byte(i))
            fail_msg("byte %zu differs", i);
    th_response_free(&r);
    /* A range in the middle of it. */
    get("/big.bin", "Range: bytes=1048570-1048579\r\n", &r);
    assert_int_equal(r.status, 206);
    assert_int_equal(r.body_len, 10);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal((unsigned char)r.body[i], big_byte(1048570 + i));
    th_response_free(&r);
}

/* A client that reads slowly fills its socket: the server must switch
 * between sendfile and queued writes without losing or reordering a byte,
 * then serve the next request on the same connection. */
static void test_big_file_slow_reader(void **state)
{
    (void)state;
    /* The receive buffer must be small before the handshake, or the
     * window it advertises is already large. */
    th_conn *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c->fd >= 0);
    int small = 16384;
    assert_int_equal(setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)d.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(th_send_str(c, "GET /huge.bin HTTP/1.1\r\nHost: x\r\n"
                                    "Range: bytes=100000-\r\n\r\n"),
                     0);
    size_t want = HUGE - 100000, got = 0, head = 0, slept = 0;
    char chunk[16384], hbuf[1024];
    /* The head, byte by byte, so no body byte is swallowed with it. */
    while (head < sizeof(hbuf) - 1) {
        assert_int_equal(read(c->fd, hbuf + head, 1), 1);
        head++;
        if (head >= 4 && memcmp(hbuf + head - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    hbuf[head] = '\0';
    assert_non_null(strstr(hbuf, "HTTP/1.1 206 "));
    while (got < want) {
        size_t n = want - got < sizeof(chunk) ? want - got : sizeof(chunk);
        ssize_t k = read(c->fd, chunk, n);
        assert_true(k > 0);
        for (ssize_t i = 0; i < k; i++)
            if ((unsigned char)chunk[i] != big_byte(100000 + got + (size_t)i))
                fail_msg("byte %zu differs", 100000 + got + (size_t)i);
        got += (size_t)k;
        /* Stall now and then, long enough for the server to hit EAGAIN. */
        if (got / (1024 * 1024) > slept) {
            slept = got / (1024 * 1024);
            usleep(20000);
        }
    }
    th_response r;
    assert_int_equal(th_send_str(c, "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    assert_int_equal(th_read(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "0123456789");
    th_response_free(&r);
    th_close(c);
}

/* Clients that leave in the middle of a large file, while a pool thread
 * may be sending it: the socket must not be closed (and its number
 * reused) under the thread; the next clients get exactly their answer. */
static void test_big_file_abandoned(void **state)
{
    (void)state;
    for (int i = 0; i < 20; i++) {
        th_conn *a = th_connect(d.port, false);
        assert_non_null(a);
        assert_int_equal(th_send_str(a, "GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
        char buf[65536];
        size_t got = 0;
        while (got < sizeof(buf)) {
            ssize_t k = read(a->fd, buf + got, sizeof(buf) - got);
            assert_true(k > 0);
            got += (size_t)k;
        }
        struct linger lg = {.l_onoff = 1, .l_linger = 0}; /* reset, not FIN */
        assert_int_equal(setsockopt(a->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
        th_close(a);
        th_conn *b = th_connect(d.port, false);
        assert_non_null(b);
        assert_int_equal(th_send_str(b, "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
        th_response r;
        assert_int_equal(th_read(b, &r, false), 0);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "0123456789");
        th_response_free(&r);
        /* Nothing else arrives on it. */
        struct pollfd pfd = {.fd = b->fd, .events = POLLIN};
        assert_int_equal(b->len, 0);
        assert_int_equal(poll(&pfd, 1, 20), 0);
        th_close(b);
    }
}

static void expect_body(const char *target, int status, const char *body)
{
    th_response r;
    get(target, NULL, &r);
    assert_int_equal(r.status, status);
    if (body)
        assert_string_equal(r.body, body);
    th_response_free(&r);
}

/* Small files are cached in the acceptor; a change on disk must show at
 * once: a rename over it, a rewrite of the same size, a chmod, a removal,
 * a symbolic link out of the docroot in its place. */
static void test_cache_follows_the_disk(void **state)
{
    (void)state;
    char path[256], tmp[256], target[256];
    snprintf(path, sizeof(path), "%s/c.txt", root);
    snprintf(tmp, sizeof(tmp), "%s/c.tmp", root);
    put(root, "c.txt", "first", 5);
    char sub[128];
    snprintf(sub, sizeof(sub), "%s/csub", root);
    assert_int_equal(mkdir(sub, 0755), 0);
    put(sub, "index.html", "one", 3);
    expect_body("/c.txt", 200, "first"); /* too fresh to be cached */
    sleep(SETTLE + 1);
    expect_body("/c.txt", 200, "first");
    expect_body("/c.txt", 200, "first"); /* now from the cache */
    put(root, "c.tmp", "second", 6);
    assert_int_equal(rename(tmp, path), 0);
    expect_body("/c.txt", 200, "second");
    /* Same size, same inode, rewritten in place. */
    FILE *f = fopen(path, "r+");
    assert_non_null(f);
    assert_int_equal(fwrite("SECOND", 1, 6, f), 6);
    assert_int_equal(fclose(f), 0);
    expect_body("/c.txt", 200, "SECOND");
    if (geteuid() != 0) { /* root reads through mode 000 */
        assert_int_equal(chmod(path, 0), 0);
        expect_body("/c.txt", 403, NULL);
        assert_int_equal(chmod(path, 0644), 0);
        expect_body("/c.txt", 200, "SECOND");
    }
    assert_int_equal(unlink(path), 0);
    expect_body("/c.txt", 404, NULL);
    snprintf(target, sizeof(target), "%s/secret", outside);
    assert_int_equal(symlink(target, path), 0);
    th_response r;
    get("/c.txt", NULL, &r);
    assert_true(r.status == 403 || r.status == 404);
    assert_null(strstr(r.body, "TOP SECRET"));
    th_response_free(&r);
    assert_int_equal(unlink(path), 0);
    /* The index of a directory is cached under the directory's path. */
    expect_body("/csub/", 200, "one");
    expect_body("/csub/", 200, "one");
    snprintf(tmp, sizeof(tmp), "%s/index.tmp", sub);
    snprintf(path, sizeof(path), "%s/index.html", sub);
    put(sub, "index.tmp", "two", 3);
    assert_int_equal(rename(tmp, path), 0);
    expect_body("/csub/", 200, "two");
}

static void test_methods(void **state)
{
    (void)state;
    th_response r;
    char v[128];
    assert_int_equal(th_request(d.port, "HEAD", "/a.txt", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(th_header(&r, "Content-Length", v, sizeof(v)));
    assert_string_equal(v, "10");
    assert_int_equal(r.body_len, 0);
    th_response_free(&r);
    assert_int_equal(th_request(d.port, "POST", "/a.txt", NULL, "x", 1, &r), 0);
    assert_int_equal(r.status, 405);
    assert_true(th_header(&r, "Allow", v, sizeof(v)));
    assert_string_equal(v, "GET, HEAD, OPTIONS");
    th_response_free(&r);
    assert_int_equal(th_request(d.port, "OPTIONS", "/a.txt", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 204);
    th_response_free(&r);
}

static void test_no_escape(void **state)
{
    (void)state;
    static const char *const attempts[] = {
        "/../etc/passwd",
        "/%2e%2e/etc/passwd",
        "/%2E%2e%2fetc%2fpasswd",
        "/sub/../../etc/passwd",
        "/a.txt%00.html",
        "/..%5c..%5cetc%5cpasswd",
        "/%c0%ae%c0%ae/etc/passwd",
        "/escape",
        "/./a.txt",
        "//etc/passwd",
        "/sub/%2e%2e/%2e%2e/etc/passwd",
    };
    for (size_t i = 0; i < sizeof(attempts) / sizeof(attempts[0]); i++) {
        th_response r;
        /* A raw request: the target goes out exactly as written. */
        th_conn *c = th_connect(d.port, false);
        assert_non_null(c);
        char req[256];
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 attempts[i]);
        assert_int_equal(th_send_str(c, req), 0);
        assert_int_equal(th_read(c, &r, false), 0);
        th_close(c);
        if (r.status != 400 && r.status != 403 && r.status != 404)
            fail_msg("%s answered %d", attempts[i], r.status);
        assert_null(strstr(r.body, "TOP SECRET"));
        assert_null(strstr(r.body, "root:"));
        th_response_free(&r);
    }
}

static void test_many_keepalive_clients(void **state)
{
    (void)state;
    enum { N = 2000 };
    th_conn **c = calloc(N, sizeof(*c));
    assert_non_null(c);
    for (int i = 0; i < N; i++) {
        c[i] = th_connect(d.port, false);
        if (!c[i])
            fail_msg("connection %d failed", i);
        assert_int_equal(th_send_str(c[i], "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    }
    int ok = 0;
    for (int i = 0; i < N; i++) {
        th_response r;
        if (th_read(c[i], &r, false) == 0 && r.status == 200 && strcmp(r.body, "0123456789") == 0)
            ok++;
        th_response_free(&r);
    }
    /* Each connection is still open and serves a second request. */
    for (int i = 0; i < N; i += 97) {
        th_response r;
        assert_int_equal(th_send_str(c[i], "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
        assert_int_equal(th_read(c[i], &r, false), 0);
        assert_int_equal(r.status, 200);
        th_response_free(&r);
    }
    for (int i = 0; i < N; i++)
        th_close(c[i]);
    free(c);
    assert_int_equal(ok, N);
}

static bool file_has(const char *name, const char *needle, int ms)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", outside, name);
    for (int waited = 0; waited <= ms; waited += 50) {
        FILE *f = fopen(path, "r");
        if (f) {
            static char buf[4 << 20];
            size_t n = fread(buf, 1, sizeof(buf) - 1, f);
            fclose(f);
            buf[n] = '\0';
            if (strstr(buf, needle))
                return true;
        }
        usleep(50000);
    }
    return false;
}

static void test_access_log_and_rotation(void **state)
{
    (void)state;
    th_response r;
    get("/a.txt?first", "User-Agent: evil\"agent\xc3\xa9\r\nReferer: http://ref/\r\n", &r);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    /* Combined Log Format, client text escaped, time taken appended. */
    assert_true(file_has("access.log",
                         "\"GET /a.txt?first HTTP/1.1\" 200 10 \"http://ref/\" "
                         "\"evil\\x22agent\\xc3\\xa9\" ",
                         3000));
    assert_true(file_has("access.log", "127.0.0.1 - - [", 0));
    /* logrotate: move the files away, SIGUSR1, and new files appear. */
    char from[256], to[256];
    snprintf(from, sizeof(from), "%s/access.log", outside);
    snprintf(to, sizeof(to), "%s/access.log.1", outside);
    assert_int_equal(rename(from, to), 0);
    snprintf(from, sizeof(from), "%s/error.log", outside);
    snprintf(to, sizeof(to), "%s/error.log.1", outside);
    assert_int_equal(rename(from, to), 0);
    kill(d.pid, SIGUSR1);
    assert_true(file_has("error.log", "reopened", 3000));
    get("/missing?second", NULL, &r);
    assert_int_equal(r.status, 404);
    th_response_free(&r);
    assert_true(file_has("access.log", "\"GET /missing?second HTTP/1.1\" 404 ", 3000));
    assert_false(file_has("access.log", "first", 0));
    assert_true(file_has("access.log.1", "first", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files_and_types),
        cmocka_unit_test(test_conditional),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_big_file_streams),
        cmocka_unit_test(test_big_file_slow_reader),
        cmocka_unit_test(test_big_file_abandoned),
        cmocka_unit_test(test_cache_follows_the_disk),
        cmocka_unit_test(test_methods),
        cmocka_unit_test(test_no_escape),
        cmocka_unit_test(test_many_keepalive_clients),
        cmocka_unit_test(test_access_log_and_rotation),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

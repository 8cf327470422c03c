/*
 * accesslog.c - the access log in Combined Log Format, with the time taken
 * in microseconds appended:
 *
 *   127.0.0.1 - - [22/Nov/2026:07:40:00 +0000] "GET /hello HTTP/1.1" 200 77 "-" "curl/7.88" 412
 *
 * Lines are gathered in a buffer and written when it fills, once a second
 * and at stop, so a busy server makes no write(2) per request.  Everything
 * from the client (request line, Referer, User-Agent) is escaped: quotes,
 * backslashes and bytes outside printable ASCII become \xHH, so a request
 * can neither forge a log line nor smuggle terminal escapes into it.
 */
#include "config.h"

#include "loop/acceptor.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FLUSH_AT       (48u * 1024u)
#define LINE_MAX_BYTES 8192

static void flush(sandlet_server *srv)
{
    size_t off = 0;
    while (srv->access_fd >= 0 && off < srv->access_len) {
        ssize_t n = write(srv->access_fd, srv->access_buf + off, srv->access_len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, -errno, "%s: cannot write the access log",
                              srv->conf->access_log);
            break;
        }
        off += (size_t)n;
    }
    srv->access_len = 0;
}

void sandlet_access_flush(sandlet_server *srv)
{
    flush(srv);
}

static void on_tick(uv_timer_t *t)
{
    flush(t->data);
}

void sandlet_access_start(sandlet_server *srv)
{
    uv_timer_init(srv->loop, &srv->access_timer);
    srv->access_timer.data = srv;
    if (srv->access_fd >= 0)
        uv_timer_start(&srv->access_timer, on_tick, 1000, 1000);
}

void sandlet_access_reopen(sandlet_server *srv, int fd)
{
    flush(srv);
    if (srv->access_fd >= 0)
        close(srv->access_fd);
    srv->access_fd = fd;
}

/* Appends s (n bytes) escaped; returns the new length or 0 when full. */
static size_t put_escaped(char *out, size_t len, size_t cap, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (len + 4 >= cap)
            return 0;
        if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') {
            out[len++] = '\\';
            out[len++] = 'x';
            out[len++] = hex[ch >> 4];
            out[len++] = hex[ch & 15];
        } else {
            out[len++] = (char)ch;
        }
    }
    return len;
}

static size_t put_field(char *out, size_t len, size_t cap, const char *v)
{
    if (!v || !*v)
        v = "-";
    if (len + 1 >= cap)
        return 0;
    out[len++] = '"';
    len = put_escaped(out, len, cap, v, strlen(v));
    if (len == 0 || len + 1 >= cap)
        return 0;
    out[len++] = '"';
    return len;
}

void sandlet_access_log(sandlet_conn *c)
{
    sandlet_server *srv = sandlet_conn_server(c);
    int status;
    uint64_t bytes, started;
    sandlet_conn_outcome(c, &status, &bytes, &started);
    if (srv->access_fd < 0 || status == 0)
        return;
    time_t now = time(NULL);
    if (now != srv->access_sec) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(srv->access_time, sizeof(srv->access_time), "%d/%b/%Y:%H:%M:%S +0000", &tm);
        srv->access_sec = now;
    }
    char line[LINE_MAX_BYTES];
    /* The peer is "ip:port" or "[ip]:port"; the log wants the address. */
    const char *peer = sandlet_conn_peer(c);
    size_t plen = strlen(peer);
    const char *colon = strrchr(peer, ':');
    if (colon)
        plen = (size_t)(colon - peer);
    int n = snprintf(line, sizeof(line), "%.*s - - [%s] \"", (int)plen, peer, srv->access_time);
    if (n < 0 || (size_t)n >= sizeof(line))
        return;
    size_t len = (size_t)n;
    size_t tlen;
    const char *target = sandlet_conn_target(c, &tlen, NULL);
    if (tlen) {
        const char *m = sandlet_conn_method_name(c);
        len = put_escaped(line, len, sizeof(line), m, strlen(m));
        if (len)
            len = put_escaped(line, len, sizeof(line), " ", 1);
        if (len)
            len = put_escaped(line, len, sizeof(line), target, tlen);
        unsigned major, minor;
        sandlet_conn_version(c, &major, &minor);
        char ver[16];
        snprintf(ver, sizeof(ver), " HTTP/%u.%u", major, minor);
        if (len)
            len = put_escaped(line, len, sizeof(line), ver, strlen(ver));
    } else {
        line[len++] = '-';
    }
    if (len == 0)
        return;
    uint64_t ended = sandlet_turn_ns(srv);
    uint64_t us = ended > started ? (ended - started) / 1000 : 0;
    n = snprintf(line + len, sizeof(line) - len, "\" %d %" PRIu64 " ", status, bytes);
    if (n < 0 || (size_t)n >= sizeof(line) - len)
        return;
    len += (size_t)n;
    len = put_field(line, len, sizeof(line), sandlet_conn_header(c, "referer"));
    if (len && len + 1 < sizeof(line))
        line[len++] = ' ';
    if (len)
        len = put_field(line, len, sizeof(line), sandlet_conn_header(c, "user-agent"));
    if (len == 0)
        return;
    n = snprintf(line + len, sizeof(line) - len, " %" PRIu64 "\n", us);
    if (n < 0 || (size_t)n >= sizeof(line) - len)
        return;
    len += (size_t)n;
    if (srv->access_len + len > sizeof(srv->access_buf))
        flush(srv);
    memcpy(srv->access_buf + srv->access_len, line, len);
    srv->access_len += len;
    if (srv->access_len >= FLUSH_AT)
        flush(srv);
}

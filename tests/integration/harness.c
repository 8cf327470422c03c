/*
 * harness.c - see harness.h.  Every wait here is bounded, so that a hung
 * daemon fails a test instead of hanging make check.
 */
#include "config.h"

#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IO_TIMEOUT_MS 15000

const char *th_build_path(const char *rel)
{
    static char paths[8][512];
    static int next;
    const char *dir = getenv("SANDLET_BUILDDIR");
    char *p = paths[next++ % 8];
    snprintf(p, sizeof(paths[0]), "%s/%s", dir ? dir : ".", rel);
    return p;
}

void th_become_subreaper(void)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1);
}

bool th_confinement_off(const char *untested)
{
    if (!getenv("SANDLET_NO_CONFINEMENT"))
        return false;
    if (untested)
        printf("SKIP: SANDLET_NO_CONFINEMENT is set (sanitizer run); %s\n", untested);
    return true;
}

bool th_unconfined(void)
{
    return th_confinement_off("confinement not tested");
}

int th_stop_group(th_daemon *d)
{
    if (th_confinement_off(NULL))
        return 0;
    return th_stop(d) == 0 ? 0 : -1;
}

const char *th_fixture(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof(rel), "tests/fixtures/.libs/%s.so", name);
    return th_build_path(rel);
}

bool th_skip_unless_root(const char *why)
{
    if (geteuid() == 0)
        return false;
    if (why)
        printf("SKIP: not root%s\n", why);
    return true;
}

void th_prepare(void)
{
    th_become_subreaper();
    signal(SIGPIPE, SIG_IGN);
}

int th_tempdir(char *dir, size_t cap, const char *tag, mode_t mode)
{
    int n = snprintf(dir, cap, "/tmp/sandlet-%s-XXXXXX", tag);
    if (n < 0 || (size_t)n >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!mkdtemp(dir))
        return -1;
    /* mkdtemp makes it 0700: workers that run as another uid need more. */
    if (mode && chmod(dir, mode) < 0)
        return -1;
    return 0;
}

char *th_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rbe");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t k = fread(b + n, 1, cap - n - 1, f);
        n += k;
        if (k == 0)
            break;
        if (cap - n < 2) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (b) {
        b[n] = '\0';
        if (len)
            *len = n;
    }
    return b;
}

bool th_log_contains(const th_daemon *d, const char *needle)
{
    char *s = th_slurp(d->log, NULL);
    bool found = s && strstr(s, needle);
    free(s);
    return found;
}

bool th_log_wait(const th_daemon *d, const char *needle, int ms)
{
    for (int waited = 0; waited <= ms; waited += 20) {
        if (th_log_contains(d, needle))
            return true;
        usleep(20000);
    }
    return false;
}

int th_start(th_daemon *d, const char *conf_body, bool ipv6)
{
    return th_start_with(d, conf_body, ipv6, NULL, NULL);
}

int th_start_with(th_daemon *d, const char *conf_body, bool ipv6, void (*in_child)(void *),
                  void *ctx)
{
    memset(d, 0, sizeof(*d));
    if (th_tempdir(d->dir, sizeof(d->dir), "test", 0755) < 0)
        return -1;
    snprintf(d->conf, sizeof(d->conf), "%s/sandlet.conf", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/error.log", d->dir);
    FILE *f = fopen(d->conf, "w");
    if (!f)
        return -1;
    fprintf(f, "listen 127.0.0.1:0;\n%s%s", ipv6 ? "listen [::1]:0;\n" : "", conf_body);
    /* Uploads spool under the test's own folder (the default, under
     * /var, is root's to make). */
    if (!strstr(conf_body, "spool-dir"))
        fprintf(f, "spool-dir %s/spool;\n", d->dir);
    fclose(f);
    const char *exe = getenv("SANDLETD");
    if (!exe)
        exe = "./sandletd";
    d->pid = fork();
    if (d->pid < 0)
        return -1;
    if (d->pid == 0) {
        int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            dup2(fd, STDOUT_FILENO);
        }
        /* Start it as a shell would, with nothing open above stderr, so
         * that descriptor numbering matches real use. */
        close_range(3, ~0U, 0);
        if (in_child)
            in_child(ctx);
        execl(exe, "sandletd", "-d", "-c", d->conf, (char *)NULL);
        _exit(127);
    }
    for (int waited = 0; waited < IO_TIMEOUT_MS; waited += 20) {
        char *s = th_slurp(d->log, NULL);
        const char *p = s ? strstr(s, "listening on 127.0.0.1:") : NULL;
        const char *p6 = s ? strstr(s, "listening on [::1]:") : NULL;
        if (p && (!ipv6 || p6)) {
            d->port = (unsigned)atoi(p + strlen("listening on 127.0.0.1:"));
            if (p6)
                d->port6 = (unsigned)atoi(p6 + strlen("listening on [::1]:"));
            free(s);
            return d->port ? 0 : -1;
        }
        free(s);
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = 0;
            return -1;
        }
        usleep(20000);
    }
    return -1;
}

int th_stop(th_daemon *d)
{
    if (d->pid <= 0)
        return -1;
    kill(d->pid, SIGTERM);
    int st = 0;
    for (int waited = 0; waited < IO_TIMEOUT_MS; waited += 10) {
        pid_t r = waitpid(d->pid, &st, WNOHANG);
        if (r == d->pid) {
            d->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        usleep(10000);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, &st, 0);
    d->pid = 0;
    return -1;
}

bool th_wait_exit(pid_t pid, int ms, int *st)
{
    for (int waited = 0; waited < ms; waited += 10) {
        if (waitpid(pid, st, WNOHANG) == pid)
            return true;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, st, 0);
    return false;
}

int th_children(void)
{
    return th_children_of(getpid(), NULL, 0);
}

int th_children_of(pid_t me, pid_t *out, int max)
{
    int n = 0;
    DIR *dir = opendir("/proc");
    if (!dir)
        return -1;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300];
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        char *s = th_slurp(path, NULL);
        if (!s)
            continue;
        /* pid (comm) state ppid: comm may hold spaces, so parse after ')'. */
        const char *rp = strrchr(s, ')');
        int ppid = 0;
        char state;
        if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == me) {
            /* The supervisor's spawner stands for the children it
             * started for it (src/sandbox/spawner.c). */
            pid_t pid = (pid_t)atol(e->d_name);
            if (strncmp(s, e->d_name, strlen(e->d_name)) == 0 &&
                strstr(s, " (sandlet-spawner) ") == s + strlen(e->d_name)) {
                int k = th_children_of(pid, out ? out + (n < max ? n : max) : NULL,
                                       n < max ? max - n : 0);
                n += k > 0 ? k : 0;
            } else {
                if (out && n < max)
                    out[n] = pid;
                n++;
            }
        }
        free(s);
    }
    closedir(dir);
    return n;
}

/* ---- client side ------------------------------------------------------- */

th_conn *th_connect(unsigned port, bool ipv6)
{
    th_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t len;
    if (ipv6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        a->sin6_addr = in6addr_loopback;
        len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof(*a);
    }
    c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&ss, len) < 0) {
        if (c->fd >= 0)
            close(c->fd);
        free(c);
        return NULL;
    }
    return c;
}

void th_close(th_conn *c)
{
    if (!c)
        return;
    close(c->fd);
    free(c->spill);
    free(c);
}

int th_send(th_conn *c, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int th_send_str(th_conn *c, const char *s)
{
    return th_send(c, s, strlen(s));
}

int th_send_draining(th_conn *c, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN | POLLOUT};
        int pr = poll(&pfd, 1, IO_TIMEOUT_MS);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            return -1;
        if (pfd.revents & POLLIN) {
            if (c->spill_len + 64 * 1024 > (size_t)64 * 1024 * 1024)
                return -1; /* bounded: a test never needs this much */
            char *s = realloc(c->spill, c->spill_len + 64 * 1024);
            if (!s)
                return -1;
            c->spill = s;
            ssize_t n = recv(c->fd, c->spill + c->spill_len, 64 * 1024, MSG_DONTWAIT);
            if (n > 0)
                c->spill_len += (size_t)n;
            else if (n == 0 || (errno != EAGAIN && errno != EINTR))
                return -1; /* closed or failed before taking the burst */
        }
        if (pfd.revents & (POLLOUT | POLLERR | POLLHUP)) {
            ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (n <= 0)
                return -1;
            p += n;
            len -= (size_t)n;
        }
    }
    return 0;
}

/* Reads more bytes into the buffer; 1 on data, 0 on EOF, -1 on error or
 * timeout. */
static int fill(th_conn *c)
{
    if (c->len == sizeof(c->buf))
        return -1;
    if (c->spill_off < c->spill_len) {
        size_t k = c->spill_len - c->spill_off;
        if (k > sizeof(c->buf) - c->len)
            k = sizeof(c->buf) - c->len;
        memcpy(c->buf + c->len, c->spill + c->spill_off, k);
        c->spill_off += k;
        c->len += k;
        return 1;
    }
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int pr = poll(&pfd, 1, IO_TIMEOUT_MS);
    if (pr <= 0)
        return -1;
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    if (n < 0)
        return errno == ECONNRESET ? 0 : -1;
    c->len += (size_t)n;
    return n > 0;
}

static void take(th_conn *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

/* Appends n bytes of input to the body, reading as needed. */
static int read_exact(th_conn *c, th_response *r, size_t n)
{
    char *b = realloc(r->body, r->body_len + n + 1);
    if (!b)
        return -1;
    r->body = b;
    while (n) {
        if (c->len == 0 && fill(c) <= 0)
            return -1;
        size_t k = c->len < n ? c->len : n;
        memcpy(r->body + r->body_len, c->buf, k);
        r->body_len += k;
        take(c, k);
        n -= k;
    }
    r->body[r->body_len] = '\0';
    return 0;
}

static int read_line(th_conn *c, char *out, size_t outlen)
{
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl) {
            size_t n = (size_t)(nl - c->buf) + 1;
            size_t k = n < outlen ? n : outlen - 1;
            memcpy(out, c->buf, k);
            out[k] = '\0';
            take(c, n);
            return 0;
        }
        if (fill(c) <= 0)
            return -1;
    }
}

bool th_header(const th_response *r, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    for (const char *p = strstr(r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            const char *end = strstr(v, "\r\n");
            size_t vl = end ? (size_t)(end - v) : strlen(v);
            if (vl >= outlen)
                vl = outlen - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return true;
        }
    }
    return false;
}

int th_read(th_conn *c, th_response *r, bool head_request)
{
    memset(r, 0, sizeof(*r));
    char *hend;
    while (!(hend = c->len ? memmem(c->buf, c->len, "\r\n\r\n", 4) : NULL))
        if (fill(c) <= 0)
            return -1;
    size_t hlen = (size_t)(hend - c->buf) + 4;
    r->head = malloc(hlen + 1);
    r->body = calloc(1, 1);
    if (!r->head || !r->body)
        return -1;
    memcpy(r->head, c->buf, hlen);
    r->head[hlen] = '\0';
    take(c, hlen);
    if (sscanf(r->head, "HTTP/1.%*d %d", &r->status) != 1)
        return -1;
    char v[64];
    if (head_request || r->status == 204 || r->status == 304 || r->status < 200)
        return 0;
    if (th_header(r, "Content-Length", v, sizeof(v)))
        return read_exact(c, r, (size_t)strtoull(v, NULL, 10));
    if (th_header(r, "Transfer-Encoding", v, sizeof(v)) && strcasecmp(v, "chunked") == 0) {
        r->chunked = true;
        for (;;) {
            char line[64];
            if (read_line(c, line, sizeof(line)) < 0)
                return -1;
            size_t n = (size_t)strtoull(line, NULL, 16);
            if (n == 0) {
                if (read_line(c, line, sizeof(line)) < 0) /* final CRLF */
                    return -1;
                return 0;
            }
            if (read_exact(c, r, n) < 0 || read_line(c, line, sizeof(line)) < 0)
                return -1;
        }
    }
    /* Delimited by close. */
    for (;;) {
        if (c->len && read_exact(c, r, c->len) < 0)
            return -1;
        int f = fill(c);
        if (f < 0)
            return -1;
        if (f == 0) {
            r->closed = true;
            return 0;
        }
    }
}

bool th_eof(th_conn *c)
{
    if (c->len)
        return false;
    return fill(c) == 0;
}

void th_response_free(th_response *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof(*r));
}

int th_request(unsigned port, const char *method, const char *target, const char *headers,
               const void *body, size_t body_len, th_response *r)
{
    th_conn *c = th_connect(port, false);
    if (!c)
        return -1;
    char head[2048];
    int n = snprintf(head, sizeof(head),
                     "%s %s HTTP/1.1\r\nHost: test\r\nConnection: close\r\n%s"
                     "Content-Length: %zu\r\n\r\n",
                     method, target, headers ? headers : "", body_len);
    int rc = -1;
    if (n > 0 && (size_t)n < sizeof(head) && th_send(c, head, (size_t)n) == 0 &&
        (body_len == 0 || th_send(c, body, body_len) == 0))
        rc = th_read(c, r, strcmp(method, "HEAD") == 0);
    th_close(c);
    return rc;
}

long th_status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kb = atol(line + n + 1);
    if (f)
        fclose(f);
    return kb;
}

void th_asan_small_quarantine(void)
{
    static char asan[512];
    const char *prev = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof(asan), "%s%squarantine_size_mb=4", prev ? prev : "",
             prev && *prev ? ":" : "");
    setenv("ASAN_OPTIONS", asan, 1);
}

long th_metric(unsigned port, const char *path, const char *series)
{
    th_response r;
    if (th_request(port, "GET", path, NULL, NULL, 0, &r) < 0)
        return -2;
    long v = -2;
    if (r.status == 200) {
        const char *p = strstr(r.body, series);
        v = p ? atol(p + strlen(series)) : -1;
    }
    th_response_free(&r);
    return v;
}

unsigned long long th_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000u + (unsigned long long)ts.tv_nsec / 1000000u;
}

int th_check_conf(const char *conf, char *out, size_t cap)
{
    return th_sandletd("-t", conf, out, cap);
}

int th_sandletd(const char *args, const char *conf, char *out, size_t cap)
{
    char cmd[512];
    const char *exe = getenv("SANDLETD");
    snprintf(cmd, sizeof(cmd), "%s %s -c '%s' 2>&1", exe ? exe : "./sandletd", args, conf);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(out, cap, "cannot run %s", cmd);
        return -1;
    }
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

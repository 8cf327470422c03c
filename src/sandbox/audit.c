/*
 * audit.c - the kernel's records of seccomp kills and of Landlock's
 * denials, in the supervisor.
 *
 * A worker can send itself SIGSYS (and, with sigqueue to itself, any
 * si_code), so its death by SIGSYS and its SIGSYS handler's line prove
 * nothing.  What it cannot make is the kernel's audit record of a trap
 * (type 1326, SECCOMP_RET_TRAP, logged because the worker's allowlist has
 * SECCOMP_FILTER_FLAG_LOG) or of a kill: those are read here from the
 * audit netlink socket's read-only multicast group, which only the kernel
 * sends to.  Joining it takes CAP_AUDIT_READ, so the socket is bound at
 * start, while the supervisor still has it; records arrive whether or not
 * auditd runs, and are not rate-limited as their copies in the kernel's
 * log (/dev/kmsg, printk: ten per five seconds) are.  It reads nothing
 * else: never a worker's output, a frame or network input; of a record it
 * reads whole space-separated tokens only (comm and exe, the fields a
 * process controls, are quoted or hex-encoded by the kernel).
 *
 * Landlock (ABI 7, Linux 6.15) records each denial of a domain's own
 * executable (AUDIT_LANDLOCK_ACCESS: domain, blockers, path) when the
 * kernel's audit is on, and the first one of a domain is followed by the
 * domain's record (AUDIT_LANDLOCK_DOMAIN, status=allocated) naming the pid
 * that made it: a worker, which restricts itself once.  So denials are
 * held until their domain is known (PENDING), domains are kept only for
 * the pids the supervisor says are workers (DOMAINS), and a domain is
 * forgotten at its deallocation record.  A path comes from the worker (it
 * names its own files): the kernel quotes it or hex-encodes it, and it is
 * decoded here into a bounded buffer, never used as a format.
 */
#include "config.h"

#include "sandbox/audit.h"
#include "common/log.h"
#include "sandbox/learn.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How long the reaping of a worker dead by SIGSYS waits for its record
 * (kauditd sends it asynchronously, usually within microseconds; only a
 * death by SIGSYS without a record waits the whole time). */
#define KILL_WAIT_MS 20
/* seccomp's actions that end a worker (SECCOMP_RET_ACTION_FULL). */
#define RET_TRAP         0x00030000u
#define RET_KILL_PROCESS 0x80000000u
#define RET_KILL_THREAD  0x00000000u
/* A record is about 300 bytes; the kernel never sends more than a page. */
#define MSG_MAX 9000

/* Workers' Landlock domains known at once (a slot's worker makes one;
 * past this, the oldest is forgotten and its later denials are only
 * counted as unattributed). */
#define DOMAINS 1024
/* Denials waiting for their domain's record, which follows the first
 * denial of a domain at once; older ones are dropped. */
#define PENDING 8

typedef struct domain_pid {
    uint64_t domain; /* 0: free */
    pid_t pid;
} domain_pid;

static struct {
    int fd;
    uv_poll_t poll;
    bool on;
    sandlet_audit_killed killed;
    sandlet_audit_wanted wanted;
    sandlet_audit_denied denied;
    domain_pid domains[DOMAINS];
    size_t next_domain; /* round robin when full */
    sandlet_denial pending[PENDING];
    size_t next_pending;
} au = {.fd = -1};

/* The value of the first token of msg that starts with key ("pid=", the
 * key a whole token's start), or NULL. */
static const char *token(const char *msg, size_t len, const char *key, size_t *vlen)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i < len;) {
        size_t start = i;
        while (i < len && msg[i] != ' ')
            i++;
        if (i - start >= klen && memcmp(msg + start, key, klen) == 0) {
            *vlen = i - start - klen;
            return msg + start + klen;
        }
        i++;
    }
    return NULL;
}

static bool number(const char *v, size_t vlen, int base, unsigned long long *out)
{
    char num[24];
    if (vlen == 0 || vlen >= sizeof(num) || v[0] == '-' || v[0] == '+')
        return false;
    memcpy(num, v, vlen);
    num[vlen] = '\0';
    char *end;
    errno = 0;
    *out = strtoull(num, &end, base);
    return errno == 0 && *end == '\0';
}

static int hexdigit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* A value as audit_log_untrustedstring writes it: "text" (printable, no
 * space or quote) or hex.  Into out (cap bytes, NUL-ended); false when it
 * is neither, too long, or decodes to a NUL. */
static bool untrusted(const char *v, size_t vlen, char *out, size_t cap)
{
    if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
        if (vlen - 2 >= cap)
            return false;
        memcpy(out, v + 1, vlen - 2);
        out[vlen - 2] = '\0';
        return memchr(out, '"', vlen - 2) == NULL;
    }
    if (vlen == 0 || vlen % 2 || vlen / 2 >= cap)
        return false;
    for (size_t i = 0; i < vlen; i += 2) {
        int hi = hexdigit(v[i]), lo = hexdigit(v[i + 1]);
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
            return false;
        out[i / 2] = (char)(hi << 4 | lo);
    }
    out[vlen / 2] = '\0';
    return true;
}

bool sandlet_audit_parse_denial(const char *msg, size_t len, sandlet_denial *d)
{
    const char *nl = memchr(msg, '\n', len);
    if (nl)
        len = (size_t)(nl - msg);
    size_t vlen;
    const char *v = token(msg, len, "domain=", &vlen);
    unsigned long long dom;
    if (!v || !number(v, vlen, 16, &dom) || dom == 0)
        return false;
    d->domain = dom;
    v = token(msg, len, "blockers=", &vlen);
    if (!v || vlen == 0 || vlen >= sizeof(d->blockers))
        return false;
    for (size_t i = 0; i < vlen; i++)
        if (!((v[i] >= 'a' && v[i] <= 'z') || v[i] == '.' || v[i] == '_' || v[i] == ','))
            return false;
    memcpy(d->blockers, v, vlen);
    d->blockers[vlen] = '\0';
    d->path[0] = '\0';
    d->name_only = false;
    /* A denial of no file (a signal, a port) has neither; one whose name
     * does not decode is still a denial, of a file left unnamed. */
    if ((v = token(msg, len, "path=", &vlen)) == NULL &&
        (v = token(msg, len, "name=", &vlen)) != NULL)
        d->name_only = true;
    if (v && !untrusted(v, vlen, d->path, sizeof(d->path)))
        d->path[0] = '\0';
    return true;
}

int sandlet_audit_parse_domain(const char *msg, size_t len, uint64_t *domain, pid_t *pid)
{
    const char *nl = memchr(msg, '\n', len);
    if (nl)
        len = (size_t)(nl - msg);
    size_t vlen, slen;
    const char *v = token(msg, len, "domain=", &vlen);
    const char *st = token(msg, len, "status=", &slen);
    unsigned long long dom, p;
    if (!v || !st || !number(v, vlen, 16, &dom) || dom == 0)
        return 0;
    *domain = dom;
    if (slen == 11 && memcmp(st, "deallocated", 11) == 0)
        return 2;
    if (slen != 9 || memcmp(st, "allocated", 9) != 0)
        return 0;
    v = token(msg, len, "pid=", &vlen);
    if (!v || !number(v, vlen, 10, &p) || p == 0 || p > INT32_MAX)
        return 0;
    *pid = (pid_t)p;
    return 1;
}

static domain_pid *domain_find(uint64_t domain)
{
    for (size_t i = 0; i < DOMAINS; i++)
        if (au.domains[i].domain == domain)
            return &au.domains[i];
    return NULL;
}

static void on_denial(const char *text, size_t len)
{
    static sandlet_denial d; /* 4 KiB: not on the stack of a loop callback */
    if (!au.denied || !sandlet_audit_parse_denial(text, len, &d))
        return;
    const domain_pid *dp = domain_find(d.domain);
    if (dp) {
        au.denied(dp->pid, &d);
        return;
    }
    /* Its domain's record comes next, when this is the domain's first. */
    au.pending[au.next_pending] = d;
    au.next_pending = (au.next_pending + 1) % PENDING;
}

static void on_domain(const char *text, size_t len)
{
    uint64_t domain;
    pid_t pid;
    int kind = sandlet_audit_parse_domain(text, len, &domain, &pid);
    domain_pid *dp = kind ? domain_find(domain) : NULL;
    if (kind == 2 && dp)
        dp->domain = 0;
    if (kind != 1 || dp || !au.wanted || !au.wanted(pid))
        return;
    dp = domain_find(0);
    if (!dp) {
        dp = &au.domains[au.next_domain];
        au.next_domain = (au.next_domain + 1) % DOMAINS;
    }
    dp->domain = domain;
    dp->pid = pid;
    for (size_t i = 0; i < PENDING; i++) {
        /* In the order they came: the oldest slot is the next one. */
        sandlet_denial *d = &au.pending[(au.next_pending + i) % PENDING];
        if (d->domain == domain) {
            au.denied(pid, d);
            d->domain = 0;
        }
    }
}

bool sandlet_audit_parse(const char *msg, size_t len, pid_t *pid, int *nr, uint32_t *arch)
{
    uint32_t action;
    return sandlet_seccomp_fields(msg, len, pid, nr, arch, &action) &&
           (action == RET_TRAP || action == RET_KILL_PROCESS || action == RET_KILL_THREAD);
}

void sandlet_audit_record(unsigned type, const char *text, size_t len)
{
    if (type == SANDLET_AUDIT_LANDLOCK_ACCESS) {
        on_denial(text, len);
    } else if (type == SANDLET_AUDIT_LANDLOCK_DOMAIN) {
        on_domain(text, len);
    } else if (type == AUDIT_SECCOMP) {
        pid_t pid;
        int nr;
        uint32_t arch;
        if (sandlet_audit_parse(text, len, &pid, &nr, &arch) && au.killed)
            au.killed(pid, nr, arch);
    }
}

void sandlet_audit_handlers(sandlet_audit_killed killed, sandlet_audit_wanted wanted,
                            sandlet_audit_denied denied)
{
    au.killed = killed;
    au.wanted = wanted;
    au.denied = denied;
    memset(au.domains, 0, sizeof(au.domains));
    memset(au.pending, 0, sizeof(au.pending));
    au.next_domain = au.next_pending = 0;
}

/* Reads what the socket holds now, at most max messages; false once it is
 * empty (or failed). */
static bool drain(int max)
{
    char buf[MSG_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
    for (int n = 0; n < max; n++) {
        struct sockaddr_nl from;
        socklen_t flen = sizeof(from);
        ssize_t got =
            recvfrom(au.fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
        if (got < 0 && (errno == EINTR || errno == ENOBUFS))
            continue; /* ENOBUFS: records were lost; later ones still come */
        if (got <= 0)
            return false;
        /* Only the kernel (port 0) sends to the group. */
        if (flen != sizeof(from) || from.nl_pid != 0)
            continue;
        /* One record per datagram.  Its nlmsg_len is not to be trusted
         * for the payload's size (audit sets it without the header), so
         * the datagram's own length bounds the text. */
        const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
        if ((size_t)got <= NLMSG_HDRLEN)
            continue;
        const char *text = buf + NLMSG_HDRLEN;
        size_t tlen = (size_t)got - NLMSG_HDRLEN;
        sandlet_audit_record(h->nlmsg_type, text, tlen);
    }
    return true;
}

static void on_audit(uv_poll_t *p, int status, int events)
{
    (void)p;
    (void)events;
    if (status >= 0)
        drain(256); /* a burst is read at most this far per loop turn */
}

int sandlet_audit_open(void)
{
    au.fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_AUDIT);
    struct sockaddr_nl a = {.nl_family = AF_NETLINK, .nl_groups = AUDIT_NLGRP_READLOG};
    if (au.fd < 0 || bind(au.fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int err = -errno;
        if (au.fd >= 0)
            close(au.fd);
        au.fd = -1;
        sandlet_log_errno(SANDLET_LOG_WARN, err,
                          "cannot read the kernel's audit records (netlink audit group: start "
                          "sandletd as root, which has CAP_AUDIT_READ, on a kernel with "
                          "CONFIG_AUDIT): a worker's death by SIGSYS is not counted as a "
                          "seccomp kill (sandlet_seccomp_kills_total stays 0), since only the "
                          "kernel's record tells one from a SIGSYS the worker sent itself");
        return err;
    }
    return 0;
}

int sandlet_audit_enabled(void)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
    if (fd < 0)
        return -errno;
    struct {
        struct nlmsghdr h;
        struct audit_status s;
    } req;
    memset(&req, 0, sizeof(req));
    req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.s));
    req.h.nlmsg_type = AUDIT_GET;
    req.h.nlmsg_flags = NLM_F_REQUEST;
    req.h.nlmsg_seq = 1;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int rc = -EIO;
    if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    char buf[1024] __attribute__((aligned(NLMSG_ALIGNTO)));
    for (int tries = 0; tries < 4; tries++) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 1000) <= 0)
            break;
        struct sockaddr_nl from;
        socklen_t flen = sizeof(from);
        ssize_t got = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < (ssize_t)NLMSG_HDRLEN || from.nl_pid != 0)
            break;
        const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
        if (h->nlmsg_type == NLMSG_ERROR && (size_t)got >= NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
            const struct nlmsgerr *e = NLMSG_DATA(h);
            if (e->error < 0) {
                rc = e->error;
                break;
            }
            continue; /* an acknowledgement */
        }
        if (h->nlmsg_type == AUDIT_GET &&
            (size_t)got >= NLMSG_HDRLEN + offsetof(struct audit_status, enabled) + 4) {
            struct audit_status st;
            memset(&st, 0, sizeof(st));
            size_t n = (size_t)got - NLMSG_HDRLEN;
            memcpy(&st, buf + NLMSG_HDRLEN, n < sizeof(st) ? n : sizeof(st));
            rc = st.enabled ? 1 : 0;
            break;
        }
    }
    close(fd);
    return rc;
}

int sandlet_audit_start(uv_loop_t *loop, sandlet_audit_killed killed, sandlet_audit_wanted wanted,
                        sandlet_audit_denied denied)
{
    if (au.fd < 0)
        return -EBADF;
    sandlet_audit_handlers(killed, wanted, denied);
    int rc = uv_poll_init(loop, &au.poll, au.fd);
    if (rc == 0)
        rc = uv_poll_start(&au.poll, UV_READABLE, on_audit);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_WARN, rc,
                          "cannot watch the kernel's audit records: seccomp kills are not "
                          "counted");
        close(au.fd);
        au.fd = -1;
        return rc;
    }
    au.on = true;
    return 0;
}

bool sandlet_audit_wait_kill(pid_t pid, bool (*reported)(pid_t pid))
{
    if (au.fd < 0)
        return false;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        while (drain(256))
            ;
        if (reported(pid))
            return true;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (ms >= KILL_WAIT_MS)
            return false;
        struct pollfd pfd = {.fd = au.fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)(KILL_WAIT_MS - ms)) < 0 && errno != EINTR)
            return false;
    }
}

void sandlet_audit_stop(void)
{
    if (au.on) {
        uv_poll_stop(&au.poll);
        uv_close((uv_handle_t *)&au.poll, NULL);
        au.on = false;
    }
    if (au.fd >= 0)
        close(au.fd);
    au.fd = -1;
}

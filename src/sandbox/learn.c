/*
 * learn.c - learning mode's report, in the supervisor.
 *
 * A sandbox with "syscall-violations log" lets forbidden system calls
 * through and the kernel records each one (seccomp's SECCOMP_RET_LOG, an
 * audit record of type 1326 in the kernel's log).  Those records name a
 * pid and a call number and nothing an author can act on; here they are
 * read from /dev/kmsg, matched to the live workers of sandboxes in
 * learning mode, and each call a sandbox makes is logged once with the
 * line that would allow it (or why none does), then the lines its block
 * needs so far.  This file reads only the kernel's log: never a worker's
 * output, a frame or network input; the one field of a record a process
 * controls (its comm, its exe) is never split or parsed.
 */
#include "config.h"

#include "sandbox/learn.h"
#include "common/log.h"
#include "sandbox/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* seccomp's audit record type and the action of learning mode. */
#define AUDIT_SECCOMP   1326
#define SECCOMP_RET_LOG 0x7ffc0000u
/* Call numbers tracked per sandbox (every x86-64 call is below). */
#define MAX_NR 1024
/* Sandboxes tracked: a reload's new ids count; beyond, calls are still
 * named but the summary stops. */
#define MAX_TRACKED 256
/* A /dev/kmsg record is at most about 1 KiB of text; a larger buffer
 * never fails with EINVAL. */
#define RECORD_MAX 8192

typedef struct seen {
    uint32_t id;
    uint64_t bits[MAX_NR / 64];
    unsigned need;   /* SANDLET_SC_* groups its calls need */
    char never[256]; /* calls no line allows, for the summary */
} seen;

static struct {
    int fd;
    uv_poll_t poll;
    bool on;
    sandlet_learn_lookup lookup;
    seen *seen;
    size_t nseen;
} lr = {.fd = -1};

/* The value of the token "key=VALUE" in msg (len bytes), parsed as a
 * number in base; false when absent or malformed. */
static bool field(const char *msg, size_t len, const char *key, int base, unsigned long long *out)
{
    size_t klen = strlen(key);
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        while (i < len && msg[i] != ' ')
            i++;
        size_t tlen = i - start;
        if (tlen > klen && memcmp(msg + start, key, klen) == 0) {
            char num[32];
            size_t n = tlen - klen;
            if (n >= sizeof(num))
                return false;
            memcpy(num, msg + start + klen, n);
            num[n] = '\0';
            char *end;
            errno = 0;
            unsigned long long v = strtoull(num, &end, base);
            if (errno || *end || num[0] == '-')
                return false;
            *out = v;
            return true;
        }
        i++;
    }
    return false;
}

bool sandlet_seccomp_fields(const char *msg, size_t mlen, pid_t *pid, int *nr, uint32_t *arch,
                            uint32_t *action)
{
    const char *nl = memchr(msg, '\n', mlen);
    if (nl)
        mlen = (size_t)(nl - msg);
    unsigned long long p, n, a, code;
    if (!field(msg, mlen, "pid=", 10, &p) || !field(msg, mlen, "syscall=", 10, &n) ||
        !field(msg, mlen, "arch=", 16, &a) || !field(msg, mlen, "code=0x", 16, &code))
        return false;
    if (p == 0 || p > INT32_MAX || n >= MAX_NR || a > UINT32_MAX || code > UINT32_MAX)
        return false;
    *pid = (pid_t)p;
    *nr = (int)n;
    *arch = (uint32_t)a;
    *action = (uint32_t)code & 0xffff0000u; /* SECCOMP_RET_ACTION_FULL; the rest is data */
    return true;
}

bool sandlet_learn_parse(const char *rec, size_t len, pid_t *pid, int *nr, uint32_t *arch)
{
    const char *semi = memchr(rec, ';', len);
    if (!semi)
        return false;
    const char *msg = semi + 1;
    const char *nl = memchr(msg, '\n', len - (size_t)(msg - rec));
    size_t mlen = nl ? (size_t)(nl - msg) : len - (size_t)(msg - rec);
    unsigned long long type;
    uint32_t action;
    return field(msg, mlen, "type=", 10, &type) && type == AUDIT_SECCOMP &&
           sandlet_seccomp_fields(msg, mlen, pid, nr, arch, &action) && action == SECCOMP_RET_LOG;
}

static seen *seen_for(uint32_t id)
{
    for (size_t i = 0; i < lr.nseen; i++)
        if (lr.seen[i].id == id)
            return &lr.seen[i];
    if (lr.nseen >= MAX_TRACKED)
        return NULL;
    seen *more = realloc(lr.seen, (lr.nseen + 1) * sizeof(*more));
    if (!more)
        return NULL;
    lr.seen = more;
    seen *s = &lr.seen[lr.nseen++];
    memset(s, 0, sizeof(*s));
    s->id = id;
    return s;
}

static void report(const sandlet_learn_who *who, pid_t pid, int nr)
{
    seen *s = seen_for(who->id);
    if (s) {
        uint64_t bit = 1ull << (nr % 64);
        if (s->bits[nr / 64] & bit)
            return; /* named already */
        s->bits[nr / 64] |= bit;
    }
    const char *name = sandlet_confine_syscall_name(nr);
    unsigned group;
    const char *fix = sandlet_confine_hint(name, who->groups, &group);
    sandlet_warn("sandbox '%s' (learning mode): worker %d made system call %s (%d), which its "
                 "allowlist refuses outside learning mode%s",
                 who->sandbox, (int)pid, name, nr, fix);
    if (!s)
        return;
    s->need |= group;
    if (!group) {
        size_t used = strlen(s->never);
        if (used + strlen(name) + 3 < sizeof(s->never))
            snprintf(s->never + used, sizeof(s->never) - used, "%s%s", used ? ", " : "", name);
    }
    if (s->need)
        sandlet_warn("sandbox '%s' (learning mode): for what its servlets did so far, its block "
                     "needs:%s%s%s%s%s",
                     who->sandbox, s->need & SANDLET_SC_FILES ? " syscalls files;" : "",
                     s->need & SANDLET_SC_DATABASE ? " database \"CONNINFO\";" : "",
                     s->never[0] ? " (and no line allows: " : "", s->never, s->never[0] ? ")" : "");
    else
        sandlet_warn("sandbox '%s' (learning mode): for what its servlets did so far, no line of "
                     "its block would do; no line allows: %s",
                     who->sandbox, s->never);
}

static void on_kmsg(uv_poll_t *p, int status, int events)
{
    (void)p;
    (void)events;
    if (status < 0)
        return;
    char rec[RECORD_MAX];
    /* A burst is read at most this far per loop turn. */
    for (int n = 0; n < 256; n++) {
        ssize_t got = read(lr.fd, rec, sizeof(rec) - 1);
        if (got < 0 && errno == EPIPE)
            continue; /* records were overwritten before we read them */
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return;
        pid_t pid;
        int nr;
        uint32_t arch;
        sandlet_learn_who who;
        if (sandlet_learn_parse(rec, (size_t)got, &pid, &nr, &arch) && lr.lookup(pid, &who))
            report(&who, pid, nr);
    }
}

int sandlet_learn_open(void)
{
    lr.fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (lr.fd < 0) {
        int err = -errno;
        sandlet_log_errno(SANDLET_LOG_WARN, err,
                          "learning mode: cannot read the kernel's log (/dev/kmsg), so the "
                          "calls it lets through are only in the kernel's audit log (dmesg, "
                          "type=1326), not named here");
        return err;
    }
    /* Only what happens from now on. */
    lseek(lr.fd, 0, SEEK_END);
    return 0;
}

int sandlet_learn_start(uv_loop_t *loop, sandlet_learn_lookup lookup)
{
    if (lr.fd < 0)
        return -EBADF;
    lr.lookup = lookup;
    int rc = uv_poll_init(loop, &lr.poll, lr.fd);
    if (rc == 0)
        rc = uv_poll_start(&lr.poll, UV_READABLE, on_kmsg);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_WARN, rc, "learning mode: cannot watch /dev/kmsg");
        close(lr.fd);
        lr.fd = -1;
        return rc;
    }
    lr.on = true;
    return 0;
}

void sandlet_learn_stop(void)
{
    if (lr.on) {
        uv_poll_stop(&lr.poll);
        uv_close((uv_handle_t *)&lr.poll, NULL);
        lr.on = false;
    }
    if (lr.fd >= 0)
        close(lr.fd);
    lr.fd = -1;
    free(lr.seen);
    lr.seen = NULL;
    lr.nseen = 0;
}

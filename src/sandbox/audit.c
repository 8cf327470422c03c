/*
 * audit.c - the kernel's records of seccomp kills, in the supervisor.
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
 */
#include "config.h"

#include "sandbox/audit.h"
#include "common/log.h"
#include "sandbox/learn.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdbool.h>
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

static struct {
    int fd;
    uv_poll_t poll;
    bool on;
    sandlet_audit_killed killed;
} au = {.fd = -1};

bool sandlet_audit_parse(const char *msg, size_t len, pid_t *pid, int *nr, uint32_t *arch)
{
    uint32_t action;
    return sandlet_seccomp_fields(msg, len, pid, nr, arch, &action) &&
           (action == RET_TRAP || action == RET_KILL_PROCESS || action == RET_KILL_THREAD);
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
        if ((size_t)got <= NLMSG_HDRLEN || h->nlmsg_type != AUDIT_SECCOMP)
            continue;
        pid_t pid;
        int nr;
        uint32_t arch;
        if (sandlet_audit_parse(buf + NLMSG_HDRLEN, (size_t)got - NLMSG_HDRLEN, &pid, &nr, &arch) &&
            au.killed)
            au.killed(pid, nr, arch);
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

int sandlet_audit_start(uv_loop_t *loop, sandlet_audit_killed killed)
{
    if (au.fd < 0)
        return -EBADF;
    au.killed = killed;
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

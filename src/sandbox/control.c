/*
 * control.c - sendmsg/recvmsg of the fixed-size control messages, with
 * descriptor passing.  It must never keep a descriptor it did not expect:
 * anything unexpected is closed and reported as -EPROTO.
 */
#include "config.h"

#include "sandbox/control.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int sandlet_ctl_send(int sock, const sandlet_ctl *m, int fd)
{
    struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&u, 0, sizeof(u));
        msg.msg_control = u.buf;
        msg.msg_controllen = sizeof(u.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t n;
    do
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return n == (ssize_t)sizeof(*m) ? 0 : -EPROTO;
}

int sandlet_ctl_recv(int sock, sandlet_ctl *m, int *fd)
{
    struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    *fd = -1;
    ssize_t n;
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    int bad = n != (ssize_t)sizeof(*m) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*fd < 0 && !bad)
                *fd = got;
            else
                close(got);
        }
    }
    if (n == 0 && *fd < 0)
        return 0;
    if (bad) {
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return -EPROTO;
    }
    return 1;
}

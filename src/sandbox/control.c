/*
 * control.c - sendmsg/recvmsg of the fixed-size control messages, with
 * descriptor passing, and the queue that keeps them when the socket is
 * full.  It must never keep a descriptor it did not expect: anything
 * unexpected is closed and reported as -EPROTO.
 */
#include "config.h"

#include "sandbox/control.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most descriptors one message can carry (the kernel's SCM_MAX_FD):
 * a receive buffer this large means the kernel never has to close
 * descriptors that did not fit, in our process, itself. */
#define CTL_FD_ROOM 253

int sandlet_ctl_send(int sock, const sandlet_ctl *m, const int *fds, size_t nfd)
{
    struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * SANDLET_CTL_MAXFD)];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfd > SANDLET_CTL_MAXFD)
        return -EINVAL;
    if (nfd > 0) {
        memset(&u, 0, sizeof(u));
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfd);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfd);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfd);
    }
    ssize_t n;
    do
        n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    return n == (ssize_t)sizeof(*m) ? 0 : -EPROTO;
}

/* recvmsg returned 0: on a SEQPACKET socket that is either the peer's
 * close or an empty message, which anyone can send and which must not
 * stop the reader.  Only a hang-up is the end. */
static int peer_closed(int sock)
{
    struct pollfd p = {.fd = sock, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) < 0)
        return 1;
    return (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

void sandlet_ctl_discard_fd(int fd)
{
    if (fd < 0)
        return;
    /* A socket whose sender set SO_LINGER with unsent data would make
     * close() wait for the linger time (hours, if it chose): linger off
     * first, so that closing what a hostile sender attached never blocks
     * the process that received it. */
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
        struct linger off = {.l_onoff = 0, .l_linger = 0};
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
    }
    close(fd);
}

int sandlet_ctl_recv(int sock, sandlet_ctl *m, int *fds, size_t maxfd)
{
    /* A larger message shows as MSG_TRUNC, a shorter one by its length:
     * neither is ever taken for a valid message. */
    struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * CTL_FD_ROOM)];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    for (size_t i = 0; i < maxfd; i++)
        fds[i] = -1;
    memset(m, 0, sizeof(*m));
    ssize_t n;
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    /* A page path is a C string for whoever reads it: it must end inside
     * the message. */
    bool bad = n != (ssize_t)sizeof(*m) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
               m->page[sizeof(m->page) - 1] != '\0';
    size_t got = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            bad = true; /* credentials or anything else: not ours */
            continue;
        }
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (got < maxfd)
                fds[got++] = fd;
            else {
                sandlet_ctl_discard_fd(fd);
                bad = true;
            }
        }
    }
    if (n == 0 && got == 0 && !(msg.msg_flags & MSG_CTRUNC) && peer_closed(sock))
        return 0;
    if (bad) {
        for (size_t i = 0; i < got; i++) {
            sandlet_ctl_discard_fd(fds[i]);
            fds[i] = -1;
        }
        return -EPROTO;
    }
    return 1;
}

static void close_fds(const int *fds, size_t nfd)
{
    for (size_t i = 0; i < nfd; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

int sandlet_ctl_queue_send(sandlet_ctl_queue *q, int sock, const sandlet_ctl *m, const int *fds,
                           size_t nfd)
{
    if (nfd > SANDLET_CTL_MAXFD) {
        close_fds(fds, nfd);
        return -EINVAL;
    }
    if (!q->head) {
        int rc = sandlet_ctl_send(sock, m, fds, nfd);
        if (rc != -EAGAIN) {
            close_fds(fds, nfd);
            return rc;
        }
    }
    if (q->max && q->len >= q->max) {
        close_fds(fds, nfd);
        return -ENOBUFS;
    }
    sandlet_ctl_out *o = calloc(1, sizeof(*o));
    if (!o) {
        close_fds(fds, nfd);
        return -ENOMEM;
    }
    o->m = *m;
    o->nfd = nfd;
    for (size_t i = 0; i < nfd; i++)
        o->fds[i] = fds[i];
    if (q->tail)
        q->tail->next = o;
    else
        q->head = o;
    q->tail = o;
    q->len++;
    return 0;
}

int sandlet_ctl_queue_flush(sandlet_ctl_queue *q, int sock)
{
    while (q->head) {
        sandlet_ctl_out *o = q->head;
        int rc = sandlet_ctl_send(sock, &o->m, o->fds, o->nfd);
        if (rc == -EAGAIN)
            return rc;
        q->head = o->next;
        if (!q->head)
            q->tail = NULL;
        q->len--;
        close_fds(o->fds, o->nfd);
        free(o);
        if (rc < 0)
            return rc;
    }
    return 0;
}

size_t sandlet_ctl_queue_drop(sandlet_ctl_queue *q, int (*drop)(const sandlet_ctl *m, void *arg),
                              void *arg)
{
    size_t n = 0;
    sandlet_ctl_out *prev = NULL;
    for (sandlet_ctl_out *o = q->head, *next; o; o = next) {
        next = o->next;
        if (!drop(&o->m, arg)) {
            prev = o;
            continue;
        }
        if (prev)
            prev->next = next;
        else
            q->head = next;
        if (q->tail == o)
            q->tail = prev;
        q->len--;
        close_fds(o->fds, o->nfd);
        free(o);
        n++;
    }
    return n;
}

void sandlet_ctl_queue_clear(sandlet_ctl_queue *q)
{
    while (q->head) {
        sandlet_ctl_out *o = q->head;
        q->head = o->next;
        close_fds(o->fds, o->nfd);
        free(o);
    }
    q->tail = NULL;
    q->len = 0;
}

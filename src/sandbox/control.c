/*
 * control.c - sendmsg/recvmsg of the fixed-size control messages, with
 * descriptor passing, and the queue that keeps them when the socket is
 * full.  It must never keep a descriptor it did not expect: anything
 * unexpected is closed and reported as -EPROTO.
 */
#include "config.h"

#include "sandbox/control.h"
#include "common/conf.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    size_t got = sandlet_ctl_take_fds(&msg, fds, maxfd, &bad);
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

size_t sandlet_ctl_take_fds(struct msghdr *mh, int *fds, size_t max, bool *bad)
{
    size_t got = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
            c->cmsg_len < CMSG_LEN(0)) {
            *bad = true;
            continue;
        }
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (got < max) {
                fds[got++] = fd;
            } else {
                sandlet_ctl_discard_fd(fd);
                *bad = true;
            }
        }
    }
    return got;
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

/* ---- a reload's configuration ----------------------------------------------- */

/* "SLCF", then u32 fields in host order (both ends are this binary). */
#define CONF_MAGIC 0x46434c53u
/* The text is at most sandlet_conf_load's 1 MiB; names and the folder are
 * paths; one id per sandbox. */
#define CONF_BLOB_MAX ((size_t)4 * 1024 * 1024)

static int put_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int put_u32(int fd, uint32_t v)
{
    return put_all(fd, &v, sizeof(v));
}

static int put_bytes(int fd, const char *p, size_t n)
{
    if (n > UINT32_MAX)
        return -EFBIG;
    int rc = put_u32(fd, (uint32_t)n);
    return rc ? rc : put_all(fd, p, n);
}

int sandlet_ctl_conf_write(const sandlet_conf_text *t, const char *name, const uint32_t *ids,
                           size_t nids)
{
    int fd = memfd_create("sandlet-conf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    int rc = put_u32(fd, CONF_MAGIC);
    if (rc == 0)
        rc = nids > UINT32_MAX ? -EFBIG : put_u32(fd, (uint32_t)nids);
    for (size_t i = 0; rc == 0 && i < nids; i++)
        rc = put_u32(fd, ids[i]);
    if (rc == 0)
        rc = put_bytes(fd, name, strlen(name));
    if (rc == 0)
        rc = put_bytes(fd, t->basedir, strlen(t->basedir));
    if (rc == 0)
        rc = put_bytes(fd, t->text, t->len);
    /* The acceptor reads what we checked, and nothing else. */
    if (rc == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
        rc = -errno;
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

/* A bounded reader over the blob. */
typedef struct {
    const char *p, *end;
} cursor;

static bool get_u32(cursor *c, uint32_t *v)
{
    if ((size_t)(c->end - c->p) < sizeof(*v))
        return false;
    memcpy(v, c->p, sizeof(*v));
    c->p += sizeof(*v);
    return true;
}

/* A length-prefixed string, copied NUL-terminated into *out. */
static bool get_str(cursor *c, char **out, size_t *len)
{
    uint32_t n;
    if (!get_u32(c, &n) || (size_t)(c->end - c->p) < n)
        return false;
    *out = malloc((size_t)n + 1);
    if (!*out)
        return false;
    memcpy(*out, c->p, n);
    (*out)[n] = '\0';
    if (len)
        *len = n;
    c->p += n;
    return true;
}

int sandlet_ctl_conf_read(int fd, sandlet_conf **out, char *err, size_t errlen)
{
    *out = NULL;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (size_t)st.st_size > CONF_BLOB_MAX) {
        snprintf(err, errlen,
                 "the reloaded configuration's descriptor is not a file of at most "
                 "4 MiB");
        return -EPROTO;
    }
    size_t size = (size_t)st.st_size;
    char *blob = malloc(size);
    if (!blob) {
        snprintf(err, errlen, "out of memory reading the reloaded configuration");
        return -ENOMEM;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, blob + got, size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    cursor c = {blob, blob + got};
    uint32_t magic = 0, nids = 0;
    uint32_t *ids = NULL;
    char *name = NULL, *dir = NULL, *text = NULL;
    size_t len = 0;
    int rc = -EPROTO;
    bool ok = got == size && get_u32(&c, &magic) && magic == CONF_MAGIC && get_u32(&c, &nids) &&
              nids <= (size_t)(c.end - c.p) / sizeof(uint32_t);
    if (ok) {
        ids = calloc(nids ? nids : 1, sizeof(*ids));
        for (uint32_t i = 0; ids && ok && i < nids; i++)
            ok = get_u32(&c, &ids[i]);
        ok = ok && ids && get_str(&c, &name, NULL) && get_str(&c, &dir, NULL) &&
             get_str(&c, &text, &len) && c.p == c.end;
    }
    if (!ok) {
        snprintf(err, errlen, "the reloaded configuration from the supervisor is malformed");
    } else {
        rc = sandlet_conf_parse_public(text, len, name, dir, out, err, errlen);
        if (rc == 0 && (*out)->nsandboxes != nids) {
            snprintf(err, errlen,
                     "the reloaded configuration names %zu sandboxes, the supervisor %u",
                     (*out)->nsandboxes, nids);
            sandlet_conf_free(*out);
            *out = NULL;
            rc = -EPROTO;
        }
        for (size_t i = 0; rc == 0 && i < nids; i++)
            (*out)->sandboxes[i].id = ids[i];
    }
    free(ids);
    free(name);
    free(dir);
    free(text);
    free(blob);
    return rc;
}

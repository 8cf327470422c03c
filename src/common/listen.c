/*
 * listen.c - a listening socket made from a "listen" line: the address
 * parsed, the options every listener gets, the bind.  The start binds its
 * listeners with it, the supervisor a reload's new ones, and "sandletd
 * -t" tries each port with it.  A daemon started by a binary upgrade
 * checks with it that each socket it inherited is a listener of one of
 * its listen lines.  It must never listen or accept: what happens to the
 * socket is the caller's.
 */
#include "config.h"

#include "common/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* l's address into *out (its length into *lenp); -EINVAL when the host is
 * not a numeric address. */
static int listen_addr(const sandlet_listen_conf *l, struct sockaddr_storage *out, socklen_t *lenp)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, l->host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)l->port);
        len = sizeof(*a4);
    } else if (inet_pton(AF_INET6, l->host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)l->port);
        len = sizeof(*a6);
    } else {
        return -EINVAL;
    }
    *out = ss;
    *lenp = len;
    return 0;
}

int sandlet_listen_bind(const sandlet_listen_conf *l, int *out)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int rc = listen_addr(l, &ss, &len);
    if (rc < 0)
        return rc;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* IPv6 listeners take IPv6 only: [::] beside 0.0.0.0 is two lines. */
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *out = fd;
    return 0;
}

int sandlet_listen_matches(int fd, const sandlet_listen_conf *l)
{
    int type = 0, listening = 0;
    socklen_t olen = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &olen) < 0)
        return -errno; /* ENOTSOCK, EBADF */
    olen = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &olen) < 0)
        return -errno;
    if (type != SOCK_STREAM || !listening)
        return -EINVAL;
    struct sockaddr_storage want, got;
    socklen_t wlen, glen = sizeof(got);
    memset(&got, 0, sizeof(got));
    int rc = listen_addr(l, &want, &wlen);
    if (rc < 0)
        return rc;
    if (getsockname(fd, (struct sockaddr *)&got, &glen) < 0)
        return -errno;
    if (got.ss_family != want.ss_family)
        return 0;
    if (want.ss_family == AF_INET) {
        const struct sockaddr_in *w = (const struct sockaddr_in *)&want;
        const struct sockaddr_in *g = (const struct sockaddr_in *)&got;
        return w->sin_addr.s_addr == g->sin_addr.s_addr &&
               (l->port == 0 || w->sin_port == g->sin_port);
    }
    const struct sockaddr_in6 *w = (const struct sockaddr_in6 *)&want;
    const struct sockaddr_in6 *g = (const struct sockaddr_in6 *)&got;
    return memcmp(&w->sin6_addr, &g->sin6_addr, sizeof(w->sin6_addr)) == 0 &&
           (l->port == 0 || w->sin6_port == g->sin6_port);
}

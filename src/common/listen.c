/*
 * listen.c - a listening socket made from a "listen" line: the address
 * parsed, the options every listener gets, the bind.  The start binds its
 * listeners with it, the supervisor a reload's new ones, and "sandletd
 * -t" tries each port with it.  It must
 * never listen or accept: what happens to the socket is the caller's.
 */
#include "config.h"

#include "common/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int sandlet_listen_bind(const sandlet_listen_conf *l, int *out)
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

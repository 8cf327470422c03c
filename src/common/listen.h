/*
 * listen.h - a "listen" line's bound socket (listen.c).
 */
#ifndef SANDLET_LISTEN_H
#define SANDLET_LISTEN_H

#include "common/conf.h"

/* A socket bound to l's address and port (the listeners' options set),
 * not listening yet, into *fd; 0 or -errno. */
int sandlet_listen_bind(const sandlet_listen_conf *l, int *fd);
/* Whether fd is a listening TCP socket bound to l's address and port
 * (any port when l's is 0: the one the kernel chose for the daemon that
 * handed fd over): 1 when it is, 0 when it listens on another address,
 * -EINVAL when it is no listening stream socket, or another -errno
 * (-ENOTSOCK, -EBADF). */
int sandlet_listen_matches(int fd, const sandlet_listen_conf *l);

#endif

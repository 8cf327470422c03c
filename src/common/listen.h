/*
 * listen.h - a "listen" line's bound socket (listen.c).
 */
#ifndef SANDLET_LISTEN_H
#define SANDLET_LISTEN_H

#include "common/conf.h"

/* A socket bound to l's address and port (the listeners' options set),
 * not listening yet, into *fd; 0 or -errno. */
int sandlet_listen_bind(const sandlet_listen_conf *l, int *fd);

#endif

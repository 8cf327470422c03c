/*
 * worker.h - a sandbox worker process: the servlet side of a socketpair.
 */
#ifndef SANDLET_WORKER_H
#define SANDLET_WORKER_H

#include <stdbool.h>
#include <sys/types.h>

/* The descriptor the supervisor maps the worker's socketpair end to. */
#define SANDLET_WORKER_FD 3
/* The worker's spool file, read-only (lib/spool.c), after the claim word
 * (5); absent when its sandbox has no spool. */
#define SANDLET_SPOOL_FD 6

/* Runs a worker of the named sandbox on SANDLET_WORKER_FD until the
 * acceptor closes it, dying with supervisor (its parent, named on the
 * command line); write_blocked (the sandbox is over its write quota)
 * makes its writable directories read-only.  Returns the exit status. */
int sandlet_worker_main(const char *sandbox, pid_t supervisor, bool write_blocked);

#endif /* SANDLET_WORKER_H */

/*
 * supervisor.h - the guardian process that starts and reaps workers.
 */
#ifndef SANDLET_SUPERVISOR_H
#define SANDLET_SUPERVISOR_H

#include "loop/conf.h"

/* Runs the supervisor until the acceptor closes ctl_fd and every worker
 * is gone.  Returns the process exit status. */
int sandlet_supervisor_run(const sandlet_conf *conf, int ctl_fd);

#endif /* SANDLET_SUPERVISOR_H */

/*
 * supervisor.h - the guardian process that starts and reaps workers.
 */
#ifndef SANDLET_SUPERVISOR_H
#define SANDLET_SUPERVISOR_H

#include "common/conf.h"

/* Runs the supervisor until the acceptor closes ctl_fd and every worker
 * is gone.  conf is sandlet_conf_plan()'s copy: what starting workers
 * takes, without the acceptor's settings.  exe_fd is sandletd's own
 * binary, opened O_PATH at start: the workers are exec'd from it, so that
 * they run the very binary that was started even if the file is replaced
 * (upgrade) or we run under a tool such as valgrind.  Returns the process
 * exit status. */
int sandlet_supervisor_run(const sandlet_conf *conf, int ctl_fd, int exe_fd);

/* 0 when the spool root can hold the sandboxes' upload spools; else
 * -errno, and for a root that exists but must not be used, why and the
 * fix in why (cap bytes).  -ENOENT: it does not exist (yet). */
int sandlet_spool_root_refusal(const char *root, char *why, size_t cap);

/* Marks every descriptor above standard error close-on-exec: one left
 * open by whoever started sandletd must never reach a worker. */
void sandlet_cloexec_inherited(void);

#endif /* SANDLET_SUPERVISOR_H */

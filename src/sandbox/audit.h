/*
 * audit.h - the kernel's records of seccomp kills (audit.c): the only
 * evidence of a seccomp kill that a worker cannot make itself.
 */
#ifndef SANDLET_AUDIT_H
#define SANDLET_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

/* Told of each record of a trap or kill: the filter of pid refused system
 * call nr of audit architecture arch.  The callee takes it only for a
 * live worker. */
typedef void (*sandlet_audit_killed)(pid_t pid, int nr, uint32_t arch);

/* Joins the audit netlink multicast group, while the process may
 * (CAP_AUDIT_READ: before hardening).  0, or -errno after logging that
 * seccomp kills are then not counted. */
int sandlet_audit_open(void);
/* Watches it on loop. */
int sandlet_audit_start(uv_loop_t *loop, sandlet_audit_killed killed);
/* For the reaping of pid, dead by SIGSYS: reads records until
 * reported(pid) is true or a few milliseconds passed (the kernel's audit
 * thread sends asynchronously).  False when no seccomp kill of pid was
 * reported, or the socket is not open. */
bool sandlet_audit_wait_kill(pid_t pid, bool (*reported)(pid_t pid));
void sandlet_audit_stop(void);

/* One record's text (a netlink message of type AUDIT_SECCOMP): true for a
 * trap or kill, with its pid, call and architecture. */
bool sandlet_audit_parse(const char *msg, size_t len, pid_t *pid, int *nr, uint32_t *arch);

#endif

/*
 * learn.h - learning mode's report (learn.c): the system calls that
 * workers of a sandbox with "syscall-violations log" made and that its
 * allowlist refuses otherwise, each named once with the line that would
 * allow it, and after each a summary of the lines the sandbox's block
 * needs.
 */
#ifndef SANDLET_LEARN_H
#define SANDLET_LEARN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

/* Who a pid is, when it is a live worker of a sandbox in learning mode. */
typedef struct sandlet_learn_who {
    const char *sandbox;
    uint32_t id;     /* the sandbox's id: what is reported is per id */
    unsigned groups; /* its SANDLET_SC_* groups */
} sandlet_learn_who;

typedef bool (*sandlet_learn_lookup)(pid_t pid, sandlet_learn_who *out);

/* Opens the kernel's log (/dev/kmsg: the seccomp records of learning
 * mode land there), past what it holds now: while the process may still
 * open it (before hardening).  Returns 0, or -errno after logging what is
 * then not reported. */
int sandlet_learn_open(void);
/* Watches what sandlet_learn_open opened on loop. */
int sandlet_learn_start(uv_loop_t *loop, sandlet_learn_lookup lookup);
void sandlet_learn_stop(void);

/* One /dev/kmsg record ("PRI,SEQ,TS,FLAGS;MESSAGE\n..."): true when it is
 * a seccomp record of a call let through by learning mode (audit type
 * 1326, action SECCOMP_RET_LOG), with its pid, system-call number and
 * audit architecture.  Only the kernel writes the record, but the comm
 * and exe fields in it are the process's own: fields are read only as
 * whole space-separated tokens, which audit quotes or hex-encodes. */
bool sandlet_learn_parse(const char *rec, size_t len, pid_t *pid, int *nr, uint32_t *arch);
/* The fields of a seccomp audit record's text (up to its first line's
 * end), wherever it was read: pid, call, architecture and action
 * (SECCOMP_RET_ACTION_FULL bits of code=), each a whole token. */
bool sandlet_seccomp_fields(const char *msg, size_t mlen, pid_t *pid, int *nr, uint32_t *arch,
                            uint32_t *action);

#endif

/*
 * audit.h - the kernel's records of seccomp kills and Landlock denials
 * (audit.c): the only evidence of a seccomp kill that a worker cannot make
 * itself, and the only word of a file access Landlock refused it.
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

/* Record types of Landlock (Linux 6.15, ABI 7), newer than some headers. */
#define SANDLET_AUDIT_LANDLOCK_ACCESS 1423
#define SANDLET_AUDIT_LANDLOCK_DOMAIN 1424

/* A decoded path is at most PATH_MAX bytes; longer ones are refused. */
#define SANDLET_DENIAL_PATH_MAX 4096

/* One Landlock denial as its record (AUDIT_LANDLOCK_ACCESS) says it. */
typedef struct sandlet_denial {
    uint64_t domain;   /* the Landlock domain that refused */
    char blockers[96]; /* "fs.read_file", or several comma-separated:
                        * only a-z, '.', '_' and ',' */
    /* The object: path= (absolute, as the process sees the tree) or, for
     * the few records that have only a name, name= (one component).  The
     * kernel quotes it or hex-encodes it; here it is decoded, NUL-ended,
     * and may hold any byte but NUL (a worker names its own files).  ""
     * when the record names none (a denial that is not of a file). */
    char path[SANDLET_DENIAL_PATH_MAX + 1];
    bool name_only; /* path is a name= (one component), not a path= */
} sandlet_denial;

/* Told of a Landlock denial of a process the wanted callback accepted
 * when its domain's record came (a live worker). */
typedef void (*sandlet_audit_denied)(pid_t pid, const sandlet_denial *d);
/* Whether pid, which made a Landlock domain, is one of ours. */
typedef bool (*sandlet_audit_wanted)(pid_t pid);

/* Joins the audit netlink multicast group, while the process may
 * (CAP_AUDIT_READ: before hardening).  0, or -errno after logging that
 * seccomp kills are then not counted. */
int sandlet_audit_open(void);
/* Whether the kernel's audit is on (audit_enabled 1 or 2): 1, 0, or
 * -errno (no CAP_AUDIT_CONTROL, no audit in this kernel or namespace).
 * Landlock logs its denials only then, whereas seccomp's records of a
 * filter with SECCOMP_FILTER_FLAG_LOG come either way.  Asked on a unicast
 * socket of its own, closed at once; it changes nothing. */
int sandlet_audit_enabled(void);
/* Watches it on loop.  denied and wanted may be NULL (no Landlock). */
int sandlet_audit_start(uv_loop_t *loop, sandlet_audit_killed killed, sandlet_audit_wanted wanted,
                        sandlet_audit_denied denied);
/* What the socket's reader does with one record (a netlink message of
 * type, its text): a seccomp record goes to killed; a Landlock denial to
 * denied once its domain's record named a wanted pid.  Public for the
 * unit tests, with sandlet_audit_handlers (what start sets). */
void sandlet_audit_record(unsigned type, const char *text, size_t len);
void sandlet_audit_handlers(sandlet_audit_killed killed, sandlet_audit_wanted wanted,
                            sandlet_audit_denied denied);
/* For the reaping of pid, dead by SIGSYS: reads records until
 * reported(pid) is true or a few milliseconds passed (the kernel's audit
 * thread sends asynchronously).  False when no seccomp kill of pid was
 * reported, or the socket is not open. */
bool sandlet_audit_wait_kill(pid_t pid, bool (*reported)(pid_t pid));
void sandlet_audit_stop(void);

/* One record's text (a netlink message of type AUDIT_SECCOMP): true for a
 * trap or kill, with its pid, call and architecture. */
bool sandlet_audit_parse(const char *msg, size_t len, pid_t *pid, int *nr, uint32_t *arch);
/* One AUDIT_LANDLOCK_ACCESS record's text into *d: false when it is not
 * one (no domain, blockers of an unexpected shape, a path that does not
 * decode). */
bool sandlet_audit_parse_denial(const char *msg, size_t len, sandlet_denial *d);
/* One AUDIT_LANDLOCK_DOMAIN record's text: 1 "status=allocated" (with the
 * pid of the process that made the domain), 2 "status=deallocated", 0
 * neither or malformed. */
int sandlet_audit_parse_domain(const char *msg, size_t len, uint64_t *domain, pid_t *pid);

#endif

/*
 * confine.h - locks a worker process down once its servlets are loaded and
 * initialised: resource limits, an unprivileged identity, no_new_privs, no
 * capabilities, Landlock (which paths it may open) and a seccomp allowlist
 * (which system calls it may make).
 *
 * Confinement is one-way: it cannot be undone or loosened in the process
 * that applied it, and a failed step leaves the process partly confined,
 * so the caller must exit when sandlet_confine_apply() fails.
 */
#ifndef SANDLET_CONFINE_H
#define SANDLET_CONFINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Opt-in system-call groups on top of the base set a worker loop needs. */
enum {
    SANDLET_SC_FILES = 1u << 0,    /* open/create/rename/unlink...; still fenced by Landlock */
    SANDLET_SC_DATABASE = 1u << 1, /* AF_UNIX/AF_INET/AF_INET6 stream sockets, to reconnect */
};
#define SANDLET_SC_ALL (SANDLET_SC_FILES | SANDLET_SC_DATABASE)

typedef struct sandlet_confine {
    const char *sandbox;           /* sandbox name, for messages */
    uid_t uid;                     /* (uid_t)-1: keep the current user */
    gid_t gid;                     /* (gid_t)-1: keep the current group */
    unsigned long long memory;     /* RLIMIT_AS in bytes; 0: leave unchanged */
    unsigned long long file_size;  /* RLIMIT_FSIZE in bytes; 0: leave unchanged */
    unsigned long open_files;      /* RLIMIT_NOFILE; 0: leave unchanged */
    unsigned long cpu_seconds;     /* RLIMIT_CPU over the worker's life; 0: leave unchanged */
    bool core_dumps;               /* false: RLIMIT_CORE 0 and not dumpable (no ptrace attach) */
    const char *const *read_paths; /* Landlock read/execute: files or directories */
    size_t nread;
    const char *const *write_paths; /* Landlock read-write: directories (or files) */
    size_t nwrite;
    bool write_blocked;            /* over its write quota: write_paths become read-only */
    const uint16_t *connect_ports; /* Landlock: the only TCP ports connect() may reach */
    size_t nports;
    unsigned groups; /* SANDLET_SC_* */
    bool learn;      /* seccomp violations are logged by the kernel and allowed (development) */
} sandlet_confine;

/*
 * Confines the calling process, which must be single-threaded, in this
 * order: libc preparation (TZ and tzset(), LIBC_FATAL_STDERR_, so that
 * localtime() and glibc's fatal messages need no file later) → rlimits (RLIMIT_NPROC 0 always:
 * no new processes; with a file-size limit, SIGXFSZ ignored so that a
 * write past it fails with EFBIG) → setgroups(0)/setgid/setuid when uid or
 * gid is given, verified irreversible → PR_SET_NO_NEW_PRIVS → empty
 * capability sets → Landlock (files; TCP bind refused and connect only to
 * connect_ports, from ABI 4; abstract unix sockets and signals scoped to
 * the process, from ABI 6) → a check that no mapping is both writable
 * and executable (and no personality makes readable memory executable) →
 * SIGSYS reporter and seccomp filter (which
 * refuses every executable mapping and every mremap() that would leave
 * an alias behind).
 *
 * Returns 0, or a negative errno after writing one line to err (when not
 * NULL) naming the sandbox, the step, the value and the fix.  A kernel
 * without Landlock is not an error: *landlock_active (when not NULL) is set
 * to false and the caller warns once; it is true when Landlock applies.
 *
 * After it returns the process can no longer open files outside its
 * Landlock paths, load libraries, fork, exec or make system calls outside
 * its allowlist: a forbidden call writes "sandletd worker SANDBOX: seccomp:
 * forbidden system call NAME (NR)" to standard error and kills the process
 * with SIGSYS (or, in learning mode, is logged by the kernel and allowed).
 */
int sandlet_confine_apply(const sandlet_confine *c, bool *landlock_active, char *err,
                          size_t errlen);

/*
 * What this kernel's Landlock cannot enforce of c, as one line for a
 * warning ("...; needs Linux 6.7 (Landlock ABI 4)"), or NULL when it
 * enforces all of it.  Asks the kernel; no side effects.
 */
const char *sandlet_confine_kernel_gaps(const sandlet_confine *c, char *buf, size_t len);

/* Name of a system call number of this architecture for messages
 * ("openat"), via libseccomp; "unknown" when it has none. */
const char *sandlet_confine_syscall_name(int nr);

/* The i-th entry of the seccomp allowlist (for tests and documentation):
 * its system-call name, with its group (0 for the base set, else one
 * SANDLET_SC_* bit) in *group when not NULL.  NULL past the end.  An entry
 * may allow a call only for some arguments. */
const char *sandlet_confine_allowlist(size_t i, unsigned *group);

#endif /* SANDLET_CONFINE_H */

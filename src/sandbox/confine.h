/*
 * confine.h - locks a worker process down in two steps around the loading
 * of its servlets: before the first dlopen() (resource limits, the
 * sandbox's identity, no_new_privs, no capabilities, Landlock and a small
 * filter against exec and new processes), so that no servlet code -- not
 * even a library constructor -- runs with more; and after the servlets'
 * init (a check that no memory is writable and executable, and the seccomp
 * allowlist, synchronised onto every thread init started).
 *
 * Confinement is one-way: it cannot be undone or loosened in the process
 * that applied it, and a failed step leaves the process partly confined,
 * so the caller must exit when a step fails.
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
    /* The servlet libraries: readable (not executable as programs), with
     * the directories of their RUNPATH/RPATH and the system's library
     * directories, so that dlopen() works after Landlock.  A missing one
     * is left to dlopen() to report. */
    const char *const *lib_paths;
    size_t nlibs;
    const char *const *write_paths; /* Landlock read-write: directories (or files) */
    size_t nwrite;
    bool write_blocked;            /* over its write quota: write_paths become read-only */
    const uint16_t *connect_ports; /* Landlock: the only TCP ports connect() may reach */
    size_t nports;
    unsigned groups; /* SANDLET_SC_* */
    bool learn;      /* seccomp violations are logged by the kernel and allowed (development) */
    /* Whether the process may make AF_UNIX sockets once confined.  Workers
     * never may (worker.c): a pathname socket is reached by connect()
     * whatever Landlock says, so socket(AF_UNIX) and socketpair() fail
     * with EACCES until the allowlist and are refused by it; a database
     * on a unix socket is connected before confinement and reconnected by
     * a fresh worker.  The unit tests' database case sets it. */
    bool unix_sockets;
} sandlet_confine;

/*
 * The first step, before the first dlopen(): confines the calling process,
 * which must be single-threaded (checked: Landlock and no_new_privs bind
 * only the calling thread), in this order: libc preparation (TZ and
 * tzset(), LIBC_FATAL_STDERR_, so that localtime() and glibc's fatal
 * messages need no file later; READ_IMPLIES_EXEC cleared) → rlimits (with
 * a file-size limit, SIGXFSZ ignored so that a write past it fails with
 * EFBIG) → identity: from root, setgroups(0)/setgid/setuid to uid and gid,
 * verified irreversible; already unprivileged, a check that the process
 * runs as exactly uid/gid with no supplementary group; uid 0 is refused
 * whenever a uid is given → not dumpable → PR_SET_NO_NEW_PRIVS → empty
 * capability sets → Landlock (files; the libraries as above; TCP bind
 * refused and connect only to connect_ports, from ABI 4; abstract unix
 * sockets and signals scoped to the process, from ABI 6) → a first seccomp
 * filter that refuses execve, fork, every clone that is not a thread and
 * every mapping both writable and executable (EPERM), so that code run
 * before the allowlist (constructors, init) starts no process that the
 * allowlist would not cover and makes no W+X memory after the check.
 *
 * Threads started afterwards (in init) inherit all of it.  Returns 0, or a
 * negative errno after writing one line to err (when not NULL) naming the
 * sandbox, the step, the value and the fix.  A kernel without Landlock is
 * not an error: *landlock_active (when not NULL) is set to false and the
 * caller warns once; it is true when Landlock applies.
 */
int sandlet_confine_begin(const sandlet_confine *c, bool *landlock_active, char *err,
                          size_t errlen);

/*
 * The second step, after the servlets' init: a check that no mapping is
 * both writable and executable (and no personality makes readable memory
 * executable), RLIMIT_NPROC 0, the SIGSYS reporter and the seccomp
 * allowlist (which refuses every executable mapping and every mremap()
 * that would leave an alias behind), loaded onto every thread of the
 * process at once (TSYNC; refused, not skipped, when the kernel or a
 * thread's own filter prevents it).  Needs sandlet_confine_begin() first.
 *
 * After it returns the process can no longer open files outside its
 * Landlock paths, load libraries, fork, exec or make system calls outside
 * its allowlist: a forbidden call writes "sandletd worker SANDBOX: seccomp:
 * forbidden system call NAME (NR)" to standard error and kills the process
 * with SIGSYS (or, in learning mode, is logged by the kernel and allowed).
 */
int sandlet_confine_finish(const sandlet_confine *c, char *err, size_t errlen);

/* Both steps at once, for a process that loads nothing in between. */
int sandlet_confine_apply(const sandlet_confine *c, bool *landlock_active, char *err,
                          size_t errlen);

/* The number of threads of the calling process (from /proc/self/status),
 * or a negative errno. */
int sandlet_confine_threads(void);

/*
 * What this kernel's Landlock cannot enforce of c, as one line for a
 * warning ("...; needs Linux 6.7 (Landlock ABI 4)"), or NULL when it
 * enforces all of it.  Asks the kernel; no side effects.
 */
const char *sandlet_confine_kernel_gaps(const sandlet_confine *c, char *buf, size_t len);

/* The folders (and file) every worker may read under Landlock: the
 * system's libraries, for dlopen. */
const char *const *sandlet_confine_system_libs(size_t *n);

/* Name of a system call number of this architecture for messages
 * ("openat"), via libseccomp; "unknown" when it has none. */
const char *sandlet_confine_syscall_name(int nr);
/* Whether the allowlist with these SANDLET_SC_* groups allows system call
 * nr of audit architecture arch whatever its arguments (false for another
 * architecture, whose calls the filter kills). */
bool sandlet_confine_allows_outright(int nr, uint32_t arch, unsigned groups);

/* The i-th entry of the seccomp allowlist (for tests and documentation):
 * its system-call name, with its group (0 for the base set, else one
 * SANDLET_SC_* bit) in *group when not NULL.  NULL past the end.  An entry
 * may allow a call only for some arguments. */
const char *sandlet_confine_allowlist(size_t i, unsigned *group);

/* What allows system call name in a sandbox with groups (SANDLET_SC_*),
 * as the SIGSYS report and learning mode's report say it ("; 'syscalls
 * files;' ... allows it", or why nothing does); *group (when not NULL)
 * gets the group that would, or 0. */
const char *sandlet_confine_hint(const char *name, unsigned groups, unsigned *group);
/* A configuration's "syscalls" groups (SANDLET_SYSCALLS_*, as INIT carries
 * them) as SANDLET_SC_* bits. */
unsigned sandlet_confine_groups(unsigned syscalls);

#endif /* SANDLET_CONFINE_H */

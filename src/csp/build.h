/*
 * build.h - the confined page compiler: one page of the docroot in, the
 * work dir's page.c, page.so, diag, deps and stamp out (pagecache.h says
 * what the cache then does with them).
 *
 * It runs in a child process that is already the compile's uid and gid
 * (the page sandbox's user, never root), confines itself before it reads
 * anything, and is given nothing but paths: it never opens the cache dir,
 * never writes outside the work dir, and never runs the page.
 */
#ifndef SANDLET_CSP_BUILD_H
#define SANDLET_CSP_BUILD_H

#include <stddef.h>

#define SANDLET_BUILD_DEFAULT_CPU_SECONDS 30
#define SANDLET_BUILD_DEFAULT_MEMORY_MIB  1024
#define SANDLET_BUILD_DEFAULT_WALL_MS     60000
/* The diagnostics kept of the compiler's standard error. */
#define SANDLET_BUILD_MAX_DIAG ((size_t)64 * 1024)

typedef struct sandlet_page_job {
    const char *docroot;         /* absolute */
    const char *rel;             /* page relative to the docroot */
    const char *workdir;         /* from sandlet_page_workdir */
    const char *compiler;        /* "cc" or a path; NULL: "cc"; resolved via PATH */
    const char *const *includes; /* extra -I dirs (sandlet's headers), before the default */
    size_t nincludes;
    unsigned cpu_seconds; /* RLIMIT_CPU per process; 0: 30 */
    unsigned memory_mib;  /* RLIMIT_AS per process; 0: 1024 */
    unsigned wall_ms;     /* wall-clock limit on the compiler; 0: 60000 */
} sandlet_page_job;

enum {
    SANDLET_BUILD_OK = 0,
    SANDLET_BUILD_FAILED = 1, /* the page's fault: diag says why */
    SANDLET_BUILD_ERROR = 2,  /* ours or the system's: diag says why */
};

/*
 * Confines the calling process (rlimits, no_new_privs, Landlock: see
 * sandlet-csp(1) FILES and sandlet-security(7)), reads the page beneath
 * the docroot, writes work dir/stamp (first as "failed", so that a build
 * killed from outside still records which version failed), translates it
 * to work dir/page.c with #line naming REL, runs the compiler with a wall
 * clock limit (killing its whole process group), and writes work dir/diag
 * (the compiler's standard error, at most 64 KiB, or a translation error
 * as "REL:LINE:COL: error: ..."), the dependencies under the docroot, and
 * the final stamp.  Refuses to run as root.  Returns SANDLET_BUILD_*.
 * The process is confined afterwards: call it in a child that exits.
 */
int sandlet_page_build(const sandlet_page_job *job);

/*
 * `sandletd --compile-page ARGS` and the tests: argv are the arguments
 * after the flag,
 *     --docroot DIR --page REL --workdir DIR [--cc COMPILER]
 *     [-I DIR]... [--cpu SECONDS] [--memory MIB] [--wall MS]
 * Returns the exit code (SANDLET_BUILD_*; 2 for bad arguments, after a
 * line on standard error).
 */
int sandlet_page_build_main(int argc, char **argv);

#endif /* SANDLET_CSP_BUILD_H */

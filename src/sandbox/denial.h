/*
 * denial.h - what a Landlock denial the kernel recorded (audit.c) means
 * to the operator (denial.c): the directive that would allow it, and how
 * often it is said.  Pure: no log, no process, no clock of its own.
 */
#ifndef SANDLET_DENIAL_H
#define SANDLET_DENIAL_H

#include "sandbox/audit.h"
#include "sandbox/filehint.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which line of a sandbox's block allows what d was refused. */
typedef enum sandlet_denial_kind {
    SANDLET_DENIAL_READABLE, /* read, list or map a file: 'readable PATH;' */
    SANDLET_DENIAL_WRITABLE, /* write, make, remove or rename: 'writable DIR;' */
    SANDLET_DENIAL_OTHER,    /* no file (a signal, a port): no directive */
} sandlet_denial_kind;

sandlet_denial_kind sandlet_denial_kind_of(const sandlet_denial *d);

/* Where a denial is explained: the sandbox, its servlets as a phrase
 * ("servlet /x", "one of servlets /a, /b"; may be ""), the file and line
 * of its block, and whether its writes are blocked by its write-quota
 * (then the writable folders are read-only on purpose). */
typedef struct sandlet_denial_ctx {
    const char *sandbox;
    const char *servlets;
    const char *file;
    int line;
    bool write_blocked;
} sandlet_denial_ctx;

/* The line that reports d of worker pid, into out (always NUL-ended, cut
 * at cap), with more: denials of the same (sandbox, access, path) not
 * reported since its last line.  The path is written escaped (\xNN for
 * any byte outside printable ASCII, quotes and backslashes), so a worker's
 * file name can neither end the line nor pass for something else. */
void sandlet_denial_describe(const sandlet_denial *d, const sandlet_denial_ctx *ctx, int pid,
                             unsigned more, char *out, size_t cap);

/* How often: a line per (sandbox, access, path) when first seen, again
 * at most once a minute with the count of those in between, and at most
 * SANDLET_DENIAL_LINES_PER_SEC lines a second in all (past that a
 * denial is only counted, and its key stays unseen so that it is said
 * later).  Keys are hashed; the table forgets its oldest past
 * SANDLET_DENIAL_KEYS. */
#define SANDLET_DENIAL_KEYS          256
#define SANDLET_DENIAL_REPEAT_MS     60000
#define SANDLET_DENIAL_LINES_PER_SEC 10

typedef struct sandlet_denial_limit {
    struct {
        uint64_t hash; /* 0: free */
        uint64_t at;   /* ms of its last line */
        unsigned more; /* since then, not said */
    } keys[SANDLET_DENIAL_KEYS];
    size_t next; /* round robin when full */
    uint64_t second;
    unsigned lines;
} sandlet_denial_limit;

/* Whether d of sandbox box, at now_ms, gets a line; *more is then the
 * count of its repeats not said since its last. */
bool sandlet_denial_limit_take(sandlet_denial_limit *l, uint32_t box, const sandlet_denial *d,
                               uint64_t now_ms, unsigned *more);

/* Development mode where the kernel records no denial: a worker's own
 * guess about a refused file call (filehint.h), from the paths Landlock
 * was given.  A path no line covers is Landlock's refusal (the line to
 * add); one a line covers is the file's permissions (the sandbox's uid);
 * a path relative to a descriptor cannot be placed. */
typedef struct sandlet_hint_ctx {
    const char *sandbox;
    const char *const *readable;
    size_t nreadable;
    const char *const *writable; /* the upload spool among them */
    size_t nwritable;
    const char *const *system; /* folders every worker may read: the libraries' */
    size_t nsystem;
    bool write_blocked; /* over its write-quota: the writable folders are read-only */
} sandlet_hint_ctx;

/* The hint's line into out, NUL-ended, cut at cap; the path escaped. */
void sandlet_denial_hint(const sandlet_filehint *h, const sandlet_hint_ctx *ctx, char *out,
                         size_t cap);

#endif /* SANDLET_DENIAL_H */

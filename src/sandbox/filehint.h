/*
 * filehint.h - development mode's hint on a file call that failed with
 * EACCES or EPERM in a worker (filehint.c), where the kernel keeps no
 * record of Landlock's denials (Landlock before ABI 7, or audit off): the
 * daemon's executable defines open(), fopen() and the other file calls a
 * servlet makes, passes each to the C library, and, only in a worker told
 * to (INIT), notes the first refused one of a request, which the worker
 * then explains against its sandbox's paths (sandlet_denial_hint,
 * denial.h).
 */
#ifndef SANDLET_FILEHINT_H
#define SANDLET_FILEHINT_H

#include <stdbool.h>
#include <stddef.h>

/* What the wrappers noted since sandlet_filehint_begin. */
typedef struct sandlet_filehint {
    const char *call; /* "open", "fopen", "mkdir", ... */
    char path[1024];  /* as given, cut at 1023 bytes; made absolute with
                       * the worker's start folder when relative to it */
    bool relative;    /* relative to a descriptor: where it lies is unknown */
    bool write;       /* the call writes, makes or removes */
    int err;          /* EACCES or EPERM */
    unsigned more;    /* refused calls after the first */
} sandlet_filehint;

/* Resolves every wrapped call (dlsym), as a worker does before it
 * confines itself, hints or not: its filter is then never asked for what
 * a first lookup might need. */
void sandlet_filehint_resolve(void);
/* Turns the noting on for this process (a worker, before its servlets
 * load): cwd is its folder then (relative paths are taken against it).
 * Resolves every wrapped call first, while the process may. */
void sandlet_filehint_start(const char *cwd);
/* Forgets what was noted (before a request or an init). */
void sandlet_filehint_begin(void);
/* What was noted since begin: true and *out filled when a call was
 * refused. */
bool sandlet_filehint_end(sandlet_filehint *out);

#endif /* SANDLET_FILEHINT_H */

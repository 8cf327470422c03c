/*
 * quota.h - how much a sandbox has written: the bytes and entries under its
 * writable directories, measured by the supervisor for write-quota.
 */
#ifndef SANDLET_QUOTA_H
#define SANDLET_QUOTA_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sandlet_usage {
    unsigned long long bytes; /* allocated blocks (st_blocks), not apparent sizes */
    unsigned long long entries;
    bool too_deep; /* a directory chain deeper than the walk follows */
    int error;     /* -errno of the first directory that could not be read, or 0 */
} sandlet_usage;

/*
 * Adds up what lies under the ndirs directories into *u: every entry
 * (files, directories, links; hard links once per name), without following
 * symbolic links or crossing into other filesystems, and at most
 * SANDLET_QUOTA_MAX_DEPTH levels deep (deeper: too_deep).  Stops early,
 * with the totals so far, once bytes passes max_bytes or entries passes
 * max_entries (0: no such bound), so a sandbox with millions of files
 * costs one bounded walk.  A directory that cannot be opened is skipped
 * and noted in error.  Returns true when the usage is over a bound (or
 * too deep to tell).
 */
#define SANDLET_QUOTA_MAX_DEPTH 64
bool sandlet_quota_measure(const char *const *dirs, size_t ndirs, unsigned long long max_bytes,
                           unsigned long long max_entries, sandlet_usage *u);

#endif /* SANDLET_QUOTA_H */

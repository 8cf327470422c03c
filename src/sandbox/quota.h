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

typedef struct sandlet_conf sandlet_conf;
/*
 * Warns, once per pair, about two sandboxes whose writable directories lie
 * on one filesystem: each can fill it for the other, since write-quota is
 * soft (measured every 2 s) and blind to files deleted while open, so what
 * a sandbox can hold there is bounded only by its workers' open files ×
 * max-file-size.  The warning names both directories, the filesystem's
 * size, that bound and the fix.  Returns how many pairs it warned about.
 */
unsigned sandlet_quota_warn_shared(const sandlet_conf *conf);

#endif /* SANDLET_QUOTA_H */

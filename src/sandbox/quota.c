/*
 * quota.c - measures a sandbox's writable directories for write-quota.
 *
 * It runs in the supervisor, which may be root, over trees that a hostile
 * servlet shapes: it must never follow a symbolic link, leave the
 * filesystem it started on, open anything but directories, recurse (the
 * walk keeps its own bounded stack), or walk further than the bound it
 * is checking needs.
 */
#include "config.h"

#include "sandbox/quota.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool over(const sandlet_usage *u, unsigned long long max_bytes,
                 unsigned long long max_entries)
{
    return u->too_deep || (max_bytes && u->bytes > max_bytes) ||
           (max_entries && u->entries > max_entries);
}

/* Walks one tree, adding to *u; false once a bound is passed. */
static bool walk(const char *root, unsigned long long max_bytes, unsigned long long max_entries,
                 sandlet_usage *u)
{
    DIR *stack[SANDLET_QUOTA_MAX_DEPTH];
    size_t depth = 0;
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (!u->error)
            u->error = -errno;
        if (fd >= 0)
            close(fd);
        return true;
    }
    dev_t dev = st.st_dev;
    u->bytes += (unsigned long long)st.st_blocks * 512;
    DIR *d = fdopendir(fd);
    if (!d) {
        if (!u->error)
            u->error = -errno;
        close(fd);
        return true;
    }
    stack[depth++] = d;
    bool going = true;
    while (depth > 0) {
        d = stack[depth - 1];
        struct dirent *e = going ? readdir(d) : NULL;
        if (!e) {
            closedir(d);
            depth--;
            continue;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* removed meanwhile */
        u->entries++;
        u->bytes += (unsigned long long)st.st_blocks * 512;
        if (over(u, max_bytes, max_entries)) {
            going = false;
            continue;
        }
        if (!S_ISDIR(st.st_mode) || st.st_dev != dev)
            continue;
        if (depth == SANDLET_QUOTA_MAX_DEPTH) {
            u->too_deep = true;
            going = false;
            continue;
        }
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue; /* replaced by a link or removed meanwhile */
        DIR *sd = fdopendir(sub);
        if (!sd) {
            close(sub);
            continue;
        }
        stack[depth++] = sd;
    }
    return going;
}

bool sandlet_quota_measure(const char *const *dirs, size_t ndirs, unsigned long long max_bytes,
                           unsigned long long max_entries, sandlet_usage *u)
{
    memset(u, 0, sizeof(*u));
    for (size_t i = 0; i < ndirs; i++)
        if (!walk(dirs[i], max_bytes, max_entries, u))
            break;
    return over(u, max_bytes, max_entries);
}

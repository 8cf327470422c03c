/*
 * quota.c - measures a sandbox's writable directories for write-quota.
 *
 * Also the start's warning about sandboxes that share a filesystem: what
 * the measure cannot bound (issue 29).
 *
 * It runs in the supervisor, which may be root, over trees that a hostile
 * servlet shapes: it must never follow a symbolic link, leave the
 * filesystem it started on, open anything but directories, recurse (the
 * walk keeps its own bounded stack), or walk further than the bound it
 * is checking needs.
 */
#include "config.h"

#include "sandbox/quota.h"
#include "common/conf.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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

/* "64 MiB", "unlimited": a size for a message. */
static const char *human(unsigned long long v, char *buf, size_t cap)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t u = 0;
    while (v >= 10240 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    snprintf(buf, cap, "%llu %s", v, units[u]);
    return buf;
}

/* What a sandbox can keep on a filesystem whatever write-quota says: each
 * worker holds at most open-files files, each at most max-file-size; 0 when
 * either is unlimited. */
static unsigned long long real_bound(const sandlet_sandbox_conf *sb)
{
    unsigned long long workers = sb->max_workers ? sb->max_workers : sb->workers;
    unsigned long long per = (unsigned long long)sb->open_files * sb->max_file_size;
    if (!sb->open_files || !sb->max_file_size || per / sb->open_files != sb->max_file_size ||
        (workers && per > ~0ULL / workers))
        return 0;
    return per * workers;
}

unsigned sandlet_quota_warn_shared(const sandlet_conf *conf)
{
    unsigned warned = 0;
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        const sandlet_sandbox_conf *a = &conf->sandboxes[i];
        for (size_t j = i + 1; j < conf->nsandboxes; j++) {
            const sandlet_sandbox_conf *b = &conf->sandboxes[j];
            bool said = false;
            for (size_t x = 0; x < a->nwritable && !said; x++) {
                struct stat sa;
                if (stat(a->writable[x], &sa) < 0)
                    continue;
                for (size_t y = 0; y < b->nwritable && !said; y++) {
                    struct stat sb;
                    struct statvfs fs;
                    if (stat(b->writable[y], &sb) < 0 || sa.st_dev != sb.st_dev)
                        continue;
                    char size[32] = "unknown size", qa[32], qb[32], ra[32], rb[32];
                    if (statvfs(a->writable[x], &fs) == 0)
                        human((unsigned long long)fs.f_blocks * fs.f_frsize, size, sizeof(size));
                    unsigned long long boa = real_bound(a), bob = real_bound(b);
                    sandlet_warn(
                        "sandboxes '%s' and '%s' write to one filesystem (%s and %s, %s): "
                        "either can fill it for the other.  write-quota is measured every 2 "
                        "seconds and does not see files deleted while still open, so what "
                        "each can hold there is bounded only by its workers' open-files x "
                        "max-file-size: '%s' %s (write-quota %s), '%s' %s (write-quota %s).  "
                        "Give each sandbox's writable directories a filesystem of their own, "
                        "or a user or project quota of the kernel's",
                        a->name, b->name, a->writable[x], b->writable[y], size, a->name,
                        boa ? human(boa, ra, sizeof(ra)) : "unbounded",
                        a->write_quota ? human(a->write_quota, qa, sizeof(qa)) : "unlimited",
                        b->name, bob ? human(bob, rb, sizeof(rb)) : "unbounded",
                        b->write_quota ? human(b->write_quota, qb, sizeof(qb)) : "unlimited");
                    said = true;
                    warned++;
                }
            }
        }
    }
    return warned;
}

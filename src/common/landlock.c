/*
 * landlock.c - the kernel's Landlock ABI and the making of a ruleset
 * (landlock.h), shared by the worker's confinement and the page compile.
 *
 * It must never add rules or restrict the calling process.
 */
#include "config.h"

#include "common/landlock.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct landlock_ruleset_attr as of ABI 6; an older kernel accepts the
 * larger struct as long as the fields it does not know are zero. */
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

long sandlet_landlock_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 0)
        return errno == ENOSYS || errno == EOPNOTSUPP ? 0 : -errno;
    return abi;
}

int sandlet_landlock_ruleset(long abi, uint64_t *handled)
{
    uint64_t fs = LL_ABI1;
    if (abi >= 2)
        fs |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        fs |= LL_FS_IOCTL_DEV;
    struct ll_ruleset_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.handled_access_fs = fs;
    if (abi >= 4)
        attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
    if (abi >= 6)
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
    *handled = fs;
    int rfd = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
    return rfd < 0 ? -errno : rfd;
}

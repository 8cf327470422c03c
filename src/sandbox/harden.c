/*
 * harden.c - the supervisor's own confinement: fewer capabilities,
 * no_new_privs and a system-call denylist (see harden.h for why a
 * denylist).  It must never remove what starting, killing and reaping
 * workers, reopening logs or measuring quotas needs.
 */
#include "config.h"

#include "sandbox/harden.h"
#include "common/log.h"

#include <errno.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* CAP_NET_BIND_SERVICE: a reload binds the listen addresses it adds (a
 * port below 1024 included) and hands them to the acceptor, which never
 * holds a capability. */
uint64_t sandlet_harden_caps(void)
{
    return (1ull << CAP_SETUID) | (1ull << CAP_SETGID) | (1ull << CAP_KILL) |
           (1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_DAC_READ_SEARCH) | (1ull << CAP_CHOWN) |
           (1ull << CAP_NET_BIND_SERVICE);
}

/* Refused with EPERM in the supervisor and, inherited, in every worker. */
static const char *const denied[] = {
    /* Filesystems and the mount table. */
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "quotactl", "quotactl_fd", "swapon", "swapoff", "mknod",
    "mknodat", "open_by_handle_at", "name_to_handle_at", "acct",
    /* Other processes' memory and state. */
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "process_madvise",
    /* The kernel itself ("syslog" is the kernel's ring buffer, syslog(2),
     * not /dev/log: "error-log syslog" only needs sendto, allowed). */
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf",
    "perf_event_open", "reboot", "syslog", "iopl", "ioperm", "uselib", "lookup_dcookie",
    "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    /* Keys, namespaces, the clock, the host's names. */
    "keyctl", "add_key", "request_key", "setns", "unshare", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "vhangup"};

static int drop_caps(void)
{
    uint64_t keep = sandlet_harden_caps();
    /* The bounding set first: it needs CAP_SETPCAP, dropped below.  A
     * capability already out of it is skipped: a daemon started by a
     * binary upgrade (sandletd -s upgrade) is the previous supervisor's
     * child, whose bounding set is this very one, without CAP_SETPCAP. */
    for (int cap = 0; cap < 64; cap++) {
        if (keep & (1ull << cap))
            continue;
        int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (in < 0 && errno == EINVAL)
            break; /* past the kernel's last capability */
        if (in == 0)
            continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
            if (errno == EINVAL)
                break;
            return -errno;
        }
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -errno;
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2] = {{0}};
    for (int i = 0; i < 2; i++) {
        data[i].effective = (uint32_t)(keep >> (32 * i));
        data[i].permitted = (uint32_t)(keep >> (32 * i));
    }
    if (syscall(SYS_capset, &hdr, data) < 0)
        return -errno;
    return 0;
}

static int install_filter(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(denied) / sizeof(denied[0]); i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    return rc;
}

int sandlet_harden_supervisor(void)
{
    int rc = 0;
    if (geteuid() == 0 && (rc = drop_caps()) < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "supervisor: cannot drop capabilities");
        return rc;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        rc = -errno;
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "supervisor: cannot set no_new_privs");
        return rc;
    }
    rc = install_filter();
    if (rc < 0)
        sandlet_log_errno(SANDLET_LOG_ERROR, rc,
                          "supervisor: cannot install its system-call "
                          "filter");
    return rc;
}

/*
 * harden.c - the confinement of the supervisor and of its spawner: fewer
 * capabilities, no_new_privs, and a system-call filter: an allowlist of
 * the supervisor's own calls, and the denylist that the spawner's
 * children inherit (see harden.h for why that one is a denylist).  It
 * must never remove what starting workers (the spawner), or killing them,
 * reloading, reopening logs or measuring quotas (the supervisor) needs.
 */
#include "config.h"

#include "sandbox/harden.h"
#include "common/log.h"

#include <errno.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <stddef.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* CAP_NET_BIND_SERVICE: a reload binds the listen addresses it adds (a
 * port below 1024 included) and hands them to the acceptor, which never
 * holds a capability. */
uint64_t sandlet_harden_caps(void)
{
    return (1ull << CAP_KILL) | (1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_DAC_READ_SEARCH) |
           (1ull << CAP_CHOWN) | (1ull << CAP_NET_BIND_SERVICE);
}

/* CAP_KILL: a parent's death signal to its children is sent with the
 * dying parent's credentials, so without it the workers (other users)
 * would outlive the spawner. */
uint64_t sandlet_harden_spawner_caps(void)
{
    return (1ull << CAP_SETUID) | (1ull << CAP_SETGID) | (1ull << CAP_KILL);
}

/* Refused with EPERM in the spawner and, inherited, in every worker. */
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

/* Keeps keep in the bounding and permitted sets, effective of it in the
 * effective set. */
static int drop_caps(uint64_t keep, uint64_t effective)
{
    /* The bounding set first: it needs CAP_SETPCAP, dropped below.  A
     * capability already out of it is skipped (the service manager's
     * bounding set may be narrower). */
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
            /* Started without CAP_SETPCAP (by a service manager's
             * narrower set, or an upgrade from a version whose spawner
             * passed on only part of its set): the bounding set stays;
             * only an exec could use it, and the supervisor's allowlist
             * refuses exec, while the permitted set below is dropped all
             * the same. */
            if (errno == EPERM && prctl(PR_CAPBSET_READ, CAP_SETPCAP, 0, 0, 0) == 0)
                continue;
            return -errno;
        }
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -errno;
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2] = {{0}};
    for (int i = 0; i < 2; i++) {
        data[i].effective = (uint32_t)((keep & effective) >> (32 * i));
        data[i].permitted = (uint32_t)(keep >> (32 * i));
    }
    if (syscall(SYS_capset, &hdr, data) < 0)
        return -errno;
    return 0;
}

static int install_denylist(void)
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

/* Everything the supervisor calls: what strace -f of the whole test suite
 * shows it making once its filter is in (reload, reopen, quotas, pages,
 * upgrade, session stores, spools, kills), with the older or newer names
 * libc may use for the same calls, and what the look-up of users and
 * groups at a reload takes (identity.c: a child of its own, which
 * inherits this filter; NSS reads files and may connect to nscd).  Among
 * them nothing that starts a program (execve: the spawner does), changes
 * identity, traces, mounts or loads into the kernel. */
static const char *const allowed[] = {
    /* Memory, threads' and libc's own needs. */
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "futex", "set_robust_list", "rseq",
    "set_tid_address", "membarrier", "sched_yield", "sched_getaffinity", "getrandom",
    "restart_syscall", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "exit",
    "exit_group", "uname", "sysinfo", "getrlimit", "prlimit64", "prctl",
    /* Identity, read only. */
    "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getgroups",
    "getresuid", "getresgid", "getpgrp", "getpgid", "getsid", "capget",
    /* Time. */
    "clock_gettime", "clock_getres", "clock_nanosleep", "gettimeofday", "time", "nanosleep",
    /* The event loop, pipes and descriptors. */
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll",
    "eventfd2", "pipe", "pipe2", "close", "close_range", "dup", "dup2", "dup3", "fcntl", "ioctl",
    "read", "write", "readv", "writev", "pread64", "pwrite64", "lseek",
    /* Files: the configuration, logs, state file, spools, session stores,
     * page caches, quotas' measures. */
    "open", "openat", "openat2", "stat", "fstat", "lstat", "newfstatat", "statx", "statfs",
    "fstatfs", "getdents64", "readlink", "readlinkat", "access", "faccessat", "faccessat2", "mkdir",
    "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "fchown", "fchmod",
    "umask", "ftruncate", "fsync", "fdatasync", "getcwd", "memfd_create",
    /* Sockets: the control and spawner sockets, listeners a reload binds,
     * syslog, the kernel's audit records, nscd. */
    "socket", "socketpair", "bind", "listen", "connect", "getsockname", "getpeername", "setsockopt",
    "getsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "shutdown",
    /* Children: the reload's look-up child, and signals to the workers
     * (through their pidfds), compiles and an upgrade's new daemon. */
    "clone", "wait4", "waitid", "kill", "tgkill", "tkill", "pidfd_send_signal"};

/* Namespaces are no process's of ours to make. */
#define CLONE_NS_FLAGS                                                                             \
    (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |     \
     CLONE_NEWCGROUP)

static int install_allowlist(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(allowed) / sizeof(allowed[0]); i++) {
        int nr = seccomp_syscall_resolve_name(allowed[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        if (strcmp(allowed[i], "clone") == 0)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NS_FLAGS, 0));
        else
            rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
    }
    /* clone3's flags are out of the filter's reach: ENOSYS makes libc
     * fall back to clone, whose flags are checked above. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    return rc;
}

/* The spawner's: its bounding and permitted sets stay whole, since an
 * upgrade's new daemon, which it execs as root under no_new_privs, can
 * have no capability that the spawner does not hold; only
 * sandlet_harden_spawner_caps() stay effective. */
static int spawner_caps(uint64_t keep, uint64_t effective)
{
    (void)keep;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -errno;
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2] = {{0}};
    if (syscall(SYS_capget, &hdr, data) < 0)
        return -errno;
    for (int i = 0; i < 2; i++)
        data[i].effective = data[i].permitted & (uint32_t)(effective >> (32 * i));
    if (syscall(SYS_capset, &hdr, data) < 0)
        return -errno;
    return 0;
}

static int harden(const char *who, uint64_t keep, uint64_t effective,
                  int (*caps)(uint64_t keep, uint64_t effective), int (*filter)(void))
{
    int rc = 0;
    if (geteuid() == 0 && (rc = caps(keep, effective)) < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "%s: cannot drop capabilities", who);
        return rc;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        rc = -errno;
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "%s: cannot set no_new_privs", who);
        return rc;
    }
    rc = filter();
    if (rc < 0)
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "%s: cannot install its system-call filter", who);
    return rc;
}

int sandlet_harden_spawner(void)
{
    return harden("spawner", ~0ull, sandlet_harden_spawner_caps(), spawner_caps, install_denylist);
}

int sandlet_harden_supervisor(void)
{
    return harden("supervisor", sandlet_harden_caps(), sandlet_harden_caps(), drop_caps,
                  install_allowlist);
}

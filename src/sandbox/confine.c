/*
 * confine.c - locks a worker down in two steps: before its servlets are
 * loaded (resource limits, an unprivileged identity, no_new_privs, empty
 * capability sets, Landlock through raw system calls, a filter against exec
 * and new processes) and after their init (the W+X check and a seccomp
 * allowlist, through libseccomp, on every thread, whose violations are
 * reported by a SIGSYS handler).
 *
 * Every step is checked and a failure is reported in one line naming the
 * step, the value and the fix.  It must never loosen a restriction that is
 * already in place, never continue past a failed step, and never let the
 * SIGSYS handler allocate, take a lock or use stdio: it runs in a process
 * that has just broken its contract.  The allowlist below is the whole
 * system-call surface of a confined worker: every entry says why it is
 * there, and the groups stay sorted (tests/unit/test_confine.c checks).
 */
#include "config.h"

#include "sandbox/confine.h"
#include "common/conf.h"
#include "common/landlock.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <pthread.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

/* struct landlock_net_port_attr (ABI 4). */
struct ll_net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
} __attribute__((packed));

/* The rights that apply to a file rather than a directory. */
#define LL_FILE                                                                                    \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |   \
     LANDLOCK_ACCESS_FS_TRUNCATE)

/* si_code of a SIGSYS raised by a seccomp filter (glibc does not name it). */
#define SIGSYS_SECCOMP 1

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the allowlist ---------------------------------------------------- */

/* Argument conditions: which calls of a system call an entry allows.  All
 * of them fail closed when a caller puts garbage in the upper half of a
 * 32-bit argument (seccomp compares 64-bit values, the kernel uses 32). */
enum cond {
    ANY,           /* every call */
    PROT_NO_EXEC,  /* prot (arg 2) lacks PROT_EXEC: nothing becomes executable once confined */
    MOVE_ONLY,     /* mremap: old size (arg 1) not 0, flags (arg 3) 0 or MREMAP_MAYMOVE */
    NOT_SIGSYS,    /* signal (arg 0) is not SIGSYS, whose handler reports violations */
    SELF,          /* thread group (arg 0) is this process */
    FD_ONLY,       /* AT_EMPTY_PATH in flags (arg 3): glibc's fstat() */
    FCNTL_FLAGS,   /* command (arg 1) is F_GETFD, F_SETFD, F_GETFL or F_SETFL */
    FCNTL_LOCKS,   /* command (arg 1) is a record-lock command */
    READ_LIMITS,   /* own process (arg 0 == 0) and no new limit (arg 2 NULL) */
    TCGETS_ONLY,   /* request (arg 1) is TCGETS: isatty() */
    NULL_PATH,     /* path (arg 1) is NULL: futimens() */
    STREAM_SOCK,   /* AF_INET or AF_INET6 (arg 0; AF_UNIX for a database on a unix socket),
                    * SOCK_STREAM (arg 1), TCP (arg 2) */
    SENDTO_PLAIN,  /* sendto: no address (arg 4), no MSG_FASTOPEN (arg 3) */
    SENDMSG_PLAIN, /* sendmsg: no MSG_FASTOPEN in flags (arg 2) */
};

typedef struct rule {
    const char *name;
    unsigned group; /* 0: base set, else one SANDLET_SC_* bit */
    enum cond cond;
} rule;

#define BASE  0u
#define FILES SANDLET_SC_FILES
#define DB    SANDLET_SC_DATABASE

static const rule allowlist[] = {
    /* base: the worker loop, the error log and ordinary libc use */
    {"brk", BASE, ANY},                 /* malloc grows the main heap */
    {"clock_getres", BASE, ANY},        /* clock_getres(), when the vDSO cannot answer */
    {"clock_gettime", BASE, ANY},       /* log timestamps, time(), clock(); vDSO fallback */
    {"clock_nanosleep", BASE, ANY},     /* nanosleep() and sleep() in glibc */
    {"close", BASE, ANY},               /* closing descriptors opened before lockdown */
    {"exit", BASE, ANY},                /* end of a thread */
    {"exit_group", BASE, ANY},          /* exit(), _exit(): the worker's end */
    {"fcntl", BASE, FCNTL_FLAGS},       /* O_NONBLOCK and FD_CLOEXEC on existing descriptors */
    {"futex", BASE, ANY},               /* the acceptor's doorbell (lane.h); glibc locks */
    {"getegid", BASE, ANY},             /* identity query, harmless */
    {"geteuid", BASE, ANY},             /* identity query, harmless */
    {"getgid", BASE, ANY},              /* identity query, harmless */
    {"getpid", BASE, ANY},              /* log lines; raise() and abort() */
    {"getrandom", BASE, ANY},           /* session ids, arc4random() */
    {"getrusage", BASE, ANY},           /* own usage: the stack wipe counts page faults; clock() */
    {"gettid", BASE, ANY},              /* raise() and abort() */
    {"gettimeofday", BASE, ANY},        /* gettimeofday(); vDSO fallback */
    {"getuid", BASE, ANY},              /* identity query, harmless */
    {"ioctl", BASE, TCGETS_ONLY},       /* isatty(): stdio asks when stdout is a char device */
    {"lseek", BASE, ANY},               /* stdio fseek/ftell/fflush on descriptors it has */
    {"madvise", BASE, ANY},             /* free() hands memory back (MADV_DONTNEED) */
    {"mmap", BASE, PROT_NO_EXEC},       /* large malloc blocks; never executable */
    {"mprotect", BASE, PROT_NO_EXEC},   /* malloc arenas grow in place; never to executable */
    {"mremap", BASE, MOVE_ONLY},        /* realloc() of large blocks; never an alias */
    {"munmap", BASE, ANY},              /* free() of large blocks */
    {"nanosleep", BASE, ANY},           /* nanosleep() in code built against older libcs */
    {"newfstatat", BASE, FD_ONLY},      /* fstat(): stdio sizes its buffers; paths: files group */
    {"prlimit64", BASE, READ_LIMITS},   /* getrlimit(); setting limits is refused */
    {"read", BASE, ANY},                /* INIT, then the acceptor's end, on the socketpair */
    {"readv", BASE, ANY},               /* scatter reads on descriptors it has */
    {"restart_syscall", BASE, ANY},     /* resumes a sleep interrupted by a signal */
    {"rseq", BASE, ANY},                /* a thread init started registers itself (glibc) */
    {"rt_sigaction", BASE, NOT_SIGSYS}, /* signal handlers, except SIGSYS (the reporter) */
    {"rt_sigprocmask", BASE, ANY},      /* signal masks; abort(), raise() */
    {"rt_sigreturn", BASE, ANY},        /* return from a signal handler */
    {"sched_yield", BASE, ANY},         /* spinning locks back off */
    {"set_robust_list", BASE, ANY},     /* a thread init started registers its mutex list */
    {"sysinfo", BASE, ANY},             /* qsort() asks sysconf(_SC_PHYS_PAGES) */
    {"tgkill", BASE, SELF},             /* raise() and abort(): signals to itself only */
    {"time", BASE, ANY},                /* time(); vDSO fallback */
    {"uname", BASE, ANY},               /* uname(), gethostname() */
    {"write", BASE, ANY},               /* response frames, the error log, stdio */
    {"writev", BASE, ANY},              /* response frames: head and body in one call */

    /* files: open and change files, still fenced by Landlock.  Landlock
     * does not govern metadata (stat, access, chmod, utimes by path), so
     * the calls that change it work on open descriptors only. */
    {"access", FILES, ANY},          /* access() (metadata only) */
    {"creat", FILES, ANY},           /* creat() */
    {"faccessat", FILES, ANY},       /* faccessat() (metadata only) */
    {"faccessat2", FILES, ANY},      /* access() with flags in glibc >= 2.33 */
    {"fallocate", FILES, ANY},       /* posix_fallocate() on an open file (SQLite) */
    {"fchmod", FILES, ANY},          /* fchmod() on an open file; chmod by path is refused */
    {"fcntl", FILES, FCNTL_LOCKS},   /* record locks (SQLite, lockf()) */
    {"fdatasync", FILES, ANY},       /* fdatasync() */
    {"flock", FILES, ANY},           /* flock() on an open file */
    {"fsync", FILES, ANY},           /* fsync() */
    {"ftruncate", FILES, ANY},       /* ftruncate(); truncate() by path is refused */
    {"getdents64", FILES, ANY},      /* readdir() */
    {"lstat", FILES, ANY},           /* lstat() (metadata only) */
    {"mkdir", FILES, ANY},           /* mkdir() */
    {"mkdirat", FILES, ANY},         /* mkdirat() */
    {"newfstatat", FILES, ANY},      /* stat(), lstat(), fstatat() by path in glibc */
    {"open", FILES, ANY},            /* open() in code that bypasses glibc */
    {"openat", FILES, ANY},          /* open(), fopen(), opendir() in glibc */
    {"pread64", FILES, ANY},         /* pread() */
    {"pwrite64", FILES, ANY},        /* pwrite() */
    {"readlink", FILES, ANY},        /* readlink() */
    {"readlinkat", FILES, ANY},      /* readlinkat(), realpath() */
    {"rename", FILES, ANY},          /* rename() in glibc */
    {"renameat", FILES, ANY},        /* renameat() */
    {"renameat2", FILES, ANY},       /* renameat2() (RENAME_NOREPLACE) */
    {"rmdir", FILES, ANY},           /* rmdir() */
    {"stat", FILES, ANY},            /* stat() in code that bypasses glibc */
    {"statx", FILES, ANY},           /* statx() */
    {"unlink", FILES, ANY},          /* unlink() */
    {"unlinkat", FILES, ANY},        /* unlinkat(), remove() */
    {"utimensat", FILES, NULL_PATH}, /* futimens() only; times by path are refused */

    /* database: reconnect to a database (libpq over TCP or a unix socket) */
    {"connect", DB, ANY},           /* connect() to the database */
    {"getpeername", DB, ANY},       /* libpq checks its peer */
    {"getsockname", DB, ANY},       /* libpq reads its local address */
    {"getsockopt", DB, ANY},        /* SO_ERROR after a non-blocking connect */
    {"poll", DB, ANY},              /* libpq waits for the server */
    {"ppoll", DB, ANY},             /* poll() with a timespec */
    {"recvfrom", DB, ANY},          /* recv() */
    {"recvmsg", DB, ANY},           /* recvmsg() */
    {"sendmsg", DB, SENDMSG_PLAIN}, /* sendmsg(); no TCP Fast Open, which connects */
    {"sendto", DB, SENDTO_PLAIN},   /* send(): no address, no TCP Fast Open */
    {"setsockopt", DB, ANY},        /* TCP_NODELAY, keepalives */
    {"shutdown", DB, ANY},          /* orderly close */
    {"socket", DB, STREAM_SOCK},    /* TCP (unix: the database's) streams: no UDP, raw, netlink */
};

const char *sandlet_confine_allowlist(size_t i, unsigned *group)
{
    if (i >= ARRAY_LEN(allowlist))
        return NULL;
    if (group)
        *group = allowlist[i].group;
    return allowlist[i].name;
}

/* ---- system-call names, resolved ahead of need -------------------------- */

/* The SIGSYS handler may not allocate, and libseccomp's resolver returns
 * a strdup()ed name, so the names of this architecture's system calls are
 * copied into a static pool once, before the filter is loaded. */
#define NAMES_MAX 1024
static char name_pool[12288];
static uint16_t name_at[NAMES_MAX]; /* offset + 1 in name_pool; 0: no name */
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void names_build(void)
{
    size_t used = 0;
    for (int nr = 0; nr < NAMES_MAX; nr++) {
        char *s = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        if (!s)
            continue;
        size_t n = strlen(s) + 1;
        if (used + n <= sizeof(name_pool)) {
            memcpy(name_pool + used, s, n);
            name_at[nr] = (uint16_t)(used + 1);
            used += n;
        }
        free(s);
    }
}

/* Async-signal-safe once names_build() has run. */
static const char *name_lookup(int nr)
{
    if (nr < 0 || nr >= NAMES_MAX || !name_at[nr])
        return "unknown";
    return name_pool + name_at[nr] - 1;
}

const char *sandlet_confine_syscall_name(int nr)
{
    pthread_once(&names_once, names_build);
    return name_lookup(nr);
}

/* ---- the SIGSYS reporter ---------------------------------------------- */

/* What the report adds after a call's name: the directive that allows it
 * or why none does (issue 19: "openat (257)" alone named no fix). */
#define HINT_FILES                                                                                 \
    "; 'syscalls files;' in the sandbox's block allows it, with 'readable PATH;' or "              \
    "'writable PATH;' for each path the servlet opens"
#define HINT_DATABASE "; only a sandbox with a 'database' line may use sockets, to its database"
#define HINT_ARGS                                                                                  \
    "; allowed only with other arguments (no executable memory, no new processes, no other "       \
    "sockets): see sandlet-security(7)"
#define HINT_NEVER "; never allowed: a servlet may not run programs or start processes"
#define HINT_NONE                                                                                  \
    "; no 'syscalls' group allows it (sandlet.conf(5)); if a library needs it, 'syscall-"          \
    "violations log;' lists every such call while developing"

/* Calls no configuration allows, whatever their arguments. */
static const char *const never_allowed[] = {
    "execve",          "execveat", "fork",   "vfork",
    "clone",           "clone3",   "ptrace", "process_vm_writev",
    "process_vm_readv"};

/* (See confine.h.)  Never first; then a group that allows the call by
 * name ("newfstatat" by path is a files call although the base set has
 * it for descriptors); then a listed call refused for its arguments. */
const char *sandlet_confine_hint(const char *name, unsigned groups, unsigned *group)
{
    if (group)
        *group = 0;
    for (size_t i = 0; i < ARRAY_LEN(never_allowed); i++)
        if (strcmp(name, never_allowed[i]) == 0)
            return HINT_NEVER;
    bool listed = false;
    for (size_t i = 0; i < ARRAY_LEN(allowlist); i++) {
        const rule *e = &allowlist[i];
        if (strcmp(e->name, name) != 0)
            continue;
        if (e->group && !(e->group & groups)) {
            if (group)
                *group = e->group;
            return e->group == FILES ? HINT_FILES : HINT_DATABASE;
        }
        listed = true;
    }
    return listed ? HINT_ARGS : HINT_NONE;
}

unsigned sandlet_confine_groups(unsigned syscalls)
{
    return (syscalls & SANDLET_SYSCALLS_FILES ? SANDLET_SC_FILES : 0) |
           (syscalls & SANDLET_SYSCALLS_DATABASE ? SANDLET_SC_DATABASE : 0);
}

static char sigsys_prefix[160]; /* "sandletd worker NAME: seccomp: forbidden system call " */
/* What would allow each call, or why nothing does: set before lockdown,
 * only read in the handler. */
static const char *sigsys_hint[NAMES_MAX];
static size_t sigsys_prefix_len;
static uint32_t native_arch;
static pid_t self_pid;

static size_t put(char *buf, size_t at, size_t cap, const char *s, size_t n)
{
    if (n > cap - at)
        n = cap - at;
    memcpy(buf + at, s, n);
    return at + n;
}

static size_t put_num(char *buf, size_t at, size_t cap, long v)
{
    char digits[24];
    size_t n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do
        digits[sizeof(digits) - 1 - n++] = (char)('0' + u % 10);
    while ((u /= 10) && n < sizeof(digits) - 1);
    if (v < 0)
        digits[sizeof(digits) - 1 - n++] = '-';
    return put(buf, at, cap, digits + sizeof(digits) - n, n);
}

/* Installed with SA_RESETHAND, so SIGSYS is back to its default (death
 * with SIGSYS) when this runs; SA_NODEFER lets the re-raise act at once. */
static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char line[640];
    size_t n = put(line, 0, sizeof(line) - 1, sigsys_prefix, sigsys_prefix_len);
    if (si && si->si_code == SIGSYS_SECCOMP) {
        const char *name = si->si_arch == native_arch ? name_lookup(si->si_syscall) : "unknown";
        n = put(line, n, sizeof(line) - 1, name, strlen(name));
        n = put(line, n, sizeof(line) - 1, " (", 2);
        n = put_num(line, n, sizeof(line) - 1, si->si_syscall);
        n = put(line, n, sizeof(line) - 1, ")", 1);
        const char *hint = si->si_arch == native_arch && si->si_syscall >= 0 &&
                                   si->si_syscall < NAMES_MAX && sigsys_hint[si->si_syscall]
                               ? sigsys_hint[si->si_syscall]
                               : HINT_NONE;
        n = put(line, n, sizeof(line) - 1, hint, strlen(hint));
    } else {
        static const char other[] = "none (SIGSYS sent by a process)";
        n = put(line, n, sizeof(line) - 1, other, sizeof(other) - 1);
    }
    line[n++] = '\n';
    ssize_t w;
    do
        w = write(STDERR_FILENO, line, n);
    while (w < 0 && errno == EINTR);

    /* No sigaction() here: the filter refuses it for SIGSYS, and
     * SA_RESETHAND has already restored the default. */
    syscall(SYS_tgkill, self_pid, syscall(SYS_gettid), sig);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGSYS);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    syscall(SYS_exit_group, 128 + SIGSYS); /* not reached */
}

/* ---- reporting -------------------------------------------------------- */

typedef struct run {
    const sandlet_confine *c;
    char *err;
    size_t errlen;
    char wx[128]; /* a writable and executable mapping found at the start, or "" */
} run;

/* Writes "sandbox 'NAME': STEP: REASON; FIX" and returns rc.  REASON is
 * strerror(-rc) unless reason is given. */
static int report(const run *r, int rc, const char *reason, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int report(const run *r, int rc, const char *reason, const char *fix, const char *fmt, ...)
{
    if (!r->err || !r->errlen)
        return rc;
    char step[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(step, sizeof(step), fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "sandbox '%s': %s: %s; %s",
             r->c && r->c->sandbox ? r->c->sandbox : "?", step, reason ? reason : strerror(-rc),
             fix);
    return rc;
}

/* ---- steps ------------------------------------------------------------ */

/* Things glibc would otherwise read from files later, when it no longer can. */
static int prepare_libc(const run *r)
{
    /* With TZ unset, every localtime() stats /etc/localtime; with it set
     * to the same file, glibc reads it once here and never looks again. */
    if (!getenv("TZ") && setenv("TZ", ":/etc/localtime", 0) < 0)
        return report(r, -errno, NULL, "the worker is out of memory", "setenv(TZ)");
    tzset();
    /* Fatal glibc errors (heap corruption, stack smashing) open /dev/tty
     * unless told to write to standard error. */
    if (setenv("LIBC_FATAL_STDERR_", "1", 0) < 0)
        return report(r, -errno, NULL, "the worker is out of memory", "setenv(LIBC_FATAL_STDERR_)");
    return 0;
}

/* /proc/self/maps, opened before Landlock refuses /proc and read after
 * init, when the servlets are mapped; -1 when there is no /proc. */
static int maps_fd = -1;
static bool begun;

/* The promise "no memory is both writable and executable" must already
 * hold when the filter starts refusing new executable mappings.  The
 * READ_IMPLIES_EXEC personality makes every readable mapping executable
 * without PROT_EXEC ever being asked for: cleared before anything is
 * loaded.  The maps are opened here, while /proc is still reachable. */
static int open_maps(const run *r)
{
    int pers = personality(0xffffffff);
    if (pers < 0)
        return report(r, -errno, NULL, "report a bug", "personality()");
    if ((pers & READ_IMPLIES_EXEC) && personality((unsigned long)pers & ~READ_IMPLIES_EXEC) < 0)
        return report(r, -errno, NULL, "report a bug", "personality(clear READ_IMPLIES_EXEC)");
    if (maps_fd >= 0)
        close(maps_fd);
    maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (maps_fd < 0 && errno != ENOENT)
        return report(r, -errno, NULL, "mount /proc", "reading /proc/self/maps");
    return 0; /* no /proc (a bare container): the filter still stops new ones */
}

/* A servlet library that asks for an executable stack (no PT_GNU_STACK
 * note) makes glibc turn every stack writable and executable at dlopen():
 * read the maps as they are after init, through the descriptor opened
 * before Landlock.  Consumes maps_fd. */
static int scan_memory(run *r)
{
    if (maps_fd < 0)
        return 0;
    int fd = maps_fd;
    maps_fd = -1;
    FILE *f = lseek(fd, 0, SEEK_SET) == 0 ? fdopen(fd, "re") : NULL;
    if (!f) {
        int rc = -errno;
        close(fd);
        return report(r, rc, NULL, "report a bug", "reading /proc/self/maps");
    }
    char line[512];
    bool at_start = true;
    while (!r->wx[0] && fgets(line, sizeof(line), f)) {
        bool start = at_start;
        at_start = strchr(line, '\n') != NULL;
        if (!start)
            continue; /* the rest of a long line (a long path) */
        /* "start-end perms offset dev inode path" */
        const char *perms = strchr(line, ' ');
        if (!perms || strlen(perms) < 5 || perms[2] != 'w' || perms[3] != 'x')
            continue;
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        const char *path = strrchr(line, ' ');
        snprintf(r->wx, sizeof(r->wx), "mapping %.60s%s",
                 path && path[1] ? path + 1 : "(anonymous)",
                 strstr(line, "[stack]") ? " (an executable stack)" : "");
    }
    fclose(f);
    return 0;
}

/* Reported only after the configuration's own checks, so that an error
 * in the configuration is the one that shows (under valgrind, whose
 * translated code is writable and executable, too). */
static int check_memory(const run *r)
{
    if (!r->wx[0])
        return 0;
    return report(r, -EPERM, "memory is writable and executable",
                  "rebuild the servlet libraries with -z noexecstack and without W+X code", "%s",
                  r->wx);
}

/* Sets soft and hard limit; never raises the hard limit (a lower one
 * already confines more). */
static int set_limit(const run *r, int resource, const char *name, rlim_t soft, rlim_t hard,
                     const char *fix)
{
    struct rlimit cur;
    if (getrlimit(resource, &cur) < 0)
        return report(r, -errno, NULL, fix, "getrlimit(%s)", name);
    if (cur.rlim_max != RLIM_INFINITY && hard > cur.rlim_max)
        hard = cur.rlim_max;
    if (soft > hard)
        soft = hard;
    struct rlimit lim = {soft, hard};
    if (setrlimit(resource, &lim) < 0)
        return report(r, -errno, NULL, fix, "setrlimit(%s, %llu)", name, (unsigned long long)soft);
    return 0;
}

/* The address space the process maps now, or 0 when unknown. */
static unsigned long long mapped_bytes(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    unsigned long long pages = strtoull(buf, NULL, 10);
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? pages * (unsigned long long)page : 0;
}

static int apply_limits(const run *r)
{
    const sandlet_confine *c = r->c;
    int rc;
    if (c->memory) {
        unsigned long long used = mapped_bytes();
        if (used && c->memory <= used)
            return report(r, -EINVAL, "below the address space the worker already maps",
                          "raise the sandbox's memory limit well above that",
                          "memory %llu bytes (RLIMIT_AS; %llu mapped)", c->memory, used);
        rc = set_limit(r, RLIMIT_AS, "RLIMIT_AS", (rlim_t)c->memory, (rlim_t)c->memory,
                       "check the sandbox's memory limit");
        if (rc < 0)
            return rc;
    }
    if (c->file_size) {
        /* A write past the limit then fails with EFBIG, which a servlet
         * can handle and report, rather than killing the worker with a
         * signal that says nothing about why. */
        if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR)
            return report(r, -errno, NULL, "report a bug", "signal(SIGXFSZ, SIG_IGN)");
        rc = set_limit(r, RLIMIT_FSIZE, "RLIMIT_FSIZE", (rlim_t)c->file_size, (rlim_t)c->file_size,
                       "check the sandbox's max-file-size");
        if (rc < 0)
            return rc;
    }
    if (c->open_files) {
        rc = set_limit(r, RLIMIT_NOFILE, "RLIMIT_NOFILE", c->open_files, c->open_files,
                       "check the sandbox's open-files limit");
        if (rc < 0)
            return rc;
    }
    if (c->cpu_seconds) {
        /* SIGXCPU at the soft limit says what happened; SIGKILL a second later. */
        rc = set_limit(r, RLIMIT_CPU, "RLIMIT_CPU", c->cpu_seconds, (rlim_t)c->cpu_seconds + 1,
                       "check the sandbox's CPU limit");
        if (rc < 0)
            return rc;
    }
    if (!c->core_dumps) {
        rc = set_limit(r, RLIMIT_CORE, "RLIMIT_CORE", 0, 0, "report a bug");
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* RLIMIT_NPROC counts threads too: set after init, which may start some
 * (the first filter refuses new processes until then).  Not enforced for
 * root; the allowlist refuses fork and clone anyway. */
static int limit_processes(const run *r)
{
    return set_limit(r, RLIMIT_NPROC, "RLIMIT_NPROC", 0, 0, "report a bug");
}

/* Whether the process may change its ids (root, or CAP_SETUID/SETGID). */
static bool may_change_ids(void)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capget, &hdr, data) < 0)
        return geteuid() == 0;
    return (data[0].effective & (1u << CAP_SETUID)) || (data[0].effective & (1u << CAP_SETGID));
}

/* The sandbox's identity.  A worker started by a root supervisor drops to
 * it here; one that was started with it already (the supervisor dropped it
 * before exec) only checks it: the same ids real, effective and saved, no
 * supplementary group, never root. */
static int set_identity(const run *r)
{
    const sandlet_confine *c = r->c;
    bool set_uid = c->uid != (uid_t)-1, set_gid = c->gid != (gid_t)-1;
    if (!set_uid && !set_gid)
        return 0; /* an unprivileged daemon's own user: nothing to change or check */
    if (set_uid && c->uid == 0)
        return report(r, -EPERM, "servlet code never runs as root",
                      "give the sandbox an unprivileged 'user'", "setuid(0)");
    bool priv = may_change_ids();
    const char *fix = priv ? "sandletd lacks CAP_SETUID/CAP_SETGID (a container?); grant them"
                           : "start sandletd as root, or leave the sandbox's user and group unset";
    if (priv && set_uid && !set_gid && getegid() == 0)
        return report(r, -EINVAL, "the worker would keep group root",
                      "give the sandbox a group as well", "setuid(%u) without a group",
                      (unsigned)c->uid);
    if (priv && setgroups(0, NULL) < 0)
        return report(r, -errno, NULL, fix, "setgroups(0)");
    if (priv && set_gid && setresgid(c->gid, c->gid, c->gid) < 0)
        return report(r, -errno, NULL, fix, "setgid(%u)", (unsigned)c->gid);
    if (priv && set_uid && setresuid(c->uid, c->uid, c->uid) < 0)
        return report(r, -errno, NULL, fix, "setuid(%u)", (unsigned)c->uid);

    /* Verify, whether changed here or before exec: all three ids are the
     * sandbox's, no supplementary groups, no way back. */
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
        return report(r, -errno, NULL, "report a bug", "getresuid()");
    if (set_uid && (ru != c->uid || eu != c->uid || su != c->uid))
        return report(r, -EPERM,
                      priv ? "the ids are still mixed" : "the worker runs as another user",
                      priv ? "report a bug" : fix, "uid %u: real/effective/saved %u/%u/%u",
                      (unsigned)c->uid, (unsigned)ru, (unsigned)eu, (unsigned)su);
    if (set_gid && (rg != c->gid || eg != c->gid || sg != c->gid))
        return report(r, -EPERM,
                      priv ? "the ids are still mixed" : "the worker runs as another group",
                      priv ? "report a bug" : fix, "gid %u: real/effective/saved %u/%u/%u",
                      (unsigned)c->gid, (unsigned)rg, (unsigned)eg, (unsigned)sg);
    int ngroups = getgroups(0, NULL);
    if (ngroups != 0)
        return report(r, -EPERM, "supplementary groups remain",
                      priv ? "report a bug"
                           : "start sandletd as root (its supervisor drops them), or, running it "
                             "unprivileged, name no 'user' for it or the daemon",
                      "setgroups(0): %d groups", ngroups);
    if (set_uid && (setuid(0) == 0 || errno != EPERM))
        return report(r, -EPERM, "the drop is reversible", "report a bug", "setuid(0) as uid %u",
                      (unsigned)c->uid);
    if (set_uid && !(set_gid && c->gid == 0) && (setgid(0) == 0 || errno != EPERM))
        return report(r, -EPERM, "the drop is reversible", "report a bug", "setgid(0) as uid %u",
                      (unsigned)c->uid);
    return 0;
}

int sandlet_confine_threads(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return -errno;
    char line[256];
    int n = -ENOENT;
    while (n < 0 && fgets(line, sizeof(line), f))
        if (strncmp(line, "Threads:", 8) == 0)
            n = atoi(line + 8);
    fclose(f);
    return n == 0 ? -EPROTO : n;
}

/* Landlock and no_new_privs apply to the calling thread only, so a second
 * thread at this point would run unconfined for the rest of its life. */
static int single_threaded(const run *r)
{
    int n = sandlet_confine_threads();
    if (n < 0)
        return report(r, n, NULL, "mount /proc: the worker must count its threads",
                      "reading /proc/self/status");
    if (n != 1)
        return report(r, -EBUSY, "Landlock and no_new_privs would bind only the calling thread",
                      "start no thread before the worker confines itself (a library loaded "
                      "by sandletd itself?)",
                      "confining a process of %d threads", n);
    return 0;
}

static int drop_privileges(const run *r)
{
    /* The kernel resets "dumpable" on an identity change; say what we mean.
     * Not dumpable also keeps other processes of the same user from
     * ptrace-attaching to the worker. */
    if (prctl(PR_SET_DUMPABLE, r->c->core_dumps ? 1 : 0, 0, 0, 0) < 0)
        return report(r, -errno, NULL, "report a bug", "prctl(PR_SET_DUMPABLE, %d)",
                      r->c->core_dumps ? 1 : 0);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
        return report(r, errno ? -errno : -EPERM, NULL, "the kernel is older than 3.5",
                      "prctl(PR_SET_NO_NEW_PRIVS, 1)");
    /* EINVAL: a kernel before 4.3 has no ambient set to clear. */
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return report(r, -errno, NULL, "report a bug", "prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capset, &hdr, data) < 0)
        return report(r, -errno, NULL, "report a bug",
                      "capset(empty permitted, effective, "
                      "inheritable)");
    if (syscall(SYS_capget, &hdr, data) < 0)
        return report(r, -errno, NULL, "report a bug", "capget()");
    for (size_t i = 0; i < ARRAY_LEN(data); i++)
        if (data[i].effective || data[i].permitted || data[i].inheritable)
            return report(r, -EPERM, "capabilities remain", "report a bug",
                          "capset(empty): word %zu is %#x/%#x/%#x", i, data[i].effective,
                          data[i].permitted, data[i].inheritable);
    return 0;
}

/* Adds one path to a ruleset (rfd >= 0) or, without Landlock, just checks
 * that it exists, so that a configuration error shows on every kernel. */
static int landlock_path(const run *r, int rfd, const char *kind, const char *path, uint64_t access)
{
    if (!path || !*path)
        return report(r, -EINVAL, "empty path", "fix the sandbox's paths", "landlock %s path",
                      kind);
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return report(r, -errno, NULL, "create it or remove it from the sandbox",
                      "landlock %s path '%s'", kind, path);
    int rc = 0;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = report(r, -errno, NULL, "check the path", "landlock %s path '%s'", kind, path);
    } else if (rfd >= 0) {
        if (!S_ISDIR(st.st_mode))
            access &= LL_FILE; /* directory rights on a file: EINVAL */
        struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
        if (syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
            rc = report(r, -errno, NULL, "check the path", "landlock_add_rule(%s '%s', %#llx)",
                        kind, path, (unsigned long long)access);
    }
    close(fd);
    return rc;
}

/* ---- libraries under Landlock ------------------------------------------ */

/* Where dlopen() looks besides a library's RUNPATH: the system's library
 * directories (with their hwcaps, gconv and multiarch subdirectories) and
 * ld.so's cache.  Readable only: mapping a library needs no execute right,
 * and without it nothing there can be started as a program. */
static const char *const system_libs[] = {
    "/etc/ld.so.cache", "/lib",       "/lib32",         "/lib64",           "/usr/lib",
    "/usr/lib32",       "/usr/lib64", "/usr/local/lib", "/usr/local/lib64",
};

const char *const *sandlet_confine_system_libs(size_t *n)
{
    *n = ARRAY_LEN(system_libs);
    return system_libs;
}

/* ELF types of this architecture's word size (what ElfW() of <link.h>
 * names, spelled out). */
#if UINTPTR_MAX > 0xffffffffu
typedef Elf64_Ehdr elf_ehdr;
typedef Elf64_Phdr elf_phdr;
typedef Elf64_Dyn elf_dyn;
typedef Elf64_Addr elf_addr;
typedef Elf64_Xword elf_word;
#define ELF_CLASS ELFCLASS64
#else
typedef Elf32_Ehdr elf_ehdr;
typedef Elf32_Phdr elf_phdr;
typedef Elf32_Dyn elf_dyn;
typedef Elf32_Addr elf_addr;
typedef Elf32_Word elf_word;
#define ELF_CLASS ELFCLASS32
#endif

/* Reads len bytes at off, all or nothing. */
static bool read_at(int fd, void *buf, size_t len, off_t off)
{
    ssize_t n = pread(fd, buf, len, off);
    return n >= 0 && (size_t)n == len;
}

/* The file offset of a virtual address of an ELF object, or -1. */
static off_t vaddr_offset(const elf_phdr *ph, size_t n, elf_addr v)
{
    for (size_t i = 0; i < n; i++)
        if (ph[i].p_type == PT_LOAD && v >= ph[i].p_vaddr && v - ph[i].p_vaddr < ph[i].p_filesz)
            return (off_t)(v - ph[i].p_vaddr + ph[i].p_offset);
    return -1;
}

/* The RUNPATH (else RPATH) of a library of this architecture, into out;
 * false when it has none or is not one (dlopen() will say why). */
static bool lib_runpath(const char *lib, char *out, size_t outlen)
{
    int fd = open(lib, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool found = false;
    elf_ehdr eh;
    elf_phdr ph[64];
    if (!read_at(fd, &eh, sizeof(eh), 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELF_CLASS || eh.e_phentsize != sizeof(elf_phdr) ||
        eh.e_phnum == 0 || eh.e_phnum > ARRAY_LEN(ph) ||
        !read_at(fd, ph, eh.e_phnum * sizeof(elf_phdr), (off_t)eh.e_phoff))
        goto out;
    size_t nph = eh.e_phnum;
    for (size_t i = 0; i < nph && !found; i++) {
        if (ph[i].p_type != PT_DYNAMIC)
            continue;
        elf_addr strtab = 0;
        elf_word strsz = 0, runpath = 0, rpath = 0;
        bool has_runpath = false, has_rpath = false;
        size_t ndyn = ph[i].p_filesz / sizeof(elf_dyn);
        for (size_t k = 0; k < ndyn && k < 4096; k++) {
            elf_dyn d;
            if (!read_at(fd, &d, sizeof(d), (off_t)(ph[i].p_offset + k * sizeof(d))) ||
                d.d_tag == DT_NULL)
                break;
            if (d.d_tag == DT_STRTAB)
                strtab = d.d_un.d_ptr;
            else if (d.d_tag == DT_STRSZ)
                strsz = d.d_un.d_val;
            else if (d.d_tag == DT_RUNPATH)
                runpath = d.d_un.d_val, has_runpath = true;
            else if (d.d_tag == DT_RPATH)
                rpath = d.d_un.d_val, has_rpath = true;
        }
        elf_word at = has_runpath ? runpath : rpath;
        off_t base = vaddr_offset(ph, nph, strtab);
        if ((!has_runpath && !has_rpath) || base < 0 || at >= strsz)
            break;
        size_t want = strsz - at < outlen ? (size_t)(strsz - at) : outlen;
        ssize_t n = pread(fd, out, want, base + (off_t)at);
        found = n > 0 && memchr(out, '\0', (size_t)n) != NULL;
    }
out:
    close(fd);
    return found;
}

/* Grants reading one library path when it exists (a missing one is not
 * this step's business: dlopen() searches on). */
static int landlock_lib(const run *r, int rfd, const char *path, uint64_t access)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int rc = 0;
    struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
    if (syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
        rc = report(r, -errno, NULL, "report a bug", "landlock_add_rule(library path '%s')", path);
    close(fd);
    return rc;
}

/* The directories of one library's RUNPATH, $ORIGIN expanded; entries
 * with other tokens ($LIB, $PLATFORM) or relative ones are left out. */
static int landlock_runpath(const run *r, int rfd, const char *lib, uint64_t access)
{
    char runpath[1024], dir[1024], origin[512];
    if (!lib_runpath(lib, runpath, sizeof(runpath)))
        return 0;
    const char *slash = strrchr(lib, '/');
    size_t olen = slash ? (size_t)(slash - lib) : 0;
    if (olen >= sizeof(origin))
        olen = 0;
    memcpy(origin, lib, olen);
    origin[olen] = '\0';
    int rc = 0;
    for (char *save = NULL, *e = strtok_r(runpath, ":", &save); rc == 0 && e;
         e = strtok_r(NULL, ":", &save)) {
        const char *rest = NULL;
        if (strncmp(e, "$ORIGIN", 7) == 0)
            rest = e + 7;
        else if (strncmp(e, "${ORIGIN}", 9) == 0)
            rest = e + 9;
        int n;
        if (rest && olen)
            n = snprintf(dir, sizeof(dir), "%s%s", origin, rest);
        else
            n = snprintf(dir, sizeof(dir), "%s", e);
        if (n < 0 || (size_t)n >= sizeof(dir) || dir[0] != '/' || strchr(dir, '$'))
            continue;
        rc = landlock_lib(r, rfd, dir, access);
    }
    return rc;
}

/* What dlopen() of the servlet libraries opens: the libraries, their
 * RUNPATH directories, the system's library directories, ld.so's cache. */
static int landlock_libraries(const run *r, int rfd, uint64_t handled)
{
    const sandlet_confine *c = r->c;
    uint64_t access = handled & LANDLOCK_ACCESS_FS_READ_FILE;
    if (rfd < 0 || !c->nlibs)
        return 0; /* no Landlock: nothing to grant */
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < ARRAY_LEN(system_libs); i++)
        rc = landlock_lib(r, rfd, system_libs[i], access);
    for (size_t i = 0; rc == 0 && i < c->nlibs; i++) {
        if (!c->lib_paths[i] || c->lib_paths[i][0] != '/')
            continue; /* dlopen() would search for it: the system directories cover that */
        rc = landlock_lib(r, rfd, c->lib_paths[i], access);
        if (rc == 0)
            rc = landlock_runpath(r, rfd, c->lib_paths[i], access);
    }
    return rc;
}

/* The Landlock ABI of this kernel, 0 without Landlock, or -errno. */
const char *sandlet_confine_kernel_gaps(const sandlet_confine *c, char *buf, size_t len)
{
    long abi = sandlet_landlock_abi();
    bool db = c && (c->groups & SANDLET_SC_DATABASE);
    const char *what = NULL;
    if (abi == 0)
        what = "no Landlock (Linux 5.13): files are fenced by the sandbox user's permissions "
               "only, writable directories stay writable past write-quota, and TCP ports, "
               "abstract unix sockets and signals are not fenced; seccomp still applies";
    else if (abi > 0 && abi < 4 && db)
        what = "no Landlock network rules (Linux 6.7, ABI 4): the database group may connect "
               "to any TCP port, not only its database-port, and to abstract unix sockets "
               "(scoping needs Linux 6.12, ABI 6); seccomp still allows stream sockets only";
    else if (abi > 0 && abi < 6 && db)
        what = "no Landlock scoping (Linux 6.12, ABI 6): the database group may connect to "
               "abstract unix sockets of other processes";
    if (!what || !buf || !len)
        return NULL;
    snprintf(buf, len, "sandbox '%s': this kernel has Landlock ABI %ld: %s",
             c && c->sandbox ? c->sandbox : "?", abi, what);
    return buf;
}

static int apply_landlock(const run *r, bool *active)
{
    const sandlet_confine *c = r->c;
    long abi = sandlet_landlock_abi();
    int rfd = -1;
    if (abi < 0)
        return report(r, (int)abi, NULL, "report a bug", "landlock_create_ruleset(VERSION)");
    *active = abi >= 1;
    uint64_t handled = 0;
    if (*active) {
        /* Every sandbox: no TCP listener at all, connect() only to its
         * database ports (none unless configured).  Abstract unix sockets
         * and signals only within the process itself: a worker must not
         * reach root's or another sandbox's abstract sockets, nor signal
         * anything (seccomp refuses kill() too; learning mode does not). */
        rfd = sandlet_landlock_ruleset(abi, &handled);
        if (rfd < 0)
            return report(r, rfd, NULL, "report a bug",
                          "landlock_create_ruleset(ABI %ld, access %#llx)", abi,
                          (unsigned long long)handled);
    }
    int rc = 0;
    rc = landlock_libraries(r, rfd, handled);
    for (size_t i = 0; rc == 0 && i < c->nread; i++)
        rc = landlock_path(r, rfd, "read", c->read_paths[i], handled & LL_READ);
    /* Over its write quota, a sandbox keeps reading what it wrote. */
    for (size_t i = 0; rc == 0 && i < c->nwrite; i++)
        rc = landlock_path(r, rfd, "write", c->write_paths[i],
                           c->write_blocked ? handled & LL_READ : handled);
    for (size_t i = 0; rc == 0 && rfd >= 0 && abi >= 4 && i < c->nports; i++) {
        struct ll_net_port_attr np = {.allowed_access = LL_NET_CONNECT_TCP,
                                      .port = c->connect_ports[i]};
        if (syscall(SYS_landlock_add_rule, rfd, LL_RULE_NET_PORT, &np, 0) < 0)
            rc = report(r, -errno, NULL, "check the sandbox's database-port",
                        "landlock_add_rule(connect to TCP port %u)", (unsigned)c->connect_ports[i]);
    }
    if (rc == 0 && rfd >= 0 && syscall(SYS_landlock_restrict_self, rfd, 0) < 0)
        rc = report(r, -errno, NULL, "report a bug", "landlock_restrict_self(ABI %ld)", abi);
    if (rfd >= 0)
        close(rfd);
    return rc;
}

/* One argument comparison, every field set (libseccomp's SCMP_An macros
 * leave datum_b implicit, which clang's -Wextra rejects).  For
 * SCMP_CMP_MASKED_EQ, a is the mask and b the value. */
static struct scmp_arg_cmp arg(unsigned n, enum scmp_compare op, scmp_datum_t a, scmp_datum_t b)
{
    struct scmp_arg_cmp c = {.arg = n, .op = op, .datum_a = a, .datum_b = b};
    return c;
}

/* Adds the rule(s) for one allowlist entry. */
static int add_rule(scmp_filter_ctx ctx, int nr, enum cond cond, const sandlet_confine *c)
{
    const uint32_t ok = SCMP_ACT_ALLOW;
    int rc = 0;
    switch (cond) {
    case ANY: return seccomp_rule_add(ctx, ok, nr, 0);
    case PROT_NO_EXEC:
        /* Servlets are mapped before confinement; afterwards nothing may
         * become executable, so no page can be written and then run,
         * whether through one mapping or two of the same memory. */
        return seccomp_rule_add(ctx, ok, nr, 1, arg(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    case MOVE_ONLY:
        /* Old size 0 duplicates a shared mapping, MREMAP_DONTUNMAP keeps
         * the old one mapped: both leave two views of the same pages, one
         * of which could be made executable.  realloc() needs neither,
         * nor MREMAP_FIXED (which could move a mapping over code). */
        return seccomp_rule_add(ctx, ok, nr, 2, arg(1, SCMP_CMP_NE, 0, 0),
                                arg(3, SCMP_CMP_MASKED_EQ, ~(scmp_datum_t)MREMAP_MAYMOVE, 0));
    case NOT_SIGSYS:
        /* 1..30, 32..63 and 64: a plain "!= SIGSYS" would let SIGSYS with
         * garbage in the upper 32 bits through. */
        rc = seccomp_rule_add(ctx, ok, nr, 1, arg(0, SCMP_CMP_LT, SIGSYS, 0));
        if (rc == 0)
            rc =
                seccomp_rule_add(ctx, ok, nr, 1, arg(0, SCMP_CMP_MASKED_EQ, ~(scmp_datum_t)31, 32));
        if (rc == 0)
            rc = seccomp_rule_add(ctx, ok, nr, 1, arg(0, SCMP_CMP_EQ, 64, 0));
        return rc;
    case SELF:
        return seccomp_rule_add(ctx, ok, nr, 1, arg(0, SCMP_CMP_EQ, (scmp_datum_t)self_pid, 0));
    case FD_ONLY:
        return seccomp_rule_add(ctx, ok, nr, 1,
                                arg(3, SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH));
    case FCNTL_FLAGS: {
        const scmp_datum_t cmds[] = {F_GETFD, F_SETFD, F_GETFL, F_SETFL};
        for (size_t i = 0; rc == 0 && i < ARRAY_LEN(cmds); i++)
            rc = seccomp_rule_add(ctx, ok, nr, 1, arg(1, SCMP_CMP_EQ, cmds[i], 0));
        return rc;
    }
    case FCNTL_LOCKS: {
        const scmp_datum_t cmds[] = {F_GETLK,     F_SETLK,     F_SETLKW,
                                     F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW};
        for (size_t i = 0; rc == 0 && i < ARRAY_LEN(cmds); i++)
            rc = seccomp_rule_add(ctx, ok, nr, 1, arg(1, SCMP_CMP_EQ, cmds[i], 0));
        return rc;
    }
    case READ_LIMITS:
        return seccomp_rule_add(ctx, ok, nr, 2, arg(0, SCMP_CMP_EQ, 0, 0),
                                arg(2, SCMP_CMP_EQ, 0, 0));
    case TCGETS_ONLY: return seccomp_rule_add(ctx, ok, nr, 1, arg(1, SCMP_CMP_EQ, TCGETS, 0));
    case NULL_PATH: return seccomp_rule_add(ctx, ok, nr, 1, arg(1, SCMP_CMP_EQ, 0, 0));
    case STREAM_SOCK: {
        /* Landlock fences TCP by port, and nothing fences UDP or raw
         * sockets, so stream sockets are all a database client gets.
         * SOCK_NONBLOCK and SOCK_CLOEXEC may be or'ed into the type; the
         * protocol is the default or TCP (not MPTCP or SCTP, which
         * Landlock's port rules may not cover).
         * AF_UNIX only where the database is a unix socket: Landlock has
         * no rule for connect() to a pathname socket, so any other sandbox
         * could reach every world-writable one (another sandbox's
         * PostgreSQL, journald, the system bus). */
        const scmp_datum_t domains[] = {AF_INET, AF_INET6, AF_UNIX};
        const size_t ndomains = ARRAY_LEN(domains) - (c->unix_sockets ? 0 : 1);
        const scmp_datum_t protocols[] = {0, IPPROTO_TCP};
        const scmp_datum_t type_mask = ~(scmp_datum_t)(SOCK_NONBLOCK | SOCK_CLOEXEC);
        for (size_t i = 0; rc == 0 && i < ndomains; i++)
            for (size_t j = 0; rc == 0 && j < ARRAY_LEN(protocols); j++)
                rc = seccomp_rule_add(ctx, ok, nr, 3, arg(0, SCMP_CMP_EQ, domains[i], 0),
                                      arg(1, SCMP_CMP_MASKED_EQ, type_mask, SOCK_STREAM),
                                      arg(2, SCMP_CMP_EQ, protocols[j], 0));
        return rc;
    }
    case SENDTO_PLAIN:
        /* sendto() with MSG_FASTOPEN and an address connects without
         * connect(), past Landlock's connect check. */
        return seccomp_rule_add(ctx, ok, nr, 2, arg(3, SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, 0),
                                arg(4, SCMP_CMP_EQ, 0, 0));
    case SENDMSG_PLAIN:
        return seccomp_rule_add(ctx, ok, nr, 1, arg(2, SCMP_CMP_MASKED_EQ, MSG_FASTOPEN, 0));
    }
    return -EINVAL;
}

/* Whether an enabled entry allows every call of this name, which makes
 * conditional entries of the same name redundant. */
static bool allowed_outright(const char *name, unsigned groups)
{
    for (size_t i = 0; i < ARRAY_LEN(allowlist); i++)
        if (allowlist[i].cond == ANY && (!allowlist[i].group || (allowlist[i].group & groups)) &&
            strcmp(allowlist[i].name, name) == 0)
            return true;
    return false;
}

bool sandlet_confine_allows_outright(int nr, uint32_t arch, unsigned groups)
{
    if (arch != seccomp_arch_native() || nr < 0)
        return false;
    const char *name = sandlet_confine_syscall_name(nr);
    return name && allowed_outright(name, groups);
}

static void set_hint(const char *name, const char *hint)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr >= 0 && nr < NAMES_MAX && !sigsys_hint[nr])
        sigsys_hint[nr] = hint;
}

static void build_hints(unsigned groups)
{
    for (size_t i = 0; i < ARRAY_LEN(never_allowed); i++)
        set_hint(never_allowed[i], sandlet_confine_hint(never_allowed[i], groups, NULL));
    for (size_t i = 0; i < ARRAY_LEN(allowlist); i++)
        set_hint(allowlist[i].name, sandlet_confine_hint(allowlist[i].name, groups, NULL));
}

static int install_reporter(const run *r)
{
    build_hints(r->c->groups);
    const char *name = r->c->sandbox ? r->c->sandbox : "?";
    int n = snprintf(sigsys_prefix, sizeof(sigsys_prefix),
                     "sandletd worker %.64s: seccomp: forbidden system call ", name);
    if (n < 0)
        return report(r, -EINVAL, "cannot format", "report a bug", "SIGSYS message");
    sigsys_prefix_len = (size_t)n < sizeof(sigsys_prefix) ? (size_t)n : sizeof(sigsys_prefix) - 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, NULL) < 0)
        return report(r, -errno, NULL, "report a bug", "sigaction(SIGSYS)");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGSYS);
    if (sigprocmask(SIG_UNBLOCK, &set, NULL) < 0)
        return report(r, -errno, NULL, "report a bug", "sigprocmask(unblock SIGSYS)");
    return 0;
}

static int apply_seccomp(const run *r)
{
    const sandlet_confine *c = r->c;
    int rc = pthread_once(&names_once, names_build);
    if (rc != 0)
        return report(r, -rc, NULL, "report a bug", "resolving system-call names");
    native_arch = seccomp_arch_native();
    self_pid = getpid();
    if (!c->learn && (rc = install_reporter(r)) < 0)
        return rc;

    /* Learning mode: the kernel logs the call (audit type=1326 SECCOMP, in
     * the kernel log or audit.log) and lets it through. */
    if (c->learn && seccomp_api_get() < 3)
        return report(r, -EOPNOTSUPP, "the kernel cannot log and allow (SECCOMP_RET_LOG)",
                      "use Linux 4.14 or later, or turn learning mode off",
                      "seccomp learning mode");
    scmp_filter_ctx ctx = seccomp_init(c->learn ? SCMP_ACT_LOG : SCMP_ACT_TRAP);
    if (!ctx)
        return report(r, -ENOMEM, NULL, "the worker is out of memory", "seccomp_init(default %s)",
                      c->learn ? "log" : "trap");
    /* x86 system calls from an x86_64 process (int 0x80) are never
     * legitimate.  Killing the thread kills a single-threaded worker too,
     * on kernels before 4.14 that cannot kill a whole process. */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 &&
        (rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_THREAD)) < 0) {
        rc = report(r, rc, NULL, "report a bug", "seccomp_attr_set(BADARCH, KILL)");
        goto out;
    }
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1)) < 0) {
        rc = report(r, rc, NULL, "libseccomp is older than 2.5; upgrade it",
                    "seccomp_attr_set(API_SYSRAWRC)");
        goto out;
    }
    /* The kernel records each trap in its audit log: the supervisor counts
     * a seccomp kill only from that record, which the worker cannot write
     * (a SIGSYS it can send itself).  Without it (Linux < 4.14) a kill is
     * still a kill, only not counted. */
    if (!c->learn && seccomp_api_get() >= 3 &&
        (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1)) < 0) {
        rc = report(r, rc, NULL, "report a bug", "seccomp_attr_set(CTL_LOG)");
        goto out;
    }
    /* Every thread, those init started included: a thread left out would
     * serve unfiltered.  Needs the seccomp() system call (Linux 3.17). */
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) < 0) {
        rc = report(r, rc, "cannot filter every thread at once (TSYNC)",
                    "use Linux 3.17 or later and libseccomp 2.2 or later",
                    "seccomp_attr_set(CTL_TSYNC)");
        goto out;
    }
    for (size_t i = 0; i < ARRAY_LEN(allowlist); i++) {
        const rule *e = &allowlist[i];
        if (e->group && !(e->group & c->groups))
            continue;
        if (e->cond != ANY && allowed_outright(e->name, c->groups))
            continue;
        int nr = seccomp_syscall_resolve_name(e->name);
        if (nr == __NR_SCMP_ERROR) {
            rc = report(r, -EINVAL, "libseccomp does not know it", "update libseccomp",
                        "seccomp rule for %s", e->name);
            goto out;
        }
        if (nr < 0)
            continue; /* not a system call on this architecture */
        if ((rc = add_rule(ctx, nr, e->cond, c)) < 0) {
            rc = report(r, rc, NULL, "report a bug", "seccomp rule for %s", e->name);
            goto out;
        }
    }
    if ((rc = seccomp_load(ctx)) < 0) {
        int threads = sandlet_confine_threads();
        if (rc == -ESRCH)
            rc = report(r, rc,
                        "a thread could not be synchronised (it installed a filter of its own?)",
                        "let no servlet thread install a seccomp filter",
                        "seccomp_load(%s, TSYNC, %d threads)", c->learn ? "learning" : "enforcing",
                        threads);
        else
            rc = report(r, rc, NULL, "check that the kernel has CONFIG_SECCOMP_FILTER",
                        "seccomp_load(%s, TSYNC, %d threads)", c->learn ? "learning" : "enforcing",
                        threads);
    }
out:
    seccomp_release(ctx);
    return rc;
}

/* The argument of clone() that holds the flags. */
#if defined(__s390__) || defined(__CRIS__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

/* Until the allowlist is loaded, code runs that sandletd did not write
 * (library constructors, init): it may start threads, which inherit every
 * step so far and which the allowlist's TSYNC reaches, but no process,
 * which the allowlist would never cover, it may exec nothing, and it may
 * map nothing writable and executable at once. */
static int apply_early_filter(const run *r)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return report(r, -ENOMEM, NULL, "the worker is out of memory", "seccomp_init(allow)");
    static const char *const refused[] = {"execve", "execveat", "fork", "vfork"};
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc < 0)
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_THREAD);
    for (size_t i = 0; rc == 0 && i < ARRAY_LEN(refused); i++) {
        int nr = seccomp_syscall_resolve_name(refused[i]);
        if (nr >= 0)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    /* A clone without CLONE_THREAD is a new process.  clone3() passes its
     * flags in memory a filter cannot read: ENOSYS makes glibc fall back
     * to clone() for threads. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                              arg(CLONE_FLAGS_ARG, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    /* No memory both writable and executable, from the start: a thread
     * of init could otherwise make some after the check before the
     * allowlist, and a library asking for an executable stack fails to
     * load with a message that says so. */
    static const char *const prot_calls[] = {"mmap", "mprotect", "pkey_mprotect"};
    for (size_t i = 0; rc == 0 && i < ARRAY_LEN(prot_calls); i++) {
        int nr = seccomp_syscall_resolve_name(prot_calls[i]);
        if (nr >= 0)
            rc = seccomp_rule_add(
                ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
                arg(2, SCMP_CMP_MASKED_EQ, PROT_WRITE | PROT_EXEC, PROT_WRITE | PROT_EXEC));
    }
    if (rc == 0 && seccomp_syscall_resolve_name("clone3") >= 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), seccomp_syscall_resolve_name("clone3"),
                              0);
    /* No unix socket for init either, unless the database is one (the
     * worker connected to it before this filter): a pathname socket is
     * reached by connect() whatever Landlock says, and a datagram
     * socketpair() end can be connect()ed anew.  EACCES, not a kill:
     * glibc's syslog() and nscd lookups try one and carry on.  Every
     * value with AF_UNIX in the low 32 bits the kernel reads. */
    if (rc == 0 && !r->c->unix_sockets) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1,
                              arg(0, SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_UNIX));
        if (rc == 0)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socketpair), 0);
    }
    if (rc < 0)
        rc = report(r, rc, NULL, "report a bug",
                    "seccomp rules against exec, fork and unix sockets");
    else if ((rc = seccomp_load(ctx)) < 0)
        rc = report(r, rc, NULL, "check that the kernel has CONFIG_SECCOMP_FILTER",
                    "seccomp_load(no exec, no fork)");
    seccomp_release(ctx);
    return rc;
}

/* Checks what needs no system call, so that a bad configuration changes
 * nothing in the caller. */
static int check_config(const run *r)
{
    const sandlet_confine *c = r->c;
    if (!c)
        return report(r, -EINVAL, "no configuration", "report a bug", "confinement");
    if (c->groups & ~(unsigned)SANDLET_SC_ALL)
        return report(r, -EINVAL, "unknown group", "report a bug", "system-call groups %#x",
                      c->groups);
    if ((c->nread && !c->read_paths) || (c->nwrite && !c->write_paths) ||
        (c->nlibs && !c->lib_paths))
        return report(r, -EINVAL, "path count without paths", "report a bug", "landlock paths");
    return 0;
}

int sandlet_confine_begin(const sandlet_confine *c, bool *landlock_active, char *err, size_t errlen)
{
    run r = {c, err, errlen, ""};
    bool active = false;
    int rc;
    if (landlock_active)
        *landlock_active = false;
    if (err && errlen)
        err[0] = '\0';
    if ((rc = check_config(&r)) < 0)
        return rc;
    if (begun)
        return report(&r, -EALREADY, "the process is already confined", "report a bug",
                      "confinement");
    /* The maps are opened before Landlock, which would refuse /proc. */
    if ((rc = single_threaded(&r)) < 0 || (rc = prepare_libc(&r)) < 0 || (rc = open_maps(&r)) < 0 ||
        (rc = apply_limits(&r)) < 0 || (rc = set_identity(&r)) < 0 ||
        (rc = drop_privileges(&r)) < 0 || (rc = apply_landlock(&r, &active)) < 0 ||
        (rc = apply_early_filter(&r)) < 0)
        return rc;
    begun = true;
    if (landlock_active)
        *landlock_active = active;
    return 0;
}

int sandlet_confine_finish(const sandlet_confine *c, char *err, size_t errlen)
{
    run r = {c, err, errlen, ""};
    int rc;
    if (err && errlen)
        err[0] = '\0';
    if ((rc = check_config(&r)) < 0)
        return rc;
    if (!begun)
        return report(&r, -EINVAL, "the first step has not run", "report a bug",
                      "sandlet_confine_finish() before sandlet_confine_begin()");
    if ((rc = scan_memory(&r)) < 0 || (rc = check_memory(&r)) < 0 || (rc = limit_processes(&r)) < 0)
        return rc;
    return apply_seccomp(&r);
}

int sandlet_confine_apply(const sandlet_confine *c, bool *landlock_active, char *err, size_t errlen)
{
    int rc = sandlet_confine_begin(c, landlock_active, err, errlen);
    return rc < 0 ? rc : sandlet_confine_finish(c, err, errlen);
}

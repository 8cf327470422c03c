/* test_confine.c - unit tests of worker confinement (src/sandbox/confine.c): each test forks a
 * child that confines itself and does one thing, and the parent asserts the child's fate (exit
 * status or signal) and what it wrote to stderr.
 *
 * Confined children cannot run under valgrind (it lacks the seccomp and Landlock system calls, and
 * its own system calls trip the filter) nor under AddressSanitizer or ThreadSanitizer (they need
 * sigaltstack, clone, ptrace, /proc and terabytes of address space), so there, or with
 * SANDLET_TEST_NO_CONFINE set, the tests that confine a child are skipped with a message; the
 * allowlist tests and those of configuration errors (rejected before any filter) still run. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* AddressSanitizer (LeakSanitizer) and ThreadSanitizer need system calls a confined worker may
 * not make (sigaltstack, clone, ptrace, open of /proc) and terabytes of address space. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#include "sandbox/confine.h"
#include "sandbox/learn.h"
#include "sandbox/audit.h"
#include "sandbox/quota.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MIB          ((size_t)1 << 20)

/* Exit codes of children besides 0 (success) and small check numbers. */
#define EXIT_CONFINE_FAILED 100 /* sandlet_confine_apply() failed; its message is on stderr */
#define EXIT_NO_LANDLOCK    77  /* the kernel has no Landlock: the parent skips */
#define EXIT_SURVIVED       99  /* a forbidden call returned */

/* ---- helpers ---------------------------------------------------------- */

typedef struct outcome {
    int status;
    char out[8192]; /* the child's stdout */
    char err[8192]; /* the child's stderr */
} outcome;

typedef int (*child_fn)(void *arg);

static pid_t parent_pid;
static char tmpdir[64]; /* ro/ (in.txt), rw/, out/ (out.txt) */
static char ro_dir[128], rw_dir[128], out_dir[128], in_file[160], out_file[160];

static bool confinement_unavailable(void)
{
    if (RUNNING_ON_VALGRIND || SANITIZED || getenv("SANDLET_TEST_NO_CONFINE")) {
        print_message("[  SKIP    ] confined children cannot run under valgrind or a sanitizer "
                      "(or SANDLET_TEST_NO_CONFINE is set)\n");
        return true;
    }
    return false;
}

#define SKIP_WITHOUT_CONFINEMENT()                                                                 \
    do {                                                                                           \
        if (confinement_unavailable())                                                             \
            skip();                                                                                \
    } while (0)

static sandlet_confine plain(void)
{
    sandlet_confine c;
    memset(&c, 0, sizeof(c));
    c.sandbox = "test";
    c.uid = (uid_t)-1;
    c.gid = (gid_t)-1;
    return c;
}

/* In the child: confines or exits with EXIT_CONFINE_FAILED. Returns whether Landlock is on. */
static bool confine(const sandlet_confine *c)
{
    char err[512];
    bool landlock = false;
    int rc = sandlet_confine_apply(c, &landlock, err, sizeof(err));
    if (rc < 0) {
        dprintf(STDERR_FILENO, "confine: %s (%d)\n", err, rc);
        _exit(EXIT_CONFINE_FAILED);
    }
    return landlock;
}

static void drain(int fd, char *buf, size_t cap, size_t *len, bool *open_)
{
    char scratch[512];
    ssize_t n = read(fd, scratch, sizeof(scratch));
    if (n <= 0) {
        *open_ = false;
        return;
    }
    size_t k = (size_t)n < cap - 1 - *len ? (size_t)n : cap - 1 - *len;
    memcpy(buf + *len, scratch, k);
    *len += k;
    buf[*len] = '\0';
}

/* Runs fn in a child with stdout and stderr captured; waits for it. */
static void run_child(child_fn fn, void *arg, outcome *o)
{
    int out[2], err[2];
    memset(o, 0, sizeof(*o));
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(err), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(out[0]);
        close(err[0]);
        if (dup2(out[1], STDOUT_FILENO) < 0 || dup2(err[1], STDERR_FILENO) < 0)
            _exit(98);
        close(out[1]);
        close(err[1]);
        int rc = fn(arg);
        fflush(stdout);
        _exit(rc);
    }
    close(out[1]);
    close(err[1]);
    size_t nout = 0, nerr = 0;
    bool out_open = true, err_open = true;
    while (out_open || err_open) {
        struct pollfd p[2] = {{out_open ? out[0] : -1, POLLIN, 0},
                              {err_open ? err[0] : -1, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            assert_int_equal(errno, EINTR);
            continue;
        }
        if (p[0].revents)
            drain(out[0], o->out, sizeof(o->out), &nout, &out_open);
        if (p[1].revents)
            drain(err[0], o->err, sizeof(o->err), &nerr, &err_open);
    }
    close(out[0]);
    close(err[0]);
    while (waitpid(pid, &o->status, 0) < 0)
        assert_int_equal(errno, EINTR);
}

static void show(const outcome *o)
{
    if (WIFEXITED(o->status))
        print_message("child exited with %d\n", WEXITSTATUS(o->status));
    else if (WIFSIGNALED(o->status))
        print_message("child killed by signal %d (%s)\n", WTERMSIG(o->status),
                      strsignal(WTERMSIG(o->status)));
    if (o->err[0])
        print_message("child stderr: %s", o->err);
}

static void expect_exit(const outcome *o, int code)
{
    if (!WIFEXITED(o->status) || WEXITSTATUS(o->status) != code)
        show(o);
    assert_true(WIFEXITED(o->status));
    assert_int_equal(WEXITSTATUS(o->status), code);
}

static void expect_signal(const outcome *o, int sig)
{
    if (!WIFSIGNALED(o->status) || WTERMSIG(o->status) != sig)
        show(o);
    assert_true(WIFSIGNALED(o->status));
    assert_int_equal(WTERMSIG(o->status), sig);
}

/* Dead by SIGSYS, with the reporter's line naming the call and its number. */
static void expect_sigsys(const outcome *o, const char *syscall_name)
{
    expect_signal(o, SIGSYS);
    int nr = seccomp_syscall_resolve_name(syscall_name);
    assert_true(nr >= 0);
    char line[160];
    /* Then what would allow it, or why nothing does. */
    snprintf(line, sizeof(line), "sandletd worker test: seccomp: forbidden system call %s (%d); ",
             syscall_name, nr);
    if (!strstr(o->err, line))
        print_message("expected \"%s\" in: %s\n", line, o->err);
    assert_non_null(strstr(o->err, line));
}

/* Exit status of a child whose Landlock-dependent checks need Landlock. */
static void expect_exit_or_skip(const outcome *o, int code)
{
    if (WIFEXITED(o->status) && WEXITSTATUS(o->status) == EXIT_NO_LANDLOCK) {
        print_message("[  SKIP    ] the kernel has no Landlock (apply reported "
                      "landlock_active=false)\n");
        skip();
    }
    expect_exit(o, code);
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* 0 when path holds text, else -errno of the open or -EIO. */
static int read_check(const char *path, const char *text)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char buf[64] = {0};
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n >= 0 && strcmp(buf, text) == 0 ? 0 : -EIO;
}

/* ---- the allowlist itself ----------------------------------------------- */

static void test_allowlist_resolves_and_is_sorted(void **state)
{
    (void)state;
    const char *prev = NULL;
    unsigned prev_group = 0, group;
    size_t n = 0;
    for (const char *name; (name = sandlet_confine_allowlist(n, &group)); n++) {
        int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name);
        if (nr < 0)
            print_message("%s does not resolve on this architecture\n", name);
        assert_true(nr >= 0);
        assert_string_equal(sandlet_confine_syscall_name(nr), name);
        /* Groups in order (base, files, database), names sorted and unique within. */
        assert_true(group == 0 || group == SANDLET_SC_FILES || group == SANDLET_SC_DATABASE);
        if (prev && group == prev_group) {
            if (strcmp(prev, name) >= 0)
                print_message("allowlist out of order: %s before %s\n", prev, name);
            assert_true(strcmp(prev, name) < 0);
        } else if (prev) {
            assert_true(group > prev_group);
        }
        prev = name;
        prev_group = group;
    }
    assert_true(n > 30);
    assert_null(sandlet_confine_allowlist(n, NULL));
}

static void test_syscall_name(void **state)
{
    (void)state;
    assert_string_equal(sandlet_confine_syscall_name(SYS_openat), "openat");
    assert_string_equal(sandlet_confine_syscall_name(SYS_execve), "execve");
    assert_string_equal(sandlet_confine_syscall_name(-1), "unknown");
    assert_string_equal(sandlet_confine_syscall_name(100000), "unknown");
}

/* ---- what a confined worker may still do -------------------------------- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static volatile sig_atomic_t signals;

static void on_signal(int sig)
{
    (void)sig;
    signals++;
}

static int child_allowed_basics(void *arg)
{
    (void)arg;
    int fds[2];
    if (pipe(fds) < 0)
        return 1;
    sandlet_confine c = plain();
    confine(&c);
    /* A pipe opened before confinement, both ends. */
    char buf[4];
    if (write(fds[1], "abc", 3) != 3 || read(fds[0], buf, 3) != 3 || memcmp(buf, "abc", 3) != 0)
        return 2;
    /* Lots of memory, grown and given back. */
    char *p = malloc(64 * MIB);
    if (!p)
        return 3;
    memset(p, 1, 64 * MIB);
    char *q = realloc(p, 128 * MIB);
    if (!q)
        return 4;
    memset(q + 64 * MIB, 2, 64 * MIB);
    free(q);
    /* Clocks and time functions. */
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) < 0 || clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 5;
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !localtime(&now) || !gmtime_r(&now, &tm))
        return 6;
    char when[64];
    if (!strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S %Z", localtime(&now)))
        return 6;
    /* Randomness, sleeping. */
    unsigned char rnd[32];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return 7;
    struct timespec ms = {0, 1000000};
    if (nanosleep(&ms, NULL) < 0)
        return 8;
    /* Formatting, sorting (qsort asks sysinfo), limits, identity. */
    char text[128];
    snprintf(text, sizeof(text), "%.3f %s %s", 3.14159, strerror(EINVAL), when);
    int *v = malloc(200000 * sizeof(*v));
    if (!v)
        return 9;
    for (int i = 0; i < 200000; i++)
        v[i] = 200000 - i;
    qsort(v, 200000, sizeof(*v), cmp_int);
    if (v[0] != 1)
        return 9;
    free(v);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || getpid() <= 0 || getuid() != geteuid())
        return 10;
    /* Descriptor flags, signal handlers other than SIGSYS, raise(). */
    int fl = fcntl(fds[0], F_GETFL);
    if (fl < 0 || fcntl(fds[0], F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fds[0], F_SETFD, 0) < 0)
        return 11;
    if (signal(SIGUSR1, on_signal) == SIG_ERR || signal(SIGRTMAX, on_signal) == SIG_ERR ||
        signal(SIGHUP, SIG_IGN) == SIG_ERR)
        return 12;
    if (raise(SIGUSR1) != 0 || raise(SIGRTMAX) != 0 || signals != 2)
        return 13;
    return 0;
}

static void test_allowed_basics(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_allowed_basics, NULL, &o);
    expect_exit(&o, 0);
    assert_string_equal(o.err, "");
}

static int child_printf(void *arg)
{
    if (arg) {
        /* stdout a character device: stdio asks isatty() (ioctl TCGETS). */
        int fd = open("/dev/null", O_WRONLY);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0)
            return 1;
        close(fd);
    }
    sandlet_confine c = plain();
    confine(&c);
    if (printf("hello %d %s\n", 42, "world") < 0 || fflush(stdout) != 0)
        return 2;
    puts("bye");
    exit(0); /* flushes stdout through exit handlers */
}

static void test_printf_to_pipe(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_printf, NULL, &o);
    expect_exit(&o, 0);
    assert_string_equal(o.out, "hello 42 world\nbye\n");
}

static void test_printf_to_dev_null(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_printf, "devnull", &o);
    expect_exit(&o, 0);
}

/* ---- what /proc says about a confined worker --------------------------- */

static int child_wait(void *arg)
{
    int *fds = arg; /* [0]: read "go" from the parent; [1]: write "ready" to the parent */
    sandlet_confine c = plain();
    confine(&c);
    char b = 'r';
    if (write(fds[1], &b, 1) != 1 || read(fds[0], &b, 1) != 1)
        return 1;
    return 0;
}

static void expect_status_line(const char *status, const char *line)
{
    if (!strstr(status, line))
        print_message("\"%s\" not in:\n%s\n", line, status);
    assert_non_null(strstr(status, line));
}

static void test_proc_status(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    int go[2], ready[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(ready), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fds[2] = {go[0], ready[1]};
        _exit(child_wait(fds));
    }
    close(go[0]);
    close(ready[1]);
    char b;
    ssize_t n = read(ready[0], &b, 1);
    char path[64], status[4096] = {0};
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY);
    ssize_t len = fd >= 0 ? read(fd, status, sizeof(status) - 1) : -1;
    if (fd >= 0)
        close(fd);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    close(ready[0]);
    int wstatus;
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_int_equal(n, 1);
    assert_true(len > 0);
    expect_status_line(status, "NoNewPrivs:\t1\n");
    expect_status_line(status, "Seccomp:\t2\n");
    expect_status_line(status, "CapInh:\t0000000000000000\n");
    expect_status_line(status, "CapPrm:\t0000000000000000\n");
    expect_status_line(status, "CapEff:\t0000000000000000\n");
    expect_status_line(status, "CapAmb:\t0000000000000000\n");
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
}

/* ---- forbidden system calls --------------------------------------------- */

typedef struct forbidden {
    const char *syscall; /* the name the reporter must print */
    unsigned groups;     /* groups enabled: a forbidden call stays forbidden */
    void (*act)(void);
} forbidden;

static void do_execve(void)
{
    execl("/bin/sh", "sh", "-c", "exit 0", (char *)NULL);
}

static void do_fork(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
}

static void do_vfork(void)
{
    syscall(SYS_vfork);
}

static void do_clone3(void)
{
    syscall(SYS_clone3, NULL, 0);
}

static void do_socket(void)
{
    socket(AF_INET, SOCK_STREAM, 0);
}

static void do_socket_netlink(void)
{
    socket(AF_NETLINK, SOCK_RAW, 0);
}

static void do_ptrace(void)
{
    ptrace(PTRACE_TRACEME, 0, NULL, NULL);
}

static void do_kill_parent(void)
{
    kill(parent_pid, SIGTERM);
}

static void do_tgkill_parent(void)
{
    syscall(SYS_tgkill, parent_pid, parent_pid, SIGTERM);
}

static void do_setuid(void)
{
    if (setuid(0) < 0)
        _exit(EXIT_SURVIVED);
}

static void do_open_shadow(void)
{
    open("/etc/shadow", O_RDONLY);
}

/* The base set has no openat at all: creating a named file is the files
 * group's, and a file with no name (once the upload spool's way) is no
 * longer anyone's (issue 29: the supervisor makes spool files). */
static void do_open_creat(void)
{
    openat(AT_FDCWD, "/tmp/sandlet-confine-creat", O_RDWR | O_CREAT | O_EXCL, 0600);
}

static void do_open_tmpfile(void)
{
    openat(AT_FDCWD, "/tmp", O_TMPFILE | O_RDWR, 0600);
}

static void do_stat_path(void)
{
    struct stat st;
    stat("/etc/shadow", &st);
}

static void do_mmap_wx(void)
{
    mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static void do_mprotect_wx(void)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        _exit(1);
    mprotect(p, 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
}

static void do_mprotect_exec(void)
{
    /* W then X: writable, then executable without being writable. */
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        _exit(1);
    p[0] = (char)0xc3;
    mprotect(p, 4096, PROT_READ | PROT_EXEC);
}

static void do_mmap_exec(void)
{
    mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static void do_pkey_mprotect(void)
{
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        _exit(1);
    syscall(SYS_pkey_mprotect, p, 4096, PROT_READ | PROT_EXEC, -1);
}

/* A shared page, the kind that can be seen through two mappings. */
static char *shared_page(void)
{
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        _exit(1);
    return p;
}

static void do_mremap_alias(void)
{
    /* Old size 0: a second mapping of the same shared page. */
    mremap(shared_page(), 0, 4096, MREMAP_MAYMOVE);
}

static void do_mremap_dontunmap(void)
{
    mremap(shared_page(), 4096, 4096, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
}

static void do_mremap_fixed(void)
{
    char *p = shared_page(), *q = shared_page();
    mremap(p, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, q);
}

static void do_socket_udp(void)
{
    socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

static void do_socket_raw(void)
{
    socket(AF_INET6, SOCK_RAW, IPPROTO_TCP);
}

static void do_socket_sctp(void)
{
    socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP);
}

static void do_sendto_fastopen(void)
{
    /* TCP Fast Open connects from sendto(), without connect(). */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        _exit(1);
    sendto(fd, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&a, sizeof(a));
}

static void do_sigsys_handler(void)
{
    signal(SIGSYS, SIG_IGN);
}

static void do_setrlimit(void)
{
    struct rlimit rl = {8, 8};
    setrlimit(RLIMIT_NOFILE, &rl);
}

static void do_fcntl_dup(void)
{
    fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 10);
}

static void do_getppid(void)
{
    getppid();
}

static const forbidden forbidden_cases[] = {
    {"execve", 0, do_execve},
    {"clone", 0, do_fork},
    {"vfork", 0, do_vfork},
    {"clone3", 0, do_clone3},
    {"socket", 0, do_socket},
    {"socket", SANDLET_SC_DATABASE, do_socket_netlink},
    {"ptrace", SANDLET_SC_ALL, do_ptrace},
    {"kill", SANDLET_SC_ALL, do_kill_parent},
    {"tgkill", SANDLET_SC_ALL, do_tgkill_parent},
    {"setuid", SANDLET_SC_ALL, do_setuid},
    {"openat", 0, do_open_shadow},
    {"openat", 0, do_open_creat},
    {"openat", 0, do_open_tmpfile},
    {"newfstatat", 0, do_stat_path},
    {"mmap", SANDLET_SC_ALL, do_mmap_wx},
    {"mprotect", SANDLET_SC_ALL, do_mprotect_wx},
    {"mprotect", SANDLET_SC_ALL, do_mprotect_exec},
    {"mmap", SANDLET_SC_ALL, do_mmap_exec},
    {"pkey_mprotect", SANDLET_SC_ALL, do_pkey_mprotect},
    {"mremap", SANDLET_SC_ALL, do_mremap_alias},
    {"mremap", SANDLET_SC_ALL, do_mremap_dontunmap},
    {"mremap", SANDLET_SC_ALL, do_mremap_fixed},
    {"socket", SANDLET_SC_DATABASE, do_socket_udp},
    {"socket", SANDLET_SC_DATABASE, do_socket_raw},
    {"socket", SANDLET_SC_DATABASE, do_socket_sctp},
    {"sendto", SANDLET_SC_DATABASE, do_sendto_fastopen},
    {"rt_sigaction", SANDLET_SC_ALL, do_sigsys_handler},
    {"prlimit64", SANDLET_SC_ALL, do_setrlimit},
    {"fcntl", SANDLET_SC_ALL, do_fcntl_dup},
    {"getppid", 0, do_getppid},
};

static int child_forbidden(void *arg)
{
    const forbidden *f = arg;
    sandlet_confine c = plain();
    c.groups = f->groups;
    confine(&c);
    f->act();
    return EXIT_SURVIVED;
}

static void test_forbidden(void **state)
{
    const forbidden *f = *state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_forbidden, (void *)f, &o);
    expect_sigsys(&o, f->syscall);
}

static void *thread_main(void *arg)
{
    return arg;
}

static int child_thread(void *arg)
{
    (void)arg;
    sandlet_confine c = plain();
    confine(&c);
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) == 0)
        pthread_join(t, NULL);
    return EXIT_SURVIVED;
}

/* glibc blocks every signal around clone3, so the kernel kills with SIGSYS
 * without running the reporter: the worker dies all the same, unnamed. */
static void test_thread_create(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_thread, NULL, &o);
    expect_signal(&o, SIGSYS);
}

/* ---- abort() and glibc's fatal errors ----------------------------------- */

static int child_abort(void *arg)
{
    (void)arg;
    sandlet_confine c = plain();
    confine(&c);
    abort();
}

static void test_abort_is_sigabrt(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_abort, NULL, &o);
    expect_signal(&o, SIGABRT);
    assert_null(strstr(o.err, "seccomp"));
}

static int child_double_free(void *arg)
{
    (void)arg;
    sandlet_confine c = plain();
    confine(&c);
    char *volatile p = malloc(32);
    free(p);
    free(p);
    return EXIT_SURVIVED;
}

static void test_double_free_is_sigabrt(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_double_free, NULL, &o);
    expect_signal(&o, SIGABRT);
    assert_non_null(strstr(o.err, "double free"));
    assert_null(strstr(o.err, "seccomp"));
}

/* ---- Landlock (files group) --------------------------------------------- */

static int child_landlock_dirs(void *arg)
{
    (void)arg;
    const char *ro[] = {ro_dir}, *rw[] = {rw_dir};
    sandlet_confine c = plain();
    c.groups = SANDLET_SC_FILES;
    c.read_paths = ro;
    c.nread = 1;
    c.write_paths = rw;
    c.nwrite = 1;
    if (!confine(&c))
        return EXIT_NO_LANDLOCK;
    char path[200];
    if (read_check(in_file, "inside") != 0)
        return 1; /* inside read_paths: readable */
    if (read_check(out_file, "outside") != -EACCES)
        return 2; /* outside: refused */
    if (open(in_file, O_WRONLY) >= 0 || errno != EACCES)
        return 3; /* read paths are read-only */
    snprintf(path, sizeof(path), "%s/new.txt", ro_dir);
    if (open(path, O_WRONLY | O_CREAT, 0644) >= 0 || errno != EACCES)
        return 4;
    snprintf(path, sizeof(path), "%s/new.txt", out_dir);
    if (open(path, O_WRONLY | O_CREAT, 0644) >= 0 || errno != EACCES)
        return 5; /* writing outside write_paths: refused */
    snprintf(path, sizeof(path), "%s/new.txt", rw_dir);
    if (write_file(path, "written") != 0 || read_check(path, "written") != 0)
        return 6; /* inside write_paths: create, write, read back */
    char path2[200];
    snprintf(path2, sizeof(path2), "%s/renamed.txt", rw_dir);
    if (rename(path, path2) < 0 || unlink(path2) < 0)
        return 7;
    snprintf(path, sizeof(path), "%s/sub", rw_dir);
    if (mkdir(path, 0755) < 0 || rmdir(path) < 0)
        return 8;
    if (open("/etc/passwd", O_RDONLY) >= 0 || errno != EACCES)
        return 9; /* everything else is denied */
    if (open("/", O_RDONLY | O_DIRECTORY) >= 0 || errno != EACCES)
        return 10;
    return 0;
}

static void test_landlock_dirs(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_landlock_dirs, NULL, &o);
    expect_exit_or_skip(&o, 0);
}

static int child_landlock_file(void *arg)
{
    (void)arg;
    const char *ro[] = {out_file}; /* a file, not a directory */
    sandlet_confine c = plain();
    c.groups = SANDLET_SC_FILES;
    c.read_paths = ro;
    c.nread = 1;
    if (!confine(&c))
        return EXIT_NO_LANDLOCK;
    if (read_check(out_file, "outside") != 0)
        return 1;
    if (read_check(in_file, "inside") != -EACCES)
        return 2;
    if (open(out_file, O_WRONLY) >= 0 || errno != EACCES)
        return 3;
    return 0;
}

static void test_landlock_file(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_landlock_file, NULL, &o);
    expect_exit_or_skip(&o, 0);
}

/* No paths at all: what was open (and mapped) before keeps working. */
static int child_landlock_empty(void *arg)
{
    (void)arg;
    int fd = open(in_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    sandlet_confine c = plain();
    c.groups = SANDLET_SC_FILES;
    if (!confine(&c))
        return EXIT_NO_LANDLOCK;
    char buf[16] = {0};
    if (pread(fd, buf, 6, 0) != 6 || strcmp(buf, "inside") != 0)
        return 2;
    const char *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED || memcmp(m, "inside", 6) != 0)
        return 3;
    if (read_check(in_file, "inside") != -EACCES)
        return 4;
    return 0;
}

static void test_landlock_empty(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_landlock_empty, NULL, &o);
    expect_exit_or_skip(&o, 0);
}

static int child_missing_path(void *arg)
{
    (void)arg;
    const char *ro[] = {"/nonexistent/sandlet"};
    sandlet_confine c = plain();
    c.read_paths = ro;
    c.nread = 1;
    char err[512];
    int rc = sandlet_confine_apply(&c, NULL, err, sizeof(err));
    dprintf(STDERR_FILENO, "%s\n", err);
    return rc == -ENOENT ? 0 : 1;
}

static void test_missing_path(void **state)
{
    (void)state;
    outcome o;
    run_child(child_missing_path, NULL, &o);
    expect_exit(&o, 0);
    assert_non_null(strstr(o.err, "sandbox 'test': landlock read path '/nonexistent/sandlet': "
                                  "No such file or directory"));
}

/* ---- database group ------------------------------------------------------ */

typedef struct db_case {
    struct sockaddr_in allowed, other; /* listeners: the database port, another */
    char abstract[32];                 /* an abstract unix listener of the parent */
} db_case;

static long landlock_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1u /* VERSION */);
    return abi < 0 ? 0 : abi;
}

static int child_database(void *arg)
{
    const db_case *dc = arg;
    const struct sockaddr_in *addr = &dc->allowed;
    const uint16_t ports[] = {ntohs(addr->sin_port)};
    sandlet_confine c = plain();
    c.groups = SANDLET_SC_DATABASE;
    c.connect_ports = ports;
    c.nports = 1;
    c.unix_sockets = true;     /* as for a database on a unix socket (AF_UNIX below) */
    long abi = landlock_abi(); /* asked before the filter refuses the question */
    confine(&c);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 1;
    if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0)
        return 2;
    if (send(fd, "ping", 4, 0) != 4)
        return 3;
    struct pollfd p = {fd, POLLIN, 0};
    char buf[8];
    if (poll(&p, 1, 5000) != 1 || recv(fd, buf, 4, 0) != 4 || memcmp(buf, "pong", 4) != 0)
        return 4;
    close(fd);
    int u = socket(AF_UNIX, SOCK_STREAM, 0), v6 = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (u < 0 || (v6 < 0 && errno != EAFNOSUPPORT))
        return 5;
    /* Another TCP port: Landlock refuses (ABI 4). */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (abi >= 4 &&
        (fd < 0 || connect(fd, (const struct sockaddr *)&dc->other, sizeof(dc->other)) == 0 ||
         errno != EACCES))
        return 6;
    /* Another process's abstract unix socket: scoped away (ABI 6). */
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    memcpy(un.sun_path + 1, dc->abstract, strlen(dc->abstract));
    socklen_t unlen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(dc->abstract));
    if (abi >= 6 && (connect(u, (struct sockaddr *)&un, unlen) == 0 || errno != EPERM))
        return 7;
    return 0;
}

static void test_database(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(lfd >= 0);
    static db_case dc;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    assert_int_equal(bind(lfd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(lfd, 4), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&addr, &len), 0);
    dc.allowed = addr;
    int ofd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in other = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    len = sizeof(other);
    assert_int_equal(bind(ofd, (struct sockaddr *)&other, sizeof(other)), 0);
    assert_int_equal(listen(ofd, 4), 0);
    assert_int_equal(getsockname(ofd, (struct sockaddr *)&other, &len), 0);
    dc.other = other;
    snprintf(dc.abstract, sizeof(dc.abstract), "sandlet-confine-%d", (int)getpid());
    int afd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    memcpy(un.sun_path + 1, dc.abstract, strlen(dc.abstract));
    assert_int_equal(
        bind(afd, (struct sockaddr *)&un,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(dc.abstract))),
        0);
    assert_int_equal(listen(afd, 4), 0);
    /* The child must not wait for us while we wait for it: answer from a
     * second child. */
    fflush(NULL);
    pid_t server = fork();
    assert_true(server >= 0);
    if (server == 0) {
        int c = accept(lfd, NULL, NULL);
        char buf[4];
        if (c < 0 || recv(c, buf, 4, MSG_WAITALL) != 4 || memcmp(buf, "ping", 4) != 0)
            _exit(1);
        _exit(send(c, "pong", 4, 0) == 4 ? 0 : 2);
    }
    outcome o;
    run_child(child_database, &dc, &o);
    if (!(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0))
        kill(server, SIGKILL); /* it would wait for a client forever */
    int st;
    assert_int_equal(waitpid(server, &st, 0), server);
    close(lfd);
    close(ofd);
    close(afd);
    expect_exit(&o, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- learning mode --------------------------------------------------------- */

static int child_learn(void *arg)
{
    sandlet_confine c = plain();
    c.learn = true;
    confine(&c);
    if (getppid() != parent_pid)
        return 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 2;
    close(fd);
    /* The filter lets kill() through in learning mode; Landlock's signal
     * scope (ABI 6) still refuses it for processes outside the worker. */
    if (*(const long *)arg >= 6 && (kill(parent_pid, 0) == 0 || errno != EPERM))
        return 3;
    return 0;
}

static void test_learn_allows(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    long abi = landlock_abi();
    run_child(child_learn, &abi, &o);
    expect_exit(&o, 0);
    assert_null(strstr(o.err, "forbidden"));
}

/* ---- resource limits -------------------------------------------------------- */

static int child_rlimits(void *arg)
{
    (void)arg;
    sandlet_confine c = plain();
    c.memory = 256 * MIB;
    c.open_files = 32;
    c.cpu_seconds = 60;
    confine(&c);
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) < 0 || rl.rlim_cur != 256 * MIB || rl.rlim_max != 256 * MIB)
        return 1;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur != 32 || rl.rlim_max != 32)
        return 2;
    if (getrlimit(RLIMIT_CPU, &rl) < 0 || rl.rlim_cur != 60 || rl.rlim_max != 61)
        return 3;
    if (getrlimit(RLIMIT_CORE, &rl) < 0 || rl.rlim_cur != 0 || rl.rlim_max != 0)
        return 4;
    if (getrlimit(RLIMIT_NPROC, &rl) < 0 || rl.rlim_cur != 0 || rl.rlim_max != 0)
        return 5;
    void *volatile big = malloc(512 * MIB);
    if (big)
        return 6; /* beyond RLIMIT_AS */
    void *volatile small = malloc(16 * MIB);
    if (!small)
        return 7;
    free(small);
    return 0;
}

static void test_rlimits(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_rlimits, NULL, &o);
    expect_exit(&o, 0);
}

/* RLIMIT_NOFILE bites: descriptors run out at the limit. */
static int child_nofile(void *arg)
{
    (void)arg;
    const char *ro[] = {in_file};
    sandlet_confine c = plain();
    c.open_files = 16;
    c.groups = SANDLET_SC_FILES;
    c.read_paths = ro;
    c.nread = 1;
    confine(&c);
    int last = -1;
    for (int i = 0; i < 64; i++) {
        int fd = open(in_file, O_RDONLY);
        if (fd < 0)
            return errno == EMFILE && last < 16 ? 0 : 1;
        last = fd;
    }
    return 2;
}

static void test_rlimit_nofile(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_nofile, NULL, &o);
    expect_exit(&o, 0);
}

/* RLIMIT_FSIZE: a write past it fails with EFBIG; SIGXFSZ does not kill. */
static int child_fsize(void *arg)
{
    (void)arg;
    const char *rw[] = {rw_dir};
    sandlet_confine c = plain();
    c.file_size = 4096;
    c.groups = SANDLET_SC_FILES;
    c.write_paths = rw;
    c.nwrite = 1;
    confine(&c);
    char path[200], block[3000];
    memset(block, 'f', sizeof(block));
    snprintf(path, sizeof(path), "%s/big", rw_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return 1;
    size_t done = 0;
    for (int i = 0; i < 3; i++) {
        ssize_t n = write(fd, block, sizeof(block));
        if (n < 0) {
            if (errno != EFBIG)
                return 2;
            break;
        }
        done += (size_t)n;
    }
    close(fd);
    unlink(path);
    return done == 4096 ? 0 : 3;
}

static void test_rlimit_fsize(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_fsize, NULL, &o);
    expect_exit(&o, 0);
}

/* Over its write quota: the writable directory is read-only. */
static int child_write_blocked(void *arg)
{
    (void)arg;
    const char *rw[] = {rw_dir};
    char path[200];
    snprintf(path, sizeof(path), "%s/kept.txt", rw_dir);
    if (write_file(path, "kept") != 0)
        return 1;
    sandlet_confine c = plain();
    c.groups = SANDLET_SC_FILES;
    c.write_paths = rw;
    c.nwrite = 1;
    c.write_blocked = true;
    if (!confine(&c))
        return EXIT_NO_LANDLOCK;
    int rc = 0;
    if (read_check(path, "kept") != 0)
        rc = 2; /* still readable */
    else if (open(path, O_WRONLY) >= 0 || errno != EACCES)
        rc = 3;
    else if (unlink(path) == 0 || errno != EACCES)
        rc = 4;
    snprintf(path, sizeof(path), "%s/new.txt", rw_dir);
    if (rc == 0 && (open(path, O_WRONLY | O_CREAT, 0644) >= 0 || errno != EACCES))
        rc = 5;
    return rc;
}

static void test_write_blocked(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_write_blocked, NULL, &o);
    char path[200];
    snprintf(path, sizeof(path), "%s/kept.txt", rw_dir);
    unlink(path);
    expect_exit_or_skip(&o, 0);
}

/* Memory that is already writable and executable (an executable stack,
 * a JIT) would outlive the filter: confinement refuses to start. */
static int child_wx_before(void *arg)
{
    (void)arg;
    void *p =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 1;
    sandlet_confine c = plain();
    char err[512];
    int rc = sandlet_confine_apply(&c, NULL, err, sizeof(err));
    dprintf(STDERR_FILENO, "%s\n", err);
    return rc == -EPERM ? 0 : 2;
}

static void test_wx_before_confinement(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_wx_before, NULL, &o);
    expect_exit(&o, 0);
    assert_non_null(strstr(o.err, "memory is writable and executable"));
}

static int child_memory_too_small(void *arg)
{
    (void)arg;
    sandlet_confine c = plain();
    c.memory = 1 * MIB;
    char err[512];
    int rc = sandlet_confine_apply(&c, NULL, err, sizeof(err));
    dprintf(STDERR_FILENO, "%s\n", err);
    return rc == -EINVAL ? 0 : 1;
}

static void test_memory_too_small(void **state)
{
    (void)state;
    outcome o;
    run_child(child_memory_too_small, NULL, &o);
    expect_exit(&o, 0);
    assert_non_null(strstr(o.err, "sandbox 'test': memory 1048576 bytes"));
    assert_non_null(strstr(o.err, "raise the sandbox's memory limit"));
}

static void test_bad_groups(void **state)
{
    (void)state;
    sandlet_confine c = plain();
    c.groups = 1u << 7;
    char err[256];
    /* Rejected before anything is applied: safe in the test process itself. */
    assert_int_equal(sandlet_confine_apply(&c, NULL, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "sandbox 'test': system-call groups 0x80"));
}

/* ---- identity --------------------------------------------------------------- */

static void skip_unless_root(void)
{
    if (geteuid() != 0) {
        print_message("[  SKIP    ] not running as root: the user switch cannot be tested\n");
        skip();
    }
}

static int child_drop(void *arg)
{
    (void)arg;
    sandlet_confine c = plain();
    c.uid = 65534;
    c.gid = 65534;
    c.learn = true; /* so that setuid(0) reaches the kernel instead of the filter */
    confine(&c);
    if (getuid() != 65534 || geteuid() != 65534 || getgid() != 65534 || getegid() != 65534)
        return 1;
    if (getgroups(0, NULL) != 0)
        return 2;
    if (setuid(0) == 0 || errno != EPERM)
        return 3;
    if (setgid(0) == 0 || errno != EPERM)
        return 4;
    return 0;
}

static void test_uid_drop(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    skip_unless_root();
    outcome o;
    run_child(child_drop, NULL, &o);
    expect_exit(&o, 0);
}

static int child_uid_without_gid(void *arg)
{
    (void)arg;
    sandlet_confine c = plain();
    c.uid = 65534;
    char err[512];
    int rc = sandlet_confine_apply(&c, NULL, err, sizeof(err));
    dprintf(STDERR_FILENO, "%s\n", err);
    return rc == -EINVAL && getuid() == 0 ? 0 : 1;
}

static void test_uid_without_gid(void **state)
{
    (void)state;
    skip_unless_root();
    outcome o;
    run_child(child_uid_without_gid, NULL, &o);
    expect_exit(&o, 0);
    assert_non_null(strstr(o.err, "sandbox 'test': setuid(65534) without a group"));
}

/* Already running as the sandbox's identity (the supervisor dropped it
 * before exec): nothing to change, and the check passes. */
static int child_already_dropped(void *arg)
{
    (void)arg;
    if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
        setresuid(65534, 65534, 65534) < 0)
        return 1;
    sandlet_confine c = plain();
    c.uid = 65534;
    c.gid = 65534;
    confine(&c);
    return getuid() == 65534 && getgid() == 65534 ? 0 : 2;
}

static void test_identity_already_dropped(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    skip_unless_root();
    outcome o;
    run_child(child_already_dropped, NULL, &o);
    expect_exit(&o, 0);
}

/* Started unprivileged but not as asked: refused, nothing loaded. */
typedef struct identity_case {
    gid_t groups[1];
    int ngroups;
    uid_t as_uid; /* what the child runs as */
    uid_t want;   /* what it asks for */
    const char *message;
} identity_case;

static int child_identity_refused(void *arg)
{
    const identity_case *k = arg;
    if (setgroups((size_t)k->ngroups, k->groups) < 0 || setresgid(65534, 65534, 65534) < 0 ||
        setresuid(k->as_uid, k->as_uid, k->as_uid) < 0)
        return 1;
    sandlet_confine c = plain();
    c.uid = k->want;
    c.gid = 65534;
    char err[512];
    int rc = sandlet_confine_begin(&c, NULL, err, sizeof(err));
    dprintf(STDERR_FILENO, "%s\n", err);
    return rc == -EPERM ? 0 : 2;
}

static void test_identity_refused(void **state)
{
    (void)state;
    skip_unless_root();
    static const identity_case cases[] = {
        /* supplementary groups the worker cannot drop any more */
        {{100}, 1, 65534, 65534, "supplementary groups remain"},
        /* another user than the sandbox's */
        {{0}, 0, 65534, 65533, "the worker runs as another user"},
        /* root, asked for outright */
        {{0}, 0, 65534, 0, "servlet code never runs as root"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        outcome o;
        run_child(child_identity_refused, (void *)&cases[i], &o);
        expect_exit(&o, 0);
        if (!strstr(o.err, cases[i].message))
            print_message("expected \"%s\" in: %s", cases[i].message, o.err);
        assert_non_null(strstr(o.err, cases[i].message));
    }
}

/* ---- threads ------------------------------------------------------------------ */

static int thread_pipe[2];

/* pause() is not in the allowlist; nanosleep() is. */
static void wait_for_thread(void)
{
    for (int i = 0; i < 500; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
}

/* Waits for a byte, then opens path (its argument) and exits the process
 * with 0 when Landlock refused it, 1 when it opened. */
static void *reader_thread(void *arg)
{
    char c;
    if (read(thread_pipe[0], &c, 1) != 1)
        _exit(3);
    int fd = open(arg, O_RDONLY | O_CLOEXEC);
    _exit(fd < 0 && errno == EACCES ? 0 : 1);
}

static void *idle_thread(void *arg)
{
    char c;
    (void)arg;
    while (read(thread_pipe[0], &c, 1) < 0 && errno == EINTR)
        ;
    return NULL;
}

/* A second thread before the first step: Landlock and no_new_privs would
 * bind the calling thread only, so nothing is applied. */
static int child_thread_before(void *arg)
{
    (void)arg;
    if (pipe(thread_pipe) < 0)
        return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, idle_thread, NULL) != 0)
        return 2;
    /* Two, or more under a sanitizer with threads of its own. */
    if (sandlet_confine_threads() < 2)
        return 3;
    sandlet_confine c = plain();
    char err[512];
    int rc = sandlet_confine_begin(&c, NULL, err, sizeof(err));
    dprintf(STDERR_FILENO, "%s\n", err);
    if (rc != -EBUSY || prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 0)
        return 4;
    return 0;
}

static void test_thread_before_refused(void **state)
{
    (void)state;
    outcome o;
    run_child(child_thread_before, NULL, &o);
    expect_exit(&o, 0);
    assert_non_null(strstr(o.err, "sandbox 'test': confining a process of "));
    assert_non_null(strstr(o.err, "Landlock and no_new_privs would bind only the calling thread"));
}

/* A thread started between the steps (in init) is under Landlock from the
 * first step and under the allowlist from the second. */
static int child_thread_between(void *arg)
{
    (void)arg;
    const char *ro[] = {ro_dir};
    sandlet_confine c = plain();
    c.groups = SANDLET_SC_FILES;
    c.read_paths = ro;
    c.nread = 1;
    bool landlock = false;
    char err[512];
    if (pipe(thread_pipe) < 0)
        return 10;
    if (sandlet_confine_begin(&c, &landlock, err, sizeof(err)) < 0) {
        dprintf(STDERR_FILENO, "%s\n", err);
        return EXIT_CONFINE_FAILED;
    }
    if (!landlock)
        return EXIT_NO_LANDLOCK;
    pthread_t t;
    if (pthread_create(&t, NULL, reader_thread, out_file) != 0)
        return 11;
    if (sandlet_confine_finish(&c, err, sizeof(err)) < 0) {
        dprintf(STDERR_FILENO, "%s\n", err);
        return EXIT_CONFINE_FAILED;
    }
    if (write(thread_pipe[1], "r", 1) != 1)
        return 12;
    wait_for_thread(); /* the thread exits the process */
    return 13;
}

static void test_thread_between_fenced(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_thread_between, NULL, &o);
    expect_exit_or_skip(&o, 0);
}

/* The allowlist reaches a thread started between the steps (TSYNC). */
static void *syscall_thread(void *arg)
{
    (void)arg;
    char c;
    if (read(thread_pipe[0], &c, 1) != 1)
        _exit(3);
    syscall(SYS_getppid);
    _exit(EXIT_SURVIVED);
}

static int child_thread_filtered(void *arg)
{
    (void)arg;
    sandlet_confine c = plain();
    char err[512];
    if (pipe(thread_pipe) < 0)
        return 10;
    if (sandlet_confine_begin(&c, NULL, err, sizeof(err)) < 0) {
        dprintf(STDERR_FILENO, "%s\n", err);
        return EXIT_CONFINE_FAILED;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, syscall_thread, NULL) != 0)
        return 11;
    if (sandlet_confine_finish(&c, err, sizeof(err)) < 0) {
        dprintf(STDERR_FILENO, "%s\n", err);
        return EXIT_CONFINE_FAILED;
    }
    if (write(thread_pipe[1], "s", 1) != 1)
        return 12;
    wait_for_thread();
    return 13;
}

static void test_thread_between_filtered(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_thread_filtered, NULL, &o);
    expect_sigsys(&o, "getppid");
}

/* Between the steps (constructors, init): no exec, no new process, no
 * writable and executable memory; a thread may start. */
static int child_between_no_process(void *arg)
{
    (void)arg;
    sandlet_confine c = plain();
    char err[512];
    if (sandlet_confine_begin(&c, NULL, err, sizeof(err)) < 0) {
        dprintf(STDERR_FILENO, "%s\n", err);
        return EXIT_CONFINE_FAILED;
    }
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid >= 0 || errno != EPERM)
        return 1;
    char *argv[] = {"true", NULL};
    char *envp[] = {NULL};
    execve("/bin/true", argv, envp);
    if (errno != EPERM)
        return 2;
    if (pipe(thread_pipe) < 0)
        return 3;
    pthread_t t;
    if (pthread_create(&t, NULL, idle_thread, NULL) != 0)
        return 4;
    close(thread_pipe[1]);
    if (pthread_join(t, NULL) != 0)
        return 5;
    /* Nothing writable and executable at once; executable alone (what
     * dlopen() maps) still works. */
    if (mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) !=
            MAP_FAILED ||
        errno != EPERM)
        return 6;
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 7;
    if (mprotect(p, 4096, PROT_READ | PROT_WRITE | PROT_EXEC) == 0 || errno != EPERM)
        return 8;
    if (mprotect(p, 4096, PROT_READ | PROT_EXEC) < 0)
        return 9;
    return 0;
}

static void test_between_no_process(void **state)
{
    (void)state;
    SKIP_WITHOUT_CONFINEMENT();
    outcome o;
    run_child(child_between_no_process, NULL, &o);
    expect_exit(&o, 0);
}

static void test_finish_needs_begin(void **state)
{
    (void)state;
    sandlet_confine c = plain();
    char err[256];
    /* Refused before anything is applied: safe in the test process itself. */
    assert_int_equal(sandlet_confine_finish(&c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "before sandlet_confine_begin()"));
}

/* ---- write quota: the supervisor's measurement ------------------------------------ */

/* A fresh directory under tmpdir for one quota test. */
static void quota_dir(char *dir, size_t len, const char *name)
{
    snprintf(dir, len, "%s/%s", tmpdir, name);
    assert_int_equal(mkdir(dir, 0755), 0);
}

static void rm_tree(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_quota_counts(void **state)
{
    (void)state;
    char dir[200], path[300];
    quota_dir(dir, sizeof(dir), "q-count");
    char block[8192];
    memset(block, 'q', sizeof(block));
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s/f%d", dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
        assert_int_equal(fsync(fd), 0);
        close(fd);
    }
    snprintf(path, sizeof(path), "%s/sub", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/sub/empty", dir);
    assert_int_equal(write_file(path, ""), 0);
    /* A link to a big tree: counted as one entry, never followed. */
    snprintf(path, sizeof(path), "%s/usr", dir);
    assert_int_equal(symlink("/usr", path), 0);
    const char *dirs[] = {dir};
    sandlet_usage u;
    assert_false(sandlet_quota_measure(dirs, 1, 0, 0, &u));
    assert_int_equal(u.entries, 8); /* 5 files, sub, sub/empty, the link */
    assert_true(u.bytes >= 5 * sizeof(block));
    assert_true(u.bytes < 1024 * 1024);
    assert_false(u.too_deep);
    assert_int_equal(u.error, 0);
    /* Over the byte bound, and over the entry bound. */
    assert_true(sandlet_quota_measure(dirs, 1, 4 * sizeof(block), 0, &u));
    assert_true(sandlet_quota_measure(dirs, 1, 0, 7, &u));
    assert_false(sandlet_quota_measure(dirs, 1, 1024 * 1024, 8, &u));
    rm_tree(dir);
}

/* A bound passed stops the walk: a tree of many files costs one bounded walk. */
static void test_quota_stops_early(void **state)
{
    (void)state;
    char dir[200], path[300];
    quota_dir(dir, sizeof(dir), "q-many");
    for (int i = 0; i < 200; i++) {
        snprintf(path, sizeof(path), "%s/f%d", dir, i);
        assert_int_equal(write_file(path, ""), 0);
    }
    const char *dirs[] = {dir, dir};
    sandlet_usage u;
    assert_true(sandlet_quota_measure(dirs, 2, 0, 10, &u));
    assert_int_equal(u.entries, 11);
    /* Both listed directories count. */
    assert_false(sandlet_quota_measure(dirs, 2, 0, 0, &u));
    assert_int_equal(u.entries, 400);
    rm_tree(dir);
}

/* A chain deeper than the walk follows counts as over, with no recursion. */
static void test_quota_too_deep(void **state)
{
    (void)state;
    char dir[200];
    quota_dir(dir, sizeof(dir), "q-deep");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    for (int i = 0; i < SANDLET_QUOTA_MAX_DEPTH + 5; i++) {
        assert_int_equal(mkdirat(fd, "d", 0755), 0);
        int next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
        close(fd);
        assert_true(next >= 0);
        fd = next;
    }
    close(fd);
    const char *dirs[] = {dir};
    sandlet_usage u;
    assert_true(sandlet_quota_measure(dirs, 1, 0, 0, &u));
    assert_true(u.too_deep);
    /* A missing directory is noted, not fatal. */
    const char *missing[] = {"/nonexistent/sandlet"};
    assert_false(sandlet_quota_measure(missing, 1, 0, 0, &u));
    assert_int_equal(u.error, -ENOENT);
    rm_tree(dir);
}

/* ---- fixtures ------------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    parent_pid = getpid();
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/sandlet-confine.XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(ro_dir, sizeof(ro_dir), "%s/ro", tmpdir);
    snprintf(rw_dir, sizeof(rw_dir), "%s/rw", tmpdir);
    snprintf(out_dir, sizeof(out_dir), "%s/out", tmpdir);
    snprintf(in_file, sizeof(in_file), "%s/in.txt", ro_dir);
    snprintf(out_file, sizeof(out_file), "%s/out.txt", out_dir);
    if (mkdir(ro_dir, 0755) < 0 || mkdir(rw_dir, 0755) < 0 || mkdir(out_dir, 0755) < 0)
        return -1;
    if (write_file(in_file, "inside") < 0 || write_file(out_file, "outside") < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(in_file);
    unlink(out_file);
    rmdir(ro_dir);
    rmdir(rw_dir);
    rmdir(out_dir);
    rmdir(tmpdir);
    return 0;
}

/* Learning mode's report reads seccomp's records from the kernel's log:
 * only a type 1326 record with SECCOMP_RET_LOG counts, and the fields a
 * process controls (comm, exe) cannot forge the pid or the call. */
static void test_learn_parse(void **state)
{
    (void)state;
    static const char good[] =
        "6,1234,5678,-;audit: type=1326 audit(1795789164.890:74): auid=4294967295 uid=0 "
        "gid=0 ses=4294967295 pid=22783 comm=\"s\" exe=\"/tmp/ll/s\" sig=0 arch=c000003e "
        "syscall=257 compat=0 ip=0x7f0a2e4be4f7 code=0x7ffc0000\n SUBSYSTEM=x\n";
    pid_t pid = 0;
    int nr = -1;
    uint32_t arch = 0;
    assert_true(sandlet_learn_parse(good, strlen(good), &pid, &nr, &arch));
    assert_int_equal(pid, 22783);
    assert_int_equal(nr, 257);
    assert_int_equal(arch, 0xc000003e);
    static const char *const bad[] = {
        /* a kill (SECCOMP_RET_KILL_PROCESS), not learning mode */
        "6,1,2,-;audit: type=1326 audit(1:2): pid=5 comm=\"x\" arch=c000003e syscall=59 "
        "code=0x80000000",
        /* another record type */
        "6,1,2,-;audit: type=1400 audit(1:2): pid=5 arch=c000003e syscall=59 code=0x7ffc0000",
        /* no ';' */
        "audit: type=1326 pid=5 arch=c000003e syscall=59 code=0x7ffc0000",
        /* a call number past what is tracked, a negative pid */
        "6,1,2,-;audit: type=1326 pid=5 arch=c000003e syscall=99999 code=0x7ffc0000",
        "6,1,2,-;audit: type=1326 pid=-5 arch=c000003e syscall=59 code=0x7ffc0000",
        /* fields only inside comm (audit quotes it, no space inside) */
        "6,1,2,-;audit: type=1326 comm=\"pid=1\" arch=c000003e syscall=59 code=0x7ffc0000",
        /* a field past the message's line (the record's key=value lines) */
        "6,1,2,-;audit: type=1326 arch=c000003e syscall=59 code=0x7ffc0000\n pid=1\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (sandlet_learn_parse(bad[i], strlen(bad[i]), &pid, &nr, &arch))
            fail_msg("record %zu was taken for learning mode's", i);
    /* The audit netlink group's text of a trap and a kill (no kmsg
     * prefix, no type= field: the message type says 1326); learning's
     * records and garbage are neither. */
    static const char trap[] = "audit(1:2): auid=4294967295 uid=7 pid=7 comm=\"pid=9\" sig=0 "
                               "arch=c000003e syscall=105 compat=0 code=0x30000";
    assert_true(sandlet_audit_parse(trap, strlen(trap), &pid, &nr, &arch));
    assert_int_equal(pid, 7);
    assert_int_equal(nr, 105);
    static const char kill[] = "audit(1:2): pid=5 arch=40000003 syscall=11 code=0x80000000";
    assert_true(sandlet_audit_parse(kill, strlen(kill), &pid, &nr, &arch));
    assert_int_equal(arch, 0x40000003);
    static const char *const not_kills[] = {
        "audit(1:2): pid=5 arch=c000003e syscall=59 code=0x7ffc0000",
        "audit(1:2): pid=5 arch=c000003e syscall=59 code=0x7fff0000",
        "audit(1:2): pid=5 arch=c000003e syscall=59",
        "audit(1:2): comm=\"pid=5\" arch=c000003e syscall=59 code=0x30000",
        "audit(1:2): pid=5 arch=c000003e syscall=59 code=0x1230000000",
    };
    for (size_t i = 0; i < sizeof(not_kills) / sizeof(not_kills[0]); i++)
        if (sandlet_audit_parse(not_kills[i], strlen(not_kills[i]), &pid, &nr, &arch))
            fail_msg("record %zu was taken for a kill", i);
    /* Every prefix of the good record parses or is refused, never read
     * past (run under ASan in CI). */
    for (size_t n = 0; n < strlen(good); n++) {
        char *cut = malloc(n ? n : 1);
        assert_non_null(cut);
        memcpy(cut, good, n);
        (void)sandlet_learn_parse(cut, n, &pid, &nr, &arch);
        free(cut);
    }
}

int main(void)
{
    struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowlist_resolves_and_is_sorted),
        cmocka_unit_test(test_syscall_name),
        cmocka_unit_test(test_bad_groups),
        cmocka_unit_test(test_allowed_basics),
        cmocka_unit_test(test_printf_to_pipe),
        cmocka_unit_test(test_printf_to_dev_null),
        cmocka_unit_test(test_proc_status),
        cmocka_unit_test(test_thread_create),
        cmocka_unit_test(test_abort_is_sigabrt),
        cmocka_unit_test(test_double_free_is_sigabrt),
        cmocka_unit_test(test_landlock_dirs),
        cmocka_unit_test(test_landlock_file),
        cmocka_unit_test(test_landlock_empty),
        cmocka_unit_test(test_missing_path),
        cmocka_unit_test(test_database),
        cmocka_unit_test(test_learn_allows),
        cmocka_unit_test(test_rlimits),
        cmocka_unit_test(test_rlimit_nofile),
        cmocka_unit_test(test_memory_too_small),
        cmocka_unit_test(test_rlimit_fsize),
        cmocka_unit_test(test_write_blocked),
        cmocka_unit_test(test_wx_before_confinement),
        cmocka_unit_test(test_quota_counts),
        cmocka_unit_test(test_quota_stops_early),
        cmocka_unit_test(test_quota_too_deep),
        cmocka_unit_test(test_uid_drop),
        cmocka_unit_test(test_uid_without_gid),
        cmocka_unit_test(test_identity_already_dropped),
        cmocka_unit_test(test_identity_refused),
        cmocka_unit_test(test_thread_before_refused),
        cmocka_unit_test(test_thread_between_fenced),
        cmocka_unit_test(test_thread_between_filtered),
        cmocka_unit_test(test_between_no_process),
        cmocka_unit_test(test_finish_needs_begin),
        cmocka_unit_test(test_learn_parse),
    };
    /* One named test per forbidden call, so a failure says which. */
    static char names[ARRAY_LEN(forbidden_cases)][64];
    struct CMUnitTest all[ARRAY_LEN(tests) + ARRAY_LEN(forbidden_cases)];
    memcpy(all, tests, sizeof(tests));
    for (size_t i = 0; i < ARRAY_LEN(forbidden_cases); i++) {
        const forbidden *f = &forbidden_cases[i];
        snprintf(names[i], sizeof(names[i]), "test_forbidden_%s%s_%zu", f->syscall,
                 f->groups ? "_with_groups" : "", i);
        all[ARRAY_LEN(tests) + i] =
            (struct CMUnitTest){names[i], test_forbidden, NULL, NULL, (void *)f};
    }
    return cmocka_run_group_tests(all, setup, teardown);
}

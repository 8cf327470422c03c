/*
 * crashreport.c - the worker's crash report for C Server Pages: when a
 * page's code crashes the worker (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT, a stack overflow), one line of the error log names the .csp
 * file and line, from the line table the page's compile left beside its
 * shared object (<key>.lines, see pagecache.h).
 *
 * Everything is prepared before confinement and before the first request
 * (the table in memory, the alternate stack, the handlers), so the request
 * path costs one store of a flag.  The handler runs in a process whose
 * memory a page may have broken: it only reads the tables, calls write(2)
 * on standard error (both allowed by the seccomp allowlist, as is the
 * rt_sigreturn that ends it) and formats with its own code; it must never
 * call stdio, malloc or anything else not async-signal-safe, and never
 * keep the worker alive: the handlers are SA_RESETHAND, so the fault
 * recurs with the default action when the handler returns and the worker
 * dies of the same signal (abort() raises again by itself).
 */
#define _GNU_SOURCE
#include "config.h"

#include "sandbox/crashreport.h"

#include "csp/pagecache.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#define ALT_STACK ((size_t)64 * 1024)
/* How far above the stack pointer a crash outside the page (abort(), a
 * libc function given a bad pointer) looks for the return address into
 * the page: the frames of abort() and raise() take well under 1 KiB. */
#define SCAN_WORDS 512

typedef struct crash_page {
    const char *name; /* the request path without its '/' */
    size_t name_len;
    uintptr_t base, lo, hi; /* load bias, executable range [lo, hi) */
    sandlet_page_line *rows;
    size_t nrows;
} crash_page;

volatile sig_atomic_t sandlet_crash_serving;

static crash_page *pages;
static size_t npages;

/* ---- the handler: async-signal-safe only -------------------------------- */

static size_t put(char *b, size_t n, size_t cap, const char *s, size_t len)
{
    for (size_t i = 0; i < len && n < cap; i++)
        b[n++] = s[i];
    return n;
}

static size_t put_num(char *b, size_t n, size_t cap, unsigned long long v, unsigned radix)
{
    char d[24];
    size_t k = 0;
    do {
        d[k++] = "0123456789abcdef"[v % radix];
        v /= radix;
    } while (v && k < sizeof(d));
    while (k && n < cap)
        b[n++] = d[--k];
    return n;
}

static const crash_page *page_at(uintptr_t pc)
{
    for (size_t i = 0; i < npages; i++)
        if (pages[i].hi > pages[i].lo && pc >= pages[i].lo && pc < pages[i].hi)
            return &pages[i];
    return NULL;
}

/* The page's line of code at pc, 0 when the table has none for it. */
static uint32_t line_at(const crash_page *p, uintptr_t pc)
{
    uintptr_t off = pc - p->base;
    size_t lo = 0, hi = p->nrows;
    while (lo < hi) { /* first row past off */
        size_t mid = lo + (hi - lo) / 2;
        if (p->rows[mid].offset <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? p->rows[lo - 1].line : 0;
}

static uintptr_t pc_of(const void *ucv)
{
    const ucontext_t *uc = ucv;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    (void)uc;
    return 0; /* no PC here: the report names the page only */
#endif
}

static uintptr_t sp_of(const void *ucv)
{
    const ucontext_t *uc = ucv;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.sp;
#else
    (void)uc;
    return 0;
#endif
}

static const char *sig_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
    }
}

static void on_crash(int sig, siginfo_t *si, void *ucv)
{
    int saved = errno;
    uintptr_t pc = ucv ? pc_of(ucv) : 0;
    const crash_page *p = pc ? page_at(pc) : NULL;
    uint32_t line = p ? line_at(p, pc) : 0;
    bool called = false;
    if (!p && sandlet_crash_serving > 0 && (size_t)sandlet_crash_serving <= npages) {
        /* Crashed in a function the page called (abort(), strlen(NULL)):
         * the nearest return address into the page on the stack names the
         * line of the call.  The stack below a normal call is mapped; a
         * stack overflow crashes in the page itself and never scans. */
        p = pages[sandlet_crash_serving - 1].name ? &pages[sandlet_crash_serving - 1] : NULL;
        uintptr_t sp = ucv ? sp_of(ucv) : 0;
        for (size_t i = 0; p && sp && i < SCAN_WORDS && !called; i++) {
            uintptr_t ra = ((const volatile uintptr_t *)sp)[i];
            const crash_page *q = page_at(ra);
            if (q && (line = line_at(q, ra - 1)) != 0) {
                p = q;
                called = true;
            }
        }
    }
    if (!p) {
        errno = saved;
        return; /* not a page's crash: the acceptor's log line says enough */
    }
    char b[512];
    /* The acceptor puts the worker, its sandbox and the request before
     * each line a worker writes to standard error. */
    size_t cap = sizeof(b) - 1, n = put(b, 0, cap, "page ", 5);
    n = put(b, n, cap, p->name, p->name_len);
    if (line) {
        n = put(b, n, cap, ":", 1);
        n = put_num(b, n, cap, line, 10);
    }
    n = put(b, n, cap, ": crashed (", 11);
    const char *name = sig_name(sig);
    n = put(b, n, cap, name, strlen(name));
    if (si && (sig == SIGSEGV || sig == SIGBUS)) {
        n = put(b, n, cap, ", address 0x", 12);
        n = put_num(b, n, cap, (uintptr_t)si->si_addr, 16);
    }
    n = put(b, n, cap, ")", 1);
    if (called)
        n = put(b, n, cap, " in a function called from that line", 36);
    else if (!line)
        n = put(b, n, cap, "; no line: the page was compiled without a line table", 53);
    b[n++] = '\n';
    ssize_t w;
    do
        w = write(STDERR_FILENO, b, n);
    while (w < 0 && errno == EINTR);
    errno = saved;
}

/* ---- set up, before confinement ---------------------------------------- */

int sandlet_crash_init(size_t count)
{
    pages = calloc(count ? count : 1, sizeof(*pages));
    if (!pages)
        return -ENOMEM;
    npages = count;
    stack_t ss = {.ss_sp = malloc(ALT_STACK), .ss_size = ALT_STACK, .ss_flags = 0};
    if (!ss.ss_sp)
        return -ENOMEM;
    if (sigaltstack(&ss, NULL) < 0)
        return -errno;
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigaction(sigs[i], &sa, NULL) < 0)
            return -errno;
    return 0;
}

int sandlet_crash_lines_path(const char *so, char *out, size_t cap)
{
    size_t len = strlen(so);
    if (len < 3 || strcmp(so + len - 3, ".so") != 0)
        return -EINVAL;
    if (len - 3 + sizeof(".lines") > cap)
        return -ENAMETOOLONG;
    memcpy(out, so, len - 3);
    memcpy(out + len - 3, ".lines", sizeof(".lines"));
    return 0;
}

typedef struct range_query {
    uintptr_t sym;
    crash_page *p;
} range_query;

/* The executable range and load bias of the object holding q->sym. */
static int find_range(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    range_query *q = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    bool holds = false;
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, e = a + ph->p_memsz;
        holds = holds || (q->sym >= a && q->sym < e);
        if (ph->p_flags & PF_X) {
            lo = a < lo ? a : lo;
            hi = e > hi ? e : hi;
        }
    }
    if (!holds || hi <= lo)
        return 0;
    q->p->base = info->dlpi_addr;
    q->p->lo = lo;
    q->p->hi = hi;
    return 1;
}

/* The table's bytes, at most SANDLET_PAGE_MAX_LINES of them. */
static int read_table(const char *path, char **data, size_t *len)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
        (unsigned long long)sb.st_size > SANDLET_PAGE_MAX_LINES) {
        close(fd);
        return -EINVAL;
    }
    size_t cap = (size_t)sb.st_size + 1, n = 0;
    char *b = malloc(cap);
    int rc = b ? 0 : -ENOMEM;
    while (rc == 0 && n < cap) {
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = -errno;
        else if (r == 0)
            break;
        else
            n += (size_t)r;
    }
    close(fd);
    if (rc == 0 && n == cap)
        rc = -EINVAL; /* it grew while read */
    if (rc < 0) {
        free(b);
        return rc;
    }
    *data = b;
    *len = n;
    return 0;
}

int sandlet_crash_add_page(size_t slot, const char *name, const void *sym, const char *lines_path)
{
    if (slot >= npages || !name)
        return -EINVAL;
    crash_page *p = &pages[slot];
    while (*name == '/')
        name++;
    range_query q = {(uintptr_t)sym, p};
    if (!dl_iterate_phdr(find_range, &q))
        return -ENOENT;
    char *data = NULL;
    size_t len = 0;
    int rc = read_table(lines_path, &data, &len);
    if (rc == 0) {
        rc = sandlet_page_lines_parse(data, len, &p->rows, &p->nrows);
        free(data);
    }
    /* Set last: the handler may read a slot any time. */
    p->name_len = strlen(name);
    p->name = name;
    return rc == -ENOENT ? 0 : rc;
}

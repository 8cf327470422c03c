/*
 * crashreport.h - names the .csp file and line of a page whose code
 * crashes a worker, in one line of the error log.  See crashreport.c.
 */
#ifndef SANDLET_SANDBOX_CRASHREPORT_H
#define SANDLET_SANDBOX_CRASHREPORT_H

#include <signal.h>
#include <stddef.h>

/* The slot (index + 1) of the page whose handler runs now, 0 between
 * requests: a crash in a library the page called names the page. */
extern volatile sig_atomic_t sandlet_crash_serving;

/* Before confinement: room for npages pages, the alternate signal stack
 * (so that a stack overflow is reported too) and the handlers for SIGSEGV,
 * SIGBUS, SIGFPE, SIGILL and SIGABRT.  0, or -errno (the worker runs on
 * without reports). */
int sandlet_crash_init(size_t npages);

/* The line table's path for a page's shared object ("x.so" -> "x.lines")
 * into out.  0, or -ENAMETOOLONG/-EINVAL. */
int sandlet_crash_lines_path(const char *so, char *out, size_t cap);

/* After the page's library is loaded: slot (0 .. npages-1) is the page
 * named name (kept, not copied) whose code holds sym; its line table is
 * read from lines_path (a missing or invalid one: crashes name the page
 * without a line).  0, or -errno. */
int sandlet_crash_add_page(size_t slot, const char *name, const void *sym, const char *lines_path);

#endif /* SANDLET_SANDBOX_CRASHREPORT_H */

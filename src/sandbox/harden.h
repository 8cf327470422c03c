/*
 * harden.h - what the supervisor gives up before it starts any worker.
 */
#ifndef SANDLET_HARDEN_H
#define SANDLET_HARDEN_H

#include <stdint.h>

/* The capabilities the supervisor keeps when started as root, as a mask
 * of 1 << CAP_*: CAP_SETUID and CAP_SETGID (start workers as their
 * sandbox's user, setgroups), CAP_KILL (kill them), CAP_DAC_OVERRIDE and
 * CAP_DAC_READ_SEARCH (reopen logs in root's folders, measure sandboxes'
 * writable folders for their write quotas), CAP_CHOWN (a log file it
 * creates on reopen is handed to the acceptor's user, never left root's
 * where that user controls the folder). */
uint64_t sandlet_harden_caps(void);

/* Drops every other capability (from the bounding set too) when root,
 * sets no_new_privs, and installs the supervisor's system-call filter.
 * The filter is inherited by every worker across exec, and a worker's
 * own allowlist is stacked on it: so it cannot be an allowlist of the
 * supervisor's needs alone (the workers' loader and servlets need more)
 * and is a denylist of kernel interfaces that neither the supervisor nor
 * any worker ever needs (mounts, modules, kexec, ptrace, bpf, keys,
 * namespaces, io_uring, userfaultfd...).  Returns 0 or -errno after
 * logging what failed. */
int sandlet_harden_supervisor(void);

#endif /* SANDLET_HARDEN_H */

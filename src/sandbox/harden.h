/*
 * harden.h - what the supervisor and its spawner give up before either
 * starts anything (harden.c).
 */
#ifndef SANDLET_HARDEN_H
#define SANDLET_HARDEN_H

#include <stdint.h>

/* The capabilities the supervisor keeps when started as root, as a mask
 * of 1 << CAP_*: CAP_KILL (kill workers, which run as other users),
 * CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (reopen logs in root's
 * folders, measure sandboxes' writable folders for their write quotas),
 * CAP_CHOWN (a log file it creates on reopen is handed to the acceptor's
 * user, never left root's where that user controls the folder; page
 * caches), CAP_NET_BIND_SERVICE (a reload binds ports below 1024).  Never
 * CAP_SETUID or CAP_SETGID: only the spawner starts processes. */
uint64_t sandlet_harden_caps(void);

/* The spawner's bounding and permitted sets: the supervisor's and
 * CAP_SETUID/CAP_SETGID; only those and CAP_KILL (its children's death
 * signal) are effective in it.  An upgrade's
 * new daemon, exec'd by the spawner as root under no_new_privs, starts
 * with this set at most. */
uint64_t sandlet_harden_spawner_caps(void);

/* The spawner (spawner.c): drops every other capability (from the
 * bounding set too) when root, sets no_new_privs, and installs the filter
 * its children inherit across exec.  A worker's own allowlist is stacked
 * on it: so it cannot be an allowlist of the spawner's needs alone (the
 * workers' loader and servlets need more) and is a denylist of kernel
 * interfaces that neither the daemon nor any worker ever needs (mounts,
 * modules, kexec, ptrace, bpf, keys, namespaces, io_uring,
 * userfaultfd...).  Returns 0 or -errno after logging what failed. */
int sandlet_harden_spawner(void);

/* The supervisor, once its spawner is forked: drops every capability but
 * sandlet_harden_caps() when root, sets no_new_privs, and installs an
 * allowlist of the calls it makes; any other fails with EPERM (clone3
 * with ENOSYS).  It starts nothing itself, so no child inherits it but the
 * look-up child of a reload.  Returns 0 or -errno after logging what
 * failed. */
int sandlet_harden_supervisor(void);

#endif /* SANDLET_HARDEN_H */

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

/* The capabilities the spawner keeps effective: CAP_SETUID and
 * CAP_SETGID (start children as their users, setgroups) and CAP_KILL
 * (its children's death signal).  Its permitted and bounding sets stay
 * whole: an upgrade's new daemon, exec'd by the spawner as root under
 * no_new_privs, starts with its permitted set, as a daemon started by the
 * service manager does. */
uint64_t sandlet_harden_spawner_caps(void);

/* The spawner (spawner.c): makes every other capability ineffective when
 * root, sets no_new_privs, and installs the filter its children inherit
 * across exec.  A worker's own allowlist is stacked
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

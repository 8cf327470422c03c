/*
 * landlock.h - the kernel's Landlock ABI as sandlet uses it (landlock.c):
 * the rights newer than the installed headers, and the one way both the
 * worker (sandbox/confine.c) and the page compile (csp/build.c) make a
 * ruleset: every right the running kernel can fence is handled, so that
 * whatever a rule does not grant is refused.
 *
 * It must never add a rule or restrict anything itself: which paths and
 * ports each process gets is its caller's decision.
 */
#ifndef SANDLET_COMMON_LANDLOCK_H
#define SANDLET_COMMON_LANDLOCK_H

#include <linux/landlock.h>
#include <stdint.h>

/* Rights newer than the installed headers (the values are the kernel's
 * ABI and never change). */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13) /* ABI 2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#define LL_NET_BIND_TCP               (1ULL << 0)  /* ABI 4: LANDLOCK_ACCESS_NET_BIND_TCP */
#define LL_NET_CONNECT_TCP            (1ULL << 1)  /* ABI 4: LANDLOCK_ACCESS_NET_CONNECT_TCP */
#define LL_RULE_NET_PORT              2            /* ABI 4: LANDLOCK_RULE_NET_PORT */
#define LL_FS_IOCTL_DEV               (1ULL << 15) /* ABI 5: LANDLOCK_ACCESS_FS_IOCTL_DEV */
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)  /* ABI 6 */
#define LL_SCOPE_SIGNAL               (1ULL << 1)  /* ABI 6 */

#define LL_ABI1                                                                                    \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |   \
     LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR |                                 \
     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | \
     LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |   \
     LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM)
/* What a read path grants: open files for reading (which is also what
 * mmap of a library needs), list directories, execute. */
#define LL_READ                                                                                    \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/* The running kernel's Landlock ABI: 1 or more, 0 without Landlock, or
 * -errno. */
long sandlet_landlock_abi(void);

/* A ruleset for abi (>= 1) that handles every filesystem right it knows
 * (into *handled), TCP bind and connect (ABI 4: none unless a rule grants
 * a port), and scopes abstract unix sockets and signals to the process
 * (ABI 6).  The descriptor, or -errno. */
int sandlet_landlock_ruleset(long abi, uint64_t *handled);

#endif /* SANDLET_COMMON_LANDLOCK_H */

/*
 * identity.h - which uid and gid each process of sandletd runs as.
 *
 * Decided from the configuration alone, the same way by the starting
 * process (for the acceptor, and to refuse a bad configuration before
 * anything starts) and by the supervisor (for workers).  Started as root,
 * no servlet ever runs as uid or gid 0 and no sandbox shares the
 * acceptor's uid: a sandbox without "user" gets a uid of its own from the
 * reserved range below, as does the acceptor without "user".  Started as
 * anyone else, everything runs as that user (developers' make check).
 */
#ifndef SANDLET_IDENTITY_H
#define SANDLET_IDENTITY_H

#include "common/conf.h"

#include <stdbool.h>
#include <stdint.h>

/* The range "dynamic-uids" names (conf.h has the default and why): the
 * first uid is the acceptor's, the rest the sandboxes'.  It used to be
 * systemd's DynamicUser= range (61184-65519), where a service of
 * systemd's could get a worker's uid. */
#define SANDLET_DYNAMIC_UID_FIRST SANDLET_DEFAULT_DYNAMIC_UID_FIRST
#define SANDLET_DYNAMIC_UID_LAST  SANDLET_DEFAULT_DYNAMIC_UID_LAST

/* UINT32_MAX in both: keep the identity we were started with. */
typedef struct sandlet_id {
    uint32_t uid, gid;
} sandlet_id;

/* The acceptor's identity.  Returns 0 or -errno after logging why. */
int sandlet_identity_acceptor(const sandlet_conf *conf, sandlet_id *out);
/* Each sandbox's identity into ids[conf->nsandboxes]; acceptor is the
 * result of sandlet_identity_acceptor.  Returns 0 or -errno after logging
 * which line to change. */
int sandlet_identity_sandboxes(const sandlet_conf *conf, const sandlet_id *acceptor,
                               sandlet_id *ids);
/* Both of the above, looked up in a child process that exits after:
 * the user and group databases load their NSS modules (libnss_systemd,
 * with libm and libcap) into the process that asks, for good, and the
 * acceptor and supervisor live as long as the daemon.  With
 * acceptor_known, *acceptor is an input and only the sandboxes are
 * looked up.  Returns 0 or -errno; the child logs why. */
int sandlet_identity_resolve(const sandlet_conf *conf, sandlet_id *acceptor, bool acceptor_known,
                             sandlet_id *ids);
/* The uid a sandbox without "user" gets when started as root, in the
 * default range, and in conf's. */
uint32_t sandlet_identity_dynamic_uid(const char *sandbox);
uint32_t sandlet_identity_dynamic_uid_in(const sandlet_conf *conf, const char *sandbox);
/* conf's dynamic-uids range. */
void sandlet_identity_range(const sandlet_conf *conf, uint32_t *first, uint32_t *last);

/* Writes (out) or reads all of len bytes of a child's report pipe: 0, or
 * -1 at an error or an early end (a child that died midway wrote less).
 * The lookups here and main.c's database check share it. */
int sandlet_pipe_all(int fd, void *buf, size_t len, bool out);

#endif /* SANDLET_IDENTITY_H */

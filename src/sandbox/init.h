/*
 * init.h - the INIT frame a worker reads first: its sandbox's servlets,
 * their parameters, its confinement and its session settings.
 *
 * Only the supervisor encodes it, from its own parsed configuration:
 * what a worker loads and how it is confined is never the acceptor's to
 * say.  The layout is frame.h's INIT; worker.c decodes it.
 */
#ifndef SANDLET_INIT_H
#define SANDLET_INIT_H

#include "common/conf.h"
#include "sandbox/frame.h"

#include <stdbool.h>
#include <stdint.h>

/* The pages a new worker of a sandbox loads: generation gen, slot i
 * serving pages[i] (library "" for an empty slot).  NULL: none. */
typedef struct sandlet_init_pages {
    uint32_t gen;
    sandlet_wire_page *pages;
    size_t npages;
} sandlet_init_pages;

/* Appends sandbox's INIT frame to b.  uid and gid are what the worker
 * already runs as (UINT32_MAX: unchanged), key the sandbox's session key
 * (SANDLET_SESSION_KEY_LEN bytes), pages its compiled pages (or NULL),
 * spool the sandbox's upload spool directory (NULL: none).
 * Returns 0 or -errno (-EMSGSIZE when the frame would exceed
 * SANDLET_FRAME_MAX). */
/* Whether the kernel's records of Landlock's denials reach the
 * supervisor (audit.c): where they do not, a worker of development mode
 * is told to hint at refused file calls itself.  Said once at start. */
void sandlet_init_landlock_records(bool arrive);

int sandlet_init_encode(sandlet_buf *b, const sandlet_conf *conf, size_t sandbox, bool confine,
                        uint32_t uid, uint32_t gid, const uint8_t *key,
                        const sandlet_init_pages *pages, const char *spool);

#endif /* SANDLET_INIT_H */

/*
 * claim.c - the claim word shared by the acceptor and one worker (see
 * claim.h for the protocol and why).  It must never let a value read from
 * the word decide anything but "taken or not".
 */
#include "config.h"

#include "sandbox/claim.h"
#include "sandbox/lane.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A word in memory shared between processes must be lock-free: a lock
 * would live in one process's memory only. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the claim word needs lock-free 64-bit atomics");

#define CLAIM_SIZE 4096
/* The claim page, then the lanes (lane.h) in the same memory. */
#define SHARED_SIZE (CLAIM_SIZE + SANDLET_LANES_BYTES)
/* Inaccessible pages on both sides of the mapping: an over-read of a
 * buffer next to it in the address space faults rather than read the
 * lanes' queued requests (lane.h). */
#define GUARD ((size_t)4096)
_Static_assert(SANDLET_CLAIM_WORDS * sizeof(sandlet_claim) == CLAIM_SIZE,
               "the claim words fill one page");

enum { OFFERED = 1, TAKEN = 2, REVOKED = 3 };

static uint64_t word(uint32_t id, unsigned state)
{
    return (uint64_t)id << 2 | state;
}

int sandlet_claim_create(void)
{
    int fd = memfd_create("sandlet-claim", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    /* Sealed at its size: a worker cannot shrink it under the acceptor's
     * mapping (a SIGBUS in the acceptor), nor grow it. */
    if (ftruncate(fd, SHARED_SIZE) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

int sandlet_claim_map(int fd, sandlet_claim **out)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    /* Sealed, so this size holds: a shorter file (another sandletd
     * binary's) would fault on the first lane access. */
    if (st.st_size != (off_t)SHARED_SIZE)
        return -EPROTO;
    unsigned char *area = mmap(NULL, SHARED_SIZE + 2 * GUARD, PROT_NONE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED)
        return -errno;
    void *p =
        mmap(area + GUARD, SHARED_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    /* Shared with the acceptor: nothing of it belongs in a core. */
    if (p == MAP_FAILED || madvise(p, SHARED_SIZE, MADV_DONTDUMP) < 0) {
        int err = -errno;
        munmap(area, SHARED_SIZE + 2 * GUARD);
        return err;
    }
    *out = p;
    return 0;
}

void sandlet_claim_unmap(sandlet_claim *c)
{
    if (c)
        munmap((unsigned char *)c - GUARD, SHARED_SIZE + 2 * GUARD);
}

void *sandlet_claim_lanes(sandlet_claim *c)
{
    return (unsigned char *)c + CLAIM_SIZE;
}

static sandlet_claim *at(sandlet_claim *c, uint32_t id)
{
    return c + id % SANDLET_CLAIM_WORDS;
}

void sandlet_claim_offer(sandlet_claim *c, uint32_t id)
{
    atomic_store(at(c, id), word(id, OFFERED));
}

bool sandlet_claim_revoke(sandlet_claim *c, uint32_t id)
{
    uint64_t expect = word(id, OFFERED);
    return atomic_compare_exchange_strong(at(c, id), &expect, word(id, REVOKED));
}

bool sandlet_claim_taken(sandlet_claim *c, uint32_t id)
{
    return atomic_load(at(c, id)) == word(id, TAKEN);
}

bool sandlet_claim_take(sandlet_claim *c, uint32_t id)
{
    uint64_t expect = word(id, OFFERED);
    return atomic_compare_exchange_strong(at(c, id), &expect, word(id, TAKEN));
}

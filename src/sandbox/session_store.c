/*
 * session_store.c - memory sessions shared by the workers of one sandbox.
 *
 * Why shared memory: a sandbox has several workers and the acceptor hands
 * a request to whichever is free, so a session kept in one worker's heap
 * would be lost half the time.  Sessions must never live in the acceptor
 * (it holds no servlet data), so the supervisor creates one memfd per
 * sandbox and every worker of that sandbox maps it MAP_SHARED before it
 * confines itself; afterwards only memory accesses, futex (the lock) and
 * getrandom (ids) are needed, all in the base seccomp allowlist.
 *
 * Layout of the mapping: a header (magic, sizes, LRU clock, the slot being
 * written, a process-shared robust mutex), then one fixed-size metadata
 * record per slot, then one fixed-size data area per slot.  Sizes are
 * computed from the mapping's length alone, so a worker never trusts a
 * size it reads back from memory that another process can write.
 *
 * Crash safety: a worker can be killed (timeout, seccomp, crash) while it
 * holds the lock.  The mutex is robust, so the next locker gets EOWNERDEAD
 * instead of waiting forever; the header names the slot that was being
 * written, and repair() frees that slot (its data may be half-written) and
 * any record whose fields are out of range.  One session may be lost; the
 * store stays usable.  This file must never call servlet code or log while
 * holding the lock.
 */
#include "config.h"

#include "sandbox/session_store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STORE_MAGIC    UINT32_C(0x534c5331) /* "SLS1" */
#define ALIGN_UP(n, a) (((n) + (a)-1) / (a) * (a))
#define NO_SLOT        (-1)

typedef struct store_header {
    uint32_t magic;
    uint32_t nslots;
    uint32_t data_cap;
    int32_t dirty; /* slot being written, or NO_SLOT */
    uint64_t tick; /* LRU clock: bumped on every use */
    pthread_mutex_t lock;
} store_header;

typedef struct slot_meta {
    uint8_t id[SANDLET_SESSION_ID_LEN];
    uint64_t used_tick; /* larger: used more recently */
    int64_t used_sec;   /* clock seconds of the last use, for idle expiry */
    uint32_t len;       /* bytes of data in the slot */
    uint32_t busy;      /* 1: the slot holds a session */
} slot_meta;

struct sandlet_session_store {
    uint8_t *base;
    size_t size;
    store_header *hdr;
    slot_meta *meta;
    uint8_t *data;
    uint32_t nslots; /* from the mapping's size, not from the header */
    unsigned timeout;
    int64_t (*now)(void); /* replaceable by the unit tests */
};

#define HEADER_SIZE ALIGN_UP(sizeof(store_header), (size_t)64)

static size_t data_offset(size_t nslots)
{
    return ALIGN_UP(HEADER_SIZE + nslots * sizeof(slot_meta), (size_t)4096);
}

/* The most slots a mapping of size bytes holds; 0 when too small. */
static size_t slots_for(size_t size)
{
    if (size < HEADER_SIZE)
        return 0;
    size_t n = (size - HEADER_SIZE) / (sizeof(slot_meta) + SANDLET_SESSION_SLOT_DATA);
    while (n > 0 && data_offset(n) + n * (size_t)SANDLET_SESSION_SLOT_DATA > size)
        n--;
    return n > UINT32_MAX ? UINT32_MAX : n;
}

/* Seconds on a clock that all processes share and that counts suspend,
 * so that idle expiry means wall time idle. */
static int64_t clock_seconds(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_BOOTTIME, &ts) < 0 && clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec;
}

static int random_bytes(uint8_t *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(buf + got, len - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        got += (size_t)n;
    }
    return 0;
}

static int random_id(uint8_t *id)
{
    return random_bytes(id, SANDLET_SESSION_ID_LEN);
}

int sandlet_session_key_make(const uint8_t *secret, const char *sandbox, uint8_t *key)
{
    static const char context[] = "sandlet session key v1";
    if (!secret)
        return random_bytes(key, SANDLET_SESSION_KEY_LEN);
    /* A PRF of the name under the secret: keys of two sandboxes are
     * unrelated, and one sandbox's key tells nothing of the secret. */
    crypto_generichash_state st;
    if (crypto_generichash_init(&st, secret, SANDLET_SESSION_SECRET_LEN, SANDLET_SESSION_KEY_LEN) !=
        0)
        return -EINVAL;
    crypto_generichash_update(&st, (const uint8_t *)context, sizeof(context));
    crypto_generichash_update(&st, (const uint8_t *)sandbox, strlen(sandbox) + 1);
    crypto_generichash_final(&st, key, SANDLET_SESSION_KEY_LEN);
    sodium_memzero(&st, sizeof(st));
    return 0;
}

/* Compares ids without stopping at the first difference, so that timing
 * tells a guesser nothing about how many leading bytes were right. */
static bool id_equal(const uint8_t *a, const uint8_t *b)
{
    unsigned diff = 0;
    for (size_t i = 0; i < SANDLET_SESSION_ID_LEN; i++)
        diff |= (unsigned)(a[i] ^ b[i]);
    return diff == 0;
}

static void slot_free(sandlet_session_store *st, uint32_t i)
{
    memset(&st->meta[i], 0, sizeof(st->meta[i]));
}

/* Makes the store's invariants hold again after a locker died: the slot it
 * was writing is dropped, and so is any record with impossible fields. */
static void repair(sandlet_session_store *st)
{
    int32_t d = __atomic_load_n(&st->hdr->dirty, __ATOMIC_SEQ_CST);
    if (d >= 0 && (uint32_t)d < st->nslots)
        slot_free(st, (uint32_t)d);
    for (uint32_t i = 0; i < st->nslots; i++)
        if (st->meta[i].busy > 1 || st->meta[i].len > SANDLET_SESSION_SLOT_DATA)
            slot_free(st, i);
    __atomic_store_n(&st->hdr->dirty, NO_SLOT, __ATOMIC_SEQ_CST);
}

static int store_lock(sandlet_session_store *st)
{
    int rc = pthread_mutex_lock(&st->hdr->lock);
    if (rc == EOWNERDEAD) {
        repair(st);
        rc = pthread_mutex_consistent(&st->hdr->lock);
        if (rc != 0) {
            pthread_mutex_unlock(&st->hdr->lock);
            return -rc;
        }
        return 0;
    }
    return -rc;
}

static void store_unlock(sandlet_session_store *st)
{
    pthread_mutex_unlock(&st->hdr->lock);
}

/* Marks slot i as being written: if we die before end_write, the next
 * locker drops it rather than serve half-written data.  Sequentially
 * consistent stores keep the compiler and CPU from moving the mark past
 * the writes it guards. */
static void begin_write(sandlet_session_store *st, uint32_t i)
{
    __atomic_store_n(&st->hdr->dirty, (int32_t)i, __ATOMIC_SEQ_CST);
}

static void end_write(sandlet_session_store *st)
{
    __atomic_store_n(&st->hdr->dirty, NO_SLOT, __ATOMIC_SEQ_CST);
}

static bool expired(const sandlet_session_store *st, const slot_meta *m, int64_t now)
{
    return st->timeout > 0 && now - m->used_sec > (int64_t)st->timeout;
}

static void mark_used(sandlet_session_store *st, uint32_t i, int64_t now)
{
    st->meta[i].used_tick = ++st->hdr->tick;
    st->meta[i].used_sec = now;
}

/* The live slot holding id, or -1.  An expired session found on the way is
 * freed: idle expiry needs no sweeper process. */
static long find(sandlet_session_store *st, const uint8_t *id, int64_t now)
{
    for (uint32_t i = 0; i < st->nslots; i++) {
        slot_meta *m = &st->meta[i];
        if (m->busy != 1 || !id_equal(m->id, id))
            continue;
        if (expired(st, m, now) || m->len > SANDLET_SESSION_SLOT_DATA) {
            slot_free(st, i);
            return -1;
        }
        return (long)i;
    }
    return -1;
}

/* A slot for a new session: a free one, else an expired one, else the
 * least recently used (evicted). */
static uint32_t pick_slot(sandlet_session_store *st, int64_t now)
{
    uint32_t lru = 0;
    long stale = -1;
    for (uint32_t i = 0; i < st->nslots; i++) {
        const slot_meta *m = &st->meta[i];
        if (m->busy != 1)
            return i;
        if (stale < 0 && expired(st, m, now))
            stale = (long)i;
        if (m->used_tick < st->meta[lru].used_tick)
            lru = i;
    }
    return stale >= 0 ? (uint32_t)stale : lru;
}

/* ---- the vtable ------------------------------------------------------- */

static int mem_create(void *store, uint8_t *id)
{
    sandlet_session_store *st = store;
    int rc = random_id(id);
    if (rc < 0)
        return rc;
    if ((rc = store_lock(st)) < 0)
        return rc;
    int64_t now = st->now();
    /* A collision of 128 random bits will not happen, but costs one scan
     * to rule out. */
    while (find(st, id, now) >= 0) {
        store_unlock(st);
        if ((rc = random_id(id)) < 0)
            return rc;
        if ((rc = store_lock(st)) < 0)
            return rc;
    }
    uint32_t i = pick_slot(st, now);
    begin_write(st, i);
    slot_meta *m = &st->meta[i];
    memcpy(m->id, id, SANDLET_SESSION_ID_LEN);
    m->len = 0;
    m->busy = 1;
    mark_used(st, i, now);
    end_write(st);
    store_unlock(st);
    return 0;
}

static int mem_get(void *store, const uint8_t *id, void *buf, size_t cap, size_t *len)
{
    sandlet_session_store *st = store;
    int rc = store_lock(st);
    if (rc < 0)
        return rc;
    int64_t now = st->now();
    long i = find(st, id, now);
    if (i < 0) {
        rc = -ENOENT;
    } else if (st->meta[i].len > cap) {
        rc = -EMSGSIZE;
    } else {
        *len = st->meta[i].len;
        memcpy(buf, st->data + (size_t)i * SANDLET_SESSION_SLOT_DATA, *len);
        mark_used(st, (uint32_t)i, now);
    }
    store_unlock(st);
    return rc;
}

static int mem_put(void *store, const uint8_t *id, const void *data, size_t len)
{
    sandlet_session_store *st = store;
    if (len > SANDLET_SESSION_SLOT_DATA)
        return -EMSGSIZE;
    int rc = store_lock(st);
    if (rc < 0)
        return rc;
    int64_t now = st->now();
    long i = find(st, id, now);
    if (i < 0) {
        rc = -ENOENT;
    } else {
        begin_write(st, (uint32_t)i);
        memcpy(st->data + (size_t)i * SANDLET_SESSION_SLOT_DATA, data, len);
        st->meta[i].len = (uint32_t)len;
        mark_used(st, (uint32_t)i, now);
        end_write(st);
    }
    store_unlock(st);
    return rc;
}

static int mem_touch(void *store, const uint8_t *id)
{
    sandlet_session_store *st = store;
    int rc = store_lock(st);
    if (rc < 0)
        return rc;
    int64_t now = st->now();
    long i = find(st, id, now);
    if (i < 0)
        rc = -ENOENT;
    else
        mark_used(st, (uint32_t)i, now);
    store_unlock(st);
    return rc;
}

static int mem_remove(void *store, const uint8_t *id)
{
    sandlet_session_store *st = store;
    int rc = store_lock(st);
    if (rc < 0)
        return rc;
    long i = find(st, id, st->now());
    if (i < 0) {
        rc = -ENOENT;
    } else {
        begin_write(st, (uint32_t)i);
        slot_free(st, (uint32_t)i);
        end_write(st);
    }
    store_unlock(st);
    return rc;
}

static int mem_new_id(void *store, const uint8_t *old, uint8_t *fresh)
{
    sandlet_session_store *st = store;
    int rc = random_id(fresh);
    if (rc < 0)
        return rc;
    if ((rc = store_lock(st)) < 0)
        return rc;
    int64_t now = st->now();
    long i = find(st, old, now);
    if (i < 0 || find(st, fresh, now) >= 0) {
        rc = i < 0 ? -ENOENT : -EAGAIN;
    } else {
        begin_write(st, (uint32_t)i);
        memcpy(st->meta[i].id, fresh, SANDLET_SESSION_ID_LEN);
        mark_used(st, (uint32_t)i, now);
        end_write(st);
    }
    store_unlock(st);
    return rc;
}

const sandlet_session_ops sandlet_session_memory_ops = {
    .create = mem_create,
    .get = mem_get,
    .put = mem_put,
    .touch = mem_touch,
    .remove = mem_remove,
    .new_id = mem_new_id,
};

/* ---- creation and mapping ---------------------------------------------- */

int sandlet_session_store_create(const char *sandbox, size_t size)
{
    size_t nslots = slots_for(size);
    if (nslots == 0 || size > SANDLET_SESSION_STORE_MAX)
        return -EINVAL;
    char name[64];
    snprintf(name, sizeof(name), "sandlet-sessions-%.40s", sandbox);
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (ftruncate(fd, (off_t)size) < 0) {
        rc = -errno;
        goto fail;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        rc = -errno;
        goto fail;
    }
    /* A fresh memfd reads as zeros: every slot is already free. */
    store_header *h = p;
    pthread_mutexattr_t attr;
    rc = -pthread_mutexattr_init(&attr);
    if (rc == 0)
        rc = -pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = -pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = -pthread_mutex_init(&h->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    h->nslots = (uint32_t)nslots;
    h->data_cap = SANDLET_SESSION_SLOT_DATA;
    h->dirty = NO_SLOT;
    h->magic = STORE_MAGIC;
    munmap(p, size);
    if (rc < 0)
        goto fail;
    /* Workers must not be able to shrink the file under the others (which
     * would turn their accesses into SIGBUS) or grow it. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        rc = -errno;
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return rc;
}

sandlet_session_store *sandlet_session_store_attach(int fd, unsigned timeout)
{
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return NULL;
    size_t size = (size_t)sb.st_size;
    size_t nslots = slots_for(size);
    if (sb.st_size <= 0 || nslots == 0 || size > SANDLET_SESSION_STORE_MAX) {
        errno = EINVAL;
        return NULL;
    }
    sandlet_session_store *st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        free(st);
        return NULL;
    }
    st->base = p;
    st->size = size;
    st->hdr = p;
    st->meta = (slot_meta *)(st->base + HEADER_SIZE);
    st->data = st->base + data_offset(nslots);
    st->nslots = (uint32_t)nslots;
    st->timeout = timeout;
    st->now = clock_seconds;
    if (st->hdr->magic != STORE_MAGIC || st->hdr->nslots != nslots ||
        st->hdr->data_cap != SANDLET_SESSION_SLOT_DATA) {
        sandlet_session_store_detach(st);
        errno = EPROTO;
        return NULL;
    }
    return st;
}

void sandlet_session_store_detach(sandlet_session_store *st)
{
    if (!st)
        return;
    munmap(st->base, st->size);
    free(st);
}

size_t sandlet_session_store_slots(const sandlet_session_store *st)
{
    return st->nslots;
}

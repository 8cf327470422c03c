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
 * Who can write the mapping: every worker of the sandbox, so every servlet
 * of it, buggy or hostile.  The sandbox's servlets are one trust domain
 * for sessions; the store must make sure that the worst one of them can
 * do is lose or garble that sandbox's sessions, never crash or hang a
 * worker, and never reach anything outside the mapping.  Hence:
 *  - the lock is one futex word holding the holder's pid, no pointers (a
 *    robust pthread mutex keeps glibc's robust-list pointers and a
 *    thread id in the mapping: a forged owner hung every worker, a
 *    forged list made a peer's unlock write where the forger chose);
 *  - a worker never takes the lock from its holder, however long it is
 *    held: a holder that is merely stalled (preempted, CPU-throttled,
 *    paging, stopped by a debugger) wakes and goes on writing, and with
 *    the lock taken over its memcpy would land in a slot that meanwhile
 *    holds another client's session.  No operation waits longer than
 *    WAIT_MAX_MS in all: a session call then fails, the worker goes on
 *    serving;
 *  - only the supervisor, which knows which pids are live workers of the
 *    sandbox, clears a held lock (sandlet_session_store_release): when
 *    the holder has exited, or the word names no live worker (forged);
 *    a live worker that keeps holding it is killed first;
 *  - every field is read once (READ_ONCE) into a local that is checked
 *    before use, and indexes and sizes come from the mapping's length,
 *    never from the mapping: a value another process flips between two
 *    reads cannot pass a check and then be used unchecked;
 *  - a header that is not ours (magic, slot count, slot size) makes every
 *    operation fail with EIO; the supervisor, which checks the header
 *    before each spawn and every STORE_CHECK period, rebuilds it empty.
 * A hostile worker can thus deny or lose its own sandbox's sessions, never
 * hand one client's session data to another client.
 *
 * Layout of the mapping: a header (magic, sizes, LRU clock, the slot being
 * written, the lock word), then one fixed-size metadata record per slot,
 * then one fixed-size data area per slot.
 *
 * Crash safety: a worker can be killed while it holds the lock.  The
 * supervisor reaps it and releases the lock it held; the header names the
 * slot that was being written, and repair() frees that slot (its data may
 * be half-written) and any record whose fields are out of range.  One
 * session may be lost; the store stays usable.  This file must never call
 * servlet code or log while holding the lock.
 */
#include "config.h"

#include "sandbox/session_store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <linux/futex.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define STORE_MAGIC    UINT32_C(0x534c5332) /* "SLS2": the futex-word layout */
#define ALIGN_UP(n, a) (((n) + (a)-1) / (a) * (a))
#define NO_SLOT        (-1)

/* No operation waits longer for the lock, whatever the word shows: a
 * holder that is dead, stuck or lying only makes its own sandbox's
 * session calls fail (the request is still answered) until the
 * supervisor releases the lock.  No operation holds the lock for more
 * than microseconds (a scan of the slots' metadata and one memcpy of at
 * most a slot). */
#define WAIT_MAX_MS 250
/* Sleeps on the word are this short, so that a sleeper re-checks the
 * word even when nobody wakes it (its waker may be the dead one). */
#define WAIT_SLICE_MS 10
/* Tries before sleeping: a holder keeps the lock for microseconds. */
#define SPINS 100
/* Set in the lock word by a waiter about to sleep: the unlocker wakes. */
#define CONTENDED UINT32_C(0x80000000)

/* One read of a shared field: the compiler may neither repeat it nor
 * merge it with another, so a value checked is the value used. */
#define READ_ONCE(x)     (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

typedef struct store_header {
    uint32_t magic;
    uint32_t nslots;
    uint32_t data_cap;
    int32_t dirty;   /* slot being written, or NO_SLOT */
    uint64_t tick;   /* LRU clock: bumped on every use */
    uint32_t lock;   /* futex word: 0 free, else the holder's pid (| CONTENDED) */
    uint32_t unused; /* was the ticket counter; keeps the layout */
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
    bool reported;        /* the header's corruption was logged */
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

/* Milliseconds on a clock every process shares; only differences of it
 * are used, each measured by the process that waits. */
static uint64_t clock_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

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
    for (uint32_t i = 0; i < st->nslots; i++) {
        uint32_t busy = READ_ONCE(st->meta[i].busy);
        uint32_t len = READ_ONCE(st->meta[i].len);
        if (busy > 1 || len > SANDLET_SESSION_SLOT_DATA)
            slot_free(st, i);
    }
    __atomic_store_n(&st->hdr->dirty, NO_SLOT, __ATOMIC_SEQ_CST);
}

/* True when the header is the one the supervisor wrote for a mapping of
 * this size.  Nothing is indexed by these fields; a mismatch means a
 * worker wrote over the header, and the store is not used until the
 * supervisor has rebuilt it. */
static bool header_intact(const sandlet_session_store *st)
{
    const store_header *h = st->hdr;
    return READ_ONCE(h->magic) == STORE_MAGIC && READ_ONCE(h->nslots) == st->nslots &&
           READ_ONCE(h->data_cap) == SANDLET_SESSION_SLOT_DATA;
}

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
    /* Not FUTEX_PRIVATE_FLAG: the word is shared between processes. */
    return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

static bool lock_cas(uint32_t *word, uint32_t *expect, uint32_t want)
{
    return __atomic_compare_exchange_n(word, expect, want, false, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}

/* The lock word's holder: our pid.  A pid fits below CONTENDED
 * (pid_max is at most 2^22), and naming the holder is what lets the
 * supervisor, which knows its live workers, tell a dead holder from a
 * stalled one. */
static pid_t self_pid; /* getpid(), cached: a lock costs no system call */

static void forget_pid(void)
{
    self_pid = 0; /* a forked child is another holder */
}

static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, forget_pid);
}

static uint32_t self_word(void)
{
    pid_t p = self_pid;
    if (p == 0)
        self_pid = p = getpid();
    return (uint32_t)p & ~CONTENDED;
}

/* Takes the lock word as *mine.  Returns 0 or -ETIMEDOUT.  The lock is
 * never taken from its holder, however long it holds it: a holder that
 * is only stalled (preempted, throttled, paging, stopped) would wake and
 * go on writing into slots that meanwhile hold another client's session.
 * A dead or stuck holder is the supervisor's to clear (release). */
static int word_lock(store_header *h, uint32_t *mine)
{
    uint32_t me = self_word();
    *mine = me;
    for (int i = 0; i < SPINS; i++) {
        uint32_t expect = 0;
        if (lock_cas(&h->lock, &expect, me))
            return 0;
        /* Busy-wait first (a holder on another CPU is done in
         * microseconds), then let a holder on this CPU run. */
        if (i >= SPINS / 2)
            sched_yield();
    }
    uint64_t start = clock_ms();
    for (;;) {
        uint32_t cur = __atomic_load_n(&h->lock, __ATOMIC_RELAXED);
        if (cur == 0 && lock_cas(&h->lock, &cur, me))
            return 0;
        if (clock_ms() - start >= WAIT_MAX_MS)
            return -ETIMEDOUT;
        if (cur == 0)
            continue;
        if (!(cur & CONTENDED)) {
            uint32_t expect = cur;
            if (!__atomic_compare_exchange_n(&h->lock, &expect, cur | CONTENDED, false,
                                             __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                continue;
            cur |= CONTENDED;
        }
        struct timespec ts = {0, WAIT_SLICE_MS * 1000000L};
        futex(&h->lock, FUTEX_WAIT, cur, &ts);
    }
}

static void word_unlock(store_header *h, uint32_t mine)
{
    uint32_t cur = __atomic_load_n(&h->lock, __ATOMIC_RELAXED);
    do {
        /* Released by the supervisor (it thought us dead) or forged by
         * a peer: it is no longer ours to release. */
        if ((cur & ~CONTENDED) != mine)
            return;
    } while (
        !__atomic_compare_exchange_n(&h->lock, &cur, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    if (cur & CONTENDED)
        futex(&h->lock, FUTEX_WAKE, INT_MAX, NULL);
}

/* Logs, once per episode and outside the lock, that the header is not
 * ours: the servlet sees EIO, the operator learns why. */
static void report_corrupt(sandlet_session_store *st)
{
    if (st->reported)
        return;
    st->reported = true;
    fprintf(stderr,
            "sandlet: the session store of this sandbox has been written over (its header is "
            "not the supervisor's); session calls fail until the supervisor rebuilds it empty; "
            "one of the sandbox's servlets is buggy or hostile\n");
}

static int store_lock(sandlet_session_store *st, uint32_t *mine)
{
    if (!header_intact(st)) {
        report_corrupt(st);
        return -EIO;
    }
    st->reported = false;
    return word_lock(st->hdr, mine);
}

static void store_unlock(sandlet_session_store *st, uint32_t mine)
{
    word_unlock(st->hdr, mine);
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

static bool expired(const sandlet_session_store *st, int64_t used_sec, int64_t now)
{
    return st->timeout > 0 && now - used_sec > (int64_t)st->timeout;
}

static void mark_used(sandlet_session_store *st, uint32_t i, int64_t now)
{
    uint64_t tick = READ_ONCE(st->hdr->tick) + 1;
    WRITE_ONCE(st->hdr->tick, tick);
    WRITE_ONCE(st->meta[i].used_tick, tick);
    WRITE_ONCE(st->meta[i].used_sec, now);
}

/* The live slot holding id, or -1, with its length (read once, checked)
 * in *len.  An expired or impossible session found on the way is freed:
 * idle expiry needs no sweeper process. */
static long find(sandlet_session_store *st, const uint8_t *id, int64_t now, uint32_t *len)
{
    for (uint32_t i = 0; i < st->nslots; i++) {
        slot_meta *m = &st->meta[i];
        if (READ_ONCE(m->busy) != 1 || !id_equal(m->id, id))
            continue;
        uint32_t n = READ_ONCE(m->len);
        if (expired(st, READ_ONCE(m->used_sec), now) || n > SANDLET_SESSION_SLOT_DATA) {
            slot_free(st, i);
            return -1;
        }
        if (len)
            *len = n;
        return (long)i;
    }
    return -1;
}

/* A slot for a new session: a free one, else an expired one, else the
 * least recently used (evicted). */
static uint32_t pick_slot(sandlet_session_store *st, int64_t now)
{
    uint32_t lru = 0;
    uint64_t lru_tick = UINT64_MAX;
    long stale = -1;
    for (uint32_t i = 0; i < st->nslots; i++) {
        const slot_meta *m = &st->meta[i];
        if (READ_ONCE(m->busy) != 1)
            return i;
        if (stale < 0 && expired(st, READ_ONCE(m->used_sec), now))
            stale = (long)i;
        uint64_t tick = READ_ONCE(m->used_tick);
        if (tick < lru_tick) {
            lru = i;
            lru_tick = tick;
        }
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
    uint32_t lk;
    if ((rc = store_lock(st, &lk)) < 0)
        return rc;
    int64_t now = st->now();
    /* A collision of 128 random bits will not happen, but costs one scan
     * to rule out. */
    while (find(st, id, now, NULL) >= 0) {
        store_unlock(st, lk);
        if ((rc = random_id(id)) < 0)
            return rc;
        if ((rc = store_lock(st, &lk)) < 0)
            return rc;
    }
    uint32_t i = pick_slot(st, now);
    begin_write(st, i);
    slot_meta *m = &st->meta[i];
    memcpy(m->id, id, SANDLET_SESSION_ID_LEN);
    WRITE_ONCE(m->len, 0);
    WRITE_ONCE(m->busy, 1);
    mark_used(st, i, now);
    end_write(st);
    store_unlock(st, lk);
    return 0;
}

static int mem_get(void *store, const uint8_t *id, void *buf, size_t cap, size_t *len)
{
    sandlet_session_store *st = store;
    uint32_t lk, n = 0;
    int rc = store_lock(st, &lk);
    if (rc < 0)
        return rc;
    int64_t now = st->now();
    long i = find(st, id, now, &n);
    if (i < 0) {
        rc = -ENOENT;
    } else if (n > cap) {
        rc = -EMSGSIZE;
    } else {
        memcpy(buf, st->data + (size_t)i * SANDLET_SESSION_SLOT_DATA, n);
        *len = n;
        mark_used(st, (uint32_t)i, now);
    }
    store_unlock(st, lk);
    return rc;
}

static int mem_put(void *store, const uint8_t *id, const void *data, size_t len)
{
    sandlet_session_store *st = store;
    if (len > SANDLET_SESSION_SLOT_DATA)
        return -EMSGSIZE;
    uint32_t lk;
    int rc = store_lock(st, &lk);
    if (rc < 0)
        return rc;
    int64_t now = st->now();
    long i = find(st, id, now, NULL);
    if (i < 0) {
        rc = -ENOENT;
    } else {
        begin_write(st, (uint32_t)i);
        memcpy(st->data + (size_t)i * SANDLET_SESSION_SLOT_DATA, data, len);
        WRITE_ONCE(st->meta[i].len, (uint32_t)len);
        mark_used(st, (uint32_t)i, now);
        end_write(st);
    }
    store_unlock(st, lk);
    return rc;
}

static int mem_touch(void *store, const uint8_t *id)
{
    sandlet_session_store *st = store;
    uint32_t lk;
    int rc = store_lock(st, &lk);
    if (rc < 0)
        return rc;
    int64_t now = st->now();
    long i = find(st, id, now, NULL);
    if (i < 0)
        rc = -ENOENT;
    else
        mark_used(st, (uint32_t)i, now);
    store_unlock(st, lk);
    return rc;
}

static int mem_remove(void *store, const uint8_t *id)
{
    sandlet_session_store *st = store;
    uint32_t lk;
    int rc = store_lock(st, &lk);
    if (rc < 0)
        return rc;
    long i = find(st, id, st->now(), NULL);
    if (i < 0) {
        rc = -ENOENT;
    } else {
        begin_write(st, (uint32_t)i);
        slot_free(st, (uint32_t)i);
        end_write(st);
    }
    store_unlock(st, lk);
    return rc;
}

static int mem_new_id(void *store, const uint8_t *old, uint8_t *fresh)
{
    sandlet_session_store *st = store;
    int rc = random_id(fresh);
    if (rc < 0)
        return rc;
    uint32_t lk;
    if ((rc = store_lock(st, &lk)) < 0)
        return rc;
    int64_t now = st->now();
    long i = find(st, old, now, NULL);
    if (i < 0 || find(st, fresh, now, NULL) >= 0) {
        rc = i < 0 ? -ENOENT : -EEXIST;
    } else {
        begin_write(st, (uint32_t)i);
        memcpy(st->meta[i].id, fresh, SANDLET_SESSION_ID_LEN);
        mark_used(st, (uint32_t)i, now);
        end_write(st);
    }
    store_unlock(st, lk);
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

/* ---- creation, mapping, rebuilding -------------------------------------- */

/* Writes an empty store's header: every slot free, the lock free.  The
 * magic goes last, so that a worker sees either no store or a whole one. */
static void init_header(store_header *h, uint32_t nslots)
{
    __atomic_store_n(&h->magic, 0, __ATOMIC_SEQ_CST);
    WRITE_ONCE(h->nslots, nslots);
    WRITE_ONCE(h->data_cap, SANDLET_SESSION_SLOT_DATA);
    WRITE_ONCE(h->dirty, NO_SLOT);
    WRITE_ONCE(h->tick, 0);
    WRITE_ONCE(h->unused, 0);
    __atomic_store_n(&h->lock, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&h->magic, STORE_MAGIC, __ATOMIC_SEQ_CST);
}

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
    int rc;
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
    init_header(p, (uint32_t)nslots);
    munmap(p, size);
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
    /* Before the worker confines itself; the cached pid is then right in
     * any child a test or servlet forks. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, watch_forks);
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return NULL;
    size_t size = (size_t)sb.st_size;
    size_t nslots = slots_for(size);
    /* Only what the mapping's length says is checked here: a header that
     * a servlet wrote over must not stop a new worker from starting (its
     * session calls fail until the supervisor rebuilds the store). */
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
    /* Every client's session of the sandbox is in here: a worker's core
     * (core-dumps on) must not carry them into a crash report, a
     * systemd-coredump store or a bug tracker (issue 29).  A servlet could
     * undo it (MADV_DODUMP); it can read the store anyway, and its core
     * is readable only by its own user and root (conf.c refuses two
     * sandboxes that share a user). */
    if (madvise(p, size, MADV_DONTDUMP) < 0) {
        int err = errno;
        munmap(p, size);
        free(st);
        errno = err;
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
    return st;
}

void sandlet_session_store_detach(sandlet_session_store *st)
{
    if (!st)
        return;
    munmap(st->base, st->size);
    free(st);
}

int sandlet_session_store_adopt(sandlet_session_store *into, int fd, size_t *carried)
{
    *carried = 0;
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return -errno;
    if (!S_ISREG(sb.st_mode) || sb.st_size <= 0 || (uint64_t)sb.st_size != into->size)
        return -EINVAL; /* another session-size: another geometry */
    uint8_t *p = mmap(NULL, into->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -errno;
    /* The previous store seen as one of ours: the same size gives the
     * same slot count, and its header must say the same layout. */
    sandlet_session_store old = {.base = p,
                                 .size = into->size,
                                 .hdr = (store_header *)(void *)p,
                                 .meta = (slot_meta *)(void *)(p + HEADER_SIZE),
                                 .data = p + data_offset(into->nslots),
                                 .nslots = into->nslots};
    int rc = header_intact(&old) ? 0 : -EPROTO;
    uint32_t mine = 0;
    if (rc == 0)
        rc = word_lock(old.hdr, &mine);
    if (rc == 0) {
        size_t body = into->size - HEADER_SIZE;
        memcpy(into->base + HEADER_SIZE, p + HEADER_SIZE, body);
        int32_t dirty = __atomic_load_n(&old.hdr->dirty, __ATOMIC_SEQ_CST);
        uint64_t tick = READ_ONCE(old.hdr->tick);
        bool held = (__atomic_load_n(&old.hdr->lock, __ATOMIC_SEQ_CST) & ~CONTENDED) == mine;
        word_unlock(old.hdr, mine);
        if (held) {
            WRITE_ONCE(into->hdr->tick, tick);
            __atomic_store_n(&into->hdr->dirty, dirty, __ATOMIC_SEQ_CST);
            repair(into);
            for (uint32_t i = 0; i < into->nslots; i++)
                *carried += into->meta[i].busy == 1;
        } else {
            /* Released under us: a slot may be half-written. */
            memset(into->base + HEADER_SIZE, 0, body);
            rc = -EBUSY;
        }
    }
    munmap(p, into->size);
    return rc;
}

size_t sandlet_session_store_slots(const sandlet_session_store *st)
{
    return st->nslots;
}

bool sandlet_session_store_intact(const sandlet_session_store *st)
{
    return header_intact(st);
}

void sandlet_session_store_rebuild(sandlet_session_store *st)
{
    /* No magic while the slots are cleared: workers refuse the store
     * rather than see half of it.  The data areas are left as they are:
     * no record points at them, and only this sandbox can read them. */
    __atomic_store_n(&st->hdr->magic, 0, __ATOMIC_SEQ_CST);
    memset(st->meta, 0, (size_t)st->nslots * sizeof(slot_meta));
    init_header(st->hdr, st->nslots);
    /* Sleepers re-check on their own within WAIT_SLICE_MS; this is only
     * sooner. */
    futex(&st->hdr->lock, FUTEX_WAKE, INT_MAX, NULL);
}

pid_t sandlet_session_store_holder(const sandlet_session_store *st)
{
    return (pid_t)(__atomic_load_n(&st->hdr->lock, __ATOMIC_ACQUIRE) & ~CONTENDED);
}

bool sandlet_session_store_release(sandlet_session_store *st, pid_t holder)
{
    if (holder <= 0)
        return false;
    uint32_t want = (uint32_t)holder & ~CONTENDED;
    uint32_t cur = __atomic_load_n(&st->hdr->lock, __ATOMIC_ACQUIRE);
    if (cur == 0 || (cur & ~CONTENDED) != want)
        return false;
    /* Ours while we repair: a worker cannot take a word that is not 0,
     * and the holder is dead (or never was a live worker), so nobody
     * else writes the slots meanwhile but a forger, who garbles only its
     * own sandbox's store. */
    if (header_intact(st))
        repair(st);
    /* A waiter may set CONTENDED meanwhile: retry while the word still
     * names holder. */
    while (!__atomic_compare_exchange_n(&st->hdr->lock, &cur, 0, false, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        if ((cur & ~CONTENDED) != want)
            return false;
    futex(&st->hdr->lock, FUTEX_WAKE, INT_MAX, NULL);
    return true;
}

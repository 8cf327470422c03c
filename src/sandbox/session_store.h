/*
 * session_store.h - the memory session store: one shared mapping per
 * sandbox, created by the supervisor and mapped by every worker of that
 * sandbox, so that a session is found whichever worker serves a request.
 *
 * The store implements libsandlet's session vtable (sandlet_session_ops in
 * lib/servlet.h); a database store can replace it without the servlet API
 * changing.  It must never hold more than one lock or call out to servlet
 * code while locked, and it must never trust lengths read back from the
 * shared mapping without checking them against its own bounds.
 */
#ifndef SANDLET_SESSION_STORE_H
#define SANDLET_SESSION_STORE_H

#include "lib/servlet.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Bytes of session data each slot holds (keys, values and framing). */
#define SANDLET_SESSION_SLOT_DATA 4096u
/* Largest store mapped ("session-size" has the same ceiling). */
#define SANDLET_SESSION_STORE_MAX ((size_t)1024 * 1024 * 1024)
/* The descriptor the supervisor gives a worker its sandbox's store on. */
#define SANDLET_SESSION_FD 4

typedef struct sandlet_session_store sandlet_session_store;

/* Supervisor side: a sealed memfd of size bytes holding an empty store
 * (lock free, every slot free).  Returns the descriptor (close-on-exec)
 * or a negative errno. */
int sandlet_session_store_create(const char *sandbox, size_t size);

/* Maps the store behind fd (MAP_SHARED); its geometry comes from the
 * descriptor's size alone.  A header written over by a worker does not
 * make it fail (session calls fail with EIO until the store is rebuilt),
 * so a new worker always starts.  timeout is the idle expiry in seconds.
 * The descriptor may be closed afterwards.  Returns NULL with errno set
 * on failure. */
sandlet_session_store *sandlet_session_store_attach(int fd, unsigned timeout);
void sandlet_session_store_detach(sandlet_session_store *st);

/* The number of sessions the store can hold. */
size_t sandlet_session_store_slots(const sandlet_session_store *st);

/* Supervisor side, on its own mapping: whether the header is still the
 * one it wrote, and rebuilding the store empty (every session of the
 * sandbox lost) when it is not.  Neither makes a system call but a
 * futex wake, nor trusts anything it reads from the mapping. */
bool sandlet_session_store_intact(const sandlet_session_store *st);
void sandlet_session_store_rebuild(sandlet_session_store *st);

/* Supervisor side: who holds the lock (a pid, as the word says; a
 * worker may have forged it), or 0 when it is free.  Workers never take
 * the lock from a holder, since a stalled one would wake and write into
 * slots reused meanwhile for another client; only the supervisor, which
 * knows its live workers, clears it.  release repairs the store (drops
 * the slot being written and impossible records), frees the lock and
 * wakes the waiters, but only if the word still names holder: call it
 * when holder has exited, or is no live worker of the sandbox.  Returns
 * whether it released. */
pid_t sandlet_session_store_holder(const sandlet_session_store *st);
bool sandlet_session_store_release(sandlet_session_store *st, pid_t holder);

/* Supervisor side, at a start by an upgrade: copies the sessions of the
 * previous daemon's store behind fd (same size, same layout, else
 * -EINVAL or -EPROTO) into into, a store no worker has mapped yet.  The
 * copy is made under the previous store's lock, taken as its workers
 * take it, so that no slot is half-written; if the lock was not ours for
 * the whole copy (the previous supervisor released it), into is emptied
 * and -EBUSY returned.  *carried: the sessions copied.  fd is not
 * closed. */
int sandlet_session_store_adopt(sandlet_session_store *into, int fd, size_t *carried);

/* The session key of one sandbox (SANDLET_SESSION_KEY_LEN bytes): the one
 * place session keys are made.  Without a secret, fresh random bytes from
 * getrandom; with the daemon's secret ("session-secret-file", 32 bytes), a
 * keyed BLAKE2b of the sandbox's name, the same on every start and host.
 * Each sandbox gets its own key, and only that sandbox's workers may be
 * given it: whoever holds a key can mint ids that sandbox accepts.
 * Returns 0 or a negative errno. */
#define SANDLET_SESSION_SECRET_LEN 32
int sandlet_session_key_make(const uint8_t *secret, const char *sandbox, uint8_t *key);

/* The vtable a worker hands to libsandlet with st as its store. */
extern const sandlet_session_ops sandlet_session_memory_ops;

#endif /* SANDLET_SESSION_STORE_H */

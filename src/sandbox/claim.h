/*
 * claim.h - the claim word: one 64-bit word of memory shared by the
 * acceptor and one worker, which decides, exactly once, whether a request
 * copied into the worker's lane (lane.h) is served by that worker or taken
 * back and handed to another.
 *
 * Why: a request the acceptor has written cannot be unwritten.  A worker
 * stopped (SIGSTOP, a debugger, swapped out) between two requests would
 * otherwise hold the next one for as long as it is stopped, while the
 * sandbox's other workers sit idle.  Asking the worker over the socket
 * ("may I?") costs a round trip per request; the word costs one
 * compare-and-swap on each side.
 *
 * The page holds SANDLET_CLAIM_WORDS words; request id uses word
 * id % SANDLET_CLAIM_WORDS.  The acceptor numbers each worker's requests
 * consecutively and never has more than SANDLET_MAX_PIPELINE of them
 * written and unanswered, so two requests in flight never share a word:
 * every request queued in a worker's channel has a word of its own.
 * A word holds (id << 2) | state, where id is the request id of the
 * frames and state is OFFERED (written by the acceptor before the frame),
 * TAKEN (the worker's compare-and-swap from OFFERED) or REVOKED (the
 * acceptor's compare-and-swap from OFFERED).  Only one of the two swaps
 * can succeed, so a request is never served twice.
 *
 * The worker is untrusted and may write anything into its word.  The
 * acceptor only ever compares the word with values it computed itself;
 * it never takes a length, an index or a pointer from it.  A word a
 * worker scribbled on reads as "taken": the request then runs to its
 * answer or its timeout, as a hung servlet does.  This file must never
 * hand out the word's value.
 */
#ifndef SANDLET_CLAIM_H
#define SANDLET_CLAIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The worker's descriptor of its word, from the supervisor (after the
 * channel, 3, and the session store, 4). */
#define SANDLET_CLAIM_FD 5

/* How long a request written to a worker may wait for the worker to take
 * it before the acceptor takes it back for another worker.  An idle
 * worker takes a request in microseconds; 100 ms is far past any
 * scheduling delay of a loaded machine, and short against a client's
 * patience. */
#define SANDLET_CLAIM_MS 100u

typedef _Atomic uint64_t sandlet_claim;

/* Words in the shared page (one page of 64-bit words). */
#define SANDLET_CLAIM_WORDS 512u

/* A new word's memory: a sealed-size memfd of one page, followed by the
 * lanes (lane.h) that share it.  Returns the descriptor (close-on-exec)
 * or -errno. */
int sandlet_claim_create(void);
/* Maps the word and the lanes of fd (shared, read-write, between guard
 * pages).  Returns 0, -EPROTO for a file of another size, or -errno. */
int sandlet_claim_map(int fd, sandlet_claim **out);
/* c is the page's first word; each call below uses request id's word. */
void sandlet_claim_unmap(sandlet_claim *c);
/* The lanes' memory in c's mapping (lane.h). */
void *sandlet_claim_lanes(sandlet_claim *c);

/* Acceptor: request id is about to be written to the worker. */
void sandlet_claim_offer(sandlet_claim *c, uint32_t id);
/* Acceptor: takes request id back.  True when it was not taken (the
 * worker will skip it); false when the worker took it, or wrote anything
 * else into the word. */
bool sandlet_claim_revoke(sandlet_claim *c, uint32_t id);
/* Acceptor: whether the worker has taken request id (and nothing else
 * has been written since). */
bool sandlet_claim_taken(sandlet_claim *c, uint32_t id);

/* Worker: takes request id.  True: serve it.  False: the acceptor took it
 * back; skip its frames and say SKIP. */
bool sandlet_claim_take(sandlet_claim *c, uint32_t id);

#endif

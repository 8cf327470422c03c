/*
 * buf.h - a growable byte buffer with a limit and sticky errors, shared by
 * the acceptor (connection input and output, worker queues), the
 * supervisor and the workers (frames).
 *
 * It lives in src/common because both sides of the socketpair use it;
 * it must never depend on src/loop or src/sandbox.
 */
#ifndef SANDLET_BUF_H
#define SANDLET_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A growable output buffer.  Errors are sticky: after a failed append all
 * further appends do nothing and the error field holds -ENOMEM (or
 * -EMSGSIZE past the limit), so callers check once at the end. */
typedef struct sandlet_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    size_t limit; /* 0: no limit */
    int error;
    bool wipe; /* holds a client's data: growing and freeing clear it */
} sandlet_buf;

void sandlet_buf_init(sandlet_buf *b, size_t limit);
void sandlet_buf_free(sandlet_buf *b);
void sandlet_buf_reset(sandlet_buf *b);
/* The slow path of sandlet_buf_reserve: checks the limit and grows. */
int sandlet_buf_grow(sandlet_buf *b, size_t more);

/* Makes room for more bytes after len: 0, or the (sticky) error.  Inline
 * because the frame codec and the HTTP writer append a few bytes at a
 * time, dozens of times per request: the room is almost always there. */
static inline int sandlet_buf_reserve(sandlet_buf *b, size_t more)
{
    /* len + more cannot overflow once more <= cap - len.  The limit is
     * checked here too: a caller may lower it below the capacity. */
    if (b->error == 0 && more <= b->cap - b->len && (b->limit == 0 || b->len + more <= b->limit))
        return 0;
    return sandlet_buf_grow(b, more);
}

static inline void sandlet_buf_put(sandlet_buf *b, const void *data, size_t len)
{
    if (len == 0 || sandlet_buf_reserve(b, len) < 0)
        return;
    memcpy(b->data + b->len, data, len);
    b->len += len;
}
/* Clears bytes [from, to) of b's memory (to is capped at the capacity),
 * for buffers that held a client's data. */
void sandlet_buf_wipe(sandlet_buf *b, size_t from, size_t to);
/* Gives b's storage back when it is empty and holds more than keep
 * bytes of capacity: a buffer that grew for one large message (a request
 * body) does not keep that memory for the small ones after it. */
void sandlet_buf_shrink(sandlet_buf *b, size_t keep);
/* Drops the first n bytes (consumed input), keeping the rest. */
void sandlet_buf_consume(sandlet_buf *b, size_t n);

#endif /* SANDLET_BUF_H */

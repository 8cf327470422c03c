/*
 * buf.c - the growable byte buffer both sides use (see buf.h).
 *
 * It knows nothing of frames, HTTP or who holds it: the wire items (LE
 * integers, strs) are frame.c's.  It must never grow past its limit,
 * and a buffer marked wipe never hands client bytes back to malloc
 * uncleared.
 */
#include "config.h"

#include "common/buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sandlet_buf_init(sandlet_buf *b, size_t limit)
{
    memset(b, 0, sizeof(*b));
    b->limit = limit;
}

void sandlet_buf_free(sandlet_buf *b)
{
    bool wipe = b->wipe;
    if (wipe && b->data)
        explicit_bzero(b->data, b->cap);
    free(b->data);
    sandlet_buf_init(b, b->limit);
    b->wipe = wipe;
}

void sandlet_buf_wipe(sandlet_buf *b, size_t from, size_t to)
{
    if (to > b->cap)
        to = b->cap;
    if (b->data && from < to)
        explicit_bzero(b->data + from, to - from);
}

void sandlet_buf_reset(sandlet_buf *b)
{
    b->len = 0;
    b->error = 0;
}

int sandlet_buf_grow(sandlet_buf *b, size_t more)
{
    if (b->error)
        return b->error;
    if (more > SIZE_MAX - b->len || (b->limit && b->len + more > b->limit)) {
        b->error = -EMSGSIZE;
        return b->error;
    }
    size_t need = b->len + more;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (b->limit && cap > b->limit)
        cap = b->limit;
    uint8_t *p;
    if (b->wipe) {
        /* realloc would hand the old block back to malloc unwiped. */
        p = malloc(cap);
        if (p && b->data) {
            memcpy(p, b->data, b->len);
            explicit_bzero(b->data, b->cap);
            free(b->data);
        }
    } else {
        p = realloc(b->data, cap);
    }
    if (!p) {
        b->error = -ENOMEM;
        return b->error;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void sandlet_buf_shrink(sandlet_buf *b, size_t keep)
{
    if (b->len == 0 && b->cap > keep)
        sandlet_buf_free(b);
}

void sandlet_buf_consume(sandlet_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

/*
 * arena.c - per-request memory: a bump allocator over a list of chunks,
 * emptied when the response is finished, so that servlets never free.
 *
 * The first chunk survives resets, so an ordinary request allocates no
 * memory from the system at all.  This file must never hand out memory
 * that outlives a reset, and must fail (NULL) rather than exceed a limit.
 * A reset wipes the bytes handed out: the next request is another
 * client's, and neither the kept chunk nor a block malloc hands out again
 * may show it this one's data.
 */
#include "config.h"

#include "lib/servlet.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE ((size_t)16 * 1024)
#define ALIGN      (_Alignof(max_align_t))

struct sandlet_arena_chunk {
    sandlet_arena_chunk *next;
    size_t size; /* usable bytes in data */
    size_t used;
    _Alignas(max_align_t) unsigned char data[];
};

void sandlet_lib_arena_init(sandlet_arena *a, size_t limit)
{
    memset(a, 0, sizeof(*a));
    a->limit = limit;
}

static sandlet_arena_chunk *chunk_new(size_t size)
{
    sandlet_arena_chunk *c = malloc(sizeof(*c) + size);
    if (!c)
        return NULL;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    return c;
}

void *sandlet_lib_arena_alloc(sandlet_arena *a, size_t size)
{
    if (size == 0)
        size = 1;
    if (size > SIZE_MAX - ALIGN)
        return NULL;
    size_t rounded = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (a->limit && (rounded > a->limit || a->used > a->limit - rounded))
        return NULL;
    if (!a->head) {
        if (!a->keep) {
            a->keep = chunk_new(CHUNK_SIZE);
            if (!a->keep)
                return NULL;
        }
        a->keep->used = 0;
        a->head = a->keep;
    }
    sandlet_arena_chunk *c = a->head;
    if (c->size - c->used < rounded) {
        if (rounded > CHUNK_SIZE / 4) {
            /* A large piece gets a chunk of its own, linked behind the
             * current one, so that small pieces keep filling that. */
            sandlet_arena_chunk *big = chunk_new(rounded);
            if (!big)
                return NULL;
            big->used = rounded;
            big->next = c->next;
            c->next = big;
            a->used += rounded;
            return big->data;
        }
        c = chunk_new(CHUNK_SIZE);
        if (!c)
            return NULL;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += rounded;
    a->used += rounded;
    return p;
}

void sandlet_lib_arena_reset(sandlet_arena *a)
{
    sandlet_arena_chunk *c = a->head;
    while (c) {
        sandlet_arena_chunk *next = c->next;
        explicit_bzero(c->data, c->used);
        c->used = 0;
        if (c != a->keep)
            free(c);
        c = next;
    }
    /* A large piece may have been linked behind the kept chunk: that
     * link now points at freed memory and must not survive the reset. */
    if (a->keep)
        a->keep->next = NULL;
    a->head = NULL;
    a->used = 0;
}

void sandlet_lib_arena_free(sandlet_arena *a)
{
    sandlet_lib_arena_reset(a);
    free(a->keep);
    a->keep = NULL;
}

void *sl_alloc(sl_request *rq, size_t size)
{
    return sandlet_lib_arena_alloc(&rq->arena, size);
}

char *sl_strdup(sl_request *rq, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *p = sandlet_lib_arena_alloc(&rq->arena, n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

char *sl_sprintf(sl_request *rq, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *p = sandlet_lib_arena_alloc(&rq->arena, (size_t)n + 1);
    if (!p)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

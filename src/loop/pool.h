/*
 * pool.h - the per-connection state that belongs to the worker pool.
 *
 * A connection embeds one sandlet_pool_link and hands it to the pool
 * (sandlet_conn_pool_link); only the pool's files (pool_private.h) read
 * or write its fields, so the queue and the worker a request sits at are
 * the pool's business alone.  The connection only starts it empty (sandlet_pool_link_reset)
 * and must never look inside.
 */
#ifndef SANDLET_LOOP_POOL_H
#define SANDLET_LOOP_POOL_H

#include <stdint.h>

typedef struct sandlet_conn sandlet_conn;
typedef struct sandlet_pool sandlet_pool;
typedef struct sandlet_worker sandlet_worker;

typedef struct sandlet_pool_link {
    sandlet_pool *pool;     /* set while queued or at a worker */
    sandlet_worker *worker; /* set while at a worker */
    sandlet_conn *qnext;    /* queue link while waiting for a worker */
    uint64_t queued_at;     /* uv_now when queued */
} sandlet_pool_link;

/* Not queued, at no worker: what a connection starts each request with. */
static inline void sandlet_pool_link_reset(sandlet_pool_link *l)
{
    *l = (sandlet_pool_link){0};
}

#endif

/*
 * pages.h - the per-connection state that belongs to the acceptor's page
 * table (pages.c), embedded in the connection like pool.h's link: only
 * pages.c reads or writes it; the connection starts it empty.
 */
#ifndef SANDLET_LOOP_PAGES_H
#define SANDLET_LOOP_PAGES_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sandlet_conn sandlet_conn;
typedef struct sandlet_page sandlet_page;

typedef struct sandlet_page_link {
    sandlet_page *page;  /* the page the request is for, once resolved */
    sandlet_conn *wnext; /* next request waiting for the same page's answer */
    bool waiting;        /* in its page's waiting list */
} sandlet_page_link;

static inline void sandlet_page_link_reset(sandlet_page_link *l)
{
    *l = (sandlet_page_link){0};
}

#endif

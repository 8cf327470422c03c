/*
 * pq.c - loads libpq for the processes that use a database (pq.h says
 * why it is not linked).
 */
#include "config.h"

#include "db/pq.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* libpq's ABI has kept this soname since PostgreSQL 8.2; the build
 * checked its headers, and the package depends on the library. */
#define SANDLET_PQ_SONAME "libpq.so.5"

sandlet_lib_pq_api sandlet_lib_pq;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char load_error[256]; /* why not, when not loaded */

static void load(void)
{
    /* RTLD_LOCAL: only this table uses its symbols; a servlet linked to
     * libpq itself gets this same copy through its own DT_NEEDED. */
    void *h = dlopen(SANDLET_PQ_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(load_error, sizeof(load_error), "cannot load %s (%s); install libpq5",
                 SANDLET_PQ_SONAME, e ? e : "no reason given");
        return;
    }
    sandlet_lib_pq_api api;
    /* POSIX's way to turn dlsym's object pointer into a function pointer
     * without ISO C's objection: copy the bits. */
#define SANDLET_PQ_LOAD(f)                                                                         \
    {                                                                                              \
        void *sym = dlsym(h, #f);                                                                  \
        if (!sym) {                                                                                \
            snprintf(load_error, sizeof(load_error), "%s has no %s: a libpq older than 14",        \
                     SANDLET_PQ_SONAME, #f);                                                       \
            dlclose(h);                                                                            \
            return;                                                                                \
        }                                                                                          \
        memcpy(&api.f, &sym, sizeof(sym));                                                         \
    }
    SANDLET_PQ_FUNCTIONS(SANDLET_PQ_LOAD)
#undef SANDLET_PQ_LOAD
    sandlet_lib_pq = api;
    loaded = true;
}

int sandlet_lib_pq_load(char *err, size_t errlen)
{
    pthread_once(&once, load);
    if (loaded)
        return 0;
    if (err && errlen)
        snprintf(err, errlen, "%s", load_error);
    return -1;
}

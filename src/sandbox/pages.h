/*
 * pages.h - the supervisor's side of C Server Pages (pages.c): which
 * pages each sandbox serves, their compiles, and the answers to the
 * acceptor's PAGE_CHECK messages.
 */
#ifndef SANDLET_SANDBOX_PAGES_H
#define SANDLET_SANDBOX_PAGES_H

#include "common/conf.h"
#include "sandbox/control.h"
#include "sandbox/identity.h"
#include "sandbox/init.h"

#include <stdbool.h>
#include <uv.h>

typedef struct sandlet_pages_env {
    uv_loop_t *loop;
    const sandlet_conf *conf; /* the supervisor's plan */
    const sandlet_id *ids;    /* per sandbox: the identity compiles run as */
    const char *exe;          /* sandletd itself ("/proc/self/fd/N") */
    char *const *env;         /* what a worker's environment holds */
    /* Sends a message to the acceptor (queued, never dropped). */
    void (*tell)(const sandlet_ctl *m, const int *fds, size_t nfd);
    /* Logs a refused acceptor message (rate-limited by the caller). */
    void (*refuse)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
} sandlet_pages_env;

/* Opens the docroot and makes the cache folders of the sandboxes that
 * serve pages, as root, before the supervisor hardens itself.  A cache
 * that cannot be made is logged (naming the folder and the fix), and the
 * pages it would hold then answer 500; it does not stop sandletd. */
int sandlet_pages_start(const sandlet_pages_env *env);
/* A PAGE_CHECK from the acceptor (hostile: checked here). */
void sandlet_pages_check(const sandlet_ctl *m);
/* What a new worker of sandbox loads, for its INIT; NULL: no pages. */
const sandlet_init_pages *sandlet_pages_of(size_t sandbox);
/* A worker of sandbox that started with pages generation gen said READY:
 * its pages load. */
void sandlet_pages_worker_ready(size_t sandbox, uint32_t gen);
/* A worker of sandbox with pages generation gen died before READY.  When
 * that keeps happening to a generation no worker ever started with, the
 * newest page it added is left out (and answers 500 until it changes), so
 * that one page's init cannot keep its sandbox's servlets and other pages
 * down.  True when a page was left out (restart at once). */
bool sandlet_pages_worker_died(size_t sandbox, uint32_t gen);
/* A reload: sandbox's workers must load their code again (servlets and
 * pages), so its code generation grows; new workers' INIT carry it.
 * Returns the new generation, 0 when it cannot (out of memory: logged). */
uint32_t sandlet_pages_new_code(size_t sandbox);
/* Whether page-compiler cc can be run (an absolute path, or a name looked
 * up in SANDLET_COMPILER_PATH); shared with sandletd -t. */
#define SANDLET_COMPILER_PATH "/usr/local/bin:/usr/bin:/bin"
bool sandlet_pages_compiler_installed(const char *cc);
/* Stops every compile (SIGKILL to each one's process group). */
void sandlet_pages_stop(void);
/* True while a compile runs (the supervisor waits for it at shutdown). */
bool sandlet_pages_busy(void);

#endif /* SANDLET_SANDBOX_PAGES_H */

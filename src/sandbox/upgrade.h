/*
 * upgrade.h - a binary upgrade, the supervisor's side (upgrade.c): the
 * listeners the acceptor hands over, the new daemon started from the
 * binary's path with them, and its readiness.
 */
#ifndef SANDLET_UPGRADE_H
#define SANDLET_UPGRADE_H

#include "sandbox/control.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* The environment variables a daemon started by an upgrade reads: the
 * descriptors of the listeners it inherits, space-separated ("3 4"), and
 * the write end of the pipe on which it says "ready" (one byte, 'R'). */
#define SANDLET_ENV_LISTEN_FDS "SANDLET_LISTEN_FDS"
#define SANDLET_ENV_UPGRADE_FD "SANDLET_UPGRADE_FD"
/* The memory session stores handed over: "SANDBOX:FD SANDBOX:FD ..." (the
 * new daemon copies their sessions into its own stores, see
 * sandlet_session_store_adopt). */
#define SANDLET_ENV_STORE_FDS "SANDLET_STORE_FDS"
/* At most this many stores are handed over. */
#define SANDLET_UPGRADE_MAX_STORES 64
/* At most this many listeners are handed over (a listen line each). */
#define SANDLET_UPGRADE_MAX_FDS 64
/* How long the new daemon has to become ready before it is stopped and
 * the old one serves on: less than "sandletd -s upgrade" waits by default
 * (30 s), so that it reports the outcome rather than its own timeout. */
#define SANDLET_UPGRADE_READY_MS 25000
/* How long it then has to stop after SIGTERM before SIGKILL. */
#define SANDLET_UPGRADE_KILL_MS 15000
/* How long the previous acceptor may outlive the hand-over: its drain
 * (SANDLET_SHUTDOWN_MS, 10 s) and a margin.  One still there then is not
 * stopping (hung, or taken over and keeping the listeners it shares with
 * the new daemon): its supervisor kills it. */
#define SANDLET_UPGRADE_OUTLIVE_MS 15000

typedef struct sandlet_upgrade_env {
    uv_loop_t *loop;
    /* To the acceptor (the supervisor's queue). */
    void (*tell)(const sandlet_ctl *m, const int *fds, size_t nfd);
    /* The upgrade's end: handed (the new daemon, pid, is ready) or not,
     * with the error log's sentence. */
    void (*done)(bool handed, long pid, const char *message);
    /* The memory session stores to hand over: at most cap (descriptor,
     * sandbox name), the supervisor's own (not to be closed); returns
     * how many.  NULL: none. */
    size_t (*stores)(int *fds, const char **names, size_t cap);
} sandlet_upgrade_env;

/* The binary to start and its arguments: the path sandletd was started
 * from (not /proc/self/exe, which names the replaced file) and its argv.
 * Set by main.c before the supervisor is forked; the strings must live as
 * long as the process. */
void sandlet_upgrade_set_exec(const char *path, char *const *argv);
/* What sandlet_upgrade_set_exec set, for the spawner (spawner.c), which
 * execs it: false when nothing was. */
bool sandlet_upgrade_exec(const char **path, char *const **argv);
/* HANDOVER: keeps fd (a listening stream socket, checked; else it is
 * closed) for the next upgrade.  Returns 0, or -errno with fd closed
 * (-EBUSY during an upgrade, -E2BIG past SANDLET_UPGRADE_MAX_FDS, -EINVAL
 * not a listener). */
int sandlet_upgrade_handover(int fd);
/* UPGRADE: starts the new daemon with the count listeners handed over.
 * Every outcome ends in env->done (also a refusal, at once) and in an
 * UPGRADED message to the acceptor. */
void sandlet_upgrade_start(const sandlet_upgrade_env *env, uint32_t count);
/* True from UPGRADE until its outcome. */
bool sandlet_upgrade_busy(void);
/* The new daemon's side, before the supervisor is forked: takes the
 * stores SANDLET_STORE_FDS names (close-on-exec from now on) and removes
 * the variable; one that is malformed is ignored, said on the error log. */
void sandlet_upgrade_stores_inherit(void);
/* The inherited store of sandbox, or -1; the caller owns it then. */
int sandlet_upgrade_store_take(const char *sandbox);
/* Closes the inherited stores not taken: the acceptor right after the
 * supervisor's fork (it never holds sessions), the supervisor once the
 * start's boxes are made. */
void sandlet_upgrade_stores_close(void);

/* The supervisor stops: closes every handle.  Returns true when a new
 * daemon was started and did not fail: it owns the state file now. */
bool sandlet_upgrade_stop(void);

#endif /* SANDLET_UPGRADE_H */

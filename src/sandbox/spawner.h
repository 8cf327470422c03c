/*
 * spawner.h - the one process that starts the supervisor's children
 * (spawner.c): workers, page compiles and the new daemon of a binary
 * upgrade, and the supervisor's side of asking it.
 */
#ifndef SANDLET_SPAWNER_H
#define SANDLET_SPAWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

/* What a request may exec: never a path the supervisor names. */
enum sandlet_spawn_file {
    SANDLET_SPAWN_SELF = 1, /* sandletd's own binary, opened at start */
    SANDLET_SPAWN_UPGRADE,  /* the path sandletd was started from (upgrade.c), as root */
};

/* At most this many descriptors are placed in a child (0..n-1): an
 * upgrade's 3 + listeners + pipe + stores is the most. */
#define SANDLET_SPAWN_MAX_FDS 136

typedef struct sandlet_proc sandlet_proc;
typedef void (*sandlet_proc_exit_cb)(sandlet_proc *p, int64_t status, int term_signal);

/* One child the spawner started, as the supervisor sees it until its exit
 * is reported (exit_cb, once) or it is forgotten. */
struct sandlet_proc {
    pid_t pid;
    int pidfd; /* signals go through it: never to a pid reused since */
    void *data;
    sandlet_proc_exit_cb exit_cb;
    sandlet_proc *next;
};

typedef struct {
    enum sandlet_spawn_file file;
    char *const *args;
    char *const *env;  /* SANDLET_SPAWN_UPGRADE: the spawner's own, plus the upgrade's variables */
    uint32_t uid, gid; /* UINT32_MAX: unchanged */
    bool detached;     /* a session of its own (setsid) */
    const int *fds;    /* the child's descriptor i is fds[i]; -1: /dev/null for 0-2, else none */
    size_t nfds;
} sandlet_spawn_opts;

/* Forks the spawner; in the supervisor, before anything else is opened
 * and before sandlet_harden_supervisor.  exe is "/proc/self/fd/N" of
 * sandletd's own binary (the spawner has the same descriptor); close_fd
 * (the control socket, -1 for none) is closed in the spawner, which holds
 * nothing of the acceptor's, and the wipe_len bytes at wipe (a secret of
 * the configuration) are zeroed in its copy of our memory.  The spawner confines itself as the
 * supervisor did before it was split (sandlet_harden_spawner).  Returns
 * the spawner's pid (workers name it as their parent) or -errno. */
pid_t sandlet_spawner_fork(const char *exe, int close_fd, void *wipe, size_t wipe_len);

/* Watches the spawner's socket on loop for exits; a spawner gone ends the
 * supervisor, loudly, after lost() (what must not outlive it: the state
 * file), with status 1.  Returns 0 or a libuv error. */
int sandlet_spawner_watch(uv_loop_t *loop, void (*lost)(void));

/* Stops watching once every child started is reported gone or
 * forgotten (a page compile killed at shutdown still has its exit
 * handled), so that the supervisor's loop ends; the spawner leaves when
 * the supervisor exits. */
void sandlet_spawner_unwatch(void);

/* Starts a child as the options say (as uv_spawn did, in the spawner):
 * 0 with p->pid and p->pidfd set and p watched for its exit, or -errno
 * (exec's error too).  p->exit_cb and p->data are the caller's. */
int sandlet_spawn(sandlet_proc *p, const sandlet_spawn_opts *o);

/* The error log was reopened as fd: the spawner takes it as its standard
 * error too (its own lines; children are handed theirs per start). */
void sandlet_spawner_log(int fd);

/* Signals a started child that is not yet reported gone: 0 or -errno. */
int sandlet_proc_kill(sandlet_proc *p, int sig);

/* Forgets p, an upgrade's new daemon once it serves (it is its own): its
 * exit is no longer reported, nor reaped by the spawner, so that whoever
 * it is reparented to learns it.  The spawner refuses to forget any
 * other child. */
void sandlet_proc_forget(sandlet_proc *p);

#endif /* SANDLET_SPAWNER_H */

/*
 * control.h - messages between the acceptor and the supervisor.
 *
 * A SOCK_SEQPACKET socketpair carries fixed-size messages, so a message is
 * never split or merged and a wrong size is detectable.  The supervisor
 * decides everything about workers: it starts one per (sandbox, slot),
 * makes its channel and writes its INIT frame, then hands the acceptor the
 * channel, the read end of the worker's output pipe, its claim word and,
 * when its sandbox has a spool, the writable end of its spool file
 * (WORKER, three or four descriptors as SCM_RIGHTS).  The acceptor may only ask for a worker's
 * death (KILL, named by sandbox, slot and generation, never by pid, so
 * that it cannot make the privileged supervisor signal an arbitrary
 * process), for the logs to be reopened (REOPEN), and say that a worker
 * started (READY: its slot's crash-loop back-off resets; once per
 * generation, and it can only make restarts faster, which KILL can too),
 * and pass on a reload request (RELOAD, rate-limited: the supervisor reads
 * the configuration itself), and ask for the worker of an extra slot
 * (GROW: slots from workers up to max-workers run a worker only while
 * the acceptor's queue needs one; the supervisor never restarts them, and
 * the acceptor retires them by closing their channel when idle).  The
 * supervisor treats every message from the acceptor as hostile: wrong size, unknown
 * type, attached descriptors or an empty message are refused, KILL only
 * reaches a live child of that generation, REOPEN is rate-limited, GROW
 * starts a worker only in an extra slot of a live sandbox that has none
 * (so never more than max-workers of a sandbox).  For a binary upgrade
 * (SIGUSR2) the acceptor hands over each listening socket (HANDOVER, the
 * one message from the acceptor that carries a descriptor: checked to be a
 * listening TCP socket, and only ever passed on to the new daemon, which
 * checks it again against its listen lines), then asks for the UPGRADE;
 * the supervisor starts the new binary and answers UPGRADED.
 * Neither side ever drops a message on a full socket: both queue
 * (sandlet_ctl_queue) and retry when the socket is writable.
 */
#ifndef SANDLET_CONTROL_H
#define SANDLET_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sandlet_ctl_type {
    SANDLET_CTL_SPAWN = 1, /* retired: refused (the acceptor spawns nothing) */
    SANDLET_CTL_KILL,      /* acceptor→supervisor: status = SIGKILL */
    SANDLET_CTL_WORKER,    /* supervisor→acceptor: pid; fds: channel, output pipe, claim, spool */
    SANDLET_CTL_SPAWN_FAILED, /* supervisor→acceptor: status = -errno */
    SANDLET_CTL_EXITED,       /* supervisor→acceptor: status, signal */
    SANDLET_CTL_REOPEN,       /* acceptor→supervisor: reopen the log files */
    SANDLET_CTL_LOGFD,        /* supervisor→acceptor: status 0 access, 1 error log; fd */
    SANDLET_CTL_READY,        /* acceptor→supervisor: that worker said READY */
    SANDLET_CTL_PAGE_CHECK,   /* acceptor→supervisor: is page ready? (sandbox, page) */
    SANDLET_CTL_PAGE,         /* supervisor→acceptor: the answer, see below */
    SANDLET_CTL_RELOAD,       /* acceptor→supervisor: SIGHUP, read the configuration again */
    SANDLET_CTL_GEN,          /* supervisor→acceptor: sandbox's code generation is now pages */
    SANDLET_CTL_LISTEN,       /* supervisor→acceptor: slot = index among the next CONF's
                               * listen lines; fd: that address's bound socket */
    SANDLET_CTL_CONF,         /* supervisor→acceptor: a reload's configuration (fd, below) */
    SANDLET_CTL_GROW,         /* acceptor→supervisor: start the worker of extra slot (sandbox,
                               * slot), workers <= slot < max-workers */
    SANDLET_CTL_NOTIFY,       /* supervisor→acceptor: every sandbox has a worker up: say
                               * READY=1 to the service manager (the main process must,
                               * under NotifyAccess=main) */
    SANDLET_CTL_HANDOVER,     /* acceptor→supervisor: slot = index; fd: a listening socket for
                               * the upgrade that follows (sandletd -s upgrade) */
    SANDLET_CTL_UPGRADE,      /* acceptor→supervisor: SIGUSR2: exec the daemon's binary again
                               * with the status handed-over listeners */
    SANDLET_CTL_UPGRADED,     /* supervisor→acceptor: pid took over (status 0): stop
                               * accepting and drain; or the upgrade failed (status -errno) */
    SANDLET_CTL_DENIALS,      /* supervisor→acceptor: pages = the Landlock denials the
                               * kernel recorded of sandbox's workers so far (a total:
                               * only a sandbox's newest waits in the queue) */
};

/* A page's path relative to the docroot, NUL included, in PAGE_CHECK and
 * PAGE ("" in every other message).  Longer pages are refused (404) by
 * the acceptor before they are asked about. */
#define SANDLET_CTL_PAGE_MAX 1024

typedef struct sandlet_ctl {
    uint32_t type;
    uint32_t sandbox;
    uint32_t slot;
    uint32_t gen;
    int32_t pid;
    int32_t status; /* exit code, signal to send, or -errno */
    int32_t signal; /* terminating signal, 0 when the worker exited */
    int32_t core;   /* non-zero when it dumped core */
    /* EXITED: 1 + the system call the kernel's seccomp record names for a
     * worker dead by SIGSYS; 0 when the kernel reported no seccomp kill
     * (a worker can send itself SIGSYS). */
    int32_t seccomp;
    /* WORKER: the pages generation of the worker's INIT.  PAGE: the
     * generation a worker must have to serve the page, slot its index
     * among the sandbox's pages, status 0 (ready), -ENOENT (no such page),
     * -ENOEXEC (its compile failed; the diagnostics' file attached when
     * there is one), -ENOSYS (compiling is off and no compiled copy is up
     * to date), -ETIMEDOUT (the compile was cut off) or another -errno. */
    uint32_t pages;
    char page[SANDLET_CTL_PAGE_MAX];
} sandlet_ctl;

/* Most descriptors one message carries (WORKER: channel, output, claim
 * word and spool file). */
#define SANDLET_CTL_MAXFD 4

/* Sends m with the nfd descriptors of fds attached.  Returns 0 or -errno
 * (-EAGAIN when the socket is non-blocking and full). */
int sandlet_ctl_send(int sock, const sandlet_ctl *m, const int *fds, size_t nfd);
/* Closes a descriptor someone else attached, without ever waiting on it
 * (a socket's SO_LINGER is turned off first). */
void sandlet_ctl_discard_fd(int fd);
/* The descriptors a received message carries (SCM_RIGHTS) go into fds,
 * at most max of them: how many.  Those past max are discarded, and *bad
 * is set then and for any other kind of control message (credentials,
 * or anything else: not ours). */
struct msghdr;
size_t sandlet_ctl_take_fds(struct msghdr *mh, int *fds, size_t max, bool *bad);
/* Receives one message; fds[0..maxfd) get attached descriptors or -1.
 * Returns 1 for a message, 0 at end of stream (the peer closed: an empty
 * message is not the end), -EAGAIN when none is waiting, -EPROTO for a
 * message of the wrong size (an empty one included), with unexpected
 * ancillary data or more than maxfd descriptors (any received are closed),
 * or another -errno. */
int sandlet_ctl_recv(int sock, sandlet_ctl *m, int *fds, size_t maxfd);

/* Messages waiting for room on the socket, in order, owning their
 * descriptors.  Bounded: past max, push refuses (and closes the
 * descriptors); callers size max from what can be outstanding. */
typedef struct sandlet_ctl_out {
    sandlet_ctl m;
    int fds[SANDLET_CTL_MAXFD];
    size_t nfd;
    struct sandlet_ctl_out *next;
} sandlet_ctl_out;

typedef struct sandlet_ctl_queue {
    sandlet_ctl_out *head, *tail;
    size_t len, max;
} sandlet_ctl_queue;

/* Sends m now if nothing waits before it and the socket takes it, else
 * queues it.  Takes ownership of the descriptors either way.  Returns 0
 * (sent or queued), -ENOBUFS or -ENOMEM (dropped), or another -errno when
 * the socket failed. */
int sandlet_ctl_queue_send(sandlet_ctl_queue *q, int sock, const sandlet_ctl *m, const int *fds,
                           size_t nfd);
/* Sends what waits.  Returns 0 when the queue is empty, -EAGAIN when the
 * socket is full again, or another -errno. */
int sandlet_ctl_queue_flush(sandlet_ctl_queue *q, int sock);
/* Removes the queued messages for which drop(m, arg) is true, closing
 * their descriptors; returns how many. */
size_t sandlet_ctl_queue_drop(sandlet_ctl_queue *q, int (*drop)(const sandlet_ctl *m, void *arg),
                              void *arg);
/* Drops everything, closing the descriptors. */
void sandlet_ctl_queue_clear(sandlet_ctl_queue *q);

/* A reload's configuration as the supervisor hands it to the acceptor (the
 * CONF message's descriptor, a sealed memfd): the file's bytes, exactly as
 * the supervisor parsed and checked them, the folder its relative paths
 * resolved against, the name messages use, and the id the supervisor gave
 * each sandbox (sandlet_sandbox_conf.id).  The acceptor parses it again
 * with sandlet_conf_parse_public: the secrets stay with the supervisor. */
typedef struct sandlet_conf_text sandlet_conf_text;
typedef struct sandlet_conf sandlet_conf;
/* Returns the memfd, or -errno. */
int sandlet_ctl_conf_write(const sandlet_conf_text *t, const char *name, const uint32_t *ids,
                           size_t nids);
/* Reads and parses what fd holds (checked as any input: lengths, counts);
 * does not close fd.  Returns 0, or -errno with a line in err. */
int sandlet_ctl_conf_read(int fd, sandlet_conf **out, char *err, size_t errlen);

#endif /* SANDLET_CONTROL_H */

/*
 * control.h - messages between the acceptor and the supervisor.
 *
 * A SOCK_SEQPACKET socketpair carries fixed-size messages, so a message is
 * never split or merged and a wrong size is detectable.  SPAWN carries the
 * worker's end of a fresh socketpair as SCM_RIGHTS.  The acceptor names
 * workers by (sandbox, slot, generation), never by pid, so that it cannot
 * make the privileged supervisor signal an arbitrary process.
 */
#ifndef SANDLET_CONTROL_H
#define SANDLET_CONTROL_H

#include <stdint.h>

enum sandlet_ctl_type {
    SANDLET_CTL_SPAWN = 1,    /* acceptor→supervisor, with the worker's fd */
    SANDLET_CTL_KILL,         /* acceptor→supervisor: status = SIGKILL */
    SANDLET_CTL_SPAWNED,      /* supervisor→acceptor: pid */
    SANDLET_CTL_SPAWN_FAILED, /* supervisor→acceptor: status = -errno */
    SANDLET_CTL_EXITED,       /* supervisor→acceptor: status, signal */
    SANDLET_CTL_REOPEN,       /* acceptor→supervisor: reopen the log files */
    SANDLET_CTL_LOGFD,        /* supervisor→acceptor: status 0 access, 1 error log; fd */
};

typedef struct sandlet_ctl {
    uint32_t type;
    uint32_t sandbox;
    uint32_t slot;
    uint32_t gen;
    int32_t pid;
    int32_t status; /* exit code, signal to send, or -errno */
    int32_t signal; /* terminating signal, 0 when the worker exited */
    int32_t core;   /* non-zero when it dumped core */
} sandlet_ctl;

/* Sends m, with fd attached when fd >= 0.  Returns 0 or -errno (-EAGAIN
 * when the socket is non-blocking and full). */
int sandlet_ctl_send(int sock, const sandlet_ctl *m, int fd);
/* Receives one message; *fd gets an attached descriptor or -1.  Returns
 * 1 for a message, 0 at end of stream, -EAGAIN when none is waiting,
 * -EPROTO for a message of the wrong size or with unexpected ancillary
 * data (any descriptors received are closed), or another -errno. */
int sandlet_ctl_recv(int sock, sandlet_ctl *m, int *fd);

#endif /* SANDLET_CONTROL_H */

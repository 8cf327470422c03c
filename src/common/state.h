/*
 * state.h - the state file: what a running sandletd tells the programs
 * that manage it (its init script, "sandletd -s", systemd): the pid that
 * takes its signals, whether it is ready to serve, and the verdict of its
 * last reload.  sandletd(8), FILES, documents the format.
 *
 * The supervisor writes it (it is root when the daemon is, and it is the
 * one that decides a reload); "sandletd -s" and "sandletd -T" read it.
 * It never holds anything secret: it is readable by everyone.
 */
#ifndef SANDLET_STATE_H
#define SANDLET_STATE_H

#include "common/conf.h"

#include <stdbool.h>
#include <stddef.h>

#ifndef SANDLET_RUNSTATEDIR
#define SANDLET_RUNSTATEDIR "/run"
#endif
/* Where state files go without a "state-file" line: one per
 * configuration file, named after it, so that a second instance with its
 * own file (sandlet@.service) never shares one. */
#define SANDLET_STATE_DIR SANDLET_RUNSTATEDIR "/sandlet"

typedef struct sandlet_state {
    long pid;              /* the acceptor's: it takes every signal */
    char phase[16];        /* "starting", "ready" */
    unsigned long reloads; /* reload verdicts given since the start */
    char verdict[16];      /* of the last reload: "applied", "refused" or "" */
    char message[1024];    /* what the error log said about it */
} sandlet_state;

/* The state file of conf: its "state-file", or SANDLET_STATE_DIR/NAME.state
 * where NAME is the configuration file's name without ".conf".  Returns 0,
 * or -ENAMETOOLONG. */
int sandlet_state_path(const sandlet_conf *conf, char *buf, size_t size);
/* Replaces the file at path with st, atomically (a reader sees the old
 * or the new one, never half), mode 0644; makes its folder (0755) when it
 * is missing.  Returns 0 or a negative errno. */
int sandlet_state_write(const char *path, const sandlet_state *st);
/* Reads path into st.  Returns 0, a negative errno, or -EPROTO for a file
 * that is not a state file. */
int sandlet_state_read(const char *path, sandlet_state *st);
/* sd_notify(3)'s protocol by hand: one datagram with msg to the socket
 * named by $NOTIFY_SOCKET, when the service manager set it.  Returns 0
 * (also without $NOTIFY_SOCKET) or a negative errno. */
int sandlet_notify(const char *msg);

#endif /* SANDLET_STATE_H */

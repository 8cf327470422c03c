/*
 * pgtest.h - a throwaway PostgreSQL server for tests: its own cluster in a
 * temporary directory, its unix socket in that directory and a free
 * loopback TCP port, fsync off, run as an unprivileged user when the test
 * is root (postgres refuses root), stopped and removed afterwards.
 *
 * A test that needs a database FAILS when the server binaries are missing:
 * CI must never skip one; the message names scripts/install-deps.
 */
#ifndef SANDLET_TEST_PGTEST_H
#define SANDLET_TEST_PGTEST_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct pgtest {
    char dir[128];  /* 0755, owned by the server's user; the socket lives here */
    char data[160]; /* dir/data: the cluster */
    char bindir[PATH_MAX];
    unsigned port; /* 127.0.0.1 TCP port, also the socket's number */
    uid_t uid;     /* the server's user (the test's own unless root) */
    gid_t gid;
    bool running;
    /* libpq connection strings (superuser "sandlet", database "postgres",
     * trust authentication): over the unix socket, and over TCP. */
    char conninfo[256];
    char conninfo_tcp[256];
} pgtest;

/* initdb and start.  0, or -1 with one line naming the cause and the fix
 * in err (for cmocka's fail_msg). */
int pgtest_start(pgtest *pg, char *err, size_t errlen);
/* pgtest_start for a test's setup: the reason, when it fails, goes to
 * standard error (cmocka shows it).  0 or -1. */
int pgtest_start_or_say(pgtest *pg);
/* Stops the server (fast shutdown), keeping the cluster, for tests of a
 * database that goes away; 0 or -1. */
int pgtest_stop(pgtest *pg, char *err, size_t errlen);
/* Starts a stopped cluster again on the same port and socket; 0 or -1. */
int pgtest_restart(pgtest *pg, char *err, size_t errlen);
/* Stops the server if running and removes the directory.  Idempotent. */
void pgtest_destroy(pgtest *pg);
/* Runs sql (one or more statements, no parameters) as the superuser over
 * the unix socket; 0, or -1 with libpq's message in err. */
int pgtest_exec(const pgtest *pg, const char *sql, char *err, size_t errlen);

#endif

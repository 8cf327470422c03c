/*
 * harness.h - helpers for integration tests: start sandletd on an
 * ephemeral loopback port with a temporary configuration, talk raw HTTP
 * to it, read its log, stop it.
 */
#ifndef SANDLET_TEST_HARNESS_H
#define SANDLET_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct th_daemon {
    pid_t pid;
    unsigned port;  /* 127.0.0.1 */
    unsigned port6; /* [::1], when started with ipv6 */
    char dir[64];   /* temporary directory holding conf and log */
    char conf[128];
    char log[128];
} th_daemon;

typedef struct th_response {
    int status;
    char *head; /* status line and headers, NUL-terminated */
    char *body; /* NUL-terminated for convenience; may hold NULs */
    size_t body_len;
    bool chunked;
    bool closed; /* the server closed the connection after it */
} th_response;

/* True when SANDLET_NO_CONFINEMENT is set (the sanitizer run), in which
 * case a confinement test has nothing to check; with untested, prints
 * "SKIP: ..." naming what was not tested (NULL: silent, for teardowns). */
bool th_confinement_off(const char *untested);
/* th_confinement_off with the usual SKIP line: "confinement not tested". */
bool th_unconfined(void);
/* A group's teardown: stops d (0 if it exited 0, else -1); 0 when
 * confinement is off, as the group's setup then started nothing. */
int th_stop_group(th_daemon *d);
/* Path of the built test fixture servlet name (tests/fixtures/name.c). */
const char *th_fixture(const char *name);
/* True when this process is not root; with why, prints "SKIP: not root"
 * and why (what was not checked). */
bool th_skip_unless_root(const char *why);
/* What a test that starts daemons does first: become the reaper of their
 * orphans (th_become_subreaper) and survive writes to closed sockets. */
void th_prepare(void);
/* Makes a fresh directory /tmp/sandlet-<tag>-XXXXXX into dir (cap bytes)
 * and, unless mode is 0, gives it mode.  0, or -1 with errno. */
int th_tempdir(char *dir, size_t cap, const char *tag, mode_t mode);
/* The whole file at path (also /proc files), NUL-terminated, malloc'd;
 * its length in *len (may be NULL).  NULL when unreadable. */
char *th_slurp(const char *path, size_t *len);

/* Path of a built file: SANDLET_BUILDDIR + rel. */
const char *th_build_path(const char *rel);
/* Makes this process the reaper of orphans, so that leftovers of a
 * stopped daemon become visible to th_orphans(). */
void th_become_subreaper(void);
/* Writes conf (with "@PORT@" left out: listen lines are added) and starts
 * sandletd; returns 0 once it listens.  extra_listen adds [::1]:0. */
int th_start(th_daemon *d, const char *conf_body, bool ipv6);
/* th_start, with in_child(ctx) run in the daemon's process just before
 * it execs sandletd (descriptors above stderr closed already), for tests
 * of what a careless starter leaves behind. */
int th_start_with(th_daemon *d, const char *conf_body, bool ipv6, void (*in_child)(void *),
                  void *ctx);
/* SIGTERM and wait; returns the exit status, or -1 on timeout/signal. */
int th_stop(th_daemon *d);
/* Waits up to ms for pid to end; true with its wait status in *st, or
 * false (then it is killed with SIGKILL and reaped). */
bool th_wait_exit(pid_t pid, int ms, int *st);
bool th_log_contains(const th_daemon *d, const char *needle);
/* Waits up to ms for needle to appear in the log. */
bool th_log_wait(const th_daemon *d, const char *needle, int ms);
/* Number of processes whose parent is this process. */
int th_children(void);
/* Fills out with up to max pids of parent's children; returns the count.
 * A supervisor's spawner is not counted: the children it started for the
 * supervisor are, as the supervisor's. */
int th_children_of(pid_t parent, pid_t *out, int max);

/* A client connection with its read buffer (pipelined responses). */
typedef struct th_conn {
    int fd;
    size_t len;
    char buf[256 * 1024];
    /* Received by th_send_draining beyond what buf holds, read first. */
    char *spill;
    size_t spill_len, spill_off;
} th_conn;

th_conn *th_connect(unsigned port, bool ipv6);
void th_close(th_conn *c);
int th_send(th_conn *c, const void *data, size_t len);
int th_send_str(th_conn *c, const char *s);
/* Sends len bytes while keeping whatever the server answers meanwhile for
 * th_read, so that a large pipelined burst cannot deadlock on full socket
 * buffers on both sides.  0 or -1. */
int th_send_draining(th_conn *c, const void *data, size_t len);
/* Reads one response; head_request: no body follows.  0 or -1. */
int th_read(th_conn *c, th_response *r, bool head_request);
/* True when the server has closed the connection (reads EOF). */
bool th_eof(th_conn *c);
void th_response_free(th_response *r);
/* One request on a fresh connection ("Connection: close"). */
int th_request(unsigned port, const char *method, const char *target, const char *headers,
               const void *body, size_t body_len, th_response *r);
/* Value of a response header (case-insensitive), copied into out. */
bool th_header(const th_response *r, const char *name, char *out, size_t outlen);

/* "sandletd -t -c conf": its exit status (-1 when it did not exit), its
 * standard output and error into out (cap bytes, NUL-ended). */
int th_check_conf(const char *conf, char *out, size_t cap);
/* "sandletd ARGS -c conf", the same way: its exit status, its standard
 * output and error into out. */
int th_sandletd(const char *args, const char *conf, char *out, size_t cap);

/* The value of a Prometheus series (its name and labels, then a space,
 * as in "sandlet_x{sandbox=\"a\"} ") on the status page at path: -1 when
 * the page has no such series, -2 when it could not be fetched (not 200). */
long th_metric(unsigned port, const char *path, const char *series);

/* A "Field:  N kB" line of /proc/PID/status (VmRSS, VmHWM), in KiB; -1
 * when the process or the field is gone. */
long th_status_kb(pid_t pid, const char *field);

/* Under AddressSanitizer: a 4 MiB quarantine for the daemons this test
 * starts (they inherit ASAN_OPTIONS), so that freed memory ASan keeps
 * (256 MiB by default) does not count as theirs in an RSS bound. */
void th_asan_small_quarantine(void);

/* Milliseconds on the monotonic clock, for "answered within" checks. */
unsigned long long th_now_ms(void);

#endif

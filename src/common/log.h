/*
 * log.h - the error log: one line per event, with time, process and level.
 * It lives in src/common because the acceptor, the supervisor and the
 * workers all use it; it must never depend on src/loop or src/sandbox.
 *
 * The acceptor and the supervisor write here (standard error, or the
 * error-log file made standard error at start, or syslog).  Workers never hold it:
 * their output reaches it through the acceptor (workerlog.c), prefixed
 * and escaped.
 */
#ifndef SANDLET_LOG_H
#define SANDLET_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <sys/types.h>

enum sandlet_log_level { SANDLET_LOG_ERROR, SANDLET_LOG_WARN, SANDLET_LOG_INFO, SANDLET_LOG_DEBUG };

/* Names the process in every line: "acceptor", "supervisor", "worker shop". */
void sandlet_log_set_role(const char *role);
/* Lines carry only their level, for a process whose standard error is
 * read and stamped by the acceptor (a worker). */
void sandlet_log_set_bare(bool on);
void sandlet_log_set_level(enum sandlet_log_level max);
void sandlet_log(enum sandlet_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* As sandlet_log, with ": strerror(-err)" appended (err is a negative errno). */
void sandlet_log_errno(enum sandlet_log_level level, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Makes this process's writes to standard error never wait: a pipe or
 * terminal is reopened as a description of its own with O_NONBLOCK, a
 * socket is written with MSG_DONTWAIT; lines that do not fit are counted
 * and the count logged later.  Call again whenever standard error is
 * replaced.  Returns 0 or -errno (writes may then block). */
int sandlet_log_nonblocking(void);

/* "error-log syslog;": the acceptor's and the supervisor's lines (and so
 * the workers', which pass through the acceptor) go to the local syslog
 * socket, /dev/log, which journald and rsyslog read. */
#define SANDLET_LOG_SYSLOG "syslog"
#define SANDLET_LOG_DEVLOG "/dev/log"
/* Whether an error-log value is the word syslog rather than a file. */
bool sandlet_log_is_syslog(const char *error_log);
/* From now on, lines go to /dev/log as facility daemon, tagged
 * "sandletd[PID]", instead of standard error.  The socket is made here,
 * before privileges are dropped and system calls filtered; each line is
 * then one sendto(2) that never waits, and so keeps reaching a syslog
 * daemon that restarted.  Logs why and returns -errno when /dev/log is
 * not a socket (no syslog daemon runs). */
int sandlet_log_syslog_open(void);

/* The log files, by the index the supervisor's LOGFD message carries. */
enum { SANDLET_LOG_ACCESS, SANDLET_LOG_ERROR_FILE, SANDLET_LOG_FILES };

/* Opens log file which (path kept, not copied) for appending: checks its
 * folder (a folder, owned by root or uid, writable by nobody else unless
 * sticky and root's like /tmp) and keeps it open for reopening; never
 * follows a link; refuses what is not a regular file of root or uid with
 * a single link; a file it creates in a folder uid may write belongs to
 * uid:gid.  Logs why and returns -errno, or returns the descriptor. */
int sandlet_log_file_open(unsigned which, const char *path, uid_t uid, gid_t gid);
/* Opens the file again in the folder checked by sandlet_log_file_open
 * (logrotate moved it), with the same rules; logs why it cannot. */
int sandlet_log_file_reopen(unsigned which);
/* Closes the kept folders: for processes that never reopen the logs. */
void sandlet_log_file_forget(void);

#define sandlet_error(...) sandlet_log(SANDLET_LOG_ERROR, __VA_ARGS__)
#define sandlet_warn(...)  sandlet_log(SANDLET_LOG_WARN, __VA_ARGS__)
#define sandlet_info(...)  sandlet_log(SANDLET_LOG_INFO, __VA_ARGS__)
#define sandlet_debug(...) sandlet_log(SANDLET_LOG_DEBUG, __VA_ARGS__)

#endif /* SANDLET_LOG_H */

/*
 * log.h - the error log: one line per event, with time, process and level.
 *
 * Every process of sandletd (acceptor, supervisor, workers) writes here;
 * until a log file is configured the lines go to standard error, which the
 * supervisor hands down to workers.
 */
#ifndef SANDLET_LOG_H
#define SANDLET_LOG_H

#include <stdarg.h>

enum sandlet_log_level { SANDLET_LOG_ERROR, SANDLET_LOG_WARN, SANDLET_LOG_INFO, SANDLET_LOG_DEBUG };

/* Names the process in every line: "acceptor", "supervisor", "worker shop". */
void sandlet_log_set_role(const char *role);
void sandlet_log_set_level(enum sandlet_log_level max);
void sandlet_log(enum sandlet_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* As sandlet_log, with ": strerror(-err)" appended (err is a negative errno). */
void sandlet_log_errno(enum sandlet_log_level level, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Opens a log file for appending (created 0640); returns fd or -errno. */
int sandlet_log_open_file(const char *path);

#define sandlet_error(...) sandlet_log(SANDLET_LOG_ERROR, __VA_ARGS__)
#define sandlet_warn(...)  sandlet_log(SANDLET_LOG_WARN, __VA_ARGS__)
#define sandlet_info(...)  sandlet_log(SANDLET_LOG_INFO, __VA_ARGS__)
#define sandlet_debug(...) sandlet_log(SANDLET_LOG_DEBUG, __VA_ARGS__)

#endif /* SANDLET_LOG_H */

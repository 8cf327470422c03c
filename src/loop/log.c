/*
 * log.c - formats error-log lines and writes each with one write(2), so
 * that lines from several processes sharing the descriptor never
 * interleave.  It must never allocate (it runs on out-of-memory paths) and
 * never pass untrusted text as a format.
 */
#include "config.h"

#include "loop/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char role[48] = "sandletd";
static enum sandlet_log_level max_level = SANDLET_LOG_INFO;

void sandlet_log_set_role(const char *r)
{
    snprintf(role, sizeof(role), "%s", r);
}

void sandlet_log_set_level(enum sandlet_log_level max)
{
    max_level = max;
}

/* Declared as printf-like so that clang's -Wformat-nonliteral checks the
 * callers' formats instead of refusing the vsnprintf below. */
static void vlog(enum sandlet_log_level level, int err, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

static void vlog(enum sandlet_log_level level, int err, const char *fmt, va_list ap)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (level > max_level)
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%SZ", &tm);
    int m = snprintf(line + n, sizeof(line) - n, " sandletd[%ld] %s %s: ", (long)getpid(), role,
                     names[level]);
    if (m > 0)
        n += (size_t)m < sizeof(line) - n ? (size_t)m : sizeof(line) - n - 1;
    m = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    if (m > 0)
        n += (size_t)m < sizeof(line) - n ? (size_t)m : sizeof(line) - n - 1;
    if (err && n < sizeof(line) - 1) {
        m = snprintf(line + n, sizeof(line) - n, ": %s", strerror(-err));
        if (m > 0)
            n += (size_t)m < sizeof(line) - n ? (size_t)m : sizeof(line) - n - 1;
    }
    if (n >= sizeof(line) - 1)
        n = sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w;
    do
        w = write(STDERR_FILENO, line, n);
    while (w < 0 && errno == EINTR);
}

void sandlet_log(enum sandlet_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, 0, fmt, ap);
    va_end(ap);
}

void sandlet_log_errno(enum sandlet_log_level level, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, err, fmt, ap);
    va_end(ap);
}

int sandlet_log_open_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
    return fd < 0 ? -errno : fd;
}

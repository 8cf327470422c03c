/*
 * log.c - the error log: formats lines and writes each with one write(2),
 * so that lines from the processes sharing it never interleave, or sends
 * each as one datagram to /dev/log ("error-log syslog"); and the opening
 * of log files, which never follows a link.
 *
 * A log write must never stall the process writing it: when standard
 * error is a pipe, terminal or socket nobody drains, lines are dropped and
 * counted, and the count is logged once writing works again.  This file
 * must never allocate (it runs on out-of-memory paths), never pass
 * untrusted text as a format, and never open a log file through a
 * symbolic link or in a folder it has not checked.
 */
#include "config.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* One line at most: a pipe takes a write of up to PIPE_BUF bytes whole
 * or not at all, so a line is never half written. */
#define LOG_LINE_MAX PIPE_BUF

static char role[48] = "sandletd";
/* A worker's lines go to a pipe the acceptor reads and stamps with the
 * time, the pid and the sandbox: the worker adds only the level. */
static bool bare;
static enum sandlet_log_level max_level = SANDLET_LOG_INFO;
/* Standard error is a socket: send(MSG_DONTWAIT) leaves its flags alone. */
static bool err_is_socket;
/* Lines not written because standard error was full. */
static unsigned long long lost;
/* The end of a line a terminal or socket took only in part: it goes out
 * before anything else, so that lines stay whole. */
static char tail[LOG_LINE_MAX];
static size_t tail_len;
/* error-log syslog: an unconnected datagram socket, each line sent to
 * /dev/log by name, so that a restarted syslog daemon is found again
 * without a new socket or connect(2) (the supervisor's filter and the
 * acceptor's privileges are fixed by then).  syslog(3) is not used: it
 * sends with a blocking send(2), which waits while journald is behind,
 * and it reconnects with socket(2) after an error. */
static int syslog_fd = -1;
static struct sockaddr_un syslog_addr;

void sandlet_log_set_bare(bool on)
{
    bare = on;
}

void sandlet_log_set_role(const char *r)
{
    snprintf(role, sizeof(role), "%s", r);
}

void sandlet_log_set_level(enum sandlet_log_level max)
{
    max_level = max;
}

int sandlet_log_nonblocking(void)
{
    struct stat st;
    err_is_socket = false;
    if (fstat(STDERR_FILENO, &st) < 0)
        return -errno;
    /* Appending to a file does not wait for a reader. */
    if (S_ISREG(st.st_mode))
        return 0;
    if (S_ISSOCK(st.st_mode)) {
        err_is_socket = true;
        return 0;
    }
    int fl = fcntl(STDERR_FILENO, F_GETFL);
    if (fl < 0)
        return -errno;
    if (fl & O_NONBLOCK)
        return 0;
    /* O_NONBLOCK belongs to the open file description, which the shell
     * or service manager that started us may share (a terminal left
     * non-blocking breaks the shell).  Opening the pipe or terminal
     * again through /proc gives this process a description of its own. */
    int fd =
        open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (fl & O_APPEND));
    if (fd < 0) {
        int err = errno;
        /* A pipe is rarely shared with anything interactive: better its
         * flag changed than a loop stalled on it. */
        if (!isatty(STDERR_FILENO) &&
            fcntl(STDERR_FILENO, F_SETFL, (fl & ~O_ACCMODE) | O_NONBLOCK) == 0)
            return 0;
        return -err;
    }
    int rc = dup2(fd, STDERR_FILENO) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

bool sandlet_log_is_syslog(const char *error_log)
{
    return error_log && strcmp(error_log, SANDLET_LOG_SYSLOG) == 0;
}

int sandlet_log_syslog_open(void)
{
    struct stat st;
    int err = stat(SANDLET_LOG_DEVLOG, &st) != 0 ? -errno : !S_ISSOCK(st.st_mode) ? -ENOTSOCK : 0;
    if (err) {
        sandlet_log_errno(SANDLET_LOG_ERROR, err,
                          "error-log syslog: %s is not a socket: no syslog daemon runs; start "
                          "one (journald or rsyslog), or set error-log to a file",
                          SANDLET_LOG_DEVLOG);
        return err;
    }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        err = -errno;
        sandlet_log_errno(SANDLET_LOG_ERROR, err, "error-log syslog: cannot make a socket");
        return err;
    }
    memset(&syslog_addr, 0, sizeof(syslog_addr));
    syslog_addr.sun_family = AF_UNIX;
    memcpy(syslog_addr.sun_path, SANDLET_LOG_DEVLOG, sizeof(SANDLET_LOG_DEVLOG));
    if (syslog_fd >= 0)
        close(syslog_fd);
    syslog_fd = fd;
    return 0;
}

/* One write or send that never waits; returns bytes written or -errno. */
static ssize_t put(const char *p, size_t n)
{
    ssize_t w;
    if (syslog_fd >= 0) {
        /* A datagram is a line: without its line feed, whole or lost. */
        do
            w = sendto(syslog_fd, p, n && p[n - 1] == '\n' ? n - 1 : n, MSG_DONTWAIT | MSG_NOSIGNAL,
                       (const struct sockaddr *)&syslog_addr, sizeof(syslog_addr));
        while (w < 0 && errno == EINTR);
        return w < 0 ? -errno : (ssize_t)n;
    }
    do
        w = err_is_socket ? send(STDERR_FILENO, p, n, MSG_DONTWAIT | MSG_NOSIGNAL)
                          : write(STDERR_FILENO, p, n);
    while (w < 0 && errno == EINTR);
    return w < 0 ? -errno : w;
}

/* Writes one whole line, or keeps what a partial write left, or counts
 * it as lost.  False when nothing could be written. */
static bool put_line(const char *p, size_t n)
{
    if (tail_len) {
        ssize_t w = put(tail, tail_len);
        if (w <= 0)
            return false;
        memmove(tail, tail + w, tail_len - (size_t)w);
        tail_len -= (size_t)w;
        if (tail_len)
            return false;
    }
    ssize_t w = put(p, n);
    if (w <= 0)
        return false;
    if ((size_t)w < n) {
        tail_len = n - (size_t)w < sizeof(tail) ? n - (size_t)w : sizeof(tail);
        memcpy(tail, p + w, tail_len);
        tail[tail_len - 1] = '\n';
    }
    return true;
}

/* Fills line with the time, process, role and level; returns its length.
 * For syslog: the priority and tag instead of the time, as syslog(3)
 * writes them (the daemon stamps the time). */
static size_t head(char *line, size_t cap, enum sandlet_log_level lv, const char *level)
{
    static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
    if (syslog_fd >= 0) {
        int b = snprintf(line, cap, "<%d>sandletd[%ld]: %s %s: ", LOG_DAEMON | prio[lv],
                         (long)getpid(), role, level);
        return b > 0 && (size_t)b < cap ? (size_t)b : 0;
    }
    if (bare) {
        int b = snprintf(line, cap, "%s: ", level);
        return b > 0 && (size_t)b < cap ? (size_t)b : 0;
    }
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int m = snprintf(line + n, cap - n, " sandletd[%ld] %s %s: ", (long)getpid(), role, level);
    if (m > 0)
        n += (size_t)m < cap - n ? (size_t)m : cap - n - 1;
    return n;
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
    /* Callers may still read errno after logging; a dropped line's
     * EAGAIN must not replace it. */
    int saved_errno = errno;
    char line[LOG_LINE_MAX];
    if (lost) { /* put_line sends what is left of a line first */
        size_t n = head(line, sizeof(line), SANDLET_LOG_WARN, "warning");
        int m = snprintf(line + n, sizeof(line) - n,
                         "%llu log line(s) dropped: %s was not taking them "
                         "(is whatever reads it stalled?)\n",
                         lost, syslog_fd >= 0 ? SANDLET_LOG_DEVLOG : "standard error");
        if (m > 0 && (size_t)m < sizeof(line) - n && put_line(line, n + (size_t)m))
            lost = 0;
    }
    size_t n = head(line, sizeof(line), level, names[level]);
    int m = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
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
    if (lost || !put_line(line, n))
        lost++;
    errno = saved_errno;
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

/* ---- log files ------------------------------------------------------------ */

/* Each log file's folder, opened and checked once at start and kept by
 * the processes that reopen the file: a folder renamed or replaced by a
 * link afterwards changes nothing. */
static struct {
    const char *path;
    const char *name; /* in path, after the last '/' */
    int dir;
    uid_t uid; /* the daemon's user: who may own the file and the folder */
    gid_t gid;
    /* The daemon's user may write the folder: it can put anything under
     * the file's name, so what is found there is checked, and what we
     * create is given to that user, never left to root. */
    bool hostile_dir;
} files[SANDLET_LOG_FILES] = {{.dir = -1}, {.dir = -1}};

static const char *const what[SANDLET_LOG_FILES] = {"access-log", "error-log"};

static int check_dir(unsigned which, const char *dir, const struct stat *st)
{
    const char *p = files[which].path;
    uid_t uid = files[which].uid;
    gid_t gid = files[which].gid;
    if (!S_ISDIR(st->st_mode)) {
        sandlet_error("%s %s: %s is not a folder", what[which], p, dir);
        return -ENOTDIR;
    }
    if (st->st_uid != 0 && st->st_uid != uid) {
        sandlet_error("%s %s: its folder %s belongs to uid %u, neither root nor sandletd's "
                      "user (uid %u), who could swap the log for a link; chown root %s, or "
                      "use a folder of sandlet's own (install -d -m 0755 /var/log/sandlet)",
                      what[which], p, dir, (unsigned)st->st_uid, (unsigned)uid, dir);
        return -EPERM;
    }
    bool sticky_root = (st->st_mode & S_ISVTX) && st->st_uid == 0;
    if ((st->st_mode & S_IWOTH) && !sticky_root) {
        sandlet_error("%s %s: its folder %s is writable by everyone (mode %04o), who could "
                      "swap the log for a link; chmod o-w %s, or use a folder of sandlet's own "
                      "(install -d -m 0755 /var/log/sandlet)",
                      what[which], p, dir, (unsigned)(st->st_mode & 07777), dir);
        return -EPERM;
    }
    if ((st->st_mode & S_IWGRP) && st->st_gid != 0 && st->st_gid != gid && !sticky_root) {
        sandlet_error("%s %s: its folder %s is writable by group %u (mode %04o), whose members "
                      "could swap the log for a link; chmod g-w %s, or use a folder of "
                      "sandlet's own (install -d -m 0755 /var/log/sandlet)",
                      what[which], p, dir, (unsigned)st->st_gid, (unsigned)(st->st_mode & 07777),
                      dir);
        return -EPERM;
    }
    files[which].hostile_dir = (st->st_mode & S_IWOTH) || (st->st_uid == uid && uid != 0) ||
                               ((st->st_mode & S_IWGRP) && st->st_gid == gid && gid != 0);
    return 0;
}

int sandlet_log_file_open(unsigned which, const char *path, uid_t uid, gid_t gid)
{
    if (which >= SANDLET_LOG_FILES || !path)
        return -EINVAL;
    files[which].path = path;
    files[which].uid = uid;
    files[which].gid = gid;
    const char *slash = strrchr(path, '/');
    files[which].name = slash ? slash + 1 : path;
    const char *base = files[which].name;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        sandlet_error("%s %s: names a folder; name a file in it", what[which], path);
        return -EISDIR;
    }
    char dir[PATH_MAX];
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    if (slash && dlen == 0)
        dlen = 1; /* "/x.log" */
    if (dlen >= sizeof(dir)) {
        sandlet_error("%s %s: the path is too long", what[which], path);
        return -ENAMETOOLONG;
    }
    if (slash)
        memcpy(dir, path, dlen);
    else
        dir[dlen++] = '.';
    dir[dlen] = '\0';
    if (files[which].dir >= 0)
        close(files[which].dir);
    files[which].dir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (files[which].dir < 0) {
        int err = -errno;
        sandlet_log_errno(SANDLET_LOG_ERROR, err, "%s %s: cannot open its folder %s; create it",
                          what[which], path, dir);
        return err;
    }
    struct stat st;
    int rc = fstat(files[which].dir, &st) < 0 ? -errno : check_dir(which, dir, &st);
    if (rc == 0)
        rc = sandlet_log_file_reopen(which);
    if (rc < 0) {
        close(files[which].dir);
        files[which].dir = -1;
    }
    return rc;
}

int sandlet_log_file_reopen(unsigned which)
{
    /* With error-log syslog nothing was opened: there is nothing to
     * reopen, and the syslog socket needs no reopening. */
    if (which >= SANDLET_LOG_FILES || files[which].dir < 0)
        return -EBADF;
    const char *p = files[which].path;
    /* O_NONBLOCK: a FIFO put in the log's place must not hang the open;
     * it is refused below anyway. */
    int flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    bool created = false;
    int fd = openat(files[which].dir, files[which].name, flags);
    if (fd < 0 && errno == ENOENT) {
        fd = openat(files[which].dir, files[which].name, flags | O_CREAT | O_EXCL, 0640);
        created = fd >= 0;
    }
    if (fd < 0) {
        int err = -errno;
        if (err == -ELOOP)
            sandlet_error("%s %s is a symbolic link; sandletd does not follow links for its "
                          "logs (kept writing the old file): remove the link",
                          what[which], p);
        else
            sandlet_log_errno(SANDLET_LOG_ERROR, err,
                              "%s %s cannot be opened (kept writing the old file); check "
                              "its folder's permissions",
                              what[which], p);
        return err;
    }
    struct stat st;
    const char *bad = NULL;
    if (fstat(fd, &st) < 0)
        bad = "cannot be examined";
    else if (!S_ISREG(st.st_mode))
        bad = "is not a regular file";
    else if (st.st_nlink != 1)
        bad = "has other hard links (it could be another file's alias)";
    else if (st.st_uid != 0 && st.st_uid != files[which].uid)
        bad = "belongs to a user who is neither root nor sandletd's";
    if (bad) {
        close(fd);
        sandlet_error("%s %s %s; not writing to it (kept writing the old file): remove it",
                      what[which], p, bad);
        return -EPERM;
    }
    /* A folder root keeps (Debian's /var/log/sandlet is root:adm 0750):
     * the new file gets the folder's group, as Debian's daemons' logs
     * are root:adm 0640 from their first line, not only after logrotate's
     * "create 0640 root adm".  Mode 0640 whatever the umask. */
    if (created && !files[which].hostile_dir && geteuid() == 0) {
        struct stat ds;
        if (fstat(files[which].dir, &ds) == 0 && ds.st_gid != st.st_gid &&
            fchown(fd, (uid_t)-1, ds.st_gid) < 0)
            sandlet_log_errno(SANDLET_LOG_WARN, -errno,
                              "%s %s: cannot give it its folder's group (gid %u); it stays "
                              "readable by root only",
                              what[which], p, (unsigned)ds.st_gid);
        if (fchmod(fd, 0640) < 0)
            sandlet_log_errno(SANDLET_LOG_WARN, -errno, "%s %s: cannot make it mode 0640",
                              what[which], p);
    }
    if (created && files[which].hostile_dir && geteuid() == 0 && files[which].uid != 0 &&
        fchown(fd, files[which].uid, files[which].gid) < 0) {
        int err = -errno;
        unlinkat(files[which].dir, files[which].name, 0);
        close(fd);
        sandlet_log_errno(SANDLET_LOG_ERROR, err,
                          "%s %s: cannot give the new file to sandletd's user (uid %u), and "
                          "leaves no root-owned file in a folder that user controls",
                          what[which], p, (unsigned)files[which].uid);
        return err;
    }
    /* Regular files do not block; the flag only guarded the open. */
    if (fcntl(fd, F_SETFL, O_APPEND) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

void sandlet_log_file_forget(void)
{
    for (unsigned i = 0; i < SANDLET_LOG_FILES; i++)
        if (files[i].dir >= 0) {
            close(files[i].dir);
            files[i].dir = -1;
        }
}

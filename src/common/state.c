/*
 * state.c - the state file and systemd's readiness notification (state.h).
 *
 * The file is a few "KEY VALUE" lines, written whole into a temporary
 * file beside it and renamed over it, so that "sandletd -s reload" polling
 * it never reads half a verdict.  Reading bounds every line and refuses a
 * file that does not look like one: the reader may run as root, and the
 * file names a pid it is about to signal.
 */
#include "config.h"

#include "common/state.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define STATE_MAX_BYTES 4096

int sandlet_state_path(const sandlet_conf *conf, char *buf, size_t size)
{
    int n;
    if (conf->state_file) {
        n = snprintf(buf, size, "%s", conf->state_file);
    } else {
        const char *name = conf->file ? conf->file : "sandlet.conf";
        const char *slash = strrchr(name, '/');
        name = slash ? slash + 1 : name;
        size_t len = strlen(name);
        if (len > 5 && strcmp(name + len - 5, ".conf") == 0)
            len -= 5;
        n = snprintf(buf, size, "%s/%.*s.state", SANDLET_STATE_DIR, (int)len, name);
    }
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* The message goes on one line: a newline in it would start a new key. */
static void one_line(char *dst, size_t size, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < size; i++)
        dst[i] = src[i] == '\n' || src[i] == '\r' ? ' ' : src[i];
    dst[i] = '\0';
}

int sandlet_state_write(const char *path, const sandlet_state *st)
{
    char tmp[4096 + 8], dir[4096], msg[sizeof(st->message)];
    const char *slash = strrchr(path, '/');
    if (!slash || (size_t)(slash - path) >= sizeof(dir) ||
        snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    /* Only the last folder: /run exists, /run/sandlet may not yet (it is
     * a tmpfs, emptied at each boot). */
    if (dir[0] && mkdir(dir, 0755) < 0 && errno != EEXIST)
        return -errno;
    one_line(msg, sizeof(msg), st->message);
    char text[STATE_MAX_BYTES];
    int n = snprintf(text, sizeof(text), "pid %ld\nphase %s\nreloads %lu\nverdict %s\nmessage %s\n",
                     st->pid, st->phase, st->reloads, st->verdict[0] ? st->verdict : "none", msg);
    if (n < 0 || (size_t)n >= sizeof(text))
        return -EOVERFLOW;
    /* A leftover from a crash, or a link someone put there: gone first,
     * then made new, never followed. */
    if (unlink(tmp) < 0 && errno != ENOENT)
        return -errno;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (fchmod(fd, 0644) < 0) /* whatever the umask: the tools read it */
        rc = -errno;
    for (size_t off = 0; rc == 0 && off < (size_t)n;) {
        ssize_t w = write(fd, text + off, (size_t)n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            rc = -errno;
        else
            off += (size_t)w;
    }
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    return rc;
}

/* Copies the value of "KEY value" lines into st. */
static int state_line(sandlet_state *st, const char *key, const char *val)
{
    char *end = NULL;
    if (strcmp(key, "pid") == 0) {
        errno = 0;
        st->pid = strtol(val, &end, 10);
        return errno || !end || *end || st->pid <= 1 ? -EPROTO : 0;
    }
    if (strcmp(key, "reloads") == 0) {
        errno = 0;
        st->reloads = strtoul(val, &end, 10);
        return errno || !end || *end || val[0] == '-' ? -EPROTO : 0;
    }
    if (strcmp(key, "phase") == 0)
        snprintf(st->phase, sizeof(st->phase), "%s", val);
    else if (strcmp(key, "verdict") == 0)
        snprintf(st->verdict, sizeof(st->verdict), "%s", strcmp(val, "none") ? val : "");
    else if (strcmp(key, "message") == 0)
        snprintf(st->message, sizeof(st->message), "%s", val);
    return 0; /* unknown keys: a newer daemon's, ignored */
}

int sandlet_state_read(const char *path, sandlet_state *st)
{
    memset(st, 0, sizeof(*st));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    char text[STATE_MAX_BYTES + 1];
    size_t n = 0;
    int rc = 0;
    while (n < STATE_MAX_BYTES) {
        ssize_t r = read(fd, text + n, STATE_MAX_BYTES - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = -errno;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (rc < 0)
        return rc;
    text[n] = '\0';
    for (char *line = text, *next; rc == 0 && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *sp = strchr(line, ' ');
        if (!sp)
            return -EPROTO;
        *sp = '\0';
        rc = state_line(st, line, sp + 1);
    }
    return rc == 0 && st->pid > 1 && st->phase[0] ? 0 : -EPROTO;
}

int sandlet_notify(const char *msg)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !path[0])
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    /* A path, or an abstract name written with a leading '@'. */
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
        return -EINVAL;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    ssize_t w = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
    int rc = w < 0 ? -errno : (size_t)w == strlen(msg) ? 0 : -EIO;
    close(fd);
    return rc;
}

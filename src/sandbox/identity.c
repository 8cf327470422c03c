/*
 * identity.c - resolves the acceptor's and the sandboxes' uids and gids
 * (see identity.h for the rules).  It only reads the configuration and
 * the user and group databases; it never changes an identity itself.
 */
#include "config.h"

#include "sandbox/identity.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void sandlet_identity_range(const sandlet_conf *conf, uint32_t *first, uint32_t *last)
{
    bool set = conf && conf->dynamic_uid_first && conf->dynamic_uid_last;
    *first = set ? conf->dynamic_uid_first : SANDLET_DYNAMIC_UID_FIRST;
    *last = set ? conf->dynamic_uid_last : SANDLET_DYNAMIC_UID_LAST;
}

/* FNV-1a of the name: a sandbox keeps its uid across restarts and
 * reorderings of the file, so that what it wrote stays its own. */
static uint32_t dynamic_uid(uint32_t first, uint32_t last, const char *sandbox)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)sandbox; *p; p++)
        h = (h ^ *p) * 16777619u;
    uint32_t span = last - first;
    return first + 1 + h % span;
}

uint32_t sandlet_identity_dynamic_uid(const char *sandbox)
{
    return dynamic_uid(SANDLET_DYNAMIC_UID_FIRST, SANDLET_DYNAMIC_UID_LAST, sandbox);
}

uint32_t sandlet_identity_dynamic_uid_in(const sandlet_conf *conf, const char *sandbox)
{
    uint32_t first, last;
    sandlet_identity_range(conf, &first, &last);
    return dynamic_uid(first, last, sandbox);
}

/* A dynamic id must belong to nobody else on the system. */
static int check_free(const sandlet_conf *conf, int line, const char *who, uint32_t id)
{
    struct passwd *pw = getpwuid((uid_t)id);
    struct group *gr = pw ? NULL : getgrgid((gid_t)id);
    if (!pw && !gr)
        return 0;
    uint32_t first, last;
    sandlet_identity_range(conf, &first, &last);
    sandlet_error("%s:%d: %s would run as uid and gid %u (sandletd's dynamic-uids range %u-%u), "
                  "but %s '%s' already has that id; name a user for it with a 'user' line, or "
                  "move the range with 'dynamic-uids FIRST-LAST;'",
                  conf->file, line, who, id, first, last, pw ? "user" : "group",
                  pw ? pw->pw_name : gr->gr_name);
    return -EEXIST;
}

int sandlet_identity_acceptor(const sandlet_conf *conf, sandlet_id *out)
{
    out->uid = out->gid = UINT32_MAX;
    if (geteuid() != 0)
        return 0;
    if (!conf->user) {
        /* Not "nobody": that uid is shared with NFS and other daemons,
         * whose files and processes it could then reach. */
        uint32_t first, last;
        sandlet_identity_range(conf, &first, &last);
        int rc = check_free(conf, conf->dynamic_uids_line, "the acceptor", first);
        if (rc < 0)
            return rc;
        out->uid = out->gid = first;
        return 0;
    }
    struct passwd *pw = getpwnam(conf->user);
    if (!pw) {
        sandlet_error("%s:%d: user '%s' does not exist; create it (adduser --system %s) or "
                      "change the 'user' line",
                      conf->file, conf->user_line, conf->user, conf->user);
        return -ENOENT;
    }
    if (pw->pw_uid == 0 || pw->pw_gid == 0) {
        sandlet_error("%s:%d: 'user %s' has uid or gid 0: the acceptor faces the network and "
                      "never runs as root; name an unprivileged user",
                      conf->file, conf->user_line, conf->user);
        return -EPERM;
    }
    out->uid = pw->pw_uid;
    out->gid = pw->pw_gid;
    return 0;
}

static int sandbox_identity(const sandlet_conf *conf, size_t i, const sandlet_id *acceptor,
                            sandlet_id *id)
{
    const sandlet_sandbox_conf *sb = &conf->sandboxes[i];
    bool root = geteuid() == 0;
    id->uid = id->gid = UINT32_MAX;
    if (sb->user) {
        struct passwd *pw = getpwnam(sb->user);
        if (!pw) {
            sandlet_error("%s:%d: sandbox '%s' runs as user '%s', which does not exist; create "
                          "it (adduser --system %s) or change the 'user' line",
                          conf->file, sb->user_line ? sb->user_line : sb->line, sb->name, sb->user,
                          sb->user);
            return -ENOENT;
        }
        id->uid = pw->pw_uid;
        id->gid = pw->pw_gid;
    } else if (root) {
        id->uid = id->gid = sandlet_identity_dynamic_uid_in(conf, sb->name);
        int rc = check_free(conf, sb->line, "sandbox", id->uid);
        if (rc < 0)
            return rc;
    }
    if (sb->group) {
        struct group *gr = getgrnam(sb->group);
        if (!gr) {
            sandlet_error("%s:%d: sandbox '%s' runs as group '%s', which does not exist; create "
                          "it (addgroup --system %s) or change the 'group' line",
                          conf->file, sb->group_line ? sb->group_line : sb->line, sb->name,
                          sb->group, sb->group);
            return -ENOENT;
        }
        id->gid = gr->gr_gid;
    }
    if (!root) {
        if ((id->uid != UINT32_MAX && id->uid != getuid()) ||
            (id->gid != UINT32_MAX && id->gid != getgid())) {
            sandlet_error("%s:%d: sandbox '%s' asks for another user or group, but sandletd was "
                          "not started as root; start it as root or remove the line",
                          conf->file, sb->line, sb->name);
            return -EPERM;
        }
        id->uid = id->gid = UINT32_MAX;
        return 0;
    }
    if (id->uid == 0 || id->gid == 0) {
        /* The line that named root, when one did. */
        int line = id->uid == 0 && sb->user_line    ? sb->user_line
                   : id->gid == 0 && sb->group_line ? sb->group_line
                   : sb->user_line                  ? sb->user_line
                                                    : sb->line;
        sandlet_error("%s:%d: sandbox '%s' would run servlets as uid or gid 0; name an "
                      "unprivileged user and group (or none: it then gets a uid of its own)",
                      conf->file, line, sb->name);
        return -EPERM;
    }
    if (id->uid == acceptor->uid) {
        sandlet_error("%s:%d: sandbox '%s' runs as uid %u, the acceptor's: its servlets could "
                      "trace the process that holds every client's connection; give it another "
                      "user (or none: it then gets a uid of its own)",
                      conf->file, sb->line, sb->name, id->uid);
        return -EPERM;
    }
    if (id->gid == acceptor->gid) {
        sandlet_error("%s:%d: sandbox '%s' runs as gid %u, the acceptor's group: its servlets "
                      "could write what the acceptor keeps group-writable (its log folder); "
                      "give it another group (or no user and group: it then gets ids of its "
                      "own)",
                      conf->file, sb->line, sb->name, id->gid);
        return -EPERM;
    }
    return 0;
}

int sandlet_identity_sandboxes(const sandlet_conf *conf, const sandlet_id *acceptor,
                               sandlet_id *ids)
{
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        int rc = sandbox_identity(conf, i, acceptor, &ids[i]);
        if (rc < 0)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (!conf->sandboxes[i].user && !conf->sandboxes[j].user && ids[i].uid != UINT32_MAX &&
                ids[i].uid == ids[j].uid) {
                sandlet_error("%s:%d: sandboxes '%s' and '%s' would get the same uid %u from "
                              "the reserved range; rename one or give it a 'user' line",
                              conf->file, conf->sandboxes[i].line, conf->sandboxes[j].name,
                              conf->sandboxes[i].name, ids[i].uid);
                return -EEXIST;
            }
    }
    return 0;
}

int sandlet_pipe_all(int fd, void *buf, size_t len, bool out)
{
    char *p = buf;
    while (len) {
        ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int sandlet_identity_resolve(const sandlet_conf *conf, sandlet_id *acceptor, bool acceptor_known,
                             sandlet_id *ids)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return -e;
    }
    size_t idlen = conf->nsandboxes * sizeof(*ids);
    if (pid == 0) {
        close(fds[0]);
        int32_t rc = acceptor_known ? 0 : sandlet_identity_acceptor(conf, acceptor);
        if (rc == 0)
            rc = sandlet_identity_sandboxes(conf, acceptor, ids);
        bool ok = sandlet_pipe_all(fds[1], &rc, sizeof(rc), true) == 0 &&
                  (rc < 0 || (sandlet_pipe_all(fds[1], acceptor, sizeof(*acceptor), true) == 0 &&
                              sandlet_pipe_all(fds[1], ids, idlen, true) == 0));
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    int32_t rc = 0;
    sandlet_id got;
    if (sandlet_pipe_all(fds[0], &rc, sizeof(rc), false) < 0 ||
        (rc == 0 && (sandlet_pipe_all(fds[0], &got, sizeof(got), false) < 0 ||
                     sandlet_pipe_all(fds[0], ids, idlen, false) < 0)))
        rc = -EIO;
    close(fds[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (rc == -EIO)
        sandlet_error("the process that looks up users and groups ended without an answer "
                      "(out of memory, or killed); start sandletd again");
    else if (rc == 0 && !acceptor_known)
        *acceptor = got;
    return rc > 0 ? -EINVAL : rc;
}

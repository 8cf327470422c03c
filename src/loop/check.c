/*
 * check.c - "sandletd -t": what starting with a configuration would find
 * wrong, found without starting.  The file's syntax is conf.c's; here are
 * the things outside it that a start needs: the users and groups it names,
 * the docroot, the log folders, each sandbox's readable and writable
 * paths, and each servlet library (present, a shared object, defining a
 * servlet of this ABI with a handler); and a warning for each listener's
 * port that is taken now.  Each
 * problem is one line on standard error naming the file, line and fix;
 * the caller says OK only when there is none, so that an init script's
 * configtest (and a reload) refuses what a start would refuse.
 *
 * A library is opened the way a worker opens it, in a child process that
 * has become the sandbox's user with no_new_privs first: its constructors
 * may run (as under "nginx -t"), but never as root, and its init never
 * runs.  This file must never keep a port it tried (a bind closed at
 * once, never a listen) nor write anything.
 */
#include "config.h"

#include "loop/check.h"
#include "common/listen.h"
#include "common/log.h"
#include "common/state.h"
#include "lib/servlet.h"
#include "sandbox/identity.h"
#include "sandbox/pages.h"
#include "sandbox/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long one library's check may take (a constructor that hangs). */
#define LOAD_SECONDS 10

/* The configuration being checked, for remap. */
static const sandlet_conf *checking;

/* Messages here say "FILE:LINE:" with the line of the configuration's
 * text; with includes that text is several files, and the reader must be
 * sent to the one that holds the line (sandlet_conf_where). */
static void remap(char *msg, size_t size)
{
    const sandlet_conf *c = checking;
    size_t fl = c && c->nspans ? strlen(c->file) : 0;
    if (!fl || strncmp(msg, c->file, fl) != 0 || msg[fl] != ':')
        return;
    char *end = NULL;
    long at = strtol(msg + fl + 1, &end, 10);
    if (!end || end == msg + fl + 1 || *end != ':' || at <= 0 || at > INT_MAX)
        return;
    int local;
    const char *file = sandlet_conf_where(c, (int)at, &local);
    char rest[2048];
    snprintf(rest, sizeof(rest), "%s", end);
    if (snprintf(msg, size, "%s:%d%s", file, local, rest) >= (int)size && size > 4)
        memcpy(msg + size - 4, "...", 4); /* cut, and says so */
}

/* One problem: a line of its own on standard error. */
__attribute__((format(printf, 2, 3))) static void problem(unsigned *n, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    remap(line, sizeof(line));
    fprintf(stderr, "sandletd: %s\n", line);
    (*n)++;
}

/* A folder a start needs, named at line: it must exist and be a folder. */
static void need_dir(unsigned *n, const sandlet_conf *c, int line, const char *what,
                     const char *path, const char *fix)
{
    struct stat st;
    if (stat(path, &st) != 0)
        problem(n, "%s:%d: %s '%s' %s (%s)", c->file, line, what, path,
                errno == ENOENT ? "does not exist" : strerror(errno), fix);
    else if (!S_ISDIR(st.st_mode))
        problem(n, "%s:%d: %s '%s' is not a folder (%s)", c->file, line, what, path, fix);
}

/* The folder a log file goes into. */
static void need_log_dir(unsigned *n, const sandlet_conf *c, int line, const char *what,
                         const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        return; /* relative to the working directory, which exists */
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    if (len >= sizeof(dir))
        return;
    memcpy(dir, path, len);
    dir[len] = '\0';
    char fix[PATH_MAX + 64];
    snprintf(fix, sizeof(fix), "create it: mkdir -p %s, or fix '%s'", dir, what);
    char label[64];
    snprintf(label, sizeof(label), "the folder of %s", what);
    need_dir(n, c, line, label, dir, fix);
}

/* In a child: become id, then open lib as a worker does.  The child's
 * exit status is 0 or 1, its reason on the pipe. */
static void load_as(const sandlet_id *id, const char *lib, int out)
{
    char err[1024] = "";
    if (geteuid() == 0 && id->uid != UINT32_MAX &&
        (setgroups(0, NULL) < 0 || setgid((gid_t)id->gid) < 0 || setuid((uid_t)id->uid) < 0)) {
        snprintf(err, sizeof(err), "cannot become uid %u to open it: %s", id->uid, strerror(errno));
    } else {
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        alarm(LOAD_SECONDS);
        sandlet_lib_servlet s;
        memset(&s, 0, sizeof(s));
        if (sandlet_lib_servlet_open(&s, lib, "sandletd", true, err, sizeof(err)) == 0)
            _exit(0);
    }
    ssize_t w = write(out, err, strlen(err));
    (void)w;
    _exit(1);
}

/* Forks a child that reports to its parent on a pipe: in the child
 * (*pid 0) p[1] is its end, in the parent (*pid its pid) p[0]; each has
 * closed the other's.  -1 when either fails (nothing to close then). */
static int child_with_pipe(int p[2], pid_t *pid)
{
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    fflush(NULL);
    *pid = fork();
    if (*pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    close(*pid == 0 ? p[0] : p[1]);
    return 0;
}

/* In a child that becomes id: one byte per path of sb, readable ones
 * first, 'y' when the uid has what the line grants (read, and search for a
 * folder; write and search for a writable folder), else 'n'.  Landlock
 * only narrows what the uid may do: a path the uid cannot use is refused
 * to the servlet with EACCES whatever the line says, and silently. */
static void access_as(const sandlet_id *id, const sandlet_sandbox_conf *sb, int out)
{
    if (setgroups(0, NULL) < 0 || setgid((gid_t)id->gid) < 0 || setuid((uid_t)id->uid) < 0)
        _exit(1);
    for (int w = 0; w < 2; w++) {
        char *const *paths = w ? sb->writable : sb->readable;
        size_t count = w ? sb->nwritable : sb->nreadable;
        for (size_t i = 0; i < count; i++) {
            struct stat st;
            int mode = w ? W_OK | X_OK : R_OK;
            if (!w && stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode))
                mode |= X_OK;
            char ok = access(paths[i], mode) == 0 ? 'y' : 'n';
            if (write(out, &ok, 1) != 1)
                _exit(1);
        }
    }
    _exit(0);
}

/* As root, with the sandbox's identity known: whether its uid can use
 * each readable and writable path (access_as). */
static void check_paths_as(unsigned *n, const sandlet_conf *c, const sandlet_sandbox_conf *sb,
                           const sandlet_id *id)
{
    size_t total = sb->nreadable + sb->nwritable;
    if (geteuid() != 0 || !id || id->uid == UINT32_MAX || total == 0)
        return;
    pid_t pid;
    int p[2];
    if (child_with_pipe(p, &pid) < 0)
        return;
    if (pid == 0)
        access_as(id, sb, p[1]);
    for (size_t k = 0; k < total; k++) {
        char ok;
        if (read(p[0], &ok, 1) != 1)
            break;
        if (ok == 'y')
            continue;
        bool w = k >= sb->nreadable;
        size_t i = w ? k - sb->nreadable : k;
        const char *path = w ? sb->writable[i] : sb->readable[i];
        const int *lines = w ? sb->writable_lines : sb->readable_lines;
        problem(n,
                "%s:%d: sandbox '%s': its workers run as uid %u, which cannot %s '%s', so its "
                "servlets would get EACCES there (%s %u:%u '%s', or give uid %u access with "
                "chmod)",
                c->file, lines ? lines[i] : sb->line, sb->name, id->uid, w ? "write in" : "read",
                path, w ? "chown" : "make it readable: chown", id->uid, id->gid, path, id->uid);
    }
    close(p[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

/* A sandbox's readable and writable paths: a worker confines itself to
 * them and cannot start without each (Landlock opens every one). */
static void check_sandbox_paths(unsigned *n, const sandlet_conf *c, const sandlet_sandbox_conf *sb)
{
    for (int w = 0; w < 2; w++) {
        char *const *paths = w ? sb->writable : sb->readable;
        const int *lines = w ? sb->writable_lines : sb->readable_lines;
        size_t count = w ? sb->nwritable : sb->nreadable;
        const char *what = w ? "writable" : "readable";
        for (size_t i = 0; i < count; i++) {
            struct stat st;
            int line = lines ? lines[i] : sb->line;
            if (stat(paths[i], &st) != 0)
                problem(n,
                        "%s:%d: sandbox '%s': %s '%s' %s, and its workers cannot confine "
                        "themselves without it (%s%s, or remove the line)",
                        c->file, line, sb->name, what, paths[i],
                        errno == ENOENT ? "does not exist" : strerror(errno),
                        w ? "create it: mkdir -p " : "create it", w ? paths[i] : "");
            else if (w && !S_ISDIR(st.st_mode))
                problem(n, "%s:%d: sandbox '%s': writable '%s' is not a folder (name a folder)",
                        c->file, line, sb->name, paths[i]);
        }
    }
}

/* The line to fix for a library: its own, else the servlet's. */
static int library_line(const sandlet_servlet_conf *sv)
{
    return sv->library_line ? sv->library_line : sv->line;
}

/* Whether the servlet's library is a file at all. */
static bool library_file(unsigned *n, const sandlet_conf *c, const sandlet_servlet_conf *sv)
{
    struct stat st;
    if (stat(sv->library, &st) != 0) {
        problem(n, "%s:%d: servlet %s: library '%s' %s (build it, or fix the path)", c->file,
                library_line(sv), sv->path, sv->library,
                errno == ENOENT ? "does not exist" : strerror(errno));
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        problem(n, "%s:%d: servlet %s: library '%s' is not a file (name the .so)", c->file,
                library_line(sv), sv->path, sv->library);
        return false;
    }
    return true;
}

static void check_library(unsigned *n, const sandlet_conf *c, const sandlet_servlet_conf *sv,
                          const sandlet_id *id)
{
    if (!library_file(n, c, sv))
        return;
    pid_t pid;
    int p[2];
    if (child_with_pipe(p, &pid) < 0)
        return;
    if (pid == 0)
        load_as(id, sv->library, p[1]);
    char msg[800];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(msg) - 1 && (r = read(p[0], msg + got, sizeof(msg) - 1 - got)) > 0)
        got += (size_t)r;
    msg[got] = '\0';
    close(p[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return;
    if (!got)
        snprintf(msg, sizeof(msg), "opening %s %s", sv->library,
                 WIFSIGNALED(status) ? "crashed or hung in its constructors" : "failed");
    problem(n, "%s:%d: servlet %s: %s", c->file, library_line(sv), sv->path, msg);
}

/* Each listener's port, tried with a bind that is closed at once: one in
 * use is a warning, not a problem, since the daemon checked may be the one
 * holding it (an init script's configtest before a reload). */
/* The pid of the daemon running this configuration, from its state
 * file, when it is alive; 0 otherwise. */
static long running_daemon(const sandlet_conf *c)
{
    char path[4096];
    sandlet_state st;
    if (sandlet_state_path(c, path, sizeof(path)) < 0 || sandlet_state_read(path, &st) < 0)
        return 0;
    return kill((pid_t)st.pid, 0) == 0 || errno == EPERM ? st.pid : 0;
}

static void warn_ports(const sandlet_conf *c)
{
    long daemon_pid = running_daemon(c);
    for (size_t i = 0; i < c->nlistens; i++) {
        const sandlet_listen_conf *l = &c->listens[i];
        if (l->port == 0)
            continue;
        int fd;
        int rc = sandlet_listen_bind(l, &fd);
        if (rc == 0) {
            close(fd);
            continue;
        }
        int e = -rc;
        /* The daemon of this very file holds its own ports: a check before
         * a reload or restart is no news (a reload that adds a port someone
         * else holds says so in its verdict). */
        if (e == EADDRINUSE && daemon_pid)
            continue;
        int at;
        const char *in = sandlet_conf_where(c, l->line, &at);
        fprintf(stderr, "sandletd: warning: %s:%d: %s port %u: %s (%s)\n", in, at, l->host, l->port,
                strerror(e),
                e == EADDRINUSE ? "a running sandletd or another program holds it; a start "
                                  "fails while it does"
                : e == EACCES   ? "ports below 1024 need sandletd started as root"
                                : "a start would fail to listen there");
    }
}

/* The upload spool's root.  A start makes it (mkdir -p) and, when it
 * cannot or must not use it, keeps large file parts in worker memory and
 * says so: a warning here too, not a problem. */
static void warn_spool(const sandlet_conf *c)
{
    if (!c->spool_dir || !*c->spool_dir)
        return;
    char why[PATH_MAX + 160] = "";
    int rc = sandlet_spool_root_refusal(c->spool_dir, why, sizeof(why));
    if (rc == -ENOENT) {
        /* Made at start: the nearest folder that exists must let us. */
        char up[PATH_MAX];
        size_t n = strlen(c->spool_dir);
        if (n >= sizeof(up))
            return;
        memcpy(up, c->spool_dir, n + 1);
        char *slash;
        struct stat st;
        while ((slash = strrchr(up, '/')) && slash != up) {
            *slash = '\0';
            if (stat(up, &st) == 0)
                break;
        }
        if (slash == up)
            strcpy(up, "/");
        if (access(up, W_OK) == 0)
            return;
        snprintf(why, sizeof(why),
                 "spool-dir '%s' does not exist and cannot be made in '%s' (%s): create it "
                 "(mkdir -p -m 0711 %s) or name a folder sandletd may create",
                 c->spool_dir, up, strerror(errno), c->spool_dir);
    } else if (rc < 0 && !why[0]) {
        snprintf(why, sizeof(why), "spool-dir '%s': %s (name a folder sandletd can use)",
                 c->spool_dir, strerror(-rc));
    } else if (rc == 0) {
        return;
    }
    if (c->spool_dir_line)
        fprintf(stderr,
                "sandletd: warning: %s:%d: %s; until then large uploaded files stay in "
                "worker memory\n",
                c->file, c->spool_dir_line, why);
    else
        fprintf(stderr,
                "sandletd: warning: %s: the default %s; until then large uploaded files "
                "stay in worker memory (or set 'spool-dir DIR;')\n",
                c->file, why);
}

/* As a start, which then serves only pages compiled ahead of time: a
 * warning, not a problem. */
static void warn_compiler(const sandlet_conf *c)
{
    if (!c->npages || !c->page_compiler || sandlet_pages_compiler_installed(c->page_compiler))
        return;
    char at[32] = "";
    if (c->page_compiler_line)
        snprintf(at, sizeof(at), "%d:", c->page_compiler_line);
    fprintf(stderr,
            "sandletd: warning: %s:%s page-compiler '%s' is not installed (looked in %s): pages "
            "are served only when compiled ahead of time (sandlet-csp compile -c %s); install "
            "gcc, or set 'page-compiler off;'\n",
            c->file, at, c->page_compiler, SANDLET_COMPILER_PATH, c->file);
}

int sandlet_check_deep(const sandlet_conf *c)
{
    checking = c;
    warn_ports(c);
    warn_compiler(c);
    warn_spool(c);
    unsigned n = 0;
    sandlet_id acceptor;
    sandlet_id *ids = calloc(c->nsandboxes + 1, sizeof(*ids));
    if (!ids) {
        problem(&n, "out of memory");
        return -1;
    }
    /* The identity checks log their own reason, naming the line. */
    bool ids_ok = sandlet_identity_acceptor(c, &acceptor) == 0 &&
                  sandlet_identity_sandboxes(c, &acceptor, ids) == 0;
    if (!ids_ok)
        n++;
    if (c->docroot) {
        char fix[PATH_MAX + 64];
        snprintf(fix, sizeof(fix), "create it: mkdir -p %s, or fix 'docroot'", c->docroot);
        need_dir(&n, c, c->docroot_line, "docroot", c->docroot, fix);
    }
    for (size_t i = 0; i < c->nhosts; i++) {
        const sandlet_host_conf *h = &c->hosts[i];
        if (!h->docroot)
            continue;
        char fix[PATH_MAX + 64];
        snprintf(fix, sizeof(fix), "create it: mkdir -p %s, or fix host %s's 'docroot'", h->docroot,
                 h->names[0]);
        need_dir(&n, c, h->docroot_line, "docroot", h->docroot, fix);
    }
    struct stat st;
    if (!sandlet_log_is_syslog(c->error_log)) {
        if (c->error_log)
            need_log_dir(&n, c, c->error_log_line, "error-log", c->error_log);
    } else if (stat(SANDLET_LOG_DEVLOG, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        problem(&n,
                "%s:%d: error-log syslog: %s is not a socket, so no syslog daemon runs (start "
                "journald or rsyslog, or set error-log to a file)",
                c->file, c->error_log_line, SANDLET_LOG_DEVLOG);
    }
    if (c->access_log)
        need_log_dir(&n, c, c->access_log_line, "access-log", c->access_log);
    for (size_t i = 0; i < c->nsandboxes; i++) {
        unsigned before = n;
        check_sandbox_paths(&n, c, &c->sandboxes[i]);
        if (n == before && ids_ok)
            check_paths_as(&n, c, &c->sandboxes[i], &ids[i]);
    }
    for (size_t i = 0; i < c->nservlets; i++) {
        const sandlet_servlet_conf *sv = &c->servlets[i];
        /* Without the sandbox's identity a library is never opened as
         * root: only its presence is checked. */
        if (!ids_ok && geteuid() == 0) {
            library_file(&n, c, sv);
            continue;
        }
        sandlet_id keep = {UINT32_MAX, UINT32_MAX};
        check_library(&n, c, sv, ids_ok ? &ids[sv->sandbox] : &keep);
    }
    free(ids);
    return n ? -1 : 0;
}

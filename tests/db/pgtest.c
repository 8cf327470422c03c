/*
 * pgtest.c - a throwaway PostgreSQL server for tests (pgtest.h).
 *
 * The postmaster is this process's own child, run directly (no pg_ctl,
 * which would detach it): the test knows its pid, stops it with a fast
 * shutdown and reaps it, and the kernel sends it SIGQUIT (immediate
 * shutdown) should the test die first, so no server outlives a crashed
 * test.  Readiness is asked of the server itself (PQping).  Everything is
 * in one temporary directory that pgtest_destroy removes.  This file
 * never skips: missing binaries are an error naming scripts/install-deps.
 */
#define _GNU_SOURCE
#include "pgtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The server's pid, per pgtest; kept here so that pgtest stays a plain
 * struct tests can embed.  A test runs at most a few servers. */
#define MAX_SERVERS 8
static struct {
    const pgtest *pg;
    pid_t pid;
} servers[MAX_SERVERS];

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static pid_t *server_pid(const pgtest *pg, bool add)
{
    for (size_t i = 0; i < MAX_SERVERS; i++)
        if (servers[i].pg == pg)
            return &servers[i].pid;
    if (!add)
        return NULL;
    for (size_t i = 0; i < MAX_SERVERS; i++)
        if (!servers[i].pg) {
            servers[i].pg = pg;
            servers[i].pid = 0;
            return &servers[i].pid;
        }
    return NULL;
}

static void forget_server(const pgtest *pg)
{
    for (size_t i = 0; i < MAX_SERVERS; i++)
        if (servers[i].pg == pg)
            servers[i].pg = NULL;
}

static bool executable(const char *dir, const char *name)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return access(p, X_OK) == 0;
}

/* SANDLET_PG_BINDIR, else the newest /usr/lib/postgresql/N/bin (Debian
 * keeps the server binaries out of PATH). */
static int find_bindir(pgtest *pg, char *err, size_t errlen)
{
    const char *env = getenv("SANDLET_PG_BINDIR");
    if (env && *env) {
        if (strlen(env) >= sizeof(pg->bindir))
            return seterr(err, errlen, "SANDLET_PG_BINDIR is too long"), -1;
        snprintf(pg->bindir, sizeof(pg->bindir), "%s", env);
    } else {
        glob_t g;
        pg->bindir[0] = '\0';
        if (glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &g) == 0) {
            unsigned long best = 0;
            for (size_t i = 0; i < g.gl_pathc; i++) {
                unsigned long v = strtoul(g.gl_pathv[i] + strlen("/usr/lib/postgresql/"), NULL, 10);
                size_t n = strlen(g.gl_pathv[i]) - strlen("/initdb");
                if (v > best && n < sizeof(pg->bindir)) {
                    best = v;
                    memcpy(pg->bindir, g.gl_pathv[i], n);
                    pg->bindir[n] = '\0';
                }
            }
            globfree(&g);
        }
    }
    if (!pg->bindir[0] || !executable(pg->bindir, "initdb") ||
        !executable(pg->bindir, "postgres")) {
        seterr(err, errlen,
               "PostgreSQL server binaries (initdb, postgres) not found in %s: run "
               "scripts/install-deps (Debian package postgresql), or set SANDLET_PG_BINDIR",
               pg->bindir[0] ? pg->bindir : "/usr/lib/postgresql/*/bin");
        return -1;
    }
    return 0;
}

/* postgres refuses to run as root: as root, the server runs as the
 * 'postgres' user the Debian package creates, else as nobody. */
static int pick_user(pgtest *pg, char *err, size_t errlen)
{
    if (geteuid() != 0) {
        pg->uid = geteuid();
        pg->gid = getegid();
        return 0;
    }
    const struct passwd *pw = getpwnam("postgres");
    if (!pw)
        pw = getpwnam("nobody");
    if (!pw || pw->pw_uid == 0)
        return seterr(err, errlen,
                      "running as root, and neither 'postgres' nor 'nobody' "
                      "exists to run the test server as (run scripts/install-deps)"),
               -1;
    pg->uid = pw->pw_uid;
    pg->gid = pw->pw_gid;
    return 0;
}

static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    unsigned port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* In a child: become the server's user, send output to dir/log, and die
 * with the test (PDEATHSIG is reset by setuid, so it is set after). */
static void child_setup(const pgtest *pg, const char *log, int deathsig)
{
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0)
        dup2(nul, 0);
    if (geteuid() == 0) {
        if (setgroups(0, NULL) != 0 || setgid(pg->gid) != 0 || setuid(pg->uid) != 0) {
            perror("pgtest: dropping to the server's user");
            _exit(126);
        }
        if (fd >= 0 && fchown(fd, pg->uid, pg->gid) != 0) {
            /* the log stays root's: harmless, the server writes via stderr */
        }
    }
    if (deathsig)
        prctl(PR_SET_PDEATHSIG, deathsig);
    if (chdir(pg->dir) != 0)
        _exit(126);
}

/* The last line of a log file, for an error message. */
static void last_line(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f))
        if (line[0] != '\n') {
            size_t n = strnlen(line, cap - 1);
            memcpy(out, line, n);
            out[n] = '\0';
        }
    fclose(f);
    size_t n = strlen(out);
    if (n && out[n - 1] == '\n')
        out[n - 1] = '\0';
}

static int run_initdb(pgtest *pg, char *err, size_t errlen)
{
    char initdb[PATH_MAX + 16], log[200];
    snprintf(initdb, sizeof(initdb), "%s/initdb", pg->bindir);
    snprintf(log, sizeof(log), "%s/initdb.log", pg->dir);
    pid_t pid = fork();
    if (pid < 0)
        return seterr(err, errlen, "fork: %s", strerror(errno)), -1;
    if (pid == 0) {
        child_setup(pg, log, 0);
        char *argv[] = {
            initdb,      "-D", pg->data, "-U",         "sandlet",           "--auth=trust",
            "--no-sync", "-E", "UTF8",   "--locale=C", "--no-instructions", NULL};
        execv(initdb, argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char last[256];
        last_line(log, last, sizeof(last));
        seterr(err, errlen, "initdb failed (%s): %s", pg->bindir, last);
        return -1;
    }
    return 0;
}

static pid_t spawn_postgres(pgtest *pg)
{
    char postgres[PATH_MAX + 16], log[200], port[16];
    snprintf(postgres, sizeof(postgres), "%s/postgres", pg->bindir);
    snprintf(log, sizeof(log), "%s/server.log", pg->dir);
    snprintf(port, sizeof(port), "%u", pg->port);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    child_setup(pg, log, SIGQUIT);
    /* fsync and its kin off: a test cluster dies with the test anyway. */
    char *argv[] = {postgres,
                    "-D",
                    pg->data,
                    "-p",
                    port,
                    "-k",
                    pg->dir,
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "fsync=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "max_connections=60",
                    "-c",
                    "shared_buffers=16MB",
                    NULL};
    execv(postgres, argv);
    _exit(127);
}

static void set_conninfo(pgtest *pg)
{
    snprintf(pg->conninfo, sizeof(pg->conninfo), "host=%s port=%u user=sandlet dbname=postgres",
             pg->dir, pg->port);
    snprintf(pg->conninfo_tcp, sizeof(pg->conninfo_tcp),
             "host=127.0.0.1 port=%u user=sandlet dbname=postgres", pg->port);
}

/* Starts the postmaster and waits until it accepts connections; 1 when
 * it exited early (a port taken since free_port), -1 on other errors. */
static int launch(pgtest *pg, char *err, size_t errlen)
{
    pid_t *slot = server_pid(pg, true);
    if (!slot)
        return seterr(err, errlen, "pgtest: more than %d servers at once", MAX_SERVERS), -1;
    set_conninfo(pg);
    pid_t pid = spawn_postgres(pg);
    if (pid < 0)
        return seterr(err, errlen, "fork: %s", strerror(errno)), -1;
    *slot = pid;
    char log[200];
    snprintf(log, sizeof(log), "%s/server.log", pg->dir);
    for (int i = 0; i < 600; i++) { /* 30 s */
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            *slot = 0;
            char last[256];
            last_line(log, last, sizeof(last));
            seterr(err, errlen, "postgres exited at start: %s", last);
            return strstr(last, "in use") ? 1 : -1;
        }
        if (PQping(pg->conninfo) == PQPING_OK) {
            pg->running = true;
            return 0;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGQUIT);
    waitpid(pid, NULL, 0);
    *slot = 0;
    seterr(err, errlen, "postgres did not accept connections within 30 s (see %s)", log);
    return -1;
}

int pgtest_start(pgtest *pg, char *err, size_t errlen)
{
    memset(pg, 0, sizeof(*pg));
    if (find_bindir(pg, err, errlen) != 0 || pick_user(pg, err, errlen) != 0)
        return -1;
    snprintf(pg->dir, sizeof(pg->dir), "/tmp/sandlet-pg-XXXXXX");
    if (!mkdtemp(pg->dir))
        return seterr(err, errlen, "mkdtemp /tmp: %s", strerror(errno)), -1;
    /* 0755: workers of any user reach the socket; the cluster below is
     * the server's alone (initdb makes it 0700). */
    if (chmod(pg->dir, 0755) != 0 || (geteuid() == 0 && chown(pg->dir, pg->uid, pg->gid) != 0)) {
        seterr(err, errlen, "%s: %s", pg->dir, strerror(errno));
        pgtest_destroy(pg);
        return -1;
    }
    snprintf(pg->data, sizeof(pg->data), "%s/data", pg->dir);
    if (run_initdb(pg, err, errlen) != 0) {
        pgtest_destroy(pg);
        return -1;
    }
    for (int attempt = 0;; attempt++) {
        pg->port = free_port();
        if (!pg->port) {
            seterr(err, errlen, "no free loopback port: %s", strerror(errno));
            pgtest_destroy(pg);
            return -1;
        }
        int rc = launch(pg, err, errlen);
        if (rc == 0)
            return 0;
        if (rc < 0 || attempt == 4) {
            pgtest_destroy(pg);
            return -1;
        }
    }
}

int pgtest_stop(pgtest *pg, char *err, size_t errlen)
{
    pid_t *slot = server_pid(pg, false);
    if (!slot || !*slot || !pg->running)
        return seterr(err, errlen, "pgtest_stop: the server is not running"), -1;
    pid_t pid = *slot;
    kill(pid, SIGINT); /* fast shutdown: clients are disconnected */
    int st;
    for (int i = 0; i < 600; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            *slot = 0;
            pg->running = false;
            return 0;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    *slot = 0;
    pg->running = false;
    return seterr(err, errlen, "postgres did not stop within 30 s; killed"), -1;
}

int pgtest_restart(pgtest *pg, char *err, size_t errlen)
{
    if (pg->running)
        return seterr(err, errlen, "pgtest_restart: the server is running"), -1;
    /* The same port again: clients must find the server where it was. */
    return launch(pg, err, errlen) == 0 ? 0 : -1;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    /* Best effort: what cannot be removed is left, the walk goes on. */
    (void)(flag == FTW_DP ? rmdir(path) : unlink(path));
    return 0;
}

void pgtest_destroy(pgtest *pg)
{
    if (pg->running)
        pgtest_stop(pg, NULL, 0);
    forget_server(pg);
    if (pg->dir[0] && strncmp(pg->dir, "/tmp/sandlet-pg-", 16) == 0)
        nftw(pg->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    pg->dir[0] = '\0';
}

int pgtest_exec(const pgtest *pg, const char *sql, char *err, size_t errlen)
{
    PGconn *c = PQconnectdb(pg->conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        seterr(err, errlen, "connect %s: %s", pg->conninfo, PQerrorMessage(c));
        PQfinish(c);
        return -1;
    }
    PGresult *r = PQexec(c, sql);
    ExecStatusType s = PQresultStatus(r);
    int rc = 0;
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        seterr(err, errlen, "%s: %s", sql, PQresultErrorMessage(r));
        rc = -1;
    }
    PQclear(r);
    PQfinish(c);
    return rc;
}

int pgtest_start_or_say(pgtest *pg)
{
    char err[512];
    if (pgtest_start(pg, err, sizeof(err)) == 0)
        return 0;
    fprintf(stderr, "%s\n", err);
    return -1;
}

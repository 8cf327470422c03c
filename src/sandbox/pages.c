/*
 * pages.c - the supervisor's side of C Server Pages: each sandbox's page
 * table, the compiles, and the answers to the acceptor's PAGE_CHECKs.
 *
 * The acceptor asks about a page (by sandbox and docroot-relative path)
 * when a request for it arrives and its last answer is older than a
 * moment.  This file checks the path against its own copy of the pages
 * mapping (a page can never be moved into another sandbox by whoever
 * controls the acceptor), applies the cache's timestamp rule, and starts
 * at most MAX_COMPILES compiles at a time: `sandletd --compile-page` as
 * the page sandbox's own uid, in a session of its own (so that its whole
 * process group can be killed at the wall-clock limit), under
 * no_new_privs inherited from us, confining itself further (build.c).
 * A compiled page gets a new generation of its sandbox: workers started
 * from then on load it (INIT), and the acceptor retires older ones as
 * they finish their request, so no request in flight ever fails.
 *
 * It must never load or run a page, never read what a compile wrote
 * except through the cache's checks (pagecache.c), and never let the
 * acceptor choose a path outside a sandbox's pages.
 */
#include "config.h"

#include "sandbox/pages.h"
#include "sandbox/spawner.h"
#include "common/log.h"
#include "csp/pagecache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Compiles running at once: a core each on a small machine; the rest
 * wait their turn, and nothing else waits for them. */
#define MAX_COMPILES 2
/* What the pages of one sandbox may add to its workers' INIT frame. */
#define PAGES_INIT_MAX ((size_t)160 * 1024)
/* A page whose compile failed answers 500 to every request, and the log
 * says why when it fails, at start, and then on a request at most this
 * often: an operator who missed the first line (it came before a restart,
 * or was rotated away) still finds one, and a busy broken page does not
 * fill the log. */
#define FAILED_SAY_MS ((uint64_t)60 * 1000)
/* Time a compile's process gets beyond page-compile-timeout to write its
 * diagnostics after cutting the compiler off itself. */
#define WALL_GRACE_MS 2000

typedef struct page {
    char *rel;
    char *path; /* "/" rel: the request path, for the worker's logs */
    char so[PATH_MAX];
    dev_t so_dev; /* the .so workers of generation gen load */
    ino_t so_ino;
    struct timespec so_mtime;
    uint32_t gen; /* 0: not loaded by any worker yet */
    bool compiling;
    bool queued;
    bool broken; /* its workers died loading it: left out until it changes */
    /* When a request for it last found its compile failed and said so
     * (monotonic ms, 0: not yet): at most once a FAILED_SAY_MS. */
    uint64_t failed_said;
} page;

typedef struct pagebox {
    page *pages;
    size_t n, cap;
    uint32_t gen;
    uint32_t good_gen;  /* the newest generation a worker started with */
    uint32_t death_gen; /* workers of this generation died before READY ... */
    unsigned deaths;    /* ... this many times */
    size_t init_bytes;  /* what the pages add to INIT, at most (init_cost) */
    char cachedir[PATH_MAX];
    bool usable; /* the cache folder exists */
    sandlet_wire_page *wire;
    sandlet_init_pages init;
} pagebox;

typedef struct job {
    sandlet_proc proc; /* started by the spawner (spawner.c) */
    uv_timer_t timer;
    size_t sandbox, index;
    char workdir[PATH_MAX];
    bool timed_out;
    int handles; /* open libuv handles of this job: its timer */
    struct job *next;
} job;

/* A page waiting for a compile slot. */
typedef struct pending {
    size_t sandbox, index;
} pending;

static struct {
    sandlet_pages_env env;
    pagebox *boxes;
    int docroot_fd;
    job *jobs; /* running */
    size_t running;
    pending *queue;
    size_t qhead, qlen, qcap;
    char *docroot;    /* resolved at start: what docroot_fd is */
    char **spawn_env; /* env plus PATH and LANG */
    char include[PATH_MAX];
    bool no_compiler; /* page-compiler names nothing installed */
} pg = {.docroot_fd = -1};

/* The directories a page-compiler name is looked up in (build.c's PATH). */
#define COMPILER_PATH SANDLET_COMPILER_PATH

/* Whether the compiler can be run at all: without one, pages compiled
 * ahead of time are still served, and the others say how to get there. */
bool sandlet_pages_compiler_installed(const char *cc)
{
    if (cc[0] == '/')
        return access(cc, X_OK) == 0;
    const char *dirs = COMPILER_PATH;
    while (*dirs) {
        size_t n = strcspn(dirs, ":");
        char path[PATH_MAX];
        if (snprintf(path, sizeof(path), "%.*s/%s", (int)n, dirs, cc) < (int)sizeof(path) &&
            access(path, X_OK) == 0)
            return true;
        dirs += n + (dirs[n] == ':');
    }
    return false;
}

static const sandlet_conf *conf(void)
{
    return pg.env.conf;
}

/* mkdir -p for the cache root, owned by us (root): the compiles and the
 * workers only ever get into their own sandbox's folder below it. */
static int make_dirs(const char *path)
{
    char tmp[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(tmp))
        return -ENAMETOOLONG;
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -errno;
    struct stat st;
    if (stat(tmp, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* One sandbox's folder: ours, readable by its group (its workers and
 * compiles) and by nobody else. */
static int make_box_dir(pagebox *b, const sandlet_sandbox_conf *sb, const sandlet_id *id)
{
    int n = snprintf(b->cachedir, sizeof(b->cachedir), "%s/%s", conf()->page_cache, sb->name);
    if (n < 0 || (size_t)n >= sizeof(b->cachedir))
        return -ENAMETOOLONG;
    int rc = make_dirs(conf()->page_cache);
    if (rc < 0)
        return rc;
    if (mkdir(b->cachedir, 0750) < 0 && errno != EEXIST)
        return -errno;
    int fd = open(b->cachedir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    rc = 0;
    if (geteuid() == 0 && id->uid != UINT32_MAX &&
        (fchown(fd, 0, (gid_t)id->gid) < 0 || fchmod(fd, 0750) < 0))
        rc = -errno;
    close(fd);
    return rc;
}

/* sandlet's own headers: the installed ones, or the source tree's when
 * this sandletd runs from its build tree (tests, the README's first
 * command). */
static void find_include(void)
{
    static const char *const dirs[] = {SANDLET_INCLUDEDIR, SANDLET_SRC_INCLUDEDIR};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        char hdr[PATH_MAX];
        if (snprintf(hdr, sizeof(hdr), "%s/sandlet/csp.h", dirs[i]) >= (int)sizeof(hdr))
            continue;
        if (access(hdr, R_OK) == 0) {
            snprintf(pg.include, sizeof(pg.include), "%s", dirs[i]);
            return;
        }
    }
    pg.include[0] = '\0';
}

static int build_env(void)
{
    size_t n = 0;
    while (pg.env.env && pg.env.env[n])
        n++;
    pg.spawn_env = calloc(n + 3, sizeof(char *));
    if (!pg.spawn_env)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        pg.spawn_env[i] = pg.env.env[i];
    /* The compiler is looked up here; nothing else of ours is passed. */
    pg.spawn_env[n] = "PATH=" COMPILER_PATH;
    pg.spawn_env[n + 1] = "LANG=C";
    return 0;
}

static void preload(size_t sandbox);
static int rebuild_init(pagebox *b);

int sandlet_pages_start(const sandlet_pages_env *env)
{
    pg.env = *env;
    const sandlet_conf *c = conf();
    /* Every sandbox has a code generation (a reload raises it), pages or
     * not. */
    pg.boxes = calloc(c->nsandboxes ? c->nsandboxes : 1, sizeof(*pg.boxes));
    if (!pg.boxes) {
        sandlet_error("out of memory preparing the sandboxes' code generations");
        return -ENOMEM;
    }
    if (!c->npages)
        return 0;
    if (build_env() < 0) {
        sandlet_error("out of memory preparing C Server Pages");
        return -ENOMEM;
    }
    find_include();
    if (c->page_compiler && !sandlet_pages_compiler_installed(c->page_compiler)) {
        pg.no_compiler = true;
        sandlet_warn("pages: page-compiler '%s' is not installed (looked in %s); pages are served "
                     "only when compiled ahead of time with 'sandlet-csp compile -c %s' -- "
                     "install gcc, or set 'page-compiler off;' to say so",
                     c->page_compiler, COMPILER_PATH, c->file);
    }
    if (c->page_compiler && !pg.no_compiler && !pg.include[0])
        sandlet_warn("pages: sandlet's headers (sandlet/csp.h) are in neither %s nor %s; "
                     "compiles will fail until libsandlet-dev is installed",
                     SANDLET_INCLUDEDIR, SANDLET_SRC_INCLUDEDIR);
    /* The docroot is what it was at start, for the checks (the
     * descriptor) and the compiles (the resolved path) alike, and the
     * acceptor's too: a symlinked docroot switched to another release is
     * seen after a restart, never half of it. */
    pg.docroot_fd = open(c->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    pg.docroot = pg.docroot_fd >= 0 ? realpath(c->docroot, NULL) : NULL;
    if (pg.docroot_fd >= 0 && !pg.docroot) {
        close(pg.docroot_fd);
        pg.docroot_fd = -1;
    }
    if (pg.docroot_fd < 0)
        sandlet_log_errno(SANDLET_LOG_ERROR, -errno,
                          "pages: docroot %s cannot be opened; pages answer 404 until it exists "
                          "and sandletd is restarted",
                          c->docroot);
    for (size_t i = 0; i < c->nsandboxes; i++) {
        const sandlet_sandbox_conf *sb = &c->sandboxes[i];
        if (!sb->pages)
            continue;
        int rc = make_box_dir(&pg.boxes[i], sb, &env->ids[i]);
        pg.boxes[i].usable = rc == 0;
        if (rc < 0)
            sandlet_log_errno(SANDLET_LOG_ERROR, rc,
                              "pages of sandbox '%s': cannot make the page cache %s; create it "
                              "(writable by root) or set 'page-cache DIR;' -- its pages answer "
                              "500 meanwhile",
                              sb->name, pg.boxes[i].cachedir);
        else if (pg.docroot_fd >= 0)
            preload(i);
    }
    return 0;
}

const sandlet_init_pages *sandlet_pages_of(size_t sandbox)
{
    /* A sandbox without pages has a generation too once it was reloaded. */
    if (!pg.boxes || sandbox >= conf()->nsandboxes ||
        (!pg.boxes[sandbox].n && !pg.boxes[sandbox].gen))
        return NULL;
    return &pg.boxes[sandbox].init;
}

uint32_t sandlet_pages_new_code(size_t sandbox)
{
    if (!pg.boxes || sandbox >= conf()->nsandboxes)
        return 0;
    pagebox *b = &pg.boxes[sandbox];
    uint32_t old = b->gen;
    b->gen++;
    if (rebuild_init(b) < 0) {
        b->gen = old;
        sandlet_error("sandbox '%s': out of memory starting its new code; its workers keep the "
                      "old code",
                      conf()->sandboxes[sandbox].name);
        return 0;
    }
    return b->gen;
}

bool sandlet_pages_busy(void)
{
    return pg.jobs != NULL;
}

/* ---- answers ------------------------------------------------------------- */

static void answer(size_t sandbox, const char *rel, uint32_t slot, uint32_t gen, int status, int fd)
{
    sandlet_ctl m = {.type = SANDLET_CTL_PAGE,
                     .sandbox = (uint32_t)sandbox,
                     .slot = slot,
                     .pages = gen,
                     .status = status};
    snprintf(m.page, sizeof(m.page), "%s", rel);
    pg.env.tell(&m, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
}

/* The diagnostics of a failed page, for the acceptor's development-mode
 * 500 page: a descriptor, so that it reads them without any access to the
 * cache. */
static int open_diag(const sandlet_page_info *info)
{
    if (!info->diag[0])
        return -1;
    return open(info->diag, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
}

/* Rebuilds what INIT carries of a sandbox's pages. */
static int rebuild_init(pagebox *b)
{
    sandlet_wire_page *w = realloc(b->wire, (b->n ? b->n : 1) * sizeof(*w));
    if (!w)
        return -ENOMEM;
    b->wire = w;
    for (size_t i = 0; i < b->n; i++)
        w[i] = (sandlet_wire_page){.path = b->pages[i].path,
                                   .library = b->pages[i].gen ? b->pages[i].so : ""};
    b->init = (sandlet_init_pages){.gen = b->gen, .pages = w, .npages = b->n};
    return 0;
}

static bool same_so(const page *p, const struct stat *st)
{
    return p->so_dev == st->st_dev && p->so_ino == st->st_ino &&
           p->so_mtime.tv_sec == st->st_mtim.tv_sec && p->so_mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* A READY page: served by workers of its generation, a new one when its
 * shared object is not what workers load (first sight, a compile, a cache
 * rebuilt ahead of time by sandlet-csp). */
static void ready(size_t sandbox, size_t index, const sandlet_page_info *info)
{
    pagebox *b = &pg.boxes[sandbox];
    page *p = &b->pages[index];
    struct stat st;
    if (stat(info->so, &st) < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, -errno, "page /%s: its compiled copy %s is gone",
                          p->rel, info->so);
        answer(sandbox, p->rel, (uint32_t)index, 0, -EIO, -1);
        return;
    }
    if (p->broken && p->so[0] && strcmp(p->so, info->so) == 0 && same_so(p, &st)) {
        /* The build that killed workers, unchanged since. */
        answer(sandbox, p->rel, (uint32_t)index, 0, -ECANCELED, -1);
        return;
    }
    p->broken = false;
    if (!p->gen || strcmp(p->so, info->so) != 0 || !same_so(p, &st)) {
        snprintf(p->so, sizeof(p->so), "%s", info->so);
        p->so_dev = st.st_dev;
        p->so_ino = st.st_ino;
        p->so_mtime = st.st_mtim;
        uint32_t old = p->gen;
        p->gen = ++b->gen;
        if (rebuild_init(b) < 0) {
            p->gen = old;
            answer(sandbox, p->rel, (uint32_t)index, 0, -ENOMEM, -1);
            return;
        }
    }
    answer(sandbox, p->rel, (uint32_t)index, p->gen, 0, -1);
}

/* ---- compiles -------------------------------------------------------------- */

static void start_next(void);

static void job_closed(uv_handle_t *h)
{
    job *j = h->data;
    if (--j->handles == 0)
        free(j);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + 1u;
}

/* A request found the page's last compile failed: say so when the log has
 * not for a while (the compile's own line counts). */
static void say_failed(page *p, const sandlet_page_info *info)
{
    uint64_t now = now_ms();
    if (p->failed_said && now - p->failed_said < FAILED_SAY_MS)
        return;
    p->failed_said = now;
    sandlet_error("page /%s answers 500: its last compile failed: %s%s; fix the page (the "
                  "next request after a change compiles it again); said at most once a minute",
                  p->rel, info->first[0] ? info->first : "see ", info->first[0] ? "" : info->diag);
}

static void finish(job *j, int64_t status, int term_signal)
{
    pagebox *b = &pg.boxes[j->sandbox];
    page *p = &b->pages[j->index];
    /* Whatever the compile left running (a compiler that ignored the
     * build's own limit) goes before its files are read. */
    kill(-j->proc.pid, SIGKILL);
    int build = term_signal || status < 0 || status > 2 ? 2 : (int)status;
    if (j->timed_out || term_signal == SIGKILL || term_signal == SIGXCPU)
        build = 1; /* the page made the compiler run past its limits */
    sandlet_page_info info;
    char err[512] = "";
    int rc = sandlet_page_install(b->cachedir, j->workdir, p->rel, build, &info, err, sizeof(err));
    p->compiling = false;
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "page /%s: %s", p->rel, err);
        answer(j->sandbox, p->rel, (uint32_t)j->index, 0, -EIO, -1);
    } else if (info.state == SANDLET_PAGE_READY) {
        sandlet_info("page /%s compiled for sandbox '%s'", p->rel,
                     conf()->sandboxes[j->sandbox].name);
        ready(j->sandbox, j->index, &info);
    } else {
        if (j->timed_out)
            sandlet_error("page /%s: the compile ran past page-compile-timeout (%u ms) and was "
                          "cut off; the page answers 500 until it changes",
                          p->rel, conf()->page_compile_timeout);
        else if (term_signal == SIGKILL || term_signal == SIGXCPU || term_signal == SIGXFSZ)
            sandlet_error("page /%s: the compile was killed by signal %d (%s: a limit on CPU "
                          "time, memory or file size); the page answers 500 until it changes",
                          p->rel, term_signal, strsignal(term_signal));
        else if (term_signal)
            sandlet_error("page /%s: the compile process died of signal %d (%s); the page is "
                          "compiled again at its next request",
                          p->rel, term_signal, strsignal(term_signal));
        else
            sandlet_error("page /%s: compile failed: %s%s", p->rel,
                          info.first[0] ? info.first : "see ", info.first[0] ? "" : info.diag);
        p->failed_said = now_ms();
        answer(j->sandbox, p->rel, (uint32_t)j->index, 0,
               j->timed_out ? -ETIMEDOUT
               : build == 2 ? -EIO
                            : -ENOEXEC,
               open_diag(&info));
    }
}

static void job_exited(sandlet_proc *proc, int64_t status, int term_signal)
{
    job *j = proc->data;
    uv_timer_stop(&j->timer);
    for (job **pp = &pg.jobs; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    pg.running--;
    if (pg.boxes)
        finish(j, status, term_signal);
    uv_close((uv_handle_t *)&j->timer, job_closed);
    start_next();
}

static void job_timeout(uv_timer_t *t)
{
    job *j = t->data;
    j->timed_out = true;
    kill(-j->proc.pid, SIGKILL);
}

/* Whether the resolved docroot still names the folder the descriptor
 * holds (it was moved or replaced since the start otherwise: a compile
 * would read something else than the checks do). */
static bool docroot_moved(void)
{
    struct stat a, b;
    return fstat(pg.docroot_fd, &a) < 0 || stat(pg.docroot, &b) < 0 || a.st_dev != b.st_dev ||
           a.st_ino != b.st_ino;
}

static void compile(size_t sandbox, size_t index)
{
    pagebox *b = &pg.boxes[sandbox];
    page *p = &b->pages[index];
    if (docroot_moved()) {
        sandlet_error("page /%s: the docroot %s was moved or replaced since sandletd started; "
                      "pages are not compiled until sandletd is restarted",
                      p->rel, pg.docroot);
        p->compiling = false;
        answer(sandbox, p->rel, (uint32_t)index, 0, -EIO, -1);
        return;
    }
    const sandlet_id *id = &pg.env.ids[sandbox];
    job *j = calloc(1, sizeof(*j));
    if (!j) {
        p->compiling = false;
        answer(sandbox, p->rel, (uint32_t)index, 0, -ENOMEM, -1);
        return;
    }
    j->sandbox = sandbox;
    j->index = index;
    uid_t uid = id->uid == UINT32_MAX ? geteuid() : (uid_t)id->uid;
    gid_t gid = id->gid == UINT32_MAX ? getegid() : (gid_t)id->gid;
    int rc = sandlet_page_workdir(b->cachedir, p->rel, uid, gid, j->workdir, sizeof(j->workdir));
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc,
                          "page /%s: cannot make its work folder in %s; check that the page "
                          "cache is on a writable file system",
                          p->rel, b->cachedir);
        free(j);
        p->compiling = false;
        answer(sandbox, p->rel, (uint32_t)index, 0, -EIO, -1);
        return;
    }
    char cpu[16], wall[16];
    /* The compile's own limit on CPU time follows the wall clock's: a
     * page cannot buy more by forking. */
    unsigned secs = conf()->page_compile_timeout / 1000 + 1;
    snprintf(cpu, sizeof(cpu), "%u", secs);
    snprintf(wall, sizeof(wall), "%u", conf()->page_compile_timeout);
    char *args[24];
    size_t n = 0;
    args[n++] = "sandletd";
    args[n++] = "--compile-page";
    args[n++] = "--docroot";
    args[n++] = pg.docroot;
    args[n++] = "--page";
    args[n++] = p->rel;
    args[n++] = "--workdir";
    args[n++] = j->workdir;
    args[n++] = "--cc";
    args[n++] = conf()->page_compiler;
    if (pg.include[0]) {
        args[n++] = "-I";
        args[n++] = pg.include;
    }
    args[n++] = "--cpu";
    args[n++] = cpu;
    args[n++] = "--wall";
    args[n++] = wall;
    args[n] = NULL;
    /* Standard error is its own errors: the log. */
    int fds[3] = {-1, -1, STDERR_FILENO};
    sandlet_spawn_opts opts = {
        .file = SANDLET_SPAWN_SELF,
        .args = args,
        .env = pg.spawn_env,
        .fds = fds,
        .nfds = 3,
        /* A session of its own: its process group is killed whole. */
        .detached = true,
        /* Dropped in the child before exec: none of it runs as root. */
        .uid = id->uid,
        .gid = id->gid,
    };
    j->proc.data = j;
    j->proc.exit_cb = job_exited;
    j->timer.data = j;
    uv_timer_init(pg.env.loop, &j->timer);
    j->handles = 1;
    rc = sandlet_spawn(&j->proc, &opts);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "page /%s: cannot start its compile", p->rel);
        sandlet_page_workdir_remove(j->workdir);
        p->compiling = false;
        uv_close((uv_handle_t *)&j->timer, job_closed);
        answer(sandbox, p->rel, (uint32_t)index, 0, -EIO, -1);
        return;
    }
    uv_timer_start(&j->timer, job_timeout, (uint64_t)conf()->page_compile_timeout + WALL_GRACE_MS,
                   0);
    j->next = pg.jobs;
    pg.jobs = j;
    pg.running++;
    sandlet_debug("page /%s: compiling (pid %d)", p->rel, j->proc.pid);
}

static void start_next(void)
{
    while (pg.running < MAX_COMPILES && pg.qlen) {
        pending q = pg.queue[pg.qhead];
        pg.qhead = (pg.qhead + 1) % pg.qcap;
        pg.qlen--;
        pg.boxes[q.sandbox].pages[q.index].queued = false;
        compile(q.sandbox, q.index);
    }
}

/* Queues a compile; the queue holds each page at most once, so its size
 * is bounded by the pages there are. */
static int enqueue(size_t sandbox, size_t index)
{
    if (pg.qlen == pg.qcap) {
        size_t ncap = pg.qcap ? pg.qcap * 2 : 16;
        pending *q = calloc(ncap, sizeof(*q));
        if (!q)
            return -ENOMEM;
        for (size_t i = 0; i < pg.qlen; i++)
            q[i] = pg.queue[(pg.qhead + i) % pg.qcap];
        free(pg.queue);
        pg.queue = q;
        pg.qcap = ncap;
        pg.qhead = 0;
    }
    pg.queue[(pg.qhead + pg.qlen) % pg.qcap] = (pending){sandbox, index};
    pg.qlen++;
    pg.boxes[sandbox].pages[index].queued = true;
    pg.boxes[sandbox].pages[index].compiling = true;
    start_next();
    return 0;
}

/* ---- the acceptor's questions ---------------------------------------------- */

/* The most a page adds to INIT: its path and its library (a key in the
 * sandbox's cache folder), each a length, the bytes and a NUL. */
static size_t init_cost(const pagebox *b, const char *rel)
{
    return 4 + 1 + strlen(rel) + 1 + 4 + strlen(b->cachedir) + 1 + SANDLET_PAGE_KEY_MAX + 3 + 1;
}

static ssize_t find_or_add(pagebox *b, const char *rel)
{
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->pages[i].rel, rel) == 0)
            return (ssize_t)i;
    /* INIT is written into a new worker's socket before it runs: it must
     * fit the socket's buffer on any kernel (net.core.wmem_max, 208 KiB by
     * default), or no worker of the sandbox could start. */
    if (b->n >= SANDLET_MAX_PAGES || b->init_bytes + init_cost(b, rel) > PAGES_INIT_MAX)
        return -ENOSPC;
    if (b->n == b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 16;
        page *np = realloc(b->pages, ncap * sizeof(*np));
        if (!np)
            return -ENOMEM;
        b->pages = np;
        b->cap = ncap;
    }
    page *p = &b->pages[b->n];
    memset(p, 0, sizeof(*p));
    size_t len = strlen(rel);
    p->rel = malloc(len + 1);
    p->path = malloc(len + 2);
    if (!p->rel || !p->path) {
        free(p->rel);
        free(p->path);
        return -ENOMEM;
    }
    memcpy(p->rel, rel, len + 1);
    p->path[0] = '/';
    memcpy(p->path + 1, rel, len + 1);
    b->n++;
    b->init_bytes += init_cost(b, rel);
    if (rebuild_init(b) < 0) {
        b->n--;
        b->init_bytes -= init_cost(b, rel);
        free(p->rel);
        free(p->path);
        return -ENOMEM;
    }
    return (ssize_t)(b->n - 1);
}

/* The pages of a sandbox's cache that are up to date go into the first
 * workers' INIT (generation 1): after a restart, the first request of
 * each page then finds it loaded, instead of replacing every worker of
 * the sandbox to load it. */
static void preload(size_t sandbox)
{
    pagebox *b = &pg.boxes[sandbox];
    DIR *d = opendir(b->cachedir);
    if (!d)
        return;
    size_t loaded = 0;
    const struct dirent *e;
    while ((e = readdir(d)) && b->n < SANDLET_MAX_PAGES) {
        size_t len = strlen(e->d_name);
        if (len < 7 || e->d_name[0] == '.' || strcmp(e->d_name + len - 6, ".stamp") != 0)
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            continue;
        char *text = malloc(SANDLET_PAGE_MAX_STAMP);
        ssize_t n = text ? read(fd, text, SANDLET_PAGE_MAX_STAMP) : -1;
        close(fd);
        sandlet_page_stamp st;
        int rc = n > 0 ? sandlet_page_stamp_parse(text, (size_t)n, &st) : -EINVAL;
        free(text);
        if (rc < 0)
            continue;
        const sandlet_pages_conf *map = sandlet_conf_pages_for(conf(), st.rel);
        sandlet_page_info info;
        struct stat so;
        ssize_t idx = -1;
        bool checked = map && map->sandbox == sandbox &&
                       sandlet_page_check(b->cachedir, pg.docroot_fd, st.rel, &info) == 0;
        if (checked && st.ok && info.state == SANDLET_PAGE_READY && stat(info.so, &so) == 0)
            idx = find_or_add(b, st.rel);
        else if (checked && !st.ok && info.state == SANDLET_PAGE_FAILED)
            /* Its compile failed before this start, and nothing logged it
             * since: the page answers 500 until it changes, so say it now,
             * not only when it changes (issue 31). */
            sandlet_error("page /%s: its last compile, before this start, failed: %s%s; it "
                          "answers 500 until the page is fixed",
                          st.rel, info.first[0] ? info.first : "see ",
                          info.first[0] ? "" : info.diag);
        sandlet_page_stamp_free(&st);
        if (idx < 0)
            continue;
        page *p = &b->pages[idx];
        snprintf(p->so, sizeof(p->so), "%s", info.so);
        p->so_dev = so.st_dev;
        p->so_ino = so.st_ino;
        p->so_mtime = so.st_mtim;
        p->gen = 1;
        loaded++;
    }
    closedir(d);
    if (loaded) {
        b->gen = 1;
        if (rebuild_init(b) < 0)
            for (size_t i = 0; i < b->n; i++)
                b->pages[i].gen = 0;
        sandlet_info("sandbox '%s': %zu compiled pages are up to date",
                     conf()->sandboxes[sandbox].name, loaded);
    }
}

void sandlet_pages_check(const sandlet_ctl *m)
{
    const sandlet_conf *c = conf();
    const char *rel = m->page;
    if (!pg.boxes || m->sandbox >= c->nsandboxes) {
        pg.env.refuse("PAGE_CHECK for sandbox %u, which serves no pages", m->sandbox);
        return;
    }
    size_t sandbox = m->sandbox;
    const sandlet_pages_conf *map =
        sandlet_page_rel_check(rel) == 0 ? sandlet_conf_pages_for(c, rel) : NULL;
    if (!map || map->sandbox != sandbox) {
        /* The acceptor maps pages with the same configuration: a question
         * for another sandbox is a hostile one. */
        pg.env.refuse("PAGE_CHECK for a page sandbox '%s' does not serve",
                      c->sandboxes[sandbox].name);
        answer(sandbox, rel, 0, 0, -EPERM, -1);
        return;
    }
    pagebox *b = &pg.boxes[sandbox];
    if (!b->usable || pg.docroot_fd < 0) {
        answer(sandbox, rel, 0, 0, -EIO, -1);
        return;
    }
    ssize_t idx = find_or_add(b, rel);
    if (idx < 0) {
        if (idx == -ENOSPC)
            sandlet_error("sandbox '%s' has %zu pages, the most it can hold (at most %d, and "
                          "their paths at most %zu KiB); page /%s answers 503 (map its folder to "
                          "another sandbox with a 'pages' block)",
                          c->sandboxes[sandbox].name, b->n, SANDLET_MAX_PAGES,
                          PAGES_INIT_MAX / 1024, rel);
        answer(sandbox, rel, 0, 0, (int)idx, -1);
        return;
    }
    page *p = &b->pages[idx];
    if (p->compiling)
        return; /* its compile's end answers */
    sandlet_page_info info;
    int rc = sandlet_page_check(b->cachedir, pg.docroot_fd, rel, &info);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "page /%s: cannot check its cache in %s", rel,
                          b->cachedir);
        answer(sandbox, rel, (uint32_t)idx, 0, rc == -EINVAL ? -ENOENT : -EIO, -1);
        return;
    }
    switch (info.state) {
    case SANDLET_PAGE_MISSING: answer(sandbox, rel, (uint32_t)idx, 0, -ENOENT, -1); return;
    case SANDLET_PAGE_READY: ready(sandbox, (size_t)idx, &info); return;
    case SANDLET_PAGE_FAILED:
        say_failed(p, &info);
        answer(sandbox, rel, (uint32_t)idx, 0, -ENOEXEC, open_diag(&info));
        return;
    case SANDLET_PAGE_STALE: break;
    }
    if (!c->page_compiler || pg.no_compiler) {
        sandlet_error("page /%s is not compiled (or changed since) and %s; run 'sandlet-csp "
                      "compile -c %s' to compile it ahead of time",
                      rel,
                      pg.no_compiler ? "the page compiler is not installed"
                                     : "'page-compiler off' is set",
                      c->file);
        answer(sandbox, rel, (uint32_t)idx, 0, -ENOSYS, -1);
        return;
    }
    if ((rc = enqueue(sandbox, (size_t)idx)) < 0) {
        p->compiling = false;
        answer(sandbox, rel, (uint32_t)idx, 0, rc, -1);
    }
}

void sandlet_pages_worker_ready(size_t sandbox, uint32_t gen)
{
    if (!pg.boxes || sandbox >= conf()->nsandboxes)
        return;
    pagebox *b = &pg.boxes[sandbox];
    if (gen > b->good_gen)
        b->good_gen = gen;
    if (gen >= b->death_gen)
        b->deaths = 0;
}

bool sandlet_pages_worker_died(size_t sandbox, uint32_t gen)
{
    if (!pg.boxes || sandbox >= conf()->nsandboxes)
        return false;
    pagebox *b = &pg.boxes[sandbox];
    if (!b->n || gen <= b->good_gen)
        return false; /* not a page's doing: workers started with these pages */
    if (gen != b->death_gen) {
        b->death_gen = gen;
        b->deaths = 0;
    }
    /* Twice, so that one unlucky start (an out-of-memory kill, a servlet
     * whose init fails once) blames no page. */
    if (++b->deaths < 2)
        return false;
    /* The newest page that workers of this generation load and no worker
     * ever started with. */
    page *bad = NULL;
    size_t at = 0;
    for (size_t i = 0; i < b->n; i++) {
        page *p = &b->pages[i];
        if (p->gen > b->good_gen && p->gen <= gen && (!bad || p->gen > bad->gen)) {
            bad = p;
            at = i;
        }
    }
    if (!bad)
        return false;
    uint32_t old = bad->gen;
    bad->broken = true;
    bad->gen = 0;
    b->gen++;
    if (rebuild_init(b) < 0) {
        bad->gen = old;
        bad->broken = false;
        b->gen--;
        return false;
    }
    b->deaths = 0;
    sandlet_error("page /%s: workers of sandbox '%s' died while loading it (its init section or "
                  "a constructor crashed); it is left out of the sandbox's workers and answers "
                  "500 until it changes",
                  bad->rel, conf()->sandboxes[sandbox].name);
    answer(sandbox, bad->rel, (uint32_t)at, 0, -ECANCELED, -1);
    return true;
}

void sandlet_pages_stop(void)
{
    for (job *j = pg.jobs; j; j = j->next) {
        j->timed_out = true;
        kill(-j->proc.pid, SIGKILL);
    }
    pg.qlen = 0;
}

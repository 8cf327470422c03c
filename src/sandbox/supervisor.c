/*
 * supervisor.c - the privileged side: decides, starts and reaps every
 * worker.
 *
 * It is forked from sandletd before any client connects and is the only
 * process that may keep root.  From its own parsed configuration it sizes
 * each sandbox's pool (one live child per slot, the generation increasing
 * with each start, restarts backing off when a slot crash-loops), makes
 * each worker's channel and writes its INIT frame, and has its spawner
 * (spawner.c) start the worker already under its sandbox's identity,
 * with an empty environment and nothing but its descriptors 0-6: it holds
 * neither CAP_SETUID nor the right to exec itself (harden.h).  The
 * acceptor then gets the channel and the worker's output pipe.  It must
 * never read network input, servlet output or frames, and never let the
 * acceptor choose a worker's libraries, identity, confinement or count:
 * the acceptor may only ask for a live worker's death and for a log
 * reopen, and every message it sends is checked as hostile.  It signals
 * only the children the spawner started for it, through their pidfds.
 */
#include "config.h"

#include "sandbox/supervisor.h"
#include "sandbox/worker.h"
#include "common/log.h"
#include "sandbox/confine.h"
#include "sandbox/claim.h"
#include "sandbox/control.h"
#include "sandbox/harden.h"
#include "sandbox/identity.h"
#include "common/landlock.h"
#include "common/listen.h"
#include "common/state.h"
#include "sandbox/init.h"
#include "sandbox/learn.h"
#include "sandbox/audit.h"
#include "sandbox/denial.h"
#include "sandbox/pages.h"
#include "sandbox/quota.h"
#include "sandbox/session_store.h"
#include "sandbox/spawner.h"
#include "sandbox/upgrade.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

/* How long workers get to leave on their own at shutdown. */
#define SHUTDOWN_GRACE_MS 3000
/* How often the writable directories of sandboxes with a write quota are
 * measured: what a sandbox can write past its quota is what it writes in
 * this time (each file at most its max-file-size). */
#define QUOTA_CHECK_MS 2000
/* How often the session stores' headers are checked.  Only a sandbox's
 * own workers can write its store; one that wrote over the header makes
 * the sandbox's session calls fail (EIO) until the next check rebuilds
 * it, so this bounds that outage.  A check is three loads per store. */
#define STORE_CHECK_MS 1000
/* How often the acceptor is told each sandbox's total of Landlock
 * denials (its status page), at most. */
#define DENIALS_MS 200

/* development on: how often each servlet library is looked at, so that
 * a rebuilt servlet is served by new workers without a reload, as an
 * edited page is (issue 31).  One stat per library. */
#define WATCH_MS 250
/* A live worker seen holding its store's lock at this many consecutive
 * checks is stuck or hostile (no operation holds it for more than
 * microseconds): it is killed, and its exit releases the lock. */
#define STORE_HOLD_CHECKS 5
/* Crash-looping slots back off: 0, 100 ms, 200 ms, ... up to this. */
#define RESTART_MAX_MS 30000u
/* A worker that lived this long was not crash-looping, even if the
 * acceptor never said it became ready. */
#define HEALTHY_MS 10000u
/* Log reopens done per second; more asks wait for the next second (they
 * are coalesced into one), so a flood costs nothing and none is lost. */
#define REOPEN_PER_SEC 2
/* Refusals logged per second; the rest are counted and summarised. */
#define REFUSALS_PER_SEC 10
/* Messages read from the acceptor per loop turn: a flood must not keep
 * the supervisor from reaping and restarting. */
#define READS_PER_TURN 256

typedef struct slot slot;
typedef struct box box;
typedef struct plan plan;
typedef struct store sstore;

/* One started worker, until its exit is reported. */
typedef struct child {
    sandlet_proc proc; /* started by the spawner (spawner.c) */
    slot *slot;
    uint32_t gen;
    uint64_t started;
    bool kill_asked; /* by the acceptor, max-requests or a quota: no crash */
    bool ready;      /* the acceptor said it started its servlets */
    uint32_t pages;  /* the pages generation of its INIT */
    int32_t seccomp; /* 1 + the call the kernel's seccomp record names: 0, none seen */
    uint32_t code;   /* its box's code_news when it was started */
} child;

/* One place in a sandbox's pool.  It has at most one live child. */
struct slot {
    box *box;
    uint32_t index;
    uint32_t gen;
    unsigned failures; /* consecutive short-lived crashes */
    child *live;
    uv_timer_t restart;
};

/* A parsed configuration (a plan, sandlet_conf_plan) that boxes live in:
 * the one read at start, and one per reload that made or changed a
 * sandbox.  Freed when no box uses it and a newer one is current. */
struct plan {
    sandlet_conf *conf;
    unsigned refs;
    plan *next;
};

/* A memory session store, shared by the boxes of one sandbox name while
 * a reload replaces one by the other (workers of both serve meanwhile). */
struct store {
    int fd;
    sandlet_session_store *map; /* ours, to check its header and lock */
    size_t size;
    pid_t holder;   /* the live holder last seen */
    unsigned held;  /* checks it has been seen at */
    uint64_t round; /* the last check that saw it: shared, it is checked once */
    unsigned refs;
};

/* One sandbox as it runs: made at start (id = its index) or by a reload
 * that adds or changes the sandbox (a new id), kept by reloads that leave
 * it the same (sandlet_conf_sandbox_same), retired by one that changes or
 * removes it: a retired box starts no worker again, and goes once its
 * last worker has (the acceptor closes each when its requests are done). */
struct box {
    uint32_t id;
    plan *plan;
    size_t index; /* its sandbox in plan->conf */
    const sandlet_sandbox_conf *sb;
    sandlet_id ident;
    uint8_t key[SANDLET_SESSION_KEY_LEN];
    bool write_blocked; /* over its write quota */
    bool spool_said;    /* its spool could not be made: said once */
    bool spool_emptied; /* its spool folder's names were removed */
    slot *slots;
    size_t nslots;
    sstore *store; /* NULL: no memory sessions */
    /* Boxes of the start plan keep their code generation in pages.c;
     * boxes made by a reload serve no pages and keep it here. */
    bool start;
    uint32_t code_gen;
    /* New code generations given by a reload or the development watch
     * (new_code), not by pages: a worker started before the last one
     * failed with other servlet libraries than a new one would load. */
    uint32_t code_news;
    /* Its servlet libraries' files as last seen (code_stamp): a reload
     * replaces its workers only when one of them changed. */
    unsigned char stamp[32];
    /* Landlock denials the kernel recorded of its workers (audit.c), for
     * the acceptor's status page (DENIALS), and the total it was sent. */
    uint32_t denials, denials_told;
    bool retired;
    bool started; /* box_start ran: its slots' timers exist */
    /* Retired: its workers leave when the acceptor closes them; past
     * this timer they are killed, so that confinement a reload tightened
     * never waits on the acceptor's good will. */
    uv_timer_t deadline;
    bool deadline_on;
    unsigned deadline_ms;
    unsigned handles; /* restart timers still closing after retirement */
    box *next;
};

static struct {
    const sandlet_conf *conf; /* the current plan: the file, logs, pages */
    plan *plan, *plans;
    box *boxes;
    uint32_t next_id;
    unsigned char secret_hash[32]; /* of the session secret read at start */
    uv_loop_t loop;
    uv_poll_t poll;
    bool polling_out;
    uv_timer_t grace;
    uv_timer_t quota;
    uv_timer_t stores;       /* STORE_CHECK_MS */
    uv_timer_t watch;        /* WATCH_MS, with development on */
    uv_timer_t reopen;       /* a reopen deferred by REOPEN_PER_SEC */
    uv_timer_t reload_timer; /* a reload deferred to the end of its second */
    uv_timer_t denials;      /* DENIALS_MS: Landlock denials' totals to the acceptor */
    uv_timer_t outlived;     /* an upgrade handed over: the previous acceptor's last moment */
    int ctl;
    sandlet_ctl_queue out; /* to the acceptor, waiting for room */
    char exe[32];          /* "/proc/self/fd/N" */
    char parent[16];       /* the spawner's pid, the workers' parent, for their argv */
    char *env[5];          /* what a worker's environment holds, NULL-ended */
    bool confine;
    sandlet_id acceptor;
    sandlet_id *start_ids; /* per sandbox of the start plan, for pages.c */
    size_t nslots;         /* of every box */
    size_t nlive;
    uint64_t last_reload;           /* uv_now of the last reload carried out */
    const sandlet_conf *start_conf; /* sandlet_supervisor_run's (the caller frees it) */
    uint64_t reopen_window, refusal_window;
    unsigned reopens, refusals, suppressed;
    bool closing;
    bool finished;
    /* The state file (state.h): what "sandletd -s" and the init script
     * read, and systemd's readiness. */
    char state_path[4096];
    sandlet_state state;
    bool state_said; /* a failed write was logged */
} sv;

/* Refusals are logged, but a flood of them must not become a flood of
 * log lines: at most REFUSALS_PER_SEC a second, then one summary. */
static void refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void refuse(const char *fmt, ...)
{
    uint64_t sec = uv_now(&sv.loop) / 1000;
    if (sec != sv.refusal_window) {
        if (sv.suppressed)
            sandlet_error("%u more control messages from the acceptor were refused", sv.suppressed);
        sv.refusal_window = sec;
        sv.refusals = 0;
        sv.suppressed = 0;
    }
    if (sv.refusals >= REFUSALS_PER_SEC) {
        sv.suppressed++;
        return;
    }
    sv.refusals++;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sandlet_error("refused a control message from the acceptor: %s", msg);
}

static void update_poll(void);

/* Sends to the acceptor, or queues when its socket is full: nothing the
 * acceptor must learn (a worker, an exit) is ever dropped. */
static void tell(const sandlet_ctl *m, const int *fds, size_t nfd)
{
    if (sv.ctl < 0) {
        for (size_t i = 0; i < nfd; i++)
            close(fds[i]);
        return;
    }
    int rc = sandlet_ctl_queue_send(&sv.out, sv.ctl, m, fds, nfd);
    if (rc < 0)
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot report to the acceptor");
    update_poll();
}

static void on_ctl(uv_poll_t *p, int status, int events);

static void update_poll(void)
{
    if (sv.ctl < 0 || sv.closing)
        return;
    bool want = sv.out.head != NULL;
    if (want == sv.polling_out)
        return;
    sv.polling_out = want;
    uv_poll_start(&sv.poll, UV_READABLE | UV_DISCONNECT | (want ? UV_WRITABLE : 0), on_ctl);
}

static void box_closed(uv_handle_t *h);
static void box_deadline_closed(uv_handle_t *h);
static void box_deadline(box *b);

static void maybe_finish(void)
{
    if (sv.closing && sv.nlive == 0 && !sv.finished) {
        sv.finished = true;
        sandlet_spawner_unwatch();
        uv_timer_stop(&sv.grace);
        uv_close((uv_handle_t *)&sv.grace, NULL);
        for (box *b = sv.boxes; b; b = b->next) {
            for (size_t i = 0; b->started && i < b->nslots; i++)
                if (!uv_is_closing((uv_handle_t *)&b->slots[i].restart))
                    uv_close((uv_handle_t *)&b->slots[i].restart, NULL);
            if (b->deadline_on && !uv_is_closing((uv_handle_t *)&b->deadline))
                uv_close((uv_handle_t *)&b->deadline, NULL);
        }
    }
}

/* ---- the state file ------------------------------------------------------------ */

/* Writes the state file.  A daemon that cannot is still a daemon: it
 * says so once (at the info level for the default path when not root,
 * as in tests and development, where /run is not ours). */
static void state_save(void)
{
    /* During an upgrade the file is the new daemon's until it fails. */
    if (!sv.state_path[0] || sandlet_upgrade_busy())
        return;
    int rc = sandlet_state_write(sv.state_path, &sv.state);
    if (rc == 0 || sv.state_said)
        return;
    sv.state_said = true;
    bool quiet = !sv.conf->state_file && geteuid() != 0;
    sandlet_log_errno(quiet ? SANDLET_LOG_INFO : SANDLET_LOG_WARN, rc,
                      "cannot write the state file %s: 'sandletd -s reload' and the init script "
                      "cannot learn reload verdicts (set 'state-file' in %s to a file in a "
                      "folder root may write)",
                      sv.state_path, sv.conf->file);
}

/* A reload's verdict, for whoever sent the SIGHUP ("sandletd -s reload"
 * waits for the count to change). */
static void state_verdict(bool applied, const char *message)
{
    sv.state.reloads++;
    snprintf(sv.state.verdict, sizeof(sv.state.verdict), "%s", applied ? "applied" : "refused");
    snprintf(sv.state.message, sizeof(sv.state.message), "%s", message);
    state_save();
}

/* An upgrade's end (upgrade.c).  Handed over: the state file is the new
 * daemon's from now on, never written or removed here again.  Failed:
 * this daemon's again, with the failure as a refused verdict, which is
 * what "sandletd -s upgrade" waits for. */
/* The previous acceptor, SANDLET_UPGRADE_OUTLIVE_MS after a new daemon
 * took over, has not stopped: its drain is long over, so it is hung or
 * no longer ours (a client took it over and keeps accepting on the
 * listeners it shares with the new daemon).  Its exit closes our control
 * socket, and we stop too, as at any acceptor's end. */
static void on_outlived(uv_timer_t *t)
{
    (void)t;
    pid_t acceptor = getppid();
    if (acceptor <= 1 || (long)acceptor != sv.state.pid)
        return; /* gone already: we were reparented */
    sandlet_error("upgrade: the previous acceptor (pid %d) still runs %d s after the new daemon "
                  "took over, past its drain; killing it",
                  (int)acceptor, SANDLET_UPGRADE_OUTLIVE_MS / 1000);
    if (kill(acceptor, SIGKILL) < 0)
        sandlet_log_errno(SANDLET_LOG_ERROR, -errno, "cannot kill the previous acceptor (pid %d)",
                          (int)acceptor);
}

static void upgrade_done(bool handed, long pid, const char *message)
{
    (void)pid;
    if (handed) {
        sv.state_path[0] = '\0';
        uv_timer_start(&sv.outlived, on_outlived, SANDLET_UPGRADE_OUTLIVE_MS, 0);
        return;
    }
    state_verdict(false, message);
}

/* Ready once every sandbox of the start has a worker that said READY, or
 * has seen one fail (a crash-looping sandbox is the error log's news, not
 * a reason to hold the whole daemon as "starting" for ever).  The
 * listeners were bound before the supervisor was forked. */
static void maybe_ready(void)
{
    if (strcmp(sv.state.phase, "ready") == 0 || sv.closing)
        return;
    for (box *b = sv.boxes; b; b = b->next) {
        bool up = !b->start || b->retired || b->nslots == 0;
        for (size_t i = 0; !up && i < b->nslots; i++)
            up = (b->slots[i].live && b->slots[i].live->ready) || b->slots[i].failures > 0;
        if (!up)
            return;
    }
    snprintf(sv.state.phase, sizeof(sv.state.phase), "ready");
    state_save();
    /* The acceptor is the service's main process: it tells systemd. */
    sandlet_ctl m = {.type = SANDLET_CTL_NOTIFY};
    tell(&m, NULL, 0);
    sandlet_info("ready: every sandbox has a worker up");
}

/* ---- boxes, plans, stores --------------------------------------------------- */

/* Frees p once no box lives in it and it is neither the current plan nor
 * the start's (pages.c keeps using that one). */
static void plan_maybe_free(plan *p)
{
    if (!p || p->refs > 0 || p == sv.plan || p->conf == sv.start_conf)
        return;
    /* One a reload is still preparing is not listed yet: its owner
     * frees it (reloading_free). */
    for (plan **pp = &sv.plans; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            sandlet_conf_free(p->conf);
            free(p);
            return;
        }
}

static void plan_put(plan *p)
{
    if (p) {
        p->refs--;
        plan_maybe_free(p);
    }
}

static void store_put(sstore *st)
{
    if (!st || --st->refs > 0)
        return;
    sandlet_session_store_detach(st->map);
    if (st->fd >= 0)
        close(st->fd);
    free(st);
}

static unsigned box_live(const box *b)
{
    unsigned n = 0;
    for (size_t i = 0; i < b->nslots; i++)
        n += b->slots[i].live != NULL;
    return n;
}

/* Frees a box whose slot timers are closed (or were never started). */
static void box_free(box *b)
{
    if (b->key[0] || b->key[1])
        sodium_memzero(b->key, sizeof(b->key));
    store_put(b->store);
    plan_put(b->plan);
    free(b->slots);
    free(b);
}

static void box_closed(uv_handle_t *h)
{
    slot *s = h->data;
    box *b = s->box;
    if (--b->handles == 0)
        box_free(b);
}

static void box_deadline_closed(uv_handle_t *h)
{
    box *b = h->data;
    if (--b->handles == 0)
        box_free(b);
}

/* A retired box with no live worker leaves: out of the list, its slots'
 * timers closed, then freed. */
static void box_maybe_gone(box *b)
{
    if (!b->retired || sv.closing || box_live(b))
        return;
    for (box **pp = &sv.boxes; *pp; pp = &(*pp)->next)
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    sv.nslots -= b->nslots;
    sandlet_debug("sandbox '%s' (id %u), replaced by a reload, has no worker left", b->sb->name,
                  b->id);
    b->handles = (b->started ? (unsigned)b->nslots : 0) + (b->deadline_on ? 1 : 0);
    if (!b->handles) {
        box_free(b);
        return;
    }
    for (size_t i = 0; b->started && i < b->nslots; i++) {
        uv_timer_stop(&b->slots[i].restart);
        uv_close((uv_handle_t *)&b->slots[i].restart, box_closed);
    }
    if (b->deadline_on) {
        uv_timer_stop(&b->deadline);
        uv_close((uv_handle_t *)&b->deadline, box_deadline_closed);
    }
}

static void on_box_deadline(uv_timer_t *t)
{
    box *b = t->data;
    unsigned n = 0;
    for (size_t i = 0; i < b->nslots; i++) {
        child *c = b->slots[i].live;
        if (c && !c->kill_asked) {
            c->kill_asked = true;
            (void)sandlet_proc_kill(&c->proc, SIGKILL); /* -ESRCH: its exit is on its way */
            n++;
        }
    }
    if (n)
        sandlet_warn("sandbox '%s', replaced by a reload, still had %u worker(s) after %u ms; "
                     "killed them",
                     b->sb->name, n, b->deadline_ms);
}

/* How long a retired box's workers may take to finish: a request may run
 * its timeout after waiting in the queue (a minute when it has none). */
static void box_deadline(box *b)
{
    if (!b->started || b->deadline_on || sv.closing)
        return;
    b->deadline_ms = (b->sb->timeout ? b->sb->timeout : 60000u) + 30000u;
    uv_timer_init(&sv.loop, &b->deadline);
    b->deadline.data = b;
    b->deadline_on = true;
    uv_timer_start(&b->deadline, on_box_deadline, b->deadline_ms, 0);
}

static box *find_box(uint32_t id)
{
    for (box *b = sv.boxes; b; b = b->next)
        if (b->id == id)
            return b;
    return NULL;
}

/* A hash of what each servlet library of b's sandbox is on disk now:
 * which file (device, inode: a deploy's rename makes a new one), its size
 * and time of change.  A library that cannot be seen counts as changed,
 * so that its workers are tried again (and the canary rule keeps the old
 * ones serving if it does not load). */
static void code_stamp(const box *b, unsigned char out[32])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    const sandlet_conf *c = b->plan->conf;
    for (size_t j = 0; j < c->nservlets; j++) {
        if (c->servlets[j].sandbox != b->index)
            continue;
        struct stat sb;
        unsigned long long id[5];
        if (stat(c->servlets[j].library, &sb) == 0) {
            id[0] = sb.st_dev;
            id[1] = sb.st_ino;
            id[2] = (unsigned long long)sb.st_size;
            id[3] = (unsigned long long)sb.st_ctim.tv_sec;
            id[4] = (unsigned long long)sb.st_ctim.tv_nsec;
        } else {
            randombytes_buf(id, sizeof(id));
        }
        crypto_generichash_update(&st, (const unsigned char *)id, sizeof(id));
    }
    crypto_generichash_final(&st, out, 32);
}

/* What a new worker of b loads besides its servlets: its pages (start
 * boxes) or only its code generation. */
static const sandlet_init_pages *box_pages(box *b, sandlet_init_pages *own)
{
    if (b->start)
        return sandlet_pages_of(b->index);
    *own = (sandlet_init_pages){.gen = b->code_gen};
    return own;
}

static void spawn(slot *s);
static void check_session_store(box *b);

static void on_restart(uv_timer_t *t)
{
    spawn(t->data);
}

/* Slots from workers up to max-workers ("extra") run a worker only
 * while the acceptor wants one (GROW): it retires them when idle, and a
 * worker of one that exits, for whatever reason, is not started again
 * until the acceptor asks. */
static bool extra_slot(const slot *s)
{
    return s->index >= s->box->sb->workers;
}

/* at_once: no back-off, whatever the slot's failures (they were with
 * files older than those a new worker loads now). */
static void schedule_restart(slot *s, bool at_once)
{
    if (sv.closing || s->box->retired || extra_slot(s))
        return;
    uint64_t delay = 0;
    if (s->failures > 1 && !at_once) {
        unsigned shift = s->failures - 2 > 9 ? 9 : s->failures - 2;
        delay = 100u << shift;
        if (delay > RESTART_MAX_MS)
            delay = RESTART_MAX_MS;
    }
    uv_timer_start(&s->restart, on_restart, delay, 0);
}

/* A queued WORKER message of the given slot and generation. */
static int same_worker(const sandlet_ctl *m, void *arg)
{
    const sandlet_ctl *id = arg;
    return m->type == SANDLET_CTL_WORKER && m->sandbox == id->sandbox && m->slot == id->slot &&
           m->gen == id->gen;
}

static child *live_worker(pid_t pid)
{
    for (box *b = sv.boxes; b; b = b->next)
        for (size_t i = 0; i < b->nslots; i++)
            if (b->slots[i].live && b->slots[i].live->proc.pid == pid)
                return b->slots[i].live;
    return NULL;
}

/* The kernel's seccomp record of a trap or kill (audit.c): the only
 * evidence of a seccomp kill that the worker cannot make itself.  Taken
 * for a live worker only (the pid cannot be another's before we reap it),
 * and only for a call its allowlist does not allow whatever the
 * arguments: a servlet's own filter, installed in its init before ours,
 * could trap an allowed call, and that is not our allowlist's kill. */
static void seccomp_record(pid_t pid, int nr, uint32_t arch)
{
    child *c = live_worker(pid);
    if (!c || c->seccomp)
        return;
    const sandlet_sandbox_conf *sb = c->slot->box->sb;
    if (sandlet_confine_allows_outright(nr, arch, sandlet_confine_groups(sb->syscalls)))
        return;
    c->seccomp = nr + 1;
}

/* Whether Landlock's denials will be reported (landlock_denial), said
 * once at start: they are only where the kernel records them, which takes
 * Landlock ABI 7 (Linux 6.15) and the kernel's audit on.  sandletd does
 * not turn audit on: it is the host's setting (auditd's, or audit=1 at
 * boot), and once on, every process's system calls pay for it.  True when
 * the records will come (as far as start can tell: audit may be turned on
 * or off later). */
static bool say_landlock_records(const sandlet_conf *conf)
{
    long abi = sandlet_landlock_abi();
    if (abi < 1)
        return false; /* confine.c says there is no Landlock */
    enum sandlet_log_level level = conf->development ? SANDLET_LOG_WARN : SANDLET_LOG_INFO;
    if (abi < 7) {
        sandlet_log(level,
                    "this kernel's Landlock (ABI %ld) records nothing it refuses (that takes Linux "
                    "6.15, ABI 7): a servlet's open of a file that its sandbox's 'readable' and "
                    "'writable' lines do not allow fails with EACCES, and sandletd cannot report "
                    "it%s",
                    abi,
                    conf->development ? " (development on: its workers hint at refused file calls "
                                        "themselves)"
                                      : "");
        return false;
    }
    int on = sandlet_audit_enabled();
    if (on == 0)
        sandlet_log(level,
                    "the kernel's audit is off, so Landlock records none of its denials: a "
                    "servlet's open of a file that its sandbox's 'readable' and 'writable' lines "
                    "do not allow fails with EACCES and is not reported; to have each logged with "
                    "the line that allows it, turn audit on ('auditctl -e 1' from the auditd "
                    "package, or boot with audit=1): sandletd leaves that host-wide setting "
                    "alone%s",
                    conf->development ? " (development on: meanwhile its workers hint at refused "
                                        "file calls themselves)"
                                      : "");
    else if (on < 0)
        sandlet_log_errno(level, on,
                          "cannot ask the kernel whether its audit is on (Landlock records its "
                          "denials only then)");
    return on > 0;
}

static bool seccomp_reported(pid_t pid)
{
    child *c = live_worker(pid);
    return c && c->seccomp;
}

/* The domain of a Landlock record is one of ours when a live worker made
 * it (each restricts itself once, in confine.c). */
static bool is_worker(pid_t pid)
{
    return live_worker(pid) != NULL;
}

static int same_denials(const sandlet_ctl *m, void *arg)
{
    const sandlet_ctl *kind = arg;
    return m->type == SANDLET_CTL_DENIALS && m->sandbox == kind->sandbox;
}

/* Each box's new total of Landlock denials to the acceptor: at most one
 * message per box every DENIALS_MS, however fast a worker is refused,
 * and only the newest waits in the queue. */
static void on_denials(uv_timer_t *t)
{
    (void)t;
    for (box *b = sv.boxes; b; b = b->next) {
        if (b->denials == b->denials_told)
            continue;
        sandlet_ctl m = {.type = SANDLET_CTL_DENIALS, .sandbox = b->id, .pages = b->denials};
        sandlet_ctl_queue_drop(&sv.out, same_denials, &m);
        tell(&m, NULL, 0);
        b->denials_told = b->denials;
    }
}

/* Who may have made a worker of b open what it was refused: its
 * servlet, or the list of them and its pages, as a phrase. */
static void box_servlets(const box *b, char *out, size_t cap)
{
    const sandlet_conf *conf = b->plan->conf;
    size_t n = 0, shown = 0, len = 0;
    for (size_t i = 0; i < conf->nservlets; i++)
        n += conf->servlets[i].sandbox == b->index;
    bool pages = false;
    for (size_t i = 0; i < conf->npages; i++)
        pages = pages || conf->pages[i].sandbox == b->index;
    out[0] = '\0';
    for (size_t i = 0; i < conf->nservlets && len < cap; i++) {
        if (conf->servlets[i].sandbox != b->index)
            continue;
        int k = snprintf(out + len, cap - len, "%s%s%s",
                         shown ? ", " : (n > 1 || pages ? "one of servlets " : "servlet "),
                         conf->servlets[i].path, conf->servlets[i].prefix ? "*" : "");
        if (k < 0 || (size_t)k >= cap - len || ++shown == 4)
            break;
        len += (size_t)k;
    }
    len = strlen(out);
    if (shown < n && len + 5 < cap)
        snprintf(out + len, cap - len, ", ...");
    len = strlen(out);
    if (pages && len < cap)
        snprintf(out + len, cap - len, "%s", n ? " or its pages" : "its pages");
}

/* A Landlock denial the kernel recorded of worker pid (audit.c): counted
 * for the status page and, rate-limited per (sandbox, access, path),
 * logged with the line of the file that would allow it.  The supervisor
 * cannot tell which of a sandbox's servlets was running: the acceptor
 * knows, but the record comes apart from the request, so the line names
 * the sandbox's servlets, never a guess. */
static void landlock_denial(pid_t pid, const sandlet_denial *d)
{
    static sandlet_denial_limit limit;
    child *c = live_worker(pid);
    if (!c)
        return;
    box *b = c->slot->box;
    b->denials++;
    if (!sv.closing && !uv_is_active((uv_handle_t *)&sv.denials))
        uv_timer_start(&sv.denials, on_denials, DENIALS_MS, 0);
    unsigned more;
    if (!sandlet_denial_limit_take(&limit, b->id, d, uv_now(&sv.loop), &more))
        return;
    char servlets[256], line[3900];
    box_servlets(b, servlets, sizeof(servlets));
    int local = b->sb->line;
    sandlet_denial_ctx ctx = {.sandbox = b->sb->name,
                              .servlets = servlets,
                              .file = sandlet_conf_where(b->plan->conf, b->sb->line, &local),
                              .line = local,
                              .write_blocked = b->write_blocked};
    sandlet_denial_describe(d, &ctx, (int)pid, more, line, sizeof(line));
    sandlet_warn("%s", line);
}

static void child_exited(sandlet_proc *p, int64_t status, int term_signal)
{
    child *c = p->data;
    slot *s = c->slot;
    box *b = s->box;
    /* A death by SIGSYS is a seccomp kill only when the kernel said so:
     * a worker can raise SIGSYS itself (issue 29).  Its record may still
     * be on its way from the kernel's audit thread. */
    if (term_signal == SIGSYS && !c->seccomp)
        (void)sandlet_audit_wait_kill(p->pid, seccomp_reported); /* sets c->seccomp */
    if (term_signal == SIGSYS && c->seccomp) {
        /* What allows the call, or why nothing does, as the worker's own
         * report says it: system(), popen() and posix_spawn() block every
         * signal before they start a process, so the worker dies before
         * its handler can say anything, and this is the only line
         * (issue 31). */
        const char *name = sandlet_confine_syscall_name(c->seccomp - 1);
        bool spawn = strcmp(name, "clone") == 0 || strcmp(name, "clone3") == 0 ||
                     strcmp(name, "fork") == 0 || strcmp(name, "vfork") == 0 ||
                     strncmp(name, "execve", 6) == 0;
        sandlet_error("worker %d of sandbox '%s' was killed by seccomp: the kernel reports the "
                      "forbidden system call %s (%d)%s%s",
                      (int)p->pid, b->sb->name, name, (int)c->seccomp - 1,
                      sandlet_confine_hint(name, sandlet_confine_groups(b->sb->syscalls), NULL),
                      spawn ? " (fork(), exec, system(), popen() and posix_spawn() all do)" : "");
    } else if (term_signal == SIGSYS)
        sandlet_warn("worker %d of sandbox '%s' died by SIGSYS with no seccomp record from the "
                     "kernel: not counted as a seccomp kill (the worker may have sent it "
                     "itself, or the kernel's audit records are not read)",
                     (int)p->pid, b->sb->name);
    sandlet_ctl m = {.type = SANDLET_CTL_EXITED,
                     .sandbox = b->id,
                     .slot = s->index,
                     .gen = c->gen,
                     .pid = p->pid,
                     .status = (int32_t)status,
                     .signal = term_signal,
                     .seccomp = term_signal == SIGSYS ? c->seccomp : 0};
    /* When the acceptor has not even taken the worker yet, neither
     * message is sent: what waits for it stays bounded by the slots. */
    if (sandlet_ctl_queue_drop(&sv.out, same_worker, &m) == 0)
        tell(&m, NULL, 0);
    bool healthy = uv_now(&sv.loop) - c->started >= HEALTHY_MS;
    /* Back off only a slot whose workers die before they are ready: a
     * servlet that cannot start.  One that a client's request crashes is
     * restarted at once, or any client could make the sandbox answer 503
     * for as long as the back-off lasts. */
    bool died = !c->kill_asked && !c->ready && (status != 0 || term_signal != 0);
    if (c->kill_asked || c->ready || healthy || (status == 0 && term_signal == 0))
        s->failures = 0;
    else if (died && b->start && sandlet_pages_worker_died(b->index, c->pages))
        s->failures = 0; /* the page that killed it is left out now */
    else
        s->failures++;
    /* A worker killed (or crashed) while holding its store's lock: the
     * lock is ours to release, after repairing what it was writing.
     * Before the restart, so its pid cannot be reused meanwhile. */
    if (b->store)
        sandlet_session_store_release(b->store->map, p->pid);
    if (s->live == c)
        s->live = NULL;
    sv.nlive--;
    /* Started before the box's newest code (new_code came while it
     * started or ran): how it fared says nothing of the new code, which
     * its successor tries at once (new_code restarts only slots with no
     * live worker).  A page's new version does not count: a client that
     * asks for pages must not cut a crash-looping slot's back-off. */
    bool outdated = c->code != b->code_news;
    free(c);
    schedule_restart(s, outdated);
    box_maybe_gone(b);
    maybe_finish();
    maybe_ready();
}

static void spawn_failed(slot *s, int err)
{
    sandlet_log_errno(SANDLET_LOG_ERROR, err, "cannot start a worker of sandbox '%s'",
                      s->box->sb->name);
    sandlet_ctl m = {.type = SANDLET_CTL_SPAWN_FAILED,
                     .sandbox = s->box->id,
                     .slot = s->index,
                     .gen = s->gen,
                     .status = err};
    tell(&m, NULL, 0);
    s->failures++;
    schedule_restart(s, false);
    maybe_ready();
}

/* mkdir -p of the spool root: 0711, as the package makes it.  Its
 * folders are root's alone (spool_dir): no worker reaches into them, it
 * is handed its file (spool_file). */
static int spool_root(const char *path)
{
    char tmp[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(tmp))
        return -ENAMETOOLONG;
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1;; p++) {
        if (*p && *p != '/')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(tmp, c ? 0755 : 0711) < 0 && errno != EEXIST)
            return -errno;
        if (!c)
            break;
        *p = c;
    }
    return 0;
}

/* A spool root others may write (/tmp, say) would let anyone plant the
 * folder a sandbox's uploads go to before we make it: refused.  The one
 * judge of a root, for a start and for sandletd -t (check.c). */
int sandlet_spool_root_refusal(const char *root, char *why, size_t cap)
{
    struct stat st;
    if (stat(root, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, cap, "spool-dir '%s' is not a folder: name a folder", root);
        return -ENOTDIR;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, cap,
                 "spool-dir '%s' is writable by others (mode %04o): chmod 0711 '%s', or name a "
                 "folder of its own",
                 root, (unsigned)(st.st_mode & 07777), root);
        return -EPERM;
    }
    return 0;
}

/* Said once per sandbox, as no upload spool means file parts in memory. */
static int spool_root_private(const char *root, bool say)
{
    char why[PATH_MAX + 160] = "";
    int rc = sandlet_spool_root_refusal(root, why, sizeof(why));
    if (rc == -EPERM && say)
        sandlet_warn("%s; no upload spool until then", why);
    return rc;
}

/* Removes the names in the spool folder fd (path, for messages): a spool
 * file never has one (spool_file), so a name is what an older sandletd's
 * workers or someone else left there, taking the spool's room.  Folders
 * are left, and named: removing a tree would need a walk driven by
 * whatever is in it. */
static void spool_empty(int fd, const char *path)
{
    int dfd = dup(fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        sandlet_log_errno(SANDLET_LOG_WARN, -errno, "cannot list the upload spool '%s' to empty it",
                          path);
        return;
    }
    unsigned removed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(fd, e->d_name, 0) == 0)
            removed++;
        else if (errno == EISDIR)
            sandlet_warn("the upload spool '%s' holds a folder '%s' sandletd did not make: remove "
                         "it",
                         path, e->d_name);
        else
            sandlet_log_errno(SANDLET_LOG_WARN, -errno,
                              "cannot remove '%s' from the upload spool '%s'", e->d_name, path);
    }
    closedir(d);
    if (removed)
        sandlet_info("emptied the upload spool '%s': removed %u file%s left there", path, removed,
                     removed == 1 ? "" : "s");
}

/*
 * The sandbox's upload spool, SPOOL-DIR/SANDBOX, made (again at each
 * worker start: an operator may have cleaned it) as a folder of the
 * supervisor's alone, mode 0700: workers and the acceptor only ever hold
 * descriptors of the files in it (spool_file), never a right in it.  Its
 * names are removed when a sandbox's box first makes it (spool_empty).
 * NULL when it cannot be made: large file parts then stay in worker
 * memory, as without a spool, and the reason is said once.
 */
static const char *spool_dir(box *x, char *buf, size_t len)
{
    const char *root = x->plan->conf->spool_dir;
    int rc;
    int fd = -1;
    if (!root || !*root)
        return NULL;
    int n = snprintf(buf, len, "%s/%s", root, x->sb->name);
    if (n < 0 || (size_t)n >= len)
        rc = -ENAMETOOLONG;
    else if ((rc = spool_root(root)) == 0 && (rc = spool_root_private(root, !x->spool_said)) == 0 &&
             mkdir(buf, 0700) < 0 && errno != EEXIST)
        rc = -errno;
    else if (rc == 0 && (fd = open(buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        rc = -errno;
    if (fd >= 0) {
        /* An older sandletd gave the folder to the sandbox's user: it
         * comes back to ours. */
        struct stat st;
        if (fstat(fd, &st) < 0)
            rc = -errno;
        else if (st.st_uid != geteuid() && (geteuid() != 0 || fchown(fd, 0, 0) < 0))
            rc = geteuid() != 0 ? -EPERM : -errno; /* someone else's: never used */
        else if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
            rc = -errno;
        if (rc == 0 && !x->spool_emptied) {
            spool_empty(fd, buf);
            x->spool_emptied = true;
        }
        close(fd);
    }
    if (rc == 0)
        return buf;
    if (!x->spool_said)
        sandlet_log_errno(SANDLET_LOG_WARN, rc,
                          "sandbox '%s': no upload spool in '%s' (set 'spool-dir DIR;' to a "
                          "directory sandletd may create): large multipart file parts stay in "
                          "worker memory",
                          x->sb->name, buf);
    x->spool_said = true;
    return NULL;
}

/* A file of dir with no name: O_TMPFILE, or on a filesystem without it a
 * random name removed at once. */
static int spool_unnamed(const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
        return fd >= 0 ? fd : -errno;
    for (int tries = 0; tries < 8; tries++) {
        unsigned char r[8];
        randombytes_buf(r, sizeof(r));
        char path[PATH_MAX];
        int n = snprintf(path, sizeof(path), "%s/.sl-%02x%02x%02x%02x%02x%02x%02x%02x", dir, r[0],
                         r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
        if (n < 0 || (size_t)n >= sizeof(path))
            return -ENAMETOOLONG;
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return -errno;
        if (unlink(path) < 0) {
            int err = -errno;
            close(fd);
            return err;
        }
        return fd;
    }
    return -EEXIST;
}

/*
 * A worker's spool file (lib/spool.c, loop/stream.c): one file with no
 * name in the sandbox's spool folder, *w writable (for the acceptor,
 * which copies a streamed multipart body into it and empties it when the
 * request ends) and *r read-only (for the worker, whose parser leaves
 * large file parts there).  So a worker cannot make, name or grow a file
 * in the spool, and what one worker's file holds is bounded by the
 * acceptor (spool-size).  The file goes when both have closed it.
 */
static int spool_file(const char *dir, int *w, int *r)
{
    *w = *r = -1;
    int fd = spool_unnamed(dir);
    if (fd < 0)
        return fd;
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    int ro = open(self, O_RDONLY | O_CLOEXEC);
    if (ro < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *w = fd;
    *r = ro;
    return 0;
}

/* Writes the INIT frame into the worker's end of its channel before the
 * worker or the acceptor hold it: what the worker loads is ours to say. */
static int write_init(slot *s, int fd, const char *spool)
{
    sandlet_buf b;
    sandlet_buf_init(&b, SANDLET_FRAME_HEADER + SANDLET_FRAME_MAX);
    b.wipe = true; /* it holds the sandbox's session key */
    box *x = s->box;
    sandlet_init_pages own;
    int rc = sandlet_init_encode(&b, x->plan->conf, x->index, sv.confine, x->ident.uid,
                                 x->ident.gid, x->key, box_pages(x, &own), spool);
    if (rc == 0) {
        /* The frame must fit the socket's buffer: the worker has not
         * started, and the supervisor never blocks on a worker. */
        int size = (int)b.len + 4096;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
        ssize_t n;
        do
            n = send(fd, b.data, b.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        rc = n < 0 ? -errno : (size_t)n == b.len ? 0 : -EMSGSIZE;
    }
    sandlet_buf_free(&b);
    return rc;
}

static void spawn(slot *s)
{
    box *x = s->box;
    if (sv.closing || s->live || x->retired)
        return;
    const sandlet_sandbox_conf *sb = x->sb;
    int ch[2] = {-1, -1}, out[2] = {-1, -1};
    s->gen++;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ch) < 0 || pipe2(out, O_CLOEXEC) < 0) {
        int err = -errno;
        for (int i = 0; i < 2; i++) {
            if (ch[i] >= 0)
                close(ch[i]);
        }
        spawn_failed(s, err);
        return;
    }
    /* Its spool file, when the sandbox has a spool: without one, large
     * file parts stay in the worker's memory. */
    char spool_path[PATH_MAX];
    const char *spool = spool_dir(x, spool_path, sizeof(spool_path));
    int spool_w = -1, spool_r = -1;
    if (spool) {
        int src = spool_file(spool, &spool_w, &spool_r);
        if (src < 0) {
            if (!x->spool_said)
                sandlet_log_errno(SANDLET_LOG_WARN, src,
                                  "sandbox '%s': cannot make a file in the upload spool '%s': "
                                  "large multipart file parts stay in worker memory",
                                  sb->name, spool);
            x->spool_said = true;
            spool = NULL;
        }
    }
    int rc = write_init(s, ch[0], spool);
    /* The claim word (claim.h): one memfd shared by this worker and the
     * acceptor only, so that no other worker can claim or revoke its
     * requests. */
    int claim = rc == 0 ? sandlet_claim_create() : -1;
    if (rc == 0 && claim < 0)
        rc = claim;
    child *c = rc == 0 ? calloc(1, sizeof(*c)) : NULL;
    if (!c) {
        close(ch[0]);
        close(ch[1]);
        close(out[0]);
        close(out[1]);
        if (claim >= 0)
            close(claim);
        if (spool_w >= 0) {
            close(spool_w);
            close(spool_r);
        }
        spawn_failed(s, rc < 0 ? rc : -ENOMEM);
        return;
    }
    c->slot = s;
    c->gen = s->gen;
    sandlet_init_pages own;
    const sandlet_init_pages *ip = box_pages(x, &own);
    c->pages = ip ? ip->gen : 0;
    c->code = x->code_news;
    c->proc.data = c;
    c->proc.exit_cb = child_exited;
    char blocked[] = "--write-blocked";
    char *args[] = {"sandletd", "--worker", sb->name,
                    "--parent", sv.parent,  x->write_blocked ? blocked : NULL,
                    NULL};
    /* Descriptor 4: the sandbox's session store, shared by its workers so
     * that a session is found whichever worker serves the request. */
    int store = x->store ? x->store->fd : -1;
    check_session_store(x);
    /* Descriptor 0: /dev/null; 5: the claim word; 6: the spool file,
     * read-only. */
    int place[7] = {-1, out[1], out[1], ch[1], store, claim, spool_r};
    const sandlet_id *id = &x->ident;
    sandlet_spawn_opts opts = {
        /* A fresh exec of this very binary: its own address-space layout
         * and none of our memory. */
        .file = SANDLET_SPAWN_SELF,
        .args = args,
        .env = sv.env,
        .fds = place,
        .nfds = 7,
        /* The identity is dropped in the child before exec (libuv, in
         * the spawner: setgroups(0), setgid, setuid): nothing of the
         * worker, not even the dynamic loader, runs as root. */
        .uid = id->uid,
        .gid = id->gid,
    };
    rc = sandlet_spawn(&c->proc, &opts);
    close(ch[1]);
    close(out[1]);
    if (spool_r >= 0)
        close(spool_r);
    if (rc < 0) {
        close(ch[0]);
        close(out[0]);
        close(claim);
        if (spool_w >= 0)
            close(spool_w);
        free(c);
        spawn_failed(s, rc);
        return;
    }
    c->started = uv_now(&sv.loop);
    s->live = c;
    sv.nlive++;
    sandlet_ctl m = {.type = SANDLET_CTL_WORKER,
                     .sandbox = x->id,
                     .slot = s->index,
                     .gen = s->gen,
                     .pid = c->proc.pid,
                     .pages = c->pages};
    int fds[4] = {ch[0], out[0], claim, spool_w};
    tell(&m, fds, spool_w >= 0 ? 4 : 3);
}

/* The slot a message from the acceptor names, or NULL (refused). */
static slot *find_slot(const sandlet_ctl *m)
{
    box *b = find_box(m->sandbox);
    if (!b && m->sandbox < sv.next_id) {
        /* A sandbox a reload retired, gone with its last worker: a KILL
         * or READY that crossed that exit is no hostile act. */
        sandlet_debug("type %u for worker %u/%u of a retired sandbox; ignored", m->type, m->sandbox,
                      m->slot);
        return NULL;
    }
    if (!b || m->slot >= b->nslots) {
        refuse("type %u for worker %u/%u, which does not exist", m->type, m->sandbox, m->slot);
        return NULL;
    }
    return &b->slots[m->slot];
}

/* GROW: the acceptor wants the worker of an extra slot started (its
 * requests wait and every worker is busy).  Hostile like any message:
 * only a slot in [workers, max-workers) of a live sandbox, and only one
 * that has no worker, so that nothing the acceptor sends can make more
 * than max-workers workers of a sandbox exist. */
static void grow(const sandlet_ctl *m)
{
    slot *s = find_slot(m);
    if (!s)
        return;
    box *b = s->box;
    if (b->retired) {
        /* A GROW that crossed the reload retiring its sandbox is no
         * hostile act (as a KILL or READY crossing an exit): nothing
         * starts, and the log is not alarmed. */
        sandlet_debug("GROW for worker %u/%u of sandbox '%s', which a reload retired; ignored",
                      m->sandbox, m->slot, b->sb->name);
        return;
    }
    if (!extra_slot(s)) {
        refuse("GROW for worker %u/%u of sandbox '%s', which is not an extra slot (%u..%zu)",
               m->sandbox, m->slot, b->sb->name, b->sb->workers, b->nslots - 1);
        return;
    }
    if (s->live) {
        refuse("GROW for worker %u/%u of sandbox '%s', which already has a live worker", m->sandbox,
               m->slot, b->sb->name);
        return;
    }
    spawn(s);
}

static void kill_child(const sandlet_ctl *m)
{
    if (m->status != SIGKILL) {
        refuse("KILL with signal %d", m->status);
        return;
    }
    slot *s = find_slot(m);
    if (!s)
        return;
    /* Only the generation the acceptor was given, and once: an older one
     * is gone already (its EXITED crossed this message). */
    if (s->live && s->live->gen == m->gen && !s->live->kill_asked) {
        s->live->kill_asked = true;
        (void)sandlet_proc_kill(&s->live->proc, SIGKILL); /* -ESRCH: its exit is on its way */
    }
}

static int same_logfd(const sandlet_ctl *m, void *arg)
{
    const sandlet_ctl *kind = arg;
    return m->type == SANDLET_CTL_LOGFD && m->status == kind->status;
}

/* SIGHUP, passed on by the acceptor.  The file is read again here, as
 * root (it may name files only root reads), and checked in full: a file
 * that does not load, or that changes what only a restart applies
 * (sandlet_conf_restart_needed), is reported and changes nothing.
 * Otherwise it is applied:
 *  - a sandbox the file leaves the same keeps its box, workers and memory
 *    sessions; its code generation grows, so its workers are replaced, a
 *    few at a time as they finish their requests, by ones that load the
 *    servlets and pages now on disk;
 *  - a sandbox it adds or changes gets a new box with a new id, started
 *    now (a changed one shares its predecessor's memory session store and
 *    key when the store's size is the same, so its sessions stay);
 *  - a box whose sandbox is changed or gone is retired: the acceptor
 *    sends it no new request and closes each of its workers once its
 *    requests are answered; nothing of it restarts;
 *  - new listen addresses are bound here (we may bind ports below 1024)
 *    and handed over, kept ones stay open in the acceptor throughout;
 *  - the acceptor gets the file's bytes and the ids (CONF) and applies
 *    the rest: routes, limits, timeouts, the status page.
 * At most one a second: the request comes from the acceptor, which a
 * client may have taken over. */
static void reload(void);
static bool has_quota(const sandlet_sandbox_conf *sb);
static void on_quota(uv_timer_t *t);
static void on_watch(uv_timer_t *t);
static box *box_make(plan *p, size_t index, uint32_t id, box *from);
static void box_start(box *b);
static void secret_hash(const sandlet_conf *conf, unsigned char out[32]);

static void on_reload_timer(uv_timer_t *t)
{
    (void)t;
    reload();
}

static int same_gen(const sandlet_ctl *m, void *arg)
{
    const sandlet_ctl *kind = arg;
    return m->type == SANDLET_CTL_GEN && m->sandbox == kind->sandbox;
}

/* Room in our queue to the acceptor for every box's messages. */
static void reload_bound(void)
{
    size_t min = 5 * sv.nslots + 16 + 2 * sv.conf->nlistens + (sv.conf->npages ? 8192 : 0);
    if (sv.out.max < min)
        sv.out.max = min;
}

/* A new code generation for a kept box, announced to the acceptor. */
static void new_code(box *b)
{
    uint32_t gen = b->start ? sandlet_pages_new_code(b->index) : ++b->code_gen;
    if (!gen)
        return;
    b->code_news++;
    sandlet_ctl m = {.type = SANDLET_CTL_GEN, .sandbox = b->id, .pages = gen};
    /* Only the newest generation of a sandbox need wait for the
     * acceptor: reloads never crowd out workers' messages. */
    sandlet_ctl_queue_drop(&sv.out, same_gen, &m);
    tell(&m, NULL, 0);
    /* A slot backing off because its workers did not start failed with
     * the files before these: it tries the new ones now, not after up to
     * RESTART_MAX_MS, for the acceptor replaces no old worker until one
     * of the new code is up (a lone old worker serves meanwhile).  Its
     * failures stay: if these fail too, it backs off as before. */
    for (size_t i = 0; b->started && i < b->nslots; i++) {
        slot *s = &b->slots[i];
        if (s->failures && !s->live && uv_is_active((uv_handle_t *)&s->restart)) {
            uv_timer_stop(&s->restart);
            spawn(s);
        }
    }
}

static void reload_failed(const char *what)
{
    char msg[sizeof(sv.state.message)];
    /* A long message is cut to what the state file holds; the whole of
     * what went wrong is in the lines logged before. */
    if (snprintf(msg, sizeof(msg),
                 "reload: %s; still serving with the configuration loaded before (fix the "
                 "file, check it with 'sandletd -t -c %s', and reload again)",
                 what, sv.conf->file) >= (int)sizeof(msg))
        msg[sizeof(msg) - 2] = '.';
    sandlet_error("%s", msg);
    state_verdict(false, msg);
}

/* What a reload prepares before anything changes: freed whole when it is
 * refused. */
typedef struct {
    sandlet_conf *fresh; /* the file as read, secrets included */
    sandlet_conf_text text;
    plan *p;            /* its plan */
    sandlet_id *ids;    /* per sandbox of the plan */
    box **kept, **made; /* per sandbox: the box kept, or the one made */
    uint32_t *boxid;    /* per sandbox: the id the acceptor learns */
    int *listen_fds;    /* per listen line: a new socket, or -1 (kept) */
    size_t nboxes, nlistens;
    int conf_fd;
} reloading;

static void reloading_free(reloading *r)
{
    for (size_t i = 0; r->made && i < r->nboxes; i++)
        if (r->made[i])
            box_free(r->made[i]); /* never started: no handle to close */
    for (size_t i = 0; r->listen_fds && i < r->nlistens; i++)
        if (r->listen_fds[i] >= 0)
            close(r->listen_fds[i]);
    if (r->conf_fd >= 0)
        close(r->conf_fd);
    if (r->p && r->p->refs == 0) {
        sandlet_conf_free(r->p->conf);
        free(r->p);
    }
    if (r->fresh)
        sodium_memzero(r->fresh->session_secret, sizeof(r->fresh->session_secret));
    sandlet_conf_free(r->fresh);
    if (r->text.text)
        sodium_memzero(r->text.text, r->text.len);
    free(r->text.text);
    free(r->text.basedir);
    free(r->ids);
    free(r->kept);
    free(r->made);
    free(r->boxid);
    free(r->listen_fds);
}

/* The box now serving the sandbox called name, or NULL. */
static box *current_box(const char *name)
{
    for (box *b = sv.boxes; b; b = b->next)
        if (!b->retired && strcmp(b->sb->name, name) == 0)
            return b;
    return NULL;
}

/* Everything a reload needs, made without touching what runs.  Returns 0,
 * or -1 after logging why. */
static int reload_prepare(reloading *r)
{
    char err[1024];
    int rc = sandlet_conf_load_text(sv.conf->source, &r->fresh, &r->text, err, sizeof(err));
    if (rc < 0) {
        reload_failed(err);
        return -1;
    }
    const sandlet_conf *f = r->fresh;
    const char *why = sandlet_conf_restart_needed(sv.conf, f);
    unsigned char h[32];
    secret_hash(f, h);
    if (!why && memcmp(h, sv.secret_hash, sizeof(h)) != 0)
        why = "session-secret-file";
    if (why) {
        snprintf(err, sizeof(err),
                 "%s changes '%s', which only a restart applies (restart sandletd to apply "
                 "it, or put the old value back)",
                 sv.conf->file, why);
        reload_failed(err);
        return -1;
    }
    r->p = calloc(1, sizeof(*r->p));
    sandlet_conf *pc = r->p ? sandlet_conf_plan(f) : NULL;
    size_t n = f->nsandboxes;
    r->ids = calloc(n + 1, sizeof(*r->ids));
    /* Arrays of pointers, on purpose. */
    r->kept = calloc(n + 1, sizeof(box *)); // NOLINT(bugprone-sizeof-expression)
    r->made = calloc(n + 1, sizeof(box *)); // NOLINT(bugprone-sizeof-expression)
    r->boxid = calloc(n + 1, sizeof(*r->boxid));
    r->listen_fds = malloc((f->nlistens + 1) * sizeof(int));
    for (size_t j = 0; r->listen_fds && j < f->nlistens; j++)
        r->listen_fds[j] = -1;
    r->nlistens = r->listen_fds ? f->nlistens : 0;
    if (!pc || !r->ids || !r->kept || !r->made || !r->boxid || !r->listen_fds) {
        sandlet_conf_free(pc);
        reload_failed("out of memory");
        return -1;
    }
    r->p->conf = pc;
    /* Keys come from the file's secret (f), kept until reloading_free;
     * the plan that stays needs none. */
    sodium_memzero(pc->session_secret, sizeof(pc->session_secret));
    r->nboxes = n;
    if (sandlet_identity_resolve(pc, &sv.acceptor, true, r->ids) < 0) {
        reload_failed("a sandbox's user or group does not exist (see above)");
        return -1;
    }
    uint32_t next = sv.next_id;
    for (size_t j = 0; j < n; j++) {
        const sandlet_sandbox_conf *sb = &pc->sandboxes[j];
        box *old = current_box(sb->name);
        if (old && sandlet_conf_sandbox_same(old->plan->conf, old->index, pc, j)) {
            r->kept[j] = old;
            r->boxid[j] = old->id;
            continue;
        }
        if (old && old->sb->pages) {
            snprintf(err, sizeof(err),
                     "%s changes sandbox '%s', which serves pages: only a restart applies that",
                     sv.conf->file, sb->name);
            reload_failed(err);
            return -1;
        }
        box *b = box_make(r->p, j, next, old);
        if (!b) {
            reload_failed("cannot prepare a sandbox (see above)");
            return -1;
        }
        r->made[j] = b;
        r->boxid[j] = next++;
        b->ident = r->ids[j];
        /* Sessions stay valid across the change: same name, same key. */
        if (old)
            memcpy(b->key, old->key, sizeof(b->key));
        else if (sandlet_session_key_make(f->session_secret_set ? f->session_secret : NULL,
                                          sb->name, b->key) < 0) {
            reload_failed("cannot make a session key");
            return -1;
        }
    }
    for (size_t j = 0; j < f->nlistens; j++) {
        const sandlet_listen_conf *l = &f->listens[j];
        bool kept = false;
        for (size_t k = 0; k < sv.conf->nlistens && !kept; k++)
            kept = sandlet_conf_listen_same(&sv.conf->listens[k], l);
        if (kept)
            continue;
        int fd = -1;
        rc = sandlet_listen_bind(l, &fd);
        if (rc == 0 && listen(fd, 511) < 0)
            rc = -errno;
        if (rc < 0) {
            if (fd >= 0)
                close(fd);
            snprintf(err, sizeof(err), "%s:%d: cannot listen on %s port %u: %s", sv.conf->file,
                     l->line, l->host, l->port, strerror(-rc));
            reload_failed(err);
            return -1;
        }
        r->listen_fds[j] = fd;
    }
    r->conf_fd = sandlet_ctl_conf_write(&r->text, sv.conf->file, r->boxid, n);
    if (r->conf_fd < 0) {
        snprintf(err, sizeof(err), "cannot hand the configuration to the acceptor: %s",
                 strerror(-r->conf_fd));
        reload_failed(err);
        return -1;
    }
    sv.next_id = next;
    return 0;
}

static void reload(void)
{
    uint64_t now = uv_now(&sv.loop);
    if (sv.last_reload && now - sv.last_reload < 1000) {
        /* Another within the second: carried out when it ends, once for
         * all that came meanwhile (a deploy that follows another at once
         * is not lost, and a flood costs one reload a second). */
        if (!sv.closing && !uv_is_active((uv_handle_t *)&sv.reload_timer))
            uv_timer_start(&sv.reload_timer, on_reload_timer, 1000 - (now - sv.last_reload), 0);
        return;
    }
    sv.last_reload = now;
    if (!sv.conf->source) {
        reload_failed("no configuration file to read");
        return;
    }
    reloading r = {.conf_fd = -1};
    if (reload_prepare(&r) < 0) {
        reloading_free(&r);
        return;
    }
    bool same = memcmp(r.fresh->digest, sv.conf->digest, sizeof(r.fresh->digest)) == 0;
    /* Nothing below can fail: the running configuration becomes this one. */
    size_t n = r.nboxes;
    unsigned kept = 0, made = 0, retired = 0;
    for (box *b = sv.boxes; b; b = b->next) {
        bool stays = false;
        for (size_t j = 0; j < n && !stays; j++)
            stays = r.kept[j] == b;
        if (stays || b->retired)
            continue;
        b->retired = true;
        retired++;
        for (size_t i = 0; i < b->nslots; i++)
            uv_timer_stop(&b->slots[i].restart);
        box_deadline(b);
    }
    plan *old = sv.plan;
    r.p->next = sv.plans;
    sv.plans = r.p;
    sv.plan = r.p;
    sv.conf = r.p->conf;
    r.p = NULL; /* sv's now */
    plan_maybe_free(old);
    box **tail = &sv.boxes;
    while (*tail)
        tail = &(*tail)->next;
    for (size_t j = 0; j < n; j++) {
        if (r.kept[j])
            continue;
        box *b = r.made[j];
        r.made[j] = NULL;
        *tail = b;
        tail = &b->next;
        sv.nslots += b->nslots;
        made++;
    }
    /* Room for what follows before it is sent: a LISTEN or CONF that did
     * not fit would leave the acceptor on the old configuration while
     * the new one's workers start. */
    reload_bound();
    sv.out.max += r.nlistens + 2;
    for (size_t j = 0; j < r.nlistens; j++)
        if (r.listen_fds[j] >= 0) {
            sandlet_ctl m = {.type = SANDLET_CTL_LISTEN, .slot = (uint32_t)j};
            tell(&m, &r.listen_fds[j], 1); /* takes it */
            r.listen_fds[j] = -1;
        }
    /* The acceptor learns the ids before any worker of a new box. */
    sandlet_ctl cm = {.type = SANDLET_CTL_CONF};
    tell(&cm, &r.conf_fd, 1);
    r.conf_fd = -1;
    unsigned renewed = 0;
    for (size_t j = 0; j < n; j++) {
        box *b = r.kept[j];
        if (!b)
            continue;
        unsigned char stamp[32];
        code_stamp(b, stamp);
        kept++;
        if (memcmp(stamp, b->stamp, sizeof(stamp)) != 0) {
            memcpy(b->stamp, stamp, sizeof(stamp));
            new_code(b);
            renewed++;
        }
    }
    for (box *b = sv.boxes; b; b = b->next)
        if (!b->retired && !b->started)
            box_start(b);
    bool quotas = false;
    for (box *b = sv.boxes; b; b = b->next)
        quotas = quotas || has_quota(b->sb);
    if (quotas && !uv_is_active((uv_handle_t *)&sv.quota))
        uv_timer_start(&sv.quota, on_quota, QUOTA_CHECK_MS, QUOTA_CHECK_MS);
    /* A changed file is told again what bounds its sandboxes' writes. */
    if (!same)
        sandlet_quota_warn_shared(sv.conf);
    if (sv.conf->development && !uv_is_active((uv_handle_t *)&sv.watch))
        uv_timer_start(&sv.watch, on_watch, WATCH_MS, WATCH_MS);
    /* Retired boxes with no worker left go now. */
    for (box *b = sv.boxes, *next; b; b = next) {
        next = b->next;
        box_maybe_gone(b);
    }
    sandlet_info("reload: %s %s: %u sandbox(es) kept (%u with a servlet library changed on "
                 "disk: their workers are being replaced, as they finish their requests, by "
                 "ones that load it; sessions stay), %u started, %u retired once their requests "
                 "are answered",
                 sv.conf->file, same ? "is unchanged" : "applied", kept, renewed, made, retired);
    char msg[sizeof(sv.state.message)];
    snprintf(msg, sizeof(msg),
             "reload: %s %s: %u sandbox(es) kept (%u with new code), %u started, %u retired",
             sv.conf->file, same ? "is unchanged" : "applied", kept, renewed, made, retired);
    state_verdict(true, msg);
    reloading_free(&r);
}

static void worker_ready(const sandlet_ctl *m)
{
    slot *s = find_slot(m);
    if (!s)
        return;
    if (s->live && s->live->gen == m->gen) {
        if (s->live->ready)
            refuse("READY twice for worker %u/%u generation %u", m->sandbox, m->slot, m->gen);
        s->live->ready = true;
        s->failures = 0;
        if (s->box->start)
            sandlet_pages_worker_ready(s->box->index, s->live->pages);
        maybe_ready();
    }
}

/* logrotate moved the files away: open them again (we may be the only
 * process still allowed to), in the folders checked at start and without
 * following links (the acceptor's user may control those folders), take
 * the error log as our own standard error, and hand both to the
 * acceptor.  Workers never hold either. */
static void reopen_logs(void);

static void on_reopen(uv_timer_t *t)
{
    (void)t;
    reopen_logs();
}

static void reopen_logs(void)
{
    uint64_t now = uv_now(&sv.loop);
    uint64_t sec = now / 1000;
    if (sec != sv.reopen_window) {
        sv.reopen_window = sec;
        sv.reopens = 0;
    }
    if (sv.reopens >= REOPEN_PER_SEC) {
        if (!sv.closing && !uv_is_active((uv_handle_t *)&sv.reopen))
            uv_timer_start(&sv.reopen, on_reopen, (sec + 1) * 1000 - now, 0);
        return;
    }
    sv.reopens++;
    const char *paths[SANDLET_LOG_FILES] = {sv.conf->access_log, sv.conf->error_log};
    for (unsigned which = 0; which < SANDLET_LOG_FILES; which++) {
        if (!paths[which])
            continue;
        /* Only one of each kind waits for the acceptor. */
        sandlet_ctl kind = {.type = SANDLET_CTL_LOGFD, .status = (int32_t)which};
        sandlet_ctl_queue_drop(&sv.out, same_logfd, &kind);
        int fd = sandlet_log_file_reopen(which);
        if (fd < 0)
            continue; /* logged, naming the file and why */
        if (which == SANDLET_LOG_ERROR_FILE) {
            dup2(fd, STDERR_FILENO);
            sandlet_log_nonblocking();
            sandlet_spawner_log(fd);
        }
        sandlet_ctl m = {.type = SANDLET_CTL_LOGFD, .status = (int32_t)which};
        tell(&m, &fd, 1);
    }
}

static void on_grace(uv_timer_t *t)
{
    (void)t;
    for (box *b = sv.boxes; b; b = b->next)
        for (size_t i = 0; i < b->nslots; i++) {
            child *c = b->slots[i].live;
            if (!c)
                continue;
            sandlet_warn("worker %d of sandbox '%s' did not stop in time; killing it", c->proc.pid,
                         b->sb->name);
            (void)sandlet_proc_kill(&c->proc, SIGKILL); /* -ESRCH: its exit is on its way */
        }
}

/* The acceptor is gone or asked us to go: workers leave when their
 * channels close (the ones still waiting in our queue are closed here);
 * the grace timer catches any that hang. */
static void begin_shutdown(void)
{
    if (sv.closing)
        return;
    sv.closing = true;
    for (box *b = sv.boxes; b; b = b->next) {
        for (size_t i = 0; b->started && i < b->nslots; i++)
            uv_timer_stop(&b->slots[i].restart);
        if (b->deadline_on)
            uv_timer_stop(&b->deadline);
    }
    uv_timer_stop(&sv.quota);
    uv_close((uv_handle_t *)&sv.quota, NULL);
    uv_timer_stop(&sv.stores);
    uv_close((uv_handle_t *)&sv.stores, NULL);
    uv_timer_stop(&sv.watch);
    uv_close((uv_handle_t *)&sv.watch, NULL);
    uv_timer_stop(&sv.reopen);
    uv_close((uv_handle_t *)&sv.reopen, NULL);
    uv_timer_stop(&sv.reload_timer);
    uv_close((uv_handle_t *)&sv.reload_timer, NULL);
    uv_timer_stop(&sv.denials);
    uv_close((uv_handle_t *)&sv.denials, NULL);
    uv_timer_stop(&sv.outlived);
    uv_close((uv_handle_t *)&sv.outlived, NULL);
    /* A new daemon started by an upgrade owns the state file: ours is
     * neither rewritten nor removed when we go. */
    if (sandlet_upgrade_stop())
        sv.state_path[0] = '\0';
    sandlet_pages_stop();
    sandlet_learn_stop();
    sandlet_audit_stop();
    uv_poll_stop(&sv.poll);
    uv_close((uv_handle_t *)&sv.poll, NULL);
    sandlet_ctl_queue_clear(&sv.out);
    close(sv.ctl);
    sv.ctl = -1;
    uv_timer_start(&sv.grace, on_grace, SHUTDOWN_GRACE_MS, 0);
    maybe_finish();
}

/* SIGUSR2 at the acceptor: start the new binary with the listeners it
 * handed over (upgrade.c). */
/* The memory session stores an upgrade hands over: each sandbox's that
 * serves now (not a retired box's), once. */
static size_t upgrade_stores(int *fds, const char **names, size_t cap)
{
    size_t n = 0;
    for (box *b = sv.boxes; b && n < cap; b = b->next) {
        if (b->retired || !b->store)
            continue;
        bool seen = false;
        for (size_t i = 0; i < n && !seen; i++)
            seen = fds[i] == b->store->fd;
        if (seen)
            continue;
        fds[n] = b->store->fd;
        names[n++] = b->sb->name;
    }
    return n;
}

static void upgrade(const sandlet_ctl *m)
{
    sandlet_upgrade_env env = {
        .loop = &sv.loop, .tell = tell, .done = upgrade_done, .stores = upgrade_stores};
    sandlet_upgrade_start(&env, (uint32_t)m->status);
}

static void on_ctl(uv_poll_t *p, int status, int events)
{
    (void)p;
    if (status < 0) {
        begin_shutdown();
        return;
    }
    if (events & UV_WRITABLE) {
        int rc = sandlet_ctl_queue_flush(&sv.out, sv.ctl);
        if (rc < 0 && rc != -EAGAIN) {
            begin_shutdown();
            return;
        }
        update_poll();
    }
    for (int n = 0; n < READS_PER_TURN; n++) {
        sandlet_ctl m;
        int fd;
        int rc = sandlet_ctl_recv(sv.ctl, &m, &fd, 1);
        if (rc == -EAGAIN)
            return;
        if (rc == -EPROTO) {
            refuse("malformed (wrong size, empty, or more than one descriptor)");
            continue;
        }
        if (rc <= 0) {
            begin_shutdown();
            return;
        }
        if (fd >= 0 && m.type == SANDLET_CTL_HANDOVER) {
            /* The one message that carries a descriptor: a listener, for
             * the upgrade that follows (upgrade.c checks it). */
            int hrc = sandlet_upgrade_handover(fd);
            if (hrc < 0)
                refuse("HANDOVER: %s", hrc == -EINVAL ? "not a listening socket" : strerror(-hrc));
            continue;
        }
        if (fd >= 0) {
            /* No other message from the acceptor carries a descriptor;
             * closing one must not wait on it (see sandlet_ctl_discard_fd). */
            sandlet_ctl_discard_fd(fd);
            refuse("type %u with a descriptor attached", m.type);
            continue;
        }
        switch (m.type) {
        case SANDLET_CTL_KILL: kill_child(&m); break;
        case SANDLET_CTL_REOPEN: reopen_logs(); break;
        case SANDLET_CTL_READY: worker_ready(&m); break;
        case SANDLET_CTL_PAGE_CHECK: sandlet_pages_check(&m); break;
        case SANDLET_CTL_RELOAD:
            if (sandlet_upgrade_busy())
                sandlet_warn("a reload during an upgrade is ignored: reload the new daemon");
            else
                reload();
            break;
        case SANDLET_CTL_HANDOVER: refuse("HANDOVER without a descriptor"); break;
        case SANDLET_CTL_UPGRADE: upgrade(&m); break;
        case SANDLET_CTL_GROW: grow(&m); break;
        case SANDLET_CTL_SPAWN: refuse("SPAWN: workers are started by the supervisor alone"); break;
        default: refuse("unknown type %u", m.type); break;
        }
        if (sv.closing)
            return;
    }
}

static bool has_quota(const sandlet_sandbox_conf *sb)
{
    return sb->nwritable && (sb->write_quota || sb->write_files);
}

/* Measures every sandbox with a write quota.  One that passes it gets its
 * workers restarted with the writable directories read-only (the
 * --write-blocked flag), and again with them writable once an operator has
 * made room: Landlock is fixed for a process's life, so a restart is the
 * only way to change it.  The restart kills: a servlet filling the disk
 * does not get to finish its request. */
static void check_quotas(void)
{
    for (box *x = sv.boxes; x; x = x->next) {
        const sandlet_sandbox_conf *sb = x->sb;
        if (!has_quota(sb))
            continue;
        sandlet_usage u;
        bool over = sandlet_quota_measure((const char *const *)sb->writable, sb->nwritable,
                                          sb->write_quota, sb->write_files, &u);
        if (over == x->write_blocked)
            continue;
        x->write_blocked = over;
        if (over)
            sandlet_error("sandbox '%s' is over its write quota (%s%llu bytes, %llu entries in "
                          "its writable directories; write-quota %llu, write-files %u): its "
                          "workers restart with them read-only until they are below; remove "
                          "files, or raise write-quota/write-files",
                          sb->name, u.too_deep ? "nested too deep to measure; " : "", u.bytes,
                          u.entries, sb->write_quota, sb->write_files);
        else
            sandlet_info("sandbox '%s' is below its write quota again (%llu bytes, %llu "
                         "entries): its workers restart with their directories writable",
                         sb->name, u.bytes, u.entries);
        for (size_t j = 0; j < x->nslots; j++) {
            child *c = x->slots[j].live;
            if (c) {
                c->kill_asked = true;
                (void)sandlet_proc_kill(&c->proc, SIGKILL); /* -ESRCH: its exit is on its way */
            }
        }
    }
}

static void on_quota(uv_timer_t *t)
{
    (void)t;
    check_quotas();
}

/* Started by an upgrade: the previous daemon's store of sb, when it
 * handed one over, gives st its sessions (a copy; the previous daemon's
 * workers go on with theirs until it has drained, and what they change
 * meanwhile is not carried over).  Only under session-secret-file: the
 * key that vouches for a session's id is otherwise new at every start,
 * and no carried session could be presented. */
static void store_inherit(const sandlet_conf *conf, const sandlet_sandbox_conf *sb, sstore *st)
{
    int fd = sandlet_upgrade_store_take(sb->name);
    if (fd < 0)
        return;
    size_t carried = 0;
    int rc = conf->session_secret_set ? sandlet_session_store_adopt(st->map, fd, &carried) : 0;
    if (!conf->session_secret_set)
        sandlet_info("sandbox '%s': its memory sessions start empty after the upgrade: without "
                     "session-secret-file their key is new at every start",
                     sb->name);
    else if (rc == 0)
        sandlet_info("sandbox '%s': %zu memory session%s carried over from the previous daemon",
                     sb->name, carried, carried == 1 ? "" : "s");
    else
        sandlet_log_errno(SANDLET_LOG_WARN, rc,
                          "sandbox '%s': its memory sessions start empty after the upgrade (the "
                          "previous daemon's store %s)",
                          sb->name,
                          rc == -EINVAL   ? "has another session-size"
                          : rc == -EPROTO ? "has another layout, or was written over"
                          : rc == -EBUSY  ? "was unlocked during the copy"
                                          : "could not be read");
    close(fd);
}

/* A memory session store for sandbox sb, made before any of its workers
 * starts and kept while a box of that name uses it: workers come and go
 * (crashes, max-requests, reloads), sessions stay.  We keep a mapping of
 * each to check its header: the sandbox's workers can write over it.
 * Logs why and returns NULL when it cannot. */
static sstore *store_make(const sandlet_conf *conf, const sandlet_sandbox_conf *sb)
{
    sstore *st = calloc(1, sizeof(*st));
    if (!st) {
        sandlet_error("out of memory creating the session store of sandbox '%s'", sb->name);
        return NULL;
    }
    st->refs = 1;
    st->size = sb->session_size;
    st->fd = sandlet_session_store_create(sb->name, sb->session_size);
    if (st->fd < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, st->fd,
                          "%s:%d: cannot create the session store of sandbox '%s' (%zu "
                          "bytes); lower session-size or set 'sessions none'",
                          conf->file, sb->line, sb->name, sb->session_size);
        free(st);
        return NULL;
    }
    st->map = sandlet_session_store_attach(st->fd, 0);
    if (!st->map) {
        sandlet_log_errno(SANDLET_LOG_ERROR, -errno,
                          "%s:%d: cannot map the session store of sandbox '%s' (%zu "
                          "bytes); lower session-size or set 'sessions none'",
                          conf->file, sb->line, sb->name, sb->session_size);
        close(st->fd);
        free(st);
        return NULL;
    }
    store_inherit(conf, sb, st);
    return st;
}

/* The rebuild hook: a store whose header is not the one we wrote is made
 * empty again, so that the sandbox's workers (running ones and new ones)
 * can use it.  Called before each spawn and every STORE_CHECK_MS. */
static void check_session_store(box *b)
{
    if (!b->store || sandlet_session_store_intact(b->store->map))
        return;
    sandlet_session_store_rebuild(b->store->map);
    sandlet_error("sandbox '%s': its session store was written over by one of its workers; "
                  "rebuilt it empty, every session of the sandbox is lost; a servlet of this "
                  "sandbox is buggy or hostile (only its workers can write the store)",
                  b->sb->name);
}

/* The live worker with this pid of a box that shares store st, or NULL:
 * while a reload replaces a sandbox, the old box's workers hold the same
 * store as the new one's. */
static child *live_child(const sstore *st, pid_t pid)
{
    for (box *b = sv.boxes; b; b = b->next) {
        if (b->store != st)
            continue;
        for (size_t k = 0; k < b->nslots; k++)
            if (b->slots[k].live && b->slots[k].live->proc.pid == pid)
                return b->slots[k].live;
    }
    return NULL;
}

/* The lock hook: workers never take the store's lock from its holder
 * (a stalled holder would wake and write into reused slots), so a lock
 * left held is cleared here.  A word naming no live worker of the
 * sandbox (forged, or a holder reaped already) is released at once; a
 * live worker holding it for STORE_HOLD_CHECKS checks in a row is
 * killed, and child_exited releases the lock. */
static void check_store_lock(box *b)
{
    sstore *st = b->store;
    if (!st)
        return;
    pid_t holder = sandlet_session_store_holder(st->map);
    child *c = holder > 0 ? live_child(st, holder) : NULL;
    if (holder > 0 && !c) {
        if (sandlet_session_store_release(st->map, holder))
            sandlet_warn("sandbox '%s': its session store's lock named pid %d, which is no "
                         "live worker of the sandbox (a servlet forged it); released it",
                         b->sb->name, (int)holder);
        holder = 0;
    }
    if (holder == 0 || holder != st->holder) {
        st->holder = holder;
        st->held = holder ? 1 : 0;
        return;
    }
    if (++st->held < STORE_HOLD_CHECKS || !c || c->kill_asked)
        return;
    sandlet_error("sandbox '%s': worker %d has held the session store's lock for %d s (the "
                  "sandbox's session calls fail meanwhile); killing it, a servlet of this "
                  "sandbox is stuck or hostile",
                  b->sb->name, (int)holder, STORE_HOLD_CHECKS * STORE_CHECK_MS / 1000);
    c->kill_asked = true;
    (void)sandlet_proc_kill(&c->proc, SIGKILL); /* -ESRCH: its exit is on its way */
}

/* development on: a sandbox whose servlet library changed on disk gets a
 * new code generation, as a reload would give it, and the acceptor
 * replaces its workers (the canary first: a library that no longer loads
 * leaves the old workers serving). */
static void on_watch(uv_timer_t *t)
{
    if (!sv.conf->development) {
        uv_timer_stop(t);
        return;
    }
    for (box *b = sv.boxes; b; b = b->next) {
        if (b->retired || !b->started)
            continue;
        unsigned char stamp[32];
        code_stamp(b, stamp);
        if (memcmp(stamp, b->stamp, sizeof(stamp)) == 0)
            continue;
        memcpy(b->stamp, stamp, sizeof(stamp));
        sandlet_info("sandbox '%s': a servlet library changed; its workers are replaced "
                     "(development on)",
                     b->sb->name);
        new_code(b);
    }
}

static void on_stores(uv_timer_t *t)
{
    (void)t;
    static uint64_t round;
    round++;
    for (box *b = sv.boxes; b; b = b->next) {
        if (!b->store || b->store->round == round)
            continue;
        b->store->round = round;
        check_session_store(b);
        check_store_lock(b);
    }
}

/* (See supervisor.h.)  close_range when the kernel has it; else each
 * descriptor /proc lists. */
void sandlet_cloexec_inherited(void)
{
#ifdef CLOSE_RANGE_CLOEXEC
    if (close_range(3, ~0u, CLOSE_RANGE_CLOEXEC) == 0)
        return;
#endif
    DIR *d = opendir("/proc/self/fd");
    if (!d) {
        /* No /proc: every descriptor number a process may hold. */
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
            fcntl((int)fd, F_SETFD, FD_CLOEXEC);
        return;
    }
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd < 3 || fd == self)
            continue;
        fcntl((int)fd, F_SETFD, FD_CLOEXEC);
    }
    closedir(d);
}

/* A box for sandbox index of p (not yet in sv.boxes, no worker started):
 * slots, and the session store (shared with from, a box of the same name
 * whose store has the same size, else new).  The identity and key are
 * the caller's.  Logs why and returns NULL when it cannot. */
static box *box_make(plan *p, size_t index, uint32_t id, box *from)
{
    const sandlet_sandbox_conf *sb = &p->conf->sandboxes[index];
    box *b = calloc(1, sizeof(*b));
    /* A slot per worker it may ever have; those past workers start only
     * on GROW. */
    unsigned nslots = sb->max_workers > sb->workers ? sb->max_workers : sb->workers;
    slot *slots = calloc(nslots ? nslots : 1, sizeof(*slots));
    if (!b || !slots) {
        sandlet_error("out of memory preparing sandbox '%s'", sb->name);
        free(b);
        free(slots);
        return NULL;
    }
    *b = (box){.id = id, .plan = p, .index = index, .sb = sb, .slots = slots, .nslots = nslots};
    p->refs++;
    for (size_t j = 0; j < b->nslots; j++)
        slots[j] = (slot){.box = b, .index = (uint32_t)j};
    code_stamp(b, b->stamp);
    if (sb->sessions == SANDLET_SESSIONS_MEMORY) {
        if (from && from->store && from->store->size == sb->session_size) {
            b->store = from->store;
            b->store->refs++;
        } else if (!(b->store = store_make(p->conf, sb))) {
            box_free(b);
            return NULL;
        }
    }
    return b;
}

/* Puts b's slots to work: their timers, then a worker each. */
static void box_start(box *b)
{
    b->started = true;
    /* ps shows a worker's uid as a number when it is a dynamic one: this
     * line says whose it is. */
    if (b->ident.uid != UINT32_MAX)
        sandlet_info("sandbox '%s' runs as uid %u, gid %u%s", b->sb->name, b->ident.uid,
                     b->ident.gid, b->sb->user ? "" : " (dynamic-uids)");
    for (size_t i = 0; i < b->nslots; i++) {
        uv_timer_init(&sv.loop, &b->slots[i].restart);
        b->slots[i].restart.data = &b->slots[i];
    }
    for (size_t i = 0; i < b->nslots; i++)
        if (!extra_slot(&b->slots[i]))
            spawn(&b->slots[i]);
}

static void secret_hash(const sandlet_conf *conf, unsigned char out[32])
{
    memset(out, 0, 32);
    if (conf->session_secret_set)
        crypto_generichash(out, 32, conf->session_secret, sizeof(conf->session_secret), NULL, 0);
}

/* Every sandbox's identity, session key and slots, decided from our own
 * configuration before any worker starts. */
static int prepare(sandlet_conf *conf)
{
    /* The acceptor parsed without libpq (sandlet_conf_load_no_pq): the
     * database strings' ports, the workers' Landlock rules, are ours to
     * derive.  A child of the acceptor checked the same strings already. */
    char err[1024];
    if (sandlet_conf_check_databases(conf, err, sizeof(err)) < 0) {
        sandlet_error("%s", err);
        return -EINVAL;
    }
    plan *p = calloc(1, sizeof(*p));
    sv.start_ids = calloc(conf->nsandboxes + 1, sizeof(*sv.start_ids));
    if (!p || !sv.start_ids) {
        free(p);
        sandlet_error("out of memory starting the supervisor");
        return -ENOMEM;
    }
    p->conf = conf;
    sv.plan = sv.plans = p;
    sv.conf = conf;
    if (sandlet_identity_resolve(conf, &sv.acceptor, false, sv.start_ids) < 0)
        return -EPERM;
    box **tail = &sv.boxes;
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        box *b = box_make(p, i, (uint32_t)i, NULL);
        if (!b)
            return -ENOMEM;
        b->start = true;
        b->ident = sv.start_ids[i];
        *tail = b;
        tail = &b->next;
        sv.nslots += b->nslots;
        int rc = sandlet_session_key_make(conf->session_secret_set ? conf->session_secret : NULL,
                                          b->sb->name, b->key);
        if (rc < 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, rc, "sandbox '%s': cannot make a session key",
                              b->sb->name);
            return rc;
        }
    }
    sv.next_id = (uint32_t)conf->nsandboxes;
    /* Stores an upgrade handed over for sandboxes this file no longer
     * has. */
    sandlet_upgrade_stores_close();
    /* The keys are made; the secret they come from is of no further use,
     * but whether a reload's file names the same one is. */
    secret_hash(conf, sv.secret_hash);
    sodium_memzero(conf->session_secret, sizeof(conf->session_secret));
    /* The acceptor's queue to us holds at most a KILL per slot and a
     * REOPEN; ours to it a WORKER and an EXITED per slot, two log
     * descriptors, and the newest DENIALS of each box (a box has a slot
     * at least).  Twice the first two and the third is room to spare,
     * never a bound hit in normal operation; a reload raises it
     * (reload_bound). */
    sv.out.max = 5 * sv.nslots + 16;
    /* And an answer per page the acceptor asks about at once. */
    if (conf->npages)
        sv.out.max += 8192;
    return 0;
}

/* Nothing of our environment reaches a servlet (a database password in
 * it would be every servlet's), except the dynamic loader's search path
 * when sandletd itself was started with one: the worker is this binary,
 * which needs it to find libsandlet (a build tree, an unusual prefix); it
 * is no secret and gives nothing new, the supervisor itself was loaded
 * with it.  A sanitizer build also passes the sanitizers' options, so
 * that its workers crash as the tests expect. */
static int worker_environment(void)
{
    static const char *const passed[] = {
        "LD_LIBRARY_PATH",
#ifdef SANDLET_SANITIZERS
        "ASAN_OPTIONS",
        "UBSAN_OPTIONS",
        "LSAN_OPTIONS",
#endif
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++) {
        const char *v = getenv(passed[i]);
        if (!v || !*v)
            continue;
        size_t len = strlen(passed[i]) + 1 + strlen(v) + 1;
        char *e = malloc(len);
        if (!e) {
            sandlet_error("out of memory preparing the workers' environment");
            return -ENOMEM;
        }
        snprintf(e, len, "%s=%s", passed[i], v);
        sv.env[n++] = e;
    }
    sv.env[n] = NULL;
    return 0;
}

static void cleanup(void)
{
    sandlet_ctl_queue_clear(&sv.out);
    /* The loop is closed: every handle is, so boxes go at once. */
    while (sv.boxes) {
        box *b = sv.boxes;
        sv.boxes = b->next;
        b->plan = NULL; /* plans are freed below */
        box_free(b);
    }
    while (sv.plans) {
        plan *p = sv.plans;
        sv.plans = p->next;
        if (p->conf != sv.start_conf)
            sandlet_conf_free(p->conf); /* the start plan is the caller's */
        free(p);
    }
    free(sv.start_ids);
    for (size_t i = 0; i < sizeof(sv.env) / sizeof(sv.env[0]); i++)
        free(sv.env[i]);
}

/* Learning mode's report asks who a pid is: a live worker of a sandbox in
 * learning mode, or nobody it reports on. */
static bool learning_worker(pid_t pid, sandlet_learn_who *out)
{
    for (box *b = sv.boxes; b; b = b->next) {
        if (!b->sb->learn)
            continue;
        for (size_t i = 0; i < b->nslots; i++)
            if (b->slots[i].live && b->slots[i].live->proc.pid == pid) {
                *out = (sandlet_learn_who){.sandbox = b->sb->name,
                                           .id = b->id,
                                           .groups = sandlet_confine_groups(b->sb->syscalls)};
                return true;
            }
    }
    return false;
}

/* Gone with the daemon: a state file naming a dead pid would have
 * "sandletd -s" signal whatever process reuses it. */
static void state_remove(void)
{
    if (sv.state_path[0] && unlink(sv.state_path) < 0 && errno != ENOENT)
        sandlet_log_errno(SANDLET_LOG_WARN, -errno, "cannot remove the state file %s",
                          sv.state_path);
}

int sandlet_supervisor_run(const sandlet_conf *conf, int ctl_fd, int exe_fd)
{
    sandlet_log_set_role("supervisor");
    /* Out of the terminal's process group: a Ctrl-C reaches the acceptor,
     * which then stops everything in order.  SIGTERM is ignored for the
     * same reason: service managers signal every process of the daemon,
     * and only the acceptor knows which requests are still in flight; we
     * leave when it closes the control socket. */
    setsid();
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    /* The acceptor held its stop signals while it started (main.c); they
     * are ignored here, and the workers start with a clear mask. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    memset(&sv, 0, sizeof(sv));
    sv.conf = conf;
    sv.start_conf = conf;
    sv.ctl = ctl_fd;
    /* Read from our own environment, never from the acceptor. */
    sv.confine = !getenv("SANDLET_NO_CONFINEMENT");
    /* Whatever started the daemon (or a test) may have left descriptors
     * open without close-on-exec: none reaches a worker. */
    sandlet_cloexec_inherited();
    /* A worker is started by exec of /proc/self/fd/N after libuv has put
     * its descriptors 0 to SANDLET_SPOOL_FD in place: N must lie above
     * them, or the exec would run the claim word, the session store or
     * the spool file. */
    if (exe_fd <= SANDLET_SPOOL_FD) {
        int moved = fcntl(exe_fd, F_DUPFD_CLOEXEC, SANDLET_SPOOL_FD + 1);
        if (moved < 0) {
            sandlet_log_errno(SANDLET_LOG_ERROR, -errno,
                              "cannot move the daemon's own binary (descriptor %d) out of the "
                              "workers' descriptors",
                              exe_fd);
            return 1;
        }
        close(exe_fd);
        exe_fd = moved;
    }
    snprintf(sv.exe, sizeof(sv.exe), "/proc/self/fd/%d", exe_fd);
    /* The spawner first, before anything else is opened or derived here
     * (session keys, stores, the audit socket): it starts every child,
     * keeping what that takes, so that we can drop it (harden.h).  It has
     * no use for the session secret. */
    pid_t spawner = sandlet_spawner_fork(sv.exe, ctl_fd, ((sandlet_conf *)conf)->session_secret,
                                         sizeof(conf->session_secret));
    if (spawner < 0)
        return 1;
    snprintf(sv.parent, sizeof(sv.parent), "%d", (int)spawner);
    if (worker_environment() < 0) {
        cleanup();
        return 1;
    }
    /* Ours since the fork: prepare wipes the session secret in it. */
    int rc = prepare((sandlet_conf *)conf);
    sandlet_pages_env penv = {.loop = &sv.loop,
                              .conf = conf,
                              .ids = sv.start_ids,
                              .exe = sv.exe,
                              .env = sv.env,
                              .tell = tell,
                              .refuse = refuse};
    /* Before hardening: the cache folders are made as root. */
    if (rc == 0)
        rc = sandlet_pages_start(&penv);
    if (rc < 0) {
        cleanup();
        return 1;
    }
    /* Learning mode's report reads the kernel's log, and the count of
     * seccomp kills its audit records: both opened while we may. */
    bool learning = false;
    for (box *b = sv.boxes; b; b = b->next)
        learning = learning || b->sb->learn;
    if (rc == 0 && learning)
        sandlet_learn_open(); /* logged when it cannot */
    bool audit = rc == 0 && sv.confine && sandlet_audit_open() == 0;
    /* Where the records will not come, development mode's workers note
     * refused file calls themselves (filehint.c). */
    sandlet_init_landlock_records(audit && say_landlock_records(conf));
    /* Everything needing more is done: the session stores exist, the
     * identities are resolved.  Sanitizer runs (SANDLET_NO_CONFINEMENT)
     * keep ptrace and the rest for their tools. */
    if (sv.confine && sandlet_harden_supervisor() < 0) {
        cleanup();
        return 1;
    }
    /* A sandbox already over its quota starts with its writes blocked;
     * sandboxes that share a filesystem are told what bounds them there. */
    sandlet_quota_warn_shared(conf);
    check_quotas();
    rc = uv_loop_init(&sv.loop);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot start the event loop");
        cleanup();
        return 1;
    }
    rc = sandlet_spawner_watch(&sv.loop, state_remove);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot watch the spawner's socket");
        cleanup();
        return 1;
    }
    uv_timer_init(&sv.loop, &sv.grace);
    uv_timer_init(&sv.loop, &sv.outlived);
    uv_timer_init(&sv.loop, &sv.quota);
    uv_timer_init(&sv.loop, &sv.stores);
    uv_timer_init(&sv.loop, &sv.watch);
    uv_timer_init(&sv.loop, &sv.reopen);
    uv_timer_init(&sv.loop, &sv.denials);
    uv_timer_init(&sv.loop, &sv.reload_timer);
    uv_timer_start(&sv.stores, on_stores, STORE_CHECK_MS, STORE_CHECK_MS);
    if (conf->development)
        uv_timer_start(&sv.watch, on_watch, WATCH_MS, WATCH_MS);
    for (size_t i = 0; i < conf->nsandboxes; i++)
        if (has_quota(&conf->sandboxes[i])) {
            uv_timer_start(&sv.quota, on_quota, QUOTA_CHECK_MS, QUOTA_CHECK_MS);
            break;
        }
    rc = uv_poll_init(&sv.loop, &sv.poll, ctl_fd);
    if (rc == 0)
        rc = uv_poll_start(&sv.poll, UV_READABLE | UV_DISCONNECT, on_ctl);
    if (rc < 0) {
        sandlet_log_errno(SANDLET_LOG_ERROR, rc, "cannot watch the control socket");
        cleanup();
        return 1;
    }
    if (learning)
        sandlet_learn_start(&sv.loop, learning_worker);
    /* The acceptor, our parent, takes the signals. */
    sv.state.pid = (long)getppid();
    snprintf(sv.state.phase, sizeof(sv.state.phase), "starting");
    if (sandlet_state_path(conf, sv.state_path, sizeof(sv.state_path)) < 0)
        sv.state_path[0] = '\0';
    state_save();
    if (audit)
        sandlet_audit_start(&sv.loop, seccomp_record, is_worker, landlock_denial);
    for (box *b = sv.boxes; b; b = b->next)
        box_start(b);
    maybe_ready();
    maybe_finish();
    uv_run(&sv.loop, UV_RUN_DEFAULT);
    uv_loop_close(&sv.loop);
    state_remove();
    cleanup();
    return 0;
}

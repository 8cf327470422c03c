/*
 * reload.c - the acceptor's side of a reload (SIGHUP), and the two things
 * a reload swaps: the configuration generations requests are routed
 * under, and the listeners.
 *
 * The supervisor reads and checks the file (it is root, and the file may
 * name files only root reads), then hands over the result: a socket for
 * each new address (LISTEN), then the file's bytes and the id of each
 * sandbox (CONF).  Here the text is parsed again without its secrets and
 * applied within one loop turn:
 *  - new requests are routed under it; a request already routed keeps the
 *    configuration it was routed under until it ends (sandlet_confgen);
 *  - a pool whose sandbox the reload kept carries on, with the new queue
 *    limits; a changed or removed sandbox's pool serves what it has queued,
 *    closes its workers as they go idle, and goes; a new sandbox's pool
 *    queues requests until its first worker is up;
 *  - a listener whose address stays is never closed, so no client is
 *    refused; a removed one stops accepting (its backlog is dropped).
 * This file must never read the configuration file, bind, or decide
 * anything about workers: those are the supervisor's.
 */
#include "config.h"

#include "common/log.h"
#include "loop/acceptor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* More listen lines than this in one file is no configuration anyone
 * writes; a LISTEN past it is refused. */
#define MAX_LISTEN_LINES 4096

/* ---- configuration generations ------------------------------------------- */

sandlet_confgen *sandlet_confgen_new(sandlet_conf *conf)
{
    sandlet_confgen *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->conf = conf;
    g->refs = 1;
    /* An array of pointers, on purpose. */
    g->pool_of =
        calloc(conf->nsandboxes + 1, sizeof(sandlet_pool *)); // NOLINT(bugprone-sizeof-expression)
    g->local_index = calloc(conf->nservlets + 1, sizeof(*g->local_index));
    g->nservlets = calloc(conf->nsandboxes + 1, sizeof(*g->nservlets));
    g->host_fd = malloc((conf->nhosts + 1) * sizeof(*g->host_fd));
    if (!g->pool_of || !g->local_index || !g->nservlets || !g->host_fd) {
        free(g->host_fd);
        g->host_fd = NULL;
        g->conf = NULL; /* still the caller's */
        sandlet_confgen_put(g);
        return NULL;
    }
    /* Each servlet's index among its sandbox's servlets, as INIT lists
     * them: computed once here, read by every request. */
    for (size_t j = 0; j < conf->nservlets; j++) {
        size_t i = conf->servlets[j].sandbox;
        g->local_index[j] = g->nservlets[i]++;
    }
    /* As files.c opens the default host's docroot: a directory handle
     * beneath which static.c resolves every file. */
    for (size_t i = 0; i < conf->nhosts; i++) {
        const sandlet_host_conf *h = &conf->hosts[i];
        g->host_fd[i] = -1;
        if (h->docroot && (g->host_fd[i] = open(h->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
            sandlet_log_errno(SANDLET_LOG_ERROR, -errno,
                              "%s:%d: host %s: docroot %s cannot be opened, so its files "
                              "answer 404; create it or fix the docroot line",
                              conf->file, h->docroot_line, h->names[0], h->docroot);
    }
    return g;
}

sandlet_confgen *sandlet_confgen_hold(sandlet_confgen *g)
{
    g->refs++;
    return g;
}

void sandlet_confgen_put(sandlet_confgen *g)
{
    if (!g || --g->refs > 0)
        return;
    for (size_t i = 0; g->host_fd && g->conf && i < g->conf->nhosts; i++)
        if (g->host_fd[i] >= 0)
            close(g->host_fd[i]);
    free(g->host_fd);
    sandlet_conf_free(g->conf);
    free(g->pool_of);
    free(g->local_index);
    free(g->nservlets);
    free(g);
}

/* ---- listeners -------------------------------------------------------------- */

/* Room for one more listener in srv's array (of pointers, on purpose). */
static bool listeners_grow(sandlet_server *srv)
{
    size_t size =
        (srv->nlisteners + 1) * sizeof(sandlet_listener *); // NOLINT(bugprone-sizeof-expression)
    sandlet_listener **more = realloc(srv->listeners, size);
    if (more)
        srv->listeners = more;
    return more != NULL;
}

static void listener_closed(uv_handle_t *h)
{
    free(h->data);
}

int sandlet_listener_add(sandlet_server *srv, const sandlet_listen_conf *lc, int fd)
{
    sandlet_listener *l = calloc(1, sizeof(*l));
    if (!listeners_grow(srv) || !l) {
        free(l);
        close(fd);
        return -ENOMEM;
    }
    l->srv = srv;
    snprintf(l->host, sizeof(l->host), "%s", lc->host);
    l->port = lc->port;
    uv_tcp_init(srv->loop, &l->tcp);
    l->tcp.data = l;
    int rc = uv_tcp_open(&l->tcp, fd);
    if (rc < 0)
        close(fd); /* libuv takes it only when the open succeeds */
    else
        rc = uv_listen((uv_stream_t *)&l->tcp, 511, sandlet_http_accept);
    if (rc < 0) {
        uv_close((uv_handle_t *)&l->tcp, listener_closed);
        return rc;
    }
    srv->listeners[srv->nlisteners++] = l;
    return 0;
}

void sandlet_listeners_close(sandlet_server *srv)
{
    for (size_t i = 0; i < srv->nlisteners; i++)
        uv_close((uv_handle_t *)&srv->listeners[i]->tcp, listener_closed);
    srv->nlisteners = 0;
}

/* ---- limits ------------------------------------------------------------------ */

void sandlet_server_caps(sandlet_server *srv)
{
    unsigned cap = srv->conf->max_connections;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        /* Each worker: its channel and its output pipe; each pool's
         * worker may be replaced while its successor is handed over; the
         * listeners, logs, docroot, control socket and a margin. */
        unsigned long long reserve = 64 + srv->nlisteners;
        for (const sandlet_pool *p = srv->pools; p; p = p->next)
            reserve += 4ull * p->nworkers;
        /* A connection may hold a file it sends besides its socket. */
        unsigned long long room = rl.rlim_cur > reserve ? (rl.rlim_cur - reserve) / 2 : 1;
        if (room < cap) {
            static unsigned warned; /* the cap last warned about */
            cap = room ? (unsigned)room : 1;
            /* The default max-connections is a ceiling, not a request:
             * below it the cap follows the limit, said at info level, so
             * that the shipped configuration does not warn at every start
             * on a host with a lower limit.  A value the file chose is
             * one the operator expects, and gets a warning. */
            bool chosen = srv->conf->max_connections != SANDLET_DEFAULT_MAX_CONNECTIONS;
            if (warned != cap)
                sandlet_log(chosen ? SANDLET_LOG_WARN : SANDLET_LOG_INFO,
                            "the open-files limit (%llu) leaves room for %u connections, fewer "
                            "than max-connections %u: accepting pauses there (raise the limit: "
                            "LimitNOFILE= in the unit, ULIMIT in /etc/default/sandlet, ulimit -n "
                            "before starting sandletd)",
                            (unsigned long long)rl.rlim_cur, cap, srv->conf->max_connections);
            warned = cap;
        }
    }
    srv->conn_cap = cap;
}

/* ---- applying a reload ---------------------------------------------------- */

static void drop_pending(sandlet_server *srv)
{
    for (size_t i = 0; i < srv->npending_listen; i++)
        if (srv->pending_listen[i] >= 0)
            close(srv->pending_listen[i]);
    free(srv->pending_listen);
    srv->pending_listen = NULL;
    srv->npending_listen = 0;
}

void sandlet_reload_listen(sandlet_server *srv, const sandlet_ctl *m, int fd)
{
    if (fd < 0 || m->slot >= MAX_LISTEN_LINES) {
        sandlet_error("the supervisor sent a listening socket for line %u without a socket or "
                      "past %d lines; ignored",
                      m->slot, MAX_LISTEN_LINES);
        if (fd >= 0)
            close(fd);
        return;
    }
    if (m->slot >= srv->npending_listen) {
        size_t n = (size_t)m->slot + 1;
        int *more = realloc(srv->pending_listen, n * sizeof(*more));
        if (!more) {
            sandlet_error("out of memory taking a new listener; it is lost until the next reload");
            close(fd);
            return;
        }
        for (size_t i = srv->npending_listen; i < n; i++)
            more[i] = -1;
        srv->pending_listen = more;
        srv->npending_listen = n;
    }
    if (srv->pending_listen[m->slot] >= 0)
        close(srv->pending_listen[m->slot]);
    srv->pending_listen[m->slot] = fd;
}

/* The listeners the new configuration names: kept ones stay open, new
 * ones come from LISTEN, the others are closed. */
static void apply_listeners(sandlet_server *srv, const sandlet_conf *conf)
{
    size_t nold = srv->nlisteners;
    sandlet_listener **old = srv->listeners;
    bool *keep = calloc(nold + 1, sizeof(*keep));
    if (!keep) {
        sandlet_error("out of memory applying the reload's listeners; they stay as they were "
                      "until the next reload");
        drop_pending(srv);
        return;
    }
    srv->listeners = NULL;
    srv->nlisteners = 0;
    for (size_t j = 0; j < conf->nlistens; j++) {
        const sandlet_listen_conf *lc = &conf->listens[j];
        size_t k = 0;
        for (; k < nold; k++) {
            sandlet_listen_conf have = {.host = old[k]->host, .port = old[k]->port};
            if (!keep[k] && sandlet_conf_listen_same(&have, lc))
                break;
        }
        if (k < nold && listeners_grow(srv)) {
            keep[k] = true;
            srv->listeners[srv->nlisteners++] = old[k];
            continue;
        }
        int fd = j < srv->npending_listen ? srv->pending_listen[j] : -1;
        if (fd < 0) {
            sandlet_error("%s:%d: no socket for %s port %u came with the reload; it is not "
                          "listened on (send SIGHUP again)",
                          conf->file, lc->line, lc->host, lc->port);
            continue;
        }
        srv->pending_listen[j] = -1;
        int rc = sandlet_listener_add(srv, lc, fd);
        if (rc < 0)
            sandlet_log_errno(SANDLET_LOG_ERROR, rc, "%s:%d: cannot listen on %s port %u",
                              conf->file, lc->line, lc->host, lc->port);
        else
            sandlet_info("reload: listening on %s%s%s:%u", strchr(lc->host, ':') ? "[" : "",
                         lc->host, strchr(lc->host, ':') ? "]" : "", lc->port);
    }
    for (size_t k = 0; k < nold; k++) {
        if (keep[k])
            continue;
        sandlet_info("reload: no longer listening on %s%s%s:%u",
                     strchr(old[k]->host, ':') ? "[" : "", old[k]->host,
                     strchr(old[k]->host, ':') ? "]" : "", old[k]->port);
        uv_close((uv_handle_t *)&old[k]->tcp, listener_closed);
    }
    free(keep);
    free(old);
    drop_pending(srv);
}

int sandlet_reload_apply(sandlet_server *srv, int fd)
{
    char err[1024];
    sandlet_conf *conf = NULL;
    int rc = fd >= 0 ? sandlet_ctl_conf_read(fd, &conf, err, sizeof(err)) : -EPROTO;
    if (fd >= 0)
        close(fd);
    if (rc == -EPROTO && fd < 0)
        snprintf(err, sizeof(err), "the reloaded configuration came without its file");
    sandlet_confgen *g = rc == 0 ? sandlet_confgen_new(conf) : NULL;
    if (rc == 0 && !g) {
        sandlet_conf_free(conf);
        snprintf(err, sizeof(err), "out of memory");
    }
    if (!g) {
        /* The supervisor runs the new configuration's workers already:
         * serving the old one on would only fail.  A stop lets the service
         * manager (or the operator) start sandletd again. */
        sandlet_error("cannot apply the reloaded configuration: %s; stopping", err);
        drop_pending(srv);
        return -1;
    }
    sandlet_conf_forget_secrets(conf);
    size_t kept = 0, made = 0, retired = 0;
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        sandlet_pool *p = sandlet_pool_find(srv, conf->sandboxes[i].id);
        const sandlet_sandbox_conf *sb = &conf->sandboxes[i];
        unsigned slots = sb->max_workers > sb->workers ? sb->max_workers : sb->workers;
        if (p && !p->retired && p->nworkers == slots && p->conf->workers == sb->workers) {
            sandlet_pool_rebase(p, g, i);
            g->pool_of[i] = p;
            kept++;
        } else if (!(g->pool_of[i] = sandlet_pool_new(srv, g, i))) {
            sandlet_error("out of memory applying the reloaded configuration; stopping");
            sandlet_confgen_put(g); /* the pools made hold it until they go */
            drop_pending(srv);
            return -1;
        } else {
            made++;
        }
    }
    sandlet_confgen *old = srv->gen;
    srv->gen = g;
    srv->conf = conf;
    for (sandlet_pool *p = srv->pools, *next; p; p = next) {
        next = p->next; /* retiring may unlink it */
        bool stays = false;
        for (size_t i = 0; i < conf->nsandboxes && !stays; i++)
            stays = g->pool_of[i] == p;
        if (!stays && !p->retired) {
            retired++;
            sandlet_pool_retire(p);
        }
    }
    apply_listeners(srv, conf);
    sandlet_server_caps(srv);
    /* Room for a KILL per worker of every pool, retired ones included. */
    size_t max = 64 + (conf->npages ? 8192 : 0);
    for (const sandlet_pool *p = srv->pools; p; p = p->next)
        max += 2 * (size_t)p->nworkers;
    if (srv->ctl_out.max < max)
        srv->ctl_out.max = max;
    sandlet_confgen_put(old);
    sandlet_info("reload: %s applied: %zu sandbox(es) kept, %zu started, %zu draining; "
                 "%zu listener(s)",
                 conf->file, kept, made, retired, srv->nlisteners);
    return 0;
}

void sandlet_reload_free(sandlet_server *srv)
{
    drop_pending(srv);
    free(srv->listeners);
    srv->listeners = NULL;
    sandlet_confgen_put(srv->gen);
    srv->gen = NULL;
}

/*
 * pages.c - the acceptor's page table: C Server Pages as the acceptor sees
 * them (sandlet-csp(5)).
 *
 * A request routed to a page (route.c: its path names a .csp) is resolved
 * beneath the docroot like a static file, mapped to its sandbox by the
 * "pages" blocks, and then either handed to the sandbox's pool at once
 * (the supervisor said recently that the page is ready, and at which
 * generation of the sandbox's workers) or parked on the page until the
 * supervisor answers a PAGE_CHECK: one question per page at a time, so
 * that twenty first requests cause one compile; the answer releases every
 * request parked on the page.  Questions are asked again RECHECK_MS after
 * the last answer, so an edited page is seen by the next request.
 *
 * It must never compile, read the cache or block: the supervisor does all
 * of that, and the only file this side reads is a compile's diagnostics,
 * through the descriptor the supervisor hands over, in development mode.
 */
#include "config.h"

#include "common/log.h"
#include "loop/acceptor.h"
#include "loop/pages.h"
#include "loop/static.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long an answer about a page stands: a request later than this asks
 * again (a round trip to the supervisor, a few stat calls there), so an
 * edit is seen within this much of being saved. */
#define RECHECK_MS 100
/* Requests parked on one page; more get 503 at once. */
#define MAX_WAITERS 1024
/* Pages known at once (the supervisor holds at most SANDLET_MAX_PAGES a
 * sandbox); a table this full answers 503 to new ones. */
#define MAX_PAGES 8192
#define BUCKETS   1024
/* The diagnostics shown in development mode. */
#define MAX_DIAG ((size_t)64 * 1024)
/* How long past page-compile-timeout a question may go unanswered before
 * its requests get 503 (the supervisor is stuck, or lost it). */
#define ANSWER_GRACE_MS 10000
#define SWEEP_MS        500

struct sandlet_page {
    char *rel;
    size_t sandbox;
    sandlet_servlet_conf sc; /* what the pool sees: path "/" rel */
    int status;              /* the last answer: 0 ready, or -errno */
    uint32_t slot, gen;
    uint64_t answered; /* uv_now of the last answer; 0: none yet */
    uint64_t asked;
    bool asking;
    char *diag; /* development mode: the last failed compile's output */
    size_t diag_len;
    sandlet_conn *whead, *wtail;
    size_t nwait;
    sandlet_page *hnext;
};

/* The request paths (before '?') last seen for pages, direct-mapped:
 * the busy path of a page costs a hash and a compare, no system call.
 * What a path names beneath the docroot depends only on its decoding
 * (static.c), so an entry never goes stale; whether the file is still a
 * page inside the docroot is the supervisor's check, every RECHECK_MS. */
#define RAW_SLOTS 1024
#define RAW_MAX   240
typedef struct raw_slot {
    sandlet_page *page;
    uint16_t len;
    char path[RAW_MAX];
} raw_slot;

struct sandlet_pagetab {
    sandlet_page *buckets[BUCKETS];
    size_t n;
    size_t asking;
    uv_timer_t sweep;
    raw_slot raw[RAW_SLOTS];
};

static uint32_t hash_n(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int sandlet_pages_open(sandlet_server *srv)
{
    srv->pagetab = NULL;
    if (!srv->conf->npages)
        return 0;
    struct sandlet_pagetab *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    uv_timer_init(srv->loop, &t->sweep);
    t->sweep.data = srv;
    srv->pagetab = t;
    return 0;
}

void sandlet_pages_free(sandlet_server *srv)
{
    struct sandlet_pagetab *t = srv->pagetab;
    if (!t)
        return;
    for (size_t i = 0; i < BUCKETS; i++) {
        sandlet_page *p = t->buckets[i];
        while (p) {
            sandlet_page *next = p->hnext;
            free(p->rel);
            free(p->sc.path);
            free(p->diag);
            free(p);
            p = next;
        }
    }
    free(t);
    srv->pagetab = NULL;
}

static sandlet_page *lookup(struct sandlet_pagetab *t, const char *rel)
{
    for (sandlet_page *p = t->buckets[hash(rel) % BUCKETS]; p; p = p->hnext)
        if (strcmp(p->rel, rel) == 0)
            return p;
    return NULL;
}

static sandlet_page *add(sandlet_server *srv, const char *rel, const sandlet_pages_conf *map)
{
    struct sandlet_pagetab *t = srv->pagetab;
    if (t->n >= MAX_PAGES)
        return NULL;
    sandlet_page *p = calloc(1, sizeof(*p));
    size_t len = strlen(rel);
    char *r = malloc(len + 1), *path = malloc(len + 2);
    if (!p || !r || !path) {
        free(p);
        free(r);
        free(path);
        return NULL;
    }
    memcpy(r, rel, len + 1);
    path[0] = '/';
    memcpy(path + 1, rel, len + 1);
    p->rel = r;
    p->sandbox = srv->conf->sandboxes[map->sandbox].id; /* reloads keep it */
    p->sc = (sandlet_servlet_conf){.path = path,
                                   .sandbox = map->sandbox,
                                   .max_body_size = srv->conf->max_body_size,
                                   .line = map->line};
    uint32_t b = hash(rel) % BUCKETS;
    p->hnext = t->buckets[b];
    t->buckets[b] = p;
    t->n++;
    return p;
}

const sandlet_servlet_conf *sandlet_page_servlet(const sandlet_page *p, uint32_t *slot,
                                                 uint32_t *gen)
{
    if (slot)
        *slot = p->slot;
    if (gen)
        *gen = p->gen;
    return &p->sc;
}

/* ---- answering a request ----------------------------------------------- */

static void put_escaped(sandlet_buf *b, const char *s, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = NULL;
        switch (s[i]) {
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '&': e = "&amp;"; break;
        case '"': e = "&quot;"; break;
        case '\'': e = "&#39;"; break;
        default: break;
        }
        if (!e)
            continue;
        sandlet_buf_put(b, s + from, i - from);
        sandlet_buf_put(b, e, strlen(e));
        from = i + 1;
    }
    sandlet_buf_put(b, s + from, n - from);
}

/* Development mode: the compiler's own words, escaped, with the .csp
 * lines it names; production: the plain 500 every error gets (the log
 * has the first diagnostic). */
static void compile_error(sandlet_conn *c, const sandlet_page *p)
{
    sandlet_server *srv = sandlet_conn_server(c);
    if (!srv->conf->development) {
        sandlet_conn_fail(c, 500);
        return;
    }
    sandlet_buf b;
    sandlet_buf_init(&b, MAX_DIAG * 6 + 4096);
    static const char top[] = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                              "<title>500 Page did not compile</title></head><body>\n<h1>";
    sandlet_buf_put(&b, top, sizeof(top) - 1);
    put_escaped(&b, p->sc.path, strlen(p->sc.path));
    static const char mid[] = " did not compile</h1>\n<pre>";
    sandlet_buf_put(&b, mid, sizeof(mid) - 1);
    if (p->diag_len)
        put_escaped(&b, p->diag, p->diag_len);
    else if (p->status == -ETIMEDOUT)
        put_escaped(&b, "the compile ran past page-compile-timeout and was cut off\n", 58);
    else if (p->status == -ECANCELED) {
        static const char why[] = "the page compiled, but the sandbox's workers died loading it: "
                                  "its init section (or a constructor) crashed; see the error "
                                  "log\n";
        put_escaped(&b, why, sizeof(why) - 1);
    } else
        put_escaped(&b, "no diagnostics were kept (see the error log)\n", 45);
    static const char end[] = "</pre>\n<p>Fix the page and reload. This page shows because "
                              "sandlet.conf says <code>development on;</code>; in production "
                              "clients get a plain error and the log names the first "
                              "diagnostic.</p>\n</body></html>\n";
    sandlet_buf_put(&b, end, sizeof(end) - 1);
    /* Never stored: it is about this version of the page only. */
    static const char type[] = "Content-Type: text/html; charset=utf-8\r\n"
                               "Cache-Control: no-store\r\n";
    size_t body = sandlet_conn_head_only(c) ? 0 : b.len;
    if (b.error || sandlet_conn_respond(c, 500, type, sizeof(type) - 1, b.len, b.data, body) < 0) {
        sandlet_buf_free(&b);
        sandlet_conn_fail(c, 500);
        return;
    }
    sandlet_buf_free(&b);
    sandlet_conn_request_done(c);
}

/* The page's last answer applied to one request. */
static void deliver(sandlet_conn *c, sandlet_page *p)
{
    sandlet_server *srv = sandlet_conn_server(c);
    switch (p->status) {
    case 0: {
        sandlet_pool *pool = sandlet_pool_find(srv, (uint32_t)p->sandbox);
        if (pool)
            sandlet_pool_submit(pool, c);
        else
            sandlet_conn_fail(c, 503);
        return;
    }
    case -ENOENT: sandlet_conn_fail(c, 404); return;
    case -ENOEXEC:
    case -ETIMEDOUT:
    case -ECANCELED: compile_error(c, p); return;
    case -ENOSPC:
    case -ENOMEM:
    case -EAGAIN: sandlet_conn_fail(c, 503); return;
    default: sandlet_conn_fail(c, 500); return;
    }
}

/* Releases every request parked on p: each is answered with status when
 * it is not 0, else by p's answer.  The list is detached first: answering
 * one request may start the next request of its connection, which may be
 * for this very page. */
static void release(sandlet_page *p, int status)
{
    sandlet_conn *c = p->whead;
    p->whead = p->wtail = NULL;
    p->nwait = 0;
    while (c) {
        sandlet_page_link *l = sandlet_conn_page_link(c);
        sandlet_conn *next = l->wnext;
        l->waiting = false;
        l->wnext = NULL;
        if (status)
            sandlet_conn_fail(c, status);
        else
            deliver(c, p);
        c = next;
    }
}

/* Questions unanswered far too long: their requests hear 503, and the
 * next request asks again. */
static void sweep(uv_timer_t *t)
{
    sandlet_server *srv = t->data;
    struct sandlet_pagetab *tab = srv->pagetab;
    uint64_t now = uv_now(srv->loop);
    uint64_t limit = (uint64_t)srv->conf->page_compile_timeout + ANSWER_GRACE_MS;
    for (size_t i = 0; i < BUCKETS && tab->asking; i++)
        for (sandlet_page *p = tab->buckets[i]; p; p = p->hnext) {
            if (!p->asking || now - p->asked < limit)
                continue;
            sandlet_error("page %s: no answer from the supervisor after %" PRIu64
                          " ms; answering 503",
                          p->sc.path, now - p->asked);
            p->asking = false;
            tab->asking--;
            release(p, 503);
        }
    if (!tab->asking)
        uv_timer_stop(&tab->sweep);
}

static int ask(sandlet_server *srv, sandlet_page *p)
{
    struct sandlet_pagetab *t = srv->pagetab;
    sandlet_ctl m = {.type = SANDLET_CTL_PAGE_CHECK, .sandbox = (uint32_t)p->sandbox};
    memcpy(m.page, p->rel, strlen(p->rel) + 1); /* shorter than m.page: checked */
    int rc = sandlet_server_send(srv, &m);
    if (rc < 0)
        return rc;
    p->asking = true;
    p->asked = uv_now(srv->loop);
    if (t->asking++ == 0)
        uv_timer_start(&t->sweep, sweep, SWEEP_MS, SWEEP_MS);
    return 0;
}

/* The page target[0..plen) names, resolved beneath the docroot as a
 * static file would be (a regular file, reached only through links that
 * stay inside it), mapped to its sandbox and entered in the table; NULL
 * when c has been answered instead. */
static sandlet_page *resolve(sandlet_conn *c, const char *target, size_t plen)
{
    sandlet_server *srv = sandlet_conn_server(c);
    struct sandlet_pagetab *t = srv->pagetab;
    int fd = -1;
    struct stat st;
    char ext[8], rel[SANDLET_CTL_PAGE_MAX];
    int rc = sandlet_static_open_rel(srv->docroot_fd, target, plen, "index.html", &fd, &st, ext,
                                     sizeof(ext), rel, sizeof(rel));
    if (rc < 0) {
        sandlet_conn_fail(c, sandlet_files_status(rc));
        return NULL;
    }
    close(fd);
    if (!rel[0]) {
        sandlet_conn_fail(c, 414); /* longer than a page name may be */
        return NULL;
    }
    const sandlet_pages_conf *map =
        strcmp(ext, "csp") == 0 ? sandlet_conf_pages_for(srv->conf, rel) : NULL;
    if (!map) {
        /* A .csp no pages block covers: not a page, and never a static
         * file either (its source would leak). */
        sandlet_debug("%s: /%s is in no 'pages' folder; answering 404", sandlet_conn_reqline(c),
                      rel);
        sandlet_conn_fail(c, 404);
        return NULL;
    }
    sandlet_page *p = lookup(t, rel);
    if (!p && !(p = add(srv, rel, map))) {
        sandlet_error("%s: cannot track page /%s (%zu pages known, or out of memory); "
                      "answering 503",
                      sandlet_conn_reqline(c), rel, t->n);
        sandlet_conn_fail(c, 503);
        return NULL;
    }
    return p;
}

void sandlet_pages_serve(sandlet_conn *c)
{
    sandlet_server *srv = sandlet_conn_server(c);
    struct sandlet_pagetab *t = srv->pagetab;
    if (!t || srv->docroot_fd < 0) {
        sandlet_conn_fail(c, 404);
        return;
    }
    size_t len, plen;
    const char *target = sandlet_conn_target(c, &len, &plen);
    raw_slot *slot = &t->raw[hash_n(target, plen) % RAW_SLOTS];
    sandlet_page *p;
    if (slot->page && slot->len == plen && memcmp(slot->path, target, plen) == 0) {
        p = slot->page;
    } else {
        if (!(p = resolve(c, target, plen)))
            return;
        if (plen <= RAW_MAX) {
            slot->page = p;
            slot->len = (uint16_t)plen;
            memcpy(slot->path, target, plen);
        }
    }
    sandlet_page_link *l = sandlet_conn_page_link(c);
    l->page = p;
    uint64_t now = uv_now(srv->loop);
    if (!p->asking && p->answered && now - p->answered < RECHECK_MS) {
        deliver(c, p);
        return;
    }
    /* While a recheck of a ready page is out, the page is served as it
     * was: only the request that asked waits for the answer (it sees an
     * edit made before it), and a busy page never stalls on the round
     * trip. */
    if (p->asking && p->status == 0 && p->answered && p->whead) {
        deliver(c, p);
        return;
    }
    if (p->nwait >= MAX_WAITERS) {
        sandlet_warn("%s: %zu requests already wait for page %s; answering 503",
                     sandlet_conn_reqline(c), p->nwait, p->sc.path);
        sandlet_conn_fail(c, 503);
        return;
    }
    if (!p->asking && ask(srv, p) < 0) {
        sandlet_conn_fail(c, 503);
        return;
    }
    l->waiting = true;
    l->wnext = NULL;
    if (p->wtail)
        sandlet_conn_page_link(p->wtail)->wnext = c;
    else
        p->whead = c;
    p->wtail = c;
    p->nwait++;
}

void sandlet_pages_forget(sandlet_conn *c)
{
    sandlet_page_link *l = sandlet_conn_page_link(c);
    sandlet_page *p = l->page;
    if (p && l->waiting) {
        sandlet_conn *prev = NULL;
        for (sandlet_conn *q = p->whead; q; q = sandlet_conn_page_link(q)->wnext) {
            if (q != c) {
                prev = q;
                continue;
            }
            if (prev)
                sandlet_conn_page_link(prev)->wnext = l->wnext;
            else
                p->whead = l->wnext;
            if (p->wtail == c)
                p->wtail = prev;
            p->nwait--;
            break;
        }
    }
    sandlet_page_link_reset(l);
}

/* Development mode keeps what the compiler said, read (a small regular
 * file, at most MAX_DIAG) from the descriptor the supervisor sent. */
static void take_diag(sandlet_page *p, int fd, bool keep)
{
    free(p->diag);
    p->diag = NULL;
    p->diag_len = 0;
    if (fd < 0)
        return;
    char *d = keep ? malloc(MAX_DIAG) : NULL;
    size_t n = 0;
    while (d && n < MAX_DIAG) {
        ssize_t r = read(fd, d + n, MAX_DIAG - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    p->diag = d;
    p->diag_len = d ? n : 0;
}

void sandlet_pages_answer(sandlet_server *srv, const sandlet_ctl *m, int fd)
{
    struct sandlet_pagetab *t = srv->pagetab;
    sandlet_page *p = t ? lookup(t, m->page) : NULL;
    if (!p || p->sandbox != m->sandbox) {
        if (fd >= 0)
            close(fd);
        sandlet_error("an answer from the supervisor about page /%s, which nobody asked about; "
                      "ignored",
                      m->page);
        return;
    }
    if (p->asking) {
        p->asking = false;
        t->asking--;
    }
    p->status = m->status;
    p->slot = m->slot;
    p->gen = m->pages;
    p->answered = uv_now(srv->loop);
    take_diag(p, fd, srv->conf->development && m->status != 0);
    /* The supervisor is trusted, but a slot past what INIT can hold
     * would only ever reach a wrong servlet: refused here too. */
    if (m->status == 0 && (m->slot >= SANDLET_MAX_PAGES || m->pages == 0))
        p->status = -EIO;
    sandlet_pool *pool = sandlet_pool_find(srv, (uint32_t)p->sandbox);
    if (p->status == 0 && pool)
        sandlet_pool_pages(pool, p->gen);
    release(p, 0);
}

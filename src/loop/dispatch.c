/*
 * dispatch.c - who answers a request, seen from the connection: routes it
 * once its head is parsed (route.c decides, under the current
 * configuration generation, which the request holds until it ends),
 * gives the connection the hooks it calls back through, and hands the
 * request, when it may be served, to the part that answers: a sandbox's
 * pool, the page table, the docroot or the status page.
 *
 * It sits between http.c, which calls it only through the server's hooks
 * (main.c installs these functions), and the parts that answer.  It never
 * parses or writes HTTP (an error answer goes through sandlet_conn_fail),
 * and it looks at a connection only through conn.h.
 */
#include "config.h"

#include "loop/acceptor.h"
#include "loop/route.h"

_Static_assert(SANDLET_ROUTE_FILES == 0,
               "a request nobody routed (sandlet_conn_routed's 0) is the docroot's");

/* Output room: the worker streaming to c is read again, a file's next
 * piece is sent. */
static void drained(sandlet_conn *c)
{
    sandlet_pool_resume(c); /* nothing when no worker serves c */
    if (sandlet_conn_sending_file(c) &&
        sandlet_conn_write_backlog(c) < SANDLET_WRITE_HIGH_WATER / 2)
        sandlet_files_pump(c);
}

static void gone(sandlet_conn *c)
{
    sandlet_pool_forget(c);  /* nothing when c is at no pool */
    sandlet_pages_forget(c); /* nothing when c waits for no page */
}

/* The same for every route: each part's call does nothing for a request
 * it does not hold, and a pipelined request's route must not take the
 * previous one's file pump away while its last pieces are sent. */
static const sandlet_conn_hooks hooks = {
    .drained = drained,
    .gone = gone,
    .failed = sandlet_pages_forget, /* nothing when c waits for no page */
    .body_more = sandlet_pool_body_more,
    .backlog = sandlet_pool_body_backlog,
    .header_allowed = sandlet_pool_header_allowed,
};

void sandlet_dispatch_route(sandlet_conn *c)
{
    size_t tlen, plen, host_len;
    const char *target = sandlet_conn_target(c, &tlen, &plen);
    const char *host = sandlet_conn_host(c, &host_len);
    sandlet_server *srv = sandlet_conn_server(c);
    sandlet_confgen *g = srv->gen;
    sandlet_route route =
        sandlet_route_request(g->conf, host, host_len, sandlet_conn_peer(c), target, plen);
    sandlet_conn_routed r = {
        .kind = route.kind,
        .worker = route.servlet || route.kind == SANDLET_ROUTE_PAGE,
        .servlet = route.servlet,
        .docroot_fd = srv->docroot_fd,
    };
    if (route.host < g->conf->nhosts) {
        /* The host's docroot lives in the generation: held until the
         * request ends, so a reload cannot close it under a file being
         * opened. */
        r.held = sandlet_confgen_hold(g);
        r.docroot_fd = g->host_fd[route.host];
    }
    if (r.servlet) {
        size_t i = (size_t)(r.servlet - g->conf->servlets);
        if (!r.held)
            r.held = sandlet_confgen_hold(g);
        r.servlet_local = g->local_index[i];
        r.sandbox = g->conf->sandboxes[r.servlet->sandbox].id;
    }
    sandlet_conn_route(c, &r, &hooks);
}

void sandlet_dispatch(sandlet_conn *c)
{
    /* The pool is looked up now, not kept from routing: a reload may have
     * changed or removed the sandbox (and freed its pool) while the body
     * was read.  Then the request goes where the configuration now sends
     * it: nothing of it has reached a worker yet. */
    sandlet_server *srv = sandlet_conn_server(c);
    const sandlet_conn_routed *r = sandlet_conn_routing(c);
    sandlet_pool *pool = NULL;
    if (r->kind == SANDLET_ROUTE_SERVLET) {
        pool = sandlet_pool_find(srv, r->sandbox);
        if (!pool || pool->retired) {
            sandlet_dispatch_route(c);
            if (r->servlet && sandlet_conn_body_total(c) > r->servlet->max_body_size) {
                sandlet_conn_fail(c, 413);
                return;
            }
            pool = r->servlet ? sandlet_pool_find(srv, r->sandbox) : NULL;
            if (r->servlet && (!pool || pool->retired)) {
                sandlet_conn_fail(c, 503); /* cannot happen: the new pools exist */
                return;
            }
        }
    }
    switch ((enum sandlet_route_kind)r->kind) {
    case SANDLET_ROUTE_SERVLET: sandlet_pool_submit(pool, c); break;
    case SANDLET_ROUTE_STATUS: sandlet_status_serve(c); break;
    case SANDLET_ROUTE_FILES: sandlet_files_serve(c); break;
    case SANDLET_ROUTE_PAGE: sandlet_pages_serve(c); break;
    case SANDLET_ROUTE_MISDIRECTED: sandlet_conn_fail(c, 421); break;
    }
}

void sandlet_dispatch_release(void *held)
{
    sandlet_confgen_put(held);
}

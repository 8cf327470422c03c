/*
 * route.c - which part of the server answers a request: a servlet (by
 * the configured routes), the status page, or the docroot.
 *
 * It sits above the connection: http.c asks once per request, as soon as
 * the head is parsed (a servlet's body limit depends on the answer), and
 * dispatches on it.  Pure decisions on the configuration, the path and
 * the peer: it must never touch a connection, block, or allocate.
 */
#include "config.h"

#include "loop/route.h"

#include <string.h>

const sandlet_servlet_conf *sandlet_conf_route(const sandlet_conf *conf, const char *path,
                                               size_t len)
{
    const sandlet_servlet_conf *best = NULL;
    size_t bestlen = 0;

    if (!conf || (!path && len))
        return NULL;
    for (size_t i = 0; i < conf->nservlets; i++) {
        const sandlet_servlet_conf *s = &conf->servlets[i];
        size_t n = strlen(s->path);
        if (n > len || memcmp(s->path, path, n) != 0)
            continue;
        if (!s->prefix && n == len)
            return s;
        if (s->prefix && (!best || n > bestlen)) {
            best = s;
            bestlen = n;
        }
    }
    return best;
}

/* The status page answers loopback clients only, so that the public
 * listener reveals nothing (others get the 404 any unknown path gets). */
static bool loopback(const char *peer)
{
    return strncmp(peer, "127.", 4) == 0 || strncmp(peer, "[::1]:", 6) == 0 ||
           strncmp(peer, "[::ffff:127.", 12) == 0;
}

sandlet_route sandlet_route_request(const sandlet_conf *conf, const char *peer, const char *path,
                                    size_t len)
{
    sandlet_route r = {.kind = SANDLET_ROUTE_FILES, .servlet = sandlet_conf_route(conf, path, len)};
    if (r.servlet) {
        r.kind = SANDLET_ROUTE_SERVLET;
        return r;
    }
    const char *page = conf->status_page;
    if (page && loopback(peer) && len == strlen(page) && memcmp(path, page, len) == 0)
        r.kind = SANDLET_ROUTE_STATUS;
    return r;
}

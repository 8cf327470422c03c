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
#include "lib/servlet.h"

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

/* Whether the last segment of path, percent-decoded as static.c decodes
 * it, ends in ".csp" in any case: every spelling of a page's name is a
 * page, so that no spelling reaches the docroot as a static file. */
static bool names_page(const char *path, size_t len)
{
    char tail[4] = {0};
    for (size_t i = 0; i < len; i++) {
        char c = path[i];
        int h = c == '%' && len - i >= 3 ? sandlet_lib_hexval((unsigned char)path[i + 1]) : -1;
        int l = h >= 0 ? sandlet_lib_hexval((unsigned char)path[i + 2]) : -1;
        if (l >= 0) {
            c = (char)(h * 16 + l);
            i += 2;
        }
        if (c == '/') {
            memset(tail, 0, sizeof(tail));
            continue;
        }
        memmove(tail, tail + 1, 3);
        tail[3] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    return memcmp(tail, ".csp", 4) == 0;
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
    else if (conf->npages && names_page(path, len))
        r.kind = SANDLET_ROUTE_PAGE;
    return r;
}

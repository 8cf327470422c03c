/*
 * route.c - which part of the server answers a request: first the host
 * block its Host header names (as nginx picks a server block: an exact
 * name, then the longest wildcard, then the default host), then a servlet
 * of that host (by the configured routes), the status page, or the host's
 * docroot.
 *
 * It sits above the connection: dispatch.c asks once per request, as soon
 * as the head is parsed (a servlet's body limit depends on the answer),
 * and dispatches on it.  Pure decisions on the configuration, the path and
 * the peer: it must never touch a connection, block, or allocate.
 */
#include "config.h"

#include "loop/route.h"
#include "lib/servlet.h"

#include <string.h>

const sandlet_servlet_conf *sandlet_conf_route_host(const sandlet_conf *conf, size_t host,
                                                    const char *path, size_t len)
{
    const sandlet_servlet_conf *best = NULL;
    size_t bestlen = 0;

    if (!conf || (!path && len))
        return NULL;
    for (size_t i = 0; i < conf->nservlets; i++) {
        const sandlet_servlet_conf *s = &conf->servlets[i];
        if (s->host != host)
            continue;
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

const sandlet_servlet_conf *sandlet_conf_route(const sandlet_conf *conf, const char *path,
                                               size_t len)
{
    return sandlet_conf_route_host(conf, SANDLET_HOST_DEFAULT, path, len);
}

size_t sandlet_conf_host(const sandlet_conf *conf, const char *host, size_t len)
{
    size_t fallback = conf && conf->unknown_hosts == SANDLET_UNKNOWN_HOSTS_REFUSE
                          ? SANDLET_HOST_MISDIRECTED
                          : SANDLET_HOST_DEFAULT;
    if (!conf || !host)
        return fallback;
    /* The name without its port and one trailing dot (RFC 9110 7.2:
     * uri-host [":" port]); an IP literal in brackets names no host block.
     * What remains is compared ignoring case, byte by byte: a name of the
     * file holds only lowercase letters, digits, '-' and '.', so a Host
     * with anything else matches nothing. */
    if (len && host[0] == '[')
        return fallback;
    const char *colon = memchr(host, ':', len);
    if (colon)
        len = (size_t)(colon - host);
    if (len && host[len - 1] == '.')
        len--;
    if (len == 0 || len > SANDLET_HOST_NAME_MAX)
        return fallback;
    char name[SANDLET_HOST_NAME_MAX + 1];
    for (size_t i = 0; i < len; i++) {
        char c = host[i];
        name[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    size_t best = fallback, bestlen = 0;
    for (size_t i = 0; i < conf->nhosts; i++) {
        const sandlet_host_conf *h = &conf->hosts[i];
        for (size_t j = 0; j < h->nnames; j++) {
            const char *n = h->names[j];
            size_t nl = strlen(n);
            if (n[0] != '*') {
                if (nl == len && memcmp(n, name, len) == 0)
                    return i;
                continue;
            }
            /* "*.example.org": what follows the '*' ends the name, and at
             * least one byte precedes it. */
            size_t sl = nl - 1;
            if (len > sl && memcmp(name + len - sl, n + 1, sl) == 0 && sl > bestlen) {
                best = i;
                bestlen = sl;
            }
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

sandlet_route sandlet_route_request(const sandlet_conf *conf, const char *host, size_t host_len,
                                    const char *peer, const char *path, size_t len)
{
    sandlet_route r = {.kind = SANDLET_ROUTE_FILES,
                       .host = conf->nhosts || conf->unknown_hosts
                                   ? sandlet_conf_host(conf, host, host_len)
                                   : SANDLET_HOST_DEFAULT};
    /* The status page is the server's, not a host's: a loopback client
     * reaches it under any Host. */
    const char *page = conf->status_page;
    bool status = page && loopback(peer) && len == strlen(page) && memcmp(path, page, len) == 0;
    if (r.host == SANDLET_HOST_MISDIRECTED) {
        r.kind = status ? SANDLET_ROUTE_STATUS : SANDLET_ROUTE_MISDIRECTED;
        return r;
    }
    r.servlet = sandlet_conf_route_host(conf, r.host, path, len);
    if (r.servlet) {
        r.kind = SANDLET_ROUTE_SERVLET;
        return r;
    }
    if (status)
        r.kind = SANDLET_ROUTE_STATUS;
    else if (conf->npages && names_page(path, len))
        /* Pages are the default host's; under another host a page's name
         * still never reaches the docroot as a file (files.c refuses it). */
        r.kind = r.host == SANDLET_HOST_DEFAULT ? SANDLET_ROUTE_PAGE : SANDLET_ROUTE_FILES;
    return r;
}

/*
 * route.h - the routing decision (route.c): servlet, status page or
 * docroot.  sandlet_conf_route itself is declared in conf.h.
 */
#ifndef SANDLET_LOOP_ROUTE_H
#define SANDLET_LOOP_ROUTE_H

#include "common/conf.h"

#include <stddef.h>

enum sandlet_route_kind {
    SANDLET_ROUTE_FILES,       /* the docroot (or 404 without one) */
    SANDLET_ROUTE_SERVLET,     /* a worker of servlet's sandbox */
    SANDLET_ROUTE_STATUS,      /* the status page */
    SANDLET_ROUTE_PAGE,        /* a C Server Page (pages.c resolves which) */
    SANDLET_ROUTE_MISDIRECTED, /* 421: no host block names it (unknown-hosts refuse) */
};

typedef struct sandlet_route {
    enum sandlet_route_kind kind;
    const sandlet_servlet_conf *servlet; /* for SANDLET_ROUTE_SERVLET */
    size_t host; /* index into conf->hosts, SANDLET_HOST_DEFAULT or _MISDIRECTED */
} sandlet_route;

/* Who answers path (the request path before '?') asked by peer ("ip:port"
 * or "[ip]:port") for host (the Host header's host_len bytes, NULL: none):
 * the host block first (sandlet_conf_host; 421 when none and
 * unknown-hosts refuse), then a servlet's route of that host, then the
 * status page for a loopback peer (under any host), then, on the default
 * host, a page when the configuration has pages and the path's last
 * segment, percent-decoded, ends in ".csp" in any case, else the host's
 * docroot. */
sandlet_route sandlet_route_request(const sandlet_conf *conf, const char *host, size_t host_len,
                                    const char *peer, const char *path, size_t len);

#endif

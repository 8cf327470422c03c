/*
 * fuzz_conf.c - libFuzzer target for the configuration parser
 * (src/loop/conf.c, sandlet_conf_parse: the text of sandlet.conf).
 *
 * The input is the file's text, given with its exact length and no NUL
 * after it (as a file read into memory is), so that ASan sees any read
 * past the end.  A parse that succeeds must give a configuration whose
 * numbers are in their documented ranges and whose servlets name existing
 * sandboxes; routing a few paths through it must work, and every exact
 * name of a host block must reach that block.  A parse that fails
 * must say why in the documented form "NAME:LINE:COL: ..." within the
 * error buffer.  Leaks of half-built configurations are caught by LSan.
 *
 * The parser touches no file or process (it is given a base directory,
 * not asked to find one): tens of thousands of inputs per second.
 */
#include "config.h"

#include "common/conf.h"
#include "sandbox/control.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void invariant(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "FUZZ INVARIANT violated: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    char err[512];
    memset(err, 'x', sizeof(err));
    sandlet_conf *conf = NULL;
    int rc = sandlet_conf_parse(text, size, "fuzz.conf", "/etc/sandlet", &conf, err, sizeof(err));
    if (rc < 0) {
        invariant(conf == NULL, "a failed parse returned a configuration");
        invariant(memchr(err, '\0', sizeof(err)) != NULL, "error message not terminated");
        invariant(strncmp(err, "fuzz.conf:", 10) == 0, "error message does not name the file");
    } else {
        invariant(conf != NULL, "a parse that succeeded returned no configuration");
        invariant(conf->nlistens >= 1, "no listen address");
        for (size_t i = 0; i < conf->nlistens; i++)
            invariant(conf->listens[i].port <= 65535 && conf->listens[i].host,
                      "listen address out of range");
        for (size_t i = 0; i < conf->nsandboxes; i++) {
            const sandlet_sandbox_conf *sb = &conf->sandboxes[i];
            invariant(sb->workers >= 1 && sb->workers <= SANDLET_MAX_WORKERS,
                      "workers out of range");
            invariant(sb->ndatabase_ports <= SANDLET_MAX_DATABASE_PORTS,
                      "database ports out of range");
            invariant(sb->session_cookie && strncmp(sb->session_cookie, "SLSESSION_", 10) == 0,
                      "sandbox without its own session cookie name");
            invariant(sb->session_path && sb->session_path[0] == '/',
                      "session cookie path not absolute");
            for (size_t j = 0; j < i; j++)
                invariant(strcasecmp(sb->session_cookie, conf->sandboxes[j].session_cookie) != 0,
                          "two sandboxes share a session cookie name");
            invariant(sb->name && *sb->name, "sandbox without a name");
        }
        for (size_t i = 0; i < conf->nservlets; i++) {
            const sandlet_servlet_conf *s = &conf->servlets[i];
            invariant(s->sandbox < conf->nsandboxes, "servlet in a sandbox that does not exist");
            invariant(s->path && s->path[0] == '/', "servlet path not absolute");
            invariant(s->library && s->library[0] == '/', "library path not made absolute");
            invariant(s->host == SANDLET_HOST_DEFAULT || s->host < conf->nhosts,
                      "servlet of a host block that does not exist");
            const sandlet_servlet_conf *r =
                sandlet_conf_route_host(conf, s->host, s->path, strlen(s->path));
            invariant(r != NULL && r->host == s->host, "a servlet's own path routes nowhere");
        }
        /* Every host block has a name, each name is lowercase and, when
         * exact, a Host header of it reaches that block. */
        for (size_t i = 0; i < conf->nhosts; i++) {
            const sandlet_host_conf *h = &conf->hosts[i];
            invariant(h->nnames >= 1, "host block without a name");
            invariant(!h->docroot || h->docroot[0] == '/', "host docroot not made absolute");
            for (size_t j = 0; j < h->nnames; j++) {
                const char *n = h->names[j];
                for (const char *q = n; *q; q++)
                    invariant(!(*q >= 'A' && *q <= 'Z'), "host name not lowercased");
                if (n[0] != '*')
                    invariant(sandlet_conf_host(conf, n, strlen(n)) == i,
                              "a host name does not reach its host block");
            }
        }
        (void)sandlet_conf_host(conf, "a.example.org:80", 16);
        invariant(conf->max_header_size <= SANDLET_MAX_HEADER_SIZE_LIMIT &&
                      conf->max_body_size <= SANDLET_MAX_BODY_SIZE_LIMIT,
                  "size limit above its ceiling");
        static const char *const paths[] = {"/", "/a", "/app/", "/app/x/y", "/hello", ""};
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
            (void)sandlet_conf_route(conf, paths[i], strlen(paths[i]));
        /* The supervisor's copy: the same sandboxes and servlets, none of
         * the acceptor's settings, and nothing shared with the original. */
        sandlet_conf *plan = sandlet_conf_plan(conf);
        if (plan) {
            invariant(plan->nsandboxes == conf->nsandboxes && plan->nservlets == conf->nservlets,
                      "the supervisor's copy lost a sandbox or a servlet");
            invariant(!plan->status_page, "the supervisor's copy holds acceptor settings");
            invariant(plan->nlistens == conf->nlistens,
                      "the supervisor's copy lost a listen address");
            for (size_t i = 0; i < plan->nlistens; i++)
                invariant(sandlet_conf_listen_same(&plan->listens[i], &conf->listens[i]) &&
                              plan->listens[i].host != conf->listens[i].host,
                          "the supervisor's copy of a listen address differs or is shared");
            /* The docroot is the supervisor's too (it compiles pages). */
            invariant(!plan->docroot == !conf->docroot && plan->npages == conf->npages,
                      "the supervisor's copy lost the docroot or a pages mapping");
            for (size_t i = 0; i < conf->npages; i++) {
                invariant(plan->pages[i].prefix != conf->pages[i].prefix &&
                              strcmp(plan->pages[i].prefix, conf->pages[i].prefix) == 0,
                          "a pages mapping is shared or differs");
                (void)sandlet_conf_pages_for(conf, "a/b.csp");
            }
            for (size_t i = 0; i < plan->nsandboxes; i++)
                invariant(plan->sandboxes[i].name != conf->sandboxes[i].name &&
                              strcmp(plan->sandboxes[i].name, conf->sandboxes[i].name) == 0 &&
                              plan->sandboxes[i].nreadable == conf->sandboxes[i].nreadable &&
                              plan->sandboxes[i].nwritable == conf->sandboxes[i].nwritable,
                          "the supervisor's copy of a sandbox differs");
            for (size_t i = 0; i < plan->nservlets; i++)
                invariant(plan->servlets[i].sandbox == conf->servlets[i].sandbox &&
                              plan->servlets[i].host == conf->servlets[i].host &&
                              plan->servlets[i].nparams == conf->servlets[i].nparams,
                          "the supervisor's copy of a servlet differs");
            /* A reload of the same file keeps every sandbox and needs no
             * restart: the copy holds everything a reload compares. */
            for (size_t i = 0; i < plan->nsandboxes; i++)
                invariant(sandlet_conf_sandbox_same(conf, i, plan, i) &&
                              sandlet_conf_sandbox_same(plan, i, conf, i),
                          "a reload of the same file would change a sandbox");
            invariant(sandlet_conf_restart_needed(plan, conf) == NULL,
                      "a reload of the same file would need a restart");
        }
        /* What the acceptor gets at a reload: the same text, its ids. */
        uint32_t ids[64];
        size_t nids = conf->nsandboxes < 64 ? conf->nsandboxes : 0;
        for (size_t i = 0; i < nids; i++)
            ids[i] = (uint32_t)(1000 + nids - i);
        sandlet_conf_text t = {.text = text, .len = size, .basedir = "/etc/sandlet"};
        int fd =
            nids || !conf->nsandboxes ? sandlet_ctl_conf_write(&t, "fuzz.conf", ids, nids) : -1;
        if (fd >= 0) {
            sandlet_conf *pub = NULL;
            char perr[1024];
            int prc = sandlet_ctl_conf_read(fd, &pub, perr, sizeof(perr));
            invariant(prc == 0 && pub->nsandboxes == conf->nsandboxes &&
                          pub->nservlets == conf->nservlets,
                      "the acceptor's parse of a reload differs from the supervisor's");
            for (size_t i = 0; i < nids; i++)
                invariant(pub->sandboxes[i].id == ids[i] &&
                              sandlet_conf_sandbox_same(conf, i, pub, i) ==
                                  !conf->sandboxes[i].database_password,
                          "the acceptor's copy of a sandbox differs");
            sandlet_conf_free(pub);
            close(fd);
        }
        sandlet_conf_free(conf);
        sandlet_conf_free(plan);
    }
    free(text);
    return 0;
}

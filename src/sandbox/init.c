/*
 * init.c - encodes the INIT frame of a sandbox's workers (see init.h).
 *
 * It reads only the supervisor's configuration and never anything a
 * worker or the acceptor sent.  The session key is the sandbox's own; no
 * other sandbox's key ever enters its frame.
 */
#include "config.h"

#include "sandbox/init.h"
#include "sandbox/session_store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(SANDLET_WIRE_KEY_LEN == SANDLET_SESSION_KEY_LEN, "INIT carries one session key");

/* The kernel's Landlock records reach the supervisor (set at start). */
static bool records;

void sandlet_init_landlock_records(bool arrive)
{
    records = arrive;
}

int sandlet_init_encode(sandlet_buf *b, const sandlet_conf *conf, size_t sandbox, bool confine,
                        uint32_t uid, uint32_t gid, const uint8_t *key,
                        const sandlet_init_pages *pages, const char *spool)
{
    if (sandbox >= conf->nsandboxes)
        return -EINVAL;
    const sandlet_sandbox_conf *sb = &conf->sandboxes[sandbox];
    if (sb->nreadable > UINT16_MAX || sb->nwritable > UINT16_MAX || sb->ndatabase_ports > UINT8_MAX)
        return -EMSGSIZE;
    size_t n = 0, nparams = 0;
    for (size_t i = 0; i < conf->nservlets; i++)
        if (conf->servlets[i].sandbox == sandbox) {
            n++;
            nparams += conf->servlets[i].nparams;
        }
    if (n > UINT16_MAX || (pages && pages->npages > UINT16_MAX))
        return -EMSGSIZE;
    /* The message points into the configuration; only the lists of
     * pairs are laid out anew. */
    sandlet_wire_servlet *servlets = calloc(n ? n : 1, sizeof(*servlets));
    sandlet_wire_header *params = calloc(nparams ? nparams : 1, sizeof(*params));
    uint16_t *ports = calloc(sb->ndatabase_ports ? sb->ndatabase_ports : 1, sizeof(*ports));
    int rc = -ENOMEM;
    if (!servlets || !params || !ports)
        goto out;
    sandlet_wire_header *p = params;
    n = 0;
    for (size_t i = 0; i < conf->nservlets; i++) {
        const sandlet_servlet_conf *s = &conf->servlets[i];
        if (s->sandbox != sandbox)
            continue;
        rc = -EMSGSIZE;
        if (s->nparams > UINT16_MAX)
            goto out;
        servlets[n] = (sandlet_wire_servlet){s->path, s->library, p, (uint16_t)s->nparams,
                                             s->timeout ? s->timeout : sb->timeout};
        for (size_t j = 0; j < s->nparams; j++)
            *p++ = (sandlet_wire_header){.name = s->params[j].name, .value = s->params[j].value};
        n++;
    }
    for (size_t i = 0; i < sb->ndatabase_ports; i++)
        ports[i] = sb->database_ports[i];
    /* How the worker confines itself: the identity is the one it was
     * started with, which it only checks. */
    sandlet_wire_init in = {
        .sandbox = sb->name,
        .servlets = servlets,
        .nservlets = (uint16_t)n,
        .pages_gen = pages ? pages->gen : 0,
        .pages = pages ? pages->pages : NULL,
        .npages = pages ? (uint16_t)pages->npages : 0,
        .confine = confine,
        .uid = uid,
        .gid = gid,
        .memory_mib = sb->memory_mib,
        .open_files = sb->open_files,
        .cpu_seconds = sb->cpu_seconds,
        .core_dumps = sb->core_dumps,
        .syscalls = (uint8_t)sb->syscalls,
        .learn = sb->learn,
        .file_hints = conf->development && !records,
        .readable = (const char **)sb->readable,
        .nreadable = (uint16_t)sb->nreadable,
        .writable = (const char **)sb->writable,
        .nwritable = (uint16_t)sb->nwritable,
        .max_file_size = sb->max_file_size,
        .ports = ports,
        .nports = (uint8_t)sb->ndatabase_ports,
        /* Sessions: the store itself is descriptor 4; these are the
         * settings for using it, and last this sandbox's key. */
        .sessions = (uint8_t)sb->sessions,
        .session_timeout = sb->session_timeout,
        .cookie_secure = sb->session_cookie_secure,
        .cookie_name = sb->session_cookie,
        .cookie_path = sb->session_path,
        .database = sb->database,
        .database_password = sb->database_password,
        .page_timeout = sb->timeout,
        .spool = spool,
        .key = key,
    };
    rc = sandlet_wire_init_encode(b, &in);
out:
    free(servlets);
    free(params);
    free(ports);
    return rc;
}

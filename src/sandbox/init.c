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
#include <string.h>

static void put_cstr(sandlet_buf *b, const char *s)
{
    sandlet_buf_put_str(b, s, strlen(s));
}

int sandlet_init_encode(sandlet_buf *b, const sandlet_conf *conf, size_t sandbox, bool confine,
                        uint32_t uid, uint32_t gid, const uint8_t *key)
{
    if (sandbox >= conf->nsandboxes)
        return -EINVAL;
    const sandlet_sandbox_conf *sb = &conf->sandboxes[sandbox];
    size_t mark = b->len;
    size_t start = sandlet_frame_begin(b, SANDLET_FRAME_INIT, 0);
    put_cstr(b, sb->name);
    uint16_t n = 0;
    for (size_t i = 0; i < conf->nservlets; i++)
        n += conf->servlets[i].sandbox == sandbox;
    sandlet_buf_put_u16(b, n);
    for (size_t i = 0; i < conf->nservlets; i++) {
        const sandlet_servlet_conf *s = &conf->servlets[i];
        if (s->sandbox != sandbox)
            continue;
        put_cstr(b, s->path);
        put_cstr(b, s->library);
        sandlet_buf_put_u16(b, (uint16_t)s->nparams);
        for (size_t j = 0; j < s->nparams; j++) {
            put_cstr(b, s->params[j].name);
            put_cstr(b, s->params[j].value);
        }
    }
    /* How the worker confines itself: the identity is the one it was
     * started with, which it only checks. */
    sandlet_buf_put_u8(b, confine);
    sandlet_buf_put_u32(b, uid);
    sandlet_buf_put_u32(b, gid);
    sandlet_buf_put_u32(b, sb->memory_mib);
    sandlet_buf_put_u32(b, sb->open_files);
    sandlet_buf_put_u32(b, sb->cpu_seconds);
    sandlet_buf_put_u8(b, sb->core_dumps);
    sandlet_buf_put_u8(b, (uint8_t)sb->syscalls);
    sandlet_buf_put_u8(b, sb->learn);
    sandlet_buf_put_u16(b, (uint16_t)sb->nreadable);
    for (size_t i = 0; i < sb->nreadable; i++)
        put_cstr(b, sb->readable[i]);
    sandlet_buf_put_u16(b, (uint16_t)sb->nwritable);
    for (size_t i = 0; i < sb->nwritable; i++)
        put_cstr(b, sb->writable[i]);
    sandlet_buf_put_u64(b, sb->max_file_size);
    sandlet_buf_put_u8(b, (uint8_t)sb->ndatabase_ports);
    for (size_t i = 0; i < sb->ndatabase_ports; i++)
        sandlet_buf_put_u16(b, sb->database_ports[i]);
    /* Sessions: the store itself is descriptor 4; these are the settings
     * for using it, and last this sandbox's key. */
    sandlet_buf_put_u8(b, (uint8_t)sb->sessions);
    sandlet_buf_put_u32(b, sb->session_timeout);
    sandlet_buf_put_u8(b, sb->session_cookie_secure);
    put_cstr(b, sb->session_cookie);
    put_cstr(b, sb->session_path);
    sandlet_buf_put(b, key, SANDLET_SESSION_KEY_LEN);
    int rc = b->error;
    if (rc == 0)
        rc = sandlet_frame_finish(b, start, SANDLET_FRAME_END);
    if (rc < 0) {
        b->len = mark;
        b->error = 0;
    }
    return rc;
}

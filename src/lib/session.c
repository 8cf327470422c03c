/*
 * session.c - the servlet's view of its client's session: finding it by
 * cookie or parameter, reading and writing values, invalidation, new ids,
 * and the link/form helpers for clients without cookies.
 *
 * A session belongs to one sandbox: its cookie is named after the sandbox
 * (SLSESSION_<name>), scoped to the sandbox's routes (Path), and carries
 * the id with a MAC made with the sandbox's key, checked before the store
 * is asked (servlet.h).  A servlet of another sandbox therefore cannot
 * read a session it was handed, nor plant an id that this sandbox would
 * accept, and a session this file makes never overwrites the cookie of
 * another sandbox.
 *
 * Where sessions live is the store's business (sandlet_session_ops in
 * servlet.h: the sandbox's shared memory now, a database later).  Here a
 * session's data is one blob of entries, copied into the request arena
 * when the session is found and written back whole on every change, so a
 * value a servlet holds stays valid for the request even if another
 * worker changes the session meanwhile.  The blob comes from memory other
 * processes write: every length in it is checked before use.  This file
 * must never log or print a session id or the key (they are credentials).
 *
 * Blob entry: u8 key length, u32 value length (little endian), the key,
 * the value, a NUL (so that string values need no copy).
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct sl_session {
    sl_request *rq;
    sl_response *rs;
    uint8_t id[SANDLET_SESSION_ID_LEN];
    char hex[SANDLET_SESSION_TOKEN_LEN + 1]; /* the token the client holds */
    const uint8_t *data;                     /* arena copy of the store's blob */
    size_t len;
    bool dead; /* invalidated here, or gone from the store */
};

#define ENTRY_HEAD 5 /* key length byte + value length */

static sandlet_session_config cfg;
/* A session call of the request being served found the store down
 * (-EAGAIN): the answer must not be a page built without the session. */
static bool store_failed;
/* Copies of cfg's strings, so that a caller's buffers need not live on. */
static char cfg_sandbox[SANDLET_SESSION_NAME_MAX + 1];
static char cfg_cookie[SANDLET_SESSION_COOKIE_SIZE];
static char *cfg_path;
/* The MAC's state once the key, the context and the sandbox's name are
 * absorbed: a request's MAC costs one copy and one compression. */
static crypto_generichash_state mac_base;

/* Domain separation: a MAC made here means nothing anywhere else. */
static const char mac_context[] = "sandlet session id v1";

int sandlet_lib_session_cookie_name(const char *sandbox, char *out)
{
    size_t len = sandbox ? strlen(sandbox) : 0;
    if (len == 0 || len > SANDLET_SESSION_NAME_MAX)
        return -ENAMETOOLONG;
    size_t p = sizeof(SL_SESSION_COOKIE) - 1;
    memcpy(out, SL_SESSION_COOKIE "_", p + 1);
    p++;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)sandbox[i];
        bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.';
        out[p++] = keep ? (char)c : '_';
    }
    out[p] = '\0';
    return 0;
}

int sandlet_lib_session_configure(const sandlet_session_config *c)
{
    free(cfg_path);
    cfg_path = NULL;
    sodium_memzero(&cfg, sizeof(cfg));
    sodium_memzero(&mac_base, sizeof(mac_base));
    if (!c || !c->ops)
        return 0;
    char cookie[SANDLET_SESSION_COOKIE_SIZE];
    if (!c->sandbox || !c->cookie_name || strlen(c->sandbox) > SANDLET_SESSION_NAME_MAX ||
        sandlet_lib_session_cookie_name(c->sandbox, cookie) < 0 ||
        strcmp(cookie, c->cookie_name) != 0)
        return -EINVAL;
    if (sodium_init() < 0)
        return -ENOSYS;
    if (c->ops->set_key) {
        int rc = c->ops->set_key(c->store, c->key);
        if (rc < 0)
            return rc;
    }
    const char *path = c->cookie_path ? c->cookie_path : "/";
    if (!(cfg_path = strdup(path)))
        return -ENOMEM;
    cfg = *c;
    memcpy(cfg_sandbox, c->sandbox, strlen(c->sandbox) + 1);
    memcpy(cfg_cookie, cookie, sizeof(cookie));
    cfg.sandbox = cfg_sandbox;
    cfg.cookie_name = cfg_cookie;
    cfg.cookie_path = cfg_path;
    /* The name is NUL-terminated in the input, so no two (name, id)
     * pairs give the same bytes. */
    crypto_generichash_init(&mac_base, cfg.key, sizeof(cfg.key), SANDLET_SESSION_MAC_LEN);
    crypto_generichash_update(&mac_base, (const uint8_t *)mac_context, sizeof(mac_context));
    crypto_generichash_update(&mac_base, (const uint8_t *)cfg.sandbox, strlen(cfg.sandbox) + 1);
    return 0;
}

/* ---- ids ----------------------------------------------------------------- */

/* MAC over (context, sandbox name, id) with the sandbox's key. */
static void make_mac(const uint8_t *id, uint8_t *mac)
{
    crypto_generichash_state st = mac_base;
    crypto_generichash_update(&st, id, SANDLET_SESSION_ID_LEN);
    crypto_generichash_final(&st, mac, SANDLET_SESSION_MAC_LEN);
    sodium_memzero(&st, sizeof(st));
}

void sandlet_lib_session_token(const uint8_t *id, char *out)
{
    uint8_t raw[SANDLET_SESSION_ID_LEN + SANDLET_SESSION_MAC_LEN];
    memcpy(raw, id, SANDLET_SESSION_ID_LEN);
    make_mac(id, raw + SANDLET_SESSION_ID_LEN);
    sodium_bin2hex(out, SANDLET_SESSION_TOKEN_LEN + 1, raw, sizeof(raw));
}

/* Exactly 64 hex digits whose second half is the MAC of the first; anything
 * else is no id at all.  Checked before the store sees the id, so that a
 * forged or foreign id costs one hash and never a lookup. */
bool sandlet_lib_session_verify(const char *s, size_t len, uint8_t *id)
{
    uint8_t raw[SANDLET_SESSION_ID_LEN + SANDLET_SESSION_MAC_LEN], want[SANDLET_SESSION_MAC_LEN];
    size_t got = 0;
    const char *end = NULL;
    if (!s || !cfg.sandbox || len != SANDLET_SESSION_TOKEN_LEN ||
        sodium_hex2bin(raw, sizeof(raw), s, len, NULL, &got, &end) != 0 || got != sizeof(raw) ||
        end != s + len)
        return false;
    make_mac(raw, want);
    if (crypto_verify_16(want, raw + SANDLET_SESSION_ID_LEN) != 0)
        return false;
    memcpy(id, raw, SANDLET_SESSION_ID_LEN);
    return true;
}

static void set_id(sl_session *s, const uint8_t *id)
{
    memcpy(s->id, id, SANDLET_SESSION_ID_LEN);
    sandlet_lib_session_token(id, s->hex);
}

/* The session cookie: the sandbox's own name and Path (so that it neither
 * reaches nor replaces another sandbox's), hidden from scripts, not sent
 * on cross-site subrequests, HTTPS-only when configured. */
static int send_cookie(sl_session *s, bool expire)
{
    sl_cookie_options o = {.path = cfg.cookie_path,
                           .http_only = true,
                           .same_site = SL_SAME_SITE_LAX,
                           .secure = cfg.cookie_secure};
    if (expire) {
        o.has_max_age = true;
        o.max_age = 0;
        o.expires = 1;
    }
    sandlet_lib_cookie_unset(s->rs, cfg.cookie_name);
    return sl_set_cookie(s->rs, cfg.cookie_name, expire ? "" : s->hex, &o);
}

/* The id field of an application/x-www-form-urlencoded body.  A token is
 * plain hex, so no decoding is needed; an encoded one is no id. */
static bool form_id(const sl_request *rq, uint8_t *id)
{
    const char *ct = sl_header(rq, "Content-Type");
    if (!ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0 || !rq->body)
        return false;
    const char *p = (const char *)rq->body, *end = p + rq->body_len;
    const char *k = cfg.cookie_name;
    const size_t kl = strlen(k);
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *q = amp ? amp : end;
        if ((size_t)(q - p) > kl && memcmp(p, k, kl) == 0 && p[kl] == '=')
            return sandlet_lib_session_verify(p + kl + 1, (size_t)(q - p - (ptrdiff_t)kl - 1), id);
        p = amp ? amp + 1 : end;
    }
    return false;
}

/* Notes a store failure that must not pass for "no session". */
static int store_rc(int rc)
{
    if (rc == -EAGAIN)
        store_failed = true;
    return rc;
}

/* Loads the session id names into s; true when the store has it.  A store
 * that could not answer (locked past the time, down, broken) sets *err:
 * the session may well exist, and must not be replaced by a new one (the
 * client's cookie with it). */
static bool load(sl_session *s, const uint8_t *id, int *err)
{
    uint8_t *buf = sl_alloc(s->rq, cfg.max_data ? cfg.max_data : 1);
    size_t len = 0;
    int rc = buf ? store_rc(cfg.ops->get(cfg.store, id, buf, cfg.max_data, &len)) : -ENOMEM;
    if (rc < 0 && rc != -ENOENT && !*err)
        *err = -rc;
    if (rc < 0 || len > cfg.max_data)
        return false;
    set_id(s, id);
    s->data = buf;
    s->len = len;
    return true;
}

sl_session *sl_session_get(sl_request *rq, sl_response *rs, bool create)
{
    if (!rq || !rs) {
        errno = EINVAL;
        return NULL;
    }
    if (rq->session)
        return rq->session;
    if (!cfg.ops) {
        errno = ENOTSUP;
        return NULL;
    }
    sl_session *s = sl_alloc(rq, sizeof(*s));
    if (!s || sandlet_lib_cookies_parse(rq) < 0) {
        errno = ENOMEM;
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    s->rq = rq;
    s->rs = rs;
    uint8_t id[SANDLET_SESSION_ID_LEN];
    /* Every cookie of this sandbox's name (a browser may hold one per
     * path), then the parameter that links and forms carry for clients
     * without cookies.  Other sandboxes' cookies are not even looked at. */
    bool cookie_sent = false;
    int busy = 0;
    for (size_t i = 0; i < rq->ncookies; i++) {
        if (strcmp(rq->cookies[i].name, cfg.cookie_name) != 0)
            continue;
        cookie_sent = true;
        const char *v = rq->cookies[i].value;
        if (sandlet_lib_session_verify(v, strlen(v), id) && load(s, id, &busy))
            return rq->session = s;
    }
    if (!cookie_sent) {
        const char *v = sl_param(rq, cfg.cookie_name, NULL);
        if ((v && sandlet_lib_session_verify(v, strlen(v), id) && load(s, id, &busy)) ||
            (form_id(rq, id) && load(s, id, &busy)))
            return rq->session = s;
    }
    if (busy) {
        errno = busy;
        return NULL;
    }
    if (!create) {
        errno = ENOENT;
        return NULL;
    }
    /* Unknown, expired, forged or another sandbox's: a fresh session with
     * a fresh id under this sandbox's own cookie, never one with the id the
     * client offered.  Without create, nothing is sent: a servlet that only
     * looks for a session never touches the client's cookies. */
    int rc = store_rc(cfg.ops->create(cfg.store, id));
    if (rc < 0) {
        errno = -rc;
        return NULL;
    }
    set_id(s, id);
    s->data = NULL;
    s->len = 0;
    if ((rc = send_cookie(s, false)) < 0) {
        cfg.ops->remove(cfg.store, id);
        errno = -rc;
        return NULL;
    }
    return rq->session = s;
}

const char *sl_session_id(const sl_session *s)
{
    return s ? s->hex : "";
}

const char *sl_session_cookie_name(void)
{
    return cfg.ops ? cfg.cookie_name : "";
}

/* ---- values ---------------------------------------------------------------- */

typedef struct entry {
    const uint8_t *key;
    size_t klen;
    const uint8_t *value;
    size_t vlen;
    size_t size; /* whole entry in the blob */
} entry;

/* Reads the entry at *pos; false at the end or at a malformed entry
 * (whatever follows it is ignored). */
static bool next_entry(const uint8_t *data, size_t len, size_t *pos, entry *e)
{
    size_t p = *pos;
    if (p > len || len - p < ENTRY_HEAD)
        return false;
    e->klen = data[p];
    e->vlen = (size_t)data[p + 1] | (size_t)data[p + 2] << 8 | (size_t)data[p + 3] << 16 |
              (size_t)data[p + 4] << 24;
    size_t rest = len - p - ENTRY_HEAD;
    if (e->klen == 0 || e->klen > rest || e->vlen > rest - e->klen ||
        rest - e->klen - e->vlen < 1 || data[p + ENTRY_HEAD + e->klen + e->vlen] != '\0')
        return false;
    e->key = data + p + ENTRY_HEAD;
    e->value = e->key + e->klen;
    e->size = ENTRY_HEAD + e->klen + e->vlen + 1;
    *pos = p + e->size;
    return true;
}

static bool key_valid(const char *key, size_t *klen)
{
    if (!key)
        return false;
    *klen = strlen(key);
    return *klen > 0 && *klen <= SL_SESSION_KEY_MAX;
}

static bool find_entry(const sl_session *s, const char *key, size_t klen, entry *e)
{
    size_t pos = 0;
    while (s->data && next_entry(s->data, s->len, &pos, e))
        if (e->klen == klen && memcmp(e->key, key, klen) == 0)
            return true;
    return false;
}

const void *sl_session_bytes(sl_session *s, const char *key, size_t *len)
{
    size_t klen;
    entry e;
    if (!s || s->dead || !key_valid(key, &klen) || !find_entry(s, key, klen, &e))
        return NULL;
    if (len)
        *len = e.vlen;
    return e.value;
}

const char *sl_session_str(sl_session *s, const char *key)
{
    return sl_session_bytes(s, key, NULL);
}

/* Rebuilds the blob without key and, when value is not NULL, with key set
 * to it; writes it to the store. */
static int update(sl_session *s, const char *key, const void *value, size_t vlen)
{
    size_t klen;
    if (!s || !key_valid(key, &klen) || (value == NULL && vlen != 0))
        return -EINVAL;
    if (s->dead)
        return -ENOENT;
    size_t add = value ? ENTRY_HEAD + klen + vlen + 1 : 0;
    if (vlen > UINT32_MAX || add > cfg.max_data || s->len > cfg.max_data)
        return -EMSGSIZE;
    uint8_t *blob = sl_alloc(s->rq, s->len + add + 1);
    if (!blob)
        return -ENOMEM;
    size_t out = 0, pos = 0;
    entry e;
    while (s->data && next_entry(s->data, s->len, &pos, &e)) {
        if (e.klen == klen && memcmp(e.key, key, klen) == 0)
            continue;
        memcpy(blob + out, e.key - ENTRY_HEAD, e.size);
        out += e.size;
    }
    if (value) {
        blob[out] = (uint8_t)klen;
        for (int i = 0; i < 4; i++)
            blob[out + 1 + (size_t)i] = (uint8_t)(vlen >> (8 * i));
        memcpy(blob + out + ENTRY_HEAD, key, klen);
        if (vlen)
            memcpy(blob + out + ENTRY_HEAD + klen, value, vlen);
        blob[out + ENTRY_HEAD + klen + vlen] = '\0';
        out += add;
    }
    if (out > cfg.max_data)
        return -EMSGSIZE;
    int rc = store_rc(cfg.ops->put(cfg.store, s->id, blob, out));
    if (rc == -ENOENT)
        s->dead = true;
    if (rc < 0)
        return rc;
    s->data = blob;
    s->len = out;
    return 0;
}

int sl_session_set_bytes(sl_session *s, const char *key, const void *data, size_t len)
{
    if (!data && len == 0)
        data = "";
    return update(s, key, data, len);
}

int sl_session_set_str(sl_session *s, const char *key, const char *value)
{
    if (!value)
        return -EINVAL;
    return update(s, key, value, strlen(value));
}

int sl_session_remove(sl_session *s, const char *key)
{
    return update(s, key, NULL, 0);
}

/* ---- lifecycle ------------------------------------------------------------ */

int sl_session_invalidate(sl_session *s)
{
    if (!s)
        return -EINVAL;
    int rc = 0;
    if (!s->dead) {
        rc = store_rc(cfg.ops->remove(cfg.store, s->id));
        if (rc == -ENOENT)
            rc = 0;
    }
    s->dead = true;
    s->data = NULL;
    s->len = 0;
    if (s->rq->session == s)
        s->rq->session = NULL;
    int crc = send_cookie(s, true);
    return rc < 0 ? rc : crc;
}

int sl_session_regenerate(sl_session *s)
{
    if (!s)
        return -EINVAL;
    if (s->dead)
        return -ENOENT;
    uint8_t fresh[SANDLET_SESSION_ID_LEN];
    int rc;
    /* -EAGAIN: the fresh id collided with a live one; draw again. */
    for (int tries = 0; (rc = cfg.ops->new_id(cfg.store, s->id, fresh)) == -EEXIST && tries < 3;
         tries++)
        ;
    store_rc(rc);
    if (rc == -ENOENT)
        s->dead = true;
    if (rc < 0)
        return rc;
    set_id(s, fresh);
    return send_cookie(s, false);
}

bool sandlet_lib_session_request_end(sl_response *rs, int *status)
{
    /* A session the store could not save is as bad as one it could not
     * read: the page the client got would not be what it finds next. */
    if (cfg.ops && cfg.ops->finish && cfg.ops->finish(cfg.store) < 0)
        store_failed = true;
    bool failed = store_failed;
    store_failed = false;
    if (!failed)
        return false;
    /* The database's own rule first (logged once per outage); a store
     * that failed with the database up (no table, a bad row) answers the
     * same, and its reason is in the log already. */
    if (sandlet_lib_db_answer_unavailable(rs, status, true) || rs->head_sent)
        return true;
    sandlet_lib_answer_unavailable(rs, status, "the session store");
    return true;
}

/* ---- clients without cookies ----------------------------------------------- */

const char *sl_session_url(sl_session *s, const char *url)
{
    if (!url)
        return "";
    if (!s || s->dead)
        return url;
    const char *hash = strchr(url, '#');
    size_t base = hash ? (size_t)(hash - url) : strlen(url);
    if (base > 65536)
        return url; /* no link is that long; keeps the %.*s below in range */
    const char *q = memchr(url, '?', base);
    const char *sep = !q ? "?" : (url[base - 1] == '?' || url[base - 1] == '&') ? "" : "&";
    char *out = sl_sprintf(s->rq, "%.*s%s%s=%s%s", (int)base, url, sep, cfg.cookie_name, s->hex,
                           hash ? hash : "");
    return out ? out : "";
}

const char *sl_session_form_field(sl_session *s)
{
    if (!s || s->dead)
        return "";
    char *out = sl_sprintf(s->rq, "<input type=\"hidden\" name=\"%s\" value=\"%s\">",
                           cfg.cookie_name, s->hex);
    return out ? out : "";
}

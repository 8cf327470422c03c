/*
 * session.c - the servlet's view of its client's session: finding it by
 * cookie or parameter, reading and writing values, invalidation, new ids,
 * and the link/form helpers for clients without cookies.
 *
 * Where sessions live is the store's business (sandlet_session_ops in
 * servlet.h: the sandbox's shared memory now, a database later).  Here a
 * session's data is one blob of entries, copied into the request arena
 * when the session is found and written back whole on every change, so a
 * value a servlet holds stays valid for the request even if another
 * worker changes the session meanwhile.  The blob comes from memory other
 * processes write: every length in it is checked before use.  This file
 * must never log or print a session id (it is a credential).
 *
 * Blob entry: u8 key length, u32 value length (little endian), the key,
 * the value, a NUL (so that string values need no copy).
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

struct sl_session {
    sl_request *rq;
    sl_response *rs;
    uint8_t id[SANDLET_SESSION_ID_LEN];
    char hex[2 * SANDLET_SESSION_ID_LEN + 1];
    const uint8_t *data; /* arena copy of the store's blob */
    size_t len;
    bool dead; /* invalidated here, or gone from the store */
};

#define ENTRY_HEAD 5 /* key length byte + value length */

static sandlet_session_config cfg;

void sandlet_lib_session_configure(const sandlet_session_config *c)
{
    if (c)
        cfg = *c;
    else
        memset(&cfg, 0, sizeof(cfg));
}

/* ---- ids ----------------------------------------------------------------- */

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Exactly 32 hex digits, nothing else; anything else is no id at all. */
static bool parse_id(const char *s, size_t len, uint8_t *id)
{
    if (!s || len != 2 * SANDLET_SESSION_ID_LEN)
        return false;
    for (size_t i = 0; i < SANDLET_SESSION_ID_LEN; i++) {
        int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        id[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

static void set_id(sl_session *s, const uint8_t *id)
{
    static const char digits[] = "0123456789abcdef";
    memcpy(s->id, id, SANDLET_SESSION_ID_LEN);
    for (size_t i = 0; i < SANDLET_SESSION_ID_LEN; i++) {
        s->hex[2 * i] = digits[id[i] >> 4];
        s->hex[2 * i + 1] = digits[id[i] & 15];
    }
    s->hex[2 * SANDLET_SESSION_ID_LEN] = '\0';
}

/* The session cookie: whole site, hidden from scripts, not sent on
 * cross-site subrequests, HTTPS-only when configured. */
static int send_cookie(sl_session *s, bool expire)
{
    sl_cookie_options o = {
        .path = "/", .http_only = true, .same_site = SL_SAME_SITE_LAX, .secure = cfg.cookie_secure};
    if (expire) {
        o.has_max_age = true;
        o.max_age = 0;
        o.expires = 1;
    }
    sandlet_lib_cookie_unset(s->rs, SL_SESSION_COOKIE);
    return sl_set_cookie(s->rs, SL_SESSION_COOKIE, expire ? "" : s->hex, &o);
}

/* The id field of an application/x-www-form-urlencoded body.  An id is
 * plain hex, so no decoding is needed; an encoded one is no id. */
static bool form_id(const sl_request *rq, uint8_t *id)
{
    const char *ct = sl_header(rq, "Content-Type");
    if (!ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0 || !rq->body)
        return false;
    const char *p = (const char *)rq->body, *end = p + rq->body_len;
    const size_t kl = sizeof(SL_SESSION_COOKIE) - 1;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *q = amp ? amp : end;
        if ((size_t)(q - p) > kl && memcmp(p, SL_SESSION_COOKIE, kl) == 0 && p[kl] == '=')
            return parse_id(p + kl + 1, (size_t)(q - p - (ptrdiff_t)kl - 1), id);
        p = amp ? amp + 1 : end;
    }
    return false;
}

/* Loads the session id names into s; true when the store has it. */
static bool load(sl_session *s, const uint8_t *id)
{
    uint8_t *buf = sl_alloc(s->rq, cfg.max_data ? cfg.max_data : 1);
    size_t len = 0;
    if (!buf || cfg.ops->get(cfg.store, id, buf, cfg.max_data, &len) < 0 || len > cfg.max_data)
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
    /* Every SLSESSION cookie (a browser may hold one per path), then the
     * parameter that links and forms carry for clients without cookies. */
    bool cookie_sent = false;
    for (size_t i = 0; i < rq->ncookies; i++) {
        if (strcmp(rq->cookies[i].name, SL_SESSION_COOKIE) != 0)
            continue;
        cookie_sent = true;
        const char *v = rq->cookies[i].value;
        if (parse_id(v, strlen(v), id) && load(s, id))
            return rq->session = s;
    }
    if (!cookie_sent) {
        const char *v = sl_param(rq, SL_SESSION_COOKIE, NULL);
        if ((v && parse_id(v, strlen(v), id) && load(s, id)) || (form_id(rq, id) && load(s, id)))
            return rq->session = s;
    }
    if (!create) {
        errno = ENOENT;
        return NULL;
    }
    /* Unknown, expired or forged: a fresh session with a fresh id, never
     * one with the id the client offered. */
    int rc = cfg.ops->create(cfg.store, id);
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
    int rc = cfg.ops->put(cfg.store, s->id, blob, out);
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
        rc = cfg.ops->remove(cfg.store, s->id);
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
    for (int tries = 0; (rc = cfg.ops->new_id(cfg.store, s->id, fresh)) == -EAGAIN && tries < 3;
         tries++)
        ;
    if (rc == -ENOENT)
        s->dead = true;
    if (rc < 0)
        return rc;
    set_id(s, fresh);
    return send_cookie(s, false);
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
    char *out = sl_sprintf(s->rq, "%.*s%s" SL_SESSION_COOKIE "=%s%s", (int)base, url, sep, s->hex,
                           hash ? hash : "");
    return out ? out : "";
}

const char *sl_session_form_field(sl_session *s)
{
    if (!s || s->dead)
        return "";
    char *out = sl_sprintf(
        s->rq, "<input type=\"hidden\" name=\"" SL_SESSION_COOKIE "\" value=\"%s\">", s->hex);
    return out ? out : "";
}

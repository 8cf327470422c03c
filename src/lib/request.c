/*
 * request.c - the servlet's view of a request: accessors over fields the
 * driver (worker loop or test harness) set, headers, parameters (query and
 * urlencoded body here, multipart in multipart.c), escaping.
 *
 * Strings point into the driver's buffer or into the request arena; this
 * file never keeps anything past a reset.  The body is read where the
 * driver put it; only a streamed body (pulled from the driver while the
 * servlet runs) is copied, and only when sl_body or an urlencoded form
 * needs it whole: a streamed multipart form goes through the incremental
 * parser piece by piece (multipart.c, spool.c).
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void sandlet_lib_request_init(sl_request *rq)
{
    memset(rq, 0, sizeof(*rq));
    sandlet_lib_arena_init(&rq->arena, 0);
    sandlet_lib_request_reset(rq);
}

static void body_copy_free(sl_request *rq)
{
    if (rq->body_copy)
        explicit_bzero(rq->body_copy, rq->body_copy_cap);
    free(rq->body_copy);
    rq->body_copy = NULL;
    rq->body_copy_cap = 0;
}

void sandlet_lib_request_reset(sl_request *rq)
{
    /* The spooled files' list is in the arena: unmapped first. */
    sandlet_lib_spool_reset(rq);
    sandlet_lib_arena_reset(&rq->arena);
    body_copy_free(rq);
    rq->body_pull = NULL;
    rq->body_ctx = NULL;
    rq->body_more = false;
    rq->body_failed = false;
    rq->method = "GET";
    rq->target = "/";
    rq->path = "/";
    rq->query = "";
    rq->peer = "";
    rq->version = 11;
    rq->headers = NULL;
    rq->nheaders = 0;
    rq->cap_headers = 0;
    rq->body = NULL;
    rq->body_len = 0;
    rq->body_pos = 0;
    rq->params = NULL;
    rq->nparams = 0;
    rq->files = NULL;
    rq->nfiles = 0;
    rq->params_parsed = false;
    rq->form_error = 0;
    rq->cookies = NULL;
    rq->ncookies = 0;
    rq->cookies_parsed = false;
    rq->session = NULL;
}

void sandlet_lib_request_free(sl_request *rq)
{
    sandlet_lib_spool_reset(rq);
    body_copy_free(rq);
    sandlet_lib_arena_free(&rq->arena);
}

int sandlet_lib_request_set(sl_request *rq, const char *method, const char *target,
                            size_t target_len, const char *peer, int version)
{
    const char *q = memchr(target, '?', target_len);
    size_t path_len = q ? (size_t)(q - target) : target_len;
    char *path = sandlet_lib_arena_alloc(&rq->arena, path_len + 1);
    if (!path)
        return -ENOMEM;
    memcpy(path, target, path_len);
    path[path_len] = '\0';
    rq->method = method;
    rq->target = target;
    rq->path = path;
    /* target is NUL-terminated by the frame format, so the query (its
     * tail) is too. */
    rq->query = q ? q + 1 : "";
    rq->peer = peer;
    rq->version = version;
    return 0;
}

static int header_push(sandlet_arena *a, sandlet_lib_header **arr, size_t *n, size_t *cap,
                       const char *name, const char *value)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        sandlet_lib_header *p = sandlet_lib_arena_alloc(a, ncap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        if (*n)
            memcpy(p, *arr, *n * sizeof(*p));
        *arr = p;
        *cap = ncap;
    }
    (*arr)[*n].name = name;
    (*arr)[*n].value = value;
    (*n)++;
    return 0;
}

int sandlet_lib_request_add_header(sl_request *rq, const char *name, const char *value)
{
    return header_push(&rq->arena, &rq->headers, &rq->nheaders, &rq->cap_headers, name, value);
}

void sandlet_lib_request_set_body(sl_request *rq, const void *body, size_t len)
{
    rq->body = body;
    rq->body_len = len;
}

const char *sl_method(const sl_request *rq)
{
    return rq->method;
}

const char *sl_target(const sl_request *rq)
{
    return rq->target;
}

const char *sl_path(const sl_request *rq)
{
    return rq->path;
}

const char *sl_query(const sl_request *rq)
{
    return rq->query;
}

const char *sl_peer(const sl_request *rq)
{
    return rq->peer;
}

int sl_http_version(const sl_request *rq)
{
    return rq->version;
}

const char *sl_header(const sl_request *rq, const char *name)
{
    for (size_t i = 0; name && i < rq->nheaders; i++)
        if (strcasecmp(rq->headers[i].name, name) == 0)
            return rq->headers[i].value;
    return NULL;
}

size_t sl_headers(const sl_request *rq, const char *name, const char **values, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; name && i < rq->nheaders; i++) {
        if (strcasecmp(rq->headers[i].name, name) != 0)
            continue;
        if (values && n < max)
            values[n] = rq->headers[i].value;
        n++;
    }
    return n;
}

const char *sl_header_at(const sl_request *rq, size_t i, const char **value)
{
    if (i >= rq->nheaders)
        return NULL;
    if (value)
        *value = rq->headers[i].value;
    return rq->headers[i].name;
}

void sandlet_lib_request_set_body_pull(sl_request *rq, sandlet_lib_body_pull pull, void *ctx)
{
    rq->body_pull = pull;
    rq->body_ctx = ctx;
    rq->body_more = pull != NULL;
}

/* Asks the driver for the next piece of a streamed body: 1 when rq->body
 * holds one, 0 at the end, -1 when the body is incomplete. */
static int body_next(sl_request *rq)
{
    if (rq->body_failed)
        return -1;
    while (rq->body_more) {
        const void *data = NULL;
        size_t len = 0;
        int rc = rq->body_pull(rq->body_ctx, &data, &len);
        if (rc <= 0) {
            rq->body_more = false;
            rq->body_failed = rc < 0;
            return rc < 0 ? -1 : 0;
        }
        if (len) {
            /* What the last piece had left is behind us now. */
            rq->body_pos += rq->body_len;
            rq->body = data;
            rq->body_len = len;
            return 1;
        }
    }
    return 0;
}

ssize_t sl_body_read(sl_request *rq, void *buf, size_t n)
{
    if (!rq || (!buf && n)) {
        errno = EINVAL;
        return -1;
    }
    if (n == 0)
        return 0;
    if (rq->body_len == 0) {
        int rc = body_next(rq);
        if (rc <= 0) {
            if (rc < 0)
                errno = ECONNABORTED;
            return rc;
        }
    }
    size_t k = rq->body_len < n ? rq->body_len : n;
    memcpy(buf, rq->body, k);
    rq->body += k;
    rq->body_len -= k;
    rq->body_pos += k;
    /* Bounded by n, which is a size_t the caller's buffer holds. */
    return k > SSIZE_MAX ? SSIZE_MAX : (ssize_t)k;
}

/* Appends len bytes to the body copy, growing it by doubling; the old
 * block is wiped before it goes back to malloc (it holds a client's
 * bytes).  0 or -ENOMEM. */
static int copy_put(sl_request *rq, size_t *used, const uint8_t *data, size_t len)
{
    if (len > SIZE_MAX - *used)
        return -ENOMEM;
    if (*used + len > rq->body_copy_cap) {
        size_t cap = rq->body_copy_cap ? rq->body_copy_cap : 64 * 1024;
        while (cap < *used + len)
            cap = cap > SIZE_MAX / 2 ? *used + len : cap * 2;
        uint8_t *p = malloc(cap);
        if (!p)
            return -ENOMEM;
        if (*used)
            memcpy(p, rq->body_copy, *used);
        body_copy_free(rq);
        rq->body_copy = p;
        rq->body_copy_cap = cap;
    }
    memcpy(rq->body_copy + *used, data, len);
    *used += len;
    return 0;
}

int sandlet_lib_body_whole(sl_request *rq)
{
    if (rq->body_failed)
        return -ECONNABORTED;
    if (!rq->body_more)
        return 0;
    /* A copy may already hold an earlier part (the body seen so far is
     * rq->body, which may point into it): gather into a new one. */
    uint8_t *old = rq->body_copy;
    size_t old_cap = rq->body_copy_cap;
    rq->body_copy = NULL;
    rq->body_copy_cap = 0;
    size_t used = 0;
    int rc = copy_put(rq, &used, rq->body, rq->body_len);
    if (old) {
        explicit_bzero(old, old_cap);
        free(old);
    }
    while (rc == 0) {
        int more = body_next(rq);
        if (more < 0)
            rc = -ECONNABORTED;
        if (more <= 0)
            break;
        rc = copy_put(rq, &used, rq->body, rq->body_len);
    }
    if (rc < 0) {
        /* Never a half body handed out as the whole one. */
        rq->body_more = false;
        rq->body_failed = true;
        rq->body = NULL;
        rq->body_len = 0;
        return rc;
    }
    rq->body = rq->body_copy;
    rq->body_len = used;
    return 0;
}

const void *sl_body(const sl_request *rq, size_t *len)
{
    /* The request is never const in fact (drivers own it); reading the
     * rest of a streamed body into memory is a cache of what sl_body
     * returns, invisible to the servlet but through the pointer. */
    sl_request *m = (sl_request *)rq;
    int rc = sandlet_lib_body_whole(m);
    if (rc < 0) {
        if (len)
            *len = 0;
        errno = -rc;
        return NULL;
    }
    if (len)
        *len = rq->body_len;
    return rq->body ? (const void *)rq->body : (const void *)"";
}

char *sandlet_lib_url_decode(sandlet_arena *a, const char *s, size_t len, size_t *out_len)
{
    if (len == SIZE_MAX)
        return NULL;
    char *out = sandlet_lib_arena_alloc(a, len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int hi, lo;
        if (s[i] == '+') {
            out[o++] = ' ';
        } else if (s[i] == '%' && len - i > 2 &&
                   (hi = sandlet_lib_hexval((unsigned char)s[i + 1])) >= 0 &&
                   (lo = sandlet_lib_hexval((unsigned char)s[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    if (out_len)
        *out_len = o;
    return out;
}

/* Both arrays grow by doubling into fresh arena memory: the old copy is
 * simply abandoned, which the arena's reset reclaims. */
static void *grow(sandlet_arena *a, void *arr, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return arr;
    size_t ncap = *cap ? *cap * 2 : 16;
    if (ncap > SIZE_MAX / size)
        return NULL;
    void *p = sandlet_lib_arena_alloc(a, ncap * size);
    if (!p)
        return NULL;
    if (n)
        memcpy(p, arr, n * size);
    *cap = ncap;
    return p;
}

int sandlet_lib_param_push(sl_request *rq, size_t *cap, const char *name, const char *value,
                           size_t value_len)
{
    sandlet_lib_param *p = grow(&rq->arena, rq->params, rq->nparams, cap, sizeof(*p));
    if (!p)
        return -ENOMEM;
    rq->params = p;
    p[rq->nparams++] = (sandlet_lib_param){name, value, value_len};
    return 0;
}

int sandlet_lib_file_push(sl_request *rq, size_t *cap, const sandlet_lib_file *f)
{
    sandlet_lib_file *p = grow(&rq->arena, rq->files, rq->nfiles, cap, sizeof(*p));
    if (!p)
        return -ENOMEM;
    rq->files = p;
    p[rq->nfiles++] = *f;
    return 0;
}

/* Appends the decoded name/value pairs of one "a=1&b=2" string of len
 * bytes (a query, or a form body that may hold NUL bytes). */
static int parse_pairs(sl_request *rq, const char *s, size_t len, size_t *cap)
{
    const char *end = s + len;
    while (s < end) {
        const char *amp = memchr(s, '&', (size_t)(end - s));
        size_t plen = amp ? (size_t)(amp - s) : (size_t)(end - s);
        // cppcheck-suppress knownConditionTrueFalse ; amp == s for "&&"
        if (plen) {
            const char *eq = memchr(s, '=', plen);
            size_t nlen = eq ? (size_t)(eq - s) : plen;
            const char *v = eq ? eq + 1 : s + plen;
            size_t vlen = eq ? plen - nlen - 1 : 0;
            size_t dlen = 0;
            char *name = sandlet_lib_url_decode(&rq->arena, s, nlen, NULL);
            char *value = sandlet_lib_url_decode(&rq->arena, v, vlen, &dlen);
            if (!name || !value)
                return -ENOMEM;
            if (sandlet_lib_param_push(rq, cap, name, value, dlen) < 0)
                return -ENOMEM;
        }
        s += plen;
        if (s < end)
            s++; /* the '&' */
    }
    return 0;
}

/* True when the request's Content-Type is the media type mt (parameters
 * such as "; charset=UTF-8" after it are allowed). */
static bool content_type_is(const sl_request *rq, const char *mt)
{
    const char *ct = sl_header(rq, "Content-Type");
    if (!ct)
        return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strlen(mt);
    if (strncasecmp(ct, mt, n) != 0)
        return false;
    ct += n;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

/*
 * A multipart body that streams is parsed as it arrives, in bounded
 * memory: large file parts stay where the acceptor copied the body (the
 * spool file, spool.c).  It is read only once,
 * so any failure is final: the body then contributes nothing (as a
 * malformed one), and form_error says why for sl_file_get's errno.
 */
static int multipart_streamed(sl_request *rq, const char *boundary, size_t blen, size_t *cap,
                              size_t *fcap)
{
    size_t before = rq->nparams;
    sandlet_lib_mp *mp = malloc(sizeof(*mp));
    if (!mp)
        return -ENOMEM; /* nothing read yet: retried on the next call */
    int rc = sandlet_lib_mp_init(mp, rq, boundary, blen, cap, fcap, true);
    if (rc == 0) {
        mp->base = rq->body_pos;
        rc = sandlet_lib_mp_feed(mp, rq->body, rq->body_len);
    }
    int more = 0;
    while (rc == 0 && (more = body_next(rq)) > 0) {
        mp->base = rq->body_pos;
        rc = sandlet_lib_mp_feed(mp, rq->body, rq->body_len);
    }
    if (rc == 0 && more < 0)
        rc = -ECONNABORTED;
    if (rc == 0)
        rc = sandlet_lib_mp_finish(mp);
    sandlet_lib_mp_release(mp);
    free(mp);
    rq->body = NULL;
    rq->body_len = 0;
    if (rc < 0) {
        rq->nparams = before;
        sandlet_lib_spool_reset(rq);
        rq->nfiles = 0;
        rq->form_error = -rc;
    }
    return 0;
}

/* Parameters come from the query string first, then from a form body:
 * both are searched, so a servlet need not care how a form was sent. */
int sandlet_lib_params_parse(sl_request *rq)
{
    if (rq->params_parsed)
        return 0;
    size_t cap = 0, fcap = 0;
    int r = parse_pairs(rq, rq->query, strlen(rq->query), &cap);
    const char *ct = sl_header(rq, "Content-Type");
    bool urlencoded = ct && content_type_is(rq, "application/x-www-form-urlencoded");
    /* A streamed urlencoded body is read whole first (as sl_body would);
     * a streamed multipart one is parsed as it arrives.  One that did not
     * arrive whole contributes nothing. */
    if (r == 0 && urlencoded && rq->body_more && sandlet_lib_body_whole(rq) == -ENOMEM)
        r = -ENOMEM;
    const char *boundary = NULL;
    size_t blen = 0;
    int b = 1; /* no multipart boundary */
    if (r == 0 && ct && !urlencoded && (rq->body_more || rq->body_len)) {
        b = sandlet_lib_multipart_boundary(&rq->arena, ct, &boundary, &blen);
        if (b == -ENOMEM)
            r = b;
    }
    if (r == 0 && urlencoded && rq->body_len) {
        r = parse_pairs(rq, (const char *)rq->body, rq->body_len, &cap);
    } else if (r == 0 && b == 0 && rq->body_more) {
        r = multipart_streamed(rq, boundary, blen, &cap, &fcap);
    } else if (r == 0 && b == 0 && rq->body_len) {
        size_t before = rq->nparams;
        r = sandlet_lib_multipart_parse(rq, rq->body, rq->body_len, boundary, blen, &cap, &fcap);
        if (r == -EBADMSG) {
            /* Malformed: the body contributes nothing, and the query's
             * parameters stand. */
            rq->nparams = before;
            rq->nfiles = 0;
            r = 0;
        }
    }
    if (r == 0) {
        rq->params_parsed = true;
    } else {
        /* Never a half list: retried on the next call. */
        rq->nparams = 0;
        rq->nfiles = 0;
    }
    return r;
}

static const sandlet_lib_param *param_find(sl_request *rq, const char *name)
{
    if (!name || sandlet_lib_params_parse(rq) < 0)
        return NULL;
    for (size_t i = 0; i < rq->nparams; i++)
        if (strcmp(rq->params[i].name, name) == 0)
            return &rq->params[i];
    return NULL;
}

const char *sl_param(sl_request *rq, const char *name, const char *fallback)
{
    const sandlet_lib_param *p = param_find(rq, name);
    return p ? p->value : fallback;
}

const char *sl_param_bytes(sl_request *rq, const char *name, size_t *len)
{
    const sandlet_lib_param *p = param_find(rq, name);
    if (len)
        *len = p ? p->value_len : 0;
    return p ? p->value : NULL;
}

size_t sl_params(sl_request *rq, const char *name, const char **values, size_t max)
{
    if (!name || sandlet_lib_params_parse(rq) < 0)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < rq->nparams; i++) {
        if (strcmp(rq->params[i].name, name) != 0)
            continue;
        if (values && n < max)
            values[n] = rq->params[i].value;
        n++;
    }
    return n;
}

const char *sl_param_at(sl_request *rq, size_t i, const char **value, size_t *len)
{
    if (sandlet_lib_params_parse(rq) < 0 || i >= rq->nparams)
        return NULL;
    if (value)
        *value = rq->params[i].value;
    if (len)
        *len = rq->params[i].value_len;
    return rq->params[i].name;
}

const sl_file *sl_file_get(sl_request *rq, const char *name)
{
    if (!name || sandlet_lib_params_parse(rq) < 0)
        return NULL;
    for (size_t i = 0; i < rq->nfiles; i++)
        if (strcmp(rq->files[i].pub.name, name) == 0)
            return &rq->files[i].pub;
    if (rq->form_error)
        errno = rq->form_error;
    return NULL;
}

const sl_file *sl_file_at(sl_request *rq, size_t i)
{
    if (sandlet_lib_params_parse(rq) < 0)
        return NULL;
    if (i >= rq->nfiles) {
        if (rq->form_error)
            errno = rq->form_error;
        return NULL;
    }
    return &rq->files[i].pub;
}

/* RFC 3986 unreserved characters; spelled out rather than isalnum, which
 * follows the servlet's locale. */
static bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

const char *sl_url_encode(sl_request *rq, const char *s)
{
    if (!s)
        return "";
    static const char hex[] = "0123456789ABCDEF";
    size_t len = 0, extra = 0;
    for (; s[len]; len++)
        if (!unreserved((unsigned char)s[len]))
            extra += 2;
    if (len > (SIZE_MAX - 1) / 3)
        return "";
    if (extra == 0)
        return s;
    char *out = sandlet_lib_arena_alloc(&rq->arena, len + extra + 1);
    if (!out)
        return "";
    char *o = out;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (unreserved(c)) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o = '\0';
    return out;
}

const char *sl_html(sl_request *rq, const char *s)
{
    if (!s)
        return "";
    size_t extra = 0;
    for (const char *p = s; *p; p++) {
        switch (*p) {
        case '&':
            extra += 4; /* &amp; */
            break;
        case '<':
        case '>':
            extra += 3; /* &lt; &gt; */
            break;
        case '"':
        case '\'':
            extra += 4; /* &#34; &#39; */
            break;
        default: break;
        }
    }
    if (extra == 0)
        return s;
    size_t len = strlen(s);
    char *out = sandlet_lib_arena_alloc(&rq->arena, len + extra + 1);
    if (!out)
        return "";
    char *o = out;
    for (const char *p = s; *p; p++) {
        const char *rep = NULL;
        switch (*p) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&#34;"; break;
        case '\'': rep = "&#39;"; break;
        default: *o++ = *p; continue;
        }
        size_t rl = strlen(rep);
        memcpy(o, rep, rl);
        o += rl;
    }
    *o = '\0';
    return out;
}

const char *sl_context_param(const sl_context *ctx, const char *name, const char *fallback)
{
    for (size_t i = 0; ctx && i < ctx->nparams; i++)
        if (strcmp(ctx->params[i].name, name) == 0)
            return ctx->params[i].value;
    return fallback;
}

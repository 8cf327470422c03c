/*
 * request.c - the servlet's view of a request: accessors over fields the
 * driver (worker loop or test harness) set, query parameters, escaping.
 *
 * Strings point into the driver's buffer or into the request arena; this
 * file never copies the body and never keeps anything past a reset.
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void sandlet_lib_request_init(sl_request *rq)
{
    memset(rq, 0, sizeof(*rq));
    sandlet_lib_arena_init(&rq->arena, 0);
    sandlet_lib_request_reset(rq);
}

void sandlet_lib_request_reset(sl_request *rq)
{
    sandlet_lib_arena_reset(&rq->arena);
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
    rq->params = NULL;
    rq->nparams = 0;
    rq->params_parsed = false;
    rq->cookies = NULL;
    rq->ncookies = 0;
    rq->cookies_parsed = false;
    rq->session = NULL;
}

void sandlet_lib_request_free(sl_request *rq)
{
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
    for (size_t i = 0; i < rq->nheaders; i++)
        if (strcasecmp(rq->headers[i].name, name) == 0)
            return rq->headers[i].value;
    return NULL;
}

const void *sl_body(const sl_request *rq, size_t *len)
{
    if (len)
        *len = rq->body_len;
    return rq->body ? (const void *)rq->body : (const void *)"";
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *sandlet_lib_url_decode(sandlet_arena *a, const char *s, size_t len)
{
    char *out = sandlet_lib_arena_alloc(a, len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int hi, lo;
        if (s[i] == '+') {
            out[o++] = ' ';
        } else if (s[i] == '%' && len - i > 2 && (hi = hexval(s[i + 1])) >= 0 &&
                   (lo = hexval(s[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return out;
}

/* Appends the decoded name/value pairs of one "a=1&b=2" string of len
 * bytes (a query, or a form body that may hold NUL bytes). */
static int parse_pairs(sl_request *rq, const char *s, size_t len, size_t *cap)
{
    const char *end = s + len;
    while (s < end) {
        const char *amp = memchr(s, '&', (size_t)(end - s));
        size_t plen = amp ? (size_t)(amp - s) : (size_t)(end - s);
        if (plen) {
            const char *eq = memchr(s, '=', plen);
            size_t nlen = eq ? (size_t)(eq - s) : plen;
            const char *v = eq ? eq + 1 : s + plen;
            size_t vlen = eq ? plen - nlen - 1 : 0;
            char *name = sandlet_lib_url_decode(&rq->arena, s, nlen);
            char *value = sandlet_lib_url_decode(&rq->arena, v, vlen);
            if (!name || !value)
                return -ENOMEM;
            if (header_push(&rq->arena, &rq->params, &rq->nparams, cap, name, value) < 0)
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

/* Parameters come from the query string first, then from a form body:
 * both are searched, so a servlet need not care how a form was sent. */
static int parse_params(sl_request *rq)
{
    size_t cap = 0;
    int r = parse_pairs(rq, rq->query, strlen(rq->query), &cap);
    if (r == 0 && rq->body_len && content_type_is(rq, "application/x-www-form-urlencoded"))
        r = parse_pairs(rq, (const char *)rq->body, rq->body_len, &cap);
    if (r == 0)
        rq->params_parsed = true;
    else
        rq->nparams = 0; /* never a half list: retried on the next call */
    return r;
}

const char *sl_param(sl_request *rq, const char *name, const char *fallback)
{
    if (!rq->params_parsed && parse_params(rq) < 0)
        return fallback;
    for (size_t i = 0; i < rq->nparams; i++)
        if (strcmp(rq->params[i].name, name) == 0)
            return rq->params[i].value;
    return fallback;
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

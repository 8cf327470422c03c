/*
 * cookie.c - request cookies (the Cookie header, RFC 6265 section 5.4)
 * and response cookies (Set-Cookie with attributes, section 4.1), and the
 * acceptor's judge of a worker's Set-Cookie: the name a browser will send
 * the cookie back under (RFC 6265bis 5.6 and 5.8.3).
 *
 * Parsing is lenient, as browsers are: a pair without '=' or with an empty
 * or non-token name is skipped, never an error.  Formatting is strict: a
 * name, value or attribute that could end the header, start another
 * attribute or another header is refused, so that a servlet passing user
 * input can never split a response or forge an attribute.  Nothing here
 * keeps state past a request.
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* RFC 6265 cookie-octet: visible ASCII but '"', ',', ';' and '\'. */
static bool is_cookie_octet(unsigned char c)
{
    return c >= 0x21 && c <= 0x7e && c != '"' && c != ',' && c != ';' && c != '\\';
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Adds the pairs of one Cookie header value. */
static int parse_header(sl_request *rq, const char *s, size_t *cap)
{
    while (*s) {
        const char *end = strchr(s, ';');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *p = s, *q = s + len;
        s = end ? end + 1 : s + len;
        while (p < q && is_ows(*p))
            p++;
        while (q > p && is_ows(q[-1]))
            q--;
        const char *eq = memchr(p, '=', (size_t)(q - p));
        if (!eq)
            continue;
        const char *ne = eq;
        while (ne > p && is_ows(ne[-1]))
            ne--;
        const char *v = eq + 1;
        while (v < q && is_ows(*v))
            v++;
        if (!sandlet_lib_token(p, (size_t)(ne - p)))
            continue;
        if (q - v >= 2 && *v == '"' && q[-1] == '"') {
            v++;
            q--;
        }
        if (rq->ncookies == *cap) {
            size_t ncap = *cap ? *cap * 2 : 8;
            sandlet_lib_header *arr = sandlet_lib_arena_alloc(&rq->arena, ncap * sizeof(*arr));
            if (!arr)
                return -ENOMEM;
            if (rq->ncookies)
                memcpy(arr, rq->cookies, rq->ncookies * sizeof(*arr));
            rq->cookies = arr;
            *cap = ncap;
        }
        char *name = sandlet_lib_arena_alloc(&rq->arena, (size_t)(ne - p) + 1);
        char *value = sandlet_lib_arena_alloc(&rq->arena, (size_t)(q - v) + 1);
        if (!name || !value)
            return -ENOMEM;
        memcpy(name, p, (size_t)(ne - p));
        name[ne - p] = '\0';
        memcpy(value, v, (size_t)(q - v));
        value[q - v] = '\0';
        rq->cookies[rq->ncookies].name = name;
        rq->cookies[rq->ncookies].value = value;
        rq->ncookies++;
    }
    return 0;
}

int sandlet_lib_cookies_parse(sl_request *rq)
{
    if (rq->cookies_parsed)
        return 0;
    size_t cap = 0;
    for (size_t i = 0; i < rq->nheaders; i++) {
        if (strcasecmp(rq->headers[i].name, "Cookie") != 0)
            continue;
        int rc = parse_header(rq, rq->headers[i].value, &cap);
        if (rc < 0)
            return rc;
    }
    rq->cookies_parsed = true;
    return 0;
}

const char *sl_cookie(sl_request *rq, const char *name)
{
    if (!rq || !name || sandlet_lib_cookies_parse(rq) < 0)
        return NULL;
    for (size_t i = 0; i < rq->ncookies; i++)
        if (strcmp(rq->cookies[i].name, name) == 0)
            return rq->cookies[i].value;
    return NULL;
}

/* ---- Set-Cookie -------------------------------------------------------- */

static bool value_valid(const char *v)
{
    size_t len = strlen(v);
    if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
        v++;
        len -= 2;
    }
    for (size_t i = 0; i < len; i++)
        if (!is_cookie_octet((unsigned char)v[i]))
            return false;
    return true;
}

/* Path: RFC 6265 av-octets (no controls, no ';'). */
static bool path_valid(const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f || c == ';' || c >= 0x80)
            return false;
    }
    return true;
}

/* Domain: a host name, optionally with a leading dot. */
static bool domain_valid(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-'))
            return false;
    }
    return true;
}

/* IMF-fixdate (RFC 9110); browsers take no Expires before 1601. */
static int format_date(char *out, size_t size, long long t)
{
    const long long y1601 = -11644473600LL; /* 1601-01-01T00:00:00Z */
    if (t < y1601)
        return -EINVAL;
    return sandlet_lib_http_date(t, out, size);
}

int sl_set_cookie(sl_response *rs, const char *name, const char *value,
                  const sl_cookie_options *opt)
{
    static const sl_cookie_options none;
    if (!rs || !name || !value)
        return -EINVAL;
    if (!opt)
        opt = &none;
    if (!sandlet_lib_token(name, strlen(name)) || !value_valid(value) ||
        (opt->path && !path_valid(opt->path)) || (opt->domain && !domain_valid(opt->domain)) ||
        opt->same_site < SL_SAME_SITE_UNSET || opt->same_site > SL_SAME_SITE_NONE ||
        (opt->same_site == SL_SAME_SITE_NONE && !opt->secure))
        return -EINVAL;
    char date[40] = "";
    if (opt->expires && format_date(date, sizeof(date), opt->expires) < 0)
        return -EINVAL;
    static const char *const same_site[] = {"", "; SameSite=Lax", "; SameSite=Strict",
                                            "; SameSite=None"};
    size_t size = strlen(name) + strlen(value) + (opt->path ? strlen(opt->path) : 0) +
                  (opt->domain ? strlen(opt->domain) : 0) + 160;
    char *buf = sl_alloc(rs->rq, size);
    if (!buf)
        return -ENOMEM;
    char age[40] = "";
    if (opt->has_max_age)
        snprintf(age, sizeof(age), "; Max-Age=%lld", opt->max_age > 0 ? opt->max_age : 0);
    int n = snprintf(buf, size, "%s=%s%s%s%s%s%s%s%s%s%s", name, value, age,
                     date[0] ? "; Expires=" : "", date, opt->path ? "; Path=" : "",
                     opt->path ? opt->path : "", opt->domain ? "; Domain=" : "",
                     opt->domain ? opt->domain : "", opt->secure ? "; Secure" : "",
                     opt->http_only ? "; HttpOnly" : "");
    if (n < 0 || (size_t)n >= size)
        return -EINVAL;
    size_t used = (size_t)n;
    const char *ss = same_site[opt->same_site];
    if (used + strlen(ss) >= size)
        return -EINVAL;
    memcpy(buf + used, ss, strlen(ss) + 1);
    return sl_add_header(rs, "Set-Cookie", buf);
}

void sandlet_lib_cookie_unset(sl_response *rs, const char *name)
{
    if (rs->head_sent)
        return;
    size_t nl = strlen(name), o = 0;
    for (size_t i = 0; i < rs->nheaders; i++) {
        const sandlet_lib_header *h = &rs->headers[i];
        if (strcasecmp(h->name, "Set-Cookie") == 0 && strncmp(h->value, name, nl) == 0 &&
            h->value[nl] == '=')
            continue;
        rs->headers[o++] = rs->headers[i];
    }
    rs->nheaders = o;
}

/* ---- a worker's Set-Cookie, as a browser will send it back ------------- */

static bool prefix_ci(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && strncasecmp(s, prefix, n) == 0;
}

/* [*a, *z) without the blanks (WSP: SP, HTAB) at both ends. */
static void trim_wsp(const char **a, const char **z)
{
    while (*a < *z && is_ows(**a))
        (*a)++;
    while (*z > *a && is_ows((*z)[-1]))
        (*z)--;
}

void sandlet_lib_set_cookie_sent_name(const char *v, size_t len, const char **name,
                                      size_t *name_len)
{
    /* RFC 6265bis 5.6: the name-value-pair ends at the first ';'; without
     * '=' its name is empty and all of it is the value; both are trimmed. */
    const char *semi = memchr(v, ';', len);
    const char *end = semi ? semi : v + len;
    const char *eq = memchr(v, '=', (size_t)(end - v));
    const char *a = v, *z = eq ? eq : v;
    trim_wsp(&a, &z);
    if (a == z) {
        /* A nameless cookie is sent back as its value alone (5.8.3), so
         * the server reads the value's own "name=" as the name: what
         * precedes its first '=', or, for parsers that take a pair
         * without '=' as a name with an empty value, all of it. */
        a = eq ? eq + 1 : v;
        z = end;
        trim_wsp(&a, &z);
        const char *eq2 = memchr(a, '=', (size_t)(z - a));
        if (eq2)
            z = eq2;
        trim_wsp(&a, &z);
    }
    *name = a;
    *name_len = (size_t)(z - a);
}

bool sandlet_lib_set_cookie_foreign(const char *v, size_t len, const char *own, const char **name,
                                    size_t *name_len)
{
    static const char session[] = SL_SESSION_COOKIE "_";
    const char *n;
    size_t nl;
    sandlet_lib_set_cookie_sent_name(v, len, &n, &nl);
    /* The cookie prefixes change where a browser keeps a cookie, not what
     * it means to the server; they are judged away so that a session
     * cookie that one day carries one stays as protected as today's.  A
     * loop, never recursion: each turn consumes what it matched. */
    for (;;) {
        if (prefix_ci(n, nl, "__Host-")) {
            n += 7;
            nl -= 7;
        } else if (prefix_ci(n, nl, "__Secure-")) {
            n += 9;
            nl -= 9;
        } else {
            break;
        }
    }
    *name = n;
    *name_len = nl;
    /* Every SLSESSION_ name is a sandbox's, now or after a reload, here or
     * on another host sharing the site: only the servlet's own is its. */
    if (!prefix_ci(n, nl, session))
        return false;
    return !own || strlen(own) != nl || strncasecmp(own, n, nl) != 0;
}

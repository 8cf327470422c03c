/*
 * fuzz_cookie.c - libFuzzer target for cookies (src/lib/cookie.c): the
 * Cookie request header parser and the Set-Cookie formatter.
 *
 * Parsing: the input's lines are Cookie headers of one request (a client
 * may send several).  Every pair the parser keeps must have a non-empty
 * token name and a value without ';', and must really occur in the input.
 * Formatting: the input's NUL-separated fields are a cookie's name, value,
 * path and domain; when sl_set_cookie accepts them, the Set-Cookie line it
 * writes must hold no CR, LF or NUL, must start with exactly "name=value"
 * (so no field could add an attribute or split the header), and a browser
 * sending that pair back must be understood as the same name and value.
 *
 * Judging a worker's Set-Cookie: the input's first line is a Set-Cookie
 * value.  The name sandlet_lib_set_cookie_sent_name finds must lie inside
 * it (it is read with no NUL after it), and when the acceptor's judge lets
 * it through for sandbox "evil", the cookie a browser stores from it
 * (RFC 6265bis 5.6, modelled here step by step) and sends back (5.8.3)
 * must reach a servlet, through the real Cookie parser, as no session
 * cookie but evil's, in any case.
 *
 * Pure computation over libsandlet's arena: tens of thousands of inputs
 * per second.  Keep it thin: the session cookie's name and format belong
 * to session.c and are fuzzed there.
 */
#include "config.h"

#include "lib/servlet.h"

#include <stdint.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void invariant(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "FUZZ INVARIANT violated: %s\n", what);
        abort();
    }
}

static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool occurs(const char *hay, size_t hlen, const char *needle)
{
    return memmem(hay, hlen, needle, strlen(needle)) != NULL;
}

static int null_sink(void *ctx, const sandlet_lib_output *out)
{
    (void)ctx;
    (void)out;
    return 0;
}

static void parse_side(const char *text, size_t len)
{
    sl_request rq;
    sandlet_lib_request_init(&rq);
    /* Header values are C strings (the frame format NUL-terminates
     * them): one per line of the input, stopping at a NUL. */
    char *copy = malloc(len + 1);
    if (!copy)
        return;
    memcpy(copy, text, len);
    copy[len] = '\0';
    for (char *line = copy, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        sandlet_lib_request_add_header(&rq, "Cookie", line);
    }
    if (sandlet_lib_cookies_parse(&rq) == 0) {
        for (size_t i = 0; i < rq.ncookies; i++) {
            const char *n = rq.cookies[i].name, *v = rq.cookies[i].value;
            invariant(*n != '\0', "cookie with an empty name kept");
            for (const char *p = n; *p; p++)
                invariant(is_tchar((unsigned char)*p), "cookie name that is no token kept");
            invariant(strchr(v, ';') == NULL, "cookie value holding ';'");
            invariant(occurs(text, len, n) && occurs(text, len, v),
                      "cookie name or value that the header does not hold");
            invariant(sl_cookie(&rq, n) != NULL, "a parsed cookie is not found by its name");
        }
    }
    sandlet_lib_request_free(&rq);
    free(copy);
}

static void format_side(const uint8_t *data, size_t size)
{
    /* name \0 value \0 path \0 domain \0 flags */
    const char *f[5] = {"", "", NULL, NULL, NULL};
    char *copy = malloc(size + 1);
    if (!copy)
        return;
    memcpy(copy, data, size);
    copy[size] = '\0';
    size_t nf = 0;
    for (char *p = copy; nf < 5 && p <= copy + size; p += strlen(p) + 1)
        f[nf++] = p;
    unsigned flags = f[4] ? (unsigned char)f[4][0] : 0;
    sl_cookie_options o = {
        .path = f[2] && *f[2] ? f[2] : NULL,
        .domain = f[3] && *f[3] ? f[3] : NULL,
        .secure = flags & 1,
        .http_only = flags & 2,
        .same_site = (int)((flags >> 2) & 3),
        .has_max_age = flags & 16,
        .max_age = (long long)(flags & 32 ? -1 : 3600),
        .expires = flags & 64 ? 1700000000 : 0,
    };
    sl_request rq;
    sl_response rs;
    sandlet_lib_request_init(&rq);
    sandlet_lib_response_init(&rs, &rq, null_sink, NULL);
    const char *name = f[0], *value = f[1];
    if (sl_set_cookie(&rs, name, value, &o) == 0) {
        invariant(rs.nheaders == 1, "sl_set_cookie succeeded without one header");
        const char *line = rs.headers[0].value;
        invariant(strpbrk(line, "\r\n") == NULL, "Set-Cookie line holds CR or LF");
        size_t nl = strlen(name), vl = strlen(value);
        invariant(strncmp(line, name, nl) == 0 && line[nl] == '=' &&
                      strncmp(line + nl + 1, value, vl) == 0 &&
                      (line[nl + 1 + vl] == '\0' || line[nl + 1 + vl] == ';'),
                  "Set-Cookie does not start with exactly name=value");
        /* The browser sends it back: the same pair must come out. */
        sl_request back;
        sandlet_lib_request_init(&back);
        char *hdr = malloc(nl + vl + 2);
        if (hdr) {
            memcpy(hdr, name, nl);
            hdr[nl] = '=';
            memcpy(hdr + nl + 1, value, vl + 1);
            sandlet_lib_request_add_header(&back, "Cookie", hdr);
            const char *got = sl_cookie(&back, name);
            bool quoted = vl >= 2 && value[0] == '"' && value[vl - 1] == '"';
            invariant(got != NULL, "a cookie sl_set_cookie wrote is not read back");
            invariant(quoted ? strlen(got) == vl - 2 && memcmp(got, value + 1, vl - 2) == 0
                             : strcmp(got, value) == 0,
                      "a cookie sl_set_cookie wrote reads back as another value");
            free(hdr);
        }
        sandlet_lib_request_free(&back);
    }
    sandlet_lib_response_free(&rs);
    sandlet_lib_request_free(&rq);
    free(copy);
}

static bool wsp(char c)
{
    return c == ' ' || c == '\t';
}

/* RFC 6265bis 5.6 and 5.8.3 as a browser applies them: the Cookie header
 * a browser sends for the cookie of Set-Cookie value v (len bytes, no NUL
 * in it), into out; false when it stores no cookie. */
static bool browser_sends(const char *v, size_t len, char *out)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false; /* step 1: ignored whole */
    }
    size_t pair = 0;
    while (pair < len && v[pair] != ';')
        pair++;
    size_t eq = 0;
    while (eq < pair && v[eq] != '=')
        eq++;
    size_t na = 0, nz = 0, va = 0, vz = pair; /* no '=': empty name */
    if (eq < pair) {
        nz = eq;
        va = eq + 1;
    }
    while (na < nz && wsp(v[na]))
        na++;
    while (nz > na && wsp(v[nz - 1]))
        nz--;
    while (va < vz && wsp(v[va]))
        va++;
    while (vz > va && wsp(v[vz - 1]))
        vz--;
    if (na == nz && va == vz)
        return false;
    size_t o = 0;
    if (na < nz) {
        memcpy(out, v + na, nz - na);
        o = nz - na;
        out[o++] = '=';
    }
    memcpy(out + o, v + va, vz - va);
    out[o + vz - va] = '\0';
    return true;
}

static void judge_side(const uint8_t *data, size_t size)
{
    static const char own[] = "SLSESSION_evil";
    size_t len = 0;
    while (len < size && data[len] != '\n' && data[len] != '\0')
        len++;
    /* Exactly len bytes, so that ASan sees a read past the value. */
    char *v = malloc(len ? len : 1);
    char *sent = malloc(len + 2);
    if (!v || !sent) {
        free(v);
        free(sent);
        return;
    }
    memcpy(v, data, len);
    const char *n;
    size_t nl;
    sandlet_lib_set_cookie_sent_name(v, len, &n, &nl);
    invariant(n >= v && nl <= len && n + nl <= v + len, "sent name outside the Set-Cookie value");
    bool foreign = sandlet_lib_set_cookie_foreign(v, len, own, &n, &nl);
    invariant(n >= v && n + nl <= v + len, "judged name outside the Set-Cookie value");
    if (!foreign && browser_sends(v, len, sent)) {
        sl_request rq;
        sandlet_lib_request_init(&rq);
        sandlet_lib_request_add_header(&rq, "Cookie", sent);
        if (sandlet_lib_cookies_parse(&rq) == 0) {
            for (size_t i = 0; i < rq.ncookies; i++) {
                const char *name = rq.cookies[i].name;
                invariant(strncasecmp(name, SL_SESSION_COOKIE "_", sizeof(SL_SESSION_COOKIE)) !=
                                  0 ||
                              strcasecmp(name, own) == 0,
                          "a Set-Cookie judged harmless comes back as another session cookie");
            }
        }
        sandlet_lib_request_free(&rq);
    }
    free(v);
    free(sent);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_side((const char *)data, size);
    format_side(data, size);
    judge_side(data, size);
    return 0;
}

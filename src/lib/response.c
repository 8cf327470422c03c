/*
 * response.c - building a response: status, headers, body, streaming.
 *
 * Output is buffered until the servlet returns, flushes, or passes
 * SANDLET_LIB_AUTOFLUSH bytes; then it goes to the driver's sink.  This
 * file must never let a header through that could split the response
 * (CR, LF, NUL) or that the server owns (framing headers): the acceptor
 * checks again, but a servlet should learn of its mistake here, from a
 * return code.  Body bytes are wiped once used (sent or dropped): the
 * buffer is reused by the next request, another client's.  It never runs
 * a handler, nor touches the database or the session store: what
 * surrounds a handler is servlet_run.c's (sandlet_lib_run).
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void sandlet_lib_response_init(sl_response *rs, sl_request *rq, sandlet_lib_sink sink, void *ctx)
{
    memset(rs, 0, sizeof(*rs));
    rs->rq = rq;
    rs->sink = sink;
    rs->sink_ctx = ctx;
    sandlet_lib_response_reset(rs);
}

/* Clears the body bytes written since the last wipe: what was used, not
 * the whole (possibly large) capacity. */
static void wipe_body(sl_response *rs)
{
    if (rs->body && rs->body_dirty)
        explicit_bzero(rs->body, rs->body_dirty);
    rs->body_dirty = 0;
}

void sandlet_lib_response_reset(sl_response *rs)
{
    wipe_body(rs);
    rs->status = 0;
    rs->headers = NULL;
    rs->nheaders = 0;
    rs->cap_headers = 0;
    rs->body_len = 0;
    rs->head_sent = false;
    rs->error = 0;
}

void sandlet_lib_response_free(sl_response *rs)
{
    wipe_body(rs);
    free(rs->body);
    rs->body = NULL;
    rs->body_cap = 0;
    rs->body_len = 0;
}

bool sandlet_lib_header_valid(const char *name, size_t name_len, const char *value,
                              size_t value_len)
{
    /* CR, LF and NUL are among the controls a value may not hold. */
    return sandlet_lib_token(name, name_len) && sandlet_lib_field_value(value, value_len);
}

bool sandlet_lib_header_reserved(const char *name, size_t name_len)
{
    /* Lengths beside the names: every header of every response comes
     * here, in the worker and again in the acceptor. */
#define RESERVED(s)                                                                                \
    {                                                                                              \
        s, sizeof(s) - 1                                                                           \
    }
    static const struct {
        const char *name;
        size_t len;
    } reserved[] = {RESERVED("Content-Length"), RESERVED("Transfer-Encoding"),
                    RESERVED("Connection"),     RESERVED("Date"),
                    RESERVED("Keep-Alive"),     RESERVED("Upgrade"),
                    RESERVED("Trailer")};
#undef RESERVED
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (reserved[i].len == name_len && strncasecmp(reserved[i].name, name, name_len) == 0)
            return true;
    return false;
}

/* Checks a header a servlet sets and measures it: the lengths go with it
 * into the frame. */
static int check_header(const sl_response *rs, const char *name, const char *value, size_t *nl,
                        size_t *vl)
{
    if (!name || !value)
        return -EINVAL;
    if (rs->head_sent)
        return -EALREADY;
    *nl = strlen(name);
    *vl = strlen(value);
    if (!sandlet_lib_header_valid(name, *nl, value, *vl) || sandlet_lib_header_reserved(name, *nl))
        return -EINVAL;
    return 0;
}

static const char *dup_len(sl_request *rq, const char *s, size_t n)
{
    char *p = sl_alloc(rq, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static int add_checked(sl_response *rs, const char *name, size_t nl, const char *value, size_t vl)
{
    if (rs->nheaders == rs->cap_headers) {
        size_t ncap = rs->cap_headers ? rs->cap_headers * 2 : 8;
        sandlet_lib_header *p = sl_alloc(rs->rq, ncap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        if (rs->nheaders)
            memcpy(p, rs->headers, rs->nheaders * sizeof(*p));
        rs->headers = p;
        rs->cap_headers = ncap;
    }
    const char *n = dup_len(rs->rq, name, nl);
    const char *v = dup_len(rs->rq, value, vl);
    if (!n || !v)
        return -ENOMEM;
    rs->headers[rs->nheaders] =
        (sandlet_lib_header){.name = n, .value = v, .name_len = nl, .value_len = vl};
    rs->nheaders++;
    return 0;
}

int sl_add_header(sl_response *rs, const char *name, const char *value)
{
    size_t nl, vl;
    int rc = check_header(rs, name, value, &nl, &vl);
    return rc < 0 ? rc : add_checked(rs, name, nl, value, vl);
}

int sl_set_header(sl_response *rs, const char *name, const char *value)
{
    size_t nl, vl;
    int rc = check_header(rs, name, value, &nl, &vl);
    if (rc < 0)
        return rc;
    /* Drop earlier values of the same header, keeping the order of the
     * others. */
    size_t o = 0;
    for (size_t i = 0; i < rs->nheaders; i++)
        if (strcasecmp(rs->headers[i].name, name) != 0)
            rs->headers[o++] = rs->headers[i];
    rs->nheaders = o;
    return add_checked(rs, name, nl, value, vl);
}

int sl_set_content_type(sl_response *rs, const char *type)
{
    return sl_set_header(rs, "Content-Type", type);
}

int sl_set_status(sl_response *rs, int status)
{
    /* 1xx are interim answers the server sends itself, never a final
     * one: sent as a response they would leave the connection out of
     * step (a client reads the next answer as this one's). */
    if (status < 200 || status > 599)
        return -EINVAL;
    if (rs->head_sent)
        return -EALREADY;
    rs->status = status;
    return 0;
}

/* A response with a body that names no type is sent as HTML in UTF-8,
 * as most servlets write (sl_response(3)): browsers would otherwise guess,
 * and a guess can run script in what was meant as text. */
static void default_type(sl_response *rs)
{
    int status = rs->status ? rs->status : 200;
    if (rs->head_sent || status == 204 || status == 304)
        return;
    for (size_t i = 0; i < rs->nheaders; i++)
        if (strcasecmp(rs->headers[i].name, "Content-Type") == 0)
            return;
    sl_set_content_type(rs, "text/html; charset=utf-8");
}

static int emit(sl_response *rs, bool end)
{
    if (rs->error)
        return rs->error;
    default_type(rs);
    /* Nothing new to say: a frame would carry no progress (and the
     * acceptor refuses empty frames that do not end a response). */
    if (!end && rs->head_sent && rs->body_len == 0)
        return 0;
    sandlet_lib_output out = {
        .head = !rs->head_sent,
        .status = rs->status ? rs->status : 200,
        .headers = rs->headers,
        .nheaders = rs->nheaders,
        .body = rs->body,
        .body_len = rs->body_len,
        .end = end,
    };
    int rc = rs->sink(rs->sink_ctx, &out);
    rs->head_sent = true;
    rs->body_len = 0;
    wipe_body(rs);
    if (rc < 0)
        rs->error = rc;
    return rc;
}

int sl_write(sl_response *rs, const void *data, size_t len)
{
    if (rs->error)
        return rs->error;
    if (len == 0)
        return 0;
    if (len > rs->body_cap - rs->body_len) {
        if (rs->body_len + len > SANDLET_LIB_AUTOFLUSH) {
            /* Stream rather than grow without bound. */
            if (rs->body_len && emit(rs, false) < 0)
                return rs->error;
            if (len > SANDLET_LIB_AUTOFLUSH) {
                default_type(rs);
                sandlet_lib_output out = {
                    .head = !rs->head_sent,
                    .status = rs->status ? rs->status : 200,
                    .headers = rs->headers,
                    .nheaders = rs->nheaders,
                    .body = data,
                    .body_len = len,
                    .end = false,
                };
                int rc = rs->sink(rs->sink_ctx, &out);
                rs->head_sent = true;
                if (rc < 0)
                    rs->error = rc;
                return rc;
            }
        }
        if (len > rs->body_cap - rs->body_len) {
            size_t ncap = rs->body_cap ? rs->body_cap : 4096;
            while (ncap - rs->body_len < len)
                ncap *= 2;
            /* Not realloc: the old block would go back to malloc with
             * this response in it. */
            uint8_t *p = malloc(ncap);
            if (!p) {
                rs->error = -ENOMEM;
                return rs->error;
            }
            if (rs->body_len)
                memcpy(p, rs->body, rs->body_len);
            wipe_body(rs);
            free(rs->body);
            rs->body = p;
            rs->body_cap = ncap;
            rs->body_dirty = rs->body_len;
        }
    }
    memcpy(rs->body + rs->body_len, data, len);
    rs->body_len += len;
    if (rs->body_len > rs->body_dirty)
        rs->body_dirty = rs->body_len;
    return 0;
}

int sl_puts(sl_response *rs, const char *s)
{
    return s ? sl_write(rs, s, strlen(s)) : 0;
}

int sl_vprintf(sl_response *rs, const char *fmt, va_list ap)
{
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return -EINVAL;
    }
    if ((size_t)n < sizeof(small)) {
        va_end(ap2);
        return sl_write(rs, small, (size_t)n);
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        va_end(ap2);
        return -ENOMEM;
    }
    vsnprintf(big, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    int rc = sl_write(rs, big, (size_t)n);
    explicit_bzero(big, (size_t)n + 1);
    free(big);
    return rc;
}

int sl_printf(sl_response *rs, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = sl_vprintf(rs, fmt, ap);
    va_end(ap);
    return rc;
}

int sl_flush(sl_response *rs)
{
    return emit(rs, false);
}

int sl_redirect(sl_response *rs, int status, const char *location)
{
    if (status != 301 && status != 302 && status != 303 && status != 307 && status != 308)
        return -EINVAL;
    if (!location || !*location)
        return -EINVAL;
    size_t nl, vl;
    int rc = check_header(rs, "Location", location, &nl, &vl);
    if (rc < 0)
        return rc;
    /* Escape before changing anything, so that a failure leaves the
     * response as it was. */
    const char *href = sl_html(rs->rq, location);
    if (!*href)
        return -ENOMEM;
    if ((rc = sl_set_header(rs, "Location", location)) < 0 ||
        (rc = sl_set_content_type(rs, "text/html; charset=utf-8")) < 0)
        return rc;
    rs->status = status;
    rs->body_len = 0;
    sl_puts(rs, "<!DOCTYPE html>\n<title>Moved</title>\n<a href=\"");
    sl_puts(rs, href);
    sl_puts(rs, "\">");
    sl_puts(rs, href);
    sl_puts(rs, "</a>\n");
    return rs->error ? rs->error : status;
}

/* Statuses whose responses never have a body (RFC 9110 6.4.1). */
static bool bodyless(int status)
{
    return (status >= 100 && status < 200) || status == 204 || status == 304;
}

int sandlet_lib_response_finish(sl_response *rs, int status)
{
    if (!rs->status)
        rs->status = status;
    /* A body written for a status that has none would make the acceptor
     * treat the whole response as malformed: drop it here instead. */
    if (!rs->head_sent && bodyless(rs->status))
        rs->body_len = 0;
    return emit(rs, true);
}

void sandlet_lib_answer_unavailable(sl_response *rs, int *status, const char *what)
{
    /* Retry-After: the client may come back, unlike after a 500. */
    rs->status = 503;
    rs->nheaders = 0;
    rs->body_len = 0;
    sl_set_header(rs, "Retry-After", "5");
    sl_set_content_type(rs, "text/plain; charset=utf-8");
    sl_printf(rs, "503 Service Unavailable: %s is unavailable\n", what);
    *status = 503;
}

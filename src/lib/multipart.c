/*
 * multipart.c - multipart/form-data request bodies (RFC 7578): text parts
 * become parameters, parts with a filename become sl_file.
 *
 * The body is untrusted and binary: every scan here is bounded by an
 * explicit end pointer (memchr/memmem, never strlen or strstr on the
 * body), file data are never copied, and a body that does not parse is
 * rejected whole rather than half-used.  Runs only when a servlet asks
 * for a parameter or a file.
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

/* RFC 2046 limits a boundary to 70 characters. */
#define BOUNDARY_MAX 70
/* Headers of one part; a browser sends two short lines. */
#define PART_HEAD_MAX ((size_t)8 * 1024)

static bool is_ws(char c)
{
    return c == ' ' || c == '\t';
}

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && is_ws(*p))
        p++;
    return p;
}

static char *arena_strndup(sandlet_arena *a, const char *s, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    char *p = sandlet_lib_arena_alloc(a, n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/*
 * Reads one ";name=value" parameter of a header value in [*pp, end):
 * the value is a token or a quoted string (backslash escapes '"' and '\'
 * only, so that old browsers' "C:\dir\file" names survive).  Returns 1
 * with the name's span and the value copied to the arena, 0 at the end,
 * -EBADMSG for junk, -ENOMEM.
 */
static int next_param(sandlet_arena *a, const char **pp, const char *end, const char **name,
                      size_t *nlen, char **value, size_t *vlen)
{
    const char *p = *pp;
    while (p < end && (is_ws(*p) || *p == ';'))
        p++;
    if (p == end)
        return 0;
    const char *n = p;
    while (p < end && *p != '=' && *p != ';' && !is_ws(*p))
        p++;
    *name = n;
    *nlen = (size_t)(p - n);
    p = skip_ws(p, end);
    if (p == end || *p != '=') {
        /* A bare word (such as "form-data" itself): no value. */
        *value = arena_strndup(a, "", 0);
        *vlen = 0;
        *pp = p;
        return *value ? 1 : -ENOMEM;
    }
    p = skip_ws(p + 1, end);
    if (p < end && *p == '"') {
        p++;
        /* The unescaped value is never longer than the quoted one. */
        char *out = sandlet_lib_arena_alloc(a, (size_t)(end - p) + 1);
        if (!out)
            return -ENOMEM;
        size_t o = 0;
        for (;;) {
            if (p == end)
                return -EBADMSG; /* unterminated quote */
            if (*p == '"')
                break;
            if (*p == '\\' && end - p > 1 && (p[1] == '"' || p[1] == '\\'))
                p++;
            out[o++] = *p++;
        }
        p++;
        out[o] = '\0';
        *value = out;
        *vlen = o;
    } else {
        const char *v = p;
        while (p < end && *p != ';' && !is_ws(*p))
            p++;
        *vlen = (size_t)(p - v);
        *value = arena_strndup(a, v, *vlen);
        if (!*value)
            return -ENOMEM;
    }
    *pp = p;
    return 1;
}

static bool word_is(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

int sandlet_lib_multipart_boundary(sandlet_arena *a, const char *ct, const char **boundary,
                                   size_t *blen)
{
    static const char mt[] = "multipart/form-data";
    const char *end = ct + strlen(ct);
    const char *p = skip_ws(ct, end);
    if ((size_t)(end - p) < sizeof(mt) - 1 || strncasecmp(p, mt, sizeof(mt) - 1) != 0)
        return -EINVAL;
    p = skip_ws(p + sizeof(mt) - 1, end);
    if (p < end && *p != ';')
        return -EINVAL; /* "multipart/form-dataX" */
    const char *name;
    size_t nlen, vlen;
    char *value;
    int rc;
    while ((rc = next_param(a, &p, end, &name, &nlen, &value, &vlen)) > 0) {
        if (!word_is(name, nlen, "boundary"))
            continue;
        if (vlen == 0 || vlen > BOUNDARY_MAX || memchr(value, '\r', vlen) ||
            memchr(value, '\n', vlen))
            return -EINVAL;
        *boundary = value;
        *blen = vlen;
        return 0;
    }
    return rc == -ENOMEM ? rc : -EINVAL;
}

/* What the headers of one part say. */
typedef struct part_head {
    char *name;     /* Content-Disposition name, or NULL */
    char *filename; /* Content-Disposition filename, or NULL: a text part */
    char *type;     /* Content-Type, or NULL */
} part_head;

static int parse_disposition(sandlet_arena *a, const char *p, const char *end, part_head *ph)
{
    p = skip_ws(p, end);
    const char *w = p;
    while (p < end && *p != ';' && !is_ws(*p))
        p++;
    if (!word_is(w, (size_t)(p - w), "form-data"))
        return 0; /* not a form field: the part is skipped */
    const char *name;
    size_t nlen, vlen;
    char *value;
    int rc;
    while ((rc = next_param(a, &p, end, &name, &nlen, &value, &vlen)) > 0) {
        /* A NUL inside a name would make it unreachable by C strings:
         * such a name is as good as absent. */
        if (memchr(value, '\0', vlen))
            continue;
        if (word_is(name, nlen, "name"))
            ph->name = value;
        else if (word_is(name, nlen, "filename"))
            ph->filename = value;
    }
    return rc;
}

/* Parses the header block [p, end) of one part, lines split by CRLF. */
static int parse_part_head(sandlet_arena *a, const char *p, const char *end, part_head *ph)
{
    while (p < end) {
        const char *eol = memchr(p, '\r', (size_t)(end - p));
        const char *le = eol ? eol : end;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon) {
            size_t nlen = (size_t)(colon - p);
            const char *v = skip_ws(colon + 1, le);
            const char *ve = le;
            while (ve > v && is_ws(ve[-1]))
                ve--;
            int rc = 0;
            if (word_is(p, nlen, "Content-Disposition")) {
                rc = parse_disposition(a, v, ve, ph);
            } else if (word_is(p, nlen, "Content-Type")) {
                ph->type = arena_strndup(a, v, (size_t)(ve - v));
                if (!ph->type)
                    rc = -ENOMEM;
            }
            if (rc < 0)
                return rc;
        } else if (le > p) {
            return -EBADMSG; /* a line that is no header */
        }
        if (!eol)
            break;
        if (end - eol < 2 || eol[1] != '\n')
            return -EBADMSG; /* bare CR */
        p = eol + 2;
    }
    return 0;
}

/* The client's file name without directories: some browsers send the
 * whole path, which must never reach a servlet that trusts it. */
static const char *base_name(const char *s)
{
    const char *b = s;
    for (const char *p = s; *p; p++)
        if (*p == '/' || *p == '\\')
            b = p + 1;
    return b;
}

/* After a delimiter's boundary: optional blanks, then CRLF.  Returns
 * the start of the next line, or NULL when the line holds anything else. */
static const uint8_t *delimiter_line_end(const uint8_t *p, const uint8_t *end)
{
    size_t left = (size_t)(end - p), i = 0;
    while (i < left && (p[i] == ' ' || p[i] == '\t'))
        i++;
    /* cppcheck assumes the loop ran to left; blanks can stop it early. */
    // cppcheck-suppress knownConditionTrueFalse
    if (left - i < 2 || p[i] != '\r' || p[i + 1] != '\n')
        return NULL;
    return p + i + 2;
}

static bool is_close(const uint8_t *p, const uint8_t *end)
{
    return (size_t)(end - p) >= 2 && p[0] == '-' && p[1] == '-';
}

/*
 * Finds the next delimiter line at or after from: CRLF "--" boundary,
 * then either "--" (the close) or optional blanks and CRLF.  A match that
 * is followed by anything else is part of the data (the boundary merely
 * begins a line of it) and the search goes on.  Returns the position of
 * the CR, or NULL; *after receives the start of the next part (after the
 * line's CRLF) and *close whether this was the closing delimiter.
 */
static const uint8_t *find_delimiter(const uint8_t *from, const uint8_t *end, const uint8_t *delim,
                                     size_t dlen, const uint8_t **after, bool *close)
{
    while (from < end) {
        const uint8_t *d = memmem(from, (size_t)(end - from), delim, dlen);
        if (!d)
            return NULL;
        const uint8_t *p = d + dlen;
        if (is_close(p, end)) {
            *after = p + 2;
            *close = true;
            return d;
        }
        if ((p = delimiter_line_end(p, end)) != NULL) {
            *after = p;
            *close = false;
            return d;
        }
        from = d + 1;
    }
    return NULL;
}

int sandlet_lib_multipart_parse(sl_request *rq, const uint8_t *body, size_t len,
                                const char *boundary, size_t blen, size_t *param_cap,
                                size_t *file_cap)
{
    if (blen == 0 || blen > BOUNDARY_MAX)
        return -EBADMSG;
    /* CRLF "--" boundary; only the first delimiter may lack the CRLF,
     * when it opens the body. */
    uint8_t delim[BOUNDARY_MAX + 4];
    size_t dlen = blen + 4;
    memcpy(delim, "\r\n--", 4);
    memcpy(delim + 4, boundary, blen);
    const uint8_t *end = body + len;
    const uint8_t *part;
    bool close = false;
    if (len >= dlen - 2 && memcmp(body, delim + 2, dlen - 2) == 0) {
        /* The body opens with the delimiter (no preamble, no CRLF before
         * it): check the rest of its line here. */
        const uint8_t *p = body + dlen - 2;
        if (is_close(p, end))
            return 0; /* an empty form */
        if (!(part = delimiter_line_end(p, end)))
            return -EBADMSG;
    } else {
        /* Skip a preamble. */
        if (!find_delimiter(body, end, delim, dlen, &part, &close))
            return -EBADMSG;
        if (close)
            return 0;
    }
    for (;;) {
        /* Headers end at an empty line; a part may have none at all. */
        const uint8_t *hend, *data;
        if (end - part >= 2 && part[0] == '\r' && part[1] == '\n') {
            hend = part;
            data = part + 2;
        } else {
            size_t span = (size_t)(end - part);
            if (span > PART_HEAD_MAX + 4)
                span = PART_HEAD_MAX + 4;
            hend = memmem(part, span, "\r\n\r\n", 4);
            if (!hend)
                return -EBADMSG; /* truncated, or headers too large */
            data = hend + 4;
        }
        const uint8_t *next;
        const uint8_t *d = find_delimiter(data - 2, end, delim, dlen, &next, &close);
        /* data - 2: an empty part's data is followed directly by the
         * delimiter, whose CRLF is the header block's last one. */
        if (!d)
            return -EBADMSG; /* no closing delimiter: truncated */
        if (d < data)
            d = data;
        part_head ph = {NULL, NULL, NULL};
        int rc = parse_part_head(&rq->arena, (const char *)part, (const char *)hend, &ph);
        if (rc < 0)
            return rc;
        size_t dl = (size_t)(d - data);
        if (ph.name && ph.filename) {
            sl_file f = {
                .name = ph.name,
                .filename = base_name(ph.filename),
                .content_type = ph.type && *ph.type ? ph.type : "application/octet-stream",
                .data = data,
                .len = dl,
            };
            if (sandlet_lib_file_push(rq, file_cap, &f) < 0)
                return -ENOMEM;
        } else if (ph.name) {
            char *v = arena_strndup(&rq->arena, (const char *)data, dl);
            if (!v || sandlet_lib_param_push(rq, param_cap, ph.name, v, dl) < 0)
                return -ENOMEM;
        }
        if (close)
            return 0;
        part = next;
    }
}

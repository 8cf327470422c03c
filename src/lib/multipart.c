/*
 * multipart.c - multipart/form-data request bodies (RFC 7578): text parts
 * become parameters, parts with a filename become sl_file.
 *
 * The parser is incremental: it is fed the body in pieces of any size
 * (a streamed body's frames, or a whole body at once) and keeps bounded
 * state between them: a part's header block (at most 8 KiB), a hold for
 * a delimiter cut by a piece boundary (classify() bounds it), and the
 * data of the current part, which for a file part of a streamed body is,
 * past a threshold, left in the spool file the acceptor copied the body
 * into (spool.c).
 *
 * The body is untrusted and binary: every scan here is bounded by an
 * explicit length (memchr/memcmp, never strlen or strstr on the body),
 * there is no recursion, and a body that does not parse is rejected whole
 * rather than half-used.  Runs only when a servlet asks for a parameter
 * or a file.
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BOUNDARY_MAX SANDLET_MP_BOUNDARY_MAX

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

/* ---- the incremental parser ------------------------------------------- */

enum mp_state { MP_PREAMBLE, MP_HEAD, MP_DATA, MP_DONE };

/* What the bytes at the start of the hold say (classify()). */
enum { NOT_DELIM, NEED_MORE, IS_DELIM };

int sandlet_lib_mp_init(sandlet_lib_mp *mp, sl_request *rq, const char *boundary, size_t blen,
                        size_t *param_cap, size_t *file_cap, bool spool)
{
    memset(mp, 0, sizeof(*mp));
    if (blen == 0 || blen > SANDLET_MP_BOUNDARY_MAX)
        return -EBADMSG;
    mp->rq = rq;
    mp->param_cap = param_cap;
    mp->file_cap = file_cap;
    mp->spool = spool;
    memcpy(mp->delim, "\r\n--", 4);
    memcpy(mp->delim + 4, boundary, blen);
    mp->dlen = blen + 4;
    /* Only the first delimiter may lack its CRLF, when it opens the body:
     * a CRLF of our own in front of the body makes it an ordinary one,
     * and at_start remembers that a body opening with the boundary must
     * open with a whole delimiter line. */
    mp->state = MP_PREAMBLE;
    mp->hold[0] = '\r';
    mp->hold[1] = '\n';
    mp->hold_len = 2;
    mp->skip = 2;
    mp->at_start = true;
    return 0;
}

static void part_buf_free(sandlet_lib_mp *mp)
{
    if (mp->buf)
        explicit_bzero(mp->buf, mp->used); /* a client's bytes */
    free(mp->buf);
    mp->buf = NULL;
    mp->used = mp->cap = 0;
}

void sandlet_lib_mp_release(sandlet_lib_mp *mp)
{
    part_buf_free(mp);
}

/*
 * Whether the n bytes at p (p[0] is '\r') begin a delimiter line: CRLF
 * "--" boundary, then "--" (the close) or at most SANDLET_MP_PAD_MAX
 * blanks and CRLF.  IS_DELIM sets *k to the line's length; NEED_MORE
 * only while n is below that (never at the end of the body, eof).
 */
static int classify(const sandlet_lib_mp *mp, const uint8_t *p, size_t n, bool eof, size_t *k,
                    bool *close)
{
    size_t dlen = mp->dlen;
    int more = eof ? NOT_DELIM : NEED_MORE;
    if (memcmp(p, mp->delim, n < dlen ? n : dlen) != 0)
        return NOT_DELIM;
    if (n < dlen)
        return more;
    const uint8_t *q = p + dlen;
    size_t rem = n - dlen;
    if (rem == 0)
        return more;
    if (q[0] == '-') {
        if (rem < 2)
            return more;
        if (q[1] != '-')
            return NOT_DELIM;
        *k = dlen + 2;
        *close = true;
        return IS_DELIM;
    }
    size_t i = 0;
    while (i < rem && (q[i] == ' ' || q[i] == '\t'))
        i++;
    if (i > SANDLET_MP_PAD_MAX)
        return NOT_DELIM; /* bounds the hold: such a line is data */
    if (i == rem)
        return more;
    if (q[i] != '\r')
        return NOT_DELIM;
    if (rem - i < 2)
        return more;
    if (q[i + 1] != '\n')
        return NOT_DELIM;
    *k = dlen + i + 2;
    *close = false;
    return IS_DELIM;
}

/* Grows the in-memory data of the current part to hold n more bytes. */
static int buf_reserve(sandlet_lib_mp *mp, size_t n)
{
    if (n > SIZE_MAX - mp->used - 1)
        return -ENOMEM;
    if (mp->used + n <= mp->cap)
        return 0;
    size_t cap = mp->cap ? mp->cap : 4096;
    while (cap < mp->used + n)
        cap = cap > SIZE_MAX / 2 ? mp->used + n : cap * 2;
    uint8_t *p = malloc(cap);
    if (!p)
        return -ENOMEM;
    size_t used = mp->used;
    if (used)
        memcpy(p, mp->buf, used);
    part_buf_free(mp);
    mp->buf = p;
    mp->used = used;
    mp->cap = cap;
    return 0;
}

/* Data of the current part: kept in memory, or for a file part past the
 * threshold (when the body streams and the acceptor copied it to the
 * spool file) left where it is in that file: its range is remembered,
 * and what memory held of it is let go.  The data of a part are
 * contiguous in the body, from data_start. */
static int part_data(sandlet_lib_mp *mp, const uint8_t *p, size_t n)
{
    if (mp->state != MP_DATA || !mp->name || n == 0)
        return 0; /* the preamble, or a part nobody can ask for */
    if (mp->spooled) {
        mp->part_len += n;
        return 0;
    }
    if (mp->filename && mp->spool && !mp->unspooled && sandlet_lib_spool_enabled() &&
        (n > SANDLET_SPOOL_THRESHOLD || mp->used > SANDLET_SPOOL_THRESHOLD - n)) {
        /* Asked once per body: the acceptor copies a body whole or not at
         * all, and before the worker sees its bytes. */
        if (sandlet_lib_spool_holds(mp->data_start + mp->used + n)) {
            mp->spooled = true;
            mp->spool_off = mp->data_start;
            mp->part_len = mp->used + n;
            part_buf_free(mp);
            return 0;
        }
        mp->unspooled = true;
    }
    int rc = buf_reserve(mp, n);
    if (rc < 0)
        return rc;
    memcpy(mp->buf + mp->used, p, n);
    mp->used += n;
    return 0;
}

/* The current part ends: it becomes a parameter or a file. */
static int part_end(sandlet_lib_mp *mp)
{
    sl_request *rq = mp->rq;
    int rc = 0;
    if (mp->name && mp->filename) {
        sandlet_lib_file f = {
            .pub = {.name = mp->name,
                    .filename = base_name(mp->filename),
                    .content_type = mp->type && *mp->type ? mp->type : "application/octet-stream"},
        };
        if (mp->spooled) {
            rc = sandlet_lib_spool_part(rq, &f, mp->spool_off, mp->part_len);
        } else {
            uint8_t *d = sandlet_lib_arena_alloc(&rq->arena, mp->used ? mp->used : 1);
            if (!d)
                rc = -ENOMEM;
            else if (mp->used)
                memcpy(d, mp->buf, mp->used);
            f.pub.data = d;
            f.pub.len = mp->used;
        }
        if (rc == 0)
            rc = sandlet_lib_file_push(rq, mp->file_cap, &f);
    } else if (mp->name) {
        char *v = arena_strndup(&rq->arena, mp->buf ? (const char *)mp->buf : "", mp->used);
        if (!v)
            rc = -ENOMEM;
        else
            rc = sandlet_lib_param_push(rq, mp->param_cap, mp->name, v, mp->used);
    }
    part_buf_free(mp);
    mp->spooled = false;
    mp->part_len = 0;
    return rc;
}

/* A delimiter line was read whole. */
static int on_delimiter(sandlet_lib_mp *mp, bool close)
{
    int rc = mp->state == MP_DATA ? part_end(mp) : 0;
    if (rc < 0)
        return rc;
    mp->state = close ? MP_DONE : MP_HEAD;
    mp->head_len = 0;
    mp->name = mp->filename = mp->type = NULL;
    return 0;
}

/* Hands the first n bytes of the hold on as data (but the skip bytes of
 * our own CRLF, which are none) and moves the rest to its front. */
static int hold_emit(sandlet_lib_mp *mp, size_t n)
{
    size_t s = mp->skip < n ? mp->skip : n;
    int rc = part_data(mp, mp->hold + s, n - s);
    mp->skip -= s;
    memmove(mp->hold, mp->hold + n, mp->hold_len - n);
    mp->hold_len -= n;
    return rc;
}

/* Resolves what the hold (which starts with a CR) can say now.  A loop,
 * not recursion: each turn either waits for more, ends at a delimiter,
 * or gives at least one byte on as data. */
static int hold_scan(sandlet_lib_mp *mp, bool eof)
{
    while (mp->hold_len) {
        size_t k = 0;
        bool close = false;
        int c = classify(mp, mp->hold, mp->hold_len, eof, &k, &close);
        if (c == NEED_MORE)
            return 0;
        bool first = mp->at_start;
        mp->at_start = false;
        if (c == IS_DELIM) {
            /* Bytes come one at a time while the hold is used, so the
             * line is the whole hold. */
            if (k != mp->hold_len)
                return -EBADMSG;
            mp->hold_len = 0;
            mp->skip = 0;
            return on_delimiter(mp, close);
        }
        if (first && mp->hold_len >= mp->dlen && memcmp(mp->hold, mp->delim, mp->dlen) == 0)
            return -EBADMSG; /* opens with the boundary, but no delimiter line */
        const uint8_t *cr = memchr(mp->hold + 1, '\r', mp->hold_len - 1);
        int rc = hold_emit(mp, cr ? (size_t)(cr - mp->hold) : mp->hold_len);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* One byte of a part's header block; the block ends at an empty line. */
static int head_byte(sandlet_lib_mp *mp, uint8_t b)
{
    mp->head[mp->head_len++] = (char)b;
    size_t n = mp->head_len;
    size_t hend;
    if (n == 2 && mp->head[0] == '\r' && mp->head[1] == '\n')
        hend = 0; /* no headers at all */
    else if (n >= 4 && memcmp(mp->head + n - 4, "\r\n\r\n", 4) == 0)
        hend = n - 4;
    else
        return n >= sizeof(mp->head) ? -EBADMSG : 0; /* too large */
    part_head ph = {NULL, NULL, NULL};
    int rc = parse_part_head(&mp->rq->arena, mp->head, mp->head + hend, &ph);
    if (rc < 0)
        return rc;
    mp->name = ph.name;
    mp->filename = ph.filename;
    mp->type = ph.type;
    /* The data's search starts at the block's last CRLF: an empty part's
     * delimiter shares it. */
    mp->state = MP_DATA;
    mp->hold[0] = '\r';
    mp->hold[1] = '\n';
    mp->hold_len = 2;
    mp->skip = 2;
    return 0;
}

int sandlet_lib_mp_feed(sandlet_lib_mp *mp, const uint8_t *p, size_t n)
{
    const uint8_t *start = p;
    int rc = mp->err;
    while (rc == 0 && n > 0) {
        if (mp->state == MP_DONE)
            break; /* the epilogue is ignored */
        if (mp->state == MP_HEAD) {
            rc = head_byte(mp, *p++);
            n--;
            if (mp->state == MP_DATA)
                mp->data_start = mp->base + (uint64_t)(p - start);
            continue;
        }
        if (mp->hold_len) {
            if (mp->hold_len >= sizeof(mp->hold)) {
                rc = -EBADMSG; /* classify() bounds the hold: never */
                break;
            }
            mp->hold[mp->hold_len++] = *p++;
            n--;
            rc = hold_scan(mp, false);
            continue;
        }
        /* The fast path through a file's bytes: up to the next CR all is
         * data. */
        const uint8_t *cr = memchr(p, '\r', n);
        size_t d = cr ? (size_t)(cr - p) : n;
        rc = part_data(mp, p, d);
        p += d;
        n -= d;
        if (rc < 0 || n == 0)
            break;
        size_t k = 0;
        bool close = false;
        int c = classify(mp, p, n, false, &k, &close);
        if (c == NOT_DELIM) {
            rc = part_data(mp, p, 1);
            p++;
            n--;
        } else if (c == IS_DELIM) {
            p += k;
            n -= k;
            rc = on_delimiter(mp, close);
        } else if (n < sizeof(mp->hold)) {
            memcpy(mp->hold, p, n);
            mp->hold_len = n;
            mp->skip = 0;
            n = 0;
        } else {
            rc = -EBADMSG; /* classify() bounds NEED_MORE: never */
        }
    }
    mp->err = rc;
    return rc;
}

int sandlet_lib_mp_finish(sandlet_lib_mp *mp)
{
    int rc = mp->err;
    if (rc == 0 && mp->state != MP_HEAD && mp->state != MP_DONE)
        rc = hold_scan(mp, true);
    if (rc == 0 && mp->state != MP_DONE)
        rc = -EBADMSG; /* no closing delimiter: truncated */
    part_buf_free(mp);
    mp->err = rc ? rc : -EALREADY;
    return rc;
}

int sandlet_lib_multipart_parse(sl_request *rq, const uint8_t *body, size_t len,
                                const char *boundary, size_t blen, size_t *param_cap,
                                size_t *file_cap)
{
    sandlet_lib_mp *mp = malloc(sizeof(*mp));
    if (!mp)
        return -ENOMEM;
    int rc = sandlet_lib_mp_init(mp, rq, boundary, blen, param_cap, file_cap, false);
    if (rc == 0)
        rc = sandlet_lib_mp_feed(mp, body, len);
    if (rc == 0)
        rc = sandlet_lib_mp_finish(mp);
    sandlet_lib_mp_release(mp);
    free(mp);
    return rc;
}

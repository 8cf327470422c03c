/*
 * frame.c - encoder and decoder of the acceptor/worker frames (frame.h
 * documents the format).
 *
 * Both sides of the socketpair use this file, and the acceptor runs it on
 * bytes written by code it does not trust: every read is bounds-checked
 * against the bytes actually received, and malformed input is reported,
 * never acted upon.  Nothing here performs I/O.  Every frame type has its
 * encoder and its decoder here, and no other file writes or parses a
 * payload field by hand.
 */
#include "config.h"

#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sandlet_frame_header_decode(const uint8_t *buf, size_t len, sandlet_frame_hdr *out)
{
    if (len < SANDLET_FRAME_HEADER)
        return -EAGAIN;
    out->version = buf[0];
    out->type = buf[1];
    out->flags = (uint16_t)(buf[2] | buf[3] << 8);
    out->id =
        (uint32_t)buf[4] | (uint32_t)buf[5] << 8 | (uint32_t)buf[6] << 16 | (uint32_t)buf[7] << 24;
    out->length = (uint32_t)buf[8] | (uint32_t)buf[9] << 8 | (uint32_t)buf[10] << 16 |
                  (uint32_t)buf[11] << 24;
    if (out->version != SANDLET_FRAME_VERSION)
        return -EPROTO;
    if (out->type < SANDLET_FRAME_INIT || out->type > SANDLET_FRAME_LAST)
        return -EPROTO;
    if (out->flags & ~(SANDLET_FRAME_END | SANDLET_FRAME_ABORT))
        return -EPROTO;
    if (out->length > SANDLET_FRAME_MAX)
        return -EMSGSIZE;
    /* ABORT means one thing only: an empty last REQBODY.  Anywhere else
     * it would be a second way to end a message, for readers to disagree
     * on. */
    if ((out->flags & SANDLET_FRAME_ABORT) &&
        (out->type != SANDLET_FRAME_REQBODY || !(out->flags & SANDLET_FRAME_END) || out->length))
        return -EPROTO;
    return 0;
}

void sandlet_frame_header_encode(uint8_t *buf, const sandlet_frame_hdr *hdr)
{
    buf[0] = hdr->version;
    buf[1] = hdr->type;
    buf[2] = (uint8_t)hdr->flags;
    buf[3] = (uint8_t)(hdr->flags >> 8);
    for (int i = 0; i < 4; i++) {
        buf[4 + i] = (uint8_t)(hdr->id >> (8 * i));
        buf[8 + i] = (uint8_t)(hdr->length >> (8 * i));
    }
}

const char *sandlet_frame_type_name(unsigned type)
{
    static const char *const names[] = {
        [SANDLET_FRAME_INIT] = "INIT",       [SANDLET_FRAME_READY] = "READY",
        [SANDLET_FRAME_FAIL] = "FAIL",       [SANDLET_FRAME_REQUEST] = "REQUEST",
        [SANDLET_FRAME_REQBODY] = "REQBODY", [SANDLET_FRAME_RESPONSE] = "RESPONSE",
        [SANDLET_FRAME_BODY] = "BODY",       [SANDLET_FRAME_SKIP] = "SKIP",
    };
    if (type < sizeof(names) / sizeof(names[0]) && names[type])
        return names[type];
    return "UNKNOWN";
}

/* ---- payload items ----------------------------------------------------- */

/* Appends v in bytes little-endian bytes, written in place: the codec
 * calls this a dozen times per frame. */
static inline void put_le(sandlet_buf *b, uint64_t v, int bytes)
{
    if (sandlet_buf_reserve(b, (size_t)bytes) < 0)
        return;
    uint8_t *p = b->data + b->len;
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    b->len += (size_t)bytes;
}

void sandlet_buf_put_u8(sandlet_buf *b, uint8_t v)
{
    put_le(b, v, 1);
}

void sandlet_buf_put_u16(sandlet_buf *b, uint16_t v)
{
    put_le(b, v, 2);
}

void sandlet_buf_put_u32(sandlet_buf *b, uint32_t v)
{
    put_le(b, v, 4);
}

void sandlet_buf_put_u64(sandlet_buf *b, uint64_t v)
{
    put_le(b, v, 8);
}

void sandlet_buf_put_str(sandlet_buf *b, const char *s, size_t len)
{
    if (len > UINT32_MAX) {
        b->error = -EMSGSIZE;
        return;
    }
    /* One reservation for the length, the bytes and the NUL. */
    if (len > SIZE_MAX - 5 || sandlet_buf_reserve(b, 4 + len + 1) < 0) {
        if (!b->error)
            b->error = -EMSGSIZE;
        return;
    }
    put_le(b, (uint32_t)len, 4);
    if (len)
        memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len++] = 0;
}

size_t sandlet_frame_begin(sandlet_buf *b, uint8_t type, uint32_t id)
{
    size_t start = b->len;
    uint8_t hdr[SANDLET_FRAME_HEADER];
    sandlet_frame_hdr h = {SANDLET_FRAME_VERSION, type, 0, id, 0};
    sandlet_frame_header_encode(hdr, &h);
    sandlet_buf_put(b, hdr, sizeof(hdr));
    return start;
}

int sandlet_frame_finish(sandlet_buf *b, size_t start, uint16_t flags)
{
    return sandlet_frame_finish_more(b, start, flags, 0);
}

/* ---- readers ------------------------------------------------------------ */

void sandlet_reader_init(sandlet_reader *r, const uint8_t *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->pos = 0;
    r->bad = false;
}

static uint64_t read_le(sandlet_reader *r, size_t bytes)
{
    if (r->bad || r->len - r->pos < bytes) {
        r->bad = true;
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; i++)
        v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += bytes;
    return v;
}

uint8_t sandlet_read_u8(sandlet_reader *r)
{
    return (uint8_t)read_le(r, 1);
}

uint16_t sandlet_read_u16(sandlet_reader *r)
{
    return (uint16_t)read_le(r, 2);
}

uint32_t sandlet_read_u32(sandlet_reader *r)
{
    return (uint32_t)read_le(r, 4);
}

uint64_t sandlet_read_u64(sandlet_reader *r)
{
    return read_le(r, 8);
}

const char *sandlet_read_str(sandlet_reader *r, size_t *len)
{
    size_t n = sandlet_read_u32(r);
    /* n + 1 cannot overflow: n < 2^32 and size_t is at least 64 bits on
     * every platform sandlet supports; the comparison is written so that
     * it stays correct either way. */
    /* Every reader uses a str as a C string: a NUL inside it would make
     * the checked length and what is used disagree (a header name "\0x"
     * passes a non-empty check and reaches a servlet as ""). */
    if (r->bad || n >= r->len - r->pos || r->p[r->pos + n] != 0 ||
        memchr(r->p + r->pos, 0, n) != NULL) {
        r->bad = true;
        if (len)
            *len = 0;
        return "";
    }
    const char *s = (const char *)r->p + r->pos;
    r->pos += n + 1;
    if (len)
        *len = n;
    return s;
}

const uint8_t *sandlet_read_rest(sandlet_reader *r, size_t *len)
{
    if (r->bad) {
        *len = 0;
        return r->p + r->len;
    }
    *len = r->len - r->pos;
    const uint8_t *p = r->p + r->pos;
    r->pos = r->len;
    return p;
}

bool sandlet_wire_headers_next(sandlet_reader *r, uint16_t *left, sandlet_wire_header *h)
{
    if (*left == 0 || r->bad)
        return false;
    h->name = sandlet_read_str(r, &h->name_len);
    h->value = sandlet_read_str(r, &h->value_len);
    if (r->bad)
        return false;
    (*left)--;
    return true;
}

/* Walks every header once so that later iterations cannot fail, and
 * leaves r just past them.  Header names must be non-empty. */
static int skip_headers(sandlet_reader *r, uint16_t n)
{
    for (uint16_t i = 0; i < n; i++) {
        size_t nlen;
        sandlet_read_str(r, &nlen);
        sandlet_read_str(r, NULL);
        if (r->bad || nlen == 0)
            return -EPROTO;
    }
    return 0;
}

int sandlet_wire_request_decode(const uint8_t *payload, size_t len, sandlet_wire_request *out)
{
    sandlet_reader r;
    sandlet_reader_init(&r, payload, len);
    out->servlet = sandlet_read_u16(&r);
    out->http_major = sandlet_read_u8(&r);
    out->http_minor = sandlet_read_u8(&r);
    out->nheaders = sandlet_read_u16(&r);
    out->method = sandlet_read_str(&r, &out->method_len);
    out->target = sandlet_read_str(&r, &out->target_len);
    out->peer = sandlet_read_str(&r, &out->peer_len);
    if (r.bad || out->method_len == 0 || out->target_len == 0)
        return -EPROTO;
    out->headers = r;
    if (skip_headers(&r, out->nheaders) < 0)
        return -EPROTO;
    out->body = sandlet_read_rest(&r, &out->body_len);
    return 0;
}

int sandlet_wire_response_decode(const uint8_t *payload, size_t len, sandlet_wire_response *out)
{
    sandlet_reader r;
    sandlet_reader_init(&r, payload, len);
    out->status = sandlet_read_u16(&r);
    out->nheaders = sandlet_read_u16(&r);
    out->content_length = sandlet_read_u64(&r);
    if (r.bad)
        return -EPROTO;
    out->headers = r;
    if (skip_headers(&r, out->nheaders) < 0)
        return -EPROTO;
    out->body = sandlet_read_rest(&r, &out->body_len);
    /* Checked last, on a frame that parsed: the caller may still use it
     * to step over the response it starts. */
    if (out->status < 200 || out->status > 599)
        return -ERANGE;
    return 0;
}

/* ---- encoders ----------------------------------------------------------- */

int sandlet_frame_finish_more(sandlet_buf *b, size_t start, uint16_t flags, size_t more)
{
    if (b->error)
        return b->error;
    size_t inbuf = b->len - start - SANDLET_FRAME_HEADER;
    if (inbuf > SANDLET_FRAME_MAX || more > SANDLET_FRAME_MAX - inbuf)
        return -EMSGSIZE;
    size_t payload = inbuf + more;
    uint8_t *hdr = b->data + start;
    hdr[2] = (uint8_t)flags;
    hdr[3] = (uint8_t)(flags >> 8);
    for (int i = 0; i < 4; i++)
        hdr[8 + i] = (uint8_t)(payload >> (8 * i));
    return 0;
}

/* Cuts b back to where a failed message started, so that a caller
 * appending to a queue keeps the frames before it. */
static int rollback(sandlet_buf *b, size_t mark, int rc)
{
    if (rc < 0) {
        b->len = mark;
        b->error = 0;
    }
    return rc;
}

static void put_cstr(sandlet_buf *b, const char *s)
{
    sandlet_buf_put_str(b, s, strlen(s));
}

size_t sandlet_wire_request_begin(sandlet_buf *b, uint32_t id, const sandlet_wire_request *rq)
{
    size_t start = sandlet_frame_begin(b, SANDLET_FRAME_REQUEST, id);
    sandlet_buf_put_u16(b, rq->servlet);
    sandlet_buf_put_u8(b, rq->http_major);
    sandlet_buf_put_u8(b, rq->http_minor);
    sandlet_buf_put_u16(b, rq->nheaders);
    sandlet_buf_put_str(b, rq->method, rq->method_len);
    sandlet_buf_put_str(b, rq->target, rq->target_len);
    sandlet_buf_put_str(b, rq->peer, rq->peer_len);
    return start;
}

void sandlet_wire_header_put(sandlet_buf *b, const char *name, size_t name_len, const char *value,
                             size_t value_len)
{
    sandlet_buf_put_str(b, name, name_len);
    sandlet_buf_put_str(b, value, value_len);
}

int sandlet_wire_request_finish(sandlet_buf *b, size_t start, uint32_t id, const uint8_t *body,
                                size_t len)
{
    int rc = b->error;
    if (rc == 0) {
        size_t used = b->len - start - SANDLET_FRAME_HEADER;
        size_t room = used < SANDLET_FRAME_MAX ? SANDLET_FRAME_MAX - used : 0;
        bool whole = len <= room;
        size_t first = whole ? len : room;
        sandlet_buf_put(b, body, first);
        rc = sandlet_frame_finish(b, start, whole ? SANDLET_FRAME_END : 0);
        for (size_t off = first; rc == 0 && off < len;) {
            size_t n = len - off < SANDLET_FRAME_MAX ? len - off : SANDLET_FRAME_MAX;
            size_t more = sandlet_frame_begin(b, SANDLET_FRAME_REQBODY, id);
            sandlet_buf_put(b, body + off, n);
            off += n;
            rc = sandlet_frame_finish(b, more, off == len ? SANDLET_FRAME_END : 0);
        }
    }
    return rollback(b, start, rc);
}

int sandlet_wire_request_finish_open(sandlet_buf *b, size_t start, const uint8_t *body, size_t len,
                                     size_t *taken)
{
    int rc = b->error;
    *taken = 0;
    if (rc == 0) {
        size_t used = b->len - start - SANDLET_FRAME_HEADER;
        size_t room = used < SANDLET_FRAME_MAX ? SANDLET_FRAME_MAX - used : 0;
        size_t first = len < room ? len : room;
        sandlet_buf_put(b, body, first);
        rc = sandlet_frame_finish(b, start, 0);
        if (rc == 0)
            *taken = first;
    }
    return rollback(b, start, rc);
}

int sandlet_wire_reqbody_encode(sandlet_buf *b, uint32_t id, const uint8_t *body, size_t len,
                                uint16_t flags)
{
    size_t mark = b->len;
    int rc = 0;
    if ((flags & SANDLET_FRAME_ABORT) && (len || !(flags & SANDLET_FRAME_END)))
        return -EINVAL;
    size_t off = 0;
    do {
        size_t n = len - off < SANDLET_FRAME_MAX ? len - off : SANDLET_FRAME_MAX;
        size_t start = sandlet_frame_begin(b, SANDLET_FRAME_REQBODY, id);
        sandlet_buf_put(b, body + off, n);
        off += n;
        rc = sandlet_frame_finish(b, start, off == len ? flags : 0);
    } while (rc == 0 && off < len);
    return rollback(b, mark, rc);
}

size_t sandlet_wire_response_begin(sandlet_buf *b, uint32_t id, const sandlet_wire_response *rs)
{
    size_t start = sandlet_frame_begin(b, SANDLET_FRAME_RESPONSE, id);
    sandlet_buf_put_u16(b, rs->status);
    sandlet_buf_put_u16(b, rs->nheaders);
    sandlet_buf_put_u64(b, rs->content_length);
    return start;
}

size_t sandlet_wire_body_begin(sandlet_buf *b, uint32_t id)
{
    return sandlet_frame_begin(b, SANDLET_FRAME_BODY, id);
}

bool sandlet_wire_body_valid(size_t len, uint16_t flags)
{
    /* It would carry nothing and end nothing: a worker sending these
     * keeps the acceptor busy without making progress. */
    return len > 0 || (flags & SANDLET_FRAME_END);
}

int sandlet_wire_ready_encode(sandlet_buf *b)
{
    size_t start = sandlet_frame_begin(b, SANDLET_FRAME_READY, 0);
    return rollback(b, start, sandlet_frame_finish(b, start, SANDLET_FRAME_END));
}

int sandlet_wire_skip_encode(sandlet_buf *b, uint32_t id)
{
    size_t start = sandlet_frame_begin(b, SANDLET_FRAME_SKIP, id);
    return rollback(b, start, sandlet_frame_finish(b, start, SANDLET_FRAME_END));
}

int sandlet_wire_fail_encode(sandlet_buf *b, const char *msg)
{
    size_t start = sandlet_frame_begin(b, SANDLET_FRAME_FAIL, 0);
    put_cstr(b, msg);
    return rollback(b, start, sandlet_frame_finish(b, start, SANDLET_FRAME_END));
}

int sandlet_wire_fail_decode(const uint8_t *payload, size_t len, const char **msg)
{
    sandlet_reader r;
    sandlet_reader_init(&r, payload, len);
    *msg = sandlet_read_str(&r, NULL);
    return r.bad ? -EPROTO : 0;
}

int sandlet_wire_init_encode(sandlet_buf *b, const sandlet_wire_init *in)
{
    size_t start = sandlet_frame_begin(b, SANDLET_FRAME_INIT, 0);
    put_cstr(b, in->sandbox);
    sandlet_buf_put_u16(b, in->nservlets);
    for (size_t i = 0; i < in->nservlets; i++) {
        const sandlet_wire_servlet *s = &in->servlets[i];
        put_cstr(b, s->path);
        put_cstr(b, s->library);
        sandlet_buf_put_u16(b, s->nparams);
        for (size_t j = 0; j < s->nparams; j++) {
            put_cstr(b, s->params[j].name);
            put_cstr(b, s->params[j].value);
        }
        sandlet_buf_put_u32(b, s->timeout);
    }
    sandlet_buf_put_u32(b, in->pages_gen);
    sandlet_buf_put_u16(b, in->npages);
    for (size_t i = 0; i < in->npages; i++) {
        put_cstr(b, in->pages[i].path);
        put_cstr(b, in->pages[i].library);
    }
    sandlet_buf_put_u8(b, in->confine);
    sandlet_buf_put_u32(b, in->uid);
    sandlet_buf_put_u32(b, in->gid);
    sandlet_buf_put_u32(b, in->memory_mib);
    sandlet_buf_put_u32(b, in->open_files);
    sandlet_buf_put_u32(b, in->cpu_seconds);
    sandlet_buf_put_u8(b, in->core_dumps);
    sandlet_buf_put_u8(b, in->syscalls);
    sandlet_buf_put_u8(b, (uint8_t)(in->learn | in->file_hints << 1));
    sandlet_buf_put_u16(b, in->nreadable);
    for (size_t i = 0; i < in->nreadable; i++)
        put_cstr(b, in->readable[i]);
    sandlet_buf_put_u16(b, in->nwritable);
    for (size_t i = 0; i < in->nwritable; i++)
        put_cstr(b, in->writable[i]);
    sandlet_buf_put_u64(b, in->max_file_size);
    sandlet_buf_put_u8(b, in->nports);
    for (size_t i = 0; i < in->nports; i++)
        sandlet_buf_put_u16(b, in->ports[i]);
    sandlet_buf_put_u8(b, in->sessions);
    sandlet_buf_put_u32(b, in->session_timeout);
    sandlet_buf_put_u8(b, in->cookie_secure);
    put_cstr(b, in->cookie_name);
    put_cstr(b, in->cookie_path);
    put_cstr(b, in->database ? in->database : "");
    put_cstr(b, in->database_password ? in->database_password : "");
    sandlet_buf_put_u32(b, in->page_timeout);
    put_cstr(b, in->spool ? in->spool : "");
    sandlet_buf_put(b, in->key, SANDLET_WIRE_KEY_LEN);
    return rollback(b, start, sandlet_frame_finish(b, start, SANDLET_FRAME_END));
}

/* An array for n items read from r, each at least min bytes on the wire:
 * a count the rest of the payload cannot hold marks r bad instead of
 * allocating for it. */
static void *init_array(sandlet_reader *r, size_t n, size_t min, size_t size, int *rc)
{
    if (r->bad || n > (r->len - r->pos) / min) {
        r->bad = true;
        return NULL;
    }
    void *p = calloc(n ? n : 1, size);
    if (!p)
        *rc = -ENOMEM;
    return p;
}

void sandlet_wire_init_free(sandlet_wire_init *in)
{
    for (size_t i = 0; in->servlets && i < in->nservlets; i++)
        free(in->servlets[i].params);
    free(in->servlets);
    free(in->pages);
    free(in->readable);
    free(in->writable);
    free(in->ports);
    memset(in, 0, sizeof(*in));
}

static const char **init_strs(sandlet_reader *r, uint16_t *n, int *rc)
{
    *n = sandlet_read_u16(r);
    const char **v = init_array(r, *n, 5, sizeof(*v), rc);
    for (size_t i = 0; v && i < *n; i++)
        v[i] = sandlet_read_str(r, NULL);
    return v;
}

int sandlet_wire_init_decode(const uint8_t *payload, size_t len, sandlet_wire_init *out)
{
    sandlet_reader r;
    int rc = 0;
    memset(out, 0, sizeof(*out));
    sandlet_reader_init(&r, payload, len);
    out->sandbox = sandlet_read_str(&r, NULL);
    uint16_t n = sandlet_read_u16(&r);
    /* A servlet is at least two strs and a count. */
    out->servlets = init_array(&r, n, 12, sizeof(*out->servlets), &rc);
    if (out->servlets)
        out->nservlets = n;
    for (size_t i = 0; out->servlets && i < n && !r.bad && rc == 0; i++) {
        sandlet_wire_servlet *s = &out->servlets[i];
        s->path = sandlet_read_str(&r, NULL);
        s->library = sandlet_read_str(&r, NULL);
        uint16_t np = sandlet_read_u16(&r);
        s->params = init_array(&r, np, 10, sizeof(*s->params), &rc);
        if (s->params)
            s->nparams = np;
        for (size_t j = 0; s->params && j < np; j++) {
            s->params[j].name = sandlet_read_str(&r, NULL);
            s->params[j].value = sandlet_read_str(&r, NULL);
        }
        s->timeout = sandlet_read_u32(&r);
    }
    out->pages_gen = sandlet_read_u32(&r);
    n = sandlet_read_u16(&r);
    if (rc == 0)
        out->pages = init_array(&r, n, 10, sizeof(*out->pages), &rc);
    if (out->pages)
        out->npages = n;
    for (size_t i = 0; out->pages && i < n; i++) {
        out->pages[i].path = sandlet_read_str(&r, NULL);
        out->pages[i].library = sandlet_read_str(&r, NULL);
    }
    out->confine = sandlet_read_u8(&r) != 0;
    out->uid = sandlet_read_u32(&r);
    out->gid = sandlet_read_u32(&r);
    out->memory_mib = sandlet_read_u32(&r);
    out->open_files = sandlet_read_u32(&r);
    out->cpu_seconds = sandlet_read_u32(&r);
    out->core_dumps = sandlet_read_u8(&r) != 0;
    out->syscalls = sandlet_read_u8(&r);
    uint8_t modes = sandlet_read_u8(&r);
    out->learn = (modes & 1) != 0;
    out->file_hints = (modes & 2) != 0;
    if (rc == 0)
        out->readable = init_strs(&r, &out->nreadable, &rc);
    if (rc == 0)
        out->writable = init_strs(&r, &out->nwritable, &rc);
    out->max_file_size = sandlet_read_u64(&r);
    uint8_t np = sandlet_read_u8(&r);
    if (rc == 0)
        out->ports = init_array(&r, np, 2, sizeof(*out->ports), &rc);
    if (out->ports)
        out->nports = np;
    for (size_t i = 0; out->ports && i < np; i++)
        out->ports[i] = sandlet_read_u16(&r);
    out->sessions = sandlet_read_u8(&r);
    out->session_timeout = sandlet_read_u32(&r);
    out->cookie_secure = sandlet_read_u8(&r) != 0;
    out->cookie_name = sandlet_read_str(&r, NULL);
    out->cookie_path = sandlet_read_str(&r, NULL);
    out->database = sandlet_read_str(&r, NULL);
    out->database_password = sandlet_read_str(&r, NULL);
    out->page_timeout = sandlet_read_u32(&r);
    out->spool = sandlet_read_str(&r, NULL);
    /* The key comes last: the rest of the payload, exactly. */
    size_t keylen = 0;
    out->key = sandlet_read_rest(&r, &keylen);
    if (rc == 0 && (r.bad || keylen != SANDLET_WIRE_KEY_LEN))
        rc = -EPROTO;
    if (rc < 0)
        sandlet_wire_init_free(out);
    return rc;
}

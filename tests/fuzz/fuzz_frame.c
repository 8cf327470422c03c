/*
 * fuzz_frame.c - libFuzzer target for the acceptor/worker frame codec
 * (src/sandbox/frame.c), both directions.
 *
 * Decoding: the input is read as a stream of frames, as the acceptor
 * reads a worker's socket and a worker reads the acceptor's: header by
 * header, each payload decoded by its type.  A REQUEST that decodes is
 * then turned into an sl_request exactly as the worker's serve() does and
 * its headers, parameters (query, form, multipart) and cookies are read;
 * a RESPONSE is walked header by header as the acceptor does.  Every
 * decoded message is re-encoded with the encoder and must decode to the
 * same fields.
 *
 * Encoding: the input is also cut into the fields of a REQUEST and of a
 * RESPONSE that the encoder writes; the decoder must accept the result
 * exactly when the fields are valid (non-empty method, target and header
 * names) and give the fields back unchanged.  A mismatch is the class of
 * bug where the acceptor sends what a worker refuses (and dies on).
 *
 * Pure computation, no I/O: tens of thousands of inputs per second.  It
 * must never depend on anything but the input.
 */
#include "config.h"

#include "lib/servlet.h"
#include "sandbox/frame.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HEADERS 64

static void invariant(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "FUZZ INVARIANT violated: %s\n", what);
        abort();
    }
}

typedef struct field {
    const char *s;
    size_t len;
} field;

static bool same(field a, const char *s, size_t len)
{
    return a.len == len && (len == 0 || memcmp(a.s, s, len) == 0);
}

/* Reads a decoded request as the worker does, then through the servlet
 * API, which parses query, form or multipart body and cookies. */
static void worker_view(const sandlet_wire_request *wr)
{
    sl_request rq;
    sandlet_lib_request_init(&rq);
    int rc = sandlet_lib_request_set(&rq, wr->method, wr->target, wr->target_len, wr->peer,
                                     wr->http_major * 10 + wr->http_minor);
    sandlet_reader it = wr->headers;
    uint16_t left = wr->nheaders;
    sandlet_wire_header h;
    unsigned n = 0;
    while (rc == 0 && sandlet_wire_headers_next(&it, &left, &h)) {
        /* The acceptor writes the worker's headers by these lengths. */
        invariant(h.name_len == strlen(h.name) && h.value_len == strlen(h.value),
                  "a header's decoded length is not its string's");
        rc = sandlet_lib_request_add_header(&rq, h.name, h.value);
        n++;
    }
    /* The decoder walked every header already: iteration cannot fail. */
    invariant(rc != 0 || n == wr->nheaders, "header iteration stopped early after a good decode");
    sandlet_lib_request_set_body(&rq, wr->body, wr->body_len);
    if (rc == 0) {
        const char *v;
        size_t vlen;
        for (size_t i = 0; sl_param_at(&rq, i, &v, &vlen); i++)
            invariant(v != NULL && v[vlen] == '\0', "parameter value not NUL-terminated");
        for (size_t i = 0; sl_file_at(&rq, i); i++) {
            const sl_file *f = sl_file_at(&rq, i);
            /* A copy now (multipart.c parses incrementally): as long as
             * the body at most, and there. */
            invariant(f->len <= wr->body_len && (f->data || !f->len),
                      "file data larger than the body");
        }
        (void)sl_cookie(&rq, "SLSESSION");
        (void)sl_header(&rq, "Content-Type");
    }
    sandlet_lib_request_free(&rq);
}

static void check_request_roundtrip(const sandlet_wire_request *wr)
{
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start = sandlet_wire_request_begin(&b, 7, wr);
    sandlet_reader it = wr->headers;
    uint16_t left = wr->nheaders;
    sandlet_wire_header h;
    while (sandlet_wire_headers_next(&it, &left, &h))
        sandlet_wire_header_put(&b, h.name, h.name_len, h.value, h.value_len);
    if (sandlet_wire_request_finish(&b, start, 7, wr->body, wr->body_len) == 0) {
        sandlet_frame_hdr fh;
        invariant(sandlet_frame_header_decode(b.data, b.len, &fh) == 0,
                  "re-encoded REQUEST header does not decode");
        sandlet_wire_request again;
        int rc = sandlet_wire_request_decode(b.data + SANDLET_FRAME_HEADER, fh.length, &again);
        invariant(rc == 0, "re-encoded REQUEST does not decode");
        invariant(again.servlet == wr->servlet && again.nheaders == wr->nheaders &&
                      again.http_major == wr->http_major && again.http_minor == wr->http_minor,
                  "REQUEST integers changed in a round trip");
        invariant(same((field){again.method, again.method_len}, wr->method, wr->method_len) &&
                      same((field){again.target, again.target_len}, wr->target, wr->target_len) &&
                      same((field){again.peer, again.peer_len}, wr->peer, wr->peer_len),
                  "REQUEST strings changed in a round trip");
        invariant(again.body_len == wr->body_len &&
                      (wr->body_len == 0 || memcmp(again.body, wr->body, wr->body_len) == 0),
                  "REQUEST body changed in a round trip");
    }
    sandlet_buf_free(&b);
}

static void check_response(const sandlet_wire_response *r)
{
    invariant(r->status >= 200 && r->status <= 599, "RESPONSE status out of range");
    sandlet_reader it = r->headers;
    uint16_t left = r->nheaders;
    sandlet_wire_header h;
    unsigned n = 0;
    while (sandlet_wire_headers_next(&it, &left, &h)) {
        size_t nl = strlen(h.name), vl = strlen(h.value);
        invariant(nl > 0, "RESPONSE header with an empty name decoded");
        /* What the acceptor asks of a header before it writes it. */
        (void)sandlet_lib_header_valid(h.name, nl, h.value, vl);
        (void)sandlet_lib_header_reserved(h.name, nl);
        n++;
    }
    invariant(n == r->nheaders, "RESPONSE header iteration stopped early after a good decode");
}

/* Decodes the input as a stream of frames. */
static void decode_stream(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        sandlet_frame_hdr h;
        int rc = sandlet_frame_header_decode(data + off, size - off, &h);
        if (rc < 0)
            return;
        invariant(h.length <= SANDLET_FRAME_MAX, "frame length above the maximum accepted");
        invariant(
            !(h.flags & SANDLET_FRAME_ABORT) ||
                (h.type == SANDLET_FRAME_REQBODY && (h.flags & SANDLET_FRAME_END) && h.length == 0),
            "ABORT accepted elsewhere than on an empty last REQBODY");
        uint8_t enc[SANDLET_FRAME_HEADER];
        sandlet_frame_header_encode(enc, &h);
        invariant(memcmp(enc, data + off, SANDLET_FRAME_HEADER) == 0,
                  "frame header changed in a round trip");
        (void)sandlet_frame_type_name(h.type);
        if (size - off - SANDLET_FRAME_HEADER < h.length)
            return;
        const uint8_t *payload = data + off + SANDLET_FRAME_HEADER;
        if (h.type == SANDLET_FRAME_REQUEST) {
            sandlet_wire_request wr;
            if (sandlet_wire_request_decode(payload, h.length, &wr) == 0) {
                invariant(wr.method_len > 0 && wr.target_len > 0, "empty method or target");
                invariant(wr.body + wr.body_len <= payload + h.length,
                          "REQUEST body past the payload");
                worker_view(&wr);
                check_request_roundtrip(&wr);
            }
        } else if (h.type == SANDLET_FRAME_RESPONSE) {
            sandlet_wire_response r;
            if (sandlet_wire_response_decode(payload, h.length, &r) == 0) {
                invariant(r.body + r.body_len <= payload + h.length,
                          "RESPONSE body past the payload");
                check_response(&r);
            }
        } else if (h.type == SANDLET_FRAME_FAIL) {
            sandlet_reader r;
            sandlet_reader_init(&r, payload, h.length);
            size_t len;
            const char *msg = sandlet_read_str(&r, &len);
            invariant(r.bad || strlen(msg) == len, "FAIL message length disagrees with its NUL");
        } else if (h.type == SANDLET_FRAME_INIT) {
            /* A worker's view of its INIT: what decodes encodes to the
             * same length (flags may read back as 1 from any non-zero
             * byte), and that encoding is a fixed point. */
            sandlet_wire_init in, again;
            if (sandlet_wire_init_decode(payload, h.length, &in) == 0) {
                sandlet_buf b, b2;
                sandlet_buf_init(&b, 0);
                sandlet_buf_init(&b2, 0);
                invariant(sandlet_wire_init_encode(&b, &in) == 0 &&
                              b.len == SANDLET_FRAME_HEADER + h.length,
                          "INIT changed length in a round trip");
                invariant(sandlet_wire_init_decode(b.data + SANDLET_FRAME_HEADER,
                                                   b.len - SANDLET_FRAME_HEADER, &again) == 0,
                          "re-encoded INIT does not decode");
                invariant(sandlet_wire_init_encode(&b2, &again) == 0 && b2.len == b.len &&
                              memcmp(b.data, b2.data, b.len) == 0,
                          "INIT changed in a second round trip");
                sandlet_wire_init_free(&again);
                sandlet_buf_free(&b2);
                sandlet_buf_free(&b);
                sandlet_wire_init_free(&in);
            }
        }
        off += SANDLET_FRAME_HEADER + h.length;
    }
}

/* Cuts the input into fields at the byte 0x00 (a separator the fields
 * themselves may then not hold; embedded NULs are tried separately by the
 * decoder half). */
static size_t cut(const uint8_t *data, size_t size, field *f, size_t max)
{
    size_t n = 0, from = 0;
    for (size_t i = 0; i <= size && n < max; i++) {
        if (i == size || data[i] == 0) {
            f[n].s = (const char *)data + from;
            f[n].len = i - from;
            n++;
            from = i + 1;
        }
    }
    return n;
}

/* Encoder half: the fields the acceptor would put in a REQUEST. */
static void encode_request(const uint8_t *data, size_t size)
{
    field f[3 + 2 * MAX_HEADERS + 1];
    size_t n = cut(data, size, f, sizeof(f) / sizeof(f[0]));
    if (n < 3)
        return;
    size_t nh = (n - 3) / 2;
    bool valid = f[0].len > 0 && f[1].len > 0;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    sandlet_wire_request rq = {
        .servlet = (uint16_t)size,
        .http_major = 1,
        .http_minor = (uint8_t)(size & 1),
        .nheaders = (uint16_t)nh,
        .method = f[0].s,
        .method_len = f[0].len,
        .target = f[1].s,
        .target_len = f[1].len,
        .peer = f[2].s,
        .peer_len = f[2].len,
    };
    size_t start = sandlet_wire_request_begin(&b, 1, &rq);
    for (size_t i = 0; i < nh; i++) {
        valid = valid && f[3 + 2 * i].len > 0;
        sandlet_wire_header_put(&b, f[3 + 2 * i].s, f[3 + 2 * i].len, f[4 + 2 * i].s,
                                f[4 + 2 * i].len);
    }
    const char *body = n > 3 + 2 * nh ? f[3 + 2 * nh].s : "";
    size_t body_len = n > 3 + 2 * nh ? (size_t)((const char *)data + size - body) : 0;
    invariant(sandlet_wire_request_finish(&b, start, 1, (const uint8_t *)body, body_len) == 0,
              "small REQUEST refused");
    sandlet_wire_request wr;
    int rc = sandlet_wire_request_decode(b.data + SANDLET_FRAME_HEADER,
                                         b.len - SANDLET_FRAME_HEADER, &wr);
    invariant((rc == 0) == valid, "decoder disagrees with the encoder on a REQUEST's validity");
    if (rc == 0) {
        invariant(same(f[0], wr.method, wr.method_len) && same(f[1], wr.target, wr.target_len) &&
                      same(f[2], wr.peer, wr.peer_len) && wr.nheaders == nh,
                  "encoded REQUEST fields changed");
        sandlet_reader it = wr.headers;
        uint16_t left = wr.nheaders;
        sandlet_wire_header h;
        for (size_t i = 0; sandlet_wire_headers_next(&it, &left, &h); i++)
            invariant(same(f[3 + 2 * i], h.name, strlen(h.name)) &&
                          same(f[4 + 2 * i], h.value, strlen(h.value)),
                      "encoded REQUEST header changed");
        invariant(wr.body_len == body_len &&
                      (body_len == 0 || memcmp(wr.body, body, body_len) == 0),
                  "encoded REQUEST body changed");
    }
    sandlet_buf_free(&b);
}

/* Encoder half: a worker's RESPONSE, as libsandlet's sink writes it. */
static void encode_response(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    uint16_t status = (uint16_t)(data[0] | data[1] << 8);
    field f[2 * MAX_HEADERS];
    size_t n = cut(data + 2, size - 2, f, sizeof(f) / sizeof(f[0]));
    size_t nh = n / 2;
    /* Well-formed frames with a status outside 200-599 decode, but are
     * reported with -ERANGE so that the acceptor answers 502. */
    bool valid = true;
    bool final = status >= 200 && status <= 599;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    sandlet_wire_response rs = {
        .status = status, .nheaders = (uint16_t)nh, .content_length = SANDLET_LENGTH_UNKNOWN};
    size_t start = sandlet_wire_response_begin(&b, 1, &rs);
    for (size_t i = 0; i < nh; i++) {
        valid = valid && f[2 * i].len > 0;
        sandlet_wire_header_put(&b, f[2 * i].s, f[2 * i].len, f[2 * i + 1].s, f[2 * i + 1].len);
    }
    invariant(sandlet_frame_finish(&b, start, 0) == 0, "small RESPONSE refused");
    sandlet_wire_response r;
    int rc = sandlet_wire_response_decode(b.data + SANDLET_FRAME_HEADER,
                                          b.len - SANDLET_FRAME_HEADER, &r);
    if (valid && !final)
        invariant(rc == -ERANGE, "a non-final status was not reported as such");
    else
        invariant((rc == 0) == valid,
                  "decoder disagrees with the encoder on a RESPONSE's validity");
    if (rc == 0) {
        invariant(r.status == status && r.nheaders == nh &&
                      r.content_length == SANDLET_LENGTH_UNKNOWN && r.body_len == 0,
                  "encoded RESPONSE fields changed");
        check_response(&r);
    }
    sandlet_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_stream(data, size);
    encode_request(data, size);
    encode_response(data, size);
    return 0;
}

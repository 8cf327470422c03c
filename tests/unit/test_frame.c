/* test_frame.c - unit tests of the acceptor/worker frame codec (src/sandbox/frame.c):
 * headers, payload buffers, readers, REQUEST/RESPONSE encode and decode, and malformed input. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sandbox/frame.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MIB          ((size_t)1 << 20)

/* ---- helpers ---------------------------------------------------------- */

typedef struct hpair {
    const char *name;
    const char *value;
} hpair;

typedef struct req_spec {
    uint16_t servlet;
    uint8_t major, minor;
    const char *method;
    const char *target;
    const char *peer;
    const hpair *headers;
    uint16_t nheaders;
} req_spec;

typedef struct resp_spec {
    uint16_t status;
    uint64_t content_length;
    const hpair *headers;
    uint16_t nheaders;
} resp_spec;

static size_t str_size(const char *s)
{
    return 4 + strlen(s) + 1;
}

static size_t request_head_size(const req_spec *s)
{
    size_t n = 2 + 1 + 1 + 2 + str_size(s->method) + str_size(s->target) + str_size(s->peer);
    for (uint16_t i = 0; i < s->nheaders; i++)
        n += str_size(s->headers[i].name) + str_size(s->headers[i].value);
    return n;
}

static size_t response_head_size(const resp_spec *s)
{
    size_t n = 2 + 2 + 8;
    for (uint16_t i = 0; i < s->nheaders; i++)
        n += str_size(s->headers[i].name) + str_size(s->headers[i].value);
    return n;
}

static void put_cstr(sandlet_buf *b, const char *s)
{
    sandlet_buf_put_str(b, s, strlen(s));
}

/* Every frame below is written by the codec itself (frame.c): the tests
 * carry no encoder of their own, only raw byte builders for input the
 * codec would never write. */
static void put_headers(sandlet_buf *b, const hpair *h, uint16_t n)
{
    for (uint16_t i = 0; i < n; i++)
        sandlet_wire_header_put(b, h[i].name, strlen(h[i].name), h[i].value, strlen(h[i].value));
}

static size_t begin_request(sandlet_buf *b, uint32_t id, const req_spec *s)
{
    sandlet_wire_request rq = {
        .servlet = s->servlet,
        .http_major = s->major,
        .http_minor = s->minor,
        .nheaders = s->nheaders,
        .method = s->method,
        .method_len = strlen(s->method),
        .target = s->target,
        .target_len = strlen(s->target),
        .peer = s->peer,
        .peer_len = strlen(s->peer),
    };
    size_t start = sandlet_wire_request_begin(b, id, &rq);
    put_headers(b, s->headers, s->nheaders);
    return start;
}

static size_t begin_response(sandlet_buf *b, uint32_t id, const resp_spec *s)
{
    sandlet_wire_response rs = {
        .status = s->status, .nheaders = s->nheaders, .content_length = s->content_length};
    size_t start = sandlet_wire_response_begin(b, id, &rs);
    put_headers(b, s->headers, s->nheaders);
    return start;
}

/* The codec's payload of a message, without its frame header. */
static void put_payload_of(sandlet_buf *b, size_t (*begin)(sandlet_buf *, uint32_t, const void *),
                           const void *spec)
{
    sandlet_buf t;
    sandlet_buf_init(&t, 0);
    begin(&t, 0, spec);
    assert_int_equal(t.error, 0);
    sandlet_buf_put(b, t.data + SANDLET_FRAME_HEADER, t.len - SANDLET_FRAME_HEADER);
    sandlet_buf_free(&t);
}

static size_t begin_request_v(sandlet_buf *b, uint32_t id, const void *s)
{
    return begin_request(b, id, s);
}

static size_t begin_response_v(sandlet_buf *b, uint32_t id, const void *s)
{
    return begin_response(b, id, s);
}

static void put_request_head(sandlet_buf *b, const req_spec *s)
{
    put_payload_of(b, begin_request_v, s);
}

static void put_response_head(sandlet_buf *b, const resp_spec *s)
{
    put_payload_of(b, begin_response_v, s);
}

/* Appends a whole REQUEST frame to b; *start receives its offset. */
static int build_request(sandlet_buf *b, size_t *start, uint32_t id, uint16_t flags,
                         const req_spec *s, const void *body, size_t body_len)
{
    *start = begin_request(b, id, s);
    sandlet_buf_put(b, body, body_len);
    return sandlet_frame_finish(b, *start, flags);
}

static int build_response(sandlet_buf *b, size_t *start, uint32_t id, uint16_t flags,
                          const resp_spec *s, const void *body, size_t body_len)
{
    *start = begin_response(b, id, s);
    sandlet_buf_put(b, body, body_len);
    return sandlet_frame_finish(b, *start, flags);
}

/* Exact-size heap copy, so that valgrind/ASan catch any read past its end. */
static uint8_t *dup_exact(const uint8_t *p, size_t len)
{
    /* glibc returns a zero-size block for malloc(0): any read from it is reported. */
    uint8_t *q = malloc(len);
    assert_non_null(q);
    if (len)
        memcpy(q, p, len);
    return q;
}

static void fill_pattern(uint8_t *p, size_t len, uint32_t seed)
{
    uint32_t x = seed;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
        if (i % 97 == 0)
            p[i] = 0; /* make sure NULs are scattered through the body */
    }
}

static void expect_headers(sandlet_reader r, uint16_t n, const hpair *want, uint16_t nwant)
{
    uint16_t left = n;
    sandlet_wire_header h;
    assert_int_equal(n, nwant);
    for (uint16_t i = 0; i < nwant; i++) {
        assert_true(sandlet_wire_headers_next(&r, &left, &h));
        assert_string_equal(h.name, want[i].name);
        assert_string_equal(h.value, want[i].value);
        assert_int_equal(h.name_len, strlen(want[i].name));
        assert_int_equal(h.value_len, strlen(want[i].value));
        assert_int_equal(left, nwant - i - 1);
    }
    assert_false(sandlet_wire_headers_next(&r, &left, &h));
    assert_int_equal(left, 0);
    assert_false(r.bad);
}

/* Decodes the frame header at off in a stream and checks it. */
static const uint8_t *expect_frame(const uint8_t *stream, size_t stream_len, size_t *off,
                                   uint8_t type, uint32_t id, uint16_t flags, size_t *payload_len)
{
    sandlet_frame_hdr h;
    assert_true(*off <= stream_len);
    assert_int_equal(sandlet_frame_header_decode(stream + *off, stream_len - *off, &h), 0);
    assert_int_equal(h.version, SANDLET_FRAME_VERSION);
    assert_int_equal(h.type, type);
    assert_int_equal(h.id, id);
    assert_int_equal(h.flags, flags);
    assert_true(h.length <= SANDLET_FRAME_MAX);
    assert_true(stream_len - *off - SANDLET_FRAME_HEADER >= h.length);
    const uint8_t *payload = stream + *off + SANDLET_FRAME_HEADER;
    *payload_len = h.length;
    *off += SANDLET_FRAME_HEADER + h.length;
    return payload;
}

static const hpair sample_headers[] = {
    {"Host", "example.org"},
    {"Accept", "*/*"},
    {"X-Empty", ""},
    {"Content-Type", "application/octet-stream"},
};

static const req_spec sample_req = {
    .servlet = 3,
    .major = 1,
    .minor = 1,
    .method = "POST",
    .target = "/app/upload?x=1",
    .peer = "192.0.2.7:51234",
    .headers = sample_headers,
    .nheaders = ARRAY_LEN(sample_headers),
};

static const resp_spec sample_resp = {
    .status = 201,
    .content_length = 11,
    .headers = sample_headers,
    .nheaders = ARRAY_LEN(sample_headers),
};

/* ---- frame headers ---------------------------------------------------- */

static void test_header_known_bytes(void **state)
{
    (void)state;
    static const uint8_t want[SANDLET_FRAME_HEADER] = {0x01, 0x06, 0x01, 0x00, 0xEF, 0xBE,
                                                       0xAD, 0xDE, 0x00, 0x00, 0x10, 0x00};
    sandlet_frame_hdr h = {SANDLET_FRAME_VERSION, SANDLET_FRAME_RESPONSE, SANDLET_FRAME_END,
                           0xDEADBEEFu, SANDLET_FRAME_MAX};
    uint8_t buf[SANDLET_FRAME_HEADER];
    memset(buf, 0xAA, sizeof(buf));
    sandlet_frame_header_encode(buf, &h);
    assert_memory_equal(buf, want, sizeof(want));

    sandlet_frame_hdr out;
    memset(&out, 0x55, sizeof(out));
    assert_int_equal(sandlet_frame_header_decode(want, sizeof(want), &out), 0);
    assert_int_equal(out.version, 1);
    assert_int_equal(out.type, SANDLET_FRAME_RESPONSE);
    assert_int_equal(out.flags, SANDLET_FRAME_END);
    assert_int_equal(out.id, 0xDEADBEEFu);
    assert_int_equal(out.length, SANDLET_FRAME_MAX);

    /* A different byte order of id and length, to rule out symmetric mistakes. */
    static const uint8_t v2[SANDLET_FRAME_HEADER] = {0x01, 0x04, 0x00, 0x00, 0x01, 0x02,
                                                     0x03, 0x04, 0x05, 0x06, 0x00, 0x00};
    assert_int_equal(sandlet_frame_header_decode(v2, sizeof(v2), &out), 0);
    assert_int_equal(out.type, SANDLET_FRAME_REQUEST);
    assert_int_equal(out.flags, 0);
    assert_int_equal(out.id, 0x04030201u);
    assert_int_equal(out.length, 0x0605u);
}

static void test_header_roundtrip(void **state)
{
    (void)state;
    static const uint16_t flags[] = {0, SANDLET_FRAME_END};
    static const uint32_t ids[] = {0, 1, 0x80, 0x12345678u, 0x80000000u, UINT32_MAX};
    static const uint32_t lengths[] = {
        0, 1, 255, 256, 65535, 65536, SANDLET_FRAME_MAX - 1, SANDLET_FRAME_MAX};
    unsigned count = 0;

    for (unsigned type = SANDLET_FRAME_INIT; type <= SANDLET_FRAME_LAST; type++)
        for (size_t f = 0; f < ARRAY_LEN(flags); f++)
            for (size_t i = 0; i < ARRAY_LEN(ids); i++)
                for (size_t l = 0; l < ARRAY_LEN(lengths); l++) {
                    sandlet_frame_hdr h = {SANDLET_FRAME_VERSION, (uint8_t)type, flags[f], ids[i],
                                           lengths[l]};
                    uint8_t raw[SANDLET_FRAME_HEADER];
                    sandlet_frame_header_encode(raw, &h);
                    assert_int_equal(raw[0], SANDLET_FRAME_VERSION);
                    assert_int_equal(raw[1], type);
                    assert_int_equal(raw[2], flags[f] & 0xFF);
                    assert_int_equal(raw[3], flags[f] >> 8);
                    for (int k = 0; k < 4; k++) {
                        assert_int_equal(raw[4 + k], (ids[i] >> (8 * k)) & 0xFF);
                        assert_int_equal(raw[8 + k], (lengths[l] >> (8 * k)) & 0xFF);
                    }
                    /* Decode from an exact-size copy. */
                    uint8_t *copy = dup_exact(raw, sizeof(raw));
                    sandlet_frame_hdr out;
                    memset(&out, 0xCC, sizeof(out));
                    assert_int_equal(sandlet_frame_header_decode(copy, sizeof(raw), &out), 0);
                    free(copy);
                    assert_int_equal(out.version, SANDLET_FRAME_VERSION);
                    assert_int_equal(out.type, type);
                    assert_int_equal(out.flags, flags[f]);
                    assert_int_equal(out.id, ids[i]);
                    assert_int_equal(out.length, lengths[l]);
                    count++;
                }
    assert_int_equal(count, SANDLET_FRAME_LAST * 2 * 6 * 8);
}

static void test_header_with_trailing_bytes(void **state)
{
    (void)state;
    /* More bytes than a header (the start of the payload) must not matter. */
    uint8_t raw[SANDLET_FRAME_HEADER + 5];
    sandlet_frame_hdr h = {SANDLET_FRAME_VERSION, SANDLET_FRAME_BODY, 0, 42, 5};
    sandlet_frame_header_encode(raw, &h);
    memcpy(raw + SANDLET_FRAME_HEADER, "\xFF\xFF\xFF\xFF\xFF", 5);
    sandlet_frame_hdr out;
    assert_int_equal(sandlet_frame_header_decode(raw, sizeof(raw), &out), 0);
    assert_int_equal(out.type, SANDLET_FRAME_BODY);
    assert_int_equal(out.id, 42);
    assert_int_equal(out.length, 5);
}

static void test_header_short(void **state)
{
    (void)state;
    uint8_t raw[SANDLET_FRAME_HEADER];
    sandlet_frame_hdr h = {SANDLET_FRAME_VERSION, SANDLET_FRAME_READY, 0, 0, 0};
    sandlet_frame_header_encode(raw, &h);
    for (size_t len = 0; len < SANDLET_FRAME_HEADER; len++) {
        uint8_t *copy = dup_exact(raw, len);
        sandlet_frame_hdr out;
        assert_int_equal(sandlet_frame_header_decode(copy, len, &out), -EAGAIN);
        free(copy);
    }
    /* Even garbage is only "not yet" while short. */
    static const uint8_t junk[11] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                     0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    for (size_t len = 0; len < sizeof(junk); len++) {
        uint8_t *copy = dup_exact(junk, len);
        sandlet_frame_hdr out;
        assert_int_equal(sandlet_frame_header_decode(copy, len, &out), -EAGAIN);
        free(copy);
    }
}

static void test_header_bad_version(void **state)
{
    (void)state;
    static const uint8_t versions[] = {0, 2, 3, 0x80, 0xFF};
    for (size_t i = 0; i < ARRAY_LEN(versions); i++) {
        sandlet_frame_hdr h = {versions[i], SANDLET_FRAME_REQUEST, 0, 1, 10};
        uint8_t raw[SANDLET_FRAME_HEADER];
        sandlet_frame_header_encode(raw, &h);
        sandlet_frame_hdr out;
        assert_int_equal(sandlet_frame_header_decode(raw, sizeof(raw), &out), -EPROTO);
    }
}

static void test_header_bad_type(void **state)
{
    (void)state;
    static const uint8_t types[] = {0, 9, 10, 0x7F, 0x80, 0xFF};
    for (size_t i = 0; i < ARRAY_LEN(types); i++) {
        sandlet_frame_hdr h = {SANDLET_FRAME_VERSION, types[i], 0, 1, 10};
        uint8_t raw[SANDLET_FRAME_HEADER];
        sandlet_frame_header_encode(raw, &h);
        sandlet_frame_hdr out;
        assert_int_equal(sandlet_frame_header_decode(raw, sizeof(raw), &out), -EPROTO);
    }
}

static void test_header_bad_flags(void **state)
{
    (void)state;
    for (int bit = 1; bit < 16; bit++) {
        uint16_t flags[2] = {(uint16_t)(1u << bit), (uint16_t)((1u << bit) | SANDLET_FRAME_END)};
        for (int k = 0; k < 2; k++) {
            sandlet_frame_hdr h = {SANDLET_FRAME_VERSION, SANDLET_FRAME_BODY, flags[k], 1, 10};
            uint8_t raw[SANDLET_FRAME_HEADER];
            sandlet_frame_header_encode(raw, &h);
            sandlet_frame_hdr out;
            assert_int_equal(sandlet_frame_header_decode(raw, sizeof(raw), &out), -EPROTO);
        }
    }
    sandlet_frame_hdr h = {SANDLET_FRAME_VERSION, SANDLET_FRAME_BODY, 0xFFFF, 1, 10};
    uint8_t raw[SANDLET_FRAME_HEADER];
    sandlet_frame_header_encode(raw, &h);
    sandlet_frame_hdr out;
    assert_int_equal(sandlet_frame_header_decode(raw, sizeof(raw), &out), -EPROTO);
}

static void test_header_too_long(void **state)
{
    (void)state;
    static const uint32_t lengths[] = {SANDLET_FRAME_MAX + 1, SANDLET_FRAME_MAX * 2, 0x7FFFFFFFu,
                                       0xFFFFFFFFu};
    for (size_t i = 0; i < ARRAY_LEN(lengths); i++) {
        for (unsigned type = SANDLET_FRAME_INIT; type <= SANDLET_FRAME_LAST; type++) {
            sandlet_frame_hdr h = {SANDLET_FRAME_VERSION, (uint8_t)type, SANDLET_FRAME_END, 7,
                                   lengths[i]};
            uint8_t raw[SANDLET_FRAME_HEADER];
            sandlet_frame_header_encode(raw, &h);
            sandlet_frame_hdr out;
            assert_int_equal(sandlet_frame_header_decode(raw, sizeof(raw), &out), -EMSGSIZE);
        }
    }
    /* The "4 GiB length prefix", spelt out as bytes. */
    static const uint8_t raw4g[SANDLET_FRAME_HEADER] = {0x01, 0x04, 0x00, 0x00, 0x01, 0x00,
                                                        0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF};
    uint8_t *copy = dup_exact(raw4g, sizeof(raw4g));
    sandlet_frame_hdr out;
    assert_int_equal(sandlet_frame_header_decode(copy, sizeof(raw4g), &out), -EMSGSIZE);
    free(copy);
}

static void test_type_name(void **state)
{
    (void)state;
    assert_string_equal(sandlet_frame_type_name(SANDLET_FRAME_INIT), "INIT");
    assert_string_equal(sandlet_frame_type_name(SANDLET_FRAME_READY), "READY");
    assert_string_equal(sandlet_frame_type_name(SANDLET_FRAME_FAIL), "FAIL");
    assert_string_equal(sandlet_frame_type_name(SANDLET_FRAME_REQUEST), "REQUEST");
    assert_string_equal(sandlet_frame_type_name(SANDLET_FRAME_REQBODY), "REQBODY");
    assert_string_equal(sandlet_frame_type_name(SANDLET_FRAME_RESPONSE), "RESPONSE");
    assert_string_equal(sandlet_frame_type_name(SANDLET_FRAME_BODY), "BODY");
    assert_string_equal(sandlet_frame_type_name(SANDLET_FRAME_SKIP), "SKIP");
    assert_string_equal(sandlet_frame_type_name(0), "UNKNOWN");
    assert_string_equal(sandlet_frame_type_name(9), "UNKNOWN");
    assert_string_equal(sandlet_frame_type_name(255), "UNKNOWN");
    assert_string_equal(sandlet_frame_type_name(256 + SANDLET_FRAME_INIT), "UNKNOWN");
    assert_string_equal(sandlet_frame_type_name(0xFFFFFFFFu), "UNKNOWN");
}

/* ---- sandlet_buf ------------------------------------------------------ */

static void test_buf_put_integers(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.error, 0);
    sandlet_buf_put_u8(&b, 0xA1);
    sandlet_buf_put_u16(&b, 0xB2C3);
    sandlet_buf_put_u32(&b, 0xD4E5F607u);
    sandlet_buf_put_u64(&b, 0x0102030405060708ull);
    sandlet_buf_put_str(&b, "hi", 2);
    sandlet_buf_put_str(&b, "", 0);
    sandlet_buf_put(&b, "xyz", 0); /* no-op */
    static const uint8_t want[] = {0xA1, 0xC3, 0xB2, 0x07, 0xF6, 0xE5, 0xD4, 0x08, 0x07,
                                   0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x02, 0x00, 0x00,
                                   0x00, 'h',  'i',  0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    assert_int_equal(b.error, 0);
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));
    assert_true(b.cap >= b.len);
    sandlet_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.error, 0);
}

static void test_buf_limit(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 10);
    assert_int_equal(b.limit, 10);
    sandlet_buf_put(&b, "01234567", 8);
    assert_int_equal(b.error, 0);
    assert_int_equal(b.len, 8);

    /* 8 + 4 > 10: rejected, nothing appended, error sticky. */
    sandlet_buf_put_u32(&b, 0x11223344u);
    assert_int_equal(b.error, -EMSGSIZE);
    assert_int_equal(b.len, 8);
    assert_memory_equal(b.data, "01234567", 8);

    /* A byte would now fit, but the error is sticky. */
    sandlet_buf_put_u8(&b, 'x');
    assert_int_equal(b.len, 8);
    assert_int_equal(b.error, -EMSGSIZE);
    assert_int_equal(sandlet_buf_reserve(&b, 1), -EMSGSIZE);
    assert_int_equal(sandlet_buf_reserve(&b, 0), -EMSGSIZE);
    sandlet_buf_put_str(&b, "", 0);
    assert_int_equal(b.len, 8);
    assert_int_equal(b.error, -EMSGSIZE);

    /* reset clears both the contents and the error; the limit stays. */
    sandlet_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.error, 0);
    assert_int_equal(b.limit, 10);
    sandlet_buf_put(&b, "abcdefghij", 10); /* exactly the limit */
    assert_int_equal(b.error, 0);
    assert_int_equal(b.len, 10);
    assert_memory_equal(b.data, "abcdefghij", 10);
    assert_int_equal(sandlet_buf_reserve(&b, 0), 0);
    sandlet_buf_put_u8(&b, 0);
    assert_int_equal(b.error, -EMSGSIZE);
    assert_int_equal(b.len, 10);
    sandlet_buf_free(&b);
    assert_null(b.data);
}

static void test_buf_limit_reserve(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 1000);
    assert_int_equal(sandlet_buf_reserve(&b, 1000), 0);
    assert_true(b.cap >= 1000);
    assert_int_equal(b.len, 0);
    assert_int_equal(sandlet_buf_reserve(&b, 1001), -EMSGSIZE);
    assert_int_equal(b.error, -EMSGSIZE);
    sandlet_buf_reset(&b);
    assert_int_equal(sandlet_buf_reserve(&b, SIZE_MAX), -EMSGSIZE);
    sandlet_buf_free(&b);

    /* Without a limit only an overflowing size is refused. */
    sandlet_buf_init(&b, 0);
    sandlet_buf_put_u8(&b, 1);
    assert_int_equal(sandlet_buf_reserve(&b, SIZE_MAX), -EMSGSIZE);
    assert_int_equal(b.error, -EMSGSIZE);
    assert_int_equal(b.len, 1);
    sandlet_buf_free(&b);
}

static void test_buf_put_str_too_long(void **state)
{
    (void)state;
#if SIZE_MAX > UINT32_MAX
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    /* The length is refused before the bytes are looked at. */
    sandlet_buf_put_str(&b, "x", (size_t)UINT32_MAX + 1);
    assert_int_equal(b.error, -EMSGSIZE);
    assert_int_equal(b.len, 0);
    sandlet_buf_put_u8(&b, 1);
    assert_int_equal(b.len, 0);
    sandlet_buf_free(&b);
#else
    skip();
#endif
}

static void test_buf_consume_reset(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    sandlet_buf_put(&b, "0123456789", 10);
    sandlet_buf_consume(&b, 0);
    assert_int_equal(b.len, 10);
    assert_memory_equal(b.data, "0123456789", 10);
    sandlet_buf_consume(&b, 3);
    assert_int_equal(b.len, 7);
    assert_memory_equal(b.data, "3456789", 7);
    sandlet_buf_consume(&b, 6);
    assert_int_equal(b.len, 1);
    assert_memory_equal(b.data, "9", 1);
    sandlet_buf_put(&b, "ab", 2);
    assert_int_equal(b.len, 3);
    assert_memory_equal(b.data, "9ab", 3);
    sandlet_buf_consume(&b, 3); /* all */
    assert_int_equal(b.len, 0);
    sandlet_buf_put(&b, "xy", 2);
    sandlet_buf_consume(&b, 100); /* more than all */
    assert_int_equal(b.len, 0);
    assert_int_equal(b.error, 0);

    /* A large consume moves overlapping bytes correctly. */
    uint8_t big[5000];
    fill_pattern(big, sizeof(big), 7);
    sandlet_buf_put(&b, big, sizeof(big));
    sandlet_buf_consume(&b, 1234);
    assert_int_equal(b.len, sizeof(big) - 1234);
    assert_memory_equal(b.data, big + 1234, sizeof(big) - 1234);

    size_t cap = b.cap;
    sandlet_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.error, 0);
    assert_int_equal(b.cap, cap);
    assert_non_null(b.data);
    sandlet_buf_put_u16(&b, 0x0102);
    assert_int_equal(b.len, 2);
    assert_int_equal(b.data[0], 0x02);
    assert_int_equal(b.data[1], 0x01);
    sandlet_buf_free(&b);

    /* Consume on a never-used buffer. */
    sandlet_buf_init(&b, 0);
    sandlet_buf_consume(&b, 0);
    sandlet_buf_consume(&b, 5);
    assert_int_equal(b.len, 0);
    sandlet_buf_free(&b);
}

/* Buffers that held a client's data are cleared as far as asked, never
 * past their capacity, and keep their contents when they grow. */
static void test_buf_wipe(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    b.wipe = true;
    sandlet_buf_put(&b, "secretsecret", 12);
    sandlet_buf_wipe(&b, 2, 6);
    assert_memory_equal(b.data, "se\0\0\0\0secret", 12);
    sandlet_buf_wipe(&b, 0, SIZE_MAX); /* capped at the capacity */
    for (size_t i = 0; i < b.cap; i++)
        assert_int_equal(b.data[i], 0);
    sandlet_buf_reset(&b);
    sandlet_buf_put(&b, "abc", 3);
    size_t cap = b.cap;
    uint8_t big[4096];
    memset(big, 'x', sizeof(big));
    sandlet_buf_put(&b, big, sizeof(big));
    assert_true(b.cap > cap);
    assert_int_equal(b.len, 3 + sizeof(big));
    assert_memory_equal(b.data, "abcxxx", 6);
    assert_true(b.wipe);
    sandlet_buf_free(&b);
    assert_true(b.wipe);
    assert_null(b.data);
}

static void test_buf_growth(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    uint8_t chunk[777];
    for (int i = 0; i < 3000; i++) {
        memset(chunk, (uint8_t)i, sizeof(chunk));
        sandlet_buf_put(&b, chunk, sizeof(chunk));
    }
    assert_int_equal(b.error, 0);
    assert_int_equal(b.len, 3000 * sizeof(chunk));
    for (int i = 0; i < 3000; i++) {
        memset(chunk, (uint8_t)i, sizeof(chunk));
        assert_memory_equal(b.data + (size_t)i * sizeof(chunk), chunk, sizeof(chunk));
    }
    sandlet_buf_free(&b);
}

/* ---- frames in a buffer ----------------------------------------------- */

static void test_frame_begin_finish(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);

    size_t s1 = sandlet_frame_begin(&b, SANDLET_FRAME_READY, 0);
    assert_int_equal(s1, 0);
    assert_int_equal(sandlet_frame_finish(&b, s1, SANDLET_FRAME_END), 0);
    assert_int_equal(b.len, SANDLET_FRAME_HEADER);

    size_t s2 = sandlet_frame_begin(&b, SANDLET_FRAME_FAIL, 0);
    assert_int_equal(s2, SANDLET_FRAME_HEADER);
    put_cstr(&b, "dlopen failed");
    assert_int_equal(sandlet_frame_finish(&b, s2, SANDLET_FRAME_END), 0);

    size_t s3 = sandlet_frame_begin(&b, SANDLET_FRAME_BODY, 0x01020304u);
    sandlet_buf_put(&b, "\0\0\0", 3);
    assert_int_equal(sandlet_frame_finish(&b, s3, 0), 0);

    static const uint8_t want[] = {
        /* READY */
        0x01, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        /* FAIL, payload 4 + 13 + 1 = 18 */
        0x01, 0x03, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x00, 0x0D, 0x00, 0x00,
        0x00, 'd', 'l', 'o', 'p', 'e', 'n', ' ', 'f', 'a', 'i', 'l', 'e', 'd', 0x00,
        /* BODY, no END */
        0x01, 0x07, 0x00, 0x00, 0x04, 0x03, 0x02, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));

    /* Read the stream back. */
    size_t off = 0, plen;
    const uint8_t *p;
    p = expect_frame(b.data, b.len, &off, SANDLET_FRAME_READY, 0, SANDLET_FRAME_END, &plen);
    assert_int_equal(plen, 0);
    p = expect_frame(b.data, b.len, &off, SANDLET_FRAME_FAIL, 0, SANDLET_FRAME_END, &plen);
    sandlet_reader r;
    sandlet_reader_init(&r, p, plen);
    size_t mlen;
    const char *msg = sandlet_read_str(&r, &mlen);
    assert_false(r.bad);
    assert_int_equal(mlen, 13);
    assert_string_equal(msg, "dlopen failed");
    assert_int_equal(r.pos, r.len);
    p = expect_frame(b.data, b.len, &off, SANDLET_FRAME_BODY, 0x01020304u, 0, &plen);
    assert_int_equal(plen, 3);
    assert_memory_equal(p, "\0\0\0", 3);
    assert_int_equal(off, b.len);
    sandlet_buf_free(&b);
}

static const uint8_t sample_key[SANDLET_WIRE_KEY_LEN] = {
    1, 2,    3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
    0, 0xFF, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
};

static sandlet_wire_init sample_init(void)
{
    static sandlet_wire_header params[] = {{.name = "greeting", .value = "hi"},
                                           {.name = "empty", .value = ""}};
    static sandlet_wire_servlet servlets[] = {
        {"/hello", "/usr/lib/sandlet/hello.so", params, 2, 30000},
        {"/x", "x.so", NULL, 0, 0},
    };
    static const char *readable[] = {"/etc/ssl", "/srv/data"};
    static const char *writable[] = {"/var/tmp/app"};
    static uint16_t ports[] = {5432, 6379};
    static sandlet_wire_page pages[] = {{"/a.csp", "/c/a-1.so"}, {"/gone.csp", ""}};
    return (sandlet_wire_init){
        .sandbox = "default",
        .servlets = servlets,
        .nservlets = 2,
        .pages_gen = 7,
        .pages = pages,
        .npages = 2,
        .confine = true,
        .uid = 1234,
        .gid = SANDLET_WIRE_KEEP_ID,
        .memory_mib = 256,
        .open_files = 64,
        .cpu_seconds = 30,
        .core_dumps = false,
        .syscalls = 3,
        .learn = true,
        .file_hints = true,
        .readable = readable,
        .nreadable = 2,
        .writable = writable,
        .nwritable = 1,
        .max_file_size = (uint64_t)5 << 32,
        .ports = ports,
        .nports = 2,
        .sessions = 1,
        .session_timeout = 1800,
        .cookie_secure = true,
        .cookie_name = "SLSESSION_default",
        .cookie_path = "/app",
        .database = "host=/run/postgresql dbname=shop",
        .database_password = "s3cret pw",
        .page_timeout = 4000,
        .spool = "/var/spool/sandlet/default",
        .key = sample_key,
    };
}

/* INIT through the codec: the bytes follow frame.h's layout field by
 * field, and the decoder gives back every field. */
static void test_frame_init_payload(void **state)
{
    (void)state;
    sandlet_wire_init in = sample_init();
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    assert_int_equal(sandlet_wire_init_encode(&b, &in), 0);

    size_t off = 0, plen;
    const uint8_t *p =
        expect_frame(b.data, b.len, &off, SANDLET_FRAME_INIT, 0, SANDLET_FRAME_END, &plen);
    assert_int_equal(off, b.len);
    sandlet_reader r;
    sandlet_reader_init(&r, p, plen);
    assert_string_equal(sandlet_read_str(&r, NULL), "default");
    assert_int_equal(sandlet_read_u16(&r), 2);
    assert_string_equal(sandlet_read_str(&r, NULL), "/hello");
    assert_string_equal(sandlet_read_str(&r, NULL), "/usr/lib/sandlet/hello.so");
    assert_int_equal(sandlet_read_u16(&r), 2);
    assert_string_equal(sandlet_read_str(&r, NULL), "greeting");
    assert_string_equal(sandlet_read_str(&r, NULL), "hi");
    assert_string_equal(sandlet_read_str(&r, NULL), "empty");
    assert_string_equal(sandlet_read_str(&r, NULL), "");
    assert_int_equal(sandlet_read_u32(&r), 30000);
    assert_string_equal(sandlet_read_str(&r, NULL), "/x");
    assert_string_equal(sandlet_read_str(&r, NULL), "x.so");
    assert_int_equal(sandlet_read_u16(&r), 0);
    assert_int_equal(sandlet_read_u32(&r), 0);
    assert_int_equal(sandlet_read_u32(&r), 7);
    assert_int_equal(sandlet_read_u16(&r), 2);
    assert_string_equal(sandlet_read_str(&r, NULL), "/a.csp");
    assert_string_equal(sandlet_read_str(&r, NULL), "/c/a-1.so");
    assert_string_equal(sandlet_read_str(&r, NULL), "/gone.csp");
    assert_string_equal(sandlet_read_str(&r, NULL), "");
    assert_int_equal(sandlet_read_u8(&r), 1);
    assert_int_equal(sandlet_read_u32(&r), 1234);
    assert_int_equal(sandlet_read_u32(&r), 0xFFFFFFFFu);
    assert_int_equal(sandlet_read_u32(&r), 256);
    assert_int_equal(sandlet_read_u32(&r), 64);
    assert_int_equal(sandlet_read_u32(&r), 30);
    assert_int_equal(sandlet_read_u8(&r), 0);
    assert_int_equal(sandlet_read_u8(&r), 3);
    assert_int_equal(sandlet_read_u8(&r), 3); /* modes: learn | file hints */
    assert_int_equal(sandlet_read_u16(&r), 2);
    assert_string_equal(sandlet_read_str(&r, NULL), "/etc/ssl");
    assert_string_equal(sandlet_read_str(&r, NULL), "/srv/data");
    assert_int_equal(sandlet_read_u16(&r), 1);
    assert_string_equal(sandlet_read_str(&r, NULL), "/var/tmp/app");
    assert_true(sandlet_read_u64(&r) == (uint64_t)5 << 32);
    assert_int_equal(sandlet_read_u8(&r), 2);
    assert_int_equal(sandlet_read_u16(&r), 5432);
    assert_int_equal(sandlet_read_u16(&r), 6379);
    assert_int_equal(sandlet_read_u8(&r), 1);
    assert_int_equal(sandlet_read_u32(&r), 1800);
    assert_int_equal(sandlet_read_u8(&r), 1);
    assert_string_equal(sandlet_read_str(&r, NULL), "SLSESSION_default");
    assert_string_equal(sandlet_read_str(&r, NULL), "/app");
    assert_string_equal(sandlet_read_str(&r, NULL), "host=/run/postgresql dbname=shop");
    assert_string_equal(sandlet_read_str(&r, NULL), "s3cret pw");
    assert_int_equal(sandlet_read_u32(&r), 4000);
    assert_string_equal(sandlet_read_str(&r, NULL), "/var/spool/sandlet/default");
    size_t keylen;
    const uint8_t *key = sandlet_read_rest(&r, &keylen);
    assert_int_equal(keylen, SANDLET_WIRE_KEY_LEN);
    assert_memory_equal(key, sample_key, SANDLET_WIRE_KEY_LEN);
    assert_false(r.bad);

    uint8_t *copy = dup_exact(p, plen);
    sandlet_wire_init out;
    assert_int_equal(sandlet_wire_init_decode(copy, plen, &out), 0);
    assert_string_equal(out.sandbox, in.sandbox);
    assert_int_equal(out.nservlets, in.nservlets);
    for (size_t i = 0; i < in.nservlets; i++) {
        assert_string_equal(out.servlets[i].path, in.servlets[i].path);
        assert_string_equal(out.servlets[i].library, in.servlets[i].library);
        assert_int_equal(out.servlets[i].nparams, in.servlets[i].nparams);
        for (size_t j = 0; j < in.servlets[i].nparams; j++) {
            assert_string_equal(out.servlets[i].params[j].name, in.servlets[i].params[j].name);
            assert_string_equal(out.servlets[i].params[j].value, in.servlets[i].params[j].value);
        }
    }
    assert_int_equal(out.pages_gen, 7);
    assert_int_equal(out.npages, 2);
    assert_string_equal(out.pages[0].path, "/a.csp");
    assert_string_equal(out.pages[0].library, "/c/a-1.so");
    assert_string_equal(out.pages[1].library, "");
    assert_true(out.confine == in.confine && out.uid == in.uid && out.gid == in.gid);
    assert_true(out.memory_mib == in.memory_mib && out.open_files == in.open_files &&
                out.cpu_seconds == in.cpu_seconds);
    assert_true(out.core_dumps == in.core_dumps && out.syscalls == in.syscalls &&
                out.learn == in.learn && out.file_hints == in.file_hints);
    assert_int_equal(out.nreadable, in.nreadable);
    for (size_t i = 0; i < in.nreadable; i++)
        assert_string_equal(out.readable[i], in.readable[i]);
    assert_int_equal(out.nwritable, in.nwritable);
    assert_string_equal(out.writable[0], in.writable[0]);
    assert_true(out.max_file_size == in.max_file_size);
    assert_int_equal(out.nports, in.nports);
    assert_int_equal(out.ports[0], 5432);
    assert_int_equal(out.ports[1], 6379);
    assert_true(out.sessions == in.sessions && out.session_timeout == in.session_timeout &&
                out.cookie_secure == in.cookie_secure);
    assert_string_equal(out.cookie_name, in.cookie_name);
    assert_string_equal(out.cookie_path, in.cookie_path);
    assert_string_equal(out.database, in.database);
    assert_string_equal(out.database_password, in.database_password);
    assert_int_equal(out.page_timeout, 4000);
    assert_string_equal(out.spool, "/var/spool/sandlet/default");
    assert_int_equal(out.servlets[0].timeout, 30000);
    assert_memory_equal(out.key, sample_key, SANDLET_WIRE_KEY_LEN);
    sandlet_wire_init_free(&out);

    /* Every truncation is refused (the key must be exactly there), and
     * so is one byte more. */
    for (size_t cut = 0; cut < plen; cut++) {
        uint8_t *t = dup_exact(p, cut);
        assert_int_equal(sandlet_wire_init_decode(t, cut, &out), -EPROTO);
        free(t);
    }
    uint8_t *longer = malloc(plen + 1);
    assert_non_null(longer);
    memcpy(longer, p, plen);
    longer[plen] = 0;
    assert_int_equal(sandlet_wire_init_decode(longer, plen + 1, &out), -EPROTO);
    free(longer);
    /* A count that the payload cannot hold is refused before allocating. */
    copy[12] = 0xFF;
    copy[13] = 0xFF; /* servlet count right after "default" */
    assert_int_equal(sandlet_wire_init_decode(copy, plen, &out), -EPROTO);
    free(copy);
    sandlet_buf_free(&b);
}

/* Every frame type, encoded by the codec into one stream and decoded
 * back by it, field by field. */
static void test_roundtrip_every_type(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    sandlet_wire_init in = sample_init();
    assert_int_equal(sandlet_wire_init_encode(&b, &in), 0);
    assert_int_equal(sandlet_wire_ready_encode(&b), 0);
    assert_int_equal(sandlet_wire_fail_encode(&b, "servlet /x: cannot load x.so"), 0);
    /* A REQUEST whose body spills into two REQBODY frames. */
    size_t body_len = SANDLET_FRAME_MAX + 100;
    uint8_t *body = malloc(body_len);
    assert_non_null(body);
    fill_pattern(body, body_len, 7);
    size_t rstart = begin_request(&b, 42, &sample_req);
    assert_int_equal(sandlet_wire_request_finish(&b, rstart, 42, body, body_len), 0);
    size_t start = begin_response(&b, 42, &sample_resp);
    sandlet_buf_put(&b, "hello", 5);
    assert_int_equal(sandlet_frame_finish(&b, start, 0), 0);
    start = sandlet_wire_body_begin(&b, 42);
    sandlet_buf_put(&b, " world", 6);
    assert_int_equal(sandlet_frame_finish(&b, start, 0), 0);
    start = sandlet_wire_body_begin(&b, 42);
    assert_int_equal(sandlet_frame_finish(&b, start, SANDLET_FRAME_END), 0);

    size_t off = 0, plen;
    const uint8_t *p =
        expect_frame(b.data, b.len, &off, SANDLET_FRAME_INIT, 0, SANDLET_FRAME_END, &plen);
    sandlet_wire_init out;
    assert_int_equal(sandlet_wire_init_decode(p, plen, &out), 0);
    assert_string_equal(out.sandbox, "default");
    assert_int_equal(out.nservlets, 2);
    assert_memory_equal(out.key, sample_key, SANDLET_WIRE_KEY_LEN);
    sandlet_wire_init_free(&out);

    expect_frame(b.data, b.len, &off, SANDLET_FRAME_READY, 0, SANDLET_FRAME_END, &plen);
    assert_int_equal(plen, 0);

    p = expect_frame(b.data, b.len, &off, SANDLET_FRAME_FAIL, 0, SANDLET_FRAME_END, &plen);
    const char *msg;
    assert_int_equal(sandlet_wire_fail_decode(p, plen, &msg), 0);
    assert_string_equal(msg, "servlet /x: cannot load x.so");
    assert_int_equal(sandlet_wire_fail_decode(p, 3, &msg), -EPROTO);
    assert_string_equal(msg, "");

    p = expect_frame(b.data, b.len, &off, SANDLET_FRAME_REQUEST, 42, 0, &plen);
    assert_int_equal(plen, SANDLET_FRAME_MAX);
    sandlet_wire_request rq;
    assert_int_equal(sandlet_wire_request_decode(p, plen, &rq), 0);
    assert_int_equal(rq.servlet, sample_req.servlet);
    assert_int_equal(rq.http_major, 1);
    assert_int_equal(rq.http_minor, 1);
    assert_string_equal(rq.method, sample_req.method);
    assert_string_equal(rq.target, sample_req.target);
    assert_string_equal(rq.peer, sample_req.peer);
    expect_headers(rq.headers, rq.nheaders, sample_headers, ARRAY_LEN(sample_headers));
    size_t got = rq.body_len;
    assert_memory_equal(rq.body, body, got);
    p = expect_frame(b.data, b.len, &off, SANDLET_FRAME_REQBODY, 42, SANDLET_FRAME_END, &plen);
    assert_int_equal(got + plen, body_len);
    assert_memory_equal(p, body + got, plen);

    p = expect_frame(b.data, b.len, &off, SANDLET_FRAME_RESPONSE, 42, 0, &plen);
    sandlet_wire_response rs;
    assert_int_equal(sandlet_wire_response_decode(p, plen, &rs), 0);
    assert_int_equal(rs.status, sample_resp.status);
    assert_true(rs.content_length == sample_resp.content_length);
    expect_headers(rs.headers, rs.nheaders, sample_headers, ARRAY_LEN(sample_headers));
    assert_int_equal(rs.body_len, 5);
    assert_memory_equal(rs.body, "hello", 5);
    p = expect_frame(b.data, b.len, &off, SANDLET_FRAME_BODY, 42, 0, &plen);
    assert_true(sandlet_wire_body_valid(plen, 0));
    assert_memory_equal(p, " world", 6);
    expect_frame(b.data, b.len, &off, SANDLET_FRAME_BODY, 42, SANDLET_FRAME_END, &plen);
    assert_int_equal(plen, 0);
    assert_true(sandlet_wire_body_valid(plen, SANDLET_FRAME_END));
    assert_false(sandlet_wire_body_valid(0, 0));
    assert_int_equal(off, b.len);
    free(body);
    sandlet_buf_free(&b);
}

/* A message that does not fit leaves the queue it was appended to as it
 * was: the acceptor keeps the frames of other requests. */
/* ABORT is valid on an empty last REQBODY only. */
static void test_header_abort_flag(void **state)
{
    (void)state;
    static const struct {
        uint8_t type;
        uint16_t flags;
        uint32_t length;
        int rc;
    } cases[] = {
        {SANDLET_FRAME_REQBODY, SANDLET_FRAME_END | SANDLET_FRAME_ABORT, 0, 0},
        {SANDLET_FRAME_REQBODY, SANDLET_FRAME_ABORT, 0, -EPROTO},
        {SANDLET_FRAME_REQBODY, SANDLET_FRAME_END | SANDLET_FRAME_ABORT, 1, -EPROTO},
        {SANDLET_FRAME_REQUEST, SANDLET_FRAME_END | SANDLET_FRAME_ABORT, 0, -EPROTO},
        {SANDLET_FRAME_BODY, SANDLET_FRAME_END | SANDLET_FRAME_ABORT, 0, -EPROTO},
        {SANDLET_FRAME_RESPONSE, SANDLET_FRAME_END | SANDLET_FRAME_ABORT, 0, -EPROTO},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        sandlet_frame_hdr h = {SANDLET_FRAME_VERSION, cases[i].type, cases[i].flags, 9,
                               cases[i].length};
        uint8_t raw[SANDLET_FRAME_HEADER];
        sandlet_frame_header_encode(raw, &h);
        sandlet_frame_hdr out;
        assert_int_equal(sandlet_frame_header_decode(raw, sizeof(raw), &out), cases[i].rc);
    }
}

/* A streamed body: an open REQUEST with what fits, then REQBODY frames
 * of at most the maximum, END on the last; the bytes come back in order. */
static void test_request_open_and_reqbody(void **state)
{
    (void)state;
    size_t total = 3 * SANDLET_FRAME_MAX + 77;
    uint8_t *body = malloc(total);
    assert_non_null(body);
    for (size_t i = 0; i < total; i++)
        body[i] = (uint8_t)(i * 7 + (i >> 12));
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    sandlet_wire_request rq = {.servlet = 1,
                               .http_major = 1,
                               .http_minor = 1,
                               .method = "PUT",
                               .method_len = 3,
                               .target = "/u",
                               .target_len = 2,
                               .peer = "p",
                               .peer_len = 1};
    size_t start = sandlet_wire_request_begin(&b, 5, &rq);
    size_t taken = 0;
    assert_int_equal(sandlet_wire_request_finish_open(&b, start, body, total, &taken), 0);
    assert_true(taken > 0 && taken < SANDLET_FRAME_MAX);
    assert_int_equal(b.len, SANDLET_FRAME_HEADER + SANDLET_FRAME_MAX);
    assert_int_equal(sandlet_wire_reqbody_encode(&b, 5, body + taken, 1000, 0), 0);
    assert_int_equal(sandlet_wire_reqbody_encode(&b, 5, body + taken + 1000, total - taken - 1000,
                                                 SANDLET_FRAME_END),
                     0);
    assert_int_equal(sandlet_wire_reqbody_encode(&b, 5, NULL, 0, SANDLET_FRAME_ABORT), -EINVAL);
    assert_int_equal(
        sandlet_wire_reqbody_encode(&b, 5, body, 1, SANDLET_FRAME_END | SANDLET_FRAME_ABORT),
        -EINVAL);
    size_t off = 0, got = 0, frames = 0;
    bool ended = false;
    while (off < b.len) {
        sandlet_frame_hdr h;
        assert_int_equal(sandlet_frame_header_decode(b.data + off, b.len - off, &h), 0);
        assert_false(ended);
        const uint8_t *payload = b.data + off + SANDLET_FRAME_HEADER;
        if (frames++ == 0) {
            assert_int_equal(h.type, SANDLET_FRAME_REQUEST);
            assert_int_equal(h.flags, 0);
            sandlet_wire_request wr;
            assert_int_equal(sandlet_wire_request_decode(payload, h.length, &wr), 0);
            assert_int_equal(wr.body_len, taken);
            assert_memory_equal(wr.body, body, taken);
            got = taken;
        } else {
            assert_int_equal(h.type, SANDLET_FRAME_REQBODY);
            assert_int_equal(h.id, 5);
            assert_true(h.length > 0);
            assert_memory_equal(payload, body + got, h.length);
            got += h.length;
            ended = h.flags & SANDLET_FRAME_END;
        }
        off += SANDLET_FRAME_HEADER + h.length;
    }
    assert_true(ended);
    assert_int_equal(got, total);
    /* The abort: one empty frame, END|ABORT, that decodes. */
    sandlet_buf_reset(&b);
    assert_int_equal(
        sandlet_wire_reqbody_encode(&b, 6, NULL, 0, SANDLET_FRAME_END | SANDLET_FRAME_ABORT), 0);
    sandlet_frame_hdr h;
    assert_int_equal(b.len, SANDLET_FRAME_HEADER);
    assert_int_equal(sandlet_frame_header_decode(b.data, b.len, &h), 0);
    assert_int_equal(h.flags, SANDLET_FRAME_END | SANDLET_FRAME_ABORT);
    sandlet_buf_free(&b);
    free(body);
}

/* A buffer that grew for one large message gives its memory back once
 * empty, and only then. */
static void test_buf_shrink(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    assert_int_equal(sandlet_buf_reserve(&b, 4096), 0);
    b.len = 4096;
    sandlet_buf_shrink(&b, 1024);
    assert_non_null(b.data); /* not empty: kept */
    sandlet_buf_reset(&b);
    sandlet_buf_shrink(&b, 8192);
    assert_non_null(b.data); /* small enough: kept */
    sandlet_buf_shrink(&b, 1024);
    assert_null(b.data);
    assert_int_equal(b.cap, 0);
    sandlet_buf_free(&b);
}

static void test_encode_rollback(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    assert_int_equal(sandlet_wire_ready_encode(&b), 0);
    size_t before = b.len;
    sandlet_wire_init in = sample_init();
    char *big = malloc(SANDLET_FRAME_MAX + 1);
    assert_non_null(big);
    memset(big, 'a', SANDLET_FRAME_MAX);
    big[SANDLET_FRAME_MAX] = 0;
    in.cookie_path = big;
    assert_int_equal(sandlet_wire_init_encode(&b, &in), -EMSGSIZE);
    assert_int_equal(b.len, before);
    assert_int_equal(b.error, 0);
    req_spec rq = sample_req;
    rq.target = big;
    size_t start = begin_request(&b, 1, &rq);
    assert_int_equal(sandlet_wire_request_finish(&b, start, 1, (const uint8_t *)"x", 1), -EMSGSIZE);
    assert_int_equal(b.len, before);
    assert_int_equal(b.error, 0);
    free(big);
    sandlet_buf_free(&b);
}

static void test_frame_finish_limited_buf(void **state)
{
    (void)state;
    /* A buffer limit below the frame: the sticky error comes back from finish. */
    sandlet_buf b;
    sandlet_buf_init(&b, 20);
    size_t s = sandlet_frame_begin(&b, SANDLET_FRAME_BODY, 1);
    assert_int_equal(b.error, 0);
    sandlet_buf_put(&b, "0123456789", 10);
    assert_int_equal(b.error, -EMSGSIZE);
    assert_int_equal(sandlet_frame_finish(&b, s, SANDLET_FRAME_END), -EMSGSIZE);
    sandlet_buf_free(&b);

    /* Limit too small even for the frame header. */
    sandlet_buf_init(&b, 5);
    s = sandlet_frame_begin(&b, SANDLET_FRAME_READY, 0);
    assert_int_equal(s, 0);
    assert_int_equal(b.error, -EMSGSIZE);
    assert_int_equal(b.len, 0);
    assert_int_equal(sandlet_frame_finish(&b, s, SANDLET_FRAME_END), -EMSGSIZE);
    sandlet_buf_free(&b);
}

/* ---- REQUEST ---------------------------------------------------------- */

static void test_request_known_bytes(void **state)
{
    (void)state;
    static const hpair h[] = {{"A", "b"}};
    req_spec s = {0x0102, 1, 1, "GET", "/", "p", h, 1};
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start;
    assert_int_equal(build_request(&b, &start, 0x12345678u, SANDLET_FRAME_END, &s, "xy", 2), 0);
    static const uint8_t want[] = {
        0x01, 0x04, 0x01, 0x00, 0x78, 0x56, 0x34, 0x12, 0x28, 0x00, 0x00, 0x00, /* header */
        0x02, 0x01, 0x01, 0x01, 0x01, 0x00,                                     /* fixed */
        0x03, 0x00, 0x00, 0x00, 'G',  'E',  'T',  0x00,                         /* method */
        0x01, 0x00, 0x00, 0x00, '/',  0x00,                                     /* target */
        0x01, 0x00, 0x00, 0x00, 'p',  0x00,                                     /* peer */
        0x01, 0x00, 0x00, 0x00, 'A',  0x00, 0x01, 0x00, 0x00, 0x00, 'b',  0x00, /* header */
        'x',  'y'};
    assert_int_equal(start, 0);
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));

    sandlet_wire_request req;
    const uint8_t *pl = want + SANDLET_FRAME_HEADER;
    assert_int_equal(sandlet_wire_request_decode(pl, sizeof(want) - SANDLET_FRAME_HEADER, &req), 0);
    assert_int_equal(req.servlet, 0x0102);
    assert_int_equal(req.http_major, 1);
    assert_int_equal(req.http_minor, 1);
    assert_int_equal(req.nheaders, 1);
    /* Strings point into the payload: no copies. */
    assert_ptr_equal(req.method, (const char *)pl + 10);
    assert_ptr_equal(req.target, (const char *)pl + 18);
    assert_ptr_equal(req.peer, (const char *)pl + 24);
    assert_ptr_equal(req.body, pl + 40 - 2);
    assert_int_equal(req.body_len, 2);
    expect_headers(req.headers, req.nheaders, h, 1);
    sandlet_buf_free(&b);
}

static void check_request(const uint8_t *frame, size_t frame_len, uint32_t id, uint16_t flags,
                          const req_spec *s, const void *body, size_t body_len)
{
    sandlet_frame_hdr h;
    assert_int_equal(sandlet_frame_header_decode(frame, frame_len, &h), 0);
    assert_int_equal(h.type, SANDLET_FRAME_REQUEST);
    assert_int_equal(h.id, id);
    assert_int_equal(h.flags, flags);
    assert_int_equal(h.length, frame_len - SANDLET_FRAME_HEADER);
    assert_int_equal(h.length, request_head_size(s) + body_len);

    /* Decode from an exact-size copy of the payload. */
    uint8_t *pl = dup_exact(frame + SANDLET_FRAME_HEADER, h.length);
    sandlet_wire_request req;
    memset(&req, 0xA5, sizeof(req));
    assert_int_equal(sandlet_wire_request_decode(pl, h.length, &req), 0);
    assert_int_equal(req.servlet, s->servlet);
    assert_int_equal(req.http_major, s->major);
    assert_int_equal(req.http_minor, s->minor);
    assert_int_equal(req.nheaders, s->nheaders);
    assert_int_equal(req.method_len, strlen(s->method));
    assert_string_equal(req.method, s->method);
    assert_int_equal(req.target_len, strlen(s->target));
    assert_string_equal(req.target, s->target);
    assert_int_equal(req.peer_len, strlen(s->peer));
    assert_string_equal(req.peer, s->peer);
    assert_true((const uint8_t *)req.method > pl && (const uint8_t *)req.method < pl + h.length);
    expect_headers(req.headers, req.nheaders, s->headers, s->nheaders);
    /* The saved iterator is a copy: iterating twice gives the same pairs. */
    expect_headers(req.headers, req.nheaders, s->headers, s->nheaders);
    assert_int_equal(req.body_len, body_len);
    assert_ptr_equal(req.body, pl + request_head_size(s));
    if (body_len)
        assert_memory_equal(req.body, body, body_len);
    free(pl);
}

static void test_request_roundtrip(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start;

    static const char body[] = "hello world";
    assert_int_equal(
        build_request(&b, &start, 77, SANDLET_FRAME_END, &sample_req, body, sizeof(body) - 1), 0);
    check_request(b.data + start, b.len - start, 77, SANDLET_FRAME_END, &sample_req, body,
                  sizeof(body) - 1);

    /* No headers, no body, no END, extreme field values, empty peer. */
    req_spec s2 = {UINT16_MAX, 0, 9, "M", "*", "", NULL, 0};
    sandlet_buf_reset(&b);
    assert_int_equal(build_request(&b, &start, UINT32_MAX, 0, &s2, NULL, 0), 0);
    check_request(b.data + start, b.len - start, UINT32_MAX, 0, &s2, NULL, 0);

    /* HTTP/2.0, a second frame appended after another one in the same buffer. */
    static const hpair many[] = {{"a", "1"}, {"b", "2"}, {"c", "3"}, {"a", "4"},
                                 {"E", ""},  {"f", "6"}, {"g", "7"}, {"h", "8"}};
    req_spec s3 = {0,
                   2,
                   0,
                   "DELETE",
                   "/very/long/target/with%20escapes?and=query&x=y",
                   "[::1]:80",
                   many,
                   ARRAY_LEN(many)};
    size_t first_len = b.len;
    assert_int_equal(build_request(&b, &start, 5, SANDLET_FRAME_END, &s3, "Z", 1), 0);
    assert_int_equal(start, first_len);
    check_request(b.data + start, b.len - start, 5, SANDLET_FRAME_END, &s3, "Z", 1);
    /* The first frame is unchanged. */
    check_request(b.data, first_len, UINT32_MAX, 0, &s2, NULL, 0);
    sandlet_buf_free(&b);
}

static void test_request_many_headers(void **state)
{
    (void)state;
    enum { N = 1000 };
    static char names[N][16];
    static char values[N][24];
    static hpair h[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "X-H%d", i);
        snprintf(values[i], sizeof(values[i]), "value-%d", i * 7);
        h[i].name = names[i];
        h[i].value = values[i];
    }
    req_spec s = {1, 1, 1, "GET", "/", "peer", h, N};
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start;
    assert_int_equal(build_request(&b, &start, 9, SANDLET_FRAME_END, &s, "B", 1), 0);
    check_request(b.data, b.len, 9, SANDLET_FRAME_END, &s, "B", 1);
    sandlet_buf_free(&b);
}

static void test_request_body_nul(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start;

    static const char nul_body[] = "a\0b\0\0c";
    assert_int_equal(sizeof(nul_body) - 1, 6);
    assert_int_equal(build_request(&b, &start, 1, SANDLET_FRAME_END, &sample_req, nul_body, 6), 0);
    check_request(b.data, b.len, 1, SANDLET_FRAME_END, &sample_req, nul_body, 6);

    uint8_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    sandlet_buf_reset(&b);
    assert_int_equal(build_request(&b, &start, 2, SANDLET_FRAME_END, &sample_req, all, 256), 0);
    check_request(b.data, b.len, 2, SANDLET_FRAME_END, &sample_req, all, 256);

    /* A body that looks like a str / a header is still just body. */
    static const uint8_t fake[] = {0x01, 0x00, 0x00, 0x00, 'A', 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    sandlet_buf_reset(&b);
    assert_int_equal(
        build_request(&b, &start, 3, SANDLET_FRAME_END, &sample_req, fake, sizeof(fake)), 0);
    check_request(b.data, b.len, 3, SANDLET_FRAME_END, &sample_req, fake, sizeof(fake));
    sandlet_buf_free(&b);
}

static void test_request_max_fits(void **state)
{
    (void)state;
    size_t head = request_head_size(&sample_req);
    size_t body_len = SANDLET_FRAME_MAX - head;
    uint8_t *body = malloc(body_len);
    assert_non_null(body);
    fill_pattern(body, body_len, 1);

    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start;
    assert_int_equal(build_request(&b, &start, 11, SANDLET_FRAME_END, &sample_req, body, body_len),
                     0);
    assert_int_equal(b.len, SANDLET_FRAME_HEADER + SANDLET_FRAME_MAX);
    check_request(b.data, b.len, 11, SANDLET_FRAME_END, &sample_req, body, body_len);
    free(body);
    sandlet_buf_free(&b);
}

static void test_request_too_big(void **state)
{
    (void)state;
    uint8_t *body = malloc(MIB);
    assert_non_null(body);
    fill_pattern(body, MIB, 2);
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start;
    assert_int_equal(build_request(&b, &start, 11, SANDLET_FRAME_END, &sample_req, body, MIB),
                     -EMSGSIZE);

    /* One byte past the maximum, with and without a head. */
    size_t head = request_head_size(&sample_req);
    sandlet_buf_reset(&b);
    assert_int_equal(build_request(&b, &start, 11, SANDLET_FRAME_END, &sample_req, body,
                                   SANDLET_FRAME_MAX - head + 1),
                     -EMSGSIZE);
    sandlet_buf_reset(&b);
    start = sandlet_frame_begin(&b, SANDLET_FRAME_REQBODY, 11);
    sandlet_buf_put(&b, body, SANDLET_FRAME_MAX);
    assert_int_equal(sandlet_frame_finish(&b, start, SANDLET_FRAME_END), 0);
    sandlet_buf_reset(&b);
    start = sandlet_frame_begin(&b, SANDLET_FRAME_REQBODY, 11);
    sandlet_buf_put(&b, body, SANDLET_FRAME_MAX);
    sandlet_buf_put_u8(&b, 0);
    assert_int_equal(sandlet_frame_finish(&b, start, SANDLET_FRAME_END), -EMSGSIZE);
    free(body);
    sandlet_buf_free(&b);
}

/* Sends body as a REQUEST (first chunks[0] bytes) plus one REQBODY per further chunk, then
 * parses the stream back and reassembles the body. */
static void split_and_reassemble(const size_t *chunks, size_t nchunks, uint32_t id)
{
    uint8_t *body = malloc(MIB);
    assert_non_null(body);
    fill_pattern(body, MIB, id);
    size_t total = 0;
    for (size_t i = 0; i < nchunks; i++)
        total += chunks[i];
    assert_int_equal(total, MIB);

    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start, off = 0;
    assert_int_equal(build_request(&b, &start, id, nchunks == 1 ? SANDLET_FRAME_END : 0,
                                   &sample_req, body, chunks[0]),
                     0);
    off = chunks[0];
    for (size_t i = 1; i < nchunks; i++) {
        start = sandlet_frame_begin(&b, SANDLET_FRAME_REQBODY, id);
        sandlet_buf_put(&b, body + off, chunks[i]);
        assert_int_equal(sandlet_frame_finish(&b, start, i + 1 == nchunks ? SANDLET_FRAME_END : 0),
                         0);
        off += chunks[i];
    }

    /* Parse the stream from an exact-size copy. */
    uint8_t *stream = dup_exact(b.data, b.len);
    size_t stream_len = b.len;
    sandlet_buf_free(&b);
    uint8_t *got = malloc(MIB);
    assert_non_null(got);
    size_t got_len = 0, pos = 0, plen;
    const uint8_t *p = expect_frame(stream, stream_len, &pos, SANDLET_FRAME_REQUEST, id,
                                    nchunks == 1 ? SANDLET_FRAME_END : 0, &plen);
    sandlet_wire_request req;
    assert_int_equal(sandlet_wire_request_decode(p, plen, &req), 0);
    assert_string_equal(req.method, sample_req.method);
    assert_int_equal(req.body_len, chunks[0]);
    memcpy(got, req.body, req.body_len);
    got_len = req.body_len;
    for (size_t i = 1; i < nchunks; i++) {
        p = expect_frame(stream, stream_len, &pos, SANDLET_FRAME_REQBODY, id,
                         i + 1 == nchunks ? SANDLET_FRAME_END : 0, &plen);
        assert_int_equal(plen, chunks[i]);
        assert_true(got_len + plen <= MIB);
        if (plen)
            memcpy(got + got_len, p, plen);
        got_len += plen;
    }
    assert_int_equal(pos, stream_len);
    assert_int_equal(got_len, MIB);
    assert_memory_equal(got, body, MIB);
    free(got);
    free(stream);
    free(body);
}

static void test_request_split_1mib(void **state)
{
    (void)state;
    size_t head = request_head_size(&sample_req);
    /* As full as possible: one full REQUEST, the remainder in one REQBODY. */
    size_t full[] = {SANDLET_FRAME_MAX - head, head};
    split_and_reassemble(full, ARRAY_LEN(full), 100);
    /* No body in the REQUEST, then one REQBODY of exactly the maximum. */
    size_t empty_first[] = {0, SANDLET_FRAME_MAX};
    split_and_reassemble(empty_first, ARRAY_LEN(empty_first), 101);
    /* Irregular pieces, ending with an empty REQBODY that carries END. */
    size_t odd[] = {1, 7, 65536, 333333, 300000, 1, MIB - 1 - 7 - 65536 - 333333 - 300000 - 1, 0};
    split_and_reassemble(odd, ARRAY_LEN(odd), 102);
}

/* ---- RESPONSE --------------------------------------------------------- */

static void test_response_known_bytes(void **state)
{
    (void)state;
    static const hpair h[] = {{"X", ""}};
    resp_spec s = {404, 0x0102030405060708ull, h, 1};
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start;
    assert_int_equal(build_response(&b, &start, 0x0A0B0C0Du, 0, &s, "z", 1), 0);
    static const uint8_t want[] = {
        0x01, 0x06, 0x00, 0x00, 0x0D, 0x0C, 0x0B, 0x0A, 0x18, 0x00, 0x00, 0x00, /* header */
        0x94, 0x01, 0x01, 0x00,                                                 /* status, n */
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,                         /* length */
        0x01, 0x00, 0x00, 0x00, 'X',  0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       /* header */
        'z'};
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));

    sandlet_wire_response resp;
    const uint8_t *pl = want + SANDLET_FRAME_HEADER;
    assert_int_equal(sandlet_wire_response_decode(pl, sizeof(want) - SANDLET_FRAME_HEADER, &resp),
                     0);
    assert_int_equal(resp.status, 404);
    assert_int_equal(resp.nheaders, 1);
    assert_true(resp.content_length == 0x0102030405060708ull);
    assert_ptr_equal(resp.body, pl + 23);
    assert_int_equal(resp.body_len, 1);
    expect_headers(resp.headers, resp.nheaders, h, 1);
    sandlet_buf_free(&b);
}

static void check_response(const uint8_t *frame, size_t frame_len, uint32_t id, uint16_t flags,
                           const resp_spec *s, const void *body, size_t body_len)
{
    sandlet_frame_hdr h;
    assert_int_equal(sandlet_frame_header_decode(frame, frame_len, &h), 0);
    assert_int_equal(h.type, SANDLET_FRAME_RESPONSE);
    assert_int_equal(h.id, id);
    assert_int_equal(h.flags, flags);
    assert_int_equal(h.length, frame_len - SANDLET_FRAME_HEADER);
    assert_int_equal(h.length, response_head_size(s) + body_len);

    uint8_t *pl = dup_exact(frame + SANDLET_FRAME_HEADER, h.length);
    sandlet_wire_response resp;
    memset(&resp, 0xA5, sizeof(resp));
    assert_int_equal(sandlet_wire_response_decode(pl, h.length, &resp), 0);
    assert_int_equal(resp.status, s->status);
    assert_int_equal(resp.nheaders, s->nheaders);
    assert_true(resp.content_length == s->content_length);
    expect_headers(resp.headers, resp.nheaders, s->headers, s->nheaders);
    assert_int_equal(resp.body_len, body_len);
    assert_ptr_equal(resp.body, pl + response_head_size(s));
    if (body_len)
        assert_memory_equal(resp.body, body, body_len);
    free(pl);
}

static void test_response_roundtrip(void **state)
{
    (void)state;
    static const uint64_t lengths[] = {0,
                                       1,
                                       11,
                                       0xFFFFFFFFull,
                                       0x100000000ull,
                                       SANDLET_LENGTH_UNKNOWN - 1,
                                       SANDLET_LENGTH_UNKNOWN};
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start;
    for (size_t i = 0; i < ARRAY_LEN(lengths); i++) {
        resp_spec s = sample_resp;
        s.content_length = lengths[i];
        sandlet_buf_reset(&b);
        assert_int_equal(
            build_response(&b, &start, (uint32_t)i, SANDLET_FRAME_END, &s, "hello world", 11), 0);
        check_response(b.data, b.len, (uint32_t)i, SANDLET_FRAME_END, &s, "hello world", 11);
    }

    /* Unknown length means streamed: RESPONSE without END, BODY frames after it. */
    resp_spec st = {200, SANDLET_LENGTH_UNKNOWN, NULL, 0};
    sandlet_buf_reset(&b);
    assert_int_equal(build_response(&b, &start, 8, 0, &st, NULL, 0), 0);
    check_response(b.data, b.len, 8, 0, &st, NULL, 0);
    assert_int_equal(b.len, SANDLET_FRAME_HEADER + 12);
    /* The u64 is all 0xFF on the wire. */
    for (int k = 0; k < 8; k++)
        assert_int_equal(b.data[SANDLET_FRAME_HEADER + 4 + k], 0xFF);
    sandlet_buf_free(&b);
}

static void test_response_body_nul(void **state)
{
    (void)state;
    uint8_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    size_t start;
    assert_int_equal(build_response(&b, &start, 4, SANDLET_FRAME_END, &sample_resp, all, 256), 0);
    check_response(b.data, b.len, 4, SANDLET_FRAME_END, &sample_resp, all, 256);
    sandlet_buf_reset(&b);
    assert_int_equal(build_response(&b, &start, 4, SANDLET_FRAME_END, &sample_resp, "a\0b\0\0c", 6),
                     0);
    check_response(b.data, b.len, 4, SANDLET_FRAME_END, &sample_resp, "a\0b\0\0c", 6);

    /* The largest body that fits, and one byte more. */
    size_t head = response_head_size(&sample_resp);
    uint8_t *big = malloc(SANDLET_FRAME_MAX);
    assert_non_null(big);
    fill_pattern(big, SANDLET_FRAME_MAX, 5);
    sandlet_buf_reset(&b);
    assert_int_equal(build_response(&b, &start, 4, SANDLET_FRAME_END, &sample_resp, big,
                                    SANDLET_FRAME_MAX - head),
                     0);
    check_response(b.data, b.len, 4, SANDLET_FRAME_END, &sample_resp, big,
                   SANDLET_FRAME_MAX - head);
    sandlet_buf_reset(&b);
    assert_int_equal(build_response(&b, &start, 4, SANDLET_FRAME_END, &sample_resp, big,
                                    SANDLET_FRAME_MAX - head + 1),
                     -EMSGSIZE);
    free(big);
    sandlet_buf_free(&b);
}

static int decode_status(uint16_t status)
{
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    resp_spec s = {status, 0, NULL, 0};
    put_response_head(&b, &s);
    assert_int_equal(b.error, 0);
    uint8_t *pl = dup_exact(b.data, b.len);
    sandlet_wire_response resp;
    int rc = sandlet_wire_response_decode(pl, b.len, &resp);
    if (rc == 0)
        assert_int_equal(resp.status, status);
    free(pl);
    sandlet_buf_free(&b);
    return rc;
}

/* Only final statuses pass: a 1xx would be sent as the final answer and
 * desynchronise the connection; out-of-range ones are not HTTP.  Both are
 * -ERANGE with the frame still decoded (status included), so that the
 * acceptor can answer 502 and step over the response instead of treating
 * it as garbage. */
static void test_response_status(void **state)
{
    (void)state;
    static const uint16_t bad[] = {0, 1, 99, 100, 101, 103, 199, 600, 999, 0x8000, UINT16_MAX};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(decode_status(bad[i]), -ERANGE);
    assert_int_equal(decode_status(200), 0);
    assert_int_equal(decode_status(204), 0);
    assert_int_equal(decode_status(404), 0);
    assert_int_equal(decode_status(599), 0);

    /* The rest of a frame with a bad status is still read. */
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    resp_spec s = {100, 0, NULL, 0};
    put_response_head(&b, &s);
    sandlet_buf_put(&b, "xy", 2);
    sandlet_wire_response resp;
    assert_int_equal(sandlet_wire_response_decode(b.data, b.len, &resp), -ERANGE);
    assert_int_equal(resp.status, 100);
    assert_int_equal(resp.body_len, 2);
    /* A malformed frame stays -EPROTO whatever its status. */
    assert_int_equal(sandlet_wire_response_decode(b.data, 3, &resp), -EPROTO);
    sandlet_buf_free(&b);
}

/* ---- truncation ------------------------------------------------------- */

static void test_request_truncated(void **state)
{
    (void)state;
    static const char body[] = "body\0with\0nul";
    const size_t body_len = sizeof(body) - 1;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    put_request_head(&b, &sample_req);
    size_t head = b.len;
    assert_int_equal(head, request_head_size(&sample_req));
    sandlet_buf_put(&b, body, body_len);
    assert_int_equal(b.error, 0);
    size_t len = b.len;

    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *p = dup_exact(b.data, cut);
        sandlet_wire_request req;
        int rc = sandlet_wire_request_decode(p, cut, &req);
        if (cut < head) {
            if (rc != -EPROTO)
                print_error("request cut at %zu of %zu (head %zu)\n", cut, len, head);
            assert_int_equal(rc, -EPROTO);
        } else {
            if (rc != 0)
                print_error("request cut at %zu of %zu (head %zu)\n", cut, len, head);
            assert_int_equal(rc, 0);
            assert_string_equal(req.method, sample_req.method);
            assert_string_equal(req.peer, sample_req.peer);
            expect_headers(req.headers, req.nheaders, sample_req.headers, sample_req.nheaders);
            assert_int_equal(req.body_len, cut - head);
            assert_ptr_equal(req.body, p + head);
            if (req.body_len)
                assert_memory_equal(req.body, body, req.body_len);
        }
        free(p);
    }
    sandlet_buf_free(&b);
}

static void test_response_truncated(void **state)
{
    (void)state;
    static const char body[] = "\0\0resp\0";
    const size_t body_len = sizeof(body) - 1;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    put_response_head(&b, &sample_resp);
    size_t head = b.len;
    assert_int_equal(head, response_head_size(&sample_resp));
    sandlet_buf_put(&b, body, body_len);
    assert_int_equal(b.error, 0);
    size_t len = b.len;

    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *p = dup_exact(b.data, cut);
        sandlet_wire_response resp;
        int rc = sandlet_wire_response_decode(p, cut, &resp);
        if (cut < head) {
            if (rc != -EPROTO)
                print_error("response cut at %zu of %zu (head %zu)\n", cut, len, head);
            assert_int_equal(rc, -EPROTO);
        } else {
            if (rc != 0)
                print_error("response cut at %zu of %zu (head %zu)\n", cut, len, head);
            assert_int_equal(rc, 0);
            assert_int_equal(resp.status, sample_resp.status);
            assert_true(resp.content_length == sample_resp.content_length);
            expect_headers(resp.headers, resp.nheaders, sample_resp.headers, sample_resp.nheaders);
            assert_int_equal(resp.body_len, cut - head);
            assert_ptr_equal(resp.body, p + head);
            if (resp.body_len)
                assert_memory_equal(resp.body, body, resp.body_len);
        }
        free(p);
    }
    sandlet_buf_free(&b);
}

/* ---- malformed payloads ----------------------------------------------- */

/* A str with an arbitrary length field and terminator byte. */
static void put_raw_str(sandlet_buf *b, uint32_t len_field, const char *bytes, size_t n,
                        int terminator)
{
    sandlet_buf_put_u32(b, len_field);
    sandlet_buf_put(b, bytes, n);
    if (terminator >= 0)
        sandlet_buf_put_u8(b, (uint8_t)terminator);
}

static void put_req_fixed(sandlet_buf *b, uint16_t nheaders)
{
    sandlet_buf_put_u16(b, 0);
    sandlet_buf_put_u8(b, 1);
    sandlet_buf_put_u8(b, 1);
    sandlet_buf_put_u16(b, nheaders);
}

static int decode_request_buf(const sandlet_buf *b)
{
    assert_int_equal(b->error, 0);
    uint8_t *p = dup_exact(b->data, b->len);
    sandlet_wire_request req;
    int rc = sandlet_wire_request_decode(p, b->len, &req);
    free(p);
    return rc;
}

static int decode_response_buf(const sandlet_buf *b)
{
    assert_int_equal(b->error, 0);
    uint8_t *p = dup_exact(b->data, b->len);
    sandlet_wire_response resp;
    int rc = sandlet_wire_response_decode(p, b->len, &resp);
    free(p);
    return rc;
}

static void test_request_bad_strings(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    static const uint32_t past[] = {4, 5, 100, 0x7FFFFFFFu, 0xFFFFFFFEu, 0xFFFFFFFFu};

    /* Control: the hand-built payload is valid. */
    put_req_fixed(&b, 0);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    assert_int_equal(decode_request_buf(&b), 0);

    /* Method length points past the end (with a few bytes after it). */
    for (size_t i = 0; i < ARRAY_LEN(past); i++) {
        sandlet_buf_reset(&b);
        put_req_fixed(&b, 0);
        put_raw_str(&b, past[i], "GET", 3, -1);
        assert_int_equal(decode_request_buf(&b), -EPROTO);
    }
    /* Target length points past the end. */
    for (size_t i = 0; i < ARRAY_LEN(past); i++) {
        sandlet_buf_reset(&b);
        put_req_fixed(&b, 0);
        put_raw_str(&b, 3, "GET", 3, 0);
        put_raw_str(&b, past[i], "/", 1, 0); /* the last item: 2 bytes follow */
        assert_int_equal(decode_request_buf(&b), -EPROTO);
    }
    /* Peer length runs exactly to the end: no room for the NUL. */
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 0);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 2, "pq", 2, -1);
    assert_int_equal(decode_request_buf(&b), -EPROTO);

    /* Missing NUL terminator, with more bytes following (so the length fits). */
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 0);
    put_raw_str(&b, 3, "GET", 3, 'X');
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    assert_int_equal(decode_request_buf(&b), -EPROTO);
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 0);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, '/');
    put_raw_str(&b, 1, "p", 1, 0);
    assert_int_equal(decode_request_buf(&b), -EPROTO);
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 0);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 1);
    sandlet_buf_put(&b, "body", 4);
    assert_int_equal(decode_request_buf(&b), -EPROTO);
    /* The length counts one byte short of the NUL: the byte at [n] is not NUL. */
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 0);
    put_raw_str(&b, 2, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    assert_int_equal(decode_request_buf(&b), -EPROTO);

    /* Empty method or target. */
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 0);
    put_raw_str(&b, 0, "", 0, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    assert_int_equal(decode_request_buf(&b), -EPROTO);
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 0);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 0, "", 0, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    assert_int_equal(decode_request_buf(&b), -EPROTO);

    /* Header count larger than the headers present. */
    for (uint16_t n = 1; n <= 3; n++) {
        sandlet_buf_reset(&b);
        put_req_fixed(&b, n);
        put_raw_str(&b, 3, "GET", 3, 0);
        put_raw_str(&b, 1, "/", 1, 0);
        put_raw_str(&b, 1, "p", 1, 0);
        for (uint16_t i = 0; i + 1 < n; i++) {
            put_cstr(&b, "Name");
            put_cstr(&b, "value");
        }
        assert_int_equal(decode_request_buf(&b), -EPROTO);
    }
    sandlet_buf_reset(&b);
    put_req_fixed(&b, UINT16_MAX);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    put_cstr(&b, "Name");
    put_cstr(&b, "value");
    assert_int_equal(decode_request_buf(&b), -EPROTO);
    /* Header name present but its value missing. */
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 1);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    put_cstr(&b, "Name");
    assert_int_equal(decode_request_buf(&b), -EPROTO);

    /* Empty header name, first or later; an empty value is fine. */
    for (int which = 0; which < 2; which++) {
        sandlet_buf_reset(&b);
        put_req_fixed(&b, 2);
        put_raw_str(&b, 3, "GET", 3, 0);
        put_raw_str(&b, 1, "/", 1, 0);
        put_raw_str(&b, 1, "p", 1, 0);
        put_cstr(&b, which == 0 ? "" : "A");
        put_cstr(&b, "v");
        put_cstr(&b, which == 1 ? "" : "B");
        put_cstr(&b, "w");
        assert_int_equal(decode_request_buf(&b), -EPROTO);
    }
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 1);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    put_cstr(&b, "A");
    put_cstr(&b, "");
    assert_int_equal(decode_request_buf(&b), 0);

    /* Header value / name with a bad length or no NUL. */
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 1);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    put_cstr(&b, "A");
    put_raw_str(&b, 0xFFFFFFFFu, "v", 1, 0);
    assert_int_equal(decode_request_buf(&b), -EPROTO);
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 1);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    put_raw_str(&b, 1, "A", 1, 'B');
    put_cstr(&b, "v");
    assert_int_equal(decode_request_buf(&b), -EPROTO);

    sandlet_buf_free(&b);
}

static void test_response_bad_strings(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);

    /* Header count larger than the headers present. */
    sandlet_buf_reset(&b);
    sandlet_buf_put_u16(&b, 200);
    sandlet_buf_put_u16(&b, 2);
    sandlet_buf_put_u64(&b, 0);
    put_cstr(&b, "A");
    put_cstr(&b, "b");
    assert_int_equal(decode_response_buf(&b), -EPROTO);
    /* ...and the control with the right count. */
    sandlet_buf_reset(&b);
    sandlet_buf_put_u16(&b, 200);
    sandlet_buf_put_u16(&b, 1);
    sandlet_buf_put_u64(&b, 0);
    put_cstr(&b, "A");
    put_cstr(&b, "b");
    assert_int_equal(decode_response_buf(&b), 0);

    /* Empty header name. */
    sandlet_buf_reset(&b);
    sandlet_buf_put_u16(&b, 200);
    sandlet_buf_put_u16(&b, 1);
    sandlet_buf_put_u64(&b, 0);
    put_cstr(&b, "");
    put_cstr(&b, "b");
    assert_int_equal(decode_response_buf(&b), -EPROTO);

    /* Header name length past the end; value without NUL. */
    sandlet_buf_reset(&b);
    sandlet_buf_put_u16(&b, 200);
    sandlet_buf_put_u16(&b, 1);
    sandlet_buf_put_u64(&b, 0);
    put_raw_str(&b, 0xFFFFFFFFu, "A", 1, 0);
    assert_int_equal(decode_response_buf(&b), -EPROTO);
    sandlet_buf_reset(&b);
    sandlet_buf_put_u16(&b, 200);
    sandlet_buf_put_u16(&b, 1);
    sandlet_buf_put_u64(&b, 0);
    put_cstr(&b, "A");
    put_raw_str(&b, 1, "b", 1, 'c');
    sandlet_buf_put(&b, "body", 4);
    assert_int_equal(decode_response_buf(&b), -EPROTO);
    sandlet_buf_free(&b);
}

/* ---- readers ---------------------------------------------------------- */

static void test_reader_integers(void **state)
{
    (void)state;
    static const uint8_t raw[] = {0x81, 0x34, 0x12, 0x78, 0x56, 0x34, 0x12, 0xF0,
                                  0xDE, 0xBC, 0x9A, 0x78, 0x56, 0x34, 0x12, 0xAB};
    uint8_t *p = dup_exact(raw, sizeof(raw));
    sandlet_reader r;
    sandlet_reader_init(&r, p, sizeof(raw));
    assert_ptr_equal(r.p, p);
    assert_int_equal(r.len, sizeof(raw));
    assert_int_equal(r.pos, 0);
    assert_false(r.bad);
    assert_int_equal(sandlet_read_u8(&r), 0x81);
    assert_int_equal(sandlet_read_u16(&r), 0x1234);
    assert_int_equal(sandlet_read_u32(&r), 0x12345678u);
    assert_true(sandlet_read_u64(&r) == 0x123456789ABCDEF0ull);
    assert_int_equal(r.pos, 15);
    size_t n;
    const uint8_t *rest = sandlet_read_rest(&r, &n);
    assert_int_equal(n, 1);
    assert_ptr_equal(rest, p + 15);
    assert_int_equal(r.pos, r.len);
    assert_false(r.bad);
    /* Nothing left: rest is empty, but the reader is not bad. */
    rest = sandlet_read_rest(&r, &n);
    assert_int_equal(n, 0);
    assert_ptr_equal(rest, p + sizeof(raw));
    assert_false(r.bad);
    /* A read at the exact end is short. */
    assert_int_equal(sandlet_read_u8(&r), 0);
    assert_true(r.bad);
    free(p);
}

static void test_reader_sticky_bad(void **state)
{
    (void)state;
    static const uint8_t raw[] = {0x01, 0x02, 0x03};
    uint8_t *p = dup_exact(raw, sizeof(raw));
    sandlet_reader r;
    sandlet_reader_init(&r, p, sizeof(raw));
    assert_int_equal(sandlet_read_u32(&r), 0); /* short */
    assert_true(r.bad);
    assert_int_equal(r.pos, 0);
    /* Three bytes are there, but the reader stays bad. */
    assert_int_equal(sandlet_read_u8(&r), 0);
    assert_int_equal(sandlet_read_u16(&r), 0);
    assert_true(r.bad);
    assert_int_equal(r.pos, 0);
    size_t n = 99;
    assert_string_equal(sandlet_read_str(&r, &n), "");
    assert_int_equal(n, 0);
    assert_true(r.bad);

    /* read_rest on a bad reader: nothing, pointing at the end. */
    n = 99;
    const uint8_t *rest = sandlet_read_rest(&r, &n);
    assert_int_equal(n, 0);
    assert_ptr_equal(rest, p + sizeof(raw));
    assert_true(r.bad);

    /* A bad reader does not iterate headers. */
    uint16_t left = 5;
    sandlet_wire_header h;
    assert_false(sandlet_wire_headers_next(&r, &left, &h));
    assert_int_equal(left, 5);

    /* Re-init clears it. */
    sandlet_reader_init(&r, p, sizeof(raw));
    assert_false(r.bad);
    assert_int_equal(sandlet_read_u16(&r), 0x0201);
    assert_int_equal(sandlet_read_u16(&r), 0); /* one byte left */
    assert_true(r.bad);
    assert_int_equal(r.pos, 2);
    rest = sandlet_read_rest(&r, &n);
    assert_int_equal(n, 0);

    /* Short u64 on a 7-byte buffer, and any read on an empty one. */
    free(p);
    static const uint8_t seven[7] = {1, 2, 3, 4, 5, 6, 7};
    p = dup_exact(seven, sizeof(seven));
    sandlet_reader_init(&r, p, sizeof(seven));
    assert_true(sandlet_read_u64(&r) == 0);
    assert_true(r.bad);
    free(p);
    p = dup_exact(seven, 0);
    sandlet_reader_init(&r, p, 0);
    assert_int_equal(sandlet_read_u8(&r), 0);
    assert_true(r.bad);
    free(p);
}

static void test_reader_str(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    put_cstr(&b, "abc");
    put_cstr(&b, "");
    sandlet_buf_put_u8(&b, 0x5A);
    uint8_t *p = dup_exact(b.data, b.len);
    sandlet_reader r;
    sandlet_reader_init(&r, p, b.len);
    size_t n = 99;
    const char *s = sandlet_read_str(&r, &n);
    assert_ptr_equal(s, (const char *)p + 4);
    assert_int_equal(n, 3);
    assert_string_equal(s, "abc");
    assert_int_equal(r.pos, 8);
    s = sandlet_read_str(&r, NULL); /* len may be NULL */
    assert_ptr_equal(s, (const char *)p + 12);
    assert_string_equal(s, "");
    assert_int_equal(r.pos, 13);
    assert_int_equal(sandlet_read_u8(&r), 0x5A);
    assert_false(r.bad);
    free(p);

    /* Str whose NUL is the very last byte: fits exactly. */
    sandlet_buf_reset(&b);
    put_raw_str(&b, 2, "hi", 2, 0);
    p = dup_exact(b.data, b.len);
    sandlet_reader_init(&r, p, b.len);
    assert_string_equal(sandlet_read_str(&r, &n), "hi");
    assert_false(r.bad);
    assert_int_equal(r.pos, r.len);
    free(p);

    /* Length equal to the remaining bytes: no room for the NUL. */
    sandlet_buf_reset(&b);
    put_raw_str(&b, 3, "hi", 2, 0);
    p = dup_exact(b.data, b.len);
    sandlet_reader_init(&r, p, b.len);
    n = 99;
    assert_string_equal(sandlet_read_str(&r, &n), "");
    assert_int_equal(n, 0);
    assert_true(r.bad);
    free(p);

    /* Missing NUL. */
    sandlet_buf_reset(&b);
    put_raw_str(&b, 2, "hi", 2, '!');
    sandlet_buf_put(&b, "\0\0", 2);
    p = dup_exact(b.data, b.len);
    sandlet_reader_init(&r, p, b.len);
    assert_string_equal(sandlet_read_str(&r, NULL), "");
    assert_true(r.bad);
    free(p);

    /* Length field cut short. */
    static const uint8_t cut[] = {0x01, 0x00, 0x00};
    p = dup_exact(cut, sizeof(cut));
    sandlet_reader_init(&r, p, sizeof(cut));
    n = 99;
    assert_string_equal(sandlet_read_str(&r, &n), "");
    assert_int_equal(n, 0);
    assert_true(r.bad);
    free(p);

    /* Huge lengths. */
    static const uint32_t huge[] = {0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
    for (size_t i = 0; i < ARRAY_LEN(huge); i++) {
        sandlet_buf_reset(&b);
        put_raw_str(&b, huge[i], "xyz", 3, 0);
        p = dup_exact(b.data, b.len);
        sandlet_reader_init(&r, p, b.len);
        assert_string_equal(sandlet_read_str(&r, NULL), "");
        assert_true(r.bad);
        free(p);
    }
    sandlet_buf_free(&b);
}

static void test_headers_next_malformed(void **state)
{
    (void)state;
    /* headers_next on its own stops (without decrementing) at a bad pair. */
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    put_cstr(&b, "A");
    put_cstr(&b, "1");
    put_cstr(&b, "B");
    put_raw_str(&b, 50, "2", 1, 0);
    uint8_t *p = dup_exact(b.data, b.len);
    sandlet_reader r;
    sandlet_reader_init(&r, p, b.len);
    uint16_t left = 2;
    sandlet_wire_header h;
    assert_true(sandlet_wire_headers_next(&r, &left, &h));
    assert_string_equal(h.name, "A");
    assert_string_equal(h.value, "1");
    assert_int_equal(left, 1);
    assert_false(sandlet_wire_headers_next(&r, &left, &h));
    assert_int_equal(left, 1);
    assert_true(r.bad);

    /* left == 0 stops even with bytes remaining. */
    sandlet_reader_init(&r, p, b.len);
    left = 0;
    assert_false(sandlet_wire_headers_next(&r, &left, &h));
    assert_int_equal(r.pos, 0);
    assert_false(r.bad);
    free(p);
    sandlet_buf_free(&b);
}

/* A str whose bytes hold a NUL: its length says one thing, every C-string
 * reader sees another.  A header name "\0ab" passed the non-empty check
 * and reached the servlet (or the acceptor's header check) as "". */
static void test_str_embedded_nul(void **state)
{
    (void)state;
    sandlet_buf b;
    sandlet_buf_init(&b, 0);
    static const char *const bad[] = {"\0ab", "a\0b", "ab\0"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        /* As a header name, a header value, and the method of a REQUEST. */
        for (int where = 0; where < 3; where++) {
            sandlet_buf_reset(&b);
            put_req_fixed(&b, 1);
            put_raw_str(&b, 3, where == 2 ? bad[i] : "GET", 3, 0);
            put_raw_str(&b, 1, "/", 1, 0);
            put_raw_str(&b, 1, "p", 1, 0);
            put_raw_str(&b, 3, where == 0 ? bad[i] : "Abc", 3, 0);
            put_raw_str(&b, 3, where == 1 ? bad[i] : "xyz", 3, 0);
            assert_int_equal(decode_request_buf(&b), -EPROTO);
        }
        /* As a RESPONSE header name. */
        sandlet_buf_reset(&b);
        sandlet_buf_put_u16(&b, 200);
        sandlet_buf_put_u16(&b, 1);
        sandlet_buf_put_u64(&b, 0);
        put_raw_str(&b, 3, bad[i], 3, 0);
        put_raw_str(&b, 1, "v", 1, 0);
        assert_int_equal(decode_response_buf(&b), -EPROTO);
        /* And to the plain reader. */
        sandlet_buf_reset(&b);
        put_raw_str(&b, 3, bad[i], 3, 0);
        sandlet_reader r;
        sandlet_reader_init(&r, b.data, b.len);
        size_t len = 99;
        assert_string_equal(sandlet_read_str(&r, &len), "");
        assert_true(r.bad);
        assert_int_equal(len, 0);
    }
    /* Control: the same shapes without the NUL decode. */
    sandlet_buf_reset(&b);
    put_req_fixed(&b, 1);
    put_raw_str(&b, 3, "GET", 3, 0);
    put_raw_str(&b, 1, "/", 1, 0);
    put_raw_str(&b, 1, "p", 1, 0);
    put_raw_str(&b, 3, "Abc", 3, 0);
    put_raw_str(&b, 3, "xyz", 3, 0);
    assert_int_equal(decode_request_buf(&b), 0);
    sandlet_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_known_bytes),
        cmocka_unit_test(test_header_roundtrip),
        cmocka_unit_test(test_header_with_trailing_bytes),
        cmocka_unit_test(test_header_short),
        cmocka_unit_test(test_header_bad_version),
        cmocka_unit_test(test_header_bad_type),
        cmocka_unit_test(test_header_bad_flags),
        cmocka_unit_test(test_header_too_long),
        cmocka_unit_test(test_type_name),
        cmocka_unit_test(test_buf_put_integers),
        cmocka_unit_test(test_buf_limit),
        cmocka_unit_test(test_buf_limit_reserve),
        cmocka_unit_test(test_buf_put_str_too_long),
        cmocka_unit_test(test_buf_consume_reset),
        cmocka_unit_test(test_buf_growth),
        cmocka_unit_test(test_buf_wipe),
        cmocka_unit_test(test_frame_begin_finish),
        cmocka_unit_test(test_frame_init_payload),
        cmocka_unit_test(test_roundtrip_every_type),
        cmocka_unit_test(test_encode_rollback),
        cmocka_unit_test(test_header_abort_flag),
        cmocka_unit_test(test_request_open_and_reqbody),
        cmocka_unit_test(test_buf_shrink),
        cmocka_unit_test(test_frame_finish_limited_buf),
        cmocka_unit_test(test_request_known_bytes),
        cmocka_unit_test(test_request_roundtrip),
        cmocka_unit_test(test_request_many_headers),
        cmocka_unit_test(test_request_body_nul),
        cmocka_unit_test(test_request_max_fits),
        cmocka_unit_test(test_request_too_big),
        cmocka_unit_test(test_request_split_1mib),
        cmocka_unit_test(test_response_known_bytes),
        cmocka_unit_test(test_response_roundtrip),
        cmocka_unit_test(test_response_body_nul),
        cmocka_unit_test(test_response_status),
        cmocka_unit_test(test_request_truncated),
        cmocka_unit_test(test_response_truncated),
        cmocka_unit_test(test_request_bad_strings),
        cmocka_unit_test(test_response_bad_strings),
        cmocka_unit_test(test_reader_integers),
        cmocka_unit_test(test_reader_sticky_bad),
        cmocka_unit_test(test_reader_str),
        cmocka_unit_test(test_headers_next_malformed),
        cmocka_unit_test(test_str_embedded_nul),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_mandelbrot.c - the mandelbrot example with its descriptor linked
 * into this program (sl_test_new): parameter bounds (400 before any
 * work), text output identical to mandel_plain's, XPM shape, and a PNG
 * checked byte by byte with checksums computed here independently of
 * png.c (bitwise CRC, plain adler).  It must never trust png.c to check
 * png.c.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sandlet/test.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The servlet's descriptor, from mandelbrot.c linked into this test. */
extern const sl_servlet sl_servlet_descriptor;

static int setup(void **state)
{
    sl_test *t = sl_test_new(&sl_servlet_descriptor, NULL);
    *state = t;
    return t ? 0 : -1;
}

static int teardown(void **state)
{
    sl_test_free(*state);
    return 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Bit at a time, straight from the PNG specification's definition. */
static uint32_t slow_crc(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static uint32_t slow_adler(const uint8_t *p, size_t n)
{
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + p[i]) % 65521u;
        b = (b + a) % 65521u;
    }
    return b << 16 | a;
}

static void test_absurd_requests_get_400(void **state)
{
    sl_test *t = *state;
    static const char *const bad[] = {
        "/mandelbrot?width=0",
        "/mandelbrot?width=2001",
        "/mandelbrot?width=2000&height=2000",
        "/mandelbrot?width=-5",
        "/mandelbrot?width=12abc",
        "/mandelbrot?width=99999999999999999999",
        "/mandelbrot?iter=0",
        "/mandelbrot?iter=10001",
        "/mandelbrot?width=1000&height=1000&iter=257",
        "/mandelbrot?x0=nan",
        "/mandelbrot?x0=inf",
        "/mandelbrot?x0=1e999",
        "/mandelbrot?x0=-5",
        "/mandelbrot?x0=",
        "/mandelbrot?x0=1&x1=0",
        "/mandelbrot?y0=0.5&y1=0.5",
        "/mandelbrot?format=gif",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sl_test_response *r = sl_test_get(t, bad[i]);
        assert_non_null(r);
        if (sl_test_status(r) != 400)
            fail_msg("%s: status %d", bad[i], sl_test_status(r));
        assert_non_null(strstr(sl_test_body_str(r), "bad request"));
    }
    sl_test_request *rq = sl_test_request_new(t, "POST", "/mandelbrot");
    assert_int_equal(sl_test_status(sl_test_run(rq)), 405);
    /* The largest allowed sizes pass the checks (tiny work: iter=1). */
    assert_int_equal(sl_test_status(sl_test_get(t, "/mandelbrot?width=2000&height=500&iter=1&"
                                                   "format=text")),
                     200);
}

static void test_text_matches_the_plain_program(void **state)
{
    sl_test *t = *state;
    sl_test_response *r =
        sl_test_get(t, "/mandelbrot?width=70&height=30&iter=60&x0=-2&y0=-1.2&x1=0.8&y1=1.2&"
                       "format=text");
    assert_int_equal(sl_test_status(r), 200);
    assert_string_equal(sl_test_header(r, "Content-Type"), "text/plain; charset=utf-8");
    assert_int_equal(sl_test_body_len(r), 71 * 30);
    const char *b = sl_test_body_str(r);
    /* The middle of the top row is outside, the point (-0.2, 0) inside. */
    assert_int_equal(b[35], ' ');
    assert_int_equal(b[15 * 71 + 45], '@');

    const char *dir = getenv("SANDLET_BUILDDIR");
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "%s/examples/mandelbrot/mandel_plain 70 30 60 -2 -1.2 0.8 1.2",
             dir ? dir : ".");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    static char plain[71 * 30 + 16];
    size_t n = fread(plain, 1, sizeof(plain), p);
    assert_int_equal(pclose(p), 0);
    assert_int_equal(n, 71 * 30);
    assert_memory_equal(plain, b, n);

    r = sl_test_get(t, "/mandelbrot?width=70&height=30&iter=60&x0=-2&y0=-1.2&x1=0.8&y1=1.2");
    assert_string_equal(sl_test_header(r, "Content-Type"), "text/html; charset=utf-8");
    assert_non_null(strstr(sl_test_body_str(r), "<pre>\n"));
    assert_non_null(strstr(sl_test_body_str(r), plain + 71)); /* rows 2.. as in text */
}

static void test_xpm(void **state)
{
    sl_test *t = *state;
    sl_test_response *r = sl_test_get(t, "/mandelbrot?width=20&height=10&format=xpm");
    assert_int_equal(sl_test_status(r), 200);
    assert_string_equal(sl_test_header(r, "Content-Type"), "image/x-xpixmap");
    const char *b = sl_test_body_str(r);
    assert_memory_equal(b, "/* XPM */\n", 10);
    assert_non_null(strstr(b, "\"20 10 10 1\",\n"));
    assert_non_null(strstr(b, "\"@ c #000000\",\n"));
    /* 10 pixel rows of 20 characters between quotes. */
    int rows = 0;
    for (const char *p = strstr(b, "\"@ c #000000\",\n") + 15; *p == '"'; rows++) {
        const char *q = strchr(p + 1, '"');
        assert_non_null(q);
        assert_int_equal(q - p - 1, 20);
        p = strchr(q, '\n') + 1;
    }
    assert_int_equal(rows, 10);
}

/* Checks a whole PNG: signature, chunk CRCs, IHDR, zlib stored blocks
 * and adler32; returns the inflated scanlines' length and copies the
 * pixel at (x, y) to *pixel. */
static void check_png(const uint8_t *png, size_t len, uint32_t w, uint32_t h, uint32_t x,
                      uint32_t y, uint8_t *pixel)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    assert_true(len > 8 + 25 + 12 + 12);
    assert_memory_equal(png, sig, 8);
    size_t pos = 8, chunks = 0, raw_len = 0;
    uint8_t *raw = malloc((size_t)(w + 1) * h);
    assert_non_null(raw);
    bool ended = false;
    while (pos < len) {
        assert_true(len - pos >= 12);
        uint32_t n = be32(png + pos);
        assert_true(n <= len - pos - 12);
        const uint8_t *type = png + pos + 4, *data = type + 4;
        assert_int_equal(be32(data + n), slow_crc(type, n + 4));
        if (chunks == 0) {
            assert_memory_equal(type, "IHDR", 4);
            assert_int_equal(n, 13);
            assert_int_equal(be32(data), w);
            assert_int_equal(be32(data + 4), h);
            assert_int_equal(data[8], 8); /* bit depth */
            assert_int_equal(data[9], 0); /* grayscale */
            assert_int_equal(data[10] | data[11] | data[12], 0);
        } else if (memcmp(type, "IDAT", 4) == 0) {
            assert_true(n >= 2 + 5 + 4);
            assert_int_equal(data[0], 0x78);
            assert_int_equal((data[0] << 8 | data[1]) % 31, 0);
            size_t p = 2;
            bool final = false;
            while (!final) {
                assert_true(p + 5 <= n - 4);
                final = data[p] & 1;
                assert_int_equal(data[p] & 6, 0); /* stored */
                unsigned bl = data[p + 1] | data[p + 2] << 8;
                unsigned nl = data[p + 3] | data[p + 4] << 8;
                assert_int_equal(bl ^ nl, 0xffff);
                p += 5;
                assert_true(bl <= n - 4 - p);
                assert_true(raw_len + bl <= (size_t)(w + 1) * h);
                memcpy(raw + raw_len, data + p, bl);
                raw_len += bl;
                p += bl;
            }
            assert_int_equal(p, n - 4);
            assert_int_equal(be32(data + p), slow_adler(raw, raw_len));
        } else {
            assert_memory_equal(type, "IEND", 4);
            assert_int_equal(n, 0);
            ended = true;
        }
        pos += 12 + n;
        chunks++;
    }
    assert_true(ended);
    assert_int_equal(pos, len);
    assert_int_equal(chunks, 3);
    assert_int_equal(raw_len, (size_t)(w + 1) * h);
    for (uint32_t r = 0; r < h; r++)
        assert_int_equal(raw[(size_t)r * (w + 1)], 0); /* filter: none */
    *pixel = raw[(size_t)y * (w + 1) + 1 + x];
    free(raw);
}

static void test_png(void **state)
{
    sl_test *t = *state;
    sl_test_response *r = sl_test_get(t, "/mandelbrot?width=31&height=21&iter=50&format=png");
    assert_int_equal(sl_test_status(r), 200);
    assert_string_equal(sl_test_header(r, "Content-Type"), "image/png");
    size_t len;
    const uint8_t *png = sl_test_body(r, &len);
    assert_int_equal(len, sl_test_body_len(r));
    uint8_t px;
    /* Top-left corner (-2, 1.25) escapes at once: nearly white. */
    check_png(png, len, 31, 21, 0, 0, &px);
    assert_true(px > 200);
    /* Pixel (22, 10) is about (-0.0, 0.0): inside the set, black. */
    check_png(png, len, 31, 21, 22, 10, &px);
    assert_int_equal(px, 0);

    /* Large enough for several stored blocks (64 KiB each). */
    r = sl_test_get(t, "/mandelbrot?width=400&height=400&iter=20&format=png");
    assert_int_equal(sl_test_status(r), 200);
    png = sl_test_body(r, &len);
    check_png(png, len, 400, 400, 0, 0, &px);
    assert_int_equal(len, 8 + 25 + 12 + 2 + 401 * 400 + 5 * 3 + 4 + 12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_absurd_requests_get_400, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_matches_the_plain_program, setup, teardown),
        cmocka_unit_test_setup_teardown(test_xpm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_png, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

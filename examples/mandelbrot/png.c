/*
 * png.c - see png.h.  Stored deflate blocks make the file about as large
 * as the raw pixels, which is fine for a demonstration servlet and keeps
 * the code free of a compression library.  Every size is computed up
 * front in size_t with overflow checks; the writer never reallocates.
 */
#include "png.h"

#include <string.h>

#define STORED_MAX 65535u

static size_t raw_size(uint32_t w, uint32_t h)
{
    /* One filter byte per row. */
    return ((size_t)w + 1) * h;
}

size_t png_gray_size(uint32_t w, uint32_t h)
{
    if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu)
        return 0;
    if ((size_t)w + 1 > SIZE_MAX / h)
        return 0;
    size_t raw = raw_size(w, h);
    size_t blocks = raw / STORED_MAX + (raw % STORED_MAX ? 1 : 0);
    size_t zlib = 2 + raw + 5 * blocks + 4;
    if (zlib > 0x7fffffffu)
        return 0;
    return 8 + (12 + 13) + (12 + zlib) + 12;
}

uint32_t png_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

uint32_t png_adler32(uint32_t adler, const uint8_t *p, size_t n)
{
    uint32_t a = adler & 0xffff, b = adler >> 16;
    while (n > 0) {
        /* 5552 bytes keep b below 2^32 before the modulo (zlib's bound). */
        size_t k = n < 5552 ? n : 5552;
        n -= k;
        while (k--) {
            a += *p++;
            b += a;
        }
        a %= 65521u;
        b %= 65521u;
    }
    return b << 16 | a;
}

static uint8_t *put32(uint8_t *o, uint32_t v)
{
    o[0] = (uint8_t)(v >> 24);
    o[1] = (uint8_t)(v >> 16);
    o[2] = (uint8_t)(v >> 8);
    o[3] = (uint8_t)v;
    return o + 4;
}

/* Writes length and type; the caller writes the data; end_chunk adds the
 * CRC over type and data. */
static uint8_t *begin_chunk(uint8_t *o, const char *type, size_t len)
{
    o = put32(o, (uint32_t)len);
    memcpy(o, type, 4);
    return o + 4;
}

static uint8_t *end_chunk(uint8_t *type_at, uint8_t *o)
{
    return put32(o, png_crc32(0, type_at, (size_t)(o - type_at)));
}

size_t png_gray_encode(const uint8_t *pixels, uint32_t w, uint32_t h, uint8_t *out)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    size_t total = png_gray_size(w, h);
    if (total == 0)
        return 0;
    uint8_t *o = out;
    memcpy(o, sig, 8);
    o += 8;

    o = begin_chunk(o, "IHDR", 13);
    uint8_t *type = o - 4;
    o = put32(o, w);
    o = put32(o, h);
    *o++ = 8; /* bit depth */
    *o++ = 0; /* grayscale */
    *o++ = 0; /* deflate */
    *o++ = 0; /* adaptive filtering (every row uses filter 0) */
    *o++ = 0; /* no interlace */
    o = end_chunk(type, o);

    size_t raw = raw_size(w, h);
    size_t blocks = raw / STORED_MAX + (raw % STORED_MAX ? 1 : 0);
    o = begin_chunk(o, "IDAT", 2 + raw + 5 * blocks + 4);
    type = o - 4;
    *o++ = 0x78; /* deflate, 32 KiB window */
    *o++ = 0x01; /* no preset dictionary; (0x78 << 8 | 0x01) % 31 == 0 */
    /* The stored blocks' payload is the filtered rows: row by row, a 0
     * filter byte then the pixels, cut into blocks of at most 64 KiB. */
    uint32_t adler = 1;
    size_t row = 0, col = 0; /* col 0 is the filter byte */
    for (size_t done = 0; done < raw;) {
        size_t n = raw - done < STORED_MAX ? raw - done : STORED_MAX;
        done += n;
        *o++ = done == raw ? 1 : 0; /* BFINAL, BTYPE 00 */
        *o++ = (uint8_t)n;
        *o++ = (uint8_t)(n >> 8);
        uint16_t nn = (uint16_t)~n;
        *o++ = (uint8_t)nn;
        *o++ = (uint8_t)(nn >> 8);
        uint8_t *data = o;
        /* n >= 1 here (done < raw); cppcheck loses the loop condition. */
        // cppcheck-suppress knownConditionTrueFalse
        for (size_t i = 0; i < n; i++) {
            *o++ = col == 0 ? 0 : pixels[row * w + col - 1];
            if (++col == (size_t)w + 1) {
                col = 0;
                row++;
            }
        }
        adler = png_adler32(adler, data, n);
    }
    o = put32(o, adler);
    o = end_chunk(type, o);

    o = begin_chunk(o, "IEND", 0);
    o = end_chunk(o - 4, o);
    return (size_t)(o - out);
}

/*
 * png.h - a minimal PNG writer for 8-bit grayscale images: zlib stream of
 * stored (uncompressed) deflate blocks, crc32 and adler32 by hand.  Small
 * enough to read in one sitting; it must never write past the size
 * png_gray_size reports.
 */
#ifndef SANDLET_EXAMPLE_PNG_H
#define SANDLET_EXAMPLE_PNG_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of the PNG for a w x h gray image; 0 when too large to encode. */
size_t png_gray_size(uint32_t w, uint32_t h);
/* Encodes pixels (h rows of w bytes) into out, which holds
 * png_gray_size(w, h) bytes.  Returns the bytes written. */
size_t png_gray_encode(const uint8_t *pixels, uint32_t w, uint32_t h, uint8_t *out);
/* The checksums, exposed for tests. */
uint32_t png_crc32(uint32_t crc, const uint8_t *p, size_t n);
uint32_t png_adler32(uint32_t adler, const uint8_t *p, size_t n);

#endif

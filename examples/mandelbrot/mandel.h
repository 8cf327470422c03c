/*
 * mandel.h - the Mandelbrot computation shared by the servlet and the
 * plain program (mandel_plain.c), so that the benchmark compares the same
 * work with and without sandlet around it.  Header-only and free of I/O:
 * it must never allocate or print.
 */
#ifndef SANDLET_EXAMPLE_MANDEL_H
#define SANDLET_EXAMPLE_MANDEL_H

#include <stddef.h>

/* Limits every caller enforces before computing: a request may not ask
 * for more than this much work. */
#define MANDEL_MAX_SIDE   2000u
#define MANDEL_MAX_PIXELS 1000000u
#define MANDEL_MAX_ITER   10000u
#define MANDEL_MAX_WORK   256000000ull /* pixels x iterations: CSE's 1024x768x256 fits */
#define MANDEL_MAX_COORD  4.0

/* Characters for text output, from "escaped at once" to "inside". */
static const char mandel_shades[] = " .:-=+*#%@";

/* Iterations until z escapes |z| > 2, or limit when it stays bounded. */
static inline unsigned mandel_point(double cx, double cy, unsigned limit)
{
    double x = 0, y = 0;
    unsigned i = 0;
    while (i < limit && x * x + y * y <= 4.0) {
        double t = x * x - y * y + cx;
        y = 2 * x * y + cy;
        x = t;
        i++;
    }
    return i;
}

/* The point of pixel (px, py) in an image of w x h over [x0,x1]x[y0,y1];
 * row 0 is the top (y1). */
static inline void mandel_pixel(unsigned px, unsigned py, unsigned w, unsigned h, double x0,
                                double y0, double x1, double y1, double *cx, double *cy)
{
    *cx = x0 + (x1 - x0) * ((double)px + 0.5) / (double)w;
    *cy = y1 - (y1 - y0) * ((double)py + 0.5) / (double)h;
}

/* Index into mandel_shades for an iteration count. */
static inline size_t mandel_shade(unsigned it, unsigned limit)
{
    const size_t n = sizeof(mandel_shades) - 1;
    if (it >= limit)
        return n - 1;
    return (size_t)it * (n - 1) / limit;
}

/* Gray level for an iteration count: inside black, fast escape white. */
static inline unsigned char mandel_gray(unsigned it, unsigned limit)
{
    if (it >= limit)
        return 0;
    return (unsigned char)(255 - (unsigned long)it * 255 / limit);
}

#endif

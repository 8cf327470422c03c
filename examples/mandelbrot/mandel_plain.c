/*
 * mandel_plain.c - the mandelbrot servlet's computation as an ordinary
 * program: the same mandel.h, the same limits, the same text output
 * ("format=text"), so that the benchmark can subtract the work from the
 * servlet's time and see what serving it costs.
 *
 * Usage: mandel_plain [WIDTH HEIGHT ITER [X0 Y0 X1 Y1]]
 */
#include "mandel.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int whole(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(s, &end, 10);
    if (errno || *end || *s < '0' || *s > '9' || n < lo || n > hi)
        return -1;
    *out = (unsigned)n;
    return 0;
}

static int coord(const char *s, double *out)
{
    char *end;
    double d = strtod(s, &end);
    if (!*s || *end || !isfinite(d) || fabs(d) > MANDEL_MAX_COORD)
        return -1;
    *out = d;
    return 0;
}

int main(int argc, char **argv)
{
    unsigned w = 64, h = 32, iter = 100;
    double x0 = -2.0, y0 = -1.25, x1 = 0.75, y1 = 1.25;
    if ((argc != 1 && argc != 4 && argc != 8) ||
        (argc >= 4 && (whole(argv[1], 1, MANDEL_MAX_SIDE, &w) < 0 ||
                       whole(argv[2], 1, MANDEL_MAX_SIDE, &h) < 0 ||
                       whole(argv[3], 1, MANDEL_MAX_ITER, &iter) < 0)) ||
        (argc == 8 && (coord(argv[4], &x0) < 0 || coord(argv[5], &y0) < 0 ||
                       coord(argv[6], &x1) < 0 || coord(argv[7], &y1) < 0)) ||
        (unsigned long long)w * h > MANDEL_MAX_PIXELS ||
        (unsigned long long)w * h * iter > MANDEL_MAX_WORK || !(x0 < x1) || !(y0 < y1)) {
        fprintf(stderr, "usage: %s [WIDTH HEIGHT ITER [X0 Y0 X1 Y1]] (the servlet's limits)\n",
                argv[0]);
        return 2;
    }
    for (unsigned py = 0; py < h; py++) {
        for (unsigned px = 0; px < w; px++) {
            double cx, cy;
            mandel_pixel(px, py, w, h, x0, y0, x1, y1, &cx, &cy);
            putchar(mandel_shades[mandel_shade(mandel_point(cx, cy, iter), iter)]);
        }
        putchar('\n');
    }
    return ferror(stdout) ? 1 : 0;
}

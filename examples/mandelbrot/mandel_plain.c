/*
 * mandel_plain.c - the mandelbrot servlet's computation as an ordinary
 * program: the same mandel.h, the same limits, the same text output
 * ("format=text"), so that the benchmark can subtract the work from the
 * servlet's time and see what serving it costs.
 *
 * Usage: mandel_plain [-t] [WIDTH HEIGHT ITER [X0 Y0 X1 Y1]]
 * -t writes the microseconds spent computing and printing to standard
 * error, without the process's start-up (bench/mandel-overhead).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "mandel.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
    unsigned w = 64, h = 32, iter = 100;
    const char *prog = argv[0];
    bool timed = argc > 1 && strcmp(argv[1], "-t") == 0;
    if (timed) {
        argc--;
        argv++;
    }
    double x0 = -2.0, y0 = -1.25, x1 = 0.75, y1 = 1.25;
    if ((argc != 1 && argc != 4 && argc != 8) ||
        (argc >= 4 && (whole(argv[1], 1, MANDEL_MAX_SIDE, &w) < 0 ||
                       whole(argv[2], 1, MANDEL_MAX_SIDE, &h) < 0 ||
                       whole(argv[3], 1, MANDEL_MAX_ITER, &iter) < 0)) ||
        (argc == 8 && (coord(argv[4], &x0) < 0 || coord(argv[5], &y0) < 0 ||
                       coord(argv[6], &x1) < 0 || coord(argv[7], &y1) < 0)) ||
        (unsigned long long)w * h > MANDEL_MAX_PIXELS ||
        (unsigned long long)w * h * iter > MANDEL_MAX_WORK || !(x0 < x1) || !(y0 < y1)) {
        fprintf(stderr, "usage: %s [-t] [WIDTH HEIGHT ITER [X0 Y0 X1 Y1]] (the servlet's limits)\n",
                prog);
        return 2;
    }
    long long t0 = now_us();
    /* As the servlet does it: every count first, then line by line. */
    unsigned *it = malloc((size_t)w * h * sizeof(*it));
    char *line = malloc((size_t)w + 1);
    if (!it || !line) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    for (unsigned py = 0; py < h; py++)
        for (unsigned px = 0; px < w; px++) {
            double cx, cy;
            mandel_pixel(px, py, w, h, x0, y0, x1, y1, &cx, &cy);
            it[(size_t)py * w + px] = mandel_point(cx, cy, iter);
        }
    for (unsigned py = 0; py < h; py++) {
        for (unsigned px = 0; px < w; px++)
            line[px] = mandel_shades[mandel_shade(it[(size_t)py * w + px], iter)];
        line[w] = '\n';
        fwrite(line, 1, (size_t)w + 1, stdout);
    }
    free(line);
    free(it);
    if (fflush(stdout) != 0 || ferror(stdout))
        return 1;
    if (timed)
        fprintf(stderr, "%lld\n", now_us() - t0);
    return 0;
}

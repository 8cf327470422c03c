/*
 * mandelbrot.c - CSE's calculation servlet: renders the Mandelbrot set
 * for the area, size and iteration limit given as parameters, as HTML
 * (default), plain text, XPM or PNG.  Absurd requests (too many pixels,
 * too much work, coordinates that are not finite) get 400 before any
 * computing, so one client cannot buy minutes of a worker.
 *
 * Parameters: width, height, x0, y0, x1, y1, iter, format.
 */
#include <sandlet.h>

#include "mandel.h"
#include "png.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    unsigned w, h, iter;
    double x0, y0, x1, y1;
} job;

static int bad(sl_response *rs, const char *why)
{
    sl_set_content_type(rs, "text/plain; charset=utf-8");
    sl_printf(rs, "bad request: %s\n", why);
    return 400;
}

/* A whole decimal number in [lo, hi], or false. */
static bool get_uint(sl_request *rq, const char *name, unsigned fallback, unsigned lo, unsigned hi,
                     unsigned *out)
{
    const char *v = sl_param(rq, name, NULL);
    if (!v) {
        *out = fallback;
        return true;
    }
    if (*v < '0' || *v > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || n < lo || n > hi)
        return false;
    *out = (unsigned)n;
    return true;
}

static bool get_coord(sl_request *rq, const char *name, double fallback, double *out)
{
    const char *v = sl_param(rq, name, NULL);
    if (!v) {
        *out = fallback;
        return true;
    }
    if (!*v)
        return false;
    char *end;
    double d = strtod(v, &end);
    if (*end || !isfinite(d) || fabs(d) > MANDEL_MAX_COORD)
        return false;
    *out = d;
    return true;
}

static const char *parse(sl_request *rq, job *j)
{
    if (!get_uint(rq, "width", 64, 1, MANDEL_MAX_SIDE, &j->w) ||
        !get_uint(rq, "height", 32, 1, MANDEL_MAX_SIDE, &j->h))
        return "width and height must be whole numbers from 1 to 2000";
    if ((unsigned long long)j->w * j->h > MANDEL_MAX_PIXELS)
        return "at most 1000000 pixels";
    if (!get_uint(rq, "iter", 100, 1, MANDEL_MAX_ITER, &j->iter))
        return "iter must be a whole number from 1 to 10000";
    if ((unsigned long long)j->w * j->h * j->iter > MANDEL_MAX_WORK)
        return "width x height x iter must stay at or below 256000000";
    if (!get_coord(rq, "x0", -2.0, &j->x0) || !get_coord(rq, "y0", -1.25, &j->y0) ||
        !get_coord(rq, "x1", 0.75, &j->x1) || !get_coord(rq, "y1", 1.25, &j->y1))
        return "coordinates must be numbers from -4 to 4";
    if (!(j->x0 < j->x1) || !(j->y0 < j->y1))
        return "the area needs x0 < x1 and y0 < y1";
    return NULL;
}

/* Iteration counts, row by row from the top. */
static unsigned *compute(sl_request *rq, const job *j)
{
    unsigned *it = sl_alloc(rq, (size_t)j->w * j->h * sizeof(*it));
    if (!it)
        return NULL;
    for (unsigned py = 0; py < j->h; py++)
        for (unsigned px = 0; px < j->w; px++) {
            double cx, cy;
            mandel_pixel(px, py, j->w, j->h, j->x0, j->y0, j->x1, j->y1, &cx, &cy);
            it[(size_t)py * j->w + px] = mandel_point(cx, cy, j->iter);
        }
    return it;
}

static int text(sl_request *rq, sl_response *rs, const job *j, const unsigned *it, bool html)
{
    char *line = sl_alloc(rq, (size_t)j->w + 1);
    if (!line)
        return 500;
    if (html) {
        sl_set_content_type(rs, "text/html; charset=utf-8");
        sl_printf(rs,
                  "<!DOCTYPE html>\n<html><head><title>Mandelbrot</title></head><body>\n"
                  "<h1>Mandelbrot %ux%u, %u iterations</h1>\n<pre>\n",
                  j->w, j->h, j->iter);
    } else {
        sl_set_content_type(rs, "text/plain; charset=utf-8");
    }
    for (unsigned py = 0; py < j->h; py++) {
        for (unsigned px = 0; px < j->w; px++)
            line[px] = mandel_shades[mandel_shade(it[(size_t)py * j->w + px], j->iter)];
        line[j->w] = '\n';
        sl_write(rs, line, (size_t)j->w + 1);
    }
    if (html)
        sl_puts(rs, "</pre>\n</body></html>\n");
    return 200;
}

/* XPM with one character per shade, as the text output. */
static int xpm(sl_request *rq, sl_response *rs, const job *j, const unsigned *it)
{
    const size_t n = sizeof(mandel_shades) - 1;
    char *line = sl_alloc(rq, (size_t)j->w + 5);
    if (!line)
        return 500;
    sl_set_content_type(rs, "image/x-xpixmap");
    sl_printf(rs, "/* XPM */\nstatic char *mandelbrot[] = {\n\"%u %u %zu 1\",\n", j->w, j->h, n);
    for (size_t i = 0; i < n; i++) {
        unsigned g = (unsigned)(255 - i * 255 / (n - 1));
        sl_printf(rs, "\"%c c #%02x%02x%02x\",\n", mandel_shades[i], g, g, g);
    }
    for (unsigned py = 0; py < j->h; py++) {
        size_t k = 0;
        line[k++] = '"';
        for (unsigned px = 0; px < j->w; px++)
            line[k++] = mandel_shades[mandel_shade(it[(size_t)py * j->w + px], j->iter)];
        line[k++] = '"';
        if (py + 1 < j->h)
            line[k++] = ',';
        line[k++] = '\n';
        sl_write(rs, line, k);
    }
    sl_puts(rs, "};\n");
    return 200;
}

static int png(sl_request *rq, sl_response *rs, const job *j, const unsigned *it)
{
    size_t npix = (size_t)j->w * j->h;
    size_t size = png_gray_size(j->w, j->h);
    uint8_t *pix = sl_alloc(rq, npix);
    uint8_t *out = size ? sl_alloc(rq, size) : NULL;
    if (!pix || !out)
        return 500;
    for (size_t i = 0; i < npix; i++)
        pix[i] = mandel_gray(it[i], j->iter);
    size_t n = png_gray_encode(pix, j->w, j->h, out);
    sl_set_content_type(rs, "image/png");
    sl_write(rs, out, n);
    return 200;
}

static int service(sl_request *rq, sl_response *rs)
{
    const char *m = sl_method(rq);
    if (strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0) {
        sl_set_header(rs, "Allow", "GET, HEAD");
        return 405;
    }
    job j;
    const char *why = parse(rq, &j);
    if (why)
        return bad(rs, why);
    const char *format = sl_param(rq, "format", "html");
    bool is_html = strcmp(format, "html") == 0, is_text = strcmp(format, "text") == 0;
    bool is_xpm = strcmp(format, "xpm") == 0, is_png = strcmp(format, "png") == 0;
    if (!is_html && !is_text && !is_xpm && !is_png)
        return bad(rs, "format must be html, text, xpm or png");
    unsigned *it = compute(rq, &j);
    if (!it)
        return 500;
    if (is_png)
        return png(rq, rs, &j, it);
    if (is_xpm)
        return xpm(rq, rs, &j, it);
    return text(rq, rs, &j, it, is_html);
}

SL_SERVLET(mandelbrot) = {.service = service, .session = SL_SESSION_NONE};

/*
 * main.c - sandlet-csp(1): the C Server Pages tool.  "translate" reads a
 * page and writes the servlet's C source (to -o FILE or stdout), with
 * compiler-style diagnostics (page.csp:LINE:COL: error: ...).
 *
 * It must never compile or run anything: "compile" (translate, build the
 * shared object) belongs to the page-serving part and is not here yet.
 */
#include "config.h"

#include "csp/translate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: sandlet-csp translate PAGE.csp [-o OUT.c]\n"
               "  translate  write the C source of the servlet the page compiles into\n"
               "             (to OUT.c, or to standard output)\n"
               "A 'compile' mode (page to shared object) is not available yet.\n"
               "See sandlet-csp(1) and the page language in sandlet-csp(5).\n");
}

/* Reads a whole file, refusing more than the translator accepts. */
static int read_page(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "sandlet-csp: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 65536, n = 0;
    uint8_t *b = malloc(cap);
    if (!b) {
        fprintf(stderr, "sandlet-csp: cannot read %s: out of memory\n", path);
        fclose(f);
        return -1;
    }
    const char *why = NULL;
    for (;;) {
        if (n == cap) {
            uint8_t *nb = cap > SANDLET_CSP_MAX_INPUT ? NULL : realloc(b, cap * 2);
            if (!nb) {
                why = cap > SANDLET_CSP_MAX_INPUT ? "larger than a page may be (16 MiB)"
                                                  : "out of memory";
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    if (!why && ferror(f))
        why = strerror(errno);
    if (why) {
        fprintf(stderr, "sandlet-csp: cannot read %s: %s\n", path, why);
        free(b);
        fclose(f);
        return -1;
    }
    fclose(f);
    *data = b;
    *len = n;
    return 0;
}

static int translate(const char *page, const char *outpath)
{
    uint8_t *src;
    size_t len;
    if (read_page(page, &src, &len) < 0)
        return 1;
    sandlet_buf out;
    sandlet_buf_init(&out, 0);
    sandlet_csp_error err;
    int rc = sandlet_csp_translate(page, src, len, &out, &err);
    free(src);
    if (rc < 0) {
        fprintf(stderr, "%s:%lu:%lu: error: %s\n", page, err.line, err.col, err.msg);
        sandlet_buf_free(&out);
        return 1;
    }
    FILE *f = outpath ? fopen(outpath, "wb") : stdout;
    if (!f) {
        fprintf(stderr, "sandlet-csp: cannot create %s: %s\n", outpath, strerror(errno));
        sandlet_buf_free(&out);
        return 1;
    }
    bool ok = fwrite(out.data, 1, out.len, f) == out.len;
    ok = (f == stdout ? fflush(f) == 0 : fclose(f) == 0) && ok;
    sandlet_buf_free(&out);
    if (!ok) {
        fprintf(stderr, "sandlet-csp: cannot write %s: %s\n", outpath ? outpath : "standard output",
                strerror(errno));
        if (outpath)
            remove(outpath);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "translate") != 0) {
        if (argc >= 2)
            fprintf(stderr, "sandlet-csp: unknown mode '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    const char *page = NULL, *out = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0) {
            if (i + 1 >= argc || out) {
                fprintf(stderr, "sandlet-csp: -o needs one output file\n");
                return 2;
            }
            out = argv[++i];
        } else if (!page && argv[i][0] != '-') {
            page = argv[i];
        } else {
            fprintf(stderr, "sandlet-csp: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!page) {
        fprintf(stderr, "sandlet-csp: translate needs a page\n");
        usage(stderr);
        return 2;
    }
    return translate(page, out);
}

/*
 * fuzz_multipart.c - libFuzzer target for multipart/form-data bodies
 * (src/lib/multipart.c) and the parameter parsing around them
 * (src/lib/request.c: query, urlencoded form).
 *
 * The input's first line is the request's Content-Type value, its second
 * the query string, the rest the body, byte for byte (it may hold NULs and
 * CRs).  The body is parsed twice: directly with the boundary the
 * Content-Type names, and through the servlet API (sl_param, sl_file), as
 * a servlet would.  The direct parse is the incremental parser fed the
 * body whole; it is fed again in pieces cut where a generator seeded from
 * the input says (and, for bodies up to 4 KiB, one byte at a time), and
 * every cutting must give the same result to the byte.  Invariants: every
 * value is NUL-terminated at its length, a file name holds no directory
 * part, a malformed body contributes nothing, and the two paths agree on
 * how many files there are.
 *
 * Pure computation: tens of thousands of inputs per second.  Spooling to
 * a file (a streamed body's parts past 64 KiB) is left to the unit and
 * integration tests.
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void invariant(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "FUZZ INVARIANT violated: %s\n", what);
        abort();
    }
}

/* The next line of [*p, end) as a fresh C string (NUL bytes end it). */
static char *take_line(const uint8_t **p, const uint8_t *end)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    const uint8_t *le = nl ? nl : end;
    size_t n = (size_t)(le - *p);
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    memcpy(s, *p, n);
    s[n] = '\0';
    *p = nl ? nl + 1 : end;
    return s;
}

static void check_files(const sl_request *rq, const uint8_t *body, size_t len)
{
    for (size_t i = 0; i < rq->nfiles; i++) {
        const sl_file *f = &rq->files[i].pub;
        invariant(f->len <= len && (f->data || !f->len), "file data larger than the body");
        (void)body;
        invariant(strpbrk(f->filename, "/\\") == NULL, "file name with a directory part");
        invariant(f->name && f->content_type && *f->content_type, "file without name or type");
    }
    for (size_t i = 0; i < rq->nparams; i++)
        invariant(rq->params[i].value[rq->params[i].value_len] == '\0',
                  "parameter value not NUL-terminated at its length");
}

/* The same parse, fed in pieces: cut_seed 0 one byte at a time, else
 * pieces of 1..4096 bytes from a generator.  rc, the parameters and the
 * files must equal ref's. */
static void parse_in_pieces(const sl_request *ref, int ref_rc, const uint8_t *body, size_t len,
                            const char *boundary, size_t bl, uint64_t cut_seed)
{
    sl_request rq;
    sandlet_lib_request_init(&rq);
    size_t pcap = 0, fcap = 0;
    sandlet_lib_mp *mp = malloc(sizeof(*mp));
    if (!mp) {
        sandlet_lib_request_free(&rq);
        return;
    }
    int rc = sandlet_lib_mp_init(mp, &rq, boundary, bl, &pcap, &fcap, false);
    uint64_t x = cut_seed;
    for (size_t at = 0; rc == 0 && at < len;) {
        size_t n = 1;
        if (cut_seed) {
            x ^= x << 13; /* xorshift64 */
            x ^= x >> 7;
            x ^= x << 17;
            n = 1 + (size_t)(x % ((x >> 40) % 2 ? 16 : 4096));
        }
        if (n > len - at)
            n = len - at;
        rc = sandlet_lib_mp_feed(mp, body + at, n);
        at += n;
    }
    if (rc == 0)
        rc = sandlet_lib_mp_finish(mp);
    sandlet_lib_mp_release(mp);
    free(mp);
    if (rc != -ENOMEM && ref_rc != -ENOMEM) {
        invariant(rc == ref_rc, "pieces and whole body disagree on the result");
        if (rc == 0) {
            invariant(rq.nparams == ref->nparams && rq.nfiles == ref->nfiles,
                      "pieces and whole body disagree on the counts");
            for (size_t i = 0; i < rq.nparams; i++)
                invariant(
                    !strcmp(rq.params[i].name, ref->params[i].name) &&
                        rq.params[i].value_len == ref->params[i].value_len &&
                        !memcmp(rq.params[i].value, ref->params[i].value, rq.params[i].value_len),
                    "pieces and whole body disagree on a parameter");
            for (size_t i = 0; i < rq.nfiles; i++) {
                const sl_file *a = &rq.files[i].pub, *b = &ref->files[i].pub;
                invariant(!strcmp(a->name, b->name) && !strcmp(a->filename, b->filename) &&
                              !strcmp(a->content_type, b->content_type) && a->len == b->len &&
                              (!a->len || !memcmp(a->data, b->data, a->len)),
                          "pieces and whole body disagree on a file");
            }
        }
    }
    sandlet_lib_request_free(&rq);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    char *ct = take_line(&p, end);
    char *query = take_line(&p, end);
    /* The body in a buffer of its own, so that ASan sees any read past
     * its end. */
    size_t blen = (size_t)(end - p);
    uint8_t *body = malloc(blen ? blen : 1);
    if (!ct || !query || !body)
        goto out;
    memcpy(body, p, blen);

    /* Directly. */
    sl_request rq;
    sandlet_lib_request_init(&rq);
    const char *boundary;
    size_t bl;
    size_t direct_files = 0;
    bool direct_ok = false;
    int rc = sandlet_lib_multipart_boundary(&rq.arena, ct, &boundary, &bl);
    if (rc == 0) {
        invariant(bl >= 1 && bl <= 70 && strlen(boundary) >= bl, "boundary length out of range");
        size_t pcap = 0, fcap = 0;
        rc = sandlet_lib_multipart_parse(&rq, body, blen, boundary, bl, &pcap, &fcap);
        invariant(rc == 0 || rc == -EBADMSG || rc == -ENOMEM, "unexpected multipart error");
        if (rc == 0) {
            check_files(&rq, body, blen);
            direct_files = rq.nfiles;
            direct_ok = true;
        }
        /* FNV-1a of the input seeds the cuts: a mutation moves them. */
        uint64_t seed = 1469598103934665603ull;
        for (size_t i = 0; i < size; i++)
            seed = (seed ^ data[i]) * 1099511628211ull;
        parse_in_pieces(&rq, rc, body, blen, boundary, bl, seed | 1);
        if (blen <= 4096)
            parse_in_pieces(&rq, rc, body, blen, boundary, bl, 0);
    }
    sandlet_lib_request_free(&rq);

    /* Through the servlet API. */
    sandlet_lib_request_init(&rq);
    size_t tlen = strlen(query) + 3;
    char *target = malloc(tlen);
    if (target) {
        snprintf(target, tlen, "/?%s", query);
        sandlet_lib_request_set(&rq, "POST", target, strlen(target), "127.0.0.1:1", 11);
        sandlet_lib_request_add_header(&rq, "Content-Type", ct);
        sandlet_lib_request_set_body(&rq, body, blen);
        const char *v;
        size_t vlen;
        for (size_t i = 0; sl_param_at(&rq, i, &v, &vlen); i++)
            invariant(v[vlen] == '\0', "parameter value not NUL-terminated");
        check_files(&rq, body, blen);
        if (direct_ok)
            invariant(rq.nfiles == direct_files, "sl_file and the direct parse disagree");
        else
            invariant(rq.nfiles == 0, "files from a body that does not parse");
        if (rq.nfiles)
            invariant(sl_file_get(&rq, rq.files[0].pub.name) != NULL,
                      "a file not found by its name");
        free(target);
    }
    sandlet_lib_request_free(&rq);
out:
    free(ct);
    free(query);
    free(body);
    return 0;
}

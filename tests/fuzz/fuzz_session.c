/*
 * fuzz_session.c - libFuzzer target for finding a client's session
 * (src/lib/session.c: the id read from the session cookie, the query
 * parameter or a urlencoded form field) and for the link/form helpers
 * that carry the id for clients without cookies (sl_session_url,
 * sl_session_form_field).
 *
 * It runs a tiny servlet in-process under libsandlet-test (sl_test), whose
 * session store is the sandbox's real memory store, so the id parsing and
 * checks are the ones a worker runs.  Input lines: the request target,
 * the Cookie header, the Content-Type, a URL to rewrite, an operations
 * byte (1: create, 2: regenerate, 4: POST), a value to store; the rest is
 * the body.  "@ID@" anywhere stands for the id of a
 * session made at start-up, so that the fuzzer reaches the "found" paths
 * without guessing a 128-bit id.
 *
 * Invariants: a session found or made is either that known one or a
 * fresh one whose id the client did not offer (no fixation); the rewritten
 * URL keeps the link before '#', carries the id and ends with the
 * fragment; the form field carries the id and nothing of the input.
 * Fresh sessions are invalidated at once, so the store never fills.
 *
 * Thin on purpose: the session id's format and the cookie's name are
 * changing (a MAC, per-sandbox names); only public calls are used here.
 * About 15,000 inputs per second (one in-process servlet run each).
 */
#include "config.h"

#include <sandlet.h>
#include <sandlet/test.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static sl_test *t;
static char *known;       /* id of the session made at start */
static const char *input; /* the request's text after substitution */
static size_t input_len;

static void invariant(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "FUZZ INVARIANT violated: %s\n", what);
        abort();
    }
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && memcmp(s + a - b, tail, b) == 0;
}

static int serve(sl_request *rq, sl_response *rs)
{
    const char *ops = sl_header(rq, "X-Fuzz-Ops");
    unsigned flags = ops ? (unsigned char)ops[0] : 0;
    sl_session *s = sl_session_get(rq, rs, flags & 1);
    if (!s)
        return 204;
    const char *id = sl_session_id(s);
    bool fresh = strcmp(id, known) != 0;
    invariant(*id != '\0', "a session without an id");
    if (fresh)
        invariant(memmem(input, input_len, id, strlen(id)) == NULL,
                  "a new session took an id the client offered (fixation)");

    const char *url = sl_header(rq, "X-Fuzz-Url");
    if (url) {
        const char *u = sl_session_url(s, url);
        const char *hash = strchr(url, '#');
        size_t base = hash ? (size_t)(hash - url) : strlen(url);
        if (base > 65536) {
            invariant(strcmp(u, url) == 0, "an overlong link was changed");
        } else {
            invariant(strncmp(u, url, base) == 0, "the rewritten link lost its start");
            invariant(strstr(u + base, id) != NULL, "the rewritten link lacks the id");
            invariant(!hash || ends_with(u, hash), "the rewritten link lost its fragment");
        }
    }
    const char *field = sl_session_form_field(s);
    invariant(strstr(field, id) != NULL && strchr(field, '\n') == NULL,
              "the form field lacks the id or holds a line break");

    (void)sl_session_str(s, "k");
    const char *value = sl_header(rq, "X-Fuzz-Value");
    if (value)
        (void)sl_session_set_str(s, "k", value);
    if (fresh) {
        if (flags & 2)
            (void)sl_session_regenerate(s);
        (void)sl_session_invalidate(s);
    }
    sl_write(rs, "ok\n", 3);
    return 200;
}

static const sl_servlet servlet = {.service = serve, .session = SL_SESSION_MEMORY};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    t = sl_test_new(&servlet, NULL);
    if (!t || sl_test_session_set_str(t, "k", "start") < 0 || !sl_test_session_id(t)) {
        fprintf(stderr, "fuzz_session: cannot set up the servlet and its session\n");
        exit(1);
    }
    known = strdup(sl_test_session_id(t));
    if (!known)
        exit(1);
    return 0;
}

/* The input with every "@ID@" replaced by the known id. */
static char *substitute(const uint8_t *data, size_t size, size_t *out_len)
{
    size_t kl = strlen(known), n = 0;
    for (const uint8_t *p = data; (p = memmem(p, size - (size_t)(p - data), "@ID@", 4)) != NULL;
         p += 4)
        n++;
    char *s = malloc(size + n * kl + 1);
    if (!s)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < size;) {
        if (size - i >= 4 && memcmp(data + i, "@ID@", 4) == 0) {
            memcpy(s + o, known, kl);
            o += kl;
            i += 4;
        } else {
            s[o++] = (char)data[i++];
        }
    }
    s[o] = '\0';
    *out_len = o;
    return s;
}

/* The next line as a C string, cut in place. */
static char *line(char **p, char *end)
{
    if (*p >= end)
        return NULL;
    char *l = *p, *nl = memchr(l, '\n', (size_t)(end - l));
    if (nl) {
        *nl = '\0';
        *p = nl + 1;
    } else {
        *p = end;
    }
    return l;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len;
    char *text = substitute(data, size, &len);
    if (!text)
        return 0;
    input = text;
    input_len = len;
    char *copy = malloc(len + 1);
    if (!copy) {
        free(text);
        return 0;
    }
    memcpy(copy, text, len + 1);
    char *p = copy, *end = copy + len;
    char *target = line(&p, end), *cookie = line(&p, end), *ct = line(&p, end),
         *url = line(&p, end), *ops = line(&p, end), *value = line(&p, end);
    sl_test_jar_clear(t);
    sl_test_request *r = sl_test_request_new(t, ops && *ops & 4 ? "POST" : "GET",
                                             target && *target == '/' ? target : "/");
    if (r) {
        if (cookie && *cookie)
            sl_test_request_header(r, "Cookie", cookie);
        if (ct && *ct)
            sl_test_request_header(r, "Content-Type", ct);
        if (url)
            sl_test_request_header(r, "X-Fuzz-Url", url);
        if (ops)
            sl_test_request_header(r, "X-Fuzz-Ops", ops);
        if (value)
            sl_test_request_header(r, "X-Fuzz-Value", value);
        if (p < end)
            sl_test_request_body(r, p, (size_t)(end - p));
        sl_test_response *rs = sl_test_run(r);
        if (rs) {
            int st = sl_test_status(rs);
            invariant(st == 200 || st == 204 || st == 500, "unexpected status");
            sl_test_response_free(rs);
        }
        sl_test_request_free(r);
    }
    free(copy);
    free(text);
    input = NULL;
    return 0;
}

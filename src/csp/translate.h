/*
 * translate.h - the C Server Pages translator: a .csp page (HTML with
 * embedded C) in, the C source of one servlet out (sandlet-csp(5)).
 *
 * It must never run, compile or open anything: it is pure computation over
 * the bytes it is given, so that the tool, the fuzz target and the
 * daemon's page compiler share it unchanged.
 */
#ifndef SANDLET_CSP_TRANSLATE_H
#define SANDLET_CSP_TRANSLATE_H

#include "common/buf.h"

#include <stddef.h>
#include <stdint.h>

/* The largest page accepted; a bigger one is refused before any output. */
#define SANDLET_CSP_MAX_INPUT ((size_t)16 * 1024 * 1024)

/* Where and why a translation failed: a 1-based line and column of the
 * page, and a message that says what was expected. */
typedef struct sandlet_csp_error {
    unsigned long line;
    unsigned long col;
    char msg[256];
} sandlet_csp_error;

/*
 * Translates the page src[0..len) named name (used in #line directives and
 * for the servlet's name) into out, which the caller has initialised with
 * sandlet_buf_init.  Returns 0, or -1 with err filled in (out then holds
 * nothing usable), or -ENOMEM.
 */
int sandlet_csp_translate(const char *name, const uint8_t *src, size_t len, sandlet_buf *out,
                          sandlet_csp_error *err);

#endif /* SANDLET_CSP_TRANSLATE_H */

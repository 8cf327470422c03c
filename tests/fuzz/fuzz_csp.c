/*
 * fuzz_csp.c - libFuzzer target for the C Server Pages translator
 * (src/csp/translate.c): the input is a page.
 *
 * Checked: a translation either succeeds with a servlet (the output ends
 * with its SL_SERVLET line) or fails with a line and column inside the
 * page and a message; a page without "<%" always translates; translating
 * twice gives the same bytes.  Pure computation: no compiler is run.
 */
#include "config.h"

#include "csp/translate.h"

#include <stdbool.h>
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sandlet_buf a, b;
    sandlet_buf_init(&a, 0);
    sandlet_buf_init(&b, 0);
    sandlet_csp_error err;
    int rc = sandlet_csp_translate("fuzz.csp", data, size, &a, &err);
    bool has_tag = false;
    size_t lines = 1;
    for (size_t i = 0; i < size; i++) {
        if (data[i] == '\n')
            lines++;
        if (i + 1 < size && data[i] == '<' && data[i + 1] == '%')
            has_tag = true;
    }
    if (rc == 0) {
        static const char tail[] = "csp_page_service};\n";
        invariant(a.len > sizeof(tail) &&
                      memcmp(a.data + a.len - (sizeof(tail) - 1), tail, sizeof(tail) - 1) == 0,
                  "a translated page ends with its descriptor");
    } else {
        invariant(rc == -1, "the only failure on small input is a page error");
        invariant(has_tag, "a page without tags always translates");
        invariant(err.line >= 1 && err.line <= lines && err.col >= 1, "error position in the page");
        invariant(err.msg[0] != '\0', "an error says what was expected");
    }
    int rc2 = sandlet_csp_translate("fuzz.csp", data, size, &b, &err);
    invariant(rc2 == rc && a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0),
              "translation is deterministic");
    sandlet_buf_free(&a);
    sandlet_buf_free(&b);
    return 0;
}

/*
 * fuzz_csp.c - libFuzzer target for the C Server Pages translator
 * (src/csp/translate.c): the input is a page.
 *
 * Checked: a translation either succeeds with a servlet (the output ends
 * with its SL_SERVLET line) or fails with a line and column inside the
 * page and a message; a page without "<%" always translates; translating
 * twice gives the same bytes; a directive's line end is not text (the
 * page after "<%@ include <stdio.h> %>" and an LF or CRLF, when it holds
 * no tag, translates to the same text as without them, with only the
 * #include added).  Pure computation: no compiler is run.
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

/* plain (no tag) translated to a; with a directive line in front, the
 * output is a's with "#include <stdio.h>" after the standard includes. */
static void directive_line_end(const uint8_t *plain, size_t size, const sandlet_buf *a)
{
    static const char *const heads[] = {"<%@ include <stdio.h> %>\n",
                                        "<%@ include <stdio.h> %>\r\n"};
    static const char std[] = "#include <sandlet/csp.h>\n";
    static const char inc[] = " #include <stdio.h>\n"; /* after its column's padding */
    const uint8_t *at = memmem(a->data, a->len, std, sizeof(std) - 1);
    invariant(at != NULL, "the standard includes are written");
    size_t cut = (size_t)(at - a->data) + sizeof(std) - 1;
    for (size_t h = 0; h < 2; h++) {
        size_t hl = strlen(heads[h]);
        uint8_t *page = malloc(hl + size + 1);
        if (!page)
            return;
        memcpy(page, heads[h], hl);
        if (size)
            memcpy(page + hl, plain, size);
        sandlet_buf c;
        sandlet_buf_init(&c, 0);
        sandlet_csp_error err;
        int rc = sandlet_csp_translate("fuzz.csp", page, hl + size, &c, &err);
        invariant(rc == 0, "a directive line before a page without tags translates");
        /* Between a's head and a's rest: the #include (behind its #line)
         * and nothing else. */
        size_t rest = a->len - cut;
        invariant(c.len > a->len && memcmp(c.data, a->data, cut) == 0 &&
                      memcmp(c.data + c.len - rest, a->data + cut, rest) == 0,
                  "a directive's line end writes nothing");
        const uint8_t *mid = c.data + cut;
        size_t mlen = c.len - rest - cut;
        invariant(memmem(mid, mlen, inc + 1, sizeof(inc) - 2) != NULL &&
                      memmem(mid, mlen, "sl_write", 8) == NULL,
                  "the directive adds its #include and no text");
        sandlet_buf_free(&c);
        free(page);
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
    if (rc == 0 && !has_tag)
        directive_line_end(data, size, &a);
    sandlet_buf_free(&a);
    sandlet_buf_free(&b);
    return 0;
}

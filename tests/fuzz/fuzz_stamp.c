/*
 * fuzz_stamp.c - libFuzzer target for the page cache's stamp parser
 * (src/csp/pagecache.c): the input is a <key>.stamp as a compile, which
 * runs as the page sandbox's user, could have written it.
 *
 * Checked: a stamp either parses into a page with at least its own file
 * listed first and paths free of control characters, or is refused; what
 * parses formats back into text that parses again into the same stamp.
 */
#include "config.h"

#include "csp/pagecache.h"

#include <errno.h>
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

static bool clean(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sandlet_page_stamp st;
    memset(&st, 0, sizeof(st));
    int rc = sandlet_page_stamp_parse((const char *)data, size, &st);
    if (rc < 0) {
        invariant(rc == -EINVAL || rc == -ENOMEM, "a refused stamp says EINVAL");
        sandlet_page_stamp_free(&st);
        return 0;
    }
    invariant(st.rel && clean(st.rel), "a stamp names its page");
    invariant(st.nfiles >= 1 && strcmp(st.files[0].path, st.rel) == 0,
              "the page is the stamp's first file");
    for (size_t i = 0; i < st.nfiles; i++)
        invariant(clean(st.files[i].path), "file paths hold no control characters");
    if (st.version_matches) {
        sandlet_buf out;
        sandlet_buf_init(&out, 0);
        invariant(sandlet_page_stamp_format(&st, &out) == 0, "a parsed stamp formats");
        sandlet_page_stamp again;
        memset(&again, 0, sizeof(again));
        invariant(sandlet_page_stamp_parse((const char *)out.data, out.len, &again) == 0,
                  "a formatted stamp parses");
        invariant(strcmp(again.rel, st.rel) == 0 && again.ok == st.ok && again.nfiles == st.nfiles,
                  "the round trip keeps the page, result and files");
        for (size_t i = 0; i < st.nfiles; i++)
            invariant(strcmp(again.files[i].path, st.files[i].path) == 0 &&
                          again.files[i].size == st.files[i].size &&
                          again.files[i].mtime_ns == st.files[i].mtime_ns &&
                          again.files[i].ino == st.files[i].ino &&
                          memcmp(again.files[i].hash, st.files[i].hash, 32) == 0,
                      "the round trip keeps every file");
        sandlet_page_stamp_free(&again);
        sandlet_buf_free(&out);
    }
    sandlet_page_stamp_free(&st);
    return 0;
}

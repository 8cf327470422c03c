/*
 * test_workerlog.c - how a worker's output is escaped for the error log:
 * nothing a worker writes can end a log line early or reach a terminal as
 * a control sequence, valid UTF-8 passes, and the output bound holds.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loop/acceptor.h"

#include <string.h>

static void check(const char *in, size_t n, const char *want)
{
    char out[256];
    size_t used;
    size_t len = sandlet_workerlog_escape(out, sizeof(out), (const uint8_t *)in, n, &used);
    assert_int_equal(used, n);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(out, want, len);
}

#define CHECK(in, want) check(in, sizeof(in) - 1, want)

static void test_ascii(void **state)
{
    (void)state;
    CHECK("plain text\twith a tab", "plain text\twith a tab");
    CHECK("\n\r\x1b[2J\a\x7f", "\\x0a\\x0d\\x1b[2J\\x07\\x7f");
    /* A backslash is escaped too, so that "\x0a" in the log is always
     * what the worker wrote as a line feed. */
    CHECK("C:\\x0a", "C:\\x5cx0a");
    CHECK("nul\0byte", "nul\\x00byte");
}

static void test_utf8(void **state)
{
    (void)state;
    CHECK("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80",
          "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80");
    /* C1 controls (CSI is U+009B): terminals may obey them. */
    CHECK("\xc2\x9b"
          "2J \xc2\x85",
          "\\xc2\\x9b2J \\xc2\\x85");
    CHECK("\xc2\xa0", "\xc2\xa0"); /* U+00A0, the first after C1 */
    /* Invalid: bare continuation, overlong, surrogate, past U+10FFFF,
     * a lead byte cut short, bytes never used. */
    CHECK("\x80", "\\x80");
    CHECK("\xc0\xaf", "\\xc0\\xaf");
    CHECK("\xe0\x80\xaf", "\\xe0\\x80\\xaf");
    CHECK("\xed\xa0\x80", "\\xed\\xa0\\x80");
    CHECK("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
    CHECK("\xe2\x82", "\\xe2\\x82");
    CHECK("\xff\xfe", "\\xff\\xfe");
}

static void test_bound(void **state)
{
    (void)state;
    char out[10];
    size_t used;
    /* Escapes are never split: 2 fit whole (8 bytes), the third does not. */
    size_t len =
        sandlet_workerlog_escape(out, sizeof(out), (const uint8_t *)"\x01\x02\x03", 3, &used);
    assert_int_equal(len, 8);
    assert_int_equal(used, 2);
    /* Nor is a UTF-8 character. */
    len = sandlet_workerlog_escape(out, 5, (const uint8_t *)"abcd\xc3\xa9", 6, &used);
    assert_int_equal(len, 4);
    assert_int_equal(used, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ascii),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

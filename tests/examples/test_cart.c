/*
 * test_cart.c - the cart example under the in-process harness: the start
 * page starts the session (one SLSESSION Set-Cookie), items added and
 * removed across requests through the cookie jar, the session's values
 * afterwards, and the empty cart page's exact size.  It must never need a
 * running sandletd.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sandlet/test.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int setup(void **state)
{
    const char *b = getenv("SANDLET_BUILDDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/examples/cart/.libs/cart.so", b ? b : ".");
    sl_test *t = sl_test_load(path, NULL);
    *state = t;
    return t ? 0 : -1;
}

static int teardown(void **state)
{
    sl_test_free(*state);
    return 0;
}

static void test_start_sets_session_cookie(void **state)
{
    sl_test *t = *state;
    assert_null(sl_test_session_id(t));
    sl_test_response *r = sl_test_get(t, "/cart");
    assert_non_null(r);
    assert_int_equal(sl_test_status(r), 200);
    assert_int_equal(sl_test_header_repeats(r, "Set-Cookie"), 1);
    const char *attrs;
    const char *id = sl_test_set_cookie(r, SL_TEST_SESSION_COOKIE, &attrs);
    assert_non_null(id);
    assert_int_equal(strlen(id), 64);
    assert_non_null(strstr(attrs, "HttpOnly"));
    assert_string_equal(sl_test_session_id(t), id);
    assert_true(sl_test_session_exists(t));
    assert_non_null(strstr(sl_test_body_str(r), "Coffee beans"));
    /* The next request sends the cookie back: no new session. */
    r = sl_test_get(t, "/cart?action=show");
    assert_int_equal(sl_test_status(r), 200);
    assert_int_equal(sl_test_header_repeats(r, "Set-Cookie"), 0);
    assert_string_equal(sl_test_session_id(t), id);
}

static void test_empty_cart_is_2048_bytes(void **state)
{
    sl_test *t = *state;
    sl_test_response *r = sl_test_get(t, "/cart?action=show");
    assert_int_equal(sl_test_status(r), 200);
    assert_int_equal(sl_test_body_len(r), 2048);
    assert_non_null(strstr(sl_test_body_str(r), "Your cart is empty."));
    assert_string_equal(sl_test_header(r, "Content-Type"), "text/html; charset=utf-8");
    assert_int_equal(sl_test_pieces(r), 1);
}

static void test_add_show_remove_show(void **state)
{
    sl_test *t = *state;
    sl_test_response *r = sl_test_get(t, "/cart");
    assert_int_equal(sl_test_status(r), 200);

    r = sl_test_post_form(t, "/cart", "action=add&item=coffee");
    assert_int_equal(sl_test_status(r), 303);
    assert_string_equal(sl_test_header(r, "Location"), "/cart?action=show");
    sl_test_request *rq = sl_test_request_new(t, "POST", "/cart");
    assert_int_equal(sl_test_request_form(rq, "action", "add"), 0);
    assert_int_equal(sl_test_request_form(rq, "item", "coffee"), 0);
    assert_int_equal(sl_test_status(sl_test_run(rq)), 303);
    assert_int_equal(sl_test_status(sl_test_post_form(t, "/cart", "action=add&item=apple")), 303);
    assert_string_equal(sl_test_session_str(t, "qty.coffee"), "2");
    assert_string_equal(sl_test_session_str(t, "qty.apple"), "1");
    assert_null(sl_test_session_str(t, "qty.bread"));

    r = sl_test_get(t, "/cart?action=show");
    assert_int_equal(sl_test_status(r), 200);
    const char *body = sl_test_body_str(r);
    assert_non_null(strstr(body, "<td>2</td><td>Coffee beans, 500 g</td>"));
    assert_non_null(strstr(body, "<td>1</td><td>Apple</td>"));
    assert_non_null(strstr(body, "Total: 16.25"));
    assert_int_not_equal(sl_test_body_len(r), 2048);

    assert_int_equal(sl_test_status(sl_test_post_form(t, "/cart", "action=remove&item=coffee")),
                     303);
    assert_string_equal(sl_test_session_str(t, "qty.coffee"), "1");
    assert_int_equal(sl_test_status(sl_test_post_form(t, "/cart", "action=remove&item=coffee")),
                     303);
    assert_int_equal(sl_test_status(sl_test_post_form(t, "/cart", "action=remove&item=apple")),
                     303);
    assert_null(sl_test_session_str(t, "qty.coffee"));
    r = sl_test_get(t, "/cart?action=show");
    assert_int_equal(sl_test_body_len(r), 2048);
}

static void test_another_client_has_its_own_cart(void **state)
{
    sl_test *t = *state;
    assert_int_equal(sl_test_status(sl_test_post_form(t, "/cart", "action=add&item=bread")), 303);
    const char *mine = sl_test_session_id(t);
    assert_non_null(mine);
    char saved[80];
    snprintf(saved, sizeof(saved), "%s", mine);
    sl_test_jar_clear(t);
    sl_test_response *r = sl_test_get(t, "/cart?action=show");
    assert_int_equal(sl_test_body_len(r), 2048);
    assert_string_not_equal(sl_test_session_id(t), saved);
    /* Back to the first client's cookie: its bread is still there. */
    assert_int_equal(sl_test_jar_set(t, SL_TEST_SESSION_COOKIE, saved), 0);
    assert_string_equal(sl_test_session_str(t, "qty.bread"), "1");
}

static void test_refuses_bad_input(void **state)
{
    sl_test *t = *state;
    assert_int_equal(sl_test_status(sl_test_post_form(t, "/cart", "action=add&item=..%2Fetc")),
                     400);
    assert_int_equal(sl_test_status(sl_test_post_form(t, "/cart", "action=add")), 400);
    assert_int_equal(sl_test_status(sl_test_get(t, "/cart?action=add&item=apple")), 400);
    assert_null(sl_test_session_str(t, "qty.apple"));
    sl_test_request *rq = sl_test_request_new(t, "DELETE", "/cart");
    sl_test_response *r = sl_test_run(rq);
    assert_int_equal(sl_test_status(r), 405);
    assert_string_equal(sl_test_header(r, "Allow"), "GET, HEAD, POST");
    /* A forged session id is never adopted, with a MAC made up or not. */
    static const char *const forged[] = {
        "00112233445566778899aabbccddeeff",
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"};
    const char *id = NULL;
    for (size_t i = 0; i < 2; i++) {
        sl_test_jar_clear(t);
        assert_int_equal(sl_test_jar_set(t, SL_TEST_SESSION_COOKIE, forged[i]), 0);
        r = sl_test_get(t, "/cart");
        id = sl_test_set_cookie(r, SL_TEST_SESSION_COOKIE, NULL);
        assert_non_null(id);
        assert_string_not_equal(id, forged[i]);
    }
    assert_string_equal(sl_test_session_id(t), id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_sets_session_cookie, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_cart_is_2048_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_add_show_remove_show, setup, teardown),
        cmocka_unit_test_setup_teardown(test_another_client_has_its_own_cart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_bad_input, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

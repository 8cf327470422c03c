/*
 * cart.c - CSE's shopping cart: a small catalogue, and a cart kept in the
 * client's session.  GET /cart is the start page (it starts the session,
 * so its cookie is set there); POST action=add or action=remove with
 * item=ID changes the cart; GET /cart?action=show shows it.  The empty
 * cart page is exactly CART_EMPTY_SIZE bytes, as in CSE's measurements.
 *
 * Item ids come from the client and are only ever compared with the
 * catalogue; nothing the client sends reaches a format string, a session
 * key or the page unescaped.
 */
#include <sandlet.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CART_EMPTY_SIZE 2048
#define MAX_QTY         99

typedef struct item {
    const char *id;
    const char *name;
    unsigned cents;
} item;

static const item catalogue[] = {
    {"apple", "Apple", 45},
    {"bread", "Loaf of bread", 260},
    {"cheese", "Cheese, 200 g", 399},
    {"coffee", "Coffee beans, 500 g", 790},
};
#define NITEMS (sizeof(catalogue) / sizeof(catalogue[0]))

static const item *find_item(const char *id)
{
    for (size_t i = 0; id && i < NITEMS; i++)
        if (strcmp(catalogue[i].id, id) == 0)
            return &catalogue[i];
    return NULL;
}

/* Session key of an item's quantity: "qty." + the catalogue's id. */
static const char *qty_key(sl_request *rq, const item *it)
{
    return sl_sprintf(rq, "qty.%s", it->id);
}

static unsigned quantity(sl_request *rq, sl_session *s, const item *it)
{
    const char *key = qty_key(rq, it);
    const char *v = key ? sl_session_str(s, key) : NULL;
    if (!v)
        return 0;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    return *end == '\0' && n <= MAX_QTY ? (unsigned)n : 0;
}

static void page_head(sl_response *rs, const char *title)
{
    sl_set_content_type(rs, "text/html; charset=utf-8");
    sl_printf(rs, "<!DOCTYPE html>\n<html><head><title>%s</title></head><body>\n<h1>%s</h1>\n",
              title, title);
}

static int start(sl_request *rq, sl_response *rs, sl_session *s)
{
    (void)s;
    page_head(rs, "Shop");
    sl_puts(rs, "<table>\n");
    for (size_t i = 0; i < NITEMS; i++)
        sl_printf(rs,
                  "<tr><td>%s</td><td>%u.%02u</td><td><form method=\"post\" action=\"/cart\">"
                  "<input type=\"hidden\" name=\"action\" value=\"add\">"
                  "<input type=\"hidden\" name=\"item\" value=\"%s\">"
                  "<button>Add</button></form></td></tr>\n",
                  sl_html(rq, catalogue[i].name), catalogue[i].cents / 100,
                  catalogue[i].cents % 100, catalogue[i].id);
    sl_puts(rs,
            "</table>\n<p><a href=\"/cart?action=show\">Show the cart</a></p>\n</body></html>\n");
    return 200;
}

/* The empty cart: fixed text padded inside a comment to exactly
 * CART_EMPTY_SIZE bytes, so that benchmarks measure a known size. */
static int show_empty(sl_response *rs)
{
    static const char head[] =
        "<!DOCTYPE html>\n<html><head><title>Your cart</title></head><body>\n"
        "<h1>Your cart</h1>\n<p>Your cart is empty.</p>\n"
        "<p><a href=\"/cart\">Back to the shop</a></p>\n<!--";
    static const char tail[] = "-->\n</body></html>\n";
    char page[CART_EMPTY_SIZE];
    size_t hl = sizeof(head) - 1, tl = sizeof(tail) - 1;
    _Static_assert(sizeof(head) - 1 + sizeof(tail) - 1 < CART_EMPTY_SIZE, "page too long");
    memcpy(page, head, hl);
    memset(page + hl, ' ', CART_EMPTY_SIZE - hl - tl);
    memcpy(page + CART_EMPTY_SIZE - tl, tail, tl);
    sl_set_content_type(rs, "text/html; charset=utf-8");
    sl_write(rs, page, sizeof(page));
    return 200;
}

static int show(sl_request *rq, sl_response *rs, sl_session *s)
{
    unsigned total = 0, lines = 0;
    for (size_t i = 0; i < NITEMS; i++)
        lines += quantity(rq, s, &catalogue[i]) ? 1 : 0;
    if (lines == 0)
        return show_empty(rs);
    page_head(rs, "Your cart");
    sl_puts(rs, "<table>\n");
    for (size_t i = 0; i < NITEMS; i++) {
        unsigned q = quantity(rq, s, &catalogue[i]);
        if (!q)
            continue;
        total += q * catalogue[i].cents;
        sl_printf(rs,
                  "<tr><td>%u</td><td>%s</td><td><form method=\"post\" action=\"/cart\">"
                  "<input type=\"hidden\" name=\"action\" value=\"remove\">"
                  "<input type=\"hidden\" name=\"item\" value=\"%s\">"
                  "<button>Remove</button></form></td></tr>\n",
                  q, sl_html(rq, catalogue[i].name), catalogue[i].id);
    }
    sl_printf(rs,
              "</table>\n<p>Total: %u.%02u</p>\n<p><a href=\"/cart\">Back to the shop</a></p>\n"
              "</body></html>\n",
              total / 100, total % 100);
    return 200;
}

/* add or remove one of an item; 303 to the cart, as a form post should. */
static int change(sl_request *rq, sl_response *rs, sl_session *s, int delta)
{
    const item *it = find_item(sl_param(rq, "item", NULL));
    if (!it) {
        sl_set_content_type(rs, "text/plain; charset=utf-8");
        sl_puts(rs, "no such item\n");
        return 400;
    }
    unsigned q = quantity(rq, s, it);
    if (delta > 0 && q >= MAX_QTY) {
        sl_set_content_type(rs, "text/plain; charset=utf-8");
        sl_puts(rs, "too many of this item\n");
        return 409;
    }
    const char *key = qty_key(rq, it);
    int rc;
    if (delta < 0 && q <= 1)
        rc = key ? sl_session_remove(s, key) : -ENOMEM;
    else if (delta < 0)
        rc = key ? sl_session_set_str(s, key, sl_sprintf(rq, "%u", q - 1)) : -ENOMEM;
    else
        rc = key ? sl_session_set_str(s, key, sl_sprintf(rq, "%u", q + 1)) : -ENOMEM;
    if (rc < 0)
        return 500;
    sl_set_header(rs, "Location", "/cart?action=show");
    sl_set_content_type(rs, "text/plain; charset=utf-8");
    sl_printf(rs, "%s: %u\n", it->id, delta > 0 ? q + 1 : (q ? q - 1 : 0));
    return 303;
}

static int service(sl_request *rq, sl_response *rs)
{
    sl_session *s = sl_session_get(rq, rs, true);
    if (!s)
        return 503;
    const char *method = sl_method(rq);
    const char *action = sl_param(rq, "action", "start");
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
        if (strcmp(action, "start") == 0)
            return start(rq, rs, s);
        if (strcmp(action, "show") == 0)
            return show(rq, rs, s);
    } else if (strcmp(method, "POST") == 0) {
        if (strcmp(action, "add") == 0)
            return change(rq, rs, s, +1);
        if (strcmp(action, "remove") == 0)
            return change(rq, rs, s, -1);
    } else {
        sl_set_header(rs, "Allow", "GET, HEAD, POST");
        return 405;
    }
    sl_set_content_type(rs, "text/plain; charset=utf-8");
    sl_puts(rs, "unknown action for this method\n");
    return 400;
}

SL_SERVLET(cart) = {.service = service, .session = SL_SESSION_MEMORY};

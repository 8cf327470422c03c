/*
 * fortunes_servlet.c - TechEmpower's "fortunes" test as a hand-written
 * servlet, from static data instead of a database (make bench): the
 * baseline that bench/fortunes.csp, the same page as a C Server Page, is
 * measured against.  Both write the same bytes (tests/examples/
 * test_pages.c compares them).  Written as a servlet author would: the
 * fixed markup with sl_puts, each row with sl_printf and sl_html.
 *
 * It must never cache the rendered page: the list is copied, extended and
 * sorted on every request, as the test's rules require.
 */
#include <sandlet.h>

#include <stdlib.h>
#include <string.h>

typedef struct fortune {
    int id;
    const char *message;
} fortune;

static const fortune fortunes[] = {
    {1, "fortune: No such file or directory"},
    {2, "A computer scientist is someone who fixes things that aren't broken."},
    {3, "After enough decimal places, nobody gives a damn."},
    {4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"},
    {5, "A computer program does what you tell it to do, not what you want it to do."},
    {6, "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen"},
    {7, "Any program that runs right is obsolete."},
    {8, "A list is only as strong as its weakest link. \u2014 Donald Knuth"},
    {9, "Feature: A bug with seniority."},
    {10, "Computers make very fast, very accurate mistakes."},
    {11, "<script>alert(\"This should not be displayed in a browser alert box.\");</script>"},
    {12, "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af"},
};
#define NFORTUNES (sizeof(fortunes) / sizeof(fortunes[0]))

static int by_message(const void *a, const void *b)
{
    return strcmp(((const fortune *)a)->message, ((const fortune *)b)->message);
}

static int service(sl_request *rq, sl_response *rs)
{
    fortune list[NFORTUNES + 1];
    memcpy(list, fortunes, sizeof(fortunes));
    list[NFORTUNES] = (fortune){0, "Additional fortune added at request time."};
    qsort(list, NFORTUNES + 1, sizeof(list[0]), by_message);

    sl_set_content_type(rs, "text/html; charset=utf-8");
    sl_puts(rs, "<!DOCTYPE html><html><head><title>Fortunes</title></head><body>"
                "<table><tr><th>id</th><th>message</th></tr>");
    for (size_t i = 0; i < NFORTUNES + 1; i++)
        sl_printf(rs, "<tr><td>%d</td><td>%s</td></tr>", list[i].id, sl_html(rq, list[i].message));
    if (sl_puts(rs, "</table></body></html>\n") != 0)
        return 500;
    return 200;
}

SL_SERVLET(fortunes) = {.service = service};

/*
 * csp_out.c - the typed writers of C Server Pages (include/sandlet/csp.h):
 * what <%= x %> and <%== x %> call, chosen by _Generic.
 *
 * The HTML escape is sl_html's (& < > " '), written straight to the
 * response in runs so that no copy or arena allocation is needed.  It must
 * never write anything but through sl_write.
 */
#include "config.h"

#include <sandlet.h>
#include <sandlet/csp.h>

#include <stdio.h>
#include <string.h>

static const char *entity(char c)
{
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&#34;";
    case '\'': return "&#39;";
    default: return NULL;
    }
}

int sl_csp_str(sl_response *rs, const char *s)
{
    if (!s)
        return 0;
    const char *run = s;
    int rc = 0;
    for (const char *p = s; *p; p++) {
        const char *e = entity(*p);
        if (!e)
            continue;
        if (p > run && (rc = sl_write(rs, run, (size_t)(p - run))) < 0)
            return rc;
        if ((rc = sl_write(rs, e, strlen(e))) < 0)
            return rc;
        run = p + 1;
    }
    size_t n = strlen(run);
    return n ? sl_write(rs, run, n) : 0;
}

int sl_csp_str_raw(sl_response *rs, const char *s)
{
    return s ? sl_write(rs, s, strlen(s)) : 0;
}

int sl_csp_char(sl_response *rs, char c)
{
    const char *e = entity(c);
    return e ? sl_write(rs, e, strlen(e)) : sl_write(rs, &c, 1);
}

int sl_csp_char_raw(sl_response *rs, char c)
{
    return sl_write(rs, &c, 1);
}

int sl_csp_bool(sl_response *rs, bool b)
{
    return b ? sl_write(rs, "true", 4) : sl_write(rs, "false", 5);
}

int sl_csp_int(sl_response *rs, long long v)
{
    char num[32];
    int n = snprintf(num, sizeof(num), "%lld", v);
    return sl_write(rs, num, (size_t)n);
}

int sl_csp_uint(sl_response *rs, unsigned long long v)
{
    char num[32];
    int n = snprintf(num, sizeof(num), "%llu", v);
    return sl_write(rs, num, (size_t)n);
}

int sl_csp_double(sl_response *rs, double v)
{
    char num[64];
    int n = snprintf(num, sizeof(num), "%.15g", v);
    if (n < 0 || (size_t)n >= sizeof(num))
        return sl_write(rs, "nan", 3);
    return sl_write(rs, num, (size_t)n);
}

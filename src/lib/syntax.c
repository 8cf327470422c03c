/*
 * syntax.c - the small pieces of HTTP syntax (RFC 9110 tchar and token,
 * hex digits, the IMF-fixdate) shared by libsandlet and the acceptor.
 *
 * One definition, so that what a servlet may write, what the acceptor
 * lets through and what the static-file code accepts can never drift
 * apart.  Pure functions: no state, no allocation, no locale (English
 * names whatever LC_TIME says); nothing here may depend on src/loop.
 */
#include "config.h"

#include "lib/servlet.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Every header name and value of every request and response is checked
 * a byte at a time, in the acceptor and in the worker: one table load per
 * byte, where the ranges and the switch took about twelve instructions.
 * Bit 1: an RFC 9110 tchar.  Bit 2: allowed in a field value (HTAB, SP,
 * VCHAR, obs-text; never a control byte, so never CR, LF or NUL). */
#define SYNTAX_TCHAR 1u
#define SYNTAX_VALUE 2u
static const unsigned char syntax_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    2, 3, 2, 3, 3, 3, 3, 3, 2, 2, 3, 3, 2, 3, 3, 2, /* 0x20 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, /* 0x30 */
    2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, /* 0x40 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 3, 3, /* 0x50 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, /* 0x60 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 3, 2, 3, 0, /* 0x70 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0x80 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0x90 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xa0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xb0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xc0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xd0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xe0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* 0xf0 */
};

static inline bool is_tchar(unsigned char c)
{
    return syntax_class[c] & SYNTAX_TCHAR;
}

bool sandlet_lib_tchar(unsigned char c)
{
    return is_tchar(c);
}

bool sandlet_lib_token(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_tchar((unsigned char)s[i]))
            return false;
    return true;
}

bool sandlet_lib_field_value(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len; i++)
        if (!(syntax_class[u[i]] & SYNTAX_VALUE))
            return false;
    return true;
}

int sandlet_lib_hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int sandlet_lib_http_date(long long t, char *out, size_t size)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t tt = (time_t)t;
    struct tm tm;
    if (!out || (long long)tt != t || !gmtime_r(&tt, &tm) || tm.tm_year < -1900 ||
        tm.tm_year > 9999 - 1900 || tm.tm_wday < 0 || tm.tm_wday > 6 || tm.tm_mon < 0 ||
        tm.tm_mon > 11)
        return -EINVAL;
    int n = snprintf(out, size, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday,
                     months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return n > 0 && (size_t)n < size ? 0 : -EINVAL;
}

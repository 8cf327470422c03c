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

/* Inline for sandlet_lib_token, which every header name of every
 * response passes through: no call per byte. */
static inline bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    /* RFC 9110's other tchars: a switch, not a strchr per byte. */
    switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~': return true;
    default: return false;
    }
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

/*
 * json_write.h - the tiny JSON serializer shared by the sandlet servlet
 * (te_json.c) and its FastCGI peer (fcgi_hello.c), so that both do the same
 * work per request.  It must never emit invalid JSON or write past cap.
 */
#ifndef BENCH_JSON_WRITE_H
#define BENCH_JSON_WRITE_H
#include <stddef.h>

/* Appends s as a JSON string literal to out[*at..cap); returns 0, or -1 when
 * it would not fit (out is then left partially filled and must be dropped). */
static inline int json_string(char *out, size_t cap, size_t *at, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = *at;

    if (n >= cap)
        return -1;
    out[n++] = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            if (cap - n < 2)
                return -1;
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            if (cap - n < 6)
                return -1;
            out[n++] = '\\';
            out[n++] = 'u';
            out[n++] = '0';
            out[n++] = '0';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        } else {
            if (cap - n < 1)
                return -1;
            out[n++] = (char)c;
        }
    }
    if (cap - n < 1)
        return -1;
    out[n++] = '"';
    *at = n;
    return 0;
}

static inline int append(char *out, size_t cap, size_t *at, char c)
{
    if (*at >= cap)
        return -1;
    out[(*at)++] = c;
    return 0;
}

/* Writes {"message":"<msg>"} into out; returns its length or -1. */
static inline int json_message(char *out, size_t cap, const char *msg)
{
    size_t n = 0;

    if (append(out, cap, &n, '{') != 0 || json_string(out, cap, &n, "message") != 0 ||
        append(out, cap, &n, ':') != 0 || json_string(out, cap, &n, msg) != 0 ||
        append(out, cap, &n, '}') != 0)
        return -1;
    return (int)n;
}

#endif

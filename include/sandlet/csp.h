/*
 * sandlet/csp.h - the writers behind C Server Pages' <%= %> and <%== %>
 * tags (sandlet-csp(5)).  Pages include it through the generated code;
 * servlets may use it too.
 *
 * SL_CSP_WRITE(rs, x) writes x HTML-escaped, SL_CSP_WRITE_RAW(rs, x) as
 * is; _Generic picks the writer from x's type: strings (char *, const
 * char *; NULL writes nothing), char (one character), bool (true/false),
 * every signed and unsigned integer type (signed char and unsigned char
 * are small integers), float, double and long double (%.15g).  Any other
 * type does not compile.  Each returns what sl_write returns.
 *
 * This header must stay plain C11 and name no internals.
 */
#ifndef SANDLET_CSP_H
#define SANDLET_CSP_H

#include <sandlet.h>

#ifdef __cplusplus
extern "C" {
#endif

int sl_csp_str(sl_response *rs, const char *s);
int sl_csp_str_raw(sl_response *rs, const char *s);
int sl_csp_char(sl_response *rs, char c);
int sl_csp_char_raw(sl_response *rs, char c);
int sl_csp_bool(sl_response *rs, bool b);
int sl_csp_int(sl_response *rs, long long v);
int sl_csp_uint(sl_response *rs, unsigned long long v);
int sl_csp_double(sl_response *rs, double v);

#define SL_CSP_NUMBERS_                                                                            \
    bool : sl_csp_bool,                                                                            \
           signed char : sl_csp_int,                                                               \
                         short : sl_csp_int,                                                       \
                                 int : sl_csp_int,                                                 \
                                       long : sl_csp_int,                                          \
                                              long long : sl_csp_int,                              \
                                                          unsigned char : sl_csp_uint,             \
                                                                          unsigned short           \
        : sl_csp_uint,                                                                             \
          unsigned : sl_csp_uint,                                                                  \
                     unsigned long : sl_csp_uint,                                                  \
                                     unsigned long long : sl_csp_uint,                             \
                                                          float : sl_csp_double,                   \
                                                                  double : sl_csp_double,          \
                                                                           long double             \
        : sl_csp_double

#define SL_CSP_WRITE(rs, x)                                                                        \
    _Generic((x), char *: sl_csp_str, const char *: sl_csp_str, char: sl_csp_char,                 \
             SL_CSP_NUMBERS_)((rs), (x))
#define SL_CSP_WRITE_RAW(rs, x)                                                                    \
    _Generic((x), char *: sl_csp_str_raw, const char *: sl_csp_str_raw, char: sl_csp_char_raw,     \
             SL_CSP_NUMBERS_)((rs), (x))

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_CSP_H */

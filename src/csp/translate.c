/*
 * translate.c - the C Server Pages translator (sandlet-csp(5)): splits a
 * page into text and tags in one forward pass and writes one servlet's C
 * source: file-scope sections and includes first, then the init function,
 * then the service function that writes the text and runs the code in page
 * order.
 *
 * Code is copied verbatim behind a #line directive (and padded to its
 * column) so that the compiler names page.csp:LINE:COL; text becomes
 * sl_write calls on octal-escaped literals with explicit lengths, so any
 * byte (NUL, CR, invalid UTF-8) survives.  It must never recurse on input,
 * never read past len, and never produce more than a bounded output: the
 * input is capped at SANDLET_CSP_MAX_INPUT and every byte costs at most a
 * fixed factor.
 */
#include "config.h"

#include "csp/translate.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Text bytes per sl_write call: keeps every literal far below the 4095
 * characters C11 promises a compiler handles. */
#define TEXT_CHUNK 1024

/* Each input byte becomes at most 4 output characters plus a bounded
 * overhead per chunk and per tag; this is the cap on the whole output. */
#define OUTPUT_LIMIT (SANDLET_CSP_MAX_INPUT * 8 + 65536)

typedef struct tr {
    const char *name;
    const uint8_t *s;
    size_t len;
    /* The cursor that line/column are known for; it only moves forward. */
    size_t cpos;
    unsigned long line, col;
    sandlet_buf head, init, body;
    bool has_init;
    sandlet_csp_error *err;
} tr;

/* Moves the line/column cursor forward to pos. */
static void seek(tr *t, size_t pos)
{
    for (; t->cpos < pos; t->cpos++) {
        if (t->s[t->cpos] == '\n') {
            t->line++;
            t->col = 1;
        } else {
            t->col++;
        }
    }
}

static int fail(tr *t, unsigned long line, unsigned long col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(tr *t, unsigned long line, unsigned long col, const char *fmt, ...)
{
    t->err->line = line;
    t->err->col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err->msg, sizeof(t->err->msg), fmt, ap);
    va_end(ap);
    return -1;
}

static void puts_buf(sandlet_buf *b, const char *s)
{
    sandlet_buf_put(b, s, strlen(s));
}

/* Finds needle (nlen bytes) in s[from..to), or returns to. */
static size_t find(const uint8_t *s, size_t from, size_t to, const char *needle, size_t nlen)
{
    if (to - from < nlen)
        return to;
    for (size_t i = from; i + nlen <= to; i++)
        if (s[i] == (uint8_t)needle[0] && memcmp(s + i, needle, nlen) == 0)
            return i;
    return to;
}

/* One byte inside a C string literal.  Octal escapes always take three
 * digits, so a following digit can never join them; '?' is escaped so no
 * trigraph can form. */
static void put_lit_byte(sandlet_buf *b, uint8_t c)
{
    char esc[5];
    if (c == '"' || c == '\\' || c == '?') {
        esc[0] = '\\';
        esc[1] = (char)c;
        sandlet_buf_put(b, esc, 2);
    } else if (c == '\n') {
        sandlet_buf_put(b, "\\n", 2);
    } else if (c >= 0x20 && c < 0x7f) {
        sandlet_buf_put(b, &c, 1);
    } else {
        esc[0] = '\\';
        esc[1] = (char)('0' + (c >> 6));
        esc[2] = (char)('0' + ((c >> 3) & 7));
        esc[3] = (char)('0' + (c & 7));
        sandlet_buf_put(b, esc, 4);
    }
}

static void put_lit(sandlet_buf *b, const uint8_t *s, size_t n)
{
    sandlet_buf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++)
        put_lit_byte(b, s[i]);
    sandlet_buf_put(b, "\"", 1);
}

/* Page text: one sl_write per chunk, the literal broken after each newline
 * so that the generated file stays readable. */
static void emit_text(tr *t, const uint8_t *s, size_t n)
{
    sandlet_buf *b = &t->body;
    for (size_t off = 0; off < n;) {
        size_t end = n - off > TEXT_CHUNK ? off + TEXT_CHUNK : n;
        puts_buf(b, "    sl_write(rs, \"");
        for (size_t i = off; i < end; i++) {
            put_lit_byte(b, s[i]);
            if (s[i] == '\n' && i + 1 < end)
                puts_buf(b, "\"\n        \"");
        }
        char tail[48];
        snprintf(tail, sizeof(tail), "\", %zu);\n", end - off);
        puts_buf(b, tail);
        off = end;
    }
}

/* "#line L "name"" and padding so that the code after it starts at the
 * page's column (less what the generated prefix takes). */
static void emit_line(tr *t, sandlet_buf *b, size_t pos, size_t prefix)
{
    seek(t, pos);
    char num[48];
    snprintf(num, sizeof(num), "\n#line %lu ", t->line);
    puts_buf(b, num);
    put_lit(b, (const uint8_t *)t->name, strlen(t->name));
    sandlet_buf_put(b, "\n", 1);
    for (unsigned long c = 1 + prefix; c < t->col; c++)
        sandlet_buf_put(b, " ", 1);
}

/* Whether s[p..] starts with the n bytes of what. */
static bool at(const tr *t, size_t p, const char *what, size_t n)
{
    return p <= t->len && t->len - p >= n && memcmp(t->s + p, what, n) == 0;
}

static bool is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static void trim(const uint8_t *s, size_t *from, size_t *to)
{
    while (*from < *to && is_space(s[*from]))
        (*from)++;
    while (*to > *from && is_space(s[*to - 1]))
        (*to)--;
}

/* <%@ include <file.h> %> or <%@ include "file.h" %>. */
static int directive(tr *t, size_t from, size_t to, unsigned long tl, unsigned long tc)
{
    trim(t->s, &from, &to);
    size_t w = from;
    while (w < to && !is_space(t->s[w]))
        w++;
    if (w - from != 7 || memcmp(t->s + from, "include", 7) != 0) {
        if (w == from)
            return fail(t, tl, tc,
                        "empty directive: expected 'include <file.h>' or 'include \"file.h\"'");
        int shown = (int)(w - from > 32 ? 32 : w - from);
        return fail(t, tl, tc, "unknown directive '%.*s': expected 'include'", shown,
                    (const char *)t->s + from);
    }
    size_t f = w;
    trim(t->s, &f, &to);
    if (f == to)
        return fail(t, tl, tc, "include without a file: expected <file.h> or \"file.h\"");
    uint8_t open = t->s[f], close = open == '<' ? '>' : '"';
    if ((open != '<' && open != '"') || to - f < 3 || t->s[to - 1] != close)
        return fail(t, tl, tc, "include: expected <file.h> or \"file.h\" and nothing after it");
    for (size_t i = f + 1; i < to - 1; i++) {
        uint8_t c = t->s[i];
        if (c < 0x20 || c == 0x7f || c == close || c == '\\' || (open == '<' && c == '"'))
            return fail(t, tl, tc, "include: invalid character in the file name");
    }
    emit_line(t, &t->head, from, 0);
    puts_buf(&t->head, "#include ");
    sandlet_buf_put(&t->head, t->s + f, to - f);
    sandlet_buf_put(&t->head, "\n", 1);
    return 0;
}

enum kind { CODE, EXPR, RAW, DECL, INIT, DIRECTIVE };

static const char *tag_name(enum kind k)
{
    switch (k) {
    case EXPR: return "<%=";
    case RAW: return "<%==";
    case DECL: return "<%!";
    case INIT: return "<%^";
    case DIRECTIVE: return "<%@";
    default: return "<%";
    }
}

static int tag(tr *t, size_t open, size_t *next)
{
    const uint8_t *s = t->s;
    size_t len = t->len;
    seek(t, open);
    unsigned long tl = t->line, tc = t->col;
    size_t p = open + 2;
    if (at(t, p, "%", 1)) { /* <%% writes a literal <% */
        emit_text(t, (const uint8_t *)"<%", 2);
        *next = p + 1;
        return 0;
    }
    if (at(t, p, "--", 2)) {
        size_t end = find(s, p + 2, len, "--%>", 4);
        if (end == len)
            return fail(t, tl, tc, "unclosed comment: expected '--%%>'");
        *next = end + 4;
        return 0;
    }
    enum kind k = CODE;
    if (at(t, p, "==", 2)) {
        k = RAW;
        p += 2;
    } else if (p < len) {
        switch (s[p]) {
        case '=': k = EXPR; break;
        case '!': k = DECL; break;
        case '^': k = INIT; break;
        case '@': k = DIRECTIVE; break;
        default: break;
        }
        if (k != CODE)
            p++;
    }
    size_t end = find(s, p, len, "%>", 2);
    size_t nested = find(s, p, end, "<%", 2);
    if (nested < end) {
        seek(t, nested);
        return fail(t, t->line, t->col,
                    "'<%%' inside the '%s' tag opened at %lu:%lu: expected '%%>' first",
                    tag_name(k), tl, tc);
    }
    if (end == len)
        return fail(t, tl, tc, "unclosed '%s' tag: expected '%%>'", tag_name(k));
    *next = end + 2;
    size_t from = p, to = end;
    switch (k) {
    case CODE:
        emit_line(t, &t->body, from, 0);
        sandlet_buf_put(&t->body, s + from, to - from);
        sandlet_buf_put(&t->body, "\n", 1);
        return 0;
    case DECL:
    case INIT: {
        sandlet_buf *b = k == DECL ? &t->head : &t->init;
        if (k == INIT)
            t->has_init = true;
        emit_line(t, b, from, 0);
        sandlet_buf_put(b, s + from, to - from);
        sandlet_buf_put(b, "\n", 1);
        return 0;
    }
    case EXPR:
    case RAW: {
        trim(s, &from, &to);
        if (from == to)
            return fail(t, tl, tc, "empty '%s' tag: expected a C expression before '%%>'",
                        tag_name(k));
        const char *pre = k == EXPR ? "SL_CSP_WRITE(rs, (" : "SL_CSP_WRITE_RAW(rs, (";
        emit_line(t, &t->body, from, strlen(pre));
        puts_buf(&t->body, pre);
        sandlet_buf_put(&t->body, s + from, to - from);
        puts_buf(&t->body, "));\n");
        return 0;
    }
    case DIRECTIVE:
        /* A directive writes nothing, and its line end is not the page's
         * text either: "<%@ include <x.h> %>" on the first line must not
         * put a blank line before <!DOCTYPE html>.  One line end (LF or
         * CRLF) is dropped, as PHP drops one after "?>". */
        if (at(t, *next, "\n", 1))
            *next += 1;
        else if (at(t, *next, "\r\n", 2))
            *next += 2;
        return directive(t, from, to, tl, tc);
    }
    return 0;
}

/* The servlet's name: the page's base name without its extension, as an
 * identifier (SL_SERVLET takes one). */
static void servlet_name(const char *name, char *out, size_t cap)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    size_t n = 0;
    if (*base >= '0' && *base <= '9')
        out[n++] = '_';
    for (const char *p = base; *p && *p != '.' && n + 1 < cap; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        out[n++] = ok ? c : '_';
    }
    if (n == 0 || (n == 1 && out[0] == '_'))
        n = (size_t)snprintf(out, cap, "page");
    out[n] = '\0';
}

static void tr_free(tr *t)
{
    sandlet_buf_free(&t->head);
    sandlet_buf_free(&t->init);
    sandlet_buf_free(&t->body);
}

int sandlet_csp_translate(const char *name, const uint8_t *src, size_t len, sandlet_buf *out,
                          sandlet_csp_error *err)
{
    tr t = {.name = name, .s = src, .len = len, .line = 1, .col = 1, .err = err};
    memset(err, 0, sizeof(*err));
    if (len > SANDLET_CSP_MAX_INPUT)
        return fail(&t, 1, 1, "page of %zu bytes: the limit is %zu bytes", len,
                    (size_t)SANDLET_CSP_MAX_INPUT);
    if (!src && len > 0)
        return fail(&t, 1, 1, "no page");
    sandlet_buf_init(&t.head, OUTPUT_LIMIT);
    sandlet_buf_init(&t.init, OUTPUT_LIMIT);
    sandlet_buf_init(&t.body, OUTPUT_LIMIT);
    size_t pos = 0;
    while (pos < len) {
        size_t open = find(src, pos, len, "<%", 2);
        emit_text(&t, src + pos, open - pos);
        if (open == len)
            break;
        if (tag(&t, open, &pos) < 0) {
            tr_free(&t);
            return -1;
        }
    }
    char sname[128];
    servlet_name(name, sname, sizeof(sname));
    sandlet_buf_reset(out);
    puts_buf(out, "/* Generated by sandlet-csp from ");
    /* The page's name goes into a comment: no '*' '/' pair may close it. */
    for (const char *p = name; *p; p++)
        sandlet_buf_put(out, (*p == '*' || (unsigned char)*p < 0x20) ? "_" : p, 1);
    puts_buf(out, ": edit the page, not this file. */\n"
                  "#include <sandlet.h>\n#include <sandlet/csp.h>\n");
    sandlet_buf_put(out, t.head.data, t.head.len);
    if (t.has_init) {
        puts_buf(out, "\nstatic int csp_page_init(sl_context *ctx)\n{\n    (void)ctx;\n");
        sandlet_buf_put(out, t.init.data, t.init.len);
        puts_buf(out, "    return 0;\n}\n");
    }
    puts_buf(out, "\nstatic int csp_page_service(sl_request *rq, sl_response *rs)\n{\n"
                  "    (void)rq;\n    sl_set_content_type(rs, \"text/html; charset=utf-8\");\n");
    sandlet_buf_put(out, t.body.data, t.body.len);
    puts_buf(out, "    return 200;\n}\n\nSL_SERVLET(");
    puts_buf(out, sname);
    puts_buf(out, t.has_init ? ") = {.init = csp_page_init, .service = csp_page_service};\n"
                             : ") = {.service = csp_page_service};\n");
    int rc = (t.head.error || t.init.error || t.body.error || out->error) ? -ENOMEM : 0;
    tr_free(&t);
    if (rc < 0) {
        fail(&t, 1, 1, "out of memory translating the page");
        return rc;
    }
    return 0;
}

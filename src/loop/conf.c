/*
 * conf.c - sandlet.conf: tokenizer, parser, defaults and request routing
 * over the result (conf.h documents the format).
 *
 * The parser is table-driven: each directive names the block it belongs
 * to, its argument count and a handler, so the grammar lives in one place.
 * Every read is bounded by the given length, text from the file reaches an
 * error message only through "%s" after being made printable, and every
 * allocation failure unwinds without leaks.  This file never touches the
 * network or processes: apart from reading the file in sandlet_conf_load it
 * only turns text into a sandlet_conf.
 */
#include "config.h"

#include "conf.h"
#include "lib/servlet.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

/* A configuration this big is a mistake (or /dev/zero), not a site. */
#define CONF_MAX_BYTES (1024 * 1024)
/* At most this much file text is quoted in a message, so one bad token
 * cannot push the location and the explanation out of a short buffer. */
#define SHOWN_MAX 48
#define MAX_ARGS  2

enum tok_type { T_EOF, T_WORD, T_STRING, T_LBRACE, T_RBRACE, T_SEMI };

typedef struct token {
    enum tok_type type;
    char *text; /* decoded, NUL-terminated; only for T_WORD and T_STRING */
    int line;
    int col;
} token;

enum ctx { CTX_NONE, CTX_TOP, CTX_SANDBOX, CTX_SERVLET };

/* Directives allowed once per block remember the line that set them. */
enum slot {
    SLOT_NONE,
    SLOT_USER,
    SLOT_DOCROOT,
    SLOT_ACCESS_LOG,
    SLOT_ERROR_LOG,
    SLOT_STATUS,
    SLOT_HEADER_TIMEOUT,
    SLOT_BODY_TIMEOUT,
    SLOT_KEEPALIVE_TIMEOUT,
    SLOT_SEND_TIMEOUT,
    SLOT_MAX_CONNECTIONS,
    SLOT_MAX_HEADER_SIZE,
    SLOT_MAX_TARGET_LENGTH,
    SLOT_MAX_BODY_SIZE,
    SLOT_SESSION_SECRET,
    SLOT_WORKERS,
    SLOT_QUEUE,
    SLOT_QUEUE_TIMEOUT,
    SLOT_PIPELINE,
    SLOT_SB_USER,
    SLOT_SB_GROUP,
    SLOT_MEMORY,
    SLOT_OPEN_FILES,
    SLOT_CPU,
    SLOT_CORE,
    SLOT_MAX_FILE_SIZE,
    SLOT_WRITE_QUOTA,
    SLOT_WRITE_FILES,
    SLOT_VIOLATIONS,
    SLOT_TIMEOUT,
    SLOT_MAX_REQUESTS,
    SLOT_SESSIONS,
    SLOT_SESSION_SIZE,
    SLOT_SESSION_TIMEOUT,
    SLOT_SESSION_SECURE,
    SLOT_SERVLET_TIMEOUT,
    SLOT_SERVLET_MAX_BODY,
    SLOT_LIBRARY,
    SLOT_SANDBOX,
    SLOT_COUNT
};

/* A servlet's "sandbox NAME", kept until the whole file is read so that a
 * sandbox may be declared after the servlets that use it. */
typedef struct sandbox_ref {
    char *name; /* NULL: SANDLET_DEFAULT_SANDBOX */
    int line;
    int col;
} sandbox_ref;

typedef struct parser {
    const char *p;
    const char *end;
    int line;
    int col;
    const char *name;
    const char *basedir;
    sandlet_conf *conf;
    sandbox_ref *refs; /* parallel to conf->servlets */
    size_t cur;        /* the sandbox or servlet whose block is open */
    int seen[SLOT_COUNT];
    char *err;
    size_t errlen;
    bool in_servlet; /* inside a servlet block: for directives of both levels */
} parser;

typedef struct directive {
    const char *name;
    enum ctx ctx;
    unsigned nargs;
    const char *usage; /* arguments, for messages */
    enum slot slot;    /* SLOT_NONE: repeatable */
    enum ctx block;    /* CTX_NONE: ends with ';', else opens this block */
    int (*open)(parser *ps, const token *dir, token *args);
    int (*close)(parser *ps, const token *dir);
} directive;

static int do_listen(parser *ps, const token *dir, token *args);
static int do_user(parser *ps, const token *dir, token *args);
static int do_docroot(parser *ps, const token *dir, token *args);
static int do_log(parser *ps, const token *dir, token *args);
static int do_status(parser *ps, const token *dir, token *args);
static int do_secret(parser *ps, const token *dir, token *args);
static int do_timeout(parser *ps, const token *dir, token *args);
static int do_size(parser *ps, const token *dir, token *args);
static int open_sandbox(parser *ps, const token *dir, token *args);
static int close_sandbox(parser *ps, const token *dir);
static int do_limit(parser *ps, const token *dir, token *args);
static int open_servlet(parser *ps, const token *dir, token *args);
static int close_servlet(parser *ps, const token *dir);
static int do_workers(parser *ps, const token *dir, token *args);
static int do_queue(parser *ps, const token *dir, token *args);
static int do_queue_timeout(parser *ps, const token *dir, token *args);
static int do_pipeline(parser *ps, const token *dir, token *args);
static int do_library(parser *ps, const token *dir, token *args);
static int do_use_sandbox(parser *ps, const token *dir, token *args);
static int do_param(parser *ps, const token *dir, token *args);
static int do_confine(parser *ps, const token *dir, token *args);
static int do_servlet_timeout(parser *ps, const token *dir, token *args);
static int do_session(parser *ps, const token *dir, token *args);

/* Order matters only for messages: "expected" lists follow it. */
static const directive directives[] = {
    {"listen", CTX_TOP, 1, "ADDR:PORT", SLOT_NONE, CTX_NONE, do_listen, NULL},
    {"user", CTX_TOP, 1, "NAME", SLOT_USER, CTX_NONE, do_user, NULL},
    {"docroot", CTX_TOP, 1, "DIR", SLOT_DOCROOT, CTX_NONE, do_docroot, NULL},
    {"access-log", CTX_TOP, 1, "FILE", SLOT_ACCESS_LOG, CTX_NONE, do_log, NULL},
    {"error-log", CTX_TOP, 1, "FILE", SLOT_ERROR_LOG, CTX_NONE, do_log, NULL},
    {"status-page", CTX_TOP, 1, "PATH", SLOT_STATUS, CTX_NONE, do_status, NULL},
    {"header-timeout", CTX_TOP, 1, "MS", SLOT_HEADER_TIMEOUT, CTX_NONE, do_timeout, NULL},
    {"body-timeout", CTX_TOP, 1, "MS", SLOT_BODY_TIMEOUT, CTX_NONE, do_timeout, NULL},
    {"keepalive-timeout", CTX_TOP, 1, "MS", SLOT_KEEPALIVE_TIMEOUT, CTX_NONE, do_timeout, NULL},
    {"send-timeout", CTX_TOP, 1, "MS", SLOT_SEND_TIMEOUT, CTX_NONE, do_timeout, NULL},
    {"max-connections", CTX_TOP, 1, "N", SLOT_MAX_CONNECTIONS, CTX_NONE, do_timeout, NULL},
    {"max-header-size", CTX_TOP, 1, "BYTES", SLOT_MAX_HEADER_SIZE, CTX_NONE, do_size, NULL},
    {"max-target-length", CTX_TOP, 1, "BYTES", SLOT_MAX_TARGET_LENGTH, CTX_NONE, do_size, NULL},
    {"max-body-size", CTX_TOP, 1, "BYTES", SLOT_MAX_BODY_SIZE, CTX_NONE, do_size, NULL},
    {"session-secret-file", CTX_TOP, 1, "FILE", SLOT_SESSION_SECRET, CTX_NONE, do_secret, NULL},
    {"sandbox", CTX_TOP, 1, "NAME { ... }", SLOT_NONE, CTX_SANDBOX, open_sandbox, close_sandbox},
    {"servlet", CTX_TOP, 1, "PATH { ... }", SLOT_NONE, CTX_SERVLET, open_servlet, close_servlet},
    {"workers", CTX_SANDBOX, 1, "N", SLOT_WORKERS, CTX_NONE, do_workers, NULL},
    {"queue", CTX_SANDBOX, 1, "N", SLOT_QUEUE, CTX_NONE, do_queue, NULL},
    {"queue-timeout", CTX_SANDBOX, 1, "MS", SLOT_QUEUE_TIMEOUT, CTX_NONE, do_queue_timeout, NULL},
    {"pipeline", CTX_SANDBOX, 1, "N", SLOT_PIPELINE, CTX_NONE, do_pipeline, NULL},
    {"user", CTX_SANDBOX, 1, "NAME", SLOT_SB_USER, CTX_NONE, do_confine, NULL},
    {"group", CTX_SANDBOX, 1, "NAME", SLOT_SB_GROUP, CTX_NONE, do_confine, NULL},
    {"readable", CTX_SANDBOX, 1, "PATH", SLOT_NONE, CTX_NONE, do_confine, NULL},
    {"writable", CTX_SANDBOX, 1, "DIR", SLOT_NONE, CTX_NONE, do_confine, NULL},
    {"memory", CTX_SANDBOX, 1, "MIB|unlimited", SLOT_MEMORY, CTX_NONE, do_limit, NULL},
    {"open-files", CTX_SANDBOX, 1, "N|unlimited", SLOT_OPEN_FILES, CTX_NONE, do_limit, NULL},
    {"max-file-size", CTX_SANDBOX, 1, "BYTES|unlimited", SLOT_MAX_FILE_SIZE, CTX_NONE, do_limit,
     NULL},
    {"write-quota", CTX_SANDBOX, 1, "BYTES|unlimited", SLOT_WRITE_QUOTA, CTX_NONE, do_limit, NULL},
    {"write-files", CTX_SANDBOX, 1, "N|unlimited", SLOT_WRITE_FILES, CTX_NONE, do_limit, NULL},
    {"database-port", CTX_SANDBOX, 1, "PORT", SLOT_NONE, CTX_NONE, do_limit, NULL},
    {"cpu-seconds", CTX_SANDBOX, 1, "N", SLOT_CPU, CTX_NONE, do_confine, NULL},
    {"core-dumps", CTX_SANDBOX, 1, "on|off", SLOT_CORE, CTX_NONE, do_confine, NULL},
    {"syscalls", CTX_SANDBOX, 1, "files|database", SLOT_NONE, CTX_NONE, do_confine, NULL},
    {"syscall-violations", CTX_SANDBOX, 1, "kill|log", SLOT_VIOLATIONS, CTX_NONE, do_confine, NULL},
    {"timeout", CTX_SANDBOX, 1, "MS", SLOT_TIMEOUT, CTX_NONE, do_confine, NULL},
    {"max-requests", CTX_SANDBOX, 1, "N", SLOT_MAX_REQUESTS, CTX_NONE, do_confine, NULL},
    {"sessions", CTX_SANDBOX, 1, "memory|none", SLOT_SESSIONS, CTX_NONE, do_session, NULL},
    {"session-size", CTX_SANDBOX, 1, "BYTES", SLOT_SESSION_SIZE, CTX_NONE, do_session, NULL},
    {"session-timeout", CTX_SANDBOX, 1, "SECONDS", SLOT_SESSION_TIMEOUT, CTX_NONE, do_session,
     NULL},
    {"session-cookie-secure", CTX_SANDBOX, 1, "on|off", SLOT_SESSION_SECURE, CTX_NONE, do_session,
     NULL},
    {"library", CTX_SERVLET, 1, "FILE", SLOT_LIBRARY, CTX_NONE, do_library, NULL},
    {"timeout", CTX_SERVLET, 1, "MS", SLOT_SERVLET_TIMEOUT, CTX_NONE, do_servlet_timeout, NULL},
    {"max-body-size", CTX_SERVLET, 1, "BYTES", SLOT_SERVLET_MAX_BODY, CTX_NONE, do_size, NULL},
    {"sandbox", CTX_SERVLET, 1, "NAME", SLOT_SANDBOX, CTX_NONE, do_use_sandbox, NULL},
    {"param", CTX_SERVLET, 2, "NAME VALUE", SLOT_NONE, CTX_NONE, do_param, NULL},
};
#define NDIRECTIVES (sizeof(directives) / sizeof(directives[0]))

/* ---- helpers ------------------------------------------------------------ */

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Makes room for element n of an array holding n elements.  The capacity
 * is implied by n (4, 8, 16, ...), so the public structs need no capacity
 * fields.  Returns the (possibly moved) array, or NULL when out of memory,
 * in which case the old array is untouched. */
static void *reserve(void *arr, size_t n, size_t size)
{
    if (n != 0 && (n < 4 || (n & (n - 1)) != 0))
        return arr;
    size_t cap = n == 0 ? 4 : n * 2;
    if (cap < n || cap > SIZE_MAX / size)
        return NULL;
    return realloc(arr, cap * size);
}

/* Copies s for a message: control and non-ASCII bytes become '?', so a
 * hostile file cannot send escape sequences to a terminal or a log, and
 * long text is cut with "...". */
static const char *shown(char *buf, size_t size, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    buf[i] = '\0';
    if (s[i] && size >= 4)
        memcpy(buf + size - 4, "...", 4);
    return buf;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int fail(parser *ps, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Writes "FILE:LINE:COL: message" and returns -EINVAL. */
static int fail(parser *ps, int line, int col, const char *fmt, ...)
{
    if (!ps->err || ps->errlen == 0)
        return -EINVAL;
    int n = snprintf(ps->err, ps->errlen, "%s:%d:%d: ", ps->name, line, col);
    if (n >= 0 && (size_t)n < ps->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int nomem(parser *ps)
{
    set_err(ps->err, ps->errlen, "%s:%d:%d: out of memory while reading the configuration",
            ps->name, ps->line, ps->col);
    return -ENOMEM;
}

/* What the parser found instead of what it expected, for messages. */
static const char *what(const token *t, char *buf, size_t size)
{
    char s[SHOWN_MAX];
    switch (t->type) {
    case T_EOF: return "end of file";
    case T_LBRACE: return "'{'";
    case T_RBRACE: return "'}'";
    case T_SEMI: return "';'";
    case T_WORD: snprintf(buf, size, "'%s'", shown(s, sizeof(s), t->text)); return buf;
    case T_STRING: snprintf(buf, size, "string \"%s\"", shown(s, sizeof(s), t->text)); return buf;
    }
    return "?";
}

static const char *where(enum ctx ctx)
{
    switch (ctx) {
    case CTX_SANDBOX: return "in sandbox block";
    case CTX_SERVLET: return "in servlet block";
    default: return "at top level";
    }
}

/* "listen, user, docroot, sandbox or servlet", straight from the table. */
static const char *expected_list(enum ctx ctx, char *buf, size_t size)
{
    size_t total = 0, i = 0, pos = 0;
    for (size_t k = 0; k < NDIRECTIVES; k++)
        total += directives[k].ctx == ctx;
    buf[0] = '\0';
    for (size_t k = 0; k < NDIRECTIVES && pos < size; k++) {
        if (directives[k].ctx != ctx)
            continue;
        const char *sep = i == 0 ? "" : i + 1 == total ? " or " : ", ";
        int n = snprintf(buf + pos, size - pos, "%s%s", sep, directives[k].name);
        if (n < 0)
            break;
        pos += (size_t)n;
        i++;
    }
    return buf;
}

static const directive *find_directive(const char *name, enum ctx ctx)
{
    for (size_t k = 0; k < NDIRECTIVES; k++)
        if (directives[k].ctx == ctx && strcmp(directives[k].name, name) == 0)
            return &directives[k];
    return NULL;
}

static size_t find_sandbox(const sandlet_conf *conf, const char *name)
{
    for (size_t i = 0; i < conf->nsandboxes; i++)
        if (strcmp(conf->sandboxes[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

/* Strict decimal: digits only, so "+1", " 1", "1x" and "0x10" are all
 * refused, unlike strtoul.  Returns 0, -1 for not a number, -2 for out of
 * range. */
static int parse_uint(const char *s, unsigned long min, unsigned long max, unsigned *out)
{
    unsigned long v = 0;
    bool big = false;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        if (!big)
            v = v * 10 + (unsigned long)(*s - '0');
        if (v > max)
            big = true;
    }
    if (big || v < min)
        return -2;
    *out = (unsigned)v;
    return 0;
}

/* ---- tokenizer ---------------------------------------------------------- */

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_word(char c)
{
    return !is_space(c) && c != '{' && c != '}' && c != ';' && c != '#' && c != '"';
}

/* Columns count bytes, so a tab or a UTF-8 sequence advances by its size. */
static void advance(parser *ps)
{
    if (*ps->p == '\n') {
        ps->line++;
        ps->col = 1;
    } else {
        ps->col++;
    }
    ps->p++;
}

static int lex_string(parser *ps, token *t)
{
    advance(ps); /* the opening quote */
    /* A first pass finds the end and checks the escapes, so that the copy
     * is sized exactly; a string holds no newline, so offsets are columns. */
    size_t n = 0;
    const char *q = ps->p;
    for (;;) {
        if (q == ps->end)
            return fail(ps, t->line, t->col,
                        "unterminated string (expected '\"' before end of file)");
        char c = *q;
        if (c == '"')
            break;
        if (c == '\n')
            return fail(ps, t->line, t->col,
                        "unterminated string (expected '\"' before end of line)");
        if (c == '\0')
            return fail(ps, ps->line, ps->col + (int)(q - ps->p),
                        "NUL byte in string (expected text)");
        if (c == '\\') {
            if (q + 1 == ps->end)
                return fail(ps, t->line, t->col,
                            "unterminated string (expected '\"' before end of file)");
            if (q[1] != '"' && q[1] != '\\') {
                unsigned char e = (unsigned char)q[1];
                return fail(ps, ps->line, ps->col + (int)(q - ps->p),
                            "unknown escape '\\%c' in string (expected \\\" or \\\\)",
                            e >= 0x21 && e < 0x7f ? e : '?');
            }
            q++;
        }
        q++;
        n++;
    }
    char *s = malloc(n + 1);
    if (!s)
        return nomem(ps);
    for (size_t i = 0; i < n; i++) {
        if (*ps->p == '\\')
            advance(ps);
        s[i] = *ps->p;
        advance(ps);
    }
    s[n] = '\0';
    advance(ps); /* the closing quote */
    t->type = T_STRING;
    t->text = s;
    return 0;
}

static int lex(parser *ps, token *t)
{
    t->text = NULL;
    while (ps->p < ps->end) {
        if (is_space(*ps->p)) {
            advance(ps);
        } else if (*ps->p == '#') {
            while (ps->p < ps->end && *ps->p != '\n')
                advance(ps);
        } else {
            break;
        }
    }
    t->line = ps->line;
    t->col = ps->col;
    if (ps->p == ps->end) {
        t->type = T_EOF;
        return 0;
    }
    switch (*ps->p) {
    case '{':
        t->type = T_LBRACE;
        advance(ps);
        return 0;
    case '}':
        t->type = T_RBRACE;
        advance(ps);
        return 0;
    case ';':
        t->type = T_SEMI;
        advance(ps);
        return 0;
    case '"': return lex_string(ps, t);
    }
    const char *start = ps->p;
    while (ps->p < ps->end && is_word(*ps->p)) {
        /* A NUL would silently cut the word short once it is a C string. */
        if (*ps->p == '\0')
            return fail(ps, ps->line, ps->col, "NUL byte in word (expected text)");
        advance(ps);
    }
    t->type = T_WORD;
    t->text = dupn(start, (size_t)(ps->p - start));
    return t->text ? 0 : nomem(ps);
}

/* ---- directives ----------------------------------------------------------- */

/* Adds "1.2.3.4:80" or "[::1]:80"; line and col locate it for messages. */
static int add_listen(parser *ps, const char *s, int line, int col)
{
    char sh[SHOWN_MAX], sh2[SHOWN_MAX];
    char host[INET6_ADDRSTRLEN];
    const char *h, *hend, *port;
    int af;

    if (s[0] == '[') {
        af = AF_INET6;
        h = s + 1;
        hend = strchr(h, ']');
        if (!hend)
            return fail(ps, line, col,
                        "missing ']' in listen '%s' (expected [IPV6]:PORT, e.g. [::1]:8080)",
                        shown(sh, sizeof(sh), s));
        if (hend[1] != ':')
            return fail(ps, line, col,
                        "missing ':PORT' after ']' in listen '%s' (expected [IPV6]:PORT, "
                        "e.g. [::1]:8080)",
                        shown(sh, sizeof(sh), s));
        port = hend + 2;
    } else {
        af = AF_INET;
        h = s;
        hend = strchr(s, ':');
        if (!hend)
            return fail(ps, line, col,
                        "missing ':PORT' in listen '%s' (expected ADDR:PORT, e.g. "
                        "127.0.0.1:8080 or [::1]:8080)",
                        shown(sh, sizeof(sh), s));
        if (strchr(hend + 1, ':'))
            return fail(ps, line, col,
                        "too many ':' in listen '%s' (expected ADDR:PORT; IPv6 addresses go "
                        "in brackets, e.g. [::1]:8080)",
                        shown(sh, sizeof(sh), s));
        port = hend + 1;
    }

    size_t hlen = (size_t)(hend - h);
    if (hlen >= sizeof(host))
        hlen = sizeof(host) - 1; /* too long to be valid: inet_pton refuses the cut */
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    unsigned char addr[sizeof(struct in6_addr)];
    if (hlen == 0 || (size_t)(hend - h) >= sizeof(host) || inet_pton(af, host, addr) != 1)
        return fail(ps, line, col, "invalid %s address '%s' in listen (expected a numeric %s)",
                    af == AF_INET ? "IPv4" : "IPv6", shown(sh, sizeof(sh), host),
                    af == AF_INET ? "IPv4 address like 127.0.0.1 or [IPV6]"
                                  : "IPv6 address like [::1]");

    unsigned p;
    if (parse_uint(port, 0, 65535, &p) != 0)
        return fail(ps, line, col, "invalid port '%s' in listen '%s' (expected 0..65535)",
                    shown(sh, sizeof(sh), port), shown(sh2, sizeof(sh2), s));

    sandlet_conf *c = ps->conf;
    sandlet_listen_conf *l = reserve(c->listens, c->nlistens, sizeof(*l));
    if (!l)
        return nomem(ps);
    c->listens = l;
    char *copy = dupn(host, hlen);
    if (!copy)
        return nomem(ps);
    l[c->nlistens++] = (sandlet_listen_conf){.host = copy, .port = p, .line = line};
    return 0;
}

static int do_listen(parser *ps, const token *dir, token *args)
{
    (void)dir;
    return add_listen(ps, args[0].text, args[0].line, args[0].col);
}

/* Takes a non-empty argument for a single-valued string field. */
static int take_string(parser *ps, const token *dir, token *arg, const char *meta, char **field)
{
    if (!arg->text[0])
        return fail(ps, arg->line, arg->col, "empty argument for '%s' (expected '%s %s;')",
                    dir->text, dir->text, meta);
    *field = arg->text;
    arg->text = NULL;
    return 0;
}

static int do_user(parser *ps, const token *dir, token *args)
{
    return take_string(ps, dir, &args[0], "NAME", &ps->conf->user);
}

/* Takes arg's text as a path made absolute against the configuration's
 * folder: every relative path in the file (libraries, docroot, logs,
 * Landlock paths) follows this one rule.  Returns an owned string, or
 * NULL when memory is short. */
static char *absolute(parser *ps, token *arg)
{
    const char *base = ps->basedir;
    if (arg->text[0] == '/' || !base || !base[0]) {
        char *own = arg->text;
        arg->text = NULL;
        return own;
    }
    size_t bl = strlen(base), pl = strlen(arg->text);
    bool slash = base[bl - 1] == '/';
    char *joined = malloc(bl + !slash + pl + 1);
    if (!joined)
        return NULL;
    memcpy(joined, base, bl);
    if (!slash)
        joined[bl++] = '/';
    memcpy(joined + bl, arg->text, pl + 1);
    return joined;
}

/* A path argument, made absolute against the configuration's folder. */
static int take_path(parser *ps, const token *dir, token *arg, const char *meta, char **field)
{
    if (!arg->text[0])
        return fail(ps, arg->line, arg->col, "empty argument for '%s' (expected '%s %s;')",
                    dir->text, dir->text, meta);
    *field = absolute(ps, arg);
    return *field ? 0 : nomem(ps);
}

static int do_docroot(parser *ps, const token *dir, token *args)
{
    return take_path(ps, dir, &args[0], "DIR", &ps->conf->docroot);
}

static int do_status(parser *ps, const token *dir, token *args)
{
    char sh[SHOWN_MAX];
    if (args[0].text[0] != '/')
        return fail(ps, args[0].line, args[0].col,
                    "status-page '%s' must be a path starting with '/'",
                    shown(sh, sizeof(sh), args[0].text));
    return take_string(ps, dir, &args[0], "PATH", &ps->conf->status_page);
}

/* session-secret-file: the secret that sandboxes' session keys derive
 * from, so that they are the same on every start and every host.  Read
 * here, while sandletd is still the user that started it (root, before
 * any privilege drop), and checked as ssh checks a private key: a file
 * others may read or replace would let them mint any sandbox's session
 * ids.  Only a hash of the contents is kept. */
static int do_secret(parser *ps, const token *dir, token *args)
{
    char sh[SHOWN_MAX];
    sandlet_conf *c = ps->conf;
    int rc = take_path(ps, dir, &args[0], "FILE", &c->session_secret_file);
    if (rc)
        return rc;
    const char *f = shown(sh, sizeof(sh), c->session_secret_file);
    int line = args[0].line, col = args[0].col;
    int fd = open(c->session_secret_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0)
        return fail(ps, line, col,
                    "session-secret-file '%s' cannot be opened: %s (expected a file of 32 or "
                    "more random bytes, e.g. 'head -c 32 /dev/urandom > FILE; chmod 600 FILE')",
                    f, strerror(errno));
    struct stat st;
    const char *bad = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        bad = "is not a regular file (expected a file of 32 or more random bytes)";
    else if (st.st_uid != 0 && st.st_uid != geteuid())
        bad = "is owned by another user (expected root or the user that starts sandletd; "
              "chown it)";
    else if (st.st_mode & 077)
        bad = "may be read or written by group or others (expected mode 600 or 400; chmod "
              "600 it)";
    else if (st.st_size < SANDLET_SESSION_SECRET_MIN || st.st_size > SANDLET_SESSION_SECRET_MAX)
        bad = "has the wrong size (expected 32 to 4096 random bytes, e.g. 'head -c 32 "
              "/dev/urandom > FILE')";
    if (bad) {
        close(fd);
        return fail(ps, line, col, "session-secret-file '%s' %s", f, bad);
    }
    uint8_t buf[SANDLET_SESSION_SECRET_MAX];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || (len += (size_t)n) == sizeof(buf))
            break;
    }
    int err = errno;
    close(fd);
    if (len < SANDLET_SESSION_SECRET_MIN) {
        sodium_memzero(buf, sizeof(buf));
        return fail(ps, line, col, "session-secret-file '%s' cannot be read: %s", f,
                    len ? "it shrank while being read" : strerror(err));
    }
    static const char context[] = "sandlet session secret v1";
    crypto_generichash_state hs;
    crypto_generichash_init(&hs, NULL, 0, sizeof(c->session_secret));
    crypto_generichash_update(&hs, (const uint8_t *)context, sizeof(context));
    crypto_generichash_update(&hs, buf, len);
    crypto_generichash_final(&hs, c->session_secret, sizeof(c->session_secret));
    sodium_memzero(&hs, sizeof(hs));
    sodium_memzero(buf, sizeof(buf));
    c->session_secret_set = true;
    return 0;
}

static int do_log(parser *ps, const token *dir, token *args)
{
    char **field =
        strcmp(dir->text, "access-log") == 0 ? &ps->conf->access_log : &ps->conf->error_log;
    return take_path(ps, dir, &args[0], "FILE", field);
}

static int add_sandbox(parser *ps, char *name, int line)
{
    sandlet_conf *c = ps->conf;
    sandlet_sandbox_conf *s = reserve(c->sandboxes, c->nsandboxes, sizeof(*s));
    if (!s)
        return nomem(ps);
    c->sandboxes = s;
    ps->cur = c->nsandboxes;
    s[c->nsandboxes++] = (sandlet_sandbox_conf){.name = name,
                                                .workers = SANDLET_DEFAULT_WORKERS,
                                                .queue = SANDLET_DEFAULT_QUEUE,
                                                .queue_timeout = SANDLET_DEFAULT_QUEUE_TIMEOUT,
                                                .timeout = SANDLET_DEFAULT_TIMEOUT,
                                                .sessions = SANDLET_SESSIONS_MEMORY,
                                                .session_size = SANDLET_DEFAULT_SESSION_SIZE,
                                                .session_timeout = SANDLET_DEFAULT_SESSION_TIMEOUT,
                                                .memory_mib = SANDLET_DEFAULT_MEMORY_MIB,
                                                .open_files = SANDLET_DEFAULT_OPEN_FILES,
                                                .max_file_size = SANDLET_DEFAULT_MAX_FILE_SIZE,
                                                .write_quota = SANDLET_DEFAULT_WRITE_QUOTA,
                                                .write_files = SANDLET_DEFAULT_WRITE_FILES,
                                                .line = line};
    return 0;
}

static int open_sandbox(parser *ps, const token *dir, token *args)
{
    char sh[SHOWN_MAX];
    token *name = &args[0];
    if (!name->text[0])
        return fail(ps, name->line, name->col,
                    "empty sandbox name (expected 'sandbox NAME { ... }')");
    size_t i = find_sandbox(ps->conf, name->text);
    if (i != SIZE_MAX)
        return fail(ps, name->line, name->col,
                    "duplicate sandbox '%s' (already defined at line %d; expected a new name)",
                    shown(sh, sizeof(sh), name->text), ps->conf->sandboxes[i].line);
    int rc = add_sandbox(ps, name->text, dir->line);
    if (rc == 0)
        name->text = NULL;
    return rc;
}

static int number(parser *ps, const token *dir, const token *arg, unsigned long min,
                  unsigned long max, unsigned *out)
{
    char sh[SHOWN_MAX];
    int rc = parse_uint(arg->text, min, max, out);
    if (rc == -1)
        return fail(ps, arg->line, arg->col,
                    "invalid number '%s' for '%s' (expected a decimal number %lu..%lu)",
                    shown(sh, sizeof(sh), arg->text), dir->text, min, max);
    if (rc == -2)
        return fail(ps, arg->line, arg->col, "'%s %s' out of range (expected %lu..%lu)", dir->text,
                    shown(sh, sizeof(sh), arg->text), min, max);
    return 0;
}

static int do_workers(parser *ps, const token *dir, token *args)
{
    return number(ps, dir, &args[0], 1, SANDLET_MAX_WORKERS, &ps->conf->sandboxes[ps->cur].workers);
}

static int do_queue(parser *ps, const token *dir, token *args)
{
    return number(ps, dir, &args[0], 0, 65535, &ps->conf->sandboxes[ps->cur].queue);
}

static int do_queue_timeout(parser *ps, const token *dir, token *args)
{
    return number(ps, dir, &args[0], 1, 3600000, &ps->conf->sandboxes[ps->cur].queue_timeout);
}

/* Kept so that configurations written for earlier releases still load:
 * a worker now holds only the request it serves (a servlet can read
 * whatever waits on its socketpair, and requests queued behind one belong
 * to other clients), so the value is checked and then ignored. */
static int do_pipeline(parser *ps, const token *dir, token *args)
{
    unsigned n;
    int rc = number(ps, dir, &args[0], 1, SANDLET_MAX_PIPELINE, &n);
    if (rc == 0)
        sandlet_warn("%s:%d:%d: 'pipeline' is ignored: a worker is handed a request only "
                     "when it has answered the previous one, so that no servlet can read "
                     "another client's request; remove the line",
                     ps->name, dir->line, dir->col);
    return rc;
}

/* Appends a path to a sandbox's Landlock list; relative paths resolve
 * against the configuration's folder, like libraries. */
static int add_path(parser *ps, token *arg, char ***list, size_t *n)
{
    if (!arg->text[0])
        return fail(ps, arg->line, arg->col, "empty path (expected an absolute or relative path)");
    char *path = absolute(ps, arg);
    if (!path)
        return nomem(ps);
    char **grown = reserve(*list, *n, sizeof(**list));
    if (!grown) {
        free(path);
        return nomem(ps);
    }
    *list = grown;
    grown[(*n)++] = path;
    return 0;
}

static int on_off(parser *ps, const token *dir, const token *arg, const char *on, const char *off,
                  bool *out)
{
    char sh[SHOWN_MAX];
    if (strcmp(arg->text, on) == 0)
        *out = true;
    else if (strcmp(arg->text, off) == 0)
        *out = false;
    else
        return fail(ps, arg->line, arg->col, "invalid value '%s' for '%s' (expected %s or %s)",
                    shown(sh, sizeof(sh), arg->text), dir->text, on, off);
    return 0;
}

/* The sandbox's confinement and guardian settings (DESIGN.md's
 * order: limits, user, Landlock paths, system-call groups). */
static int do_confine(parser *ps, const token *dir, token *args)
{
    sandlet_sandbox_conf *sb = &ps->conf->sandboxes[ps->cur];
    const char *d = dir->text;
    char sh[SHOWN_MAX];
    if (strcmp(d, "user") == 0)
        return take_string(ps, dir, &args[0], "NAME", &sb->user);
    if (strcmp(d, "group") == 0)
        return take_string(ps, dir, &args[0], "NAME", &sb->group);
    if (strcmp(d, "readable") == 0)
        return add_path(ps, &args[0], &sb->readable, &sb->nreadable);
    if (strcmp(d, "writable") == 0)
        return add_path(ps, &args[0], &sb->writable, &sb->nwritable);
    if (strcmp(d, "cpu-seconds") == 0)
        return number(ps, dir, &args[0], 1, 1u << 30, &sb->cpu_seconds);
    if (strcmp(d, "core-dumps") == 0)
        return on_off(ps, dir, &args[0], "on", "off", &sb->core_dumps);
    if (strcmp(d, "syscall-violations") == 0)
        return on_off(ps, dir, &args[0], "log", "kill", &sb->learn);
    if (strcmp(d, "timeout") == 0) {
        /* "off" (or 0) lifts the default: a request may run for ever. */
        if (strcmp(args[0].text, "off") == 0) {
            sb->timeout = 0;
            return 0;
        }
        return number(ps, dir, &args[0], 0, 86400000, &sb->timeout);
    }
    if (strcmp(d, "max-requests") == 0)
        return number(ps, dir, &args[0], 1, 4000000000u, &sb->max_requests);
    /* syscalls GROUP */
    if (strcmp(args[0].text, "files") == 0)
        sb->syscalls |= SANDLET_SYSCALLS_FILES;
    else if (strcmp(args[0].text, "database") == 0)
        sb->syscalls |= SANDLET_SYSCALLS_DATABASE;
    else
        return fail(ps, args[0].line, args[0].col,
                    "unknown system-call group '%s' (expected files or database)",
                    shown(sh, sizeof(sh), args[0].text));
    return 0;
}

static int do_servlet_timeout(parser *ps, const token *dir, token *args)
{
    return number(ps, dir, &args[0], 1, 86400000, &ps->conf->servlets[ps->cur].timeout);
}

/* The client timeouts and the connection limit share one handler: the
 * directive's name picks the field. */
static int do_timeout(parser *ps, const token *dir, token *args)
{
    sandlet_conf *c = ps->conf;
    if (strcmp(dir->text, "max-connections") == 0)
        return number(ps, dir, &args[0], 1, 1000000, &c->max_connections);
    unsigned *field = strcmp(dir->text, "header-timeout") == 0 ? &c->header_timeout
                      : strcmp(dir->text, "body-timeout") == 0 ? &c->body_timeout
                      : strcmp(dir->text, "send-timeout") == 0 ? &c->send_timeout
                                                               : &c->keepalive_timeout;
    return number(ps, dir, &args[0], 1, 3600000, field);
}

/* A byte count with an optional binary suffix: "65536", "64k", "16m",
 * "1g".  Strict like parse_uint: no sign, no space, one suffix letter. */
static int parse_size(const char *s, size_t max, size_t *out)
{
    unsigned long long v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (unsigned long long)(*p - '0');
        if (v > max)
            return -2;
    }
    unsigned shift = 0;
    switch (*p) {
    case '\0': break;
    case 'k':
    case 'K': shift = 10; break;
    case 'm':
    case 'M': shift = 20; break;
    case 'g':
    case 'G': shift = 30; break;
    default: return -1;
    }
    if (*p && p[1] != '\0')
        return -1;
    if (v > (max >> shift))
        return -2;
    *out = (size_t)(v << shift);
    return 0;
}

/* Size limits of requests; the directive's name picks the field and its
 * bounds.  A servlet's body limit overrides the global one for its paths. */
static int do_size(parser *ps, const token *dir, token *args)
{
    char sh[SHOWN_MAX];
    sandlet_conf *c = ps->conf;
    size_t min = 0, max = SANDLET_MAX_BODY_SIZE_LIMIT, *field;
    if (strcmp(dir->text, "max-header-size") == 0) {
        min = 1024;
        max = SANDLET_MAX_HEADER_SIZE_LIMIT;
        field = &c->max_header_size;
    } else if (strcmp(dir->text, "max-target-length") == 0) {
        min = 64;
        max = SANDLET_MAX_HEADER_SIZE_LIMIT;
        field = &c->max_target_length;
    } else if (ps->in_servlet) {
        field = &c->servlets[ps->cur].max_body_size;
    } else {
        field = &c->max_body_size;
    }
    size_t v = 0;
    int rc = parse_size(args[0].text, max, &v);
    if (rc == -1)
        return fail(ps, args[0].line, args[0].col,
                    "invalid size '%s' for '%s' (expected bytes, optionally with a k, m or g "
                    "suffix, e.g. 64k)",
                    shown(sh, sizeof(sh), args[0].text), dir->text);
    if (rc == -2 || v < min)
        return fail(ps, args[0].line, args[0].col, "'%s %s' out of range (expected %zu..%zu bytes)",
                    dir->text, shown(sh, sizeof(sh), args[0].text), min, max);
    *field = v;
    return 0;
}

/* A sandbox's session store: kind, size of the shared mapping, idle
 * expiry and the cookie's Secure flag. */
static int do_session(parser *ps, const token *dir, token *args)
{
    char sh[SHOWN_MAX];
    sandlet_sandbox_conf *sb = &ps->conf->sandboxes[ps->cur];
    const char *d = dir->text;
    if (strcmp(d, "sessions") == 0) {
        if (strcmp(args[0].text, "memory") == 0)
            sb->sessions = SANDLET_SESSIONS_MEMORY;
        else if (strcmp(args[0].text, "none") == 0)
            sb->sessions = SANDLET_SESSIONS_NONE;
        else
            return fail(ps, args[0].line, args[0].col,
                        "unknown session store '%s' (expected memory or none)",
                        shown(sh, sizeof(sh), args[0].text));
        return 0;
    }
    if (strcmp(d, "session-timeout") == 0)
        return number(ps, dir, &args[0], 1, 31 * 86400, &sb->session_timeout);
    if (strcmp(d, "session-cookie-secure") == 0)
        return on_off(ps, dir, &args[0], "on", "off", &sb->session_cookie_secure);
    size_t v = 0;
    int rc = parse_size(args[0].text, SANDLET_MAX_SESSION_SIZE, &v);
    if (rc == -1)
        return fail(ps, args[0].line, args[0].col,
                    "invalid size '%s' for '%s' (expected bytes, optionally with a k, m or g "
                    "suffix, e.g. 4m)",
                    shown(sh, sizeof(sh), args[0].text), d);
    if (rc == -2 || v < SANDLET_MIN_SESSION_SIZE)
        return fail(ps, args[0].line, args[0].col,
                    "'%s %s' out of range (expected %zu..%zu bytes; each session takes about 4k)",
                    d, shown(sh, sizeof(sh), args[0].text), SANDLET_MIN_SESSION_SIZE,
                    SANDLET_MAX_SESSION_SIZE);
    sb->session_size = v;
    return 0;
}

/* A sandbox's resource limits.  Each has a default (conf.h), so a sandbox
 * without a line is bounded; "unlimited" is the explicit way out, and 0
 * is refused where it would be ambiguous (nothing, or no limit?). */
static int do_limit(parser *ps, const token *dir, token *args)
{
    char sh[SHOWN_MAX];
    sandlet_sandbox_conf *sb = &ps->conf->sandboxes[ps->cur];
    const char *d = dir->text;
    const token *arg = &args[0];
    bool unlimited = strcmp(arg->text, "unlimited") == 0;
    if (strcmp(d, "database-port") == 0) {
        unsigned port = 0;
        int rc = number(ps, dir, arg, 1, 65535, &port);
        if (rc < 0)
            return rc;
        for (size_t i = 0; i < sb->ndatabase_ports; i++)
            if (sb->database_ports[i] == port)
                return 0;
        if (sb->ndatabase_ports >= SANDLET_MAX_DATABASE_PORTS)
            return fail(ps, arg->line, arg->col, "too many database ports (at most %d per sandbox)",
                        SANDLET_MAX_DATABASE_PORTS);
        sb->database_ports[sb->ndatabase_ports++] = (unsigned short)port;
        return 0;
    }
    if (strcmp(d, "memory") == 0) {
        if (unlimited) {
            sb->memory_mib = 0;
            return 0;
        }
        return number(ps, dir, arg, 16, 1u << 20, &sb->memory_mib);
    }
    if (strcmp(d, "open-files") == 0) {
        if (unlimited) {
            sb->open_files = 0;
            return 0;
        }
        return number(ps, dir, arg, 16, 1u << 20, &sb->open_files);
    }
    if (strcmp(d, "write-files") == 0) {
        if (unlimited) {
            sb->write_files = 0;
            return 0;
        }
        return number(ps, dir, arg, 1, 1000000000u, &sb->write_files);
    }
    /* max-file-size, write-quota: bytes */
    unsigned long long *field =
        strcmp(d, "max-file-size") == 0 ? &sb->max_file_size : &sb->write_quota;
    if (unlimited) {
        *field = 0;
        return 0;
    }
    const size_t max = (size_t)1 << 50;
    size_t v = 0;
    int rc = parse_size(arg->text, max, &v);
    if (rc == -1)
        return fail(ps, arg->line, arg->col,
                    "invalid size '%s' for '%s' (expected bytes, optionally with a k, m or g "
                    "suffix, e.g. 64m, or unlimited)",
                    shown(sh, sizeof(sh), arg->text), d);
    if (rc == -2 || v == 0)
        return fail(ps, arg->line, arg->col,
                    "'%s %s' out of range (expected 1..%zu bytes, or unlimited for no limit)", d,
                    shown(sh, sizeof(sh), arg->text), max);
    *field = v;
    return 0;
}

/* Checks that need the whole sandbox block. */
static int close_sandbox(parser *ps, const token *dir)
{
    sandlet_sandbox_conf *sb = &ps->conf->sandboxes[ps->cur];
    /* A sandbox that can write no file gets no default file-size limit:
     * the only regular file it writes is the error log it inherited as
     * standard error, and a limit would silence it once the log grew
     * past it. */
    if (!sb->nwritable && !(sb->syscalls & SANDLET_SYSCALLS_FILES) && !ps->seen[SLOT_MAX_FILE_SIZE])
        sb->max_file_size = 0;
    if (sb->ndatabase_ports && !(sb->syscalls & SANDLET_SYSCALLS_DATABASE)) {
        char sh[SHOWN_MAX];
        return fail(ps, dir->line, dir->col,
                    "sandbox '%s' has a database-port but no 'syscalls database;' (its workers "
                    "could not open a socket; add it, or remove database-port)",
                    shown(sh, sizeof(sh), sb->name));
    }
    /* The session store is mapped into every worker, inside its address
     * space limit, beside libc, the servlets and their heaps. */
    unsigned long long need = (unsigned long long)sb->session_size + SANDLET_MEMORY_HEADROOM;
    if (sb->memory_mib && sb->sessions == SANDLET_SESSIONS_MEMORY &&
        need > (unsigned long long)sb->memory_mib << 20) {
        char sh[SHOWN_MAX];
        return fail(ps, dir->line, dir->col,
                    "sandbox '%s': session-size %zu bytes does not fit in memory %u (MiB) with "
                    "room for the worker itself; set memory to at least %llu, or lower "
                    "session-size",
                    shown(sh, sizeof(sh), sb->name), sb->session_size, sb->memory_mib,
                    (need + (1u << 20) - 1) >> 20);
    }
    return 0;
}

/* A path ending in slash-star is a prefix route, stored without its '*';
 * any other '*' is refused rather than guessed at, as is text no request
 * path can ever match. */
static int check_path(parser *ps, const token *arg, bool *prefix)
{
    char sh[SHOWN_MAX];
    const char *s = arg->text;
    size_t len = strlen(s);
    if (s[0] != '/')
        return fail(ps, arg->line, arg->col, "servlet path '%s' must start with '/'",
                    shown(sh, sizeof(sh), s));
    *prefix = len >= 2 && s[len - 1] == '*' && s[len - 2] == '/';
    for (size_t i = 0; i < len - (*prefix ? 1 : 0); i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '*')
            return fail(ps, arg->line, arg->col,
                        "'*' in servlet path '%s' (expected it only as a trailing '/*')",
                        shown(sh, sizeof(sh), s));
        if (c <= 0x20 || c == 0x7f || c == '?' || c == '#')
            return fail(ps, arg->line, arg->col,
                        "invalid character in servlet path '%s' (expected no space, control "
                        "character, '?' or '#')",
                        shown(sh, sizeof(sh), s));
    }
    return 0;
}

static int open_servlet(parser *ps, const token *dir, token *args)
{
    char sh[SHOWN_MAX];
    sandlet_conf *c = ps->conf;
    token *path = &args[0];
    bool prefix = false;
    int rc = check_path(ps, path, &prefix);
    if (rc)
        return rc;
    if (prefix)
        path->text[strlen(path->text) - 1] = '\0';
    for (size_t i = 0; i < c->nservlets; i++)
        if (c->servlets[i].prefix == prefix && strcmp(c->servlets[i].path, path->text) == 0)
            return fail(ps, path->line, path->col,
                        "duplicate servlet path '%s%s' (already defined at line %d; expected "
                        "each path once)",
                        shown(sh, sizeof(sh), path->text), prefix ? "*" : "", c->servlets[i].line);

    sandlet_servlet_conf *s = reserve(c->servlets, c->nservlets, sizeof(*s));
    if (!s)
        return nomem(ps);
    c->servlets = s;
    sandbox_ref *r = reserve(ps->refs, c->nservlets, sizeof(*r));
    if (!r)
        return nomem(ps);
    ps->refs = r;
    ps->cur = c->nservlets;
    r[c->nservlets] = (sandbox_ref){0};
    ps->in_servlet = true;
    s[c->nservlets++] = (sandlet_servlet_conf){.max_body_size = SIZE_MAX,
                                               .path = path->text,
                                               .prefix = prefix,
                                               .sandbox = SIZE_MAX,
                                               .line = dir->line};
    path->text = NULL;
    return 0;
}

static int close_servlet(parser *ps, const token *dir)
{
    char sh[SHOWN_MAX];
    const sandlet_servlet_conf *s = &ps->conf->servlets[ps->cur];
    ps->in_servlet = false;
    if (!s->library)
        return fail(ps, dir->line, dir->col,
                    "servlet '%s%s' has no library (expected 'library FILE;' in its block)",
                    shown(sh, sizeof(sh), s->path), s->prefix ? "*" : "");
    return 0;
}

static int do_library(parser *ps, const token *dir, token *args)
{
    token *file = &args[0];
    if (!file->text[0])
        return fail(ps, file->line, file->col,
                    "empty library path (expected '%s FILE;' naming a shared object)", dir->text);
    char *lib = absolute(ps, file);
    if (!lib)
        return nomem(ps);
    ps->conf->servlets[ps->cur].library = lib;
    return 0;
}

static int do_use_sandbox(parser *ps, const token *dir, token *args)
{
    token *name = &args[0];
    if (!name->text[0])
        return fail(ps, name->line, name->col, "empty sandbox name (expected '%s NAME;')",
                    dir->text);
    sandbox_ref *r = &ps->refs[ps->cur];
    *r = (sandbox_ref){.name = name->text, .line = name->line, .col = name->col};
    name->text = NULL;
    return 0;
}

static int do_param(parser *ps, const token *dir, token *args)
{
    if (!args[0].text[0])
        return fail(ps, args[0].line, args[0].col,
                    "empty parameter name (expected '%s NAME VALUE;')", dir->text);
    sandlet_servlet_conf *s = &ps->conf->servlets[ps->cur];
    /* The INIT frame counts parameters in 16 bits; far fewer are sane. */
    if (s->nparams >= SANDLET_MAX_PARAMS)
        return fail(ps, dir->line, dir->col, "too many parameters (at most %d per servlet)",
                    SANDLET_MAX_PARAMS);
    sandlet_param *p = reserve(s->params, s->nparams, sizeof(*p));
    if (!p)
        return nomem(ps);
    s->params = p;
    p[s->nparams++] = (sandlet_param){.name = args[0].text, .value = args[1].text};
    args[0].text = NULL;
    args[1].text = NULL;
    return 0;
}

/* ---- grammar -------------------------------------------------------------- */

static int parse_block(parser *ps, enum ctx ctx, const token *opener, const char *label);

/* "workers 4", for "expected ';' after ..." messages. */
static const char *statement_text(const directive *d, const token *args, char *buf, size_t size)
{
    char sh[SHOWN_MAX];
    size_t pos = (size_t)snprintf(buf, size, "%s", d->name);
    for (unsigned i = 0; i < d->nargs && pos < size; i++)
        pos += (size_t)snprintf(buf + pos, size - pos, " %s", shown(sh, sizeof(sh), args[i].text));
    return buf;
}

static int unknown_directive(parser *ps, enum ctx ctx, const token *dir)
{
    char sh[SHOWN_MAX], list[128];
    const directive *other = NULL;
    for (size_t k = 0; k < NDIRECTIVES && !other; k++)
        if (strcmp(directives[k].name, dir->text) == 0)
            other = &directives[k];
    expected_list(ctx, list, sizeof(list));
    if (!other)
        return fail(ps, dir->line, dir->col, "unknown directive '%s' %s (expected %s)",
                    shown(sh, sizeof(sh), dir->text), where(ctx), list);
    return fail(ps, dir->line, dir->col, "'%s' is not allowed %s (expected %s%s)", other->name,
                where(ctx), list,
                ctx != CTX_TOP && other->ctx == CTX_TOP ? "; is a '}' missing?" : "");
}

static int statement(parser *ps, enum ctx ctx, const token *dir)
{
    char found[SHOWN_MAX + 16], text[3 * SHOWN_MAX + 8], label[SHOWN_MAX];
    token args[MAX_ARGS] = {{0}};
    token term = {0};
    int rc = 0;

    const directive *d = find_directive(dir->text, ctx);
    if (!d)
        return unknown_directive(ps, ctx, dir);

    for (unsigned i = 0; i < d->nargs; i++) {
        rc = lex(ps, &args[i]);
        if (rc)
            goto out;
        if (args[i].type != T_WORD && args[i].type != T_STRING) {
            rc = fail(ps, args[i].line, args[i].col,
                      "missing argument for '%s' (expected '%s %s'), found %s", d->name, d->name,
                      d->usage, what(&args[i], found, sizeof(found)));
            goto out;
        }
    }
    rc = lex(ps, &term);
    if (rc)
        goto out;
    enum tok_type want = d->block == CTX_NONE ? T_SEMI : T_LBRACE;
    if (term.type != want) {
        rc = fail(ps, term.line, term.col, "expected '%c' after '%s', found %s",
                  want == T_SEMI ? ';' : '{', statement_text(d, args, text, sizeof(text)),
                  what(&term, found, sizeof(found)));
        goto out;
    }
    if (d->slot != SLOT_NONE && ps->seen[d->slot]) {
        rc = fail(ps, dir->line, dir->col,
                  "duplicate '%s' %s (already set at line %d; expected "
                  "it at most once)",
                  d->name, where(ctx), ps->seen[d->slot]);
        goto out;
    }

    if (d->block == CTX_NONE) {
        rc = d->open(ps, dir, args);
        if (rc == 0 && d->slot != SLOT_NONE)
            ps->seen[d->slot] = dir->line;
        goto out;
    }
    shown(label, sizeof(label), args[0].text);
    for (size_t k = 0; k < NDIRECTIVES; k++)
        if (directives[k].ctx == d->block)
            ps->seen[directives[k].slot] = 0;
    rc = d->open(ps, dir, args);
    if (rc == 0)
        rc = parse_block(ps, d->block, dir, label);
    if (rc == 0 && d->close)
        rc = d->close(ps, dir);
out:
    for (unsigned i = 0; i < MAX_ARGS; i++)
        free(args[i].text);
    free(term.text);
    return rc;
}

/* Statements up to the block's '}' (or the end of the file at top level). */
static int parse_block(parser *ps, enum ctx ctx, const token *opener, const char *label)
{
    char found[SHOWN_MAX + 16];
    for (;;) {
        token t;
        int rc = lex(ps, &t);
        if (rc)
            return rc;
        switch (t.type) {
        case T_EOF:
            if (ctx == CTX_TOP)
                return 0;
            /* The opening line is what the reader must look for. */
            return fail(ps, opener->line, opener->col,
                        "unterminated %s block '%s' (expected '}' before end of file)",
                        opener->text, label);
        case T_RBRACE:
            if (ctx != CTX_TOP)
                return 0;
            return fail(ps, t.line, t.col, "unexpected '}' at top level (no block is open)");
        case T_WORD:
            rc = statement(ps, ctx, &t);
            free(t.text);
            if (rc)
                return rc;
            break;
        default:
            rc = fail(ps, t.line, t.col, "expected a directive %s, found %s", where(ctx),
                      what(&t, found, sizeof(found)));
            free(t.text);
            return rc;
        }
    }
}

/* Runs once the whole file is read: sandboxes may follow their servlets. */
static int resolve_sandboxes(parser *ps)
{
    char sh[SHOWN_MAX], sh2[SHOWN_MAX];
    sandlet_conf *c = ps->conf;
    size_t dflt = find_sandbox(c, SANDLET_DEFAULT_SANDBOX);
    for (size_t i = 0; i < c->nservlets; i++) {
        const sandbox_ref *r = &ps->refs[i];
        if (r->name && strcmp(r->name, SANDLET_DEFAULT_SANDBOX) != 0) {
            c->servlets[i].sandbox = find_sandbox(c, r->name);
            if (c->servlets[i].sandbox == SIZE_MAX)
                return fail(ps, r->line, r->col,
                            "servlet '%s' uses undefined sandbox '%s' (expected the name of a "
                            "'sandbox NAME { ... }' block)",
                            shown(sh, sizeof(sh), c->servlets[i].path),
                            shown(sh2, sizeof(sh2), r->name));
            continue;
        }
        if (dflt == SIZE_MAX) {
            char *name = dupn(SANDLET_DEFAULT_SANDBOX, strlen(SANDLET_DEFAULT_SANDBOX));
            if (!name)
                return nomem(ps);
            int rc = add_sandbox(ps, name, 0);
            if (rc) {
                free(name);
                return rc;
            }
            dflt = c->nsandboxes - 1;
            c->sandboxes[dflt].max_file_size = 0; /* writes no files, see close_sandbox */
        }
        c->servlets[i].sandbox = dflt;
    }
    return 0;
}

/* The Path of a sandbox's session cookie: the longest prefix of its
 * servlet routes that ends at a segment boundary of each of them, without
 * its trailing '/', so that a browser sends the cookie to every route of
 * the sandbox and to no path outside that prefix (RFC 6265 path-match).
 * Cut before anything a Path attribute cannot hold; "/" when the routes
 * share nothing or the sandbox has none. */
static char *session_path(const sandlet_conf *c, size_t sb)
{
    const char *first = NULL;
    size_t len = 0;
    for (size_t i = 0; i < c->nservlets; i++) {
        if (c->servlets[i].sandbox != sb)
            continue;
        const char *p = c->servlets[i].path;
        if (!first) {
            first = p;
            len = strlen(p);
            continue;
        }
        size_t n = 0;
        while (n < len && p[n] == first[n])
            n++;
        len = n;
    }
    if (!first)
        return dupn("/", 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)first[i];
        if (ch < 0x21 || ch >= 0x7f || ch == ';' || ch == ',' || ch == '"' || ch == '\\') {
            len = i;
            break;
        }
    }
    /* Every route is at least len long: p[len] is in bounds. */
    bool whole = true;
    for (size_t i = 0; i < c->nservlets && !(len > 0 && first[len - 1] == '/'); i++) {
        const char *p = c->servlets[i].path;
        if (c->servlets[i].sandbox == sb && p[len] != '\0' && p[len] != '/')
            whole = false;
    }
    if (!whole)
        while (len > 0 && first[len - 1] != '/')
            len--;
    if (len > 1 && first[len - 1] == '/')
        len--;
    return len ? dupn(first, len) : dupn("/", 1);
}

/* Each sandbox's session cookie name and Path.  Two sandboxes whose names
 * map to one cookie name (or differ only in case, which some clients and
 * proxies fold) would share the cookie: each would receive and overwrite
 * the other's, so that is an error naming both. */
static int session_cookies(parser *ps)
{
    char sh[SHOWN_MAX], sh2[SHOWN_MAX];
    sandlet_conf *c = ps->conf;
    for (size_t i = 0; i < c->nsandboxes; i++) {
        sandlet_sandbox_conf *sb = &c->sandboxes[i];
        char name[SANDLET_SESSION_COOKIE_SIZE];
        if (sandlet_lib_session_cookie_name(sb->name, name) < 0)
            return fail(ps, sb->line, 1,
                        "sandbox name '%s' is too long (expected at most %d bytes: it names the "
                        "sandbox's session cookie)",
                        shown(sh, sizeof(sh), sb->name), SANDLET_SESSION_NAME_MAX);
        for (size_t j = 0; j < i; j++)
            if (strcasecmp(c->sandboxes[j].session_cookie, name) == 0)
                return fail(ps, sb->line, 1,
                            "sandboxes '%s' (line %d) and '%s' would share the session cookie "
                            "'%s' (expected names that differ in more than case or in characters "
                            "other than letters, digits, '-' and '.'); rename one",
                            shown(sh, sizeof(sh), c->sandboxes[j].name), c->sandboxes[j].line,
                            shown(sh2, sizeof(sh2), sb->name), name);
        sb->session_cookie = dupn(name, strlen(name));
        sb->session_path = session_path(c, i);
        if (!sb->session_cookie || !sb->session_path)
            return nomem(ps);
    }
    return 0;
}

/* ---- public API ----------------------------------------------------------- */

int sandlet_conf_parse(const char *text, size_t len, const char *name, const char *basedir,
                       sandlet_conf **out, char *err, size_t errlen)
{
    parser ps = {.line = 1,
                 .col = 1,
                 .name = name ? name : "(config)",
                 .basedir = basedir,
                 .err = errlen ? err : NULL,
                 .errlen = err ? errlen : 0};
    int rc;

    if (ps.err)
        ps.err[0] = '\0';
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!text && len)
        return -EINVAL;
    /* The same bound as sandlet_conf_load's; it also keeps every line and
     * column number well within an int. */
    if (len > CONF_MAX_BYTES) {
        set_err(ps.err, ps.errlen, "%s: too large (%zu bytes; expected at most %d)", ps.name, len,
                CONF_MAX_BYTES);
        return -EFBIG;
    }
    ps.p = text ? text : "";
    ps.end = ps.p + len;

    ps.conf = calloc(1, sizeof(*ps.conf));
    if (!ps.conf)
        return nomem(&ps);
    ps.conf->header_timeout = SANDLET_DEFAULT_HEADER_TIMEOUT;
    ps.conf->body_timeout = SANDLET_DEFAULT_BODY_TIMEOUT;
    ps.conf->keepalive_timeout = SANDLET_DEFAULT_KEEPALIVE_TIMEOUT;
    ps.conf->send_timeout = SANDLET_DEFAULT_SEND_TIMEOUT;
    ps.conf->max_connections = SANDLET_DEFAULT_MAX_CONNECTIONS;
    ps.conf->max_header_size = SANDLET_DEFAULT_MAX_HEADER_SIZE;
    ps.conf->max_target_length = SANDLET_DEFAULT_MAX_TARGET_LENGTH;
    ps.conf->max_body_size = SANDLET_DEFAULT_MAX_BODY_SIZE;
    ps.conf->file = dupn(ps.name, strlen(ps.name));
    rc = ps.conf->file ? 0 : nomem(&ps);
    if (rc == 0)
        rc = parse_block(&ps, CTX_TOP, NULL, NULL);
    if (rc == 0)
        rc = resolve_sandboxes(&ps);
    if (rc == 0)
        rc = session_cookies(&ps);
    if (rc == 0 && ps.conf->nlistens == 0)
        rc = add_listen(&ps, SANDLET_DEFAULT_LISTEN, 0, 0);
    if (rc == 0 && ps.conf->max_target_length > ps.conf->max_header_size) {
        set_err(err, errlen,
                "%s: max-target-length %zu is larger than max-header-size %zu (expected a "
                "target limit within the header limit)",
                ps.name, ps.conf->max_target_length, ps.conf->max_header_size);
        rc = -EINVAL;
    }
    for (size_t i = 0; rc == 0 && i < ps.conf->nservlets; i++)
        if (ps.conf->servlets[i].max_body_size == SIZE_MAX)
            ps.conf->servlets[i].max_body_size = ps.conf->max_body_size;

    for (size_t i = 0; i < ps.conf->nservlets; i++)
        free(ps.refs[i].name);
    free(ps.refs);
    if (rc) {
        sandlet_conf_free(ps.conf);
        return rc;
    }
    *out = ps.conf;
    return 0;
}

/* Reads at most CONF_MAX_BYTES + 1 bytes, enough to tell "too large". */
static int read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        set_err(err, errlen, "%s: cannot read: %s", path, strerror(e));
        return -e;
    }
    size_t cap = 0, n = 0;
    char *b = NULL;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            if (cap > CONF_MAX_BYTES) {
                set_err(err, errlen,
                        "%s: cannot read: larger than 1 MiB (expected a configuration file "
                        "of at most %d bytes)",
                        path, CONF_MAX_BYTES);
                rc = -EFBIG;
                break;
            }
            size_t ncap = cap ? cap * 2 : 16384;
            if (ncap > CONF_MAX_BYTES + 1)
                ncap = CONF_MAX_BYTES + 1;
            char *nb = realloc(b, ncap);
            if (!nb) {
                set_err(err, errlen, "%s: cannot read: out of memory", path);
                rc = -ENOMEM;
                break;
            }
            b = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            set_err(err, errlen, "%s: cannot read: %s", path, strerror(e));
            rc = -e;
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (rc) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

int sandlet_conf_load(const char *path, sandlet_conf **out, char *err, size_t errlen)
{
    char *text = NULL, *dir;
    size_t len = 0;

    if (err && errlen)
        err[0] = '\0';
    if (!out || !path)
        return -EINVAL;
    *out = NULL;
    int rc = read_file(path, &text, &len, err, errlen);
    if (rc)
        return rc;

    const char *slash = strrchr(path, '/');
    if (!slash)
        dir = dupn(".", 1);
    else if (slash == path)
        dir = dupn("/", 1);
    else
        dir = dupn(path, (size_t)(slash - path));
    /* Absolute, so that library paths stay right whatever the working
     * directory of the processes that use them. */
    char *abs = dir ? realpath(dir, NULL) : NULL;
    if (abs) {
        free(dir);
        dir = abs;
    }
    if (!dir) {
        free(text);
        set_err(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    rc = sandlet_conf_parse(text, len, path, dir, out, err, errlen);
    free(dir);
    free(text);
    return rc;
}

void sandlet_conf_free(sandlet_conf *conf)
{
    if (!conf)
        return;
    for (size_t i = 0; i < conf->nlistens; i++)
        free(conf->listens[i].host);
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        sandlet_sandbox_conf *sb = &conf->sandboxes[i];
        free(sb->name);
        free(sb->session_cookie);
        free(sb->session_path);
        free(sb->user);
        free(sb->group);
        for (size_t j = 0; j < sb->nreadable; j++)
            free(sb->readable[j]);
        for (size_t j = 0; j < sb->nwritable; j++)
            free(sb->writable[j]);
        free(sb->readable);
        free(sb->writable);
    }
    for (size_t i = 0; i < conf->nservlets; i++) {
        sandlet_servlet_conf *s = &conf->servlets[i];
        for (size_t j = 0; j < s->nparams; j++) {
            free(s->params[j].name);
            free(s->params[j].value);
        }
        free(s->params);
        free(s->path);
        free(s->library);
    }
    free(conf->listens);
    free(conf->sandboxes);
    free(conf->servlets);
    free(conf->file);
    free(conf->user);
    free(conf->docroot);
    free(conf->access_log);
    free(conf->status_page);
    free(conf->error_log);
    free(conf->session_secret_file);
    sodium_memzero(conf->session_secret, sizeof(conf->session_secret));
    free(conf);
}

const sandlet_servlet_conf *sandlet_conf_route(const sandlet_conf *conf, const char *path,
                                               size_t len)
{
    const sandlet_servlet_conf *best = NULL;
    size_t bestlen = 0;

    if (!conf || (!path && len))
        return NULL;
    for (size_t i = 0; i < conf->nservlets; i++) {
        const sandlet_servlet_conf *s = &conf->servlets[i];
        size_t n = strlen(s->path);
        if (n > len || memcmp(s->path, path, n) != 0)
            continue;
        if (!s->prefix && n == len)
            return s;
        if (s->prefix && (!best || n > bestlen)) {
            best = s;
            bestlen = n;
        }
    }
    return best;
}

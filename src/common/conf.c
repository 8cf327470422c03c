/*
 * conf.c - sandlet.conf: tokenizer, parser and defaults (conf.h documents
 * the format), and the supervisor's plan: the part of the result that
 * starting workers takes.  Both the acceptor and the supervisor use it;
 * routing over the result is route.c's.
 *
 * The parser is table-driven: each directive is one row of directives[]
 * naming the block it belongs to, the kind of its argument (number, size,
 * word from a list, string, path, list...), the field that stores it, its
 * bounds and its default.  Adding a directive is one row plus its entry in
 * sandlet.conf(5); only what no kind describes (listen, the block openers,
 * session-secret-file, status-page, param) has a handler of its own.
 * Every read is bounded by the given length, text from the file reaches an
 * error message only through "%s" after being made printable, and every
 * allocation failure unwinds without leaks.  This file never touches the
 * network or processes: apart from reading the file in sandlet_conf_load it
 * only turns text into a sandlet_conf.
 */
#include "config.h"

#include "common/conf.h"
#include "lib/servlet.h"
#include "common/log.h"
#include "common/state.h"
#include "db/pq.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
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

enum ctx { CTX_NONE, CTX_TOP, CTX_SANDBOX, CTX_SERVLET, CTX_PAGES, CTX_HOST };

/* What a directive's argument is, and so how it is checked and where it
 * goes.  Every kind but K_CUSTOM and K_BLOCK is parsed and stored by
 * set_value from the row alone. */
enum kind {
    K_UINT,   /* unsigned: decimal, min..max; the `none` word stores 0 */
    K_SIZE,   /* size_t: bytes with an optional k, m or g suffix, min..max */
    K_BYTES,  /* unsigned long long: as K_SIZE; the `none` word stores 0 */
    K_BOOL,   /* bool: one word of `values` */
    K_ENUM,   /* unsigned: one word of `values` */
    K_FLAGS,  /* unsigned: ORs in one word of `values` per line */
    K_STRING, /* char *: not empty */
    K_PATH,   /* char *: not empty, made absolute against the file's folder */
    K_PATHS,  /* char ** at off, its size_t count at off_n: as K_PATH */
    K_PORTS,  /* unsigned short[cap] at off, its size_t count at off_n */
    K_CUSTOM, /* the handler parses and stores (what no kind describes) */
    K_BLOCK,  /* opens a block of context `block`: handler, body, close */
};

typedef struct word_value {
    const char *word;
    unsigned value;
} word_value;

/* A servlet's "sandbox NAME", kept until the whole file is read so that a
 * sandbox may be declared after the servlets that use it. */
typedef struct sandbox_ref {
    char *name; /* NULL: SANDLET_DEFAULT_SANDBOX */
    int line;
    int col;
} sandbox_ref;

/* Rows in the directive table; checked against the table's size. */
#define MAX_DIRECTIVES 80

typedef struct parser {
    const char *p;
    const char *end;
    int line;
    int col;
    const char *name;
    const char *basedir;
    sandlet_conf *conf;
    sandbox_ref *refs;        /* parallel to conf->servlets */
    sandbox_ref *page_refs;   /* parallel to conf->pages */
    size_t cur;               /* the sandbox or servlet whose block is open */
    size_t host;              /* the open host block, or SANDLET_HOST_DEFAULT: apart from
                               * cur, which a servlet block inside the host takes over */
    int seen[MAX_DIRECTIVES]; /* per row: the line that set it in this block */
    int comment_line;         /* the line of the last '#' comment skipped */
    int comment_col;          /* and its column */
    bool no_secrets;          /* sandlet_conf_parse_public: secret files not read */
    bool no_pq;               /* the acceptor's parses: libpq not loaded (check_databases) */
    char *err;
    size_t errlen;
} parser;

typedef struct directive directive;

struct directive {
    const char *name;
    enum ctx ctx; /* the block it belongs in */
    enum kind kind;
    const char *usage; /* arguments, for messages */
    bool repeat;       /* may appear more than once per block */
    unsigned nargs;    /* 0: one */
    /* Where the value goes: offsets into the struct of ctx (sandlet_conf,
     * the open sandlet_sandbox_conf or sandlet_servlet_conf). */
    size_t off;
    size_t off_n;
    unsigned long long min, max; /* K_UINT, K_SIZE, K_BYTES, K_PORTS */
    unsigned long long def;      /* the value without a line (K_UINT..K_ENUM) */
    size_t cap;                  /* K_PORTS: the array's length */
    const char *none;            /* a word that stores 0: "off", "unlimited" */
    const word_value *values;    /* K_BOOL, K_ENUM, K_FLAGS; ends with NULL */
    const char *noun;            /* "unknown NOUN 'x'", "empty NOUN", "too many NOUN" */
    const char *example;         /* sizes: "e.g. 64k" */
    const char *note;            /* appended to the expected range or usage */
    enum ctx block;              /* K_BLOCK: the context it opens */
    int (*handler)(parser *ps, const directive *d, const token *dir, token *args);
    int (*close)(parser *ps, const token *dir);
};

static int do_listen(parser *ps, const directive *d, const token *dir, token *args);
static int do_status(parser *ps, const directive *d, const token *dir, token *args);
static int do_error_log(parser *ps, const directive *d, const token *dir, token *args);
static int do_secret(parser *ps, const directive *d, const token *dir, token *args);
static int do_database(parser *ps, const directive *d, const token *dir, token *args);
static int do_db_password(parser *ps, const directive *d, const token *dir, token *args);
static int open_sandbox(parser *ps, const directive *d, const token *dir, token *args);
static int close_sandbox(parser *ps, const token *dir);
static int open_servlet(parser *ps, const directive *d, const token *dir, token *args);
static int close_servlet(parser *ps, const token *dir);
static int open_pages(parser *ps, const directive *d, const token *dir, token *args);
static int do_compiler(parser *ps, const directive *d, const token *dir, token *args);
static int do_use_sandbox(parser *ps, const directive *d, const token *dir, token *args);
static int do_param(parser *ps, const directive *d, const token *dir, token *args);
static int open_host(parser *ps, const directive *d, const token *dir, token *args);
static int close_host(parser *ps, const token *dir);
static int do_host_name(parser *ps, const directive *d, const token *dir, token *args);
static int do_dynamic_uids(parser *ps, const directive *d, const token *dir, token *args);

/* The offset of field f of struct T, refused at compile time unless the
 * field has the type its row's kind stores (the selection is never
 * evaluated). */
#define AT(T, f, type) (offsetof(T, f) + 0 * sizeof(char[_Generic(((T *)0)->f, type : 1)]))
#define TOP(f, type)   AT(sandlet_conf, f, type)
#define SB(f, type)    AT(sandlet_sandbox_conf, f, type)
#define SV(f, type)    AT(sandlet_servlet_conf, f, type)
#define HO(f, type)    AT(sandlet_host_conf, f, type)

static const word_value on_off[] = {{"on", 1}, {"off", 0}, {NULL, 0}};
static const word_value log_kill[] = {{"log", 1}, {"kill", 0}, {NULL, 0}};
static const word_value session_stores[] = {{"memory", SANDLET_SESSIONS_MEMORY},
                                            {"database", SANDLET_SESSIONS_DATABASE},
                                            {"none", SANDLET_SESSIONS_NONE},
                                            {NULL, 0}};
static const word_value unknown_hosts[] = {
    {"serve", SANDLET_UNKNOWN_HOSTS_SERVE}, {"refuse", SANDLET_UNKNOWN_HOSTS_REFUSE}, {NULL, 0}};
static const word_value syscall_groups[] = {
    {"files", SANDLET_SYSCALLS_FILES}, {"database", SANDLET_SYSCALLS_DATABASE}, {NULL, 0}};

#define MS_MAX     3600000ULL  /* an hour: client and queue timeouts */
#define RUN_MS_MAX 86400000ULL /* a day: how long a request may run */
#define BYTES_MAX  (1ULL << 50)

/* One row per directive and block; sandlet.conf(5) documents each.  Order
 * matters only for messages: "expected" lists follow it. */
static const directive directives[] = {
    /* top level */
    {.name = "listen",
     .ctx = CTX_TOP,
     .kind = K_CUSTOM,
     .usage = "ADDR:PORT",
     .repeat = true,
     .handler = do_listen},
    {.name = "user", .ctx = CTX_TOP, .kind = K_STRING, .usage = "NAME", .off = TOP(user, char *)},
    {.name = "docroot",
     .ctx = CTX_TOP,
     .kind = K_PATH,
     .usage = "DIR",
     .off = TOP(docroot, char *)},
    {.name = "access-log",
     .ctx = CTX_TOP,
     .kind = K_PATH,
     .usage = "FILE",
     .off = TOP(access_log, char *)},
    {.name = "error-log",
     .ctx = CTX_TOP,
     .kind = K_CUSTOM,
     .usage = "FILE|syslog",
     .handler = do_error_log},
    {.name = "status-page",
     .ctx = CTX_TOP,
     .kind = K_CUSTOM,
     .usage = "PATH",
     .handler = do_status},
    {.name = "header-timeout",
     .ctx = CTX_TOP,
     .kind = K_UINT,
     .usage = "MS",
     .off = TOP(header_timeout, unsigned),
     .min = 1,
     .max = MS_MAX,
     .def = SANDLET_DEFAULT_HEADER_TIMEOUT},
    {.name = "body-timeout",
     .ctx = CTX_TOP,
     .kind = K_UINT,
     .usage = "MS",
     .off = TOP(body_timeout, unsigned),
     .min = 1,
     .max = MS_MAX,
     .def = SANDLET_DEFAULT_BODY_TIMEOUT},
    {.name = "keepalive-timeout",
     .ctx = CTX_TOP,
     .kind = K_UINT,
     .usage = "MS",
     .off = TOP(keepalive_timeout, unsigned),
     .min = 1,
     .max = MS_MAX,
     .def = SANDLET_DEFAULT_KEEPALIVE_TIMEOUT},
    {.name = "send-timeout",
     .ctx = CTX_TOP,
     .kind = K_UINT,
     .usage = "MS",
     .off = TOP(send_timeout, unsigned),
     .min = 1,
     .max = MS_MAX,
     .def = SANDLET_DEFAULT_SEND_TIMEOUT},
    {.name = "max-connections",
     .ctx = CTX_TOP,
     .kind = K_UINT,
     .usage = "N",
     .off = TOP(max_connections, unsigned),
     .min = 1,
     .max = 1000000,
     .def = SANDLET_DEFAULT_MAX_CONNECTIONS},
    {.name = "max-header-size",
     .ctx = CTX_TOP,
     .kind = K_SIZE,
     .usage = "BYTES",
     .off = TOP(max_header_size, size_t),
     .min = 1024,
     .max = SANDLET_MAX_HEADER_SIZE_LIMIT,
     .def = SANDLET_DEFAULT_MAX_HEADER_SIZE},
    {.name = "max-target-length",
     .ctx = CTX_TOP,
     .kind = K_SIZE,
     .usage = "BYTES",
     .off = TOP(max_target_length, size_t),
     .min = 64,
     .max = SANDLET_MAX_HEADER_SIZE_LIMIT,
     .def = SANDLET_DEFAULT_MAX_TARGET_LENGTH},
    {.name = "max-body-size",
     .ctx = CTX_TOP,
     .kind = K_SIZE,
     .usage = "BYTES",
     .off = TOP(max_body_size, size_t),
     .min = 0,
     .max = SANDLET_MAX_BODY_SIZE_LIMIT,
     .def = SANDLET_DEFAULT_MAX_BODY_SIZE},
    {.name = "session-secret-file",
     .ctx = CTX_TOP,
     .kind = K_CUSTOM,
     .usage = "FILE",
     .handler = do_secret},
    {.name = "page-cache",
     .ctx = CTX_TOP,
     .kind = K_PATH,
     .usage = "DIR",
     .off = TOP(page_cache, char *)},
    {.name = "spool-dir",
     .ctx = CTX_TOP,
     .kind = K_PATH,
     .usage = "DIR",
     .off = TOP(spool_dir, char *)},
    {.name = "page-compiler",
     .ctx = CTX_TOP,
     .kind = K_CUSTOM,
     .usage = "PROGRAM|off",
     .handler = do_compiler},
    {.name = "page-compile-timeout",
     .ctx = CTX_TOP,
     .kind = K_UINT,
     .usage = "MS",
     .off = TOP(page_compile_timeout, unsigned),
     .min = 100,
     .max = 3600000,
     .def = SANDLET_DEFAULT_COMPILE_TIMEOUT},
    {.name = "development",
     .ctx = CTX_TOP,
     .kind = K_BOOL,
     .usage = "on|off",
     .off = TOP(development, bool),
     .values = on_off},
    {.name = "unknown-hosts",
     .ctx = CTX_TOP,
     .kind = K_ENUM,
     .usage = "serve|refuse",
     .off = TOP(unknown_hosts, unsigned),
     .values = unknown_hosts,
     .def = SANDLET_UNKNOWN_HOSTS_SERVE},
    /* Where the supervisor says its pid, readiness and reload verdicts
     * (state.h); the default is named after the configuration file. */
    {.name = "state-file",
     .ctx = CTX_TOP,
     .kind = K_PATH,
     .usage = "FILE",
     .off = TOP(state_file, char *)},
    /* The uids of an acceptor and sandboxes without a user (identity.h). */
    {.name = "dynamic-uids",
     .ctx = CTX_TOP,
     .kind = K_CUSTOM,
     .usage = "FIRST-LAST",
     .handler = do_dynamic_uids},
    {.name = "sandbox",
     .ctx = CTX_TOP,
     .kind = K_BLOCK,
     .usage = "NAME { ... }",
     .repeat = true,
     .block = CTX_SANDBOX,
     .handler = open_sandbox,
     .close = close_sandbox},
    {.name = "servlet",
     .ctx = CTX_TOP,
     .kind = K_BLOCK,
     .usage = "PATH { ... }",
     .repeat = true,
     .block = CTX_SERVLET,
     .handler = open_servlet,
     .close = close_servlet},
    {.name = "pages",
     .ctx = CTX_TOP,
     .kind = K_BLOCK,
     .usage = "FOLDER { ... }",
     .repeat = true,
     .block = CTX_PAGES,
     .handler = open_pages},
    {.name = "host",
     .ctx = CTX_TOP,
     .kind = K_BLOCK,
     .usage = "NAME { ... }",
     .repeat = true,
     .block = CTX_HOST,
     .handler = open_host,
     .close = close_host},
    /* host NAME { ... }: an origin of its own (sandlet.conf(5), HOSTS) */
    {.name = "name",
     .ctx = CTX_HOST,
     .kind = K_CUSTOM,
     .usage = "NAME",
     .repeat = true,
     .handler = do_host_name},
    {.name = "docroot",
     .ctx = CTX_HOST,
     .kind = K_PATH,
     .usage = "DIR",
     .off = HO(docroot, char *)},
    {.name = "servlet",
     .ctx = CTX_HOST,
     .kind = K_BLOCK,
     .usage = "PATH { ... }",
     .repeat = true,
     .block = CTX_SERVLET,
     .handler = open_servlet,
     .close = close_servlet},
    /* sandbox NAME { ... }: the pool, then DESIGN.md's confinement order
     * (limits, user, Landlock paths, system-call groups), guardian, sessions */
    {.name = "workers",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "N",
     .off = SB(workers, unsigned),
     .min = 1,
     .max = SANDLET_MAX_WORKERS,
     .def = SANDLET_DEFAULT_WORKERS},
    /* The pool may grow past workers up to this under load (pool.c asks
     * the supervisor for one more worker at a time); 0, no line, means
     * "the same as workers" (close_sandbox), today's fixed pool. */
    {.name = "max-workers",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "N",
     .off = SB(max_workers, unsigned),
     .min = 1,
     .max = SANDLET_MAX_WORKERS},
    /* The acceptor's alone (pool.c): a reload applies it to the pool it
     * keeps, so sandlet_conf_sandbox_same need not compare it. */
    {.name = "worker-idle-timeout",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "MS",
     .off = SB(worker_idle_timeout, unsigned),
     .min = 1,
     .max = MS_MAX,
     .def = SANDLET_DEFAULT_WORKER_IDLE_TIMEOUT},
    {.name = "queue",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "N",
     .off = SB(queue, unsigned),
     .min = 0,
     .max = 65535,
     .def = SANDLET_DEFAULT_QUEUE},
    {.name = "queue-timeout",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "MS",
     .off = SB(queue_timeout, unsigned),
     .min = 1,
     .max = MS_MAX,
     .def = SANDLET_DEFAULT_QUEUE_TIMEOUT},
    {.name = "pipeline",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "N",
     .off = SB(pipeline, unsigned),
     .min = 1,
     .max = SANDLET_MAX_PIPELINE,
     .def = SANDLET_DEFAULT_PIPELINE},
    {.name = "user",
     .ctx = CTX_SANDBOX,
     .kind = K_STRING,
     .usage = "NAME",
     .off = SB(user, char *)},
    {.name = "group",
     .ctx = CTX_SANDBOX,
     .kind = K_STRING,
     .usage = "NAME",
     .off = SB(group, char *)},
    {.name = "readable",
     .ctx = CTX_SANDBOX,
     .kind = K_PATHS,
     .usage = "PATH",
     .repeat = true,
     .off = SB(readable, char **),
     .off_n = SB(nreadable, size_t)},
    {.name = "writable",
     .ctx = CTX_SANDBOX,
     .kind = K_PATHS,
     .usage = "DIR",
     .repeat = true,
     .off = SB(writable, char **),
     .off_n = SB(nwritable, size_t)},
    /* Each limit has a default, so a sandbox without a line is bounded;
     * "unlimited" is the explicit way out, and 0 is refused where it
     * would be ambiguous (nothing, or no limit?). */
    {.name = "memory",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "MIB|unlimited",
     .off = SB(memory_mib, unsigned),
     .min = 16,
     .max = 1u << 20,
     .none = "unlimited",
     .def = SANDLET_DEFAULT_MEMORY_MIB},
    {.name = "open-files",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "N|unlimited",
     .off = SB(open_files, unsigned),
     .min = 16,
     .max = 1u << 20,
     .none = "unlimited",
     .def = SANDLET_DEFAULT_OPEN_FILES},
    {.name = "max-file-size",
     .ctx = CTX_SANDBOX,
     .kind = K_BYTES,
     .usage = "BYTES|unlimited",
     .off = SB(max_file_size, unsigned long long),
     .min = 1,
     .max = BYTES_MAX,
     .none = "unlimited",
     .example = "64m",
     .note = ", or unlimited for no limit",
     .def = SANDLET_DEFAULT_MAX_FILE_SIZE},
    {.name = "write-quota",
     .ctx = CTX_SANDBOX,
     .kind = K_BYTES,
     .usage = "BYTES|unlimited",
     .off = SB(write_quota, unsigned long long),
     .min = 1,
     .max = BYTES_MAX,
     .none = "unlimited",
     .example = "64m",
     .note = ", or unlimited for no limit",
     .def = SANDLET_DEFAULT_WRITE_QUOTA},
    {.name = "spool-size",
     .ctx = CTX_SANDBOX,
     .kind = K_BYTES,
     .usage = "BYTES|unlimited",
     .off = SB(spool_size, unsigned long long),
     .min = 1,
     .max = BYTES_MAX,
     .none = "unlimited",
     .example = "256m",
     .note = ", or unlimited for no limit",
     .def = SANDLET_DEFAULT_SPOOL_SIZE},
    {.name = "write-files",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "N|unlimited",
     .off = SB(write_files, unsigned),
     .min = 1,
     .max = 1000000000,
     .none = "unlimited",
     .def = SANDLET_DEFAULT_WRITE_FILES},
    {.name = "database-port",
     .ctx = CTX_SANDBOX,
     .kind = K_PORTS,
     .usage = "PORT",
     .repeat = true,
     .off = SB(database_ports, unsigned short *),
     .off_n = SB(ndatabase_ports, size_t),
     .min = 1,
     .max = 65535,
     .cap = SANDLET_MAX_DATABASE_PORTS,
     .noun = "database ports"},
    {.name = "database",
     .ctx = CTX_SANDBOX,
     .kind = K_CUSTOM,
     .usage = "CONNINFO",
     .handler = do_database},
    {.name = "database-password-file",
     .ctx = CTX_SANDBOX,
     .kind = K_CUSTOM,
     .usage = "FILE",
     .handler = do_db_password},
    {.name = "cpu-seconds",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "N",
     .off = SB(cpu_seconds, unsigned),
     .min = 1,
     .max = 1u << 30},
    {.name = "core-dumps",
     .ctx = CTX_SANDBOX,
     .kind = K_BOOL,
     .usage = "on|off",
     .off = SB(core_dumps, bool),
     .values = on_off},
    {.name = "shared-user",
     .ctx = CTX_SANDBOX,
     .kind = K_BOOL,
     .usage = "on|off",
     .off = SB(shared_user, bool),
     .values = on_off},
    {.name = "syscalls",
     .ctx = CTX_SANDBOX,
     .kind = K_FLAGS,
     .usage = "files|database",
     .repeat = true,
     .off = SB(syscalls, unsigned),
     .values = syscall_groups,
     .noun = "system-call group"},
    {.name = "syscall-violations",
     .ctx = CTX_SANDBOX,
     .kind = K_BOOL,
     .usage = "kill|log",
     .off = SB(learn, bool),
     .values = log_kill},
    {.name = "timeout",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "MS",
     .off = SB(timeout, unsigned),
     .min = 0,
     .max = RUN_MS_MAX,
     .none = "off",
     .def = SANDLET_DEFAULT_TIMEOUT},
    {.name = "max-requests",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "N",
     .off = SB(max_requests, unsigned),
     .min = 1,
     .max = 4000000000u},
    {.name = "sessions",
     .ctx = CTX_SANDBOX,
     .kind = K_ENUM,
     .usage = "memory|database|none",
     .off = SB(sessions, unsigned),
     .values = session_stores,
     .noun = "session store",
     .def = SANDLET_SESSIONS_MEMORY},
    {.name = "session-size",
     .ctx = CTX_SANDBOX,
     .kind = K_SIZE,
     .usage = "BYTES",
     .off = SB(session_size, size_t),
     .min = SANDLET_MIN_SESSION_SIZE,
     .max = SANDLET_MAX_SESSION_SIZE,
     .example = "4m",
     .note = "; each session takes about 4k",
     .def = SANDLET_DEFAULT_SESSION_SIZE},
    {.name = "session-timeout",
     .ctx = CTX_SANDBOX,
     .kind = K_UINT,
     .usage = "SECONDS",
     .off = SB(session_timeout, unsigned),
     .min = 1,
     .max = 31 * 86400,
     .def = SANDLET_DEFAULT_SESSION_TIMEOUT},
    {.name = "session-cookie-secure",
     .ctx = CTX_SANDBOX,
     .kind = K_BOOL,
     .usage = "on|off",
     .off = SB(session_cookie_secure, bool),
     .values = on_off},
    /* servlet PATH { ... } */
    {.name = "library",
     .ctx = CTX_SERVLET,
     .kind = K_PATH,
     .usage = "FILE",
     .off = SV(library, char *),
     .noun = "library path",
     .note = " naming a shared object"},
    {.name = "timeout",
     .ctx = CTX_SERVLET,
     .kind = K_UINT,
     .usage = "MS",
     .off = SV(timeout, unsigned),
     .min = 1,
     .max = RUN_MS_MAX},
    /* SIZE_MAX until the file is read: then the global max-body-size. */
    {.name = "max-body-size",
     .ctx = CTX_SERVLET,
     .kind = K_SIZE,
     .usage = "BYTES",
     .off = SV(max_body_size, size_t),
     .min = 0,
     .max = SANDLET_MAX_BODY_SIZE_LIMIT,
     .def = SIZE_MAX},
    {.name = "sandbox",
     .ctx = CTX_SERVLET,
     .kind = K_CUSTOM,
     .usage = "NAME",
     .handler = do_use_sandbox},
    /* pages FOLDER { ... } */
    {.name = "sandbox",
     .ctx = CTX_PAGES,
     .kind = K_CUSTOM,
     .usage = "NAME",
     .handler = do_use_sandbox},
    {.name = "param",
     .ctx = CTX_SERVLET,
     .kind = K_CUSTOM,
     .usage = "NAME VALUE",
     .nargs = 2,
     .repeat = true,
     .handler = do_param},
};
#define NDIRECTIVES (sizeof(directives) / sizeof(directives[0]))
_Static_assert(NDIRECTIVES <= MAX_DIRECTIVES, "raise MAX_DIRECTIVES");

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
    /* With includes, the line of the text is a line of one of its files. */
    const char *name =
        ps->conf && ps->conf->nspans ? sandlet_conf_where(ps->conf, line, &line) : ps->name;
    int n = snprintf(ps->err, ps->errlen, "%s:%d:%d: ", name, line, col);
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
    case CTX_PAGES: return "in pages block";
    case CTX_HOST: return "in host block";
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

/* The line that set directive name of ctx in the open block, or 0. */
static int seen_line(const parser *ps, enum ctx ctx, const char *name)
{
    const directive *d = find_directive(name, ctx);
    return d ? ps->seen[d - directives] : 0;
}

/* Stores every default of ctx's rows into base, a new struct of ctx: a
 * field's default lives in its row, beside its bounds. */
static void set_defaults(enum ctx ctx, char *base)
{
    for (size_t k = 0; k < NDIRECTIVES; k++) {
        const directive *d = &directives[k];
        if (d->ctx != ctx)
            continue;
        void *f = base + d->off;
        switch (d->kind) {
        case K_UINT:
        case K_ENUM: *(unsigned *)f = (unsigned)d->def; break;
        case K_SIZE: *(size_t *)f = (size_t)d->def; break;
        case K_BYTES: *(unsigned long long *)f = d->def; break;
        case K_BOOL: *(bool *)f = d->def != 0; break;
        default: break;
        }
    }
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
            ps->comment_line = ps->line;
            ps->comment_col = ps->col;
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
    /* "*:80" and ":80" mean every address elsewhere: say how here. */
    bool any = af == AF_INET && (hlen == 0 || !strcmp(host, "*"));
    if (hlen == 0 || (size_t)(hend - h) >= sizeof(host) || inet_pton(af, host, addr) != 1)
        return fail(ps, line, col, "invalid %s address '%s' in listen (expected a numeric %s%s)",
                    af == AF_INET ? "IPv4" : "IPv6", shown(sh, sizeof(sh), host),
                    af == AF_INET ? "IPv4 address like 127.0.0.1 or [IPV6]"
                                  : "IPv6 address like [::1]",
                    any ? "; every address is 0.0.0.0 (IPv4) or [::] (IPv6)" : "");

    unsigned p;
    if (parse_uint(port, 0, 65535, &p) != 0)
        return fail(ps, line, col, "invalid port '%s' in listen '%s' (expected 0..65535)",
                    shown(sh, sizeof(sh), port), shown(sh2, sizeof(sh2), s));

    sandlet_conf *c = ps->conf;
    /* Two listeners on one port fail at start (the second bind): the same
     * address twice, or the wildcard of the family beside one of its
     * addresses.  Port 0 asks for a free port each time. */
    static const unsigned char zero[sizeof(struct in6_addr)];
    size_t alen = af == AF_INET ? 4 : 16;
    for (size_t i = 0; p != 0 && i < c->nlistens; i++) {
        const sandlet_listen_conf *o = &c->listens[i];
        unsigned char oaddr[sizeof(struct in6_addr)];
        if (o->port != p || inet_pton(af, o->host, oaddr) != 1)
            continue; /* another port, or the other family */
        bool same = memcmp(oaddr, addr, alen) == 0;
        bool wild = memcmp(oaddr, zero, alen) == 0 || memcmp(addr, zero, alen) == 0;
        if (same || wild)
            return fail(ps, line, col,
                        "listen %s overlaps the listen on line %d (%s:%u): %s; keep one",
                        shown(sh, sizeof(sh), s), o->line, o->host, o->port,
                        same ? "the same address and port twice"
                             : "a wildcard address takes the port on every address");
    }
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

static int do_listen(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)d;
    (void)dir;
    return add_listen(ps, args[0].text, args[0].line, args[0].col);
}

/* Refuses an empty argument where a name or a path is expected. */
static int not_empty(parser *ps, const directive *d, const token *arg)
{
    if (arg->text[0])
        return 0;
    if (d->noun)
        return fail(ps, arg->line, arg->col, "empty %s (expected '%s %s;'%s)", d->noun, d->name,
                    d->usage, d->note ? d->note : "");
    return fail(ps, arg->line, arg->col, "empty argument for '%s' (expected '%s %s;')", d->name,
                d->name, d->usage);
}

/* Takes a non-empty argument for a single-valued string field. */
static int take_string(parser *ps, const directive *d, token *arg, char **field)
{
    int rc = not_empty(ps, d, arg);
    if (rc)
        return rc;
    *field = arg->text;
    arg->text = NULL;
    return 0;
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
static int take_path(parser *ps, const directive *d, token *arg, char **field)
{
    int rc = not_empty(ps, d, arg);
    if (rc)
        return rc;
    *field = absolute(ps, arg);
    return *field ? 0 : nomem(ps);
}

/* A string with a rule of its own: the path the acceptor answers itself. */
static int do_status(parser *ps, const directive *d, const token *dir, token *args)
{
    char sh[SHOWN_MAX];
    (void)dir;
    if (args[0].text[0] != '/')
        return fail(ps, args[0].line, args[0].col,
                    "status-page '%s' must be a path starting with '/' (e.g. 'status-page "
                    "/%s;')",
                    shown(sh, sizeof(sh), args[0].text), sh);
    return take_string(ps, d, &args[0], &ps->conf->status_page);
}

/* A file, or the word syslog (log.h): kept as that word, not made a path
 * beside the configuration.  A file named syslog is written quoted with
 * a folder ("./syslog"). */
static int do_error_log(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)dir;
    if (args[0].type == T_WORD && sandlet_log_is_syslog(args[0].text))
        return take_string(ps, d, &args[0], &ps->conf->error_log);
    return take_path(ps, d, &args[0], &ps->conf->error_log);
}

/* What makes a secret file unfit, as ssh judges a private key: another
 * owner than root or the user that starts sandletd, or a mode that lets
 * group or others read or replace it.  NULL when fit. */
static const char *secret_owner_problem(const struct stat *st)
{
    if (st->st_uid != 0 && st->st_uid != geteuid())
        return "is owned by another user (expected root or the user that starts sandletd; "
               "chown it)";
    if (st->st_mode & 077)
        return "may be read or written by group or others (expected mode 600 or 400; chmod "
               "600 it)";
    return NULL;
}

/* session-secret-file: the secret that sandboxes' session keys derive
 * from, so that they are the same on every start and every host.  Read
 * here, while sandletd is still the user that started it (root, before
 * any privilege drop), and checked as ssh checks a private key: a file
 * others may read or replace would let them mint any sandbox's session
 * ids.  Only a hash of the contents is kept. */
static int do_secret(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)dir;
    char sh[SHOWN_MAX];
    sandlet_conf *c = ps->conf;
    int rc = take_path(ps, d, &args[0], &c->session_secret_file);
    if (rc)
        return rc;
    if (ps->no_secrets) {
        c->session_secret_set = true; /* the supervisor read and checked it */
        return 0;
    }
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
    else if (!(bad = secret_owner_problem(&st)) &&
             (st.st_size < SANDLET_SESSION_SECRET_MIN || st.st_size > SANDLET_SESSION_SECRET_MAX))
        bad = "has the wrong size (expected 32 to 4096 random bytes, e.g. 'head -c 32 "
              "/dev/urandom > FILE')";
    if (bad) {
        close(fd);
        return fail(ps, line, col, "session-secret-file '%s' %s", f, bad);
    }
    uint8_t buf[SANDLET_SESSION_SECRET_MAX];
    size_t len = 0;
    errno = 0; /* a file emptied since fstat ends the loop without setting it */
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
                    len || !err ? "it shrank while being read" : strerror(err));
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

/* A database string, checked with libpq's own parser, so that what
 * sandletd -t accepts is what the workers' libpq will read.  A password
 * in it is refused: the configuration is often readable by many, and a
 * secret there would also be printed wherever the string is.  line and
 * col are the string's, for the messages. */
static int conninfo_check(parser *ps, const char *conninfo, int line, int col)
{
    /* Loaded here, not linked: a configuration without a database never
     * maps libpq (db/pq.h). */
    char lerr[256];
    if (sandlet_lib_pq_load(lerr, sizeof(lerr)) < 0)
        return fail(ps, line, col, "database: %s", lerr);
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
    if (!opts) {
        /* libpq's message may quote the string; only its first line, made
         * printable, is shown. */
        char msg[160], sh[SHOWN_MAX];
        snprintf(msg, sizeof(msg), "%s", perr ? perr : "out of memory");
        msg[strcspn(msg, "\n")] = '\0';
        PQfreemem(perr);
        return fail(ps, line, col,
                    "database: not a libpq connection string (%s); expected e.g. "
                    "\"host=/run/postgresql dbname=shop user=shop\"",
                    shown(sh, sizeof(sh), msg));
    }
    bool has_password = false;
    for (const PQconninfoOption *o = opts; o->keyword; o++)
        if (!strcmp(o->keyword, "password") && o->val)
            has_password = true;
    PQconninfoFree(opts);
    if (has_password)
        return fail(ps, line, col,
                    "database: the connection string holds a password; remove 'password=' and "
                    "put the password in a file named by 'database-password-file FILE;' "
                    "(mode 600)");
    return 0;
}

/* database "CONNINFO": checked now (conninfo_check), or, in the
 * acceptor's parses, kept with its place for sandlet_conf_check_databases
 * in a process that may load libpq. */
static int do_database(parser *ps, const directive *d, const token *dir, token *args)
{
    sandlet_sandbox_conf *sb = &ps->conf->sandboxes[ps->cur];
    int rc = not_empty(ps, d, &args[0]);
    if (rc == 0 && !ps->no_pq)
        rc = conninfo_check(ps, args[0].text, args[0].line, args[0].col);
    if (rc)
        return rc;
    sb->database_line = args[0].line;
    sb->database_col = args[0].col;
    sb->database_dir_line = dir->line;
    sb->database = dupn(args[0].text, strlen(args[0].text));
    return sb->database ? 0 : nomem(ps);
}

/* database-password-file FILE: read now, while sandletd is the user that
 * started it, with session-secret-file's ownership and mode rules.  The
 * file holds the password alone; one trailing newline is not part of it. */
static int do_db_password(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)dir;
    char sh[SHOWN_MAX];
    sandlet_sandbox_conf *sb = &ps->conf->sandboxes[ps->cur];
    int rc = take_path(ps, d, &args[0], &sb->database_password_file);
    if (rc)
        return rc;
    if (ps->no_secrets)
        return 0; /* the supervisor's alone */
    const char *f = shown(sh, sizeof(sh), sb->database_password_file);
    int line = args[0].line, col = args[0].col;
    int fd = open(sb->database_password_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0)
        return fail(ps, line, col,
                    "database-password-file '%s' cannot be opened: %s (expected a file holding "
                    "the password, owned by root, mode 600)",
                    f, strerror(errno));
    struct stat st;
    const char *bad = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        bad = "is not a regular file (expected a file holding the password)";
    else if (!(bad = secret_owner_problem(&st)) && st.st_size > SANDLET_DATABASE_PASSWORD_MAX + 2)
        bad = "is too long (expected the password alone, at most 1024 bytes)";
    if (bad) {
        close(fd);
        return fail(ps, line, col, "database-password-file '%s' %s", f, bad);
    }
    char buf[SANDLET_DATABASE_PASSWORD_MAX + 3];
    size_t len = 0;
    errno = 0; /* an empty file ends the loop without setting it */
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || (len += (size_t)n) == sizeof(buf) - 1)
            break;
    }
    int err = errno;
    close(fd);
    if (len && buf[len - 1] == '\n')
        len--;
    if (len && buf[len - 1] == '\r')
        len--;
    buf[len] = '\0';
    bad = NULL;
    if (len == 0)
        bad = err ? strerror(err) : "is empty (expected the password)";
    else if (len > SANDLET_DATABASE_PASSWORD_MAX)
        bad = "is too long (expected the password alone, at most 1024 bytes)";
    else if (memchr(buf, '\0', len) || strpbrk(buf, "\r\n"))
        bad = "holds more than one line or a NUL byte (expected the password alone)";
    if (!bad && !(sb->database_password = dupn(buf, len))) {
        sodium_memzero(buf, sizeof(buf));
        return nomem(ps);
    }
    sodium_memzero(buf, sizeof(buf));
    return bad ? fail(ps, line, col, "database-password-file '%s' %s", f, bad) : 0;
}

/* The TCP ports a conninfo connects to, added to the sandbox's Landlock
 * connect rules: every "port" entry (5432 when none) unless every host is
 * a unix socket folder (or none is named: libpq's default is its socket).
 * libpq has already accepted the string. */
static int database_ports(parser *ps, sandlet_sandbox_conf *sb, int line, int col)
{
    char sh[SHOWN_MAX];
    PQconninfoOption *opts = PQconninfoParse(sb->database, NULL);
    if (!opts)
        return nomem(ps);
    const char *host = NULL, *hostaddr = NULL, *port = NULL;
    for (const PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val)
            continue;
        if (!strcmp(o->keyword, "host"))
            host = o->val;
        else if (!strcmp(o->keyword, "hostaddr"))
            hostaddr = o->val;
        else if (!strcmp(o->keyword, "port"))
            port = o->val;
    }
    bool tcp = hostaddr && *hostaddr;
    for (const char *h = host; h && *h && !tcp;) {
        size_t n = strcspn(h, ",");
        if (n && h[0] != '/' && h[0] != '@')
            tcp = true;
        h += n + (h[n] == ',');
    }
    int rc = 0;
    for (const char *p = port ? port : ""; tcp && rc == 0;) {
        size_t n = strcspn(p, ",");
        unsigned long v = SANDLET_DEFAULT_DATABASE_PORT;
        if (n) {
            char *end;
            errno = 0;
            v = strtoul(p, &end, 10);
            if (errno || end != p + n || v < 1 || v > 65535 || p[0] == '-' || p[0] == '+') {
                char bad[17], sh2[SHOWN_MAX];
                size_t k = n < sizeof(bad) - 1 ? n : sizeof(bad) - 1;
                memcpy(bad, p, k);
                bad[k] = '\0';
                rc = fail(ps, line, col, "sandbox '%s': database port '%s' is not a number 1-65535",
                          shown(sh, sizeof(sh), sb->name), shown(sh2, sizeof(sh2), bad));
            }
        }
        bool have = false;
        for (size_t i = 0; rc == 0 && i < sb->ndatabase_ports; i++)
            have |= sb->database_ports[i] == v;
        if (rc == 0 && !have) {
            if (sb->ndatabase_ports >= SANDLET_MAX_DATABASE_PORTS)
                rc = fail(ps, line, col, "sandbox '%s': too many database ports (at most %d)",
                          shown(sh, sizeof(sh), sb->name), SANDLET_MAX_DATABASE_PORTS);
            else
                sb->database_ports[sb->ndatabase_ports++] = (unsigned short)v;
        }
        if (!p[n])
            break;
        p += n + 1;
    }
    PQconninfoFree(opts);
    return rc;
}

/* The role and the database a sandbox's conninfo names: its user and its
 * dbname (else the role's name, as libpq does), each NULL when the string
 * leaves it to libpq's defaults: the name of the user the workers run as,
 * which the file cannot tell (the sandbox's "user" as root, the daemon's
 * own otherwise), or a service file.  Hosts and ports are left out: the
 * file cannot tell whether two names reach one server.  0, or -ENOMEM
 * (*role and *db malloc'd or NULL). */
static int database_identity(const sandlet_sandbox_conf *sb, char **role, char **db)
{
    *role = *db = NULL;
    PQconninfoOption *opts = PQconninfoParse(sb->database, NULL);
    if (!opts)
        return -ENOMEM;
    const char *user = NULL, *dbname = NULL;
    for (const PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !o->val[0])
            continue;
        if (!strcmp(o->keyword, "user"))
            user = o->val;
        else if (!strcmp(o->keyword, "dbname"))
            dbname = o->val;
    }
    const char *d = dbname ? dbname : user;
    bool bad = (user && !(*role = dupn(user, strlen(user)))) || (d && !(*db = dupn(d, strlen(d))));
    PQconninfoFree(opts);
    if (!bad)
        return 0;
    free(*role);
    free(*db);
    *role = *db = NULL;
    return -ENOMEM;
}

bool sandlet_conf_database_unix(const char *conninfo)
{
    /* A worker asks before it opens its database, which loads libpq
     * anyway; one that cannot load it will not reach its database. */
    char lerr[256];
    if (sandlet_lib_pq_load(lerr, sizeof(lerr)) < 0)
        return true;
    PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
    if (!opts)
        return true; /* unparsable here: libpq's own connect decides */
    const char *host = NULL, *hostaddr = NULL, *service = NULL;
    for (const PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val)
            continue;
        if (!strcmp(o->keyword, "host"))
            host = o->val;
        else if (!strcmp(o->keyword, "hostaddr"))
            hostaddr = o->val;
        else if (!strcmp(o->keyword, "service"))
            service = o->val;
    }
    /* A service file may name any host: left open.  hostaddr makes every
     * entry TCP; else an empty entry is libpq's default socket directory,
     * and one starting with '/' or '@' a (possibly abstract) socket. */
    bool unix_socket = service && *service;
    if (!(hostaddr && *hostaddr)) {
        const char *h = host ? host : "";
        for (;;) {
            size_t n = strcspn(h, ",");
            if (n == 0 || h[0] == '/' || h[0] == '@')
                unix_socket = true;
            if (!h[n])
                break;
            h += n + 1;
        }
    }
    PQconninfoFree(opts);
    return unix_socket;
}

/* Two names that may be one: either unknown (NULL), or equal. */
static bool may_be_same(const char *a, const char *b)
{
    return !a || !b || !strcmp(a, b);
}

/* A sandbox with database sessions must be the only one whose database
 * string logs in as its role on its database: any other sandbox there as
 * that role could read, rewrite or delete its sessions with sl_db, which
 * the table's ownership (session_db.c) cannot stop.  A role or database
 * left to libpq's defaults may be any: such a pair is refused too, and a
 * "user=" in each string settles it.  Checked as each sandbox closes,
 * against the ones before it, with the parse the database's ports use
 * (libpq is loaded already). */
static int database_role_clash(parser *ps, const sandlet_sandbox_conf *sb)
{
    char *role = NULL, *db = NULL;
    int rc = database_identity(sb, &role, &db);
    for (size_t j = 0; rc == 0 && j < ps->cur; j++) {
        const sandlet_sandbox_conf *o = &ps->conf->sandboxes[j];
        if (!o->database ||
            (sb->sessions != SANDLET_SESSIONS_DATABASE && o->sessions != SANDLET_SESSIONS_DATABASE))
            continue;
        char *orole = NULL, *odb = NULL;
        if ((rc = database_identity(o, &orole, &odb)) < 0)
            break;
        bool same = may_be_same(role, orole) && may_be_same(db, odb);
        char sh[SHOWN_MAX], sh2[SHOWN_MAX], sh3[SHOWN_MAX], dbs[SHOWN_MAX + 16],
            roles[SHOWN_MAX + 96];
        const char *r = role ? role : orole, *d = db ? db : odb;
        if (d)
            snprintf(dbs, sizeof(dbs), "database '%s'", shown(sh3, sizeof(sh3), d));
        else
            snprintf(dbs, sizeof(dbs), "one database");
        if (role && orole)
            snprintf(roles, sizeof(roles), "one role '%s'", shown(sh3, sizeof(sh3), r));
        else
            snprintf(roles, sizeof(roles),
                     "what may be one role (without user= libpq logs in "
                     "as the user the workers run as)");
        free(orole);
        free(odb);
        if (!same)
            continue;
        const char *keeper = sb->sessions == SANDLET_SESSIONS_DATABASE ? sh2 : sh;
        rc = fail(ps, sb->database_dir_line, 1,
                  "sandboxes '%s' (line %d) and '%s' log in to %s as %s, and '%s' keeps its "
                  "sessions there: either could read, change or delete them with sl_db; give "
                  "each sandbox a role of its own (user=... in its database string) and each "
                  "role a schema of its own (sandlet.conf(5), SESSIONS IN POSTGRESQL)",
                  shown(sh, sizeof(sh), o->name), o->line, shown(sh2, sizeof(sh2), sb->name), dbs,
                  roles, keeper);
    }
    free(role);
    free(db);
    return rc == -ENOMEM ? nomem(ps) : rc;
}

int sandlet_conf_check_databases(sandlet_conf *conf, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!conf || !conf->databases_unchecked)
        return 0;
    parser ps = {.line = 1,
                 .col = 1,
                 .name = conf->file ? conf->file : "(config)",
                 .conf = conf,
                 .err = errlen ? err : NULL,
                 .errlen = err ? errlen : 0};
    int rc = 0;
    /* In the order a full parse meets them: each sandbox's string, its
     * ports and its role against the sandboxes before it. */
    for (size_t i = 0; rc == 0 && i < conf->nsandboxes; i++) {
        sandlet_sandbox_conf *sb = &conf->sandboxes[i];
        if (!sb->database)
            continue;
        ps.cur = i;
        rc = conninfo_check(&ps, sb->database, sb->database_line, sb->database_col);
        if (rc == 0)
            rc = database_ports(&ps, sb, sb->line, sb->col);
        if (rc == 0)
            rc = database_role_clash(&ps, sb);
    }
    if (rc == 0)
        conf->databases_unchecked = false;
    return rc;
}

/* Two sandboxes that name one user are one sandbox to the kernel: each
 * can signal and, once dumpable (core-dumps on), ptrace the other's
 * workers and read their /proc/PID/mem; each can open the other's cores
 * (core files and systemd-coredump keep them for the uid); what one writes
 * the other may read wherever Landlock is absent or lets both in; and a
 * database that authenticates by peer uid sees one role.  seccomp and
 * Landlock stop most of it inside sandlet, but the uid is the boundary
 * under them, the one that holds on every kernel.  An operator who puts
 * servlets in two sandboxes expects them apart, so this is refused unless
 * both blocks say "shared-user on" (sandlet-security(7)). */
static int user_clash(parser *ps, const sandlet_sandbox_conf *sb)
{
    if (!sb->user)
        return 0;
    for (size_t j = 0; j < ps->cur; j++) {
        const sandlet_sandbox_conf *o = &ps->conf->sandboxes[j];
        if (!o->user || strcmp(o->user, sb->user) != 0 || (sb->shared_user && o->shared_user))
            continue;
        char sh[SHOWN_MAX], sh2[SHOWN_MAX], sh3[SHOWN_MAX];
        return fail(ps, seen_line(ps, CTX_SANDBOX, "user"), 1,
                    "sandboxes '%s' (line %d) and '%s' both run as user '%s': the kernel then "
                    "keeps them apart in nothing (signals, ptrace and cores of a dumpable "
                    "worker, files outside Landlock, peer authentication); give each sandbox a "
                    "user of its own (or no 'user' line: started as root, sandletd gives each "
                    "a uid of its own), or say 'shared-user on;' in both blocks to accept that",
                    shown(sh, sizeof(sh), o->name), o->line, shown(sh2, sizeof(sh2), sb->name),
                    shown(sh3, sizeof(sh3), sb->user));
    }
    return 0;
}

static int add_sandbox(parser *ps, char *name, int line)
{
    sandlet_conf *c = ps->conf;
    sandlet_sandbox_conf *s = reserve(c->sandboxes, c->nsandboxes, sizeof(*s));
    if (!s)
        return nomem(ps);
    c->sandboxes = s;
    ps->cur = c->nsandboxes;
    s[c->nsandboxes] = (sandlet_sandbox_conf){.name = name, .line = line};
    set_defaults(CTX_SANDBOX, (char *)&s[c->nsandboxes++]);
    return 0;
}

static int open_sandbox(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)d;
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

/* A decimal number within the row's bounds, or its `none` word for 0. */
static int number(parser *ps, const directive *d, const token *arg, unsigned *out)
{
    char sh[SHOWN_MAX];
    if (d->none && strcmp(arg->text, d->none) == 0) {
        *out = 0;
        return 0;
    }
    const char * or = d->none ? ", or " : "", *none = d->none ? d->none : "";
    /* The unit is the usage's: a number never takes a suffix, and "5s" or
     * "256m" is the mistake this names. */
    const char *unit = !strncmp(d->usage, "MS", 2)        ? " milliseconds"
                       : !strncmp(d->usage, "SECONDS", 7) ? " seconds"
                       : !strncmp(d->usage, "MIB", 3)     ? " MiB"
                                                          : "";
    unsigned long long eg = d->def > d->min ? d->def : d->min ? d->min : 1;
    int rc = parse_uint(arg->text, (unsigned long)d->min, (unsigned long)d->max, out);
    if (rc == -1)
        return fail(ps, arg->line, arg->col,
                    "invalid number '%s' for '%s' (expected%s as a decimal number %llu..%llu "
                    "without a unit%s%s, e.g. '%s %llu;')",
                    shown(sh, sizeof(sh), arg->text), d->name, unit, d->min, d->max, or, none,
                    d->name, eg);
    if (rc == -2)
        return fail(ps, arg->line, arg->col, "'%s %s' out of range (expected %llu..%llu%s%s)",
                    d->name, shown(sh, sizeof(sh), arg->text), d->min, d->max, or, none);
    return 0;
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

/* Checks that need the whole sandbox block. */
static int close_sandbox(parser *ps, const token *dir)
{
    sandlet_sandbox_conf *sb = &ps->conf->sandboxes[ps->cur];
    if (!sb->max_workers)
        sb->max_workers = sb->workers;
    if (sb->max_workers < sb->workers) {
        char sh[SHOWN_MAX];
        return fail(ps, seen_line(ps, CTX_SANDBOX, "max-workers"), 1,
                    "sandbox '%s': max-workers %u is below workers %u (the pool grows from "
                    "workers up to max-workers; raise max-workers to at least %u, or remove it)",
                    shown(sh, sizeof(sh), sb->name), sb->max_workers, sb->workers, sb->workers);
    }
    /* A sandbox that can write no file gets no default file-size limit:
     * the only regular file it writes is the error log it inherited as
     * standard error, and a limit would silence it once the log grew
     * past it. */
    if (!sb->nwritable && !(sb->syscalls & SANDLET_SYSCALLS_FILES) &&
        !seen_line(ps, CTX_SANDBOX, "max-file-size"))
        sb->max_file_size = 0;
    int urc = user_clash(ps, sb);
    if (urc)
        return urc;
    if (sb->database_password_file && !sb->database) {
        char sh[SHOWN_MAX];
        return fail(ps, dir->line, dir->col,
                    "sandbox '%s' has a database-password-file but no 'database \"CONNINFO\";' "
                    "(add the database, or remove the password file)",
                    shown(sh, sizeof(sh), sb->name));
    }
    /* A database brings what reaching it takes, and nothing more: the
     * database group and its own ports (none for a unix socket). */
    sb->col = dir->col;
    if (sb->database) {
        int rc = 0;
        if (ps->no_pq)
            ps->conf->databases_unchecked = true;
        else
            rc = database_ports(ps, sb, dir->line, dir->col);
        if (rc == 0 && !ps->no_pq)
            rc = database_role_clash(ps, sb);
        if (rc)
            return rc;
        sb->syscalls |= SANDLET_SYSCALLS_DATABASE;
    }
    if (sb->sessions == SANDLET_SESSIONS_DATABASE && !sb->database) {
        char sh[SHOWN_MAX];
        return fail(ps, dir->line, dir->col,
                    "sandbox '%s' has 'sessions database' but no 'database \"CONNINFO\";' (add "
                    "the database its sessions go to, or set 'sessions memory')",
                    shown(sh, sizeof(sh), sb->name));
    }
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
        return fail(ps, arg->line, arg->col,
                    "servlet path '%s' must start with '/' (expected a URL path, e.g. "
                    "'servlet /%s { ... }')",
                    shown(sh, sizeof(sh), s), sh);
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

static int open_servlet(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)d;
    char sh[SHOWN_MAX];
    sandlet_conf *c = ps->conf;
    token *path = &args[0];
    bool prefix = false;
    int rc = check_path(ps, path, &prefix);
    if (rc)
        return rc;
    if (prefix)
        path->text[strlen(path->text) - 1] = '\0';
    /* Each host has a path space of its own. */
    for (size_t i = 0; i < c->nservlets; i++)
        if (c->servlets[i].host == ps->host && c->servlets[i].prefix == prefix &&
            strcmp(c->servlets[i].path, path->text) == 0)
            return fail(ps, path->line, path->col,
                        "duplicate servlet path '%s%s' (already defined at line %d; expected "
                        "each path once%s)",
                        shown(sh, sizeof(sh), path->text), prefix ? "*" : "", c->servlets[i].line,
                        ps->host == SANDLET_HOST_DEFAULT ? "" : " per host");

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
    s[c->nservlets] = (sandlet_servlet_conf){.path = path->text,
                                             .prefix = prefix,
                                             .host = ps->host,
                                             .sandbox = SIZE_MAX,
                                             .line = dir->line};
    set_defaults(CTX_SERVLET, (char *)&s[c->nservlets++]);
    path->text = NULL;
    return 0;
}

static int close_servlet(parser *ps, const token *dir)
{
    char sh[SHOWN_MAX];
    const sandlet_servlet_conf *s = &ps->conf->servlets[ps->cur];
    if (!s->library)
        return fail(ps, dir->line, dir->col,
                    "servlet '%s%s' has no library (expected 'library FILE;' in its block)",
                    shown(sh, sizeof(sh), s->path), s->prefix ? "*" : "");
    return 0;
}

/* A host name as a Host header carries it, without the port: letters,
 * digits, '-', '.', an optional leading "*." (a wildcard: any name ending
 * in what follows), no trailing dot.  Lowercased in place, since Host is
 * matched ignoring case.  IP literals in brackets are left out: an
 * origin of its own wants a name. */
static int host_name_check(parser *ps, token *arg)
{
    char sh[SHOWN_MAX];
    char *s = arg->text;
    size_t len = strlen(s), start = strncmp(s, "*.", 2) == 0 ? 2 : 0;
    bool ok = len > start && len <= SANDLET_HOST_NAME_MAX && s[len - 1] != '.' && s[start] != '.';
    for (size_t i = start; ok && i < len; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            s[i] = (char)(c + 32);
        else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                   (c == '.' && s[i + 1] != '.')))
            ok = false;
    }
    if (!ok)
        return fail(ps, arg->line, arg->col,
                    "invalid host name '%s' (expected a DNS name such as shop.example.org, or "
                    "*.example.org for every name under example.org; no port, no other '*', "
                    "no trailing '.')",
                    shown(sh, sizeof(sh), arg->text));
    return 0;
}

/* Adds a checked name to the open host block; a name of any host block
 * is refused a second time, naming where it was first. */
static int add_host_name(parser *ps, token *arg)
{
    char sh[SHOWN_MAX];
    sandlet_conf *c = ps->conf;
    int rc = host_name_check(ps, arg);
    if (rc)
        return rc;
    size_t total = 0;
    for (size_t i = 0; i < c->nhosts; i++) {
        total += c->hosts[i].nnames;
        for (size_t j = 0; j < c->hosts[i].nnames; j++)
            if (strcmp(c->hosts[i].names[j], arg->text) == 0)
                return fail(ps, arg->line, arg->col,
                            "duplicate host name '%s' (already named at line %d; expected each "
                            "name in one host block)",
                            shown(sh, sizeof(sh), arg->text), c->hosts[i].name_lines[j]);
    }
    if (total >= SANDLET_MAX_HOST_NAMES)
        return fail(ps, arg->line, arg->col, "too many host names (at most %d in a file)",
                    SANDLET_MAX_HOST_NAMES);
    sandlet_host_conf *h = &c->hosts[ps->host];
    char **names = reserve(h->names, h->nnames, sizeof(*names));
    if (!names)
        return nomem(ps);
    h->names = names;
    int *lines = reserve(h->name_lines, h->nnames, sizeof(*lines));
    if (!lines)
        return nomem(ps);
    h->name_lines = lines;
    names[h->nnames] = arg->text;
    lines[h->nnames++] = arg->line;
    arg->text = NULL;
    return 0;
}

static int open_host(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)d;
    sandlet_conf *c = ps->conf;
    if (c->nhosts >= SANDLET_MAX_HOSTS)
        return fail(ps, dir->line, dir->col, "too many host blocks (at most %d in a file)",
                    SANDLET_MAX_HOSTS);
    sandlet_host_conf *h = reserve(c->hosts, c->nhosts, sizeof(*h));
    if (!h)
        return nomem(ps);
    c->hosts = h;
    h[c->nhosts] = (sandlet_host_conf){.line = dir->line};
    ps->host = c->nhosts++;
    return add_host_name(ps, &args[0]);
}

static int close_host(parser *ps, const token *dir)
{
    (void)dir;
    ps->host = SANDLET_HOST_DEFAULT;
    return 0;
}

static int do_host_name(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)d;
    (void)dir;
    return add_host_name(ps, &args[0]);
}

/* With unknown-hosts refuse, no request reaches the default host: its
 * servlets and pages would be dead, which is a mistake to name. */
static int hosts_reachable(parser *ps)
{
    const sandlet_conf *c = ps->conf;
    if (c->unknown_hosts != SANDLET_UNKNOWN_HOSTS_REFUSE)
        return 0;
    int line = c->nhosts ? 0 : seen_line(ps, CTX_TOP, "unknown-hosts");
    for (size_t i = 0; !line && i < c->nservlets; i++)
        if (c->servlets[i].host == SANDLET_HOST_DEFAULT)
            line = c->servlets[i].line;
    if (!line && c->npages)
        line = c->pages[0].line;
    if (!line)
        return 0;
    return fail(ps, line, 1,
                "'unknown-hosts refuse' (line %d) answers 421 to every request no host block "
                "names, so %s outside a host block would never be served (expected it inside a "
                "'host NAME { ... }' block, or 'unknown-hosts serve;')",
                seen_line(ps, CTX_TOP, "unknown-hosts"),
                !c->nhosts                              ? "everything"
                : c->npages && line == c->pages[0].line ? "pages"
                                                        : "a servlet");
}

/* pages FOLDER: a docroot folder as a request path sees it, "/" or
 * "/a/b/", stored with both slashes so that prefix tests stop at segment
 * boundaries ("/admin/" never takes "/administrator.csp"). */
static int open_pages(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)d;
    char sh[SHOWN_MAX];
    sandlet_conf *c = ps->conf;
    token *arg = &args[0];
    const char *s = arg->text;
    size_t len = strlen(s);
    if (s[0] != '/')
        return fail(ps, arg->line, arg->col,
                    "pages folder '%s' must start with '/' (expected a docroot folder as a URL "
                    "path, e.g. 'pages / { ... }' or 'pages /admin/ { ... }')",
                    shown(sh, sizeof(sh), s));
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        bool dots = ch == '.' && (i == 0 || s[i - 1] == '/') &&
                    (s[i + 1] == '/' || s[i + 1] == '\0' ||
                     (s[i + 1] == '.' && (s[i + 2] == '/' || s[i + 2] == '\0')));
        if (ch <= 0x20 || ch == 0x7f || ch == '?' || ch == '#' || ch == '%' || ch == '*' ||
            ch == '\\' || (ch == '/' && i > 0 && s[i - 1] == '/') || dots)
            return fail(ps, arg->line, arg->col,
                        "invalid pages folder '%s' (expected a plain folder path: no space, "
                        "control character, '?', '#', '%%', '*', '\\', '//', '.' or '..' "
                        "segment)",
                        shown(sh, sizeof(sh), s));
    }
    if (s[len - 1] != '/') {
        char *t = realloc(arg->text, len + 2);
        if (!t)
            return nomem(ps);
        t[len] = '/';
        t[len + 1] = '\0';
        arg->text = t;
    }
    for (size_t i = 0; i < c->npages; i++)
        if (strcmp(c->pages[i].prefix, arg->text) == 0)
            return fail(ps, arg->line, arg->col,
                        "duplicate pages folder '%s' (already mapped at line %d; expected each "
                        "folder once)",
                        shown(sh, sizeof(sh), arg->text), c->pages[i].line);
    sandlet_pages_conf *pg = reserve(c->pages, c->npages, sizeof(*pg));
    if (!pg)
        return nomem(ps);
    c->pages = pg;
    sandbox_ref *r = reserve(ps->page_refs, c->npages, sizeof(*r));
    if (!r)
        return nomem(ps);
    ps->page_refs = r;
    ps->cur = c->npages;
    r[c->npages] = (sandbox_ref){0};
    pg[c->npages++] =
        (sandlet_pages_conf){.prefix = arg->text, .sandbox = SIZE_MAX, .line = dir->line};
    arg->text = NULL;
    return 0;
}

/* page-compiler PROGRAM|off: a name looked up in PATH when a compile
 * starts (like a shell would), or an absolute path. */
static int do_compiler(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)d;
    (void)dir;
    token *arg = &args[0];
    sandlet_conf *c = ps->conf;
    free(c->page_compiler);
    c->page_compiler = NULL;
    if (strcmp(arg->text, "off") == 0)
        return 0;
    if (!arg->text[0] || arg->text[strcspn(arg->text, " \t\n\r;")] != '\0' ||
        (arg->text[0] != '/' && strchr(arg->text, '/'))) {
        char sh[SHOWN_MAX];
        return fail(ps, arg->line, arg->col,
                    "invalid page-compiler '%s' (expected a program name such as cc, an "
                    "absolute path such as /usr/bin/gcc, or off)",
                    shown(sh, sizeof(sh), arg->text));
    }
    c->page_compiler = arg->text;
    arg->text = NULL;
    return 0;
}

static int do_use_sandbox(parser *ps, const directive *d, const token *dir, token *args)
{
    token *name = &args[0];
    if (!name->text[0])
        return fail(ps, name->line, name->col, "empty sandbox name (expected '%s NAME;')",
                    dir->text);
    sandbox_ref *r = d->ctx == CTX_PAGES ? &ps->page_refs[ps->cur] : &ps->refs[ps->cur];
    *r = (sandbox_ref){.name = name->text, .line = name->line, .col = name->col};
    name->text = NULL;
    return 0;
}

static int do_param(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)d;
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

/* ---- typed values --------------------------------------------------------- */

/* A byte count within the row's bounds, or its `none` word for 0. */
static int size_arg(parser *ps, const directive *d, const token *arg, unsigned long long *out)
{
    char sh[SHOWN_MAX];
    if (d->none && strcmp(arg->text, d->none) == 0) {
        *out = 0;
        return 0;
    }
    size_t v = 0;
    int rc = parse_size(arg->text, (size_t)d->max, &v);
    if (rc == -1)
        return fail(ps, arg->line, arg->col,
                    "invalid size '%s' for '%s' (expected bytes, optionally with a k, m or g "
                    "suffix, e.g. %s%s%s)",
                    shown(sh, sizeof(sh), arg->text), d->name, d->example ? d->example : "64k",
                    d->none ? ", or " : "", d->none ? d->none : "");
    if (rc == -2 || v < d->min)
        return fail(ps, arg->line, arg->col, "'%s %s' out of range (expected %llu..%llu bytes%s)",
                    d->name, shown(sh, sizeof(sh), arg->text), d->min, d->max,
                    d->note ? d->note : "");
    *out = v;
    return 0;
}

/* One word of the row's value table; the message lists them all. */
static int choice(parser *ps, const directive *d, const token *arg, unsigned *out)
{
    char sh[SHOWN_MAX], list[128];
    size_t n = 0, pos = 0;
    for (const word_value *w = d->values; w->word; w++) {
        if (strcmp(w->word, arg->text) == 0) {
            *out = w->value;
            return 0;
        }
        n++;
    }
    list[0] = '\0';
    for (size_t i = 0; i < n && pos < sizeof(list); i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        int k = snprintf(list + pos, sizeof(list) - pos, "%s%s", sep, d->values[i].word);
        if (k < 0)
            break;
        pos += (size_t)k;
    }
    if (d->noun)
        return fail(ps, arg->line, arg->col, "unknown %s '%s' (expected %s)", d->noun,
                    shown(sh, sizeof(sh), arg->text), list);
    return fail(ps, arg->line, arg->col, "invalid value '%s' for '%s' (expected %s)",
                shown(sh, sizeof(sh), arg->text), d->name, list);
}

/* A port for a fixed-size list: duplicates are kept once. */
static int add_port(parser *ps, const directive *d, const token *arg, unsigned short *ports,
                    size_t *n)
{
    unsigned port = 0;
    int rc = number(ps, d, arg, &port);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < *n; i++)
        if (ports[i] == port)
            return 0;
    if (*n >= d->cap)
        return fail(ps, arg->line, arg->col, "too many %s (at most %zu per sandbox)", d->noun,
                    d->cap);
    ports[(*n)++] = (unsigned short)port;
    return 0;
}

/* Parses arg as d's kind and stores it where d's row says, in the struct
 * of the open block: the one place every typed directive goes through. */
static int set_value(parser *ps, const directive *d, token *arg)
{
    sandlet_conf *c = ps->conf;
    char *base = d->ctx == CTX_SANDBOX   ? (char *)&c->sandboxes[ps->cur]
                 : d->ctx == CTX_SERVLET ? (char *)&c->servlets[ps->cur]
                 : d->ctx == CTX_HOST    ? (char *)&c->hosts[ps->host]
                                         : (char *)c;
    void *f = base + d->off;
    unsigned u = 0;
    unsigned long long v = 0;
    int rc = 0;
    switch (d->kind) {
    case K_UINT: return number(ps, d, arg, f);
    case K_SIZE:
        if ((rc = size_arg(ps, d, arg, &v)) == 0)
            *(size_t *)f = (size_t)v;
        return rc;
    case K_BYTES:
        if ((rc = size_arg(ps, d, arg, &v)) == 0)
            *(unsigned long long *)f = v;
        return rc;
    case K_BOOL:
        if ((rc = choice(ps, d, arg, &u)) == 0)
            *(bool *)f = u != 0;
        return rc;
    case K_ENUM:
        if ((rc = choice(ps, d, arg, &u)) == 0)
            *(unsigned *)f = u;
        return rc;
    case K_FLAGS:
        if ((rc = choice(ps, d, arg, &u)) == 0)
            *(unsigned *)f |= u;
        return rc;
    case K_STRING: return take_string(ps, d, arg, f);
    case K_PATH: return take_path(ps, d, arg, f);
    case K_PATHS: return add_path(ps, arg, f, (size_t *)(base + d->off_n));
    case K_PORTS: return add_port(ps, d, arg, f, (size_t *)(base + d->off_n));
    case K_CUSTOM:
    case K_BLOCK: break;
    }
    return -EINVAL; /* not reached: statement() calls their handlers */
}

/* ---- grammar -------------------------------------------------------------- */

static int parse_block(parser *ps, enum ctx ctx, const token *opener, const char *label);

/* "workers 4", for "expected ';' after ..." messages. */
static const char *statement_text(const directive *d, const token *args, char *buf, size_t size)
{
    char sh[SHOWN_MAX];
    size_t pos = (size_t)snprintf(buf, size, "%s", d->name);
    for (unsigned i = 0; i < (d->nargs ? d->nargs : 1u) && pos < size; i++)
        pos += (size_t)snprintf(buf + pos, size - pos, " %s", shown(sh, sizeof(sh), args[i].text));
    return buf;
}

/* Edit distance between a and b (at most 32 bytes each; longer: far),
 * for "did you mean" -- one row of the table at a time, no recursion. */
static unsigned distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32)
        return 99;
    unsigned row[33];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned up = row[j];
            unsigned best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* Words other servers' files use, and what sandlet.conf says instead:
 * "did you mean" cannot find these, they are not typos. */
static const struct {
    const char *word, *instead;
} foreign[] = {
    {"location", "a URL path is 'servlet /PATH { library FILE; }', or 'pages /PREFIX/ { ... }' "
                 "for .csp files"},
    {"server", "a name-based virtual server is 'host NAME { docroot DIR; servlet PATH { ... } }'; "
               "listen and sandboxes stay at top level"},
    {"server_name", "a host block's other names are 'name NAME;' inside it"},
    {"root", "the folder of static files is 'docroot DIR;'"},
    {"port", "the address and port are one 'listen ADDR:PORT;'"},
    {"bind", "the address and port are one 'listen ADDR:PORT;'"},
    {"threads", "a sandbox's processes are 'workers N;'"},
};

/* Where a directive of another block belongs, for "is not allowed". */
static const char *belongs(const char *name, char *buf, size_t size)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < NDIRECTIVES && pos < size; k++) {
        if (strcmp(directives[k].name, name) != 0)
            continue;
        bool top = directives[k].ctx == CTX_TOP;
        int n = snprintf(buf + pos, size - pos, "%s%s%s", pos ? " or " : "", top ? "" : "in a ",
                         top ? "at top level" : where(directives[k].ctx) + 3);
        if (n < 0)
            break;
        pos += (size_t)n;
    }
    return buf;
}

static int unknown_directive(parser *ps, enum ctx ctx, const token *dir)
{
    char sh[SHOWN_MAX], list[1024], hint[192] = "", home[96];
    const directive *other = NULL, *near = NULL;
    unsigned best = 3; /* two edits at most: a typo, not another word */
    for (size_t k = 0; k < NDIRECTIVES; k++) {
        if (!other && strcmp(directives[k].name, dir->text) == 0)
            other = &directives[k];
        unsigned d = directives[k].ctx == ctx ? distance(dir->text, directives[k].name) : 99;
        if (d < best && d < strlen(directives[k].name)) {
            best = d;
            near = &directives[k];
        }
    }
    /* Not a misplaced '}': pages are not per host yet (the page table,
     * the compile cache and the supervisor's check know one docroot). */
    if (ctx == CTX_HOST && other && other->block == CTX_PAGES)
        return fail(ps, dir->line, dir->col,
                    "'pages' is not allowed in host block: C Server Pages are served on the "
                    "default host only (expected the pages block at top level, outside every "
                    "host block)");
    expected_list(ctx, list, sizeof(list));
    for (size_t k = 0; k < sizeof(foreign) / sizeof(foreign[0]); k++)
        if (strcmp(dir->text, foreign[k].word) == 0)
            snprintf(hint, sizeof(hint), "; sandlet.conf has no '%s': %s", foreign[k].word,
                     foreign[k].instead);
    if (near && !hint[0])
        snprintf(hint, sizeof(hint), "; did you mean '%s'?", near->name);
    if (!other)
        return fail(ps, dir->line, dir->col, "unknown directive '%s' %s%s (expected %s)",
                    shown(sh, sizeof(sh), dir->text), where(ctx), hint, list);
    return fail(ps, dir->line, dir->col, "'%s' is not allowed %s; it belongs %s (expected %s%s)",
                other->name, where(ctx), belongs(other->name, home, sizeof(home)), list,
                ctx != CTX_TOP && other->ctx == CTX_TOP ? "; is a '}' missing?" : "");
}

/* Where a user, group, folder or library was named, for the message when
 * it does not exist: that is checked at start and by sandletd -t, not
 * here, and the message must still name the line to fix. */
static int note_line(parser *ps, enum ctx ctx, const char *name, int line)
{
    sandlet_conf *c = ps->conf;
    int *at = NULL;
    if (ctx == CTX_SANDBOX && (!strcmp(name, "readable") || !strcmp(name, "writable"))) {
        sandlet_sandbox_conf *sb = &c->sandboxes[ps->cur];
        bool r = name[0] == 'r';
        int **lines = r ? &sb->readable_lines : &sb->writable_lines;
        size_t n = r ? sb->nreadable : sb->nwritable; /* the path is added */
        int *grown = realloc(*lines, n * sizeof(**lines));
        if (!grown)
            return nomem(ps);
        grown[n - 1] = line;
        *lines = grown;
        return 0;
    }
    if (ctx == CTX_SANDBOX && !strcmp(name, "user"))
        at = &c->sandboxes[ps->cur].user_line;
    else if (ctx == CTX_SANDBOX && !strcmp(name, "group"))
        at = &c->sandboxes[ps->cur].group_line;
    else if (ctx == CTX_SERVLET && !strcmp(name, "library"))
        at = &c->servlets[ps->cur].library_line;
    else if (ctx == CTX_TOP && !strcmp(name, "user"))
        at = &c->user_line;
    else if (ctx == CTX_TOP && !strcmp(name, "docroot"))
        at = &c->docroot_line;
    else if (ctx == CTX_HOST && !strcmp(name, "docroot"))
        at = &c->hosts[ps->host].docroot_line;
    else if (ctx == CTX_TOP && !strcmp(name, "access-log"))
        at = &c->access_log_line;
    else if (ctx == CTX_TOP && !strcmp(name, "error-log"))
        at = &c->error_log_line;
    else if (ctx == CTX_TOP && !strcmp(name, "page-compiler"))
        at = &c->page_compiler_line;
    else if (ctx == CTX_TOP && !strcmp(name, "spool-dir"))
        at = &c->spool_dir_line;
    if (at)
        *at = line;
    return 0;
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
    size_t row = (size_t)(d - directives);
    unsigned nargs = d->nargs ? d->nargs : 1;

    for (unsigned i = 0; i < nargs; i++) {
        rc = lex(ps, &args[i]);
        if (rc)
            goto out;
        if (args[i].type != T_WORD && args[i].type != T_STRING) {
            /* A value cut off by '#': a comment starts there. */
            /* Reported at the '#', where the fix goes, not at whatever
             * token the comment left to be found on a later line. */
            bool comment = ps->comment_line == dir->line;
            rc = fail(ps, comment ? ps->comment_line : args[i].line,
                      comment ? ps->comment_col : args[i].col,
                      "missing argument for '%s' (expected '%s %s'), found %s%s", d->name, d->name,
                      d->usage, what(&args[i], found, sizeof(found)),
                      comment ? "; '#' starts a comment: put a value that holds one in quotes "
                                "(\"#fff\")"
                              : "");
            goto out;
        }
        if (i == 0 && args[0].type == T_WORD &&
            (!strcmp(args[0].text, "=") || !strcmp(args[0].text, ":"))) {
            rc = fail(ps, args[0].line, args[0].col,
                      "'%s %s': sandlet.conf has no '%s' between a directive and its value "
                      "(expected '%s %s;')",
                      d->name, args[0].text, args[0].text, d->name, d->usage);
            goto out;
        }
    }
    /* Just past the last argument: where a missing ';' or '{' belongs,
     * which is the line to name even when what follows is lines below. */
    int end_line = ps->line, end_col = ps->col;
    rc = lex(ps, &term);
    if (rc)
        goto out;
    enum tok_type want = d->kind != K_BLOCK ? T_SEMI : T_LBRACE;
    if (term.type != want) {
        char at[32] = "";
        bool later = term.line != end_line;
        if (later)
            snprintf(at, sizeof(at), " on line %d", term.line);
        rc = fail(ps, later ? end_line : term.line, later ? end_col : term.col,
                  "expected '%c' after '%s', found %s%s (add '%c' here)",
                  want == T_SEMI ? ';' : '{', statement_text(d, args, text, sizeof(text)),
                  what(&term, found, sizeof(found)), at, want == T_SEMI ? ';' : '{');
        goto out;
    }
    if (!d->repeat && ps->seen[row]) {
        rc = fail(ps, dir->line, dir->col,
                  "duplicate '%s' %s (already set at line %d; expected "
                  "it at most once)",
                  d->name, where(ctx), ps->seen[row]);
        goto out;
    }

    if (d->kind != K_BLOCK) {
        rc = d->kind == K_CUSTOM ? d->handler(ps, d, dir, args) : set_value(ps, d, &args[0]);
        if (rc == 0)
            ps->seen[row] = dir->line;
        if (rc == 0)
            rc = note_line(ps, ctx, d->name, dir->line);
        goto out;
    }
    shown(label, sizeof(label), args[0].text);
    for (size_t k = 0; k < NDIRECTIVES; k++)
        if (directives[k].ctx == d->block)
            ps->seen[k] = 0;
    rc = d->handler(ps, d, dir, args);
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
            /* A fixed pool, as close_sandbox makes an unset max-workers. */
            c->sandboxes[dflt].max_workers = c->sandboxes[dflt].workers;
        }
        c->servlets[i].sandbox = dflt;
    }
    for (size_t i = 0; i < c->npages; i++) {
        const sandbox_ref *r = &ps->page_refs[i];
        const char *want = r->name ? r->name : SANDLET_DEFAULT_PAGES_SANDBOX;
        size_t sb = find_sandbox(c, want);
        if (sb == SIZE_MAX && r->name && strcmp(want, SANDLET_DEFAULT_SANDBOX) != 0 &&
            strcmp(want, SANDLET_DEFAULT_PAGES_SANDBOX) != 0)
            return fail(ps, r->line, r->col,
                        "pages '%s' use undefined sandbox '%s' (expected the name of a "
                        "'sandbox NAME { ... }' block)",
                        shown(sh, sizeof(sh), c->pages[i].prefix), shown(sh2, sizeof(sh2), want));
        if (sb == SIZE_MAX) {
            char *name = dupn(want, strlen(want));
            if (!name)
                return nomem(ps);
            int rc = add_sandbox(ps, name, c->pages[i].line);
            if (rc) {
                free(name);
                return rc;
            }
            sb = c->nsandboxes - 1;
            c->sandboxes[sb].max_file_size = 0; /* writes no files, see close_sandbox */
            /* A fixed pool, as for "default" above (and what -T writes). */
            c->sandboxes[sb].max_workers = c->sandboxes[sb].workers;
        }
        c->pages[i].sandbox = sb;
        c->sandboxes[sb].pages = true;
    }
    return 0;
}

/* The Path of a sandbox's session cookie: the longest prefix of its
 * servlet routes that ends at a segment boundary of each of them, without
 * its trailing '/', so that a browser sends the cookie to every route of
 * the sandbox and to no path outside that prefix (RFC 6265 path-match).
 * Cut before anything a Path attribute cannot hold; "/" when the routes
 * share nothing or the sandbox has none. */
static const char *route_of(const sandlet_conf *c, size_t i, size_t sb)
{
    if (i < c->nservlets)
        return c->servlets[i].sandbox == sb ? c->servlets[i].path : NULL;
    i -= c->nservlets;
    return c->pages[i].sandbox == sb ? c->pages[i].prefix : NULL;
}

static char *session_path(const sandlet_conf *c, size_t sb)
{
    const char *first = NULL;
    size_t len = 0;
    size_t nroutes = c->nservlets + c->npages;
    for (size_t i = 0; i < nroutes; i++) {
        const char *p = route_of(c, i, sb);
        if (!p)
            continue;
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
    for (size_t i = 0; i < nroutes && !(len > 0 && first[len - 1] == '/'); i++) {
        const char *p = route_of(c, i, sb);
        if (p && p[len] != '\0' && p[len] != '/')
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
        /* A session outlives the process that made it only if its id
         * still verifies afterwards, on this host and the others: the
         * key must come from a secret every start and host shares. */
        if (sb->sessions == SANDLET_SESSIONS_DATABASE && !c->session_secret_set)
            return fail(ps, sb->line, 1,
                        "sandbox '%s' has 'sessions database' but there is no "
                        "'session-secret-file FILE;' (without it the session keys are new at "
                        "every start, so sessions would not survive a restart nor be shared by "
                        "hosts); create one with 'head -c 32 /dev/urandom > FILE; chmod 600 FILE' "
                        "(the same file on every host) and name it at the top level",
                        shown(sh, sizeof(sh), sb->name));
        sb->session_cookie = dupn(name, strlen(name));
        sb->session_path = session_path(c, i);
        if (!sb->session_cookie || !sb->session_path)
            return nomem(ps);
    }
    return 0;
}

/* ---- public API ----------------------------------------------------------- */

const sandlet_pages_conf *sandlet_conf_pages_for(const sandlet_conf *conf, const char *rel)
{
    const sandlet_pages_conf *best = NULL;
    size_t bestlen = 0, rlen = rel ? strlen(rel) : 0;
    if (!conf || !rel)
        return NULL;
    for (size_t i = 0; i < conf->npages; i++) {
        const char *pre = conf->pages[i].prefix; /* "/" or "/a/b/" */
        size_t n = strlen(pre) - 1;              /* without the leading '/' */
        if (n > rlen || memcmp(pre + 1, rel, n) != 0)
            continue;
        if (!best || n > bestlen) {
            best = &conf->pages[i];
            bestlen = n;
        }
    }
    return best;
}

typedef struct origin origin;
static void origin_give(origin *o, sandlet_conf *conf);

static int parse_text(const char *text, size_t len, const char *name, const char *basedir,
                      bool no_secrets, bool no_pq, sandlet_conf **out, char *err, size_t errlen,
                      origin *o)
{
    parser ps = {.line = 1,
                 .col = 1,
                 .host = SANDLET_HOST_DEFAULT,
                 .name = name ? name : "(config)",
                 .basedir = basedir,
                 .no_secrets = no_secrets,
                 .no_pq = no_pq,
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
    if (o)
        origin_give(o, ps.conf); /* before any message: they map lines */
    set_defaults(CTX_TOP, (char *)ps.conf);
    ps.conf->file = dupn(ps.name, strlen(ps.name));
    ps.conf->page_compiler =
        dupn(SANDLET_DEFAULT_PAGE_COMPILER, strlen(SANDLET_DEFAULT_PAGE_COMPILER));
    rc = ps.conf->file && ps.conf->page_compiler ? 0 : nomem(&ps);
    if (rc == 0)
        rc = parse_block(&ps, CTX_TOP, NULL, NULL);
    if (rc == 0)
        rc = resolve_sandboxes(&ps);
    if (rc == 0)
        rc = session_cookies(&ps);
    /* Ids as a start numbers them; a reload renumbers (sandlet_conf.h). */
    for (size_t i = 0; rc == 0 && i < ps.conf->nsandboxes; i++)
        ps.conf->sandboxes[i].id = (uint32_t)i;
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

    if (rc == 0)
        rc = hosts_reachable(&ps);
    if (rc == 0 && ps.conf->npages && !ps.conf->docroot) {
        int at = ps.conf->pages[0].line;
        const char *in = sandlet_conf_where(ps.conf, at, &at);
        set_err(err, errlen,
                "%s:%d: 'pages' without a docroot (expected a 'docroot DIR;' line: pages are "
                ".csp files under it)",
                in, at);
        rc = -EINVAL;
    }
    if (rc == 0 && !ps.conf->page_cache) {
        ps.conf->page_cache = dupn(SANDLET_DEFAULT_PAGE_CACHE, strlen(SANDLET_DEFAULT_PAGE_CACHE));
        if (!ps.conf->page_cache)
            rc = nomem(&ps);
    }
    if (rc == 0 && !ps.conf->spool_dir) {
        ps.conf->spool_dir = dupn(SANDLET_DEFAULT_SPOOL_DIR, strlen(SANDLET_DEFAULT_SPOOL_DIR));
        if (!ps.conf->spool_dir)
            rc = nomem(&ps);
    }
    for (size_t i = 0; i < ps.conf->nservlets; i++)
        free(ps.refs[i].name);
    free(ps.refs);
    for (size_t i = 0; i < ps.conf->npages; i++)
        free(ps.page_refs[i].name);
    free(ps.page_refs);
    if (rc) {
        sandlet_conf_free(ps.conf);
        return rc;
    }
    *out = ps.conf;
    return 0;
}

int sandlet_conf_parse(const char *text, size_t len, const char *name, const char *basedir,
                       sandlet_conf **out, char *err, size_t errlen)
{
    return parse_text(text, len, name, basedir, false, false, out, err, errlen, NULL);
}

int sandlet_conf_parse_public(const char *text, size_t len, const char *name, const char *basedir,
                              sandlet_conf **out, char *err, size_t errlen)
{
    /* The acceptor's reloads: it never loads libpq, and its workers'
     * ports are the supervisor's business. */
    return parse_text(text, len, name, basedir, true, true, out, err, errlen, NULL);
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

/* ---- dynamic-uids ------------------------------------------------------------ */

/* Below 2^31: ids past it are read as negative by too many programs
 * (systemd calls that range "HIC SVNT LEONES"). */
#define DYNAMIC_UID_MAX 2147483646UL

/* The range in effect: the file's, or the default. */
static uint32_t dynamic_first(const sandlet_conf *c)
{
    return c->dynamic_uid_first ? c->dynamic_uid_first : SANDLET_DEFAULT_DYNAMIC_UID_FIRST;
}

static uint32_t dynamic_last(const sandlet_conf *c)
{
    return c->dynamic_uid_last ? c->dynamic_uid_last : SANDLET_DEFAULT_DYNAMIC_UID_LAST;
}

/* "FIRST-LAST": the acceptor's uid and at least one sandbox's, above the
 * ids a distribution gives its users and below 2^31. */
static int do_dynamic_uids(parser *ps, const directive *d, const token *dir, token *args)
{
    (void)d;
    (void)dir;
    char sh[SHOWN_MAX], first[16] = "";
    const char *s = args[0].text, *dash = strchr(s, '-');
    unsigned lo = 0, hi = 0;
    size_t n = dash ? (size_t)(dash - s) : 0;
    if (n && n < sizeof(first)) {
        memcpy(first, s, n);
        first[n] = '\0';
    }
    if (!dash || !first[0] || parse_uint(first, 1000, DYNAMIC_UID_MAX, &lo) != 0 ||
        parse_uint(dash + 1, 1000, DYNAMIC_UID_MAX, &hi) != 0 || hi <= lo)
        return fail(ps, args[0].line, args[0].col,
                    "invalid dynamic-uids '%s' (expected FIRST-LAST, two ids from 1000 to %lu "
                    "with FIRST below LAST, e.g. 1879048192-1879113727)",
                    shown(sh, sizeof(sh), s), DYNAMIC_UID_MAX);
    ps->conf->dynamic_uid_first = lo;
    ps->conf->dynamic_uid_last = hi;
    ps->conf->dynamic_uids_line = args[0].line;
    return 0;
}

/* ---- include (sandlet.conf(5), INCLUDE) ------------------------------------ */

/* Nesting deeper than this is a mistake (or a cycle through links). */
#define INCLUDE_MAX_DEPTH 8
/* Files one configuration may read, counting each inclusion. */
#define INCLUDE_MAX_FILES 1024

/* Every file read and the spans of the text they make, until a parse
 * hands them to the sandlet_conf it makes (origin_give). */
struct origin {
    char **files;
    size_t nfiles;
    sandlet_conf_span *spans;
    size_t nspans;
};

static void origin_give(origin *o, sandlet_conf *conf)
{
    conf->files = o->files;
    conf->nfiles = o->nfiles;
    conf->spans = o->spans;
    conf->nspans = o->nspans;
    memset(o, 0, sizeof(*o));
}

static void origin_free(origin *o)
{
    for (size_t i = 0; i < o->nfiles; i++)
        free(o->files[i]);
    free(o->files);
    free(o->spans);
    memset(o, 0, sizeof(*o));
}

const char *sandlet_conf_where(const sandlet_conf *conf, int line, int *local)
{
    *local = line;
    if (!conf->nspans)
        return conf->file;
    const sandlet_conf_span *sp = &conf->spans[0];
    for (size_t i = 1; i < conf->nspans && conf->spans[i].line <= line; i++)
        sp = &conf->spans[i];
    *local = sp->local + (line - sp->line);
    return sp->file < conf->nfiles ? conf->files[sp->file] : conf->file;
}

/* One file being read: a lexer over its bytes, where its text was copied
 * up to, and the files its last include matched, still to be read. */
typedef struct inc_file {
    parser lx;       /* only the lexer's fields: p, end, line, col, name */
    char *text;      /* its bytes */
    char *real;      /* its real path, to find cycles */
    char *dir;       /* its folder: include patterns are relative to it */
    unsigned index;  /* in origin.files */
    const char *out; /* its text before this is in the output */
    int depth;       /* of '{' open in it */
    int open_line;   /* of the outermost block open */
    bool start;      /* the next word begins a statement */
    bool resume;     /* back from an include: a span starts again */
    int resume_line; /* its line there (the include's ';') */
    glob_t matched;  /* of its last include */
    size_t next;     /* the next of matched to read */
    bool globbed;
    int inc_line, inc_col; /* of that include, for messages */
} inc_file;

/* The expanded text, and its current last line. */
typedef struct inc_out {
    char *text;
    size_t len, cap;
    int line;
} inc_out;

static int out_put(inc_out *o, const char *s, size_t n)
{
    if (o->len + n > CONF_MAX_BYTES)
        return -EFBIG;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 16384;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *t = realloc(o->text, cap);
        if (!t)
            return -ENOMEM;
        o->text = t;
        o->cap = cap;
    }
    memcpy(o->text + o->len, s, n);
    o->len += n;
    o->text[o->len] = '\0';
    for (size_t i = 0; i < n; i++)
        o->line += s[i] == '\n';
    return 0;
}

/* Starts a span: file index's line local is the output's next line. */
static int out_span(inc_out *o, origin *g, unsigned index, int local)
{
    if (o->len && o->text[o->len - 1] != '\n') {
        int rc = out_put(o, "\n", 1);
        if (rc)
            return rc;
    }
    sandlet_conf_span *sp = reserve(g->spans, g->nspans, sizeof(*sp));
    if (!sp)
        return -ENOMEM;
    g->spans = sp;
    sp[g->nspans++] = (sandlet_conf_span){.line = o->line, .file = index, .local = local};
    return 0;
}

static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = !slash          ? dupn(".", 1)
                : slash == path ? dupn("/", 1)
                                : dupn(path, (size_t)(slash - path));
    char *abs = dir ? realpath(dir, NULL) : NULL;
    if (abs) {
        free(dir);
        return abs;
    }
    return dir;
}

static void inc_file_free(inc_file *f)
{
    free(f->text);
    free(f->real);
    free(f->dir);
    if (f->globbed)
        globfree(&f->matched);
    memset(f, 0, sizeof(*f));
}

/* Opens path (named as shown in messages) as stack[*n]: refused past the
 * depth bound, when it is on the stack already (a cycle), or past the
 * file bound.  from: the file whose include named it, or NULL. */
static int inc_enter(inc_file *stack, size_t *n, origin *g, inc_out *o, const char *path,
                     inc_file *from, char *err, size_t errlen)
{
    char sh[SHOWN_MAX];
    char where[PATH_MAX + 32] = "";
    if (from)
        snprintf(where, sizeof(where), "%s:%d:%d: ", from->lx.name, from->inc_line, from->inc_col);
    if (*n >= INCLUDE_MAX_DEPTH) {
        set_err(err, errlen,
                "%sinclude of %s is nested %d deep (expected at most %d levels of files "
                "including files)",
                where, shown(sh, sizeof(sh), path), INCLUDE_MAX_DEPTH + 1, INCLUDE_MAX_DEPTH);
        return -ELOOP;
    }
    if (g->nfiles >= INCLUDE_MAX_FILES) {
        set_err(err, errlen, "%sincluding %s: more than %d files (expected fewer)", where,
                shown(sh, sizeof(sh), path), INCLUDE_MAX_FILES);
        return -EMFILE;
    }
    inc_file *f = &stack[*n];
    memset(f, 0, sizeof(*f));
    size_t len = 0;
    char rerr[PATH_MAX + 128];
    int rc = read_file(path, &f->text, &len, rerr, sizeof(rerr));
    if (rc) {
        set_err(err, errlen, "%s%s%s", where, from ? "included file " : "", rerr);
        return rc;
    }
    f->real = realpath(path, NULL);
    f->dir = folder_of(path);
    char *name = dupn(path, strlen(path));
    char **files = reserve(g->files, g->nfiles, sizeof(*files));
    if (files)
        g->files = files;
    if (!f->real || !f->dir || !name || !files) {
        free(name);
        inc_file_free(f);
        set_err(err, errlen, "%s%s: cannot read: %s", where, path,
                errno ? strerror(errno) : "out of memory");
        return -ENOMEM;
    }
    for (size_t i = 0; i < *n; i++)
        if (strcmp(stack[i].real, f->real) == 0) {
            set_err(err, errlen,
                    "%sinclude of %s makes a cycle: that file is already being read (it "
                    "includes itself, directly or through %s); remove one of the includes",
                    where, shown(sh, sizeof(sh), path), stack[i].lx.name);
            free(name);
            inc_file_free(f);
            return -ELOOP;
        }
    f->index = (unsigned)g->nfiles;
    g->files[g->nfiles++] = name;
    f->lx = (parser){.p = f->text, .end = f->text + len, .line = 1, .col = 1, .name = name};
    f->out = f->text;
    f->start = true;
    (*n)++;
    return out_span(o, g, f->index, 1);
}

/* A pattern with no wildcard names one file, which must exist; one with
 * wildcards may match nothing (an empty conf.d/), as in nginx. */
static bool has_wildcard(const char *s)
{
    return strpbrk(s, "*?[") != NULL;
}

/* "include PATTERN;" at f's word t: the pattern and its ';' are read,
 * the text before the include goes out, and the sorted matches are
 * queued for reading. */
static int inc_statement(inc_file *f, inc_out *o, const token *t)
{
    char sh[SHOWN_MAX], found[SHOWN_MAX + 16];
    parser *lx = &f->lx;
    const char *before = lx->p - strlen("include");
    if (f->depth > 0)
        return fail(lx, t->line, t->col,
                    "'include' inside a block (expected it at top level, outside any '{ }': an "
                    "included file holds whole blocks)");
    token arg = {0}, semi = {0};
    int rc = lex(lx, &arg);
    if (rc == 0 && arg.type != T_WORD && arg.type != T_STRING)
        rc = fail(lx, arg.line, arg.col,
                  "missing argument for 'include' (expected 'include FILES;', e.g. 'include "
                  "conf.d/*.conf;'), found %s",
                  what(&arg, found, sizeof(found)));
    if (rc == 0)
        rc = lex(lx, &semi);
    if (rc == 0 && semi.type != T_SEMI)
        rc = fail(lx, semi.line, semi.col, "expected ';' after 'include %s', found %s (add ';')",
                  shown(sh, sizeof(sh), arg.text), what(&semi, found, sizeof(found)));
    if (rc == 0 && !arg.text[0])
        rc = fail(lx, arg.line, arg.col,
                  "empty pattern for 'include' (expected 'include FILES;', e.g. 'include "
                  "conf.d/*.conf;')");
    char *pattern = NULL;
    if (rc == 0 && arg.text[0] != '/' && asprintf(&pattern, "%s/%s", f->dir, arg.text) < 0)
        rc = nomem(lx);
    if (rc == 0) {
        const char *pat = pattern ? pattern : arg.text;
        /* glob sorts its matches: files are read in the order of their
         * names, so "10-site.conf" comes before "20-other.conf". */
        int g = glob(pat, GLOB_ERR, NULL, &f->matched);
        f->globbed = g == 0 || g == GLOB_NOMATCH;
        char shp[PATH_MAX];
        if (g == GLOB_NOMATCH && !has_wildcard(arg.text))
            rc = fail(lx, t->line, t->col,
                      "include %s: no such file (expected an existing file, or a pattern such "
                      "as conf.d/*.conf, which may match none)",
                      shown(shp, sizeof(shp), pat));
        else if (g != 0 && g != GLOB_NOMATCH)
            rc = fail(lx, t->line, t->col, "include %s: cannot read the folder (%s)",
                      shown(shp, sizeof(shp), pat),
                      g == GLOB_NOSPACE ? "out of memory" : "permission denied?");
        if (g == GLOB_NOMATCH)
            f->matched.gl_pathc = 0;
    }
    free(pattern);
    if (rc == 0)
        rc = out_put(o, f->out, (size_t)(before - f->out));
    f->out = lx->p; /* past the ';' */
    f->next = 0;
    f->inc_line = t->line;
    f->inc_col = t->col;
    f->resume = true;
    f->resume_line = semi.line;
    free(arg.text);
    free(semi.text);
    return rc;
}

/* Reads path and every file it includes into one text (*text, *len, for
 * the caller to free) and the spans that map its lines back (*g).  No
 * recursion: the files being read are an explicit stack. */
static int expand_file(const char *path, char **text, size_t *len, origin *g, char *err,
                       size_t errlen)
{
    inc_file stack[INCLUDE_MAX_DEPTH];
    size_t n = 0;
    inc_out o = {.line = 1};
    int rc = inc_enter(stack, &n, g, &o, path, NULL, err, errlen);
    while (rc == 0 && n > 0) {
        inc_file *f = &stack[n - 1];
        f->lx.err = err;
        f->lx.errlen = errlen;
        if (f->globbed && f->next < f->matched.gl_pathc) {
            const char *next = f->matched.gl_pathv[f->next++];
            rc = inc_enter(stack, &n, g, &o, next, f, err, errlen);
            continue;
        }
        if (f->resume) {
            f->resume = false;
            if (f->globbed) {
                globfree(&f->matched);
                f->globbed = false;
            }
            rc = out_span(&o, g, f->index, f->resume_line);
            if (rc)
                break;
        }
        token t;
        rc = lex(&f->lx, &t);
        if (rc)
            break;
        switch (t.type) {
        case T_EOF:
            if (f->depth > 0 && n > 1) {
                rc = fail(&f->lx, f->open_line, 1,
                          "a block opened here is still open at the end of the included file "
                          "(expected its '}' in this file: blocks do not continue across files)");
                break;
            }
            rc = out_put(&o, f->out, (size_t)(f->lx.end - f->out));
            inc_file_free(f);
            n--;
            break;
        case T_LBRACE:
            if (f->depth++ == 0)
                f->open_line = t.line;
            f->start = true;
            break;
        case T_RBRACE:
            if (f->depth > 0)
                f->depth--; /* a stray '}' is the parser's to report */
            f->start = true;
            break;
        case T_SEMI: f->start = true; break;
        case T_WORD:
            if (f->start && strcmp(t.text, "include") == 0) {
                rc = inc_statement(f, &o, &t);
                f->start = true;
                break;
            }
            f->start = false;
            break;
        default: f->start = false; break;
        }
        free(t.text);
    }
    if (rc && err && errlen && !err[0])
        set_err(err, errlen, "%s: %s", path,
                rc == -EFBIG ? "with its includes, larger than 1 MiB (expected a configuration "
                               "of at most 1 MiB, included files counted)"
                             : strerror(-rc));
    while (n > 0)
        inc_file_free(&stack[--n]);
    if (rc) {
        free(o.text);
        origin_free(g);
        return rc;
    }
    *text = o.text ? o.text : dupn("", 0);
    *len = o.len;
    if (!*text) {
        origin_free(g);
        return -ENOMEM;
    }
    /* One file: its lines are the text's, and messages need no map. */
    if (g->nfiles == 1)
        origin_free(g);
    return 0;
}

static int load_text(const char *path, bool no_pq, sandlet_conf **out, sandlet_conf_text *kept,
                     char *err, size_t errlen);

int sandlet_conf_load(const char *path, sandlet_conf **out, char *err, size_t errlen)
{
    return load_text(path, false, out, NULL, err, errlen);
}

int sandlet_conf_load_no_pq(const char *path, sandlet_conf **out, char *err, size_t errlen)
{
    return load_text(path, true, out, NULL, err, errlen);
}

int sandlet_conf_load_text(const char *path, sandlet_conf **out, sandlet_conf_text *kept, char *err,
                           size_t errlen)
{
    return load_text(path, false, out, kept, err, errlen);
}

static int load_text(const char *path, bool no_pq, sandlet_conf **out, sandlet_conf_text *kept,
                     char *err, size_t errlen)
{
    char *text = NULL, *dir;
    size_t len = 0;

    if (err && errlen)
        err[0] = '\0';
    if (!out || !path)
        return -EINVAL;
    *out = NULL;
    origin g = {0};
    int rc = expand_file(path, &text, &len, &g, err, errlen);
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
        origin_free(&g);
        set_err(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    rc = parse_text(text, len, path, dir, false, no_pq, out, err, errlen, &g);
    origin_free(&g); /* what the parse did not take */
    if (rc == 0) {
        crypto_generichash((*out)->digest, sizeof((*out)->digest), (const unsigned char *)text, len,
                           NULL, 0);
        /* Absolute, but links kept: a deploy that swaps a link to the
         * file is read through the link at the next reload. */
        char cwd[PATH_MAX];
        if (path[0] == '/')
            (*out)->source = dupn(path, strlen(path));
        else if (getcwd(cwd, sizeof(cwd)) && asprintf(&(*out)->source, "%s/%s", cwd, path) < 0)
            (*out)->source = NULL;
        if (!(*out)->source) {
            set_err(err, errlen, "%s: cannot make its path absolute: %s", path, strerror(errno));
            sandlet_conf_free(*out);
            *out = NULL;
            rc = -ENOMEM;
        }
    }
    if (rc == 0 && kept) {
        /* Handed over: the caller frees both. */
        kept->text = text;
        kept->len = len;
        kept->basedir = dir;
        return 0;
    }
    free(dir);
    free(text);
    return rc;
}

/* ---- sandletd -T: the configuration as read ------------------------------ */

/* A value as the lexer reads it back: a bare word when it is one, else a
 * quoted string with '"' and '\' escaped. */
static void dump_value(FILE *out, const char *s)
{
    bool word = s[0] != '\0';
    for (const char *p = s; *p && word; p++)
        word = is_word(*p) && (unsigned char)*p >= 0x21;
    if (word) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

static const char *word_of(const word_value *v, unsigned value)
{
    for (; v && v->word; v++)
        if (v->value == value)
            return v->word;
    return NULL;
}

/* Every row of ctx whose value set_value stores, from base (a struct of
 * ctx), one line each: the table says how each is written, so a new
 * directive is dumped without a line here.  Values that mean "not set"
 * (a NULL string, a 0 that the row's bounds refuse) are left out, as
 * reading them back leaves them so. */
static void dump_rows(FILE *out, enum ctx ctx, const char *base, const char *indent)
{
    for (size_t k = 0; k < NDIRECTIVES; k++) {
        const directive *d = &directives[k];
        if (d->ctx != ctx || strcmp(d->name, "state-file") == 0) /* set or not: below */
            continue;
        const void *f = base + d->off;
        switch (d->kind) {
        case K_UINT: {
            unsigned v = *(const unsigned *)f;
            if (v == 0 && d->none)
                fprintf(out, "%s%s %s;\n", indent, d->name, d->none);
            else if (v != 0 || d->min == 0)
                fprintf(out, "%s%s %u;\n", indent, d->name, v);
            break;
        }
        case K_SIZE: fprintf(out, "%s%s %zu;\n", indent, d->name, *(const size_t *)f); break;
        case K_BYTES: {
            unsigned long long v = *(const unsigned long long *)f;
            if (v == 0 && d->none)
                fprintf(out, "%s%s %s;\n", indent, d->name, d->none);
            else if (v != 0 || d->min == 0)
                fprintf(out, "%s%s %llu;\n", indent, d->name, v);
            break;
        }
        case K_BOOL:
        case K_ENUM: {
            unsigned v = d->kind == K_BOOL ? *(const bool *)f : *(const unsigned *)f;
            const char *w = word_of(d->values, v);
            if (w)
                fprintf(out, "%s%s %s;\n", indent, d->name, w);
            break;
        }
        case K_FLAGS:
            for (const word_value *v = d->values; v->word; v++)
                if (*(const unsigned *)f & v->value)
                    fprintf(out, "%s%s %s;\n", indent, d->name, v->word);
            break;
        case K_STRING:
        case K_PATH:
            if (*(char *const *)f) {
                fprintf(out, "%s%s ", indent, d->name);
                dump_value(out, *(char *const *)f);
                fputs(";\n", out);
            }
            break;
        case K_PATHS: {
            char *const *list = *(char **const *)f;
            size_t n = *(const size_t *)(base + d->off_n);
            for (size_t i = 0; i < n; i++) {
                fprintf(out, "%s%s ", indent, d->name);
                dump_value(out, list[i]);
                fputs(";\n", out);
            }
            break;
        }
        case K_PORTS: {
            const unsigned short *ports = (const unsigned short *)f;
            size_t n = *(const size_t *)(base + d->off_n);
            for (size_t i = 0; i < n; i++)
                fprintf(out, "%s%s %u;\n", indent, d->name, ports[i]);
            break;
        }
        case K_CUSTOM:
        case K_BLOCK: break; /* written by sandlet_conf_dump */
        }
    }
}

/* "name value;" for a string the table's custom handlers store. */
static void dump_line(FILE *out, const char *indent, const char *name, const char *value)
{
    if (!value)
        return;
    fprintf(out, "%s%s ", indent, name);
    dump_value(out, value);
    fputs(";\n", out);
}

int sandlet_conf_dump(const sandlet_conf *c, FILE *out)
{
    const char *in = "    ";
    fprintf(out,
            "# sandletd -T: %s as sandletd reads it: includes expanded, every default\n"
            "# written out, relative paths made absolute.  Read back, it gives the same\n"
            "# configuration.\n",
            c->file);
    for (size_t i = 1; i < c->nfiles; i++)
        fprintf(out, "# included: %s\n", c->files[i]);
    for (size_t i = 0; i < c->nlistens; i++) {
        const sandlet_listen_conf *l = &c->listens[i];
        bool v6 = strchr(l->host, ':') != NULL;
        fprintf(out, "listen %s%s%s:%u;\n", v6 ? "[" : "", l->host, v6 ? "]" : "", l->port);
    }
    dump_rows(out, CTX_TOP, (const char *)c, "");
    if (sandlet_log_is_syslog(c->error_log))
        fprintf(out, "error-log syslog;\n");
    else
        dump_line(out, "", "error-log", c->error_log);
    dump_line(out, "", "status-page", c->status_page);
    fprintf(out, "dynamic-uids %u-%u;\n", dynamic_first(c), dynamic_last(c));
    dump_line(out, "", "session-secret-file", c->session_secret_file);
    if (c->page_compiler)
        dump_line(out, "", "page-compiler", c->page_compiler);
    else
        fprintf(out, "page-compiler off;\n");
    char state[4096];
    if (sandlet_state_path(c, state, sizeof(state)) == 0)
        dump_line(out, "", "state-file", state); /* the default is named after the file */
    for (size_t i = 0; i < c->nsandboxes; i++) {
        const sandlet_sandbox_conf *sb = &c->sandboxes[i];
        fputs("\nsandbox ", out);
        dump_value(out, sb->name);
        fputs(" {\n", out);
        /* An implicit sandbox's 0 means "as many as workers", as a block's
         * close makes it: written as that number, which reads back so. */
        sandlet_sandbox_conf shown_sb = *sb;
        if (!shown_sb.max_workers)
            shown_sb.max_workers = shown_sb.workers;
        dump_rows(out, CTX_SANDBOX, (const char *)&shown_sb, in);
        dump_line(out, in, "database", sb->database);
        dump_line(out, in, "database-password-file", sb->database_password_file);
        fputs("}\n", out);
    }
    /* The default host's servlets, then each host block with its own (a
     * file that puts default servlets after a host block reads back with
     * them first: their sandbox's servlet order, which a reload compares,
     * is the dump's). */
    for (size_t h = 0; h <= c->nhosts; h++) {
        size_t host = h == 0 ? SANDLET_HOST_DEFAULT : h - 1;
        const char *sin = in;
        if (host != SANDLET_HOST_DEFAULT) {
            const sandlet_host_conf *hc = &c->hosts[host];
            fputs("\nhost ", out);
            dump_value(out, hc->names[0]);
            fputs(" {\n", out);
            for (size_t j = 1; j < hc->nnames; j++)
                dump_line(out, in, "name", hc->names[j]);
            dump_line(out, in, "docroot", hc->docroot);
            sin = "        ";
        }
        for (size_t i = 0; i < c->nservlets; i++) {
            const sandlet_servlet_conf *sv = &c->servlets[i];
            if (sv->host != host)
                continue;
            char *path = NULL;
            if (asprintf(&path, "%s%s", sv->path, sv->prefix ? "*" : "") < 0)
                return -ENOMEM;
            fprintf(out, "\n%sservlet ", host == SANDLET_HOST_DEFAULT ? "" : in);
            dump_value(out, path);
            free(path);
            fputs(" {\n", out);
            dump_rows(out, CTX_SERVLET, (const char *)sv, sin);
            dump_line(out, sin, "sandbox", c->sandboxes[sv->sandbox].name);
            for (size_t j = 0; j < sv->nparams; j++) {
                fprintf(out, "%sparam ", sin);
                dump_value(out, sv->params[j].name);
                fputc(' ', out);
                dump_value(out, sv->params[j].value);
                fputs(";\n", out);
            }
            fprintf(out, "%s}\n", host == SANDLET_HOST_DEFAULT ? "" : in);
        }
        if (host != SANDLET_HOST_DEFAULT)
            fputs("}\n", out);
    }
    for (size_t i = 0; i < c->npages; i++) {
        fputs("\npages ", out);
        dump_value(out, c->pages[i].prefix);
        fputs(" {\n", out);
        dump_line(out, in, "sandbox", c->sandboxes[c->pages[i].sandbox].name);
        fputs("}\n", out);
    }
    return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
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
        free(sb->database_password_file);
        free(sb->user);
        free(sb->group);
        for (size_t j = 0; j < sb->nreadable; j++)
            free(sb->readable[j]);
        for (size_t j = 0; j < sb->nwritable; j++)
            free(sb->writable[j]);
        free(sb->readable);
        free(sb->writable);
        free(sb->readable_lines);
        free(sb->writable_lines);
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
    for (size_t i = 0; i < conf->npages; i++)
        free(conf->pages[i].prefix);
    free(conf->pages);
    for (size_t i = 0; i < conf->nhosts; i++) {
        for (size_t j = 0; j < conf->hosts[i].nnames; j++)
            free(conf->hosts[i].names[j]);
        free(conf->hosts[i].names);
        free(conf->hosts[i].name_lines);
        free(conf->hosts[i].docroot);
    }
    free(conf->hosts);
    free(conf->page_cache);
    free(conf->spool_dir);
    free(conf->page_compiler);
    free(conf->listens);
    free(conf->servlets);
    free(conf->file);
    free(conf->source);
    free(conf->user);
    free(conf->docroot);
    free(conf->access_log);
    free(conf->status_page);
    free(conf->error_log);
    free(conf->session_secret_file);
    free(conf->state_file);
    for (size_t i = 0; i < conf->nfiles; i++)
        free(conf->files[i]);
    free(conf->files);
    free(conf->spans);
    sodium_memzero(conf->session_secret, sizeof(conf->session_secret));
    sandlet_conf_forget_secrets(conf);
    free(conf->sandboxes);
    free(conf);
}

static void forget(char **s)
{
    if (*s)
        sodium_memzero(*s, strlen(*s));
    free(*s);
    *s = NULL;
}

void sandlet_conf_forget_secrets(sandlet_conf *conf)
{
    if (!conf)
        return;
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        forget(&conf->sandboxes[i].database);
        forget(&conf->sandboxes[i].database_password);
    }
}

/* strdup that keeps NULL; sets *bad when a copy fails. */
static char *copy_str(const char *s, bool *bad)
{
    if (!s)
        return NULL;
    char *d = dupn(s, strlen(s));
    if (!d)
        *bad = true;
    return d;
}

static char **copy_list(char *const *list, size_t n, bool *bad)
{
    if (n == 0)
        return NULL;
    char **d = calloc(n, sizeof(*d));
    if (!d) {
        *bad = true;
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        d[i] = copy_str(list[i], bad);
    return d;
}

/* Field by field, naming what the supervisor uses, so that a setting
 * added for the acceptor stays out of the privileged process unless
 * someone decides it belongs there. */
static void plan_sandbox(sandlet_sandbox_conf *d, const sandlet_sandbox_conf *s, bool *bad)
{
    *d = (sandlet_sandbox_conf){
        .workers = s->workers,
        .max_workers = s->max_workers,
        .pipeline = s->pipeline, /* the acceptor's ring size: a new box when it changes */
        .nreadable = s->readable ? s->nreadable : 0,
        .nwritable = s->writable ? s->nwritable : 0,
        .memory_mib = s->memory_mib,
        .open_files = s->open_files,
        .cpu_seconds = s->cpu_seconds,
        .max_file_size = s->max_file_size,
        .write_quota = s->write_quota,
        .spool_size = s->spool_size,
        .write_files = s->write_files,
        .ndatabase_ports = s->ndatabase_ports,
        .core_dumps = s->core_dumps,
        .syscalls = s->syscalls,
        .learn = s->learn,
        .sessions = s->sessions,
        .session_size = s->session_size,
        .session_timeout = s->session_timeout,
        .session_cookie_secure = s->session_cookie_secure,
        .pages = s->pages,
        .timeout = s->timeout, /* the database's statement timeout follows it */
        .line = s->line,
        .col = s->col,
        .database_line = s->database_line, /* for sandlet_conf_check_databases */
        .database_col = s->database_col,
        .database_dir_line = s->database_dir_line,
        .user_line = s->user_line,
        .group_line = s->group_line,
        .id = s->id,
    };
    memcpy(d->database_ports, s->database_ports, sizeof(d->database_ports));
    d->name = copy_str(s->name, bad);
    d->user = copy_str(s->user, bad);
    d->group = copy_str(s->group, bad);
    d->readable = copy_list(s->readable, d->nreadable, bad);
    d->writable = copy_list(s->writable, d->nwritable, bad);
    if (!d->readable)
        d->nreadable = 0;
    if (!d->writable)
        d->nwritable = 0;
    d->session_cookie = copy_str(s->session_cookie, bad);
    d->session_path = copy_str(s->session_path, bad);
    d->database = copy_str(s->database, bad);
    d->database_password = copy_str(s->database_password, bad);
}

static void plan_servlet(sandlet_servlet_conf *d, const sandlet_servlet_conf *s, bool *bad)
{
    *d = (sandlet_servlet_conf){.prefix = s->prefix,
                                .host = s->host,
                                .sandbox = s->sandbox,
                                .timeout = s->timeout,
                                .line = s->line};
    d->path = copy_str(s->path, bad);
    d->library = copy_str(s->library, bad);
    if (s->nparams == 0)
        return;
    d->params = calloc(s->nparams, sizeof(*d->params));
    if (!d->params) {
        *bad = true;
        return;
    }
    d->nparams = s->nparams;
    for (size_t i = 0; i < s->nparams; i++) {
        d->params[i].name = copy_str(s->params[i].name, bad);
        d->params[i].value = copy_str(s->params[i].value, bad);
    }
}

sandlet_conf *sandlet_conf_plan(const sandlet_conf *conf)
{
    if (!conf)
        return NULL;
    bool bad = false;
    sandlet_conf *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->file = copy_str(conf->file, &bad);
    p->source = copy_str(conf->source, &bad);
    /* The supervisor checks the database strings itself (prepare), and
     * names their files and lines as the parse would. */
    p->databases_unchecked = conf->databases_unchecked;
    p->files = copy_list(conf->files, conf->nfiles, &bad);
    p->nfiles = p->files ? conf->nfiles : 0;
    if (conf->nspans && (p->spans = calloc(conf->nspans, sizeof(*p->spans)))) {
        memcpy(p->spans, conf->spans, conf->nspans * sizeof(*p->spans));
        p->nspans = conf->nspans;
    } else if (conf->nspans) {
        bad = true;
    }
    memcpy(p->digest, conf->digest, sizeof(p->digest));
    p->user = copy_str(conf->user, &bad);
    p->user_line = conf->user_line;
    p->access_log = copy_str(conf->access_log, &bad);
    p->error_log = copy_str(conf->error_log, &bad);
    memcpy(p->session_secret, conf->session_secret, sizeof(p->session_secret));
    p->session_secret_set = conf->session_secret_set;
    /* Its name, which a reload compares (the secret's hash it keeps). */
    p->session_secret_file = copy_str(conf->session_secret_file, &bad);
    /* Pages: the supervisor compiles them (from the docroot, into the
     * cache) and checks every page the acceptor asks about against this
     * mapping itself. */
    p->docroot = copy_str(conf->docroot, &bad);
    p->page_cache = copy_str(conf->page_cache, &bad);
    p->spool_dir = copy_str(conf->spool_dir, &bad);
    p->page_compiler = copy_str(conf->page_compiler, &bad);
    p->page_compile_timeout = conf->page_compile_timeout;
    p->development = conf->development;
    p->state_file = copy_str(conf->state_file, &bad);
    /* The supervisor decides the workers' uids. */
    p->dynamic_uid_first = conf->dynamic_uid_first;
    p->dynamic_uid_last = conf->dynamic_uid_last;
    p->dynamic_uids_line = conf->dynamic_uids_line;
    /* The addresses, so that a reload binds only the new ones. */
    if (conf->nlistens) {
        p->listens = calloc(conf->nlistens, sizeof(*p->listens));
        if (p->listens) {
            p->nlistens = conf->nlistens;
            for (size_t i = 0; i < conf->nlistens; i++) {
                p->listens[i] = conf->listens[i];
                p->listens[i].host = copy_str(conf->listens[i].host, &bad);
            }
        } else {
            bad = true;
        }
    }
    if (conf->npages) {
        p->pages = calloc(conf->npages, sizeof(*p->pages));
        if (p->pages) {
            p->npages = conf->npages;
            for (size_t i = 0; i < conf->npages; i++) {
                p->pages[i] = conf->pages[i];
                p->pages[i].prefix = copy_str(conf->pages[i].prefix, &bad);
            }
        } else {
            bad = true;
        }
    }
    if (conf->nsandboxes) {
        p->sandboxes = calloc(conf->nsandboxes, sizeof(*p->sandboxes));
        if (p->sandboxes) {
            p->nsandboxes = conf->nsandboxes;
            for (size_t i = 0; i < conf->nsandboxes; i++)
                plan_sandbox(&p->sandboxes[i], &conf->sandboxes[i], &bad);
        } else {
            bad = true;
        }
    }
    if (conf->nservlets) {
        p->servlets = calloc(conf->nservlets, sizeof(*p->servlets));
        if (p->servlets) {
            p->nservlets = conf->nservlets;
            for (size_t i = 0; i < conf->nservlets; i++)
                plan_servlet(&p->servlets[i], &conf->servlets[i], &bad);
        } else {
            bad = true;
        }
    }
    if (bad) {
        sandlet_conf_free(p);
        return NULL;
    }
    return p;
}

/* ---- what a reload may change --------------------------------------------- */

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_list(char *const *a, size_t na, char *const *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (!same_str(a[i], b[i]))
            return false;
    return true;
}

/* The servlets of sandbox i of c, in order, one at a time: *k is where
 * the search goes on; NULL past the last. */
static const sandlet_servlet_conf *next_servlet(const sandlet_conf *c, size_t i, size_t *k)
{
    while (*k < c->nservlets) {
        const sandlet_servlet_conf *s = &c->servlets[(*k)++];
        if (s->sandbox == i)
            return s;
    }
    return NULL;
}

static bool same_servlet(const sandlet_servlet_conf *x, const sandlet_servlet_conf *y)
{
    if (!same_str(x->path, y->path) || x->prefix != y->prefix ||
        !same_str(x->library, y->library) || x->timeout != y->timeout || x->nparams != y->nparams)
        return false;
    for (size_t i = 0; i < x->nparams; i++)
        if (!same_str(x->params[i].name, y->params[i].name) ||
            !same_str(x->params[i].value, y->params[i].value))
            return false;
    return true;
}

bool sandlet_conf_sandbox_same(const sandlet_conf *a, size_t i, const sandlet_conf *b, size_t j)
{
    const sandlet_sandbox_conf *x = &a->sandboxes[i], *y = &b->sandboxes[j];
    if (!same_str(x->name, y->name) || x->workers != y->workers || x->pipeline != y->pipeline ||
        x->max_workers != y->max_workers || !same_str(x->user, y->user) ||
        !same_str(x->group, y->group) ||
        !same_list(x->readable, x->nreadable, y->readable, y->nreadable) ||
        !same_list(x->writable, x->nwritable, y->writable, y->nwritable) ||
        x->memory_mib != y->memory_mib || x->open_files != y->open_files ||
        x->cpu_seconds != y->cpu_seconds || x->max_file_size != y->max_file_size ||
        x->write_quota != y->write_quota || x->write_files != y->write_files ||
        x->spool_size != y->spool_size || x->ndatabase_ports != y->ndatabase_ports ||
        memcmp(x->database_ports, y->database_ports, sizeof(x->database_ports)) != 0 ||
        !same_str(x->database, y->database) ||
        !same_str(x->database_password, y->database_password) || x->core_dumps != y->core_dumps ||
        x->syscalls != y->syscalls || x->learn != y->learn || x->sessions != y->sessions ||
        x->session_size != y->session_size || x->session_timeout != y->session_timeout ||
        x->session_cookie_secure != y->session_cookie_secure ||
        !same_str(x->session_path, y->session_path) || x->pages != y->pages ||
        x->timeout != y->timeout)
        return false;
    size_t ka = 0, kb = 0;
    for (;;) {
        const sandlet_servlet_conf *sa = next_servlet(a, i, &ka), *sb = next_servlet(b, j, &kb);
        if (!sa || !sb)
            return !sa && !sb;
        if (!same_servlet(sa, sb))
            return false;
    }
}

const char *sandlet_conf_restart_needed(const sandlet_conf *a, const sandlet_conf *b)
{
    if (!same_str(a->user, b->user))
        return "user";
    if (!same_str(a->docroot, b->docroot))
        return "docroot";
    if (!same_str(a->error_log, b->error_log))
        return "error-log";
    if (!same_str(a->access_log, b->access_log))
        return "access-log";
    if (!same_str(a->session_secret_file, b->session_secret_file))
        return "session-secret-file";
    if (!same_str(a->page_cache, b->page_cache))
        return "page-cache";
    if (!same_str(a->page_compiler, b->page_compiler))
        return "page-compiler";
    if (a->page_compile_timeout != b->page_compile_timeout)
        return "page-compile-timeout";
    if (a->development != b->development)
        return "development";
    /* Running workers keep the uids they were started with. */
    if (dynamic_first(a) != dynamic_first(b) || dynamic_last(a) != dynamic_last(b))
        return "dynamic-uids";
    /* The state file the supervisor writes: its default is named after
     * the file, so the paths in effect are what must agree. */
    char sa[4096], sb[4096];
    if (sandlet_state_path(a, sa, sizeof(sa)) < 0 || sandlet_state_path(b, sb, sizeof(sb)) < 0 ||
        strcmp(sa, sb) != 0)
        return "state-file";
    if (a->npages != b->npages)
        return "pages";
    for (size_t i = 0; i < a->npages; i++)
        if (!same_str(a->pages[i].prefix, b->pages[i].prefix) ||
            !same_str(a->sandboxes[a->pages[i].sandbox].name,
                      b->sandboxes[b->pages[i].sandbox].name))
            return "pages";
    return NULL;
}

bool sandlet_conf_listen_same(const sandlet_listen_conf *a, const sandlet_listen_conf *b)
{
    return a->port == b->port && same_str(a->host, b->host);
}

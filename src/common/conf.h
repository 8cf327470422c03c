/*
 * conf.h - sandlet.conf: the parsed configuration and its parser.
 *
 * The format (documented in README.md until sandlet.conf.5 exists):
 *
 *   # comment to end of line
 *   listen 127.0.0.1:8080;          # repeatable; IPv6 as [::1]:8080
 *   user sandlet;                   # drop to this user when started as root
 *   docroot /var/www/sandlet;
 *   access-log /var/log/sandlet/access.log;
 *   error-log /var/log/sandlet/error.log;
 *   status-page /sandlet-status;    # loopback clients only; ?format=prometheus
 *   header-timeout 10000;           # ms for a request head, then 408
 *   body-timeout 30000;             # ms between body reads, then 408
 *   keepalive-timeout 15000;        # ms an idle connection is kept
 *   max-connections 10000;          # accepting pauses at this many clients
 *   session-secret-file /etc/sandlet/session.key;  # stable session keys
 *   include GLOB;                   # drop-in files (conf.d, .conf), sorted, top level
 *   state-file /run/sandlet/x.state; # pid, readiness, reload verdicts
 *   dynamic-uids 1879048192-1879113727; # uids of sandboxes without a user
 *   sandbox shop {
 *       workers 4;                  # 1..256, default 2
 *       max-workers 8;              # grow up to 8 under load; default = workers
 *       worker-idle-timeout 10000;  # ms an extra worker may idle; default 10000
 *       queue 256;                  # waiting requests, 0..65535, default 1024
 *       queue-timeout 5000;         # ms a request may wait, then 503; default 10000
 *       timeout 30000;              # ms a request may run, then kill + 504;
 *                                   # default 30000, "off" for none
 *       max-requests 10000;         # recycle a worker after N requests
 *       user www; group www;        # confinement: uid/gid,
 *       readable DIR; writable DIR; # Landlock paths, limits (memory MIB,
 *       open-files N; cpu-seconds N; core-dumps on|off), seccomp groups
 *       syscalls files|database;    # (repeatable) and learning mode
 *       syscall-violations kill|log;
 *       memory 512;                 # MiB of address space (default 512) or unlimited
 *       open-files 1024;            # default 1024
 *       max-file-size 64m;          # RLIMIT_FSIZE (default 64m) or unlimited
 *       write-quota 1g;             # bytes in the writable dirs (default 1g) or unlimited
 *       write-files 100000;         # entries in them (default 100000) or unlimited
 *       database-port 5432;         # TCP ports the database group may reach (repeatable)
 *       database "host=/run/postgresql dbname=shop"; # libpq conninfo, no password;
 *                                   # brings syscalls database and its ports
 *       database-password-file /etc/sandlet/shop.pw; # mode 600, read at parse time
 *       sessions memory;            # memory (default), database or none
 *       session-size 4m;            # bytes of the shared store (k/m/g)
 *       session-timeout 1800;       # seconds a session may stay idle
 *       session-cookie-secure off;  # on: SLSESSION_<sandbox> only over HTTPS
 *   }
 *   pages /admin/ {                 # .csp files under this docroot folder are pages
 *       sandbox admin;              # that run here (default: "pages", on demand)
 *   }
 *   page-cache /var/cache/sandlet;  # compiled pages, one folder per sandbox
 *   page-compiler cc;               # or off: serve only precompiled pages
 *   page-compile-timeout 60000;     # ms one compile may take
 *   development on;                 # compile errors shown in the 500 page
 *   host shop.example.org {         # requests whose Host names it (sandlet.conf(5), HOSTS)
 *       name www.shop.example.org;  # more names; "*.example.org" matches subdomains
 *       docroot /srv/shop;          # its static files (none: 404)
 *       servlet /cart { library cart.so; sandbox shop; }  # its routes, no others
 *   }
 *   unknown-hosts serve;            # or refuse: 421 for a Host no host block names
 *   servlet /hello {                # exact path; "/app/" + "*" matches a prefix
 *       library hello.so;           # relative to the config file's folder
 *       sandbox shop;               # default: "default" (created on demand)
 *       param greeting "Hello";     # passed to init, repeatable
 *       timeout 5000;               # overrides the sandbox's
 *   }
 *
 * Tokens are words or double-quoted strings (with \" and \\ escapes).
 * Every error message has the form "FILE:LINE:COL: what was wrong and what
 * was expected".  This file must never touch the network or processes: it
 * only turns text into a sandlet_conf.
 */
#ifndef SANDLET_CONF_H
#define SANDLET_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SANDLET_DEFAULT_LISTEN        "127.0.0.1:8080"
#define SANDLET_DEFAULT_WORKERS       2
#define SANDLET_MAX_WORKERS           256
#define SANDLET_DEFAULT_QUEUE         1024
#define SANDLET_DEFAULT_QUEUE_TIMEOUT 10000
/* How long a worker above `workers` (max-workers) may sit idle before it
 * is retired: long enough that a pool under steady or bursty load keeps
 * its extra workers between bursts (a worker start costs an exec, the
 * servlets' init and a confinement, tens of milliseconds), short enough
 * that their memory goes back soon after the load does. */
#define SANDLET_DEFAULT_WORKER_IDLE_TIMEOUT 10000
/* How many requests the acceptor may write to one worker's channel
 * before the worker answered the first ("pipeline"): the batch that lets
 * a worker serve request after request without sleeping in between.
 * They wait in the kernel's socket buffer, never in the worker's memory
 * (worker.c reads one frame at a time).  At most half the claim words
 * (claim.h), so that each request in flight has one of its own.  The
 * default is measured (make bench, hello on one core): 64 served 10% more
 * than 16 at 64 connections and 15% more at 256, where with 16 most
 * requests waited in the sandbox's queue; fast requests beside slow ones
 * kept a p99 under 4 ms (on_behind moves them). */
#define SANDLET_MAX_PIPELINE     256
#define SANDLET_DEFAULT_PIPELINE 64
/* ms a request may run when its sandbox sets no "timeout": long enough
 * for real pages, short enough that a spinning servlet frees its worker. */
#define SANDLET_DEFAULT_TIMEOUT           30000
#define SANDLET_DEFAULT_SANDBOX           "default"
#define SANDLET_MAX_PARAMS                1024
#define SANDLET_DEFAULT_HEADER_TIMEOUT    10000
#define SANDLET_DEFAULT_BODY_TIMEOUT      30000
#define SANDLET_DEFAULT_KEEPALIVE_TIMEOUT 15000
/* A client that takes none of its pending output for this long is cut. */
#define SANDLET_DEFAULT_SEND_TIMEOUT    60000
#define SANDLET_DEFAULT_MAX_CONNECTIONS 10000
/* Request size limits: generous for browsers, small enough that one
 * client cannot make the acceptor hold much. */
#define SANDLET_DEFAULT_MAX_HEADER_SIZE   ((size_t)64 * 1024)
#define SANDLET_DEFAULT_MAX_TARGET_LENGTH ((size_t)8 * 1024)
#define SANDLET_DEFAULT_MAX_BODY_SIZE     ((size_t)16 * 1024 * 1024)
/* Ceilings: header offsets are 32-bit and bodies are buffered whole in
 * the acceptor before a worker sees them. */
#define SANDLET_MAX_HEADER_SIZE_LIMIT ((size_t)1024 * 1024)
#define SANDLET_MAX_BODY_SIZE_LIMIT   ((size_t)1024 * 1024 * 1024)
/* Memory session store of a sandbox: room for a few sessions at least, at
 * most what a worker's address space can map beside its own needs. */
#define SANDLET_DEFAULT_SESSION_SIZE    ((size_t)4 * 1024 * 1024)
#define SANDLET_MIN_SESSION_SIZE        ((size_t)16 * 1024)
#define SANDLET_MAX_SESSION_SIZE        ((size_t)1024 * 1024 * 1024)
#define SANDLET_DEFAULT_SESSION_TIMEOUT 1800
/* Bytes a session-secret-file holds: 256 random bits at least. */
#define SANDLET_SESSION_SECRET_MIN 32
#define SANDLET_SESSION_SECRET_MAX 4096
/* Worker limits that apply without a line saying otherwise: room for
 * libc, libsandlet, a few servlets, the session store and their heaps,
 * but not for one servlet to starve the host. */
#define SANDLET_DEFAULT_MEMORY_MIB    512
#define SANDLET_DEFAULT_OPEN_FILES    1024
#define SANDLET_DEFAULT_MAX_FILE_SIZE ((unsigned long long)64 * 1024 * 1024)
#define SANDLET_DEFAULT_WRITE_QUOTA   ((unsigned long long)1024 * 1024 * 1024)
#define SANDLET_DEFAULT_SPOOL_SIZE    ((unsigned long long)1024 * 1024 * 1024)
#define SANDLET_DEFAULT_WRITE_FILES   100000
/* Address space a worker needs besides its session store. */
#define SANDLET_MEMORY_HEADROOM ((unsigned long long)32 * 1024 * 1024)
/* C Server Pages (sandlet-csp(5)): the sandbox of "pages" blocks without a
 * "sandbox" line, where compiled pages are kept, how long one compile may
 * take, and how many pages one sandbox may hold. */
#define SANDLET_DEFAULT_PAGES_SANDBOX   "pages"
#define SANDLET_DEFAULT_PAGE_COMPILER   "cc"
#define SANDLET_DEFAULT_COMPILE_TIMEOUT 60000
#define SANDLET_MAX_PAGES               1024
#ifndef SANDLET_LOCALSTATEDIR
#define SANDLET_LOCALSTATEDIR "/var"
#endif
#define SANDLET_DEFAULT_PAGE_CACHE SANDLET_LOCALSTATEDIR "/cache/sandlet"
/* Large multipart file parts in flight: on disk, never tmpfs (/run). */
#define SANDLET_DEFAULT_SPOOL_DIR SANDLET_LOCALSTATEDIR "/spool/sandlet"
/* TCP ports a sandbox's database group may connect to. */
#define SANDLET_MAX_DATABASE_PORTS 16
/* A database's port when its conninfo names a TCP host but no port. */
#define SANDLET_DEFAULT_DATABASE_PORT 5432
/* The uids of an acceptor and sandboxes without "user" ("dynamic-uids"):
 * 0x70000000-0x7000FFFF, past every range systemd documents an owner for
 * (users up to 60000, DynamicUser= 61184-65519, nspawn containers
 * 524288-1879048191) and below 2^31, which too many programs read as
 * negative; /etc/subuid's ranges start at 100000, 65536 per user, and
 * would need some 28000 users to reach it. */
#define SANDLET_DEFAULT_DYNAMIC_UID_FIRST 1879048192u
#define SANDLET_DEFAULT_DYNAMIC_UID_LAST  1879113727u
/* Bytes a database-password-file may hold (one line, the password). */
#define SANDLET_DATABASE_PASSWORD_MAX 1024

typedef struct sandlet_param {
    char *name;
    char *value;
} sandlet_param;

typedef struct sandlet_listen_conf {
    char *host;    /* numeric address, no brackets: "127.0.0.1", "::1" */
    unsigned port; /* 0..65535; 0 asks the kernel for a free port */
    int line;
} sandlet_listen_conf;

/* Opt-in system-call groups of a sandbox's seccomp filter. */
#define SANDLET_SYSCALLS_FILES    1u
#define SANDLET_SYSCALLS_DATABASE 2u

/* Where a sandbox keeps sessions ("sessions memory|database|none"). */
#define SANDLET_SESSIONS_NONE     0u
#define SANDLET_SESSIONS_MEMORY   1u
#define SANDLET_SESSIONS_DATABASE 2u

typedef struct sandlet_sandbox_conf {
    char *name;
    unsigned workers;
    /* workers..max_workers: slots started only when the acceptor asks
     * (SANDLET_CTL_GROW) and retired when idle; == workers when unset. */
    unsigned max_workers;
    unsigned worker_idle_timeout; /* ms an extra worker may idle, then retired */
    unsigned queue;
    /* Confinement: NULL/0 fields keep the default. */
    char *user;      /* default: the daemon's user */
    char *group;     /* default: the user's primary group */
    char **readable; /* Landlock read-only paths besides the libraries */
    size_t nreadable;
    char **writable; /* Landlock read-write directories */
    size_t nwritable;
    /* The line of each readable and writable path, for sandletd -t's
     * messages (NULL in the supervisor's plan). */
    int *readable_lines, *writable_lines;
    unsigned memory_mib;              /* address-space limit; 0: unlimited */
    unsigned open_files;              /* RLIMIT_NOFILE; 0: unlimited (the daemon's) */
    unsigned cpu_seconds;             /* RLIMIT_CPU */
    unsigned long long max_file_size; /* RLIMIT_FSIZE in bytes; 0: unlimited */
    unsigned long long write_quota;   /* bytes in the writable dirs; 0: unlimited */
    /* bytes of streamed multipart bodies its workers' spool files may
     * hold at once (the acceptor copies them there); 0: unlimited */
    unsigned long long spool_size;
    unsigned write_files; /* entries in the writable dirs; 0: unlimited */
    unsigned short database_ports[SANDLET_MAX_DATABASE_PORTS]; /* Landlock connect */
    size_t ndatabase_ports;
    /* database "CONNINFO": the libpq connection string (never a password:
     * that comes from database-password-file, read when the file is
     * parsed).  A sandbox with a database gets the database system-call
     * group and its TCP ports in database_ports once its block closes.
     * Both strings reach only the supervisor and, in INIT, the workers. */
    char *database;
    /* Where the string (line, col) and its directive are, in lines of the
     * parsed text; with line and col (the "sandbox" word), what
     * sandlet_conf_check_databases' messages name. */
    int database_line, database_col, database_dir_line;
    char *database_password_file;
    char *database_password; /* NULL: none; zeroed when freed */
    bool core_dumps;
    bool shared_user;  /* "shared-user on": may name another sandbox's user */
    unsigned syscalls; /* SANDLET_SYSCALLS_* */
    bool learn;        /* "syscall-violations log": log, do not kill */
    /* Guardian. */
    unsigned timeout;       /* ms a request may run; 0: none */
    unsigned max_requests;  /* recycle a worker after this many; 0: never */
    unsigned queue_timeout; /* ms a request may wait for a worker */
    unsigned pipeline;      /* requests written to one worker at most */
    /* Sessions: the store the supervisor creates for the sandbox. */
    unsigned sessions;          /* SANDLET_SESSIONS_* */
    size_t session_size;        /* bytes of the shared store */
    unsigned session_timeout;   /* seconds a session may stay idle */
    bool session_cookie_secure; /* Secure on the session cookie */
    /* Derived once the whole file is read (sandlet.conf(5), SESSIONS):
     * the sandbox's own session cookie name, SLSESSION_<name>, distinct
     * from every other sandbox's, and its Path, the longest whole-segment
     * prefix its servlet routes share ("/" when they share none). */
    char *session_cookie;
    char *session_path;
    bool pages; /* a "pages" block maps docroot folders to this sandbox */
    /* Names the sandbox in the acceptor's and supervisor's messages: its
     * index when sandletd starts; a sandbox that a reload adds or changes
     * gets a number never used before, one it leaves unchanged keeps its
     * own (the supervisor decides, and tells the acceptor). */
    uint32_t id;
    int line, col;             /* of its "sandbox" word */
    int user_line, group_line; /* of its "user" and "group" lines; 0: none */
} sandlet_sandbox_conf;

/* The servlets, pages and docroot outside every host block: what a
 * request whose Host no host block names is served by (unless
 * unknown-hosts refuse), and all there is in a file without host blocks. */
#define SANDLET_HOST_DEFAULT SIZE_MAX
/* Host names: a DNS name is at most 253 bytes; "*." may precede it. */
#define SANDLET_HOST_NAME_MAX 255
/* Host blocks and names in one file: a virtual-hosting farm is several
 * sandletd, not one file with thousands of origins. */
#define SANDLET_MAX_HOSTS      1024
#define SANDLET_MAX_HOST_NAMES 4096

/* What a request whose Host no host block names gets ("unknown-hosts"). */
#define SANDLET_UNKNOWN_HOSTS_SERVE  0u /* the default host */
#define SANDLET_UNKNOWN_HOSTS_REFUSE 1u /* 421 Misdirected Request */

/* host NAME { name NAME; docroot DIR; servlet PATH { ... } }: an origin of
 * its own.  names are lowercase, without a trailing dot; a wildcard
 * "*.example.org" is kept as is and matches any name ending in
 * ".example.org" (not example.org itself). */
typedef struct sandlet_host_conf {
    char **names;
    int *name_lines;
    size_t nnames;
    char *docroot; /* NULL: none, files answer 404 */
    int line;
    int docroot_line;
} sandlet_host_conf;

typedef struct sandlet_servlet_conf {
    char *path;     /* without the trailing "*" for prefix routes */
    size_t host;    /* index into sandlet_conf.hosts, or SANDLET_HOST_DEFAULT */
    bool prefix;    /* configured with a trailing "/" "*" */
    char *library;  /* absolute when loaded with sandlet_conf_load */
    size_t sandbox; /* index into sandlet_conf.sandboxes */
    sandlet_param *params;
    size_t nparams;
    unsigned timeout;     /* ms; 0: the sandbox's */
    size_t max_body_size; /* bytes; the global limit unless set here */
    int line;
    int library_line; /* of its "library" line, for sandletd -t's messages */
} sandlet_servlet_conf;

/* pages PREFIX { sandbox NAME; }: the .csp files under the docroot folder
 * PREFIX ("/" or "/dir/", always with both slashes) run in that sandbox. */
typedef struct sandlet_pages_conf {
    char *prefix;
    size_t sandbox; /* index into sandlet_conf.sandboxes */
    int line;
} sandlet_pages_conf;

/* Where lines of a configuration with "include" come from: the parser
 * reads the files as one text (sandlet_conf_load expands each include in
 * place), and a span maps the text's lines from `line` on to the lines
 * from `local` on of files[file]. */
typedef struct sandlet_conf_span {
    int line;
    unsigned file;
    int local;
} sandlet_conf_span;

typedef struct sandlet_conf {
    char *file; /* as given, for messages */
    /* sandlet_conf_load: the file's absolute path (what a reload reads
     * again, whatever the working directory) and a BLAKE2b of its bytes
     * (whether a reload found it changed). */
    char *source;
    unsigned char digest[32];
    /* A _no_pq parse kept database strings that sandlet_conf_check_databases
     * has not checked yet: their ports are not in database_ports. */
    bool databases_unchecked;
    char *user; /* NULL: stay the user we were started as */
    int user_line;
    /* The lines of docroot, access-log and error-log (0: none), so that
     * sandletd -t names the line of a folder that is missing. */
    int docroot_line, access_log_line, error_log_line, spool_dir_line;
    char *docroot;
    char *access_log;           /* Combined Log Format; NULL: none */
    char *error_log;            /* NULL: standard error */
    char *status_page;          /* loopback clients only; NULL: none */
    unsigned header_timeout;    /* ms for a whole request head (slowloris) */
    unsigned body_timeout;      /* ms between two reads of a body */
    unsigned keepalive_timeout; /* ms an idle keep-alive connection stays */
    unsigned send_timeout;      /* ms a client may leave pending output unread */
    unsigned max_connections;   /* accepting pauses at this many clients */
    size_t max_header_size;     /* request line and headers (431) */
    size_t max_target_length;   /* request target (414) */
    size_t max_body_size;       /* default for servlets and files (413) */
    sandlet_listen_conf *listens;
    size_t nlistens;
    sandlet_sandbox_conf *sandboxes;
    size_t nsandboxes;
    sandlet_servlet_conf *servlets;
    size_t nservlets;
    sandlet_host_conf *hosts;
    size_t nhosts;
    unsigned unknown_hosts; /* SANDLET_UNKNOWN_HOSTS_* */
    /* session-secret-file: read and checked when the file is parsed,
     * kept only as a hash of its contents (SANDLET_SESSION_SECRET_LEN). */
    char *session_secret_file;
    unsigned char session_secret[32];
    bool session_secret_set;
    /* C Server Pages. */
    sandlet_pages_conf *pages;
    size_t npages;
    char *page_cache;              /* the cache root; one folder per sandbox */
    char *spool_dir;               /* upload spool root; one folder per sandbox */
    char *page_compiler;           /* NULL: "page-compiler off" */
    int page_compiler_line;        /* of its line (0: the default), for -t */
    unsigned page_compile_timeout; /* ms of wall clock one compile may take */
    bool development;              /* compile errors go into the 500 page */
    /* The state file (state.h): NULL for the default, one per file name. */
    char *state_file;
    /* dynamic-uids FIRST-LAST: the acceptor's uid without "user" (FIRST)
     * and the sandboxes' without one; 0 and 0 for the default range
     * (identity.h). */
    uint32_t dynamic_uid_first, dynamic_uid_last;
    int dynamic_uids_line;
    /* With includes: every file read (files[0] the main one) and the
     * spans of the text they make; nspans 0 without any. */
    char **files;
    size_t nfiles;
    sandlet_conf_span *spans;
    size_t nspans;
} sandlet_conf;

/* Parses text (len bytes, need not be NUL-terminated).  name is used in
 * messages; relative library paths are resolved against basedir.  On
 * failure returns a negative errno value and writes one line to err. */
int sandlet_conf_parse(const char *text, size_t len, const char *name, const char *basedir,
                       sandlet_conf **out, char *err, size_t errlen);
/* As sandlet_conf_parse, for the acceptor at a reload: secret files
 * (session-secret-file, database-password-file) are named but not read,
 * since the acceptor may not read them; the supervisor has.  Nor are the
 * database strings checked: libpq is not loaded (as sandlet_conf_load_no_pq). */
int sandlet_conf_parse_public(const char *text, size_t len, const char *name, const char *basedir,
                              sandlet_conf **out, char *err, size_t errlen);
/* Reads and parses a file; relative paths resolve against its folder. */
int sandlet_conf_load(const char *path, sandlet_conf **out, char *err, size_t errlen);
/* As sandlet_conf_load, without loading libpq: each "database" string is
 * kept with its place, unchecked, and no database port is derived from
 * it.  For the process that becomes the acceptor, which faces the network
 * and must not map libpq and its twenty libraries for its whole life:
 * sandlet_conf_check_databases does the rest in a process that may. */
int sandlet_conf_load_no_pq(const char *path, sandlet_conf **out, char *err, size_t errlen);
/* What a full parse does with the database strings that a _no_pq parse
 * (or the plan of one) kept: checks each with libpq's parser (no
 * password), adds its TCP ports to database_ports, and refuses two
 * sandboxes that may log in as one role to the database one keeps its
 * sessions in; the messages are the full parse's, with FILE:LINE:COL.
 * Loads libpq.  0 (at once when nothing is unchecked), or -EINVAL or
 * -ENOMEM with one line in err. */
int sandlet_conf_check_databases(sandlet_conf *conf, char *err, size_t errlen);
/* The bytes sandlet_conf_load_text parsed and the folder relative paths
 * resolved against: what the acceptor parses again at a reload. */
typedef struct sandlet_conf_text {
    char *text;
    size_t len;
    char *basedir;
} sandlet_conf_text;
/* As sandlet_conf_load; on success *kept (when not NULL) gets the text and
 * folder, for the caller to free. */
int sandlet_conf_load_text(const char *path, sandlet_conf **out, sandlet_conf_text *kept, char *err,
                           size_t errlen);
void sandlet_conf_free(sandlet_conf *conf);
/* Writes conf as a configuration file that reads back to the same
 * configuration: includes expanded, defaults written out, paths
 * absolute ("sandletd -T").  Returns 0 or a negative errno. */
int sandlet_conf_dump(const sandlet_conf *conf, FILE *out);
/* The file and its line (*local) that line of conf's text comes from:
 * conf->file and line itself without includes. */
const char *sandlet_conf_where(const sandlet_conf *conf, int line, int *local);
/* Zeroes and drops what only the supervisor and workers may hold (the
 * databases' connection strings and passwords): the acceptor calls it
 * once the supervisor has its plan. */
void sandlet_conf_forget_secrets(sandlet_conf *conf);

/* What the supervisor needs to start workers, as a separately allocated
 * copy: per sandbox its name, workers, identity, limits, Landlock paths,
 * system-call groups, database ports, write quotas, session settings and
 * database; per servlet its path, library, params and sandbox; the
 * request timeouts of both (workers' statement timeouts follow them); the file's name, the
 * acceptor's user, the log paths it reopens and the session secret; and
 * for pages the docroot, the pages mappings, the cache, the compiler,
 * its timeout and development mode.
 * The listen addresses too, so that a reload binds only new ones.
 * Everything only the acceptor uses (status
 * page, client timeouts and size limits, queues and queue timeouts) is
 * zero or NULL in it.  Free with sandlet_conf_free; NULL when out of
 * memory. */
sandlet_conf *sandlet_conf_plan(const sandlet_conf *conf);

/* Reload (SIGHUP).  True when sandbox i of a and sandbox j of b would
 * start the same workers: name, count, identity, confinement, sessions,
 * database and the servlets routed to it, in order.  Only then does a
 * reload keep a sandbox's workers. */
bool sandlet_conf_sandbox_same(const sandlet_conf *a, size_t i, const sandlet_conf *b, size_t j);
/* The first directive whose change from a to b a reload cannot apply
 * (the acceptor's user, the docroot, the logs, the session secret's file,
 * the pages settings), or NULL. */
const char *sandlet_conf_restart_needed(const sandlet_conf *a, const sandlet_conf *b);
bool sandlet_conf_listen_same(const sandlet_listen_conf *a, const sandlet_listen_conf *b);

/* The pages mapping that serves the docroot-relative page rel ("a/b.csp",
 * no leading '/'): the longest prefix that contains "/" rel; NULL when no
 * "pages" block covers it. */
const sandlet_pages_conf *sandlet_conf_pages_for(const sandlet_conf *conf, const char *rel);

/* (route.c) The servlet of the default host serving path (the request
 * path before '?'), or NULL.  Exact routes win over prefix routes; the
 * longest prefix wins. */
const sandlet_servlet_conf *sandlet_conf_route(const sandlet_conf *conf, const char *path,
                                               size_t len);
/* (route.c) As sandlet_conf_route, among the servlets of host (an index
 * into conf->hosts, or SANDLET_HOST_DEFAULT) only. */
const sandlet_servlet_conf *sandlet_conf_route_host(const sandlet_conf *conf, size_t host,
                                                    const char *path, size_t len);
/* (route.c) The host block serving a request whose Host header is host
 * (len bytes, port and all; NULL when the request has none): an exact
 * name first, then the longest matching wildcard, else
 * SANDLET_HOST_DEFAULT, or SIZE_MAX - 1 (SANDLET_HOST_MISDIRECTED) when
 * unknown-hosts is refuse. */
#define SANDLET_HOST_MISDIRECTED (SIZE_MAX - 1)
size_t sandlet_conf_host(const sandlet_conf *conf, const char *host, size_t len);

/* Whether a libpq connection string may reach its server through a unix
 * socket (no host or an empty one, a host starting with '/' or '@', a
 * service file's choice, or a string libpq cannot parse), so that the
 * sandbox's workers must keep AF_UNIX sockets to reconnect. */
bool sandlet_conf_database_unix(const char *conninfo);

#endif /* SANDLET_CONF_H */

/*
 * test_errors.c - the configuration mistakes a newcomer or an operator
 * makes (issue 19), one row each: the file, what "sandletd -t -c FILE"
 * must exit with, the FILE:LINE: (and column, where the parser knows it)
 * its standard error must name, and a fragment of the fix it must say.
 * A message that loses its location or its fix fails here, so the table
 * is what keeps every answer useful; add a row for each new mistake seen.
 *
 * Rows name files the test makes in a temporary folder (@D@): a docroot,
 * secret and password files with wrong sizes or modes, a shared object
 * without a servlet descriptor built with the compiler, and a port held
 * by the test itself (@BUSY@).
 *
 * Some mistakes only show when a servlet runs: a file its sandbox's
 * 'readable' and 'writable' lines do not allow, which Landlock refuses
 * with EACCES (issue 31).  Their rows (served_cases) start the daemon on the
 * file, make the row's request, and want the line in its error log: the
 * supervisor's report of the kernel's Landlock record.  They run only
 * where the kernel makes such records (Landlock ABI 7, Linux 6.15, with
 * its audit on) and the daemon reads them (root, confinement on); each
 * says SKIP with the reason elsewhere, e.g. on Debian 12's 6.1 kernel.
 * The kernel's audit is the host's setting: with it off, the rows turn it
 * on for their run only when SANDLET_TEST_AUDIT=on says they may.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/landlock.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* What a row needs beyond the file itself. */
#define NEED_ROOT 1u /* users and groups are only looked up by a root start */
/* A start ("sandletd -c FILE") must refuse the file too, with the same
 * line: for what a start checks apart from -t's parse (the database
 * strings, in a child that exits, so that the acceptor never loads libpq). */
#define AT_START 2u

typedef struct err_case {
    const char *name;
    /* The file; @D@ is the temporary folder, @PROBE@ a built servlet,
     * @BUSY@ a port the test holds. */
    const char *conf;
    int status;        /* 1: refused; 0: only a warning */
    const char *where; /* after "FILE:": "LINE:" or "LINE:COL:" */
    const char *fix;   /* a fragment of the advice */
    unsigned needs;
} err_case;

static const err_case cases[] = {
    /* Misspelled directives, at each level, answered with the right one
     * and the whole list (it was cut at 128 bytes). */
    {"misspelled top-level directive", "servelt /x {\n}\n", 1, "1:1:", "did you mean 'servlet'?",
     0},
    {"unknown directive lists them all", "\nxyzzy 1;\n", 1, "2:1:",
     "development, unknown-hosts, state-file, dynamic-uids, sandbox, servlet, pages or host)", 0},
    {"misspelled in sandbox block", "sandbox a {\n  wrokers 2;\n}\n", 1,
     "2:3:", "did you mean 'workers'?", 0},
    {"misspelled in servlet block", "servlet /x {\n  libary \"x.so\";\n}\n", 1,
     "2:3:", "did you mean 'library'?", 0},
    {"misspelled in pages block", "docroot \"@D@/www\";\npages / {\n  sandboxx a;\n}\n", 1,
     "3:3:", "did you mean 'sandbox'?", 0},
    {"sandbox directive at top level", "user nobody;\nworkers 4;\n", 1,
     "2:1:", "'workers' is not allowed at top level; it belongs in a sandbox block", 0},
    {"sandbox directive in a servlet block",
     "servlet /x {\n  library \"@PROBE@\";\n  user nobody;\n}\n", 1,
     "3:3:", "it belongs at top level or in a sandbox block", 0},
    {"nginx's location", "location / {\n}\n", 1,
     "1:1:", "sandlet.conf has no 'location': a URL path is 'servlet /PATH { library FILE; }'", 0},
    {"nginx's server block", "server {\n  server_name a.test;\n}\n", 1,
     "1:1:", "a name-based virtual server is 'host NAME { docroot DIR; servlet PATH { ... } }'", 0},
    {"a port in a host name", "host shop.example.org:8080 {\n}\n", 1,
     "1:6:", "no port, no other '*', no trailing '.'", 0},
    {"a host's docroot missing", "host a.test {\n  docroot \"@D@/nothing\";\n}\n", 1,
     "2:", "or fix host a.test's 'docroot'", 0},
    {"servlets no request reaches",
     "unknown-hosts refuse;\nservlet /x { library \"@PROBE@\"; }\n"
     "host a.test { }\n",
     1, "2:1:", "(expected it inside a 'host NAME { ... }' block, or 'unknown-hosts serve;')", 0},
    {"include of a file that is missing", "\ninclude \"@D@/sites/nope.conf\";\n", 1,
     "2:1:", "nope.conf: no such file (expected an existing file, or a pattern", 0},
    {"include inside a block", "sandbox a {\n  include \"sites/*.conf\";\n}\n", 1,
     "2:3:", "'include' inside a block (expected it at top level", 0},
    {"block inside a block", "sandbox a {\n  workers 1;\n  sandbox b {\n  }\n}\n", 1,
     "3:3:", "is a '}' missing?", 0},
    /* Syntax. */
    {"'=' between directive and value", "listen = 127.0.0.1:8091;\n", 1,
     "1:8:", "has no '=' between a directive and its value (expected 'listen ADDR:PORT;')", 0},
    {"'#' cuts a value", "servlet /x {\n  library \"@PROBE@\";\n  param color #fff;\n}\n", 1,
     "3:15:", "'#' starts a comment: put a value that holds one in quotes (\"#fff\")", 0},
    {"missing ';' before the next line", "listen 127.0.0.1:8091\nuser nobody;\n", 1,
     "1:22:", "found 'user' on line 2 (add ';' here)", 0},
    {"missing ';' before '}'", "sandbox a {\n  workers 2\n}\n", 1,
     "2:12:", "expected ';' after 'workers 2', found '}' on line 3 (add ';' here)", 0},
    {"missing ';' at the end of the file", "user nobody", 1, "1:12:", "(add ';' here)", 0},
    {"unterminated quote", "docroot \"/srv/www;\nuser nobody;\n", 1,
     "1:9:", "unterminated string (expected '\"' before end of line)", 0},
    {"unclosed block", "sandbox a {\n  workers 2;\n", 1,
     "1:1:", "unterminated sandbox block 'a' (expected '}' before end of file)", 0},
    {"stray '}'", "user nobody;\n}\n", 1, "2:1:", "no block is open", 0},
    {"empty value", "docroot \"\";\n", 1, "1:9:", "expected 'docroot DIR;'", 0},
    {"directive without its value", "error-log;\n", 1,
     "1:10:", "missing argument for 'error-log' (expected 'error-log FILE|syslog')", 0},
    {"directive twice in a block", "sandbox a {\n  workers 2;\n  workers 3;\n}\n", 1,
     "3:3:", "already set at line 2; expected it at most once", 0},
    {"sandbox defined twice", "sandbox a {\n}\nsandbox a {\n}\n", 1,
     "3:9:", "already defined at line 1; expected a new name", 0},
    /* Numbers and units. */
    {"workers 0", "sandbox a {\n  workers 0;\n}\n", 1,
     "2:11:", "'workers 0' out of range (expected 1..256)", 0},
    {"max-workers below workers", "sandbox a {\n  workers 4;\n  max-workers 2;\n}\n", 1, "3:1:",
     "max-workers 2 is below workers 4 (the pool grows from workers up to max-workers; raise "
     "max-workers to at least 4, or remove it)",
     0},
    {"max-workers 1000", "sandbox a {\n  max-workers 1000;\n}\n", 1, "2:15:", "(expected 1..256",
     0},
    {"workers 1000", "sandbox a {\n  workers 1000;\n}\n", 1, "2:11:", "(expected 1..256", 0},
    {"memory with a unit", "sandbox a {\n  memory 12q;\n}\n", 1,
     "2:10:", "expected MiB as a decimal number 16..1048576 without a unit, or unlimited", 0},
    {"negative timeout", "sandbox a {\n  timeout -5;\n}\n", 1,
     "2:11:", "expected milliseconds as a decimal number 0..86400000 without a unit, or off", 0},
    {"timeout in seconds", "header-timeout 5s;\n", 1,
     "1:16:", "expected milliseconds as a decimal number 1..3600000 without a unit", 0},
    {"size with a wrong suffix", "max-body-size 10x;\n", 1,
     "1:15:", "optionally with a k, m or g suffix, e.g. 64k", 0},
    {"yes for on", "development yes;\n", 1, "1:13:", "(expected on or off)", 0},
    {"unknown system-call group", "sandbox a {\n  syscalls network;\n}\n", 1,
     "2:12:", "unknown system-call group 'network' (expected files or database)", 0},
    {"unknown violation action", "sandbox a {\n  syscall-violations ignore;\n}\n", 1,
     "2:22:", "(expected log or kill)", 0},
    /* Listeners. */
    {"listen without a port", "listen 127.0.0.1;\n", 1,
     "1:8:", "expected ADDR:PORT, e.g. 127.0.0.1:8080 or [::1]:8080", 0},
    {"listen on a host name", "listen localhost:8080;\n", 1,
     "1:8:", "expected a numeric IPv4 address like 127.0.0.1", 0},
    {"listen on every address, nginx style", "listen *:8080;\n", 1,
     "1:8:", "every address is 0.0.0.0 (IPv4) or [::] (IPv6)", 0},
    {"status page without '/'", "status-page status;\n", 1,
     "1:13:", "must be a path starting with '/' (e.g. 'status-page /status;')", 0},
    {"listen port too big", "listen 127.0.0.1:99999;\n", 1, "1:8:", "(expected 0..65535)", 0},
    {"duplicate listen", "listen 127.0.0.1:18091;\nlisten 127.0.0.1:18091;\n", 1,
     "2:8:", "the same address and port twice; keep one", 0},
    {"listen beside a wildcard", "listen 0.0.0.0:18091;\nlisten 127.0.0.1:18091;\n", 1,
     "2:8:", "a wildcard address takes the port on every address; keep one", 0},
    {"port in use (a warning)", "listen 127.0.0.1:@BUSY@;\n", 0,
     "1:", "a running sandletd or another program holds it", 0},
    /* Servlets and pages. */
    {"servlet path without '/'", "servlet x {\n  library \"@PROBE@\";\n}\n", 1,
     "1:9:", "must start with '/' (expected a URL path, e.g. 'servlet /x { ... }')", 0},
    {"duplicate servlet path",
     "servlet /x {\n  library \"@PROBE@\";\n}\nservlet /x {\n  library \"@PROBE@\";\n}\n", 1,
     "4:9:", "already defined at line 1; expected each path once", 0},
    {"servlet without a library", "servlet /x {\n}\n", 1,
     "1:1:", "has no library (expected 'library FILE;' in its block)", 0},
    {"servlet in an undefined sandbox",
     "servlet /x {\n  library \"@PROBE@\";\n  sandbox shop;\n}\n", 1,
     "3:11:", "undefined sandbox 'shop' (expected the name of a 'sandbox NAME { ... }' block)", 0},
    {"missing servlet library", "servlet /x {\n  library \"@D@/nosuch.so\";\n}\n", 1,
     "2:", "does not exist (build it, or fix the path)", 0},
    {"library without a servlet descriptor", "servlet /x {\n  library \"@D@/nodesc.so\";\n}\n", 1,
     "2:", "defines no servlet (declare one with SL_SERVLET)", 0},
    {"library that is not a shared object", "servlet /x {\n  library \"@D@/secret-ok\";\n}\n", 1,
     "2:", "expected a servlet built as a shared object: cc -shared -fPIC", 0},
    /* A servlet calling what nothing defines: its code or its libraries
     * are wrong, not its compiler flags (issue 31). */
    {"servlet with an undefined symbol", "servlet /x {\n  library \"@D@/undef.so\";\n}\n", 1, "2:",
     "undefined symbol: no_such_function (the servlet uses a function or variable that "
     "neither it nor a library it is linked with defines",
     0},
    {"servlet needing a library that is not installed",
     "servlet /x {\n  library \"@D@/needlib.so\";\n}\n", 1, "2:",
     "libsandlet-no-such.so: cannot open shared object file: No such file or directory (the "
     "library named first is one the servlet was linked with, and it is not installed",
     0},
    {"library is a folder", "servlet /x {\n  library \"@D@/www\";\n}\n", 1,
     "2:", "is not a file (name the .so)", 0},
    {"pages prefix without slashes", "docroot \"@D@/www\";\npages admin {\n}\n", 1,
     "2:7:", "e.g. 'pages / { ... }' or 'pages /admin/ { ... }'", 0},
    {"page compiler not installed (a warning)",
     "docroot \"@D@/www\";\nsandbox a {\n}\npage-compiler /nonexistent/cc;\npages / {\n  sandbox "
     "a;\n}\n",
     0, "4:", "pages are served only when compiled ahead of time", 0},
    {"pages without a docroot", "pages / {\n}\n", 1,
     "1:", "expected a 'docroot DIR;' line: pages are .csp files under it", 0},
    {"pages in an undefined sandbox", "docroot \"@D@/www\";\npages / {\n  sandbox shop;\n}\n", 1,
     "3:11:", "expected the name of a 'sandbox NAME { ... }' block", 0},
    /* Files and folders a start needs. */
    {"missing docroot", "user nobody;\n\ndocroot \"@D@/nowhere\";\n", 1,
     "3:", "create it: mkdir -p @D@/nowhere, or fix 'docroot'", 0},
    {"missing error-log folder", "\nerror-log \"@D@/nologs/error.log\";\n", 1,
     "2:", "create it: mkdir -p @D@/nologs, or fix 'error-log'", 0},
    {"missing access-log folder", "access-log \"@D@/nologs/access.log\";\n", 1,
     "1:", "create it: mkdir -p @D@/nologs, or fix 'access-log'", 0},
    {"readable path missing", "sandbox a {\n  workers 1;\n  readable \"@D@/data\";\n}\n", 1, "3:",
     "readable '@D@/data' does not exist, and its workers cannot confine themselves without it "
     "(create it, or remove the line)",
     0},
    {"writable folder missing", "sandbox a {\n  writable \"@D@/www\";\n  writable \"@D@/up\";\n}\n",
     1, "3:", "(create it: mkdir -p @D@/up, or remove the line)", 0},
    {"writable names a file", "sandbox a {\n  writable \"@D@/pw-644\";\n}\n", 1,
     "2:", "is not a folder (name a folder)", 0},
    {"password file readable by others",
     "sandbox a {\n  database \"dbname=x\";\n  database-password-file \"@D@/pw-644\";\n}\n", 1,
     "3:26:", "(expected mode 600 or 400; chmod 600 it)", 0},
    {"password file missing", "sandbox a {\n  database-password-file \"@D@/nopw\";\n}\n", 1,
     "2:26:", "expected a file holding the password, owned by root, mode 600", 0},
    {"session secret too short", "session-secret-file \"@D@/secret-short\";\n", 1,
     "1:21:", "expected 32 to 4096 random bytes, e.g. 'head -c 32 /dev/urandom > FILE'", 0},
    {"session secret readable by others", "session-secret-file \"@D@/secret-644\";\n", 1,
     "1:21:", "chmod 600 it", 0},
    {"session secret missing", "session-secret-file \"@D@/nosecret\";\n", 1,
     "1:21:", "'head -c 32 /dev/urandom > FILE; chmod 600 FILE'", 0},
    {"sessions database without a database", "sandbox a {\n  sessions database;\n}\n", 1,
     "1:1:", "add the database its sessions go to, or set 'sessions memory'", 0},
    {"two sandboxes, one database role",
     "session-secret-file \"@D@/secret-ok\";\nsandbox a {\n  database \"dbname=x user=app\";\n"
     "  sessions database;\n}\nsandbox b {\n  database \"dbname=x user=app\";\n}\n",
     1, "7:1:", "give each sandbox a role of its own (user=... in its database string)", AT_START},
    {"a password in the database string", "sandbox a {\n  database \"host=h password=x\";\n}\n", 1,
     "2:12:",
     "remove 'password=' and put the password in a file named by 'database-password-file FILE;'",
     AT_START},
    {"not a libpq connection string", "sandbox a {\n  database \"host=h dbname\";\n}\n", 1,
     "2:12:", "not a libpq connection string (missing \"=\" after \"dbname\"", AT_START},
    {"a database port out of range", "\nsandbox a {\n  database \"host=h port=99999\";\n}\n", 1,
     "2:1:", "sandbox 'a': database port '99999' is not a number 1-65535", AT_START},
    /* Users and groups (looked up only by a root start). */
    {"acceptor user missing", "listen 127.0.0.1:0;\nuser sandlet-no-such-user;\n", 1, "2:",
     "create it (adduser --system sandlet-no-such-user) or change the 'user' line", NEED_ROOT},
    {"sandbox user missing", "sandbox a {\n  workers 1;\n  user sandlet-no-such-user;\n}\n", 1,
     "3:", "create it (adduser --system sandlet-no-such-user)", NEED_ROOT},
    {"sandbox group missing", "sandbox a {\n  workers 1;\n  group sandlet-no-such-group;\n}\n", 1,
     "3:", "create it (addgroup --system sandlet-no-such-group)", NEED_ROOT},
    {"sandbox as root", "sandbox a {\n  workers 1;\n  user root;\n}\n", 1,
     "3:", "name an unprivileged user and group", NEED_ROOT},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Mistakes that show only when a servlet runs (see the top):
 * the file is served, the request made, and the line wanted in the error
 * log.  The harness's file has a listen line first: the row's text starts
 * at line 2. */
typedef struct served_case {
    const char *name;
    const char *conf;
    const char *where;   /* after "FILE:"; for a hint, what the line starts with */
    const char *fix;     /* a fragment of the advice */
    const char *request; /* the target of a GET */
    /* Development mode's hint, from the worker, where the kernel records
     * no denial: the line names the sandbox and the request, not a line
     * of the file (a worker is not given its name), and no record counts. */
    bool hint;
} served_case;

static const served_case served_cases[] = {
    /* What Landlock refuses a servlet (issue 31): the supervisor reports
     * the kernel's record with the line that allows it. */
    {"servlet reads a file no 'readable' line covers",
     "sandbox a {\n  workers 1;\n  syscalls files;\n}\nservlet /x {\n  library \"@HOSTILE@\";\n"
     "  sandbox a;\n}\n",
     "2:",
     "fs.read_file of '@D@/pw-644', which no 'readable' line of the sandbox covers: to allow it, "
     "add 'readable \"@D@/pw-644\";' (or a folder above it) to its block and reload",
     "/x?do=read&arg=@D@/pw-644", false},
    {"servlet makes a file where no 'writable' line allows",
     "sandbox a {\n  workers 1;\n  syscalls files;\n  readable \"@D@/www\";\n}\n"
     "servlet /x {\n  library \"@HOSTILE@\";\n  sandbox a;\n}\n",
     "2:",
     "fs.make_reg of '@D@/www', which no 'writable' line of the sandbox covers: to allow it, add "
     "'writable \"@D@/www\";' to its block and reload",
     "/x?do=write&arg=@D@/www/new.txt", false},
    /* Where the kernel records none (before Linux 6.15, or audit off):
     * with development on, the worker's own hint. */
    {"servlet reads a file no 'readable' line covers (development hint)",
     "development on;\nsandbox a {\n  workers 1;\n  syscalls files;\n}\nservlet /x {\n"
     "  library \"@HOSTILE@\";\n  sandbox a;\n}\n",
     "sandbox 'a' /x: GET /x: ",
     "open('@D@/pw-644') failed with EACCES, and no 'readable' line of sandbox 'a' covers it, so "
     "Landlock refused it",
     "/x?do=read&arg=@D@/pw-644", true},
    {"servlet makes a file where no 'writable' line allows (development hint)",
     "development on;\nsandbox a {\n  workers 1;\n  syscalls files;\n  readable \"@D@/www\";\n}\n"
     "servlet /x {\n  library \"@HOSTILE@\";\n  sandbox a;\n}\n",
     "sandbox 'a' /x: GET /x: ",
     "open('@D@/www/new.txt') failed with EACCES, and no 'writable' line of sandbox 'a' covers "
     "it, so Landlock refused it (unless it lies in a folder of a servlet library's RUNPATH, "
     "which Landlock allows too; a link is judged by where it leads): to allow it, add "
     "'writable \"@D@/www\";' to its block and reload",
     "/x?do=write&arg=@D@/www/new.txt", true},
};
#define NRUN (sizeof(served_cases) / sizeof(served_cases[0]))

static char dir[64];
static char conf_path[128];
static int busy_fd = -1;
static unsigned busy_port;

/* Writes len bytes of text to dir/name with mode. */
static void put_file(const char *name, const char *text, size_t len, mode_t mode)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    assert_int_equal(fchmod(fd, mode), 0); /* whatever the umask */
    close(fd);
}

static int setup(void **state)
{
    (void)state;
    if (th_tempdir(dir, sizeof(dir), "errors", 0755) < 0)
        return -1;
    snprintf(conf_path, sizeof(conf_path), "%s/sandlet.conf", dir);
    char path[192], cmd[512];
    snprintf(path, sizeof(path), "%s/www", dir);
    if (mkdir(path, 0755) < 0)
        return -1;
    static const char secret[64] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd";
    put_file("pw-644", "secret\n", 7, 0644);
    put_file("secret-short", secret, 10, 0600);
    put_file("secret-644", secret, sizeof(secret), 0644);
    put_file("secret-ok", secret, sizeof(secret), 0600);
    /* A shared object that is not a servlet: what linking a plain
     * library, or forgetting SL_SERVLET, gives. */
    put_file("nodesc.c", "int not_a_servlet(void) { return 1; }\n", 38, 0644);
    const char *cc = getenv("SANDLET_CC");
    snprintf(cmd, sizeof(cmd), "%s -shared -fPIC -o '%s/nodesc.so' '%s/nodesc.c'",
             cc && *cc ? cc : "cc", dir, dir);
    if (system(cmd) != 0)
        return -1;
    /* A servlet that calls a function nothing defines (a shared object
     * may leave symbols to the loader), and one linked with a library
     * that is not installed. */
    static const char undef[] = "#include <sandlet.h>\nint no_such_function(void);\n"
                                "static int s(sl_request *rq, sl_response *rs)\n"
                                "{ (void)rq; (void)rs; return no_such_function(); }\n"
                                "SL_SERVLET(x) = {.service = s};\n";
    put_file("undef.c", undef, sizeof(undef) - 1, 0644);
    static const char lib[] = "int in_lib(void) { return 1; }\n";
    put_file("nosuchlib.c", lib, sizeof(lib) - 1, 0644);
    const char *src = getenv("SANDLET_SRCDIR");
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && %s -shared -fPIC -I'%s/include' -o undef.so undef.c && "
             "%s -shared -fPIC -o libsandlet-no-such.so nosuchlib.c && "
             "%s -shared -fPIC -I'%s/include' -o needlib.so undef.c -L. -Wl,--no-as-needed "
             "-lsandlet-no-such "
             "-Wl,--allow-shlib-undefined && rm libsandlet-no-such.so",
             dir, cc && *cc ? cc : "cc", src ? src : ".", cc && *cc ? cc : "cc",
             cc && *cc ? cc : "cc", src ? src : ".");
    if (system(cmd) != 0)
        return -1;
    /* The port a start would find in use. */
    busy_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    if (busy_fd < 0 || bind(busy_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(busy_fd, 1) < 0 || getsockname(busy_fd, (struct sockaddr *)&a, &alen) < 0)
        return -1;
    busy_port = ntohs(a.sin_port);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (busy_fd >= 0)
        close(busy_fd);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* text with @D@, @PROBE@ and @BUSY@ replaced, into out. */
static void expand(const char *text, char *out, size_t cap)
{
    char port[16];
    snprintf(port, sizeof(port), "%u", busy_port);
    const struct {
        const char *key, *value;
    } subst[] = {{"@D@", dir},
                 {"@PROBE@", th_fixture("probe")},
                 {"@HOSTILE@", th_fixture("hostile")},
                 {"@BUSY@", port}};
    size_t n = 0;
    while (*text) {
        size_t k = 0;
        for (; k < sizeof(subst) / sizeof(subst[0]); k++)
            if (!strncmp(text, subst[k].key, strlen(subst[k].key)))
                break;
        const char *piece = k < sizeof(subst) / sizeof(subst[0]) ? subst[k].value : text;
        size_t len = k < sizeof(subst) / sizeof(subst[0]) ? strlen(piece) : 1;
        assert_true(n + len < cap);
        memcpy(out + n, piece, len);
        n += len;
        text += k < sizeof(subst) / sizeof(subst[0]) ? strlen(subst[k].key) : 1;
    }
    out[n] = '\0';
}

/* Runs sandletd -t -c conf_path (or, start, sandletd -c conf_path): its
 * exit status, its standard error in err (standard output, "OK", is not
 * where problems go). */
static int check_stderr(bool start, char *err, size_t cap)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(p[1], STDERR_FILENO);
        const char *exe = getenv("SANDLETD");
        if (start) {
            /* A start that did not refuse the file would serve: SIGALRM
             * ends it, and the row fails on its status. */
            alarm(20);
            execl(exe ? exe : "./sandletd", "sandletd", "-c", conf_path, (char *)NULL);
        } else {
            execl(exe ? exe : "./sandletd", "sandletd", "-t", "-c", conf_path, (char *)NULL);
        }
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t r;
    while (got < cap - 1 && ((r = read(p[0], err + got, cap - 1 - got)) > 0 || errno == EINTR))
        if (r > 0)
            got += (size_t)r;
    err[got] = '\0';
    close(p[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The place and the advice on one line of text: the line an operator
 * reads. */
static bool one_line(const char *text, const char *where, const char *fix)
{
    bool found = false;
    for (const char *line = text; *line && !found;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *w = memmem(line, len, where, strlen(where));
        found = w && memmem(w, len - (size_t)(w - line), fix, strlen(fix));
        line += len + (eol ? 1 : 0);
    }
    return found;
}

/* One run of sandletd on the row's file: its status, and the place and
 * the advice on one line of its standard error. */
static void check_case(const err_case *c, const char *text, const char *where, const char *fix,
                       bool start, char *err, size_t cap)
{
    int status = check_stderr(start, err, cap);
    bool found = one_line(err, where, fix);
    if (status != c->status || !found)
        fail_msg("%s (sandletd %s):\n--- file\n%s--- wanted exit %d and '%s' with '%s' on one "
                 "line; got exit %d:\n%s",
                 c->name, start ? "-c" : "-t -c", text, c->status, where, fix, status, err);
}

/* The kernel's audit_enabled (0 off, 1 on, 2 on and locked), asked or,
 * with set >= 0, set first, on a netlink socket of our own: -1 when the
 * kernel would not say. */
static int audit_state(int set)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
    if (fd < 0)
        return -1;
    int state = -1;
    for (int round = set >= 0 ? 0 : 1; round < 2; round++) {
        struct {
            struct nlmsghdr h;
            struct audit_status s;
        } req;
        memset(&req, 0, sizeof(req));
        req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.s));
        req.h.nlmsg_type = round == 0 ? AUDIT_SET : AUDIT_GET;
        req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        req.s.mask = AUDIT_STATUS_ENABLED;
        req.s.enabled = set >= 0 ? (uint32_t)set : 0;
        struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
        if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
            break;
        /* The answer (AUDIT_GET) and an acknowledgement, in either order. */
        for (int n = 0; n < 2; n++) {
            char buf[512] __attribute__((aligned(NLMSG_ALIGNTO)));
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            if (poll(&pfd, 1, 1000) <= 0)
                break;
            ssize_t got = recv(fd, buf, sizeof(buf), 0);
            const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
            if (got >= (ssize_t)NLMSG_LENGTH(sizeof(uint32_t) * 2) && h->nlmsg_type == AUDIT_GET)
                state = (int)((const struct audit_status *)NLMSG_DATA(h))->enabled;
        }
    }
    close(fd);
    return state;
}

static void served_run(const served_case *c, const char *text, bool turned_on);

/* A row served by the daemon: the request made, the line in its log.
 * SKIP, with the reason, where the kernel records no Landlock denial. */
static void run_served(void **state)
{
    const served_case *c = *state;
    char text[2048];
    expand(c->conf, text, sizeof(text));
    if (th_confinement_off("Landlock's denials are not reported without confinement"))
        return;
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (c->hint) {
        if (abi < 1) {
            printf("SKIP: this kernel has no Landlock: nothing refuses the servlet's file\n");
            return;
        }
        /* Only a root start reads the records; with audit on, they come. */
        if (geteuid() == 0 && abi >= 7 && audit_state(-1) > 0) {
            printf("SKIP: the kernel's audit is on, so Landlock's records report the denial "
                   "(the rows above) and no worker hints\n");
            return;
        }
        served_run(c, text, false);
        return;
    }
    if (th_skip_unless_root(": the supervisor reads the kernel's audit records as root only"))
        return;
    if (abi < 7) {
        printf("SKIP: this kernel's Landlock (ABI %ld) records no denial: that takes Linux 6.15, "
               "ABI 7\n",
               abi);
        return;
    }
    int audit = audit_state(-1);
    const char *allow = getenv("SANDLET_TEST_AUDIT");
    bool turned_on = false;
    if (audit == 0 && allow && strcmp(allow, "on") == 0) {
        turned_on = audit_state(1) == 1;
        audit = turned_on ? 1 : 0;
    }
    if (audit < 1) {
        printf("SKIP: the kernel's audit is %s, and Landlock records its denials only when it is "
               "on: 'auditctl -e 1', or SANDLET_TEST_AUDIT=on to let this test turn it on for "
               "its run (host-wide; turned off again after)\n",
               audit == 0 ? "off" : "not answering");
        return;
    }
    served_run(c, text, turned_on);
}

/* Starts the daemon on text, makes c's request, and wants c's line in the
 * log (and, for the kernel's records, the denial counted); turned_on: the
 * row turned the kernel's audit on, to be turned off again. */
static void served_run(const served_case *c, const char *text, bool turned_on)
{
    char served[2304], target[512], where[256], fix[512];
    snprintf(served, sizeof(served), "%sstatus-page /status;\n", text);
    expand(c->request, target, sizeof(target));
    expand(c->fix, fix, sizeof(fix));
    th_daemon d;
    int rc = th_start(&d, served, false);
    th_response r;
    memset(&r, 0, sizeof(r));
    bool refused = false, logged = false;
    long counted = -1;
    char *log = NULL;
    if (rc == 0 && th_request(d.port, "GET", target, NULL, NULL, 0, &r) == 0) {
        /* The servlet got EACCES (its body says -13), and the line comes
         * once the kernel's audit thread sent the record. */
        refused = r.status == 200 && r.body && strstr(r.body, ": -13");
        if (c->hint)
            snprintf(where, sizeof(where), "%s", c->where);
        else
            snprintf(where, sizeof(where), "%s:%s", d.conf, c->where);
        for (int waited = 0; waited < 5000 && !logged; waited += 50) {
            free(log);
            log = th_slurp(d.log, NULL);
            logged = log && one_line(log, where, fix);
            if (!logged)
                usleep(50 * 1000);
        }
        for (int waited = 0; waited < 2000 && counted < 1 && !c->hint; waited += 50) {
            counted = th_metric(d.port, "/status?format=prometheus",
                                "sandlet_landlock_denials_total{sandbox=\"a\"} ");
            if (counted < 1)
                usleep(50 * 1000);
        }
    }
    if (turned_on)
        audit_state(0);
    if (rc == 0)
        th_stop(&d);
    if (rc != 0 || !refused || !logged || (counted < 1 && !c->hint))
        fail_msg("%s (served, GET %s):\n--- file\n%s--- wanted EACCES (got %d: %s), '%s' with "
                 "'%s' on one line, and the denial counted (got %ld); log:\n%s",
                 c->name, target, served, r.status, r.body ? r.body : "(none)", where, fix, counted,
                 log ? log : "(none)");
    th_response_free(&r);
    free(log);
}

static void run_case(void **state)
{
    const err_case *c = *state;
    if ((c->needs & NEED_ROOT) && th_skip_unless_root(": users and groups are looked up as root"))
        return;
    char text[2048], where[256], fix[512], err[8192];
    expand(c->conf, text, sizeof(text));
    FILE *f = fopen(conf_path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    snprintf(where, sizeof(where), "%s:%s", conf_path, c->where);
    expand(c->fix, fix, sizeof(fix));
    for (int start = 0; start <= ((c->needs & AT_START) != 0); start++)
        check_case(c, text, where, fix, start, err, sizeof(err));
}

int main(void)
{
    struct CMUnitTest tests[NCASES + NRUN];
    for (size_t i = 0; i < NCASES; i++)
        tests[i] = (struct CMUnitTest){
            .name = cases[i].name, .test_func = run_case, .initial_state = (void *)&cases[i]};
    for (size_t i = 0; i < NRUN; i++)
        tests[NCASES + i] = (struct CMUnitTest){.name = served_cases[i].name,
                                                .test_func = run_served,
                                                .initial_state = (void *)&served_cases[i]};
    th_prepare();
    return _cmocka_run_group_tests("errors", tests, NCASES + NRUN, setup, teardown);
}

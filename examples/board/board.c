/*
 * board.c - CSE's bulletin board: messages stored as files in one
 * directory (the "dir" param; the sandbox must declare it writable and
 * allow "syscalls files"), read in batches of ten with the session
 * remembering the last message read, created by a POSTed form, deleted
 * by id.
 *
 * Requests:
 *   GET  /board                     the form and a link to read
 *   GET  /board?action=read[&from=N] the next ten messages after the last
 *                                   one read (or after N), oldest first
 *   GET  /board?action=show&id=N    one message
 *   POST action=post author subject text   201, Location of the message
 *   POST action=delete id=N          200, or 404
 *
 * Message ids are numbers this servlet generates; a file name is only
 * ever built from a parsed number, never from client text, so no path
 * the client sends can reach the file system.  Text fields are checked
 * for length and control characters and always HTML-escaped on output.
 */
#define _GNU_SOURCE /* renameat2 */
#include <sandlet.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BATCH       10
#define AUTHOR_MAX  64
#define SUBJECT_MAX 120
#define TEXT_MAX    4000
/* Ids stay far below what a file name or a long long can hold. */
#define ID_MAX   999999999999ull
#define FILE_MAX (AUTHOR_MAX + SUBJECT_MAX + TEXT_MAX + 8)

static char dir[PATH_MAX];

static int init(sl_context *ctx)
{
    const char *d = sl_context_param(ctx, "dir", NULL);
    if (!d || d[0] != '/' || strlen(d) >= sizeof(dir) - 32)
        return -EINVAL; /* an absolute directory, with room for file names */
    strcpy(dir, d);
    /* Made here, before the worker confines itself, when it is missing. */
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* ---- validation ------------------------------------------------------------- */

/* A decimal id without sign, spaces or leading zeros, 1..ID_MAX. */
static bool parse_id(const char *s, unsigned long long *id)
{
    if (!s || *s < '1' || *s > '9' || strlen(s) > 12)
        return false;
    unsigned long long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (unsigned)(*s - '0');
    }
    if (v > ID_MAX)
        return false;
    *id = v;
    return true;
}

/* Length in 1..max, no control characters but (when multiline) \t \r \n. */
static bool text_ok(const char *s, size_t max, bool multiline)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > max)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == 0x7f || (c < 0x20 && !(multiline && (c == '\n' || c == '\r' || c == '\t'))))
            return false;
    }
    return true;
}

static bool msg_path(char *out, size_t cap, unsigned long long id)
{
    int n = snprintf(out, cap, "%s/%llu.msg", dir, id);
    return n > 0 && (size_t)n < cap;
}

/* The id of a directory entry "N.msg", or 0 for anything else. */
static unsigned long long entry_id(const char *name)
{
    const char *dot = strchr(name, '.');
    if (!dot || strcmp(dot, ".msg") != 0 || dot - name > 12)
        return 0;
    char num[16];
    memcpy(num, name, (size_t)(dot - name));
    num[dot - name] = '\0';
    unsigned long long id;
    return parse_id(num, &id) ? id : 0;
}

static int cmp_id(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* Every message id, sorted, in the request arena. */
static int list_ids(sl_request *rq, unsigned long long **ids, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    size_t cap = 64, k = 0;
    unsigned long long *v = sl_alloc(rq, cap * sizeof(*v));
    if (!v) {
        closedir(d);
        return -ENOMEM;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned long long id = entry_id(e->d_name);
        if (!id)
            continue;
        if (k == cap) {
            unsigned long long *g = sl_alloc(rq, 2 * cap * sizeof(*g));
            if (!g) {
                closedir(d);
                return -ENOMEM;
            }
            memcpy(g, v, k * sizeof(*v));
            v = g;
            cap *= 2;
        }
        v[k++] = id;
    }
    closedir(d);
    qsort(v, k, sizeof(*v), cmp_id);
    *ids = v;
    *n = k;
    return 0;
}

/* ---- messages on disk ---------------------------------------------------------- */

typedef struct message {
    unsigned long long id;
    char *author, *subject, *text;
} message;

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Writes a temporary file, then renames it to the next free id without
 * replacing anything, so readers never see half a message and two workers
 * never take the same id. */
static int store(sl_request *rq, const message *m, unsigned long long *id)
{
    unsigned long long *ids;
    size_t n;
    int rc = list_ids(rq, &ids, &n);
    if (rc < 0)
        return rc;
    char tmp[PATH_MAX], path[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s/.new-%ld", dir, (long)getpid()) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    rc = write_all(fd, m->author, strlen(m->author));
    if (rc == 0)
        rc = write_all(fd, "\n", 1);
    if (rc == 0)
        rc = write_all(fd, m->subject, strlen(m->subject));
    if (rc == 0)
        rc = write_all(fd, "\n", 1);
    if (rc == 0)
        rc = write_all(fd, m->text, strlen(m->text));
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    unsigned long long next = n ? ids[n - 1] + 1 : 1;
    for (int tries = 0; rc == 0 && tries < 100; tries++, next++) {
        if (next > ID_MAX || !msg_path(path, sizeof(path), next)) {
            rc = -ENOSPC;
            break;
        }
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0) {
            *id = next;
            return 0;
        }
        if (errno != EEXIST)
            rc = -errno;
    }
    unlink(tmp);
    return rc < 0 ? rc : -EAGAIN;
}

static int load(sl_request *rq, unsigned long long id, message *m)
{
    char path[PATH_MAX];
    if (!msg_path(path, sizeof(path), id))
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    char *buf = sl_alloc(rq, FILE_MAX + 1);
    size_t len = 0;
    int rc = buf ? 0 : -ENOMEM;
    while (rc == 0 && len < FILE_MAX) {
        ssize_t k = read(fd, buf + len, FILE_MAX - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            rc = -errno;
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    if (rc < 0)
        return rc;
    buf[len] = '\0';
    char *nl1 = strchr(buf, '\n');
    char *nl2 = nl1 ? strchr(nl1 + 1, '\n') : NULL;
    if (!nl2)
        return -EBADMSG;
    *nl1 = *nl2 = '\0';
    m->id = id;
    m->author = buf;
    m->subject = nl1 + 1;
    m->text = nl2 + 1;
    return 0;
}

/* ---- pages ---------------------------------------------------------------------- */

static void page_head(sl_response *rs, const char *title)
{
    sl_set_content_type(rs, "text/html; charset=utf-8");
    sl_printf(rs, "<!DOCTYPE html>\n<html><head><title>%s</title></head><body>\n<h1>%s</h1>\n",
              title, title);
}

static void page_tail(sl_response *rs)
{
    sl_puts(rs, "<p><a href=\"/board\">Board</a> | <a href=\"/board?action=read\">Read on</a> | "
                "<a href=\"/board?action=read&amp;from=0\">Read from the start</a></p>\n"
                "</body></html>\n");
}

static void show_message(sl_request *rq, sl_response *rs, const message *m)
{
    sl_printf(rs,
              "<div class=\"msg\" id=\"m%llu\"><h2>#%llu %s</h2><p>by %s</p><pre>%s</pre>"
              "<form method=\"post\" action=\"/board\">"
              "<input type=\"hidden\" name=\"action\" value=\"delete\">"
              "<input type=\"hidden\" name=\"id\" value=\"%llu\"><button>Delete</button>"
              "</form></div>\n",
              m->id, m->id, sl_html(rq, m->subject), sl_html(rq, m->author), sl_html(rq, m->text),
              m->id);
}

static int text_answer(sl_response *rs, int status, const char *msg)
{
    sl_set_content_type(rs, "text/plain; charset=utf-8");
    sl_puts(rs, msg);
    return status;
}

static int front(sl_response *rs)
{
    page_head(rs, "Bulletin board");
    sl_puts(rs, "<form method=\"post\" action=\"/board\">\n"
                "<input type=\"hidden\" name=\"action\" value=\"post\">\n"
                "<p>Name <input name=\"author\" maxlength=\"64\"></p>\n"
                "<p>Subject <input name=\"subject\" maxlength=\"120\"></p>\n"
                "<p><textarea name=\"text\" maxlength=\"4000\"></textarea></p>\n"
                "<p><button>Post</button></p>\n</form>\n");
    page_tail(rs);
    return 200;
}

static int read_batch(sl_request *rq, sl_response *rs)
{
    sl_session *s = sl_session_get(rq, rs, true);
    if (!s)
        return text_answer(rs, 503, "no session available\n");
    unsigned long long last = 0;
    const char *from = sl_param(rq, "from", NULL);
    if (from && strcmp(from, "0") != 0 && !parse_id(from, &last))
        return text_answer(rs, 400, "from must be a message id or 0\n");
    const char *kept = sl_session_str(s, "last");
    if (!from && kept && !parse_id(kept, &last))
        last = 0;
    unsigned long long *ids;
    size_t n;
    if (list_ids(rq, &ids, &n) < 0)
        return text_answer(rs, 500, "cannot list the messages\n");
    page_head(rs, "Messages");
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < BATCH; i++) {
        message m;
        if (ids[i] <= last || load(rq, ids[i], &m) < 0)
            continue; /* deleted meanwhile: skip */
        show_message(rq, rs, &m);
        last = ids[i];
        shown++;
    }
    if (shown == 0)
        sl_puts(rs, "<p>No new messages.</p>\n");
    if (sl_session_set_str(s, "last", sl_sprintf(rq, "%llu", last)) < 0)
        return 500;
    sl_printf(rs, "<p class=\"count\">%zu shown</p>\n", shown);
    page_tail(rs);
    return 200;
}

static int show_one(sl_request *rq, sl_response *rs)
{
    unsigned long long id;
    message m;
    if (!parse_id(sl_param(rq, "id", NULL), &id))
        return text_answer(rs, 400, "id must be a message number\n");
    if (load(rq, id, &m) < 0)
        return text_answer(rs, 404, "no such message\n");
    page_head(rs, "Message");
    show_message(rq, rs, &m);
    page_tail(rs);
    return 200;
}

static int post(sl_request *rq, sl_response *rs)
{
    message m = {0, (char *)sl_param(rq, "author", ""), (char *)sl_param(rq, "subject", ""),
                 (char *)sl_param(rq, "text", "")};
    if (!text_ok(m.author, AUTHOR_MAX, false) || !text_ok(m.subject, SUBJECT_MAX, false) ||
        !text_ok(m.text, TEXT_MAX, true))
        return text_answer(rs, 400,
                           "author (1..64), subject (1..120) and text (1..4000 characters) "
                           "are required, without control characters\n");
    unsigned long long id;
    if (store(rq, &m, &id) < 0)
        return text_answer(rs, 500, "cannot store the message\n");
    sl_set_header(rs, "Location", sl_sprintf(rq, "/board?action=show&id=%llu", id));
    sl_set_content_type(rs, "text/plain; charset=utf-8");
    sl_printf(rs, "created %llu\n", id);
    return 201;
}

static int delete (sl_request *rq, sl_response *rs)
{
    unsigned long long id;
    char path[PATH_MAX];
    if (!parse_id(sl_param(rq, "id", NULL), &id) || !msg_path(path, sizeof(path), id))
        return text_answer(rs, 400, "id must be a message number\n");
    if (unlink(path) < 0)
        return errno == ENOENT ? text_answer(rs, 404, "no such message\n")
                               : text_answer(rs, 500, "cannot delete the message\n");
    sl_set_content_type(rs, "text/plain; charset=utf-8");
    sl_printf(rs, "deleted %llu\n", id);
    return 200;
}

static int service(sl_request *rq, sl_response *rs)
{
    const char *method = sl_method(rq);
    const char *action = sl_param(rq, "action", "");
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
        if (!*action)
            return front(rs);
        if (strcmp(action, "read") == 0)
            return read_batch(rq, rs);
        if (strcmp(action, "show") == 0)
            return show_one(rq, rs);
    } else if (strcmp(method, "POST") == 0) {
        if (strcmp(action, "post") == 0)
            return post(rq, rs);
        if (strcmp(action, "delete") == 0)
            return delete (rq, rs);
    } else {
        sl_set_header(rs, "Allow", "GET, HEAD, POST");
        return 405;
    }
    return text_answer(rs, 400, "unknown action for this method\n");
}

SL_SERVLET(board) = {.init = init, .service = service, .session = SL_SESSION_MEMORY};

/*
 * files.c - the docroot: answers every request no servlet routes with a
 * file, a 304, a range, a redirect to a directory's slash, or an error.
 *
 * Path safety, MIME types, validators and ranges live in static.c; this
 * file turns their answers into responses.  It must never serve anything
 * static.c did not open, and never buffer a large file whole: larger files
 * go from the page cache to the socket with sendfile as the client drains.
 *
 * Why not libuv's uv_fs_sendfile: it runs on the thread pool and, with
 * the client socket non-blocking, gives up with EAGAIN, and a uv_tcp_t
 * offers no "tell me when writable" to resume on.  So sendfile(2) is
 * called here, on the loop, only while libuv has nothing queued on the
 * socket; when the socket is full one small chunk is queued through
 * libuv instead, and its completion is the signal to resume.
 */
#include "config.h"

#include "loop/acceptor.h"
#include "loop/filecache.h"
#include "common/log.h"
#include "loop/static.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

/* Up to this size a file is read (or taken from the cache) and sent with
 * its head in one write. */
#define SMALL SANDLET_FILECACHE_MAX
/* Bytes copied through libuv when the socket is full (see above). */
#define CHUNK ((size_t)64 * 1024)
/* One sendfile call's share, so one client cannot hog the loop. */
#define SENDFILE_MAX ((size_t)4 * 1024 * 1024)
/* From this much on, sendfile runs on libuv's thread pool: moving pages
 * into the socket is the kernel's CPU work, and one loop thread doing it
 * for every client uses one core while others idle.  Below it, handing
 * work to a thread costs more than it saves. */
#define POOL_MIN ((uint64_t)256 * 1024)
/* A pool thread's share per turn, so other clients get threads too. */
#define POOL_MAX   ((size_t)16 * 1024 * 1024)
#define INDEX_NAME "index.html"
#define ALLOW      "Allow: GET, HEAD, OPTIONS\r\n"

int sandlet_files_open(sandlet_server *srv)
{
    srv->docroot_fd = -1;
    srv->mime = NULL;
    const sandlet_conf *conf = srv->conf;
    if (!conf->docroot)
        return 0;
    srv->docroot_fd = open(conf->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (srv->docroot_fd < 0) {
        int err = -errno;
        sandlet_log_errno(SANDLET_LOG_ERROR, err,
                          "%s: docroot %s cannot be opened; create it or fix the docroot line",
                          conf->file, conf->docroot);
        return err;
    }
    sandlet_mime *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    int rc = sandlet_static_mime_load(m, "/etc/mime.types");
    if (rc < 0 && rc != -ENOENT)
        sandlet_log_errno(SANDLET_LOG_WARN, rc,
                          "/etc/mime.types unreadable; using the built-in types");
    srv->mime = m;
    return 0;
}

void sandlet_files_close(sandlet_server *srv)
{
    sandlet_filecache_free();
    if (srv->docroot_fd >= 0)
        close(srv->docroot_fd);
    srv->docroot_fd = -1;
    if (srv->mime) {
        sandlet_static_mime_free(srv->mime);
        free(srv->mime);
        srv->mime = NULL;
    }
}

/* A body-less answer with extra header lines (Allow, Location). */
static void bodyless(sandlet_conn *c, int code, const char *extra)
{
    if (sandlet_conn_respond(c, code, extra, strlen(extra), 0, NULL, 0) < 0) {
        sandlet_conn_fail(c, 500);
        return;
    }
    sandlet_conn_request_done(c);
}

int sandlet_files_status(int err)
{
    switch (err) {
    case -EINVAL:
    case -ENOENT:
    case -EISDIR:
    case -ENOTDIR: return 404;
    case -EACCES:
    case -EPERM: return 403;
    case -ENAMETOOLONG: return 414;
    case -EAGAIN:
    case -EMFILE:
    case -ENFILE:
    case -ENOMEM: return 503;
    default: return 500;
    }
}

/* Closes a file descriptor opened read-only here (-1: none). */
static void drop_fd(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* Whether rel (docroot-relative, as opened; ext its lowercase extension,
 * "csp" for a link to a page too) is page source that no client may
 * read: a page; any name holding ".csp" (an editor's "page.csp~",
 * ".page.csp.swp", "#page.csp#", a "page.csp.bak"); and, in a folder a
 * "pages" block serves, a C header, since pages include them from beside
 * themselves (the compiler can read nothing outside the docroot) and
 * they may hold what the page keeps secret.  Hard links are not
 * detected: a page's source linked under another name is served. */
static bool page_source(const sandlet_conf *conf, const char *rel, const char *ext)
{
    if (strcmp(ext, "csp") == 0)
        return true;
    const char *base = strrchr(rel, '/');
    base = base ? base + 1 : rel;
    for (const char *p = base; *p; p++)
        if (p[0] == '.' && (p[1] | 0x20) == 'c' && (p[2] | 0x20) == 's' && (p[3] | 0x20) == 'p')
            return true;
    return conf->npages && strcmp(ext, "h") == 0 && sandlet_conf_pages_for(conf, rel);
}

/* One loop thread: one read buffer is enough (writes copy out of it). */
static char buf[SMALL > CHUNK ? SMALL : CHUNK];

/* The file shrank or failed under us: the promised length can no longer
 * be met, so the connection must end here. */
static void file_failed(sandlet_conn *c, int err)
{
    sandlet_file_send *f = sandlet_conn_file(c);
    sandlet_log_errno(SANDLET_LOG_WARN, err,
                      "%s: sending a static file failed at offset %" PRIu64 "; closing",
                      sandlet_conn_peer(c), f->off);
    close(f->fd);
    f->fd = -1;
    sandlet_conn_fail(c, 500);
}

/* Copies one chunk through libuv's write queue. */
static int copy_chunk(sandlet_conn *c)
{
    sandlet_file_send *f = sandlet_conn_file(c);
    size_t want = f->left < CHUNK ? (size_t)f->left : CHUNK;
    ssize_t n = pread(f->fd, buf, want, (off_t)f->off);
    if (n <= 0) {
        file_failed(c, n < 0 ? -errno : -ENODATA);
        return -1;
    }
    if (sandlet_conn_write(c, buf, (size_t)n, NULL, 0, NULL, 0) < 0) {
        sandlet_conn_fail(c, 500); /* under way: cuts the connection */
        return -1;
    }
    f->off += (uint64_t)n;
    f->left -= (uint64_t)n;
    return 0;
}

/* On a pool thread: only the two descriptors and the job's own fields;
 * the loop does not touch them while file_job is set. */
static void job_run(uv_work_t *req)
{
    sandlet_conn *c = req->data;
    sandlet_file_send *f = sandlet_conn_file(c);
    uv_os_fd_t sock = -1;
    f->job_sent = 0;
    f->job_err = 0;
    if (sandlet_conn_socket(c, &sock) < 0) {
        f->job_err = EBADF;
        return;
    }
    uint64_t left = f->left < POOL_MAX ? f->left : POOL_MAX;
    off_t off = (off_t)f->off;
    while (left > 0) {
        ssize_t n = sendfile(sock, f->fd, &off, (size_t)left);
        if (n > 0) {
            f->job_sent += (uint64_t)n;
            left -= (uint64_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            f->job_err = n < 0 ? errno : ENODATA;
            return;
        }
    }
}

static void job_done(uv_work_t *req, int status)
{
    sandlet_conn *c = req->data;
    sandlet_file_send *f = sandlet_conn_file(c);
    f->job = false;
    if (!sandlet_conn_job_done(c))
        return;
    f->off += f->job_sent;
    f->left -= f->job_sent;
    int err = status < 0 ? -status : f->job_err;
    if (err == EAGAIN || err == EINVAL || err == ENOSYS) {
        /* Socket full (or a file system without sendfile): one chunk
         * goes through libuv, and its completion resumes the pump. */
        if (copy_chunk(c) < 0)
            return;
    } else if (err == EPIPE || err == ECONNRESET) {
        sandlet_conn_fail(c, 500);
        return;
    } else if (err) {
        file_failed(c, -err);
        return;
    }
    sandlet_files_pump(c);
}

void sandlet_files_pump(sandlet_conn *c)
{
    sandlet_file_send *f = sandlet_conn_file(c);
    if (f->job)
        return;
    if (f->fd >= 0 && f->left >= POOL_MIN && sandlet_conn_write_backlog(c) == 0) {
        f->work.data = c;
        if (uv_queue_work(sandlet_conn_server(c)->loop, &f->work, job_run, job_done) == 0) {
            f->job = true;
            sandlet_conn_job_begin(c);
            return;
        }
    }
    uv_os_fd_t sock = -1;
    if (sandlet_conn_socket(c, &sock) < 0) {
        file_failed(c, -EBADF);
        return;
    }
    /* sendfile must not overtake bytes libuv still holds: wait for the
     * queue to drain (after_write calls here again). */
    while (f->fd >= 0 && f->left > 0 && sandlet_conn_write_backlog(c) == 0) {
        size_t want = f->left < SENDFILE_MAX ? (size_t)f->left : SENDFILE_MAX;
        off_t off = (off_t)f->off;
        ssize_t n = sendfile(sock, f->fd, &off, want);
        if (n > 0) {
            f->off += (uint64_t)n;
            f->left -= (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            /* Usually queued, and its completion resumes us; when the
             * socket drained meanwhile and took it all, keep going. */
            if (copy_chunk(c) < 0)
                return;
            continue;
        }
        if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
            /* A file system without sendfile support: copy instead. */
            if (copy_chunk(c) < 0)
                return;
            continue;
        }
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
            sandlet_conn_fail(c, 500); /* under way: cuts the connection */
            return;
        }
        file_failed(c, n < 0 ? -errno : -ENODATA);
        return;
    }
    if (f->fd >= 0 && f->left == 0) {
        close(f->fd);
        f->fd = -1;
        sandlet_conn_request_done(c);
    }
}

void sandlet_files_serve(sandlet_conn *c)
{
    sandlet_server *srv = sandlet_conn_server(c);
    int method = sandlet_conn_method(c);
    bool head_only = sandlet_conn_head_only(c);
    /* The request's host's docroot.  Only the default host's files are
     * cached: an entry names a path, not the docroot it was opened under,
     * and a hit is checked with a stat that follows symbolic links, so a
     * link in one host's folder could serve a file cached from another's. */
    int root = sandlet_conn_docroot_fd(c);
    bool cached = root == srv->docroot_fd;
    if (root < 0) {
        sandlet_conn_fail(c, 404);
        return;
    }
    if (method == HTTP_OPTIONS) {
        bodyless(c, 204, ALLOW);
        return;
    }
    if (method != HTTP_GET && method != HTTP_HEAD) {
        bodyless(c, 405, ALLOW);
        return;
    }
    size_t tlen, plen;
    const char *target = sandlet_conn_target(c, &tlen, &plen);
    /* What is served: a cached small file (one fstatat to check it is
     * still that file), or one opened now. */
    int fd = -1;
    const uint8_t *data = NULL;
    uint64_t size;
    time_t mtime;
    const char *mime, *etag, *lastmod;
    char etagbuf[SANDLET_STATIC_ETAG_MAX], lastmodbuf[SANDLET_STATIC_DATE_MAX];
    const sandlet_cached_file *hit = cached ? sandlet_filecache_get(root, target, plen) : NULL;
    if (hit) {
        data = hit->data;
        size = hit->size;
        mtime = hit->mtim.tv_sec;
        mime = hit->mime;
        etag = hit->etag;
        lastmod = hit->lastmod;
    } else {
        struct stat st;
        char ext[SANDLET_STATIC_EXT_MAX], rel[SANDLET_STATIC_PATH_MAX];
        int rc = sandlet_static_open_rel(root, target, plen, INDEX_NAME, &fd, &st, ext, sizeof(ext),
                                         rel, sizeof(rel));
        if (rc == -EISDIR) {
            /* "/dir" → "/dir/", keeping the query. */
            char loc[SANDLET_STATIC_PATH_MAX + 32];
            int n = snprintf(loc, sizeof(loc), "Location: %.*s/%.*s\r\n", (int)plen, target,
                             (int)(tlen - plen), target + plen);
            if (n < 0 || (size_t)n >= sizeof(loc)) {
                sandlet_conn_fail(c, 414);
                return;
            }
            bodyless(c, 301, loc);
            return;
        }
        if (rc < 0) {
            sandlet_conn_fail(c, sandlet_files_status(rc));
            return;
        }
        if (page_source(srv->conf, rel, ext)) {
            /* A C Server Page's source (reached by a link, with pages off,
             * or an editor's copy of one) or a header that pages include:
             * never sent (route.c gives page names to pages.c). */
            close(fd);
            sandlet_debug("%s: /%s is C Server Page source; answering 404%s",
                          sandlet_conn_reqline(c), rel,
                          srv->conf->npages ? "" : " (no 'pages' block serves pages)");
            sandlet_conn_fail(c, 404);
            return;
        }
        sandlet_static_etag(&st, etagbuf, sizeof(etagbuf));
        sandlet_static_http_date(st.st_mtime, lastmodbuf, sizeof(lastmodbuf));
        size = (uint64_t)st.st_size;
        mtime = st.st_mtime;
        mime = sandlet_static_mime(srv->mime, ext);
        etag = etagbuf;
        lastmod = lastmodbuf;
        if (cached)
            sandlet_filecache_put(target, plen, rel, fd, &st, mime, etag, lastmod);
    }
    char validators[256];
    snprintf(validators, sizeof(validators), "ETag: %s\r\nLast-Modified: %s\r\n", etag, lastmod);
    if (sandlet_static_not_modified(sandlet_conn_header(c, "if-none-match"),
                                    sandlet_conn_header(c, "if-modified-since"), etag, mtime)) {
        drop_fd(fd);
        bodyless(c, 304, validators);
        return;
    }
    uint64_t start = 0, length = size;
    /* Range is GET's alone (RFC 9110 14.2): a HEAD gets the head of the
     * whole file, as its GET without Range would. */
    int rc = sandlet_static_range(method == HTTP_GET ? sandlet_conn_header(c, "range") : NULL,
                                  sandlet_conn_header(c, "if-range"), etag, mtime, size, &start,
                                  &length);
    char range[96] = "";
    if (rc == -ERANGE) {
        drop_fd(fd);
        snprintf(range, sizeof(range), "Content-Range: bytes */%" PRIu64 "\r\n", size);
        bodyless(c, 416, range);
        return;
    }
    if (rc == 1)
        snprintf(range, sizeof(range),
                 "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n", start,
                 start + length - 1, size);
    char extra[1024];
    int n = snprintf(extra, sizeof(extra), "Content-Type: %s\r\n%s%sAccept-Ranges: bytes\r\n", mime,
                     validators, range);
    if (n < 0 || (size_t)n >= sizeof(extra)) {
        drop_fd(fd);
        sandlet_conn_fail(c, 500);
        return;
    }
    int code = rc == 1 ? 206 : 200;
    if (head_only || length == 0 || length <= SMALL) {
        /* The common case: head and whole body in one write. */
        const void *body = NULL;
        if (!head_only && length && data) {
            body = data + start;
        } else if (!head_only && length) {
            ssize_t got = pread(fd, buf, (size_t)length, (off_t)start);
            if (got != (ssize_t)length) {
                drop_fd(fd);
                sandlet_conn_fail(c, 500);
                return;
            }
            body = buf;
        }
        drop_fd(fd);
        if (sandlet_conn_respond(c, code, extra, (size_t)n, length, body,
                                 body ? (size_t)length : 0) < 0)
            sandlet_conn_fail(c, 500);
        else
            sandlet_conn_request_done(c);
        return;
    }
    if (sandlet_conn_respond(c, code, extra, (size_t)n, length, NULL, 0) < 0) {
        drop_fd(fd);
        sandlet_conn_fail(c, 500);
        return;
    }
    sandlet_conn_sending(c);
    sandlet_file_send *f = sandlet_conn_file(c);
    f->fd = fd;
    f->off = start;
    f->left = length;
    sandlet_files_pump(c);
}

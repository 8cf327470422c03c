/*
 * sl_test.c - libsandlet-test: runs a servlet in-process on synthetic
 * requests and captures the whole response (sandlet/test.h has the
 * design).  The servlet is driven through the same sandlet_lib_ calls as
 * sandletd's worker loop, and sessions use the sandbox's own store on a
 * private memfd, so what passes here behaves the same under the daemon.
 *
 * This file must never fork, never touch the network and never keep a
 * pointer into a request's arena past the run that made it: everything a
 * test reads afterwards is copied into memory the sl_test owns.
 */
#include "config.h"

#include "lib/servlet.h"
#include "sandbox/session_store.h"
#include <sandlet/test.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* One store per sl_test: 64 sessions is plenty for a test and small. */
#define TEST_STORE_SIZE      ((size_t)1024 * 1024)
#define TEST_SESSION_TIMEOUT 1800u

typedef struct kv {
    char *name;
    char *value;
} kv;

typedef struct kvlist {
    kv *v;
    size_t n, cap;
} kvlist;

/* Strings handed out by accessors, freed with their owner. */
typedef struct keeplist {
    char **v;
    size_t n, cap;
} keeplist;

struct sl_test {
    sandlet_lib_servlet run; /* loaded and initialised as a worker does */
    kvlist params;
    sandlet_lib_header *ctx_params;
    sandlet_session_store *store;
    void *db_store; /* a servlet that wants database sessions, once given a database */
    uint8_t key[SANDLET_SESSION_KEY_LEN]; /* this sl_test's sandbox key */
    kvlist jar;
    keeplist keep;
    sl_test_request *requests;
    sl_test_response *responses;
    /* One request and response reused for every run, reset in between,
     * exactly as a worker reuses its own: arena and buffer reuse across
     * requests is tested too. */
    sl_request rq;
    sl_response rs;
    bool rq_ready;
    /* What sl_log wrote while this sl_test ran the servlet. */
    char *log;
    size_t log_len, log_cap;
};

struct sl_test_request {
    sl_test *t;
    sl_test_request *prev, *next;
    char *method;
    char *target;
    char *peer;
    int version;
    kvlist headers;
    kvlist cookies;
    uint8_t *body;
    size_t body_len;
    bool form; /* Content-Type set by sl_test_request_form */
};

struct sl_test_response {
    sl_test *t;
    sl_test_response *prev, *next;
    int status;
    int result;
    kvlist headers;
    uint8_t *body;
    size_t len, cap;
    size_t pieces;
    keeplist keep;
};

static int capture(void *ctx, const sandlet_lib_output *out);

/* ---- small containers ----------------------------------------------------------- */

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        return NULL;
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static int kv_add(kvlist *l, const char *name, size_t nl, const char *value, size_t vl)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 8;
        kv *p = realloc(l->v, ncap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        l->v = p;
        l->cap = ncap;
    }
    char *n = dup_n(name, nl), *v = dup_n(value, vl);
    if (!n || !v) {
        free(n);
        free(v);
        return -ENOMEM;
    }
    l->v[l->n].name = n;
    l->v[l->n].value = v;
    l->n++;
    return 0;
}

static void kv_remove_at(kvlist *l, size_t i)
{
    free(l->v[i].name);
    free(l->v[i].value);
    memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(*l->v));
    l->n--;
}

static long kv_find(const kvlist *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* Replaces name's value, or adds it. */
static int kv_put(kvlist *l, const char *name, const char *value, size_t vl)
{
    long i = kv_find(l, name);
    if (i >= 0) {
        char *v = dup_n(value, vl);
        if (!v)
            return -ENOMEM;
        free(l->v[i].value);
        l->v[i].value = v;
        return 0;
    }
    return kv_add(l, name, strlen(name), value, vl);
}

static void kv_free(kvlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

static char *keep(keeplist *k, char *s)
{
    if (!s)
        return NULL;
    if (k->n == k->cap) {
        size_t ncap = k->cap ? k->cap * 2 : 8;
        char **p = realloc(k->v, ncap * sizeof(*p));
        if (!p) {
            free(s);
            return NULL;
        }
        k->v = p;
        k->cap = ncap;
    }
    return k->v[k->n++] = s;
}

static void keep_free(keeplist *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->v[i]);
    free(k->v);
    memset(k, 0, sizeof(*k));
}

/* Cookie names are HTTP tokens; values cookie-octets (RFC 6265), so that
 * nothing the jar sends can split or confuse the Cookie header. */
static bool token_char(unsigned char c)
{
    return isalnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static bool cookie_name_ok(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!token_char((unsigned char)*s))
            return false;
    return true;
}

static bool cookie_value_ok(const char *s)
{
    if (!s)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c <= 0x20 || c >= 0x7f || c == ';' || c == ',' || c == '\\')
            return false;
    }
    return true;
}

static bool header_text_ok(const char *s)
{
    return s && !strpbrk(s, "\r\n");
}

/* ---- sessions ---------------------------------------------------------------------- */

/* libsandlet keeps one session configuration per process (a worker has
 * one store); switch it to this sl_test's store and key before each run.
 * Cookie name, Path and MAC are made as in a worker of a sandbox called
 * SL_TEST_SANDBOX with no common route prefix. */
static void use_store(const sl_test *t)
{
    sandlet_session_config cfg = {.ops = &sandlet_session_memory_ops,
                                  .store = t->store,
                                  .max_data = SANDLET_SESSION_SLOT_DATA,
                                  .cookie_secure = false,
                                  .sandbox = SL_TEST_SANDBOX,
                                  .cookie_name = SL_TEST_SESSION_COOKIE,
                                  .cookie_path = "/"};
    if (t->db_store) {
        cfg.ops = &sandlet_lib_session_db_ops;
        cfg.store = t->db_store;
        cfg.max_data = SANDLET_SESSION_DB_DATA;
    }
    memcpy(cfg.key, t->key, sizeof(cfg.key));
    if (sandlet_lib_session_configure(&cfg) < 0)
        fprintf(stderr, "sl_test: cannot configure sessions\n");
}

/* ---- the servlet's log ------------------------------------------------------------- */

static void log_keep(void *ctx, const char *text, size_t len)
{
    sl_test *t = ctx;
    /* A test should see what a worker would have written, even when the
     * copy cannot be kept. */
    if (fwrite(text, 1, len, stderr) != len)
        clearerr(stderr);
    if (t->log_len + len + 1 > t->log_cap) {
        size_t cap = t->log_cap ? t->log_cap : 256;
        while (cap < t->log_len + len + 1)
            cap *= 2;
        char *p = realloc(t->log, cap);
        if (!p)
            return; /* sl_test_log then misses the line; stderr has it */
        t->log = p;
        t->log_cap = cap;
    }
    memcpy(t->log + t->log_len, text, len);
    t->log_len += len;
    t->log[t->log_len] = '\0';
}

const char *sl_test_log(const sl_test *t)
{
    return t && t->log ? t->log : "";
}

void sl_test_log_clear(sl_test *t)
{
    if (t)
        t->log_len = 0;
    if (t && t->log)
        t->log[0] = '\0';
}

/* ---- loading ------------------------------------------------------------------------ */

sl_test *sl_test_new(const sl_servlet *servlet, const char *const *params)
{
    /* No check for .service: which handlers a servlet needs is
     * sandlet_lib_run's business (it answers 500 for a missing one). */
    if (!servlet) {
        errno = EINVAL;
        return NULL;
    }
    sl_test *t = calloc(1, sizeof(*t));
    if (!t) {
        errno = ENOMEM;
        return NULL;
    }
    sandlet_lib_servlet_use(&t->run, servlet);
    sandlet_lib_request_init(&t->rq);
    sandlet_lib_response_init(&t->rs, &t->rq, capture, NULL);
    t->rq_ready = true;
    int rc = 0;
    for (size_t i = 0; params && params[i] && rc == 0; i += 2) {
        if (!params[i + 1]) {
            fprintf(stderr, "sl_test: param '%s' has no value\n", params[i]);
            rc = -EINVAL;
            break;
        }
        rc = kv_add(&t->params, params[i], strlen(params[i]), params[i + 1], strlen(params[i + 1]));
    }
    if (rc == 0) {
        t->ctx_params = calloc(t->params.n ? t->params.n : 1, sizeof(*t->ctx_params));
        if (!t->ctx_params)
            rc = -ENOMEM;
    }
    if (rc < 0) {
        sl_test_free(t);
        errno = -rc;
        return NULL;
    }
    for (size_t i = 0; i < t->params.n; i++) {
        t->ctx_params[i].name = t->params.v[i].name;
        t->ctx_params[i].value = t->params.v[i].value;
    }
    sandlet_lib_servlet_params(&t->run, t->ctx_params, t->params.n);

    int fd = sandlet_session_key_make(NULL, SL_TEST_SANDBOX, t->key);
    if (fd == 0)
        fd = sandlet_session_store_create("sl_test", TEST_STORE_SIZE);
    if (fd >= 0) {
        t->store = sandlet_session_store_attach(fd, TEST_SESSION_TIMEOUT);
        int saved = errno;
        close(fd);
        errno = saved;
    } else {
        errno = -fd;
    }
    if (!t->store) {
        fprintf(stderr, "sl_test: cannot make a session store: %s\n", strerror(errno));
        int saved = errno;
        sl_test_free(t);
        errno = saved;
        return NULL;
    }
    use_store(t);
    sandlet_lib_log_to(log_keep, t);
    rc = sandlet_lib_servlet_init(&t->run);
    sandlet_lib_log_to(NULL, NULL);
    if (rc < 0) {
        fprintf(stderr, "sl_test: the servlet's init returned %d\n", rc);
        sl_test_free(t);
        errno = ECANCELED;
        return NULL;
    }
    return t;
}

sl_test *sl_test_load(const char *path, const char *const *params)
{
    if (!path) {
        errno = EINVAL;
        return NULL;
    }
    /* "guest.so" means the file here, as a shell would take it: dlopen
     * would look for a name without '/' only in the library path. */
    char here[PATH_MAX];
    if (!strchr(path, '/') && access(path, F_OK) == 0 &&
        (size_t)snprintf(here, sizeof(here), "./%s", path) < sizeof(here))
        path = here;
    /* No handler check, as in sl_test_new. */
    sandlet_lib_servlet lib = {0};
    char err[512];
    int rc = sandlet_lib_servlet_open(&lib, path, "library", false, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "sl_test: %s\n", err);
        errno = rc == -EPROTO ? EPROTO : ENOENT;
        return NULL;
    }
    sl_test *t = sl_test_new(lib.servlet, params);
    if (!t) {
        int saved = errno;
        sandlet_lib_servlet_close(&lib);
        errno = saved;
        return NULL;
    }
    /* Closed with the sl_test, after the servlet's destroy. */
    t->run.handle = lib.handle;
    return t;
}

int sl_test_database(sl_test *t, const char *conninfo, const char *password)
{
    sandlet_lib_db_close();
    if (t)
        t->db_store = NULL;
    if (!conninfo)
        return 0;
    /* A servlet that asks for database sessions gets them here too, in
     * the sandlet_sessions table of this database (sandbox SL_TEST_SANDBOX). */
    if (t && t->run.servlet && t->run.servlet->session == SL_SESSION_DATABASE &&
        !(t->db_store = sandlet_lib_session_db_store(SL_TEST_SANDBOX, TEST_SESSION_TIMEOUT))) {
        fprintf(stderr, "sl_test_database: out of memory\n");
        return -1;
    }
    char err[512];
    if (sandlet_lib_db_open(conninfo, password, err, sizeof(err)) < 0) {
        fprintf(stderr, "sl_test_database: %s\n", err);
        return -1;
    }
    return 0;
}

void sl_test_free(sl_test *t)
{
    if (!t)
        return;
    if (t->run.initialised && t->run.servlet->destroy) {
        use_store(t);
        sandlet_lib_servlet_destroy(&t->run);
    }
    while (t->requests)
        sl_test_request_free(t->requests);
    while (t->responses)
        sl_test_response_free(t->responses);
    sandlet_lib_session_configure(NULL);
    if (t->rq_ready) {
        sandlet_lib_response_free(&t->rs);
        sandlet_lib_request_free(&t->rq);
    }
    if (t->store)
        sandlet_session_store_detach(t->store);
    sandlet_lib_servlet_close(&t->run);
    kv_free(&t->params);
    kv_free(&t->jar);
    keep_free(&t->keep);
    free(t->ctx_params);
    free(t->log);
    free(t);
}

/* ---- requests ---------------------------------------------------------------------- */

sl_test_request *sl_test_request_new(sl_test *t, const char *method, const char *target)
{
    if (!t || !method || !target || !header_text_ok(method) || !header_text_ok(target)) {
        errno = EINVAL;
        return NULL;
    }
    sl_test_request *r = calloc(1, sizeof(*r));
    if (!r) {
        errno = ENOMEM;
        return NULL;
    }
    r->t = t;
    r->version = 11;
    r->method = strdup(method);
    r->target = strdup(target);
    r->peer = strdup("127.0.0.1:40000");
    if (!r->method || !r->target || !r->peer) {
        free(r->method);
        free(r->target);
        free(r->peer);
        free(r);
        errno = ENOMEM;
        return NULL;
    }
    r->next = t->requests;
    if (t->requests)
        t->requests->prev = r;
    t->requests = r;
    return r;
}

void sl_test_request_free(sl_test_request *r)
{
    if (!r)
        return;
    if (r->prev)
        r->prev->next = r->next;
    else
        r->t->requests = r->next;
    if (r->next)
        r->next->prev = r->prev;
    free(r->method);
    free(r->target);
    free(r->peer);
    kv_free(&r->headers);
    kv_free(&r->cookies);
    free(r->body);
    free(r);
}

int sl_test_request_header(sl_test_request *r, const char *name, const char *value)
{
    if (!r || !name || !*name || !header_text_ok(name) || !header_text_ok(value))
        return -EINVAL;
    return kv_add(&r->headers, name, strlen(name), value, strlen(value));
}

int sl_test_request_cookie(sl_test_request *r, const char *name, const char *value)
{
    if (!r || !cookie_name_ok(name) || !cookie_value_ok(value))
        return -EINVAL;
    return kv_put(&r->cookies, name, value, strlen(value));
}

int sl_test_request_body(sl_test_request *r, const void *body, size_t len)
{
    if (!r || (!body && len))
        return -EINVAL;
    uint8_t *p = malloc(len ? len : 1);
    if (!p)
        return -ENOMEM;
    if (len)
        memcpy(p, body, len);
    free(r->body);
    r->body = p;
    r->body_len = len;
    return 0;
}

/* Appends s URL-encoded (form rules: space as '+') to buf at *n. */
static size_t url_encode(char *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            if (out)
                out[n] = (char)c;
            n++;
        } else if (c == ' ') {
            if (out)
                out[n] = '+';
            n++;
        } else {
            if (out) {
                out[n] = '%';
                out[n + 1] = hex[c >> 4];
                out[n + 2] = hex[c & 15];
            }
            n += 3;
        }
    }
    return n;
}

int sl_test_request_form(sl_test_request *r, const char *name, const char *value)
{
    if (!r || !name || !value)
        return -EINVAL;
    size_t nl = url_encode(NULL, name), vl = url_encode(NULL, value);
    size_t sep = r->body_len ? 1 : 0;
    size_t total = r->body_len + sep + nl + 1 + vl;
    uint8_t *p = realloc(r->body, total + 1);
    if (!p)
        return -ENOMEM;
    r->body = p;
    char *o = (char *)p + r->body_len;
    if (sep)
        *o++ = '&';
    o += url_encode(o, name);
    *o++ = '=';
    url_encode(o, value);
    r->body_len = total;
    if (!r->form) {
        for (size_t i = r->headers.n; i-- > 0;)
            if (strcasecmp(r->headers.v[i].name, "Content-Type") == 0)
                kv_remove_at(&r->headers, i);
        static const char ct[] = "application/x-www-form-urlencoded";
        int rc = kv_add(&r->headers, "Content-Type", 12, ct, sizeof(ct) - 1);
        if (rc < 0)
            return rc;
        r->form = true;
    }
    return 0;
}

int sl_test_request_peer(sl_test_request *r, const char *peer)
{
    if (!r || !peer)
        return -EINVAL;
    char *p = strdup(peer);
    if (!p)
        return -ENOMEM;
    free(r->peer);
    r->peer = p;
    return 0;
}

int sl_test_request_version(sl_test_request *r, int version)
{
    if (!r || (version != 10 && version != 11))
        return -EINVAL;
    r->version = version;
    return 0;
}

/* ---- running ----------------------------------------------------------------------- */

/* The sink: copies every piece into the response, since the request's
 * arena and the response's buffer are reused or freed after the run. */
static int capture(void *ctx, const sandlet_lib_output *out)
{
    sl_test_response *rs = ctx;
    rs->pieces++;
    if (out->head) {
        rs->status = out->status;
        for (size_t i = 0; i < out->nheaders; i++) {
            const sandlet_lib_header *h = &out->headers[i];
            if (kv_add(&rs->headers, h->name, strlen(h->name), h->value, strlen(h->value)) < 0)
                return -ENOMEM;
        }
    }
    if (out->body_len) {
        if (out->body_len > SIZE_MAX - rs->len - 1)
            return -EOVERFLOW;
        size_t need = rs->len + out->body_len + 1;
        if (need > rs->cap) {
            size_t ncap = rs->cap ? rs->cap : 4096;
            while (ncap < need)
                ncap *= 2;
            uint8_t *p = realloc(rs->body, ncap);
            if (!p)
                return -ENOMEM;
            rs->body = p;
            rs->cap = ncap;
        }
        memcpy(rs->body + rs->len, out->body, out->body_len);
        rs->len += out->body_len;
        rs->body[rs->len] = '\0';
    }
    return 0;
}

/* "a=1; b=2" from the jar, with the request's own cookies winning. */
static char *cookie_header(const sl_test *t, const sl_test_request *r)
{
    size_t total = 0;
    for (size_t i = 0; i < t->jar.n; i++)
        total += strlen(t->jar.v[i].name) + strlen(t->jar.v[i].value) + 3;
    for (size_t i = 0; i < r->cookies.n; i++)
        total += strlen(r->cookies.v[i].name) + strlen(r->cookies.v[i].value) + 3;
    if (total == 0)
        return NULL;
    char *s = malloc(total + 1);
    if (!s)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < t->jar.n + r->cookies.n; i++) {
        const kv *c = i < t->jar.n ? &t->jar.v[i] : &r->cookies.v[i - t->jar.n];
        if (i < t->jar.n && kv_find(&r->cookies, c->name) >= 0)
            continue;
        n += (size_t)snprintf(s + n, total + 1 - n, "%s%s=%s", n ? "; " : "", c->name, c->value);
    }
    return s;
}

static void trim(const char **b, const char **e)
{
    while (*b < *e && (**b == ' ' || **b == '\t'))
        (*b)++;
    while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
        (*e)--;
}

/* True when an Expires date lies in the past (unparsable: not expired,
 * as a browser would keep the cookie for the session). */
static bool expires_past(const char *v, size_t len)
{
    char buf[64];
    if (len >= sizeof(buf))
        return false;
    memcpy(buf, v, len);
    buf[len] = '\0';
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end)
        return false;
    return timegm(&tm) <= time(NULL);
}

/* Splits a Set-Cookie value into name, value and the attributes' start;
 * false when malformed.  *remove: Max-Age <= 0 or a past Expires. */
static bool parse_set_cookie(const char *sc, const char **nb, size_t *nl, const char **vb,
                             size_t *vl, const char **attrs, bool *remove)
{
    const char *eq = strchr(sc, '=');
    const char *semi = strchr(sc, ';');
    if (!eq || (semi && semi < eq))
        return false;
    const char *b = sc, *e = eq;
    trim(&b, &e);
    if (b == e)
        return false;
    *nb = b;
    *nl = (size_t)(e - b);
    b = eq + 1;
    e = semi ? semi : sc + strlen(sc);
    trim(&b, &e);
    *vb = b;
    *vl = (size_t)(e - b);
    *remove = false;
    *attrs = semi ? semi + 1 : "";
    while (**attrs == ' ')
        (*attrs)++;
    for (const char *a = semi; a && *a;) {
        a++;
        const char *next = strchr(a, ';');
        const char *ab = a, *ae = next ? next : a + strlen(a);
        trim(&ab, &ae);
        size_t al = (size_t)(ae - ab);
        if (al > 8 && strncasecmp(ab, "Max-Age=", 8) == 0 && strtoll(ab + 8, NULL, 10) <= 0)
            *remove = true;
        if (al > 8 && strncasecmp(ab, "Expires=", 8) == 0 && expires_past(ab + 8, al - 8))
            *remove = true;
        a = next;
    }
    return true;
}

static void jar_update(sl_test *t, const sl_test_response *rs)
{
    for (size_t i = 0; i < rs->headers.n; i++) {
        if (strcasecmp(rs->headers.v[i].name, "Set-Cookie") != 0)
            continue;
        const char *nb, *vb, *attrs;
        size_t nl, vl;
        bool remove;
        if (!parse_set_cookie(rs->headers.v[i].value, &nb, &nl, &vb, &vl, &attrs, &remove))
            continue;
        char *name = dup_n(nb, nl);
        if (!name)
            continue;
        long at = kv_find(&t->jar, name);
        if (remove) {
            if (at >= 0)
                kv_remove_at(&t->jar, (size_t)at);
        } else {
            kv_put(&t->jar, name, vb, vl);
        }
        free(name);
    }
}

/* The request's headers, then the Cookie header the jar makes. */
typedef struct header_walk {
    const sl_test_request *r;
    const char *cookies; /* NULL: none */
    size_t i;
} header_walk;

static bool next_header(void *ctx, const char **name, const char **value)
{
    header_walk *hw = ctx;
    size_t i = hw->i++;
    if (i < hw->r->headers.n) {
        *name = hw->r->headers.v[i].name;
        *value = hw->r->headers.v[i].value;
        return true;
    }
    if (i == hw->r->headers.n && hw->cookies) {
        *name = "Cookie";
        *value = hw->cookies;
        return true;
    }
    return false;
}

sl_test_response *sl_test_run(sl_test_request *r)
{
    if (!r) {
        errno = EINVAL;
        return NULL;
    }
    sl_test *t = r->t;
    sl_test_response *rs = calloc(1, sizeof(*rs));
    if (!rs) {
        errno = ENOMEM;
        return NULL;
    }
    rs->t = t;
    char *cookies = cookie_header(t, r);
    sl_request *rq = &t->rq;
    sl_response *out = &t->rs;
    out->sink_ctx = rs;
    header_walk hw = {r, cookies, 0};
    sandlet_lib_call call = {.method = r->method,
                             .target = r->target,
                             .target_len = strlen(r->target),
                             .peer = r->peer,
                             .version = r->version,
                             .next_header = next_header,
                             .ctx = &hw,
                             .body = r->body,
                             .body_len = r->body_len};
    use_store(t);
    sandlet_lib_log_to(log_keep, t);
    int rc = sandlet_lib_serve(t->run.servlet, rq, out, &call, &rs->result);
    sandlet_lib_log_to(NULL, NULL);
    /* Nothing of the run may be reached through them any more. */
    sandlet_lib_serve_end(rq, out);
    out->sink_ctx = NULL;
    free(cookies);
    if (rc < 0) {
        kv_free(&rs->headers);
        free(rs->body);
        free(rs);
        errno = -rc;
        return NULL;
    }
    if (!rs->body) {
        rs->body = calloc(1, 1);
        if (!rs->body) {
            kv_free(&rs->headers);
            free(rs);
            errno = ENOMEM;
            return NULL;
        }
        rs->cap = 1;
    }
    jar_update(t, rs);
    rs->next = t->responses;
    if (t->responses)
        t->responses->prev = rs;
    t->responses = rs;
    return rs;
}

sl_test_response *sl_test_get(sl_test *t, const char *target)
{
    sl_test_request *r = sl_test_request_new(t, "GET", target);
    if (!r)
        return NULL;
    sl_test_response *rs = sl_test_run(r);
    sl_test_request_free(r);
    return rs;
}

sl_test_response *sl_test_post_form(sl_test *t, const char *target, const char *body)
{
    sl_test_request *r = sl_test_request_new(t, "POST", target);
    if (!r)
        return NULL;
    sl_test_response *rs = NULL;
    if (sl_test_request_header(r, "Content-Type", "application/x-www-form-urlencoded") == 0 &&
        sl_test_request_body(r, body ? body : "", body ? strlen(body) : 0) == 0)
        rs = sl_test_run(r);
    else
        errno = ENOMEM;
    sl_test_request_free(r);
    return rs;
}

/* ---- responses ------------------------------------------------------------------------ */

int sl_test_status(const sl_test_response *rs)
{
    return rs ? rs->status : 0;
}

int sl_test_result(const sl_test_response *rs)
{
    return rs ? rs->result : -EINVAL;
}

const void *sl_test_body(const sl_test_response *rs, size_t *len)
{
    if (len)
        *len = rs ? rs->len : 0;
    return rs ? (const void *)rs->body : (const void *)"";
}

const char *sl_test_body_str(const sl_test_response *rs)
{
    return rs ? (const char *)rs->body : "";
}

size_t sl_test_body_len(const sl_test_response *rs)
{
    return rs ? rs->len : 0;
}

size_t sl_test_pieces(const sl_test_response *rs)
{
    return rs ? rs->pieces : 0;
}

size_t sl_test_header_count(const sl_test_response *rs)
{
    return rs ? rs->headers.n : 0;
}

int sl_test_header_at(const sl_test_response *rs, size_t i, const char **name, const char **value)
{
    if (!rs || i >= rs->headers.n)
        return -ERANGE;
    if (name)
        *name = rs->headers.v[i].name;
    if (value)
        *value = rs->headers.v[i].value;
    return 0;
}

const char *sl_test_header_nth(const sl_test_response *rs, const char *name, size_t n)
{
    if (!rs || !name)
        return NULL;
    for (size_t i = 0; i < rs->headers.n; i++)
        if (strcasecmp(rs->headers.v[i].name, name) == 0 && n-- == 0)
            return rs->headers.v[i].value;
    return NULL;
}

const char *sl_test_header(const sl_test_response *rs, const char *name)
{
    return sl_test_header_nth(rs, name, 0);
}

size_t sl_test_header_repeats(const sl_test_response *rs, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; rs && name && i < rs->headers.n; i++)
        if (strcasecmp(rs->headers.v[i].name, name) == 0)
            n++;
    return n;
}

const char *sl_test_set_cookie(const sl_test_response *rs, const char *name, const char **attrs)
{
    if (!rs || !name)
        return NULL;
    sl_test_response *w = (sl_test_response *)rs; /* the keep list is a cache */
    for (size_t i = rs->headers.n; i-- > 0;) {
        if (strcasecmp(rs->headers.v[i].name, "Set-Cookie") != 0)
            continue;
        const char *nb, *vb, *a;
        size_t nl, vl;
        bool remove;
        if (!parse_set_cookie(rs->headers.v[i].value, &nb, &nl, &vb, &vl, &a, &remove) ||
            nl != strlen(name) || memcmp(nb, name, nl) != 0)
            continue;
        if (attrs)
            *attrs = a;
        return keep(&w->keep, dup_n(vb, vl));
    }
    return NULL;
}

void sl_test_response_free(sl_test_response *rs)
{
    if (!rs)
        return;
    if (rs->prev)
        rs->prev->next = rs->next;
    else
        rs->t->responses = rs->next;
    if (rs->next)
        rs->next->prev = rs->prev;
    kv_free(&rs->headers);
    keep_free(&rs->keep);
    free(rs->body);
    free(rs);
}

/* ---- jar and session ----------------------------------------------------------------- */

const char *sl_test_cookie(const sl_test *t, const char *name)
{
    if (!t || !name)
        return NULL;
    long i = kv_find(&t->jar, name);
    return i >= 0 ? t->jar.v[i].value : NULL;
}

int sl_test_jar_set(sl_test *t, const char *name, const char *value)
{
    if (!t || !cookie_name_ok(name))
        return -EINVAL;
    if (!value) {
        long i = kv_find(&t->jar, name);
        if (i >= 0)
            kv_remove_at(&t->jar, (size_t)i);
        return 0;
    }
    if (!cookie_value_ok(value))
        return -EINVAL;
    return kv_put(&t->jar, name, value, strlen(value));
}

void sl_test_jar_clear(sl_test *t)
{
    if (t)
        kv_free(&t->jar);
}

const char *sl_test_session_id(const sl_test *t)
{
    return sl_test_cookie(t, SL_TEST_SESSION_COOKIE);
}

static int null_sink(void *ctx, const sandlet_lib_output *out)
{
    (void)ctx;
    (void)out;
    return 0;
}

/* One operation on the jar's session, done through libsandlet's own
 * session code on a scratch request, so the harness reads and writes
 * exactly as a servlet would. */
typedef struct session_call {
    const char *key;
    const void *set; /* value to store, or NULL to read key */
    size_t set_len;
    bool create; /* make a session when the jar names none */
    bool found;
    int rc;
    char *copy; /* read value, NUL-terminated */
    size_t len;
} session_call;

static void session_do(sl_test *t, session_call *c)
{
    const char *id = sl_test_session_id(t);
    if (!id && !c->create) {
        c->rc = -ENOENT;
        return;
    }
    char *cookie = NULL;
    if (id) {
        size_t n = strlen(id) + sizeof(SL_TEST_SESSION_COOKIE) + 1;
        cookie = malloc(n);
        if (!cookie) {
            c->rc = -ENOMEM;
            return;
        }
        snprintf(cookie, n, SL_TEST_SESSION_COOKIE "=%s", id);
    }
    sl_request rq;
    sl_response rs;
    sandlet_lib_request_init(&rq);
    sandlet_lib_response_init(&rs, &rq, null_sink, NULL);
    static const char target[] = "/";
    c->rc = sandlet_lib_request_set(&rq, "GET", target, 1, "127.0.0.1:40000", 11);
    if (c->rc == 0 && cookie)
        c->rc = sandlet_lib_request_add_header(&rq, "Cookie", cookie);
    if (c->rc == 0) {
        use_store(t);
        sl_session *s = sl_session_get(&rq, &rs, c->create);
        c->found = s != NULL;
        if (!s) {
            c->rc = c->create ? -errno : -ENOENT;
        } else if (c->set) {
            c->rc = sl_session_set_bytes(s, c->key, c->set, c->set_len);
            /* A session made here is the jar's from now on. */
            if (c->rc == 0)
                c->rc = sl_test_jar_set(t, SL_TEST_SESSION_COOKIE, sl_session_id(s));
        } else if (c->key) {
            size_t n = 0;
            const void *v = sl_session_bytes(s, c->key, &n);
            if (v && (c->copy = malloc(n + 1)) != NULL) {
                memcpy(c->copy, v, n);
                c->copy[n] = '\0';
                c->len = n;
            }
        }
        /* As at the end of a request: a store that saves then (database
         * sessions) saves now and lets the session go. */
        int status = 200;
        if (sandlet_lib_session_request_end(&rs, &status) && c->rc == 0)
            c->rc = -EAGAIN;
    }
    sandlet_lib_response_free(&rs);
    sandlet_lib_request_free(&rq);
    free(cookie);
}

const void *sl_test_session_bytes(sl_test *t, const char *key, size_t *len)
{
    if (!t || !key)
        return NULL;
    session_call c = {.key = key};
    session_do(t, &c);
    if (c.copy && len)
        *len = c.len;
    return keep(&t->keep, c.copy);
}

const char *sl_test_session_str(sl_test *t, const char *key)
{
    return sl_test_session_bytes(t, key, NULL);
}

bool sl_test_session_exists(sl_test *t)
{
    if (!t)
        return false;
    session_call c = {0};
    session_do(t, &c);
    return c.found;
}

int sl_test_session_set_bytes(sl_test *t, const char *key, const void *data, size_t len)
{
    if (!t || !key || (!data && len))
        return -EINVAL;
    session_call c = {.key = key, .set = data ? data : "", .set_len = len, .create = true};
    session_do(t, &c);
    return c.rc;
}

int sl_test_session_set_str(sl_test *t, const char *key, const char *value)
{
    if (!value)
        return -EINVAL;
    return sl_test_session_set_bytes(t, key, value, strlen(value));
}

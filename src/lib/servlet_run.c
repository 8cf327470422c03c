/*
 * servlet_run.c - a servlet's life as every driver sees it: open its
 * shared object and check what it declares (descriptor, ABI, handlers),
 * run init with its parameters and destroy at the end, and drive one
 * request (build it, pick the handler for its method, run it between the
 * database's and the session store's request hooks, finish the response,
 * clear it afterwards).
 * sandletd's worker and libsandlet-test both call these, so a servlet
 * that passes under the test harness was loaded and run by the same code.
 *
 * This file must never decide when a servlet is loaded or by whom (the
 * worker confines itself first; that ordering is the worker's), never
 * print (the callers word and route their own messages: the worker's go
 * to the acceptor's log, the harness's to stderr), and never know about
 * frames or sockets.
 */
#include "config.h"

#include "lib/servlet.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* What to do about dlopen's complaint why: a servlet that was built as a
 * shared object but calls what nothing defines needs its code or its
 * libraries fixed, not other compiler flags (issue 31). */
static const char *load_advice(const char *lib, const char *why)
{
    if (!why)
        return "expected a servlet built as a shared object";
    if (strstr(why, "undefined symbol"))
        return "the servlet uses a function or variable that neither it nor a library it is "
               "linked with defines: check the name's spelling, define it in the servlet, or "
               "link the servlet with the library that defines it";
    if (strstr(why, lib) && strstr(why, "No such file"))
        return "build it, or fix the 'library' path";
    /* dlerror names the file it could not open first: when that is not
     * the servlet itself, it is a library the servlet needs. */
    if (strncmp(why, lib, strlen(lib)) != 0 && strstr(why, "cannot open shared object file"))
        return "the library named first is one the servlet was linked with, and it is not "
               "installed or not in the system's library path (ldconfig): install it, or link "
               "the servlet with -Wl,-rpath,DIR for a library of your own";
    return "expected a servlet built as a shared object: cc -shared -fPIC -o NAME.so NAME.c "
           "$(pkg-config --cflags --libs sandlet)";
}

int sandlet_lib_servlet_open(sandlet_lib_servlet *s, const char *lib, const char *host,
                             bool need_handler, char *err, size_t errlen)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* dlerror's text is all there is: no errno, and a worker may not
         * stat the file to tell a missing one from a broken one. */
        const char *why = dlerror();
        snprintf(err, errlen, "cannot load %s: %s (%s)", lib, why ? why : "unknown error",
                 load_advice(lib, why));
        return -ENOENT;
    }
    const unsigned *abi = dlsym(h, "sl_servlet_abi");
    const sl_servlet *servlet = dlsym(h, "sl_servlet_descriptor");
    int rc = 0;
    if (!abi || !servlet) {
        snprintf(err, errlen, "%s defines no servlet (declare one with SL_SERVLET)", lib);
        rc = -ENOEXEC;
    } else if (*abi != SL_ABI_VERSION) {
        snprintf(err, errlen,
                 "%s was built for servlet ABI %u, this %s has %u (rebuild it against this "
                 "release's <sandlet/servlet.h>)",
                 lib, *abi, host, (unsigned)SL_ABI_VERSION);
        rc = -EPROTO;
    } else if (need_handler && !sandlet_lib_servlet_runnable(servlet)) {
        snprintf(err, errlen,
                 "%s has no handler; set .service, or a per-method handler such "
                 "as .get or .post, in its SL_SERVLET descriptor",
                 lib);
        rc = -EINVAL;
    }
    if (rc < 0) {
        dlclose(h);
        return rc;
    }
    s->handle = h;
    s->servlet = servlet;
    s->initialised = false;
    return 0;
}

void sandlet_lib_servlet_use(sandlet_lib_servlet *s, const sl_servlet *servlet)
{
    memset(s, 0, sizeof(*s));
    s->servlet = servlet;
}

void sandlet_lib_servlet_params(sandlet_lib_servlet *s, const sandlet_lib_header *params,
                                size_t nparams)
{
    s->ctx.params = params;
    s->ctx.nparams = nparams;
}

int sandlet_lib_servlet_init(sandlet_lib_servlet *s)
{
    int rc;
    if (s->servlet->init && (rc = s->servlet->init(&s->ctx)) < 0)
        return rc;
    s->initialised = true;
    return 0;
}

void sandlet_lib_servlet_destroy(sandlet_lib_servlet *s)
{
    /* Only what init set up is torn down: a servlet whose init failed or
     * never ran has nothing for destroy to release. */
    if (s->initialised && s->servlet->destroy)
        s->servlet->destroy();
    s->initialised = false;
}

void sandlet_lib_servlet_close(sandlet_lib_servlet *s)
{
    if (s->handle)
        dlclose(s->handle);
    s->handle = NULL;
    s->servlet = NULL;
}

int sandlet_lib_serve(const sl_servlet *servlet, sl_request *rq, sl_response *rs,
                      const sandlet_lib_call *call, int *result)
{
    /* Whatever the last request left is gone before this one is built. */
    sandlet_lib_request_reset(rq);
    sandlet_lib_response_reset(rs);
    int rc = sandlet_lib_request_set(rq, call->method, call->target, call->target_len, call->peer,
                                     call->version);
    const char *name, *value;
    while (rc == 0 && call->next_header && call->next_header(call->ctx, &name, &value))
        rc = sandlet_lib_request_add_header(rq, name, value);
    sandlet_lib_request_set_body(rq, call->body, call->body_len);
    if (call->body_pull)
        sandlet_lib_request_set_body_pull(rq, call->body_pull, call->body_ctx);
    if (rc < 0)
        return rc;
    *result = sandlet_lib_run(servlet, rq, rs);
    return 0;
}

void sandlet_lib_serve_end(sl_request *rq, sl_response *rs)
{
    sandlet_lib_response_reset(rs);
    sandlet_lib_request_reset(rq);
}

/* ---- one request: the handler for its method, and what surrounds it ---- */

/* The per-method handlers, in the order Allow lists them. */
typedef struct method_slot {
    const char *name;
    size_t offset;
} method_slot;

static const method_slot methods[] = {
    {"GET", offsetof(sl_servlet, get)},         {"HEAD", offsetof(sl_servlet, head)},
    {"POST", offsetof(sl_servlet, post)},       {"PUT", offsetof(sl_servlet, put)},
    {"DELETE", offsetof(sl_servlet, delete)},   {"PATCH", offsetof(sl_servlet, patch)},
    {"OPTIONS", offsetof(sl_servlet, options)},
};

static sl_handler slot(const sl_servlet *s, const method_slot *m)
{
    sl_handler h;
    memcpy(&h, (const char *)s + m->offset, sizeof(h));
    return h;
}

bool sandlet_lib_servlet_runnable(const sl_servlet *servlet)
{
    if (servlet->service)
        return true;
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (slot(servlet, &methods[i]))
            return true;
    return false;
}

void sandlet_lib_allow(const sl_servlet *servlet, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        const method_slot *m = &methods[i];
        bool has = slot(servlet, m) != NULL;
        if (strcmp(m->name, "HEAD") == 0)
            has = has || servlet->get;
        else if (strcmp(m->name, "OPTIONS") == 0)
            has = true; /* answered with 204 when the servlet does not */
        if (!has)
            continue;
        int n = snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", m->name);
        if (n < 0 || (size_t)n >= cap - o)
            return; /* cap too small: a shorter list rather than overflow */
        o += (size_t)n;
    }
}

/* The handler for rq's method, or NULL when the servlet has none. */
static sl_handler pick(const sl_servlet *servlet, const char *method)
{
    if (servlet->service)
        return servlet->service;
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strcmp(methods[i].name, method) == 0) {
            sl_handler h = slot(servlet, &methods[i]);
            if (!h && strcmp(method, "HEAD") == 0)
                h = servlet->get;
            return h;
        }
    return NULL;
}

int sandlet_lib_run(const sl_servlet *servlet, sl_request *rq, sl_response *rs)
{
    sl_handler h = pick(servlet, rq->method);
    int status;
    sandlet_lib_db_request_start(rq);
    if (h) {
        status = h(rq, rs);
    } else {
        /* No allocation but the header's copy: the list fits on the
         * stack. */
        char allow[64];
        sandlet_lib_allow(servlet, allow, sizeof(allow));
        sl_set_header(rs, "Allow", allow);
        if (strcmp(rq->method, "OPTIONS") == 0) {
            status = 204;
        } else {
            status = 405;
            sl_set_content_type(rs, "text/plain; charset=utf-8");
            sl_puts(rs, "405 Method Not Allowed\n");
        }
    }
    if (status < 200 || status > 599) {
        /* Not a final status (see sl_set_status): the servlet's bug,
         * told to its author on the worker's stderr, which the daemon
         * logs under the sandbox's name. */
        fprintf(stderr,
                "libsandlet: a handler returned status %d, which is not a final HTTP status "
                "(200-599); answering 502\n",
                status);
        status = 502;
        if (!rs->head_sent) {
            rs->status = 502;
            rs->body_len = 0;
        }
    }
    /* The handler's own transaction ends first: the session store
     * writes on the same connection.  A handler that failed because the
     * database is down answers 503 with Retry-After (the client may come
     * back, unlike after a 500), as does any request whose session could
     * not be read or saved. */
    sandlet_lib_db_rollback_open();
    if (!sandlet_lib_session_request_end(rs, &status))
        sandlet_lib_db_answer_unavailable(rs, &status, false);
    int rc = sandlet_lib_response_finish(rs, status);
    sandlet_lib_db_request_end();
    return rc;
}

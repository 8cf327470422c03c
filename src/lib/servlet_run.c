/*
 * servlet_run.c - a servlet's life as every driver sees it: open its
 * shared object and check what it declares (descriptor, ABI, handlers),
 * run init with its parameters and destroy at the end, and drive one
 * request (build it, dispatch to the servlet, clear it afterwards).
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
#include <stdio.h>
#include <string.h>

int sandlet_lib_servlet_open(sandlet_lib_servlet *s, const char *lib, const char *host,
                             bool need_handler, char *err, size_t errlen)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* dlerror's text is all there is: no errno, and a worker may not
         * stat the file to tell a missing one from a broken one. */
        const char *why = dlerror();
        snprintf(err, errlen, "cannot load %s: %s (%s)", lib, why,
                 why && strstr(why, lib) && strstr(why, "No such file")
                     ? "build it, or fix the 'library' path"
                     : "expected a servlet built as a shared object: cc -shared -fPIC -o "
                       "NAME.so NAME.c $(pkg-config --cflags --libs sandlet); a library it "
                       "needs that is not found is named before");
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

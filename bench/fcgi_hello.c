/*
 * fcgi_hello.c - the FastCGI peer of the benchmark servlets (bench/run runs
 * it under spawn-fcgi behind nginx).  One program answers the three paths
 * the sandlet servlets serve, with the same bodies and content types:
 *   /hello      "Hello, world\n"                 text/plain   (bench_hello.c)
 *   /plaintext  "Hello, World!"                  text/plain   (te_plaintext.c)
 *   /json       {"message":"Hello, World!"}      application/json (te_json.c)
 *   /libcall    calc_step from libcalc n times   text/plain   (examples/libcall)
 * anything else gets 404.  Built with libfcgi by bench/run only; it must
 * never do more per request than its sandlet counterpart (no logging).
 */
#include "json_write.h"
#include <calc.h>
#include <errno.h>
#include <fcgiapp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* examples/libcall's loop with its bounds: n from "n=" in the query
 * (1..10000000, default 1000), seed 0.  -1 on a bad n. */
static int libcall(FCGX_Request *rq, char *out, size_t cap)
{
    const char *q = FCGX_GetParam("QUERY_STRING", rq->envp);
    unsigned long n = 1000;
    const char *p = q ? strstr(q, "n=") : NULL;
    if (p && (p == q || p[-1] == '&')) {
        char *end;
        errno = 0;
        n = strtoul(p + 2, &end, 10);
        if (errno || (*end && *end != '&') || n < 1 || n > 10000000ul)
            return -1;
    }
    uint32_t acc = 0;
    for (unsigned long i = 0; i < n; i++)
        acc = calc_step(acc, (uint32_t)i);
    int k = snprintf(out, cap, "calc_step called %lu times: %u\n", n, (unsigned)acc);
    return k > 0 && (size_t)k < cap ? k : -1;
}

static int reply(FCGX_Stream *out, const char *status, const char *type, const char *body,
                 size_t len)
{
    /* libfcgi's own formatter knows %lu but not %zu. */
    if (FCGX_FPrintF(out, "Status: %s\r\nContent-Type: %s\r\nContent-Length: %lu\r\n\r\n", status,
                     type, (unsigned long)len) < 0)
        return -1;
    return FCGX_PutStr(body, (int)len, out) == (int)len ? 0 : -1;
}

static int serve(FCGX_Request *rq)
{
    static const char hello[] = "Hello, world\n";
    static const char plain[] = "Hello, World!";
    static const char missing[] = "not found\n";
    /* nginx's fastcgi_params sends DOCUMENT_URI: the path without the query. */
    const char *path = FCGX_GetParam("DOCUMENT_URI", rq->envp);

    if (path == NULL)
        path = "";
    if (strcmp(path, "/hello") == 0)
        return reply(rq->out, "200 OK", "text/plain", hello, sizeof hello - 1);
    if (strcmp(path, "/plaintext") == 0)
        return reply(rq->out, "200 OK", "text/plain", plain, sizeof plain - 1);
    if (strcmp(path, "/json") == 0) {
        char json[128];
        int n = json_message(json, sizeof json, "Hello, World!");
        if (n < 0)
            return reply(rq->out, "500 Internal Server Error", "text/plain", "", 0);
        return reply(rq->out, "200 OK", "application/json", json, (size_t)n);
    }
    if (strcmp(path, "/libcall") == 0) {
        char text[96];
        int n = libcall(rq, text, sizeof text);
        if (n < 0)
            return reply(rq->out, "400 Bad Request", "text/plain", "bad n\n", 6);
        return reply(rq->out, "200 OK", "text/plain; charset=utf-8", text, (size_t)n);
    }
    return reply(rq->out, "404 Not Found", "text/plain", missing, sizeof missing - 1);
}

int main(void)
{
    FCGX_Request rq;

    if (FCGX_Init() != 0 || FCGX_InitRequest(&rq, 0, 0) != 0) {
        fputs("fcgi_hello: libfcgi failed to initialise (run it under spawn-fcgi)\n", stderr);
        return 1;
    }
    while (FCGX_Accept_r(&rq) >= 0) {
        if (serve(&rq) != 0)
            fputs("fcgi_hello: the web server closed the stream mid-response\n", stderr);
        FCGX_Finish_r(&rq);
    }
    return 0;
}

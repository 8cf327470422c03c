/*
 * status.c - the status page: per sandbox its workers, how many are busy,
 * the queue, and counters since start (served, restarts, crashes,
 * timeouts, seccomp kills, rejected, moved), as plain text or, with
 * ?format=prometheus, in the Prometheus exposition format.
 *
 * route.c sends it loopback clients only (others get the 404 any unknown
 * path gets), so that the public listener reveals nothing.  It must never
 * block and never print a sandbox name unescaped into the Prometheus
 * labels.
 */
#include "config.h"

#include "loop/acceptor.h"
#include "sandbox/identity.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static unsigned count(const sandlet_pool *p, enum sandlet_worker_state st)
{
    unsigned n = 0;
    /* Every slot, extras (max-workers) included: a down extra counts as
     * no state but W_DOWN. */
    for (unsigned i = 0; i < p->nworkers; i++)
        n += p->workers[i].state == st;
    return n;
}

/* Sandbox names come from the configuration: tokens without quotes or
 * backslashes are the norm, but escape them anyway for the label syntax. */
static void put_label(sandlet_buf *b, const char *name)
{
    for (const char *p = name; *p; p++) {
        if (*p == '"' || *p == '\\')
            sandlet_buf_put(b, "\\", 1);
        sandlet_buf_put(b, p, 1);
    }
}

static void metric(sandlet_buf *b, const char *name, const char *help, const char *type,
                   const sandlet_server *srv, size_t field)
{
    char line[256];
    int n = snprintf(line, sizeof(line), "# HELP sandlet_%s %s\n# TYPE sandlet_%s %s\n", name, help,
                     name, type);
    sandlet_buf_put(b, line, (size_t)n);
    for (size_t i = 0; i < srv->conf->nsandboxes; i++) {
        const sandlet_pool *p = srv->gen->pool_of[i];
        uint64_t v;
        switch (field) {
        case 0: v = p->conf->workers; break;
        case 9: v = count(p, W_IDLE) + count(p, W_BUSY); break;
        case 1: v = count(p, W_BUSY); break;
        case 2: v = p->queued; break;
        case 3: v = p->served; break;
        case 4: v = p->restarts; break;
        case 5: v = p->crashes; break;
        case 6: v = p->timeouts; break;
        case 7: v = p->seccomp_kills; break;
        case 8: v = p->rejected; break;
        case 10: v = p->moved; break;
        case 11: v = p->nworkers; break;
        case 12: v = p->grown; break;
        case 13: v = p->batched; break;
        case 14: v = p->landlock_denials; break;
        case 15: v = p->spool_used; break;
        case 16: v = p->spool_full; break;
        default: v = 0; break;
        }
        n = snprintf(line, sizeof(line), "sandlet_%s{sandbox=\"", name);
        sandlet_buf_put(b, line, (size_t)n);
        put_label(b, p->conf->name);
        n = snprintf(line, sizeof(line), "\"} %" PRIu64 "\n", v);
        sandlet_buf_put(b, line, (size_t)n);
    }
}

static void put_str(sandlet_buf *b, const char *s)
{
    sandlet_buf_put(b, s, strlen(s));
}

/* sandlet_request_duration_seconds: a histogram per sandbox, its buckets
 * cumulative as the format wants. */
static void durations(sandlet_buf *b, const sandlet_server *srv)
{
    static const char head[] =
        "# HELP sandlet_request_duration_seconds Time from a request's head to its worker's last "
        "byte (queueing included).\n"
        "# TYPE sandlet_request_duration_seconds histogram\n";
    sandlet_buf_put(b, head, sizeof(head) - 1);
    char line[128];
    for (size_t i = 0; i < srv->conf->nsandboxes; i++) {
        const sandlet_pool *p = srv->gen->pool_of[i];
        uint64_t total = 0;
        for (size_t k = 0; k <= SANDLET_DURATION_BUCKETS; k++) {
            char le[32];
            if (k < SANDLET_DURATION_BUCKETS) {
                total += p->duration_le[k];
                snprintf(le, sizeof(le), "%g", (double)sandlet_duration_bounds_us[k] / 1e6);
            } else {
                total = p->duration_count;
                snprintf(le, sizeof(le), "+Inf");
            }
            put_str(b, "sandlet_request_duration_seconds_bucket{sandbox=\"");
            put_label(b, p->conf->name);
            int n = snprintf(line, sizeof(line), "\",le=\"%s\"} %" PRIu64 "\n", le, total);
            sandlet_buf_put(b, line, (size_t)n);
        }
        put_str(b, "sandlet_request_duration_seconds_sum{sandbox=\"");
        put_label(b, p->conf->name);
        int n = snprintf(line, sizeof(line), "\"} %.6f\n", (double)p->duration_sum_us / 1e6);
        sandlet_buf_put(b, line, (size_t)n);
        put_str(b, "sandlet_request_duration_seconds_count{sandbox=\"");
        put_label(b, p->conf->name);
        n = snprintf(line, sizeof(line), "\"} %" PRIu64 "\n", p->duration_count);
        sandlet_buf_put(b, line, (size_t)n);
    }
}

static bool root_start; /* sandletd was started as root */

void sandlet_status_root_start(bool root)
{
    root_start = root;
}

/* Who a sandbox's workers run as, for the operator who sees a bare number
 * in ps: its user, or the uid a root start gives a sandbox without one
 * (identity.c's rule, decided from the configuration alone), or "-" when
 * sandletd was not started as root and every process runs as its user. */
static void runs_as(const sandlet_conf *conf, const sandlet_sandbox_conf *sb, char *out,
                    size_t size)
{
    if (!root_start)
        snprintf(out, size, "-");
    else if (sb->user)
        snprintf(out, size, "%s", sb->user);
    else
        snprintf(out, size, "%u", sandlet_identity_dynamic_uid_in(conf, sb->name));
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p >= 0x7f)
            *p = '?'; /* one word, nothing a terminal would act on */
}

void sandlet_status_serve(sandlet_conn *c)
{
    sandlet_server *srv = sandlet_conn_server(c);
    size_t tlen, plen;
    const char *target = sandlet_conn_target(c, &tlen, &plen);
    /* The query is not NUL-ended: look for the switch within it. */
    bool prom = false;
    for (size_t i = plen; i + 17 <= tlen && !prom; i++)
        prom = memcmp(target + i, "format=prometheus", 17) == 0;
    sandlet_buf b;
    sandlet_buf_init(&b, 1u << 20);
    if (prom) {
        metric(&b, "workers", "Worker processes configured.", "gauge", srv, 0);
        metric(&b, "max_workers", "Workers the pool may grow to under load (max-workers).", "gauge",
               srv, 11);
        metric(&b, "ready_workers", "Workers started and ready (idle or busy).", "gauge", srv, 9);
        metric(&b, "busy_workers", "Workers serving a request now.", "gauge", srv, 1);
        metric(&b, "queued_requests", "Requests waiting for a worker.", "gauge", srv, 2);
        metric(&b, "requests_served_total", "Requests answered by a worker.", "counter", srv, 3);
        metric(&b, "worker_restarts_total", "Workers started again.", "counter", srv, 4);
        metric(&b, "worker_crashes_total", "Workers that died abnormally.", "counter", srv, 5);
        metric(&b, "request_timeouts_total", "Requests killed at their timeout.", "counter", srv,
               6);
        metric(&b, "seccomp_kills_total", "Workers killed for a forbidden system call.", "counter",
               srv, 7);
        metric(&b, "landlock_denials_total",
               "File accesses (or other rights) Landlock refused a worker, as the kernel's audit "
               "records them (counted only while its audit is on).",
               "counter", srv, 14);
        metric(&b, "requests_rejected_total", "Requests answered 503 (queue full or too long).",
               "counter", srv, 8);
        metric(&b, "requests_moved_total",
               "Requests taken back from a worker that did not start them and handed to another.",
               "counter", srv, 10);
        metric(&b, "requests_batched_total",
               "Requests handed to a worker while it still held others (pipeline): they wait in "
               "its channel and it serves them without sleeping in between.",
               "counter", srv, 13);
        metric(&b, "workers_grown_total",
               "Workers started above workers because requests waited (max-workers).", "counter",
               srv, 12);
        metric(&b, "spool_reserved_bytes",
               "Bytes of spool-size held by the multipart bodies being copied to the sandbox's "
               "upload spool.",
               "gauge", srv, 15);
        metric(&b, "spool_full_total",
               "Multipart forms whose file parts stayed in worker memory because spool-size was "
               "reached.",
               "counter", srv, 16);
        durations(&b, srv);
    } else {
        char line[512];
        int n = snprintf(line, sizeof(line),
                         "sandlet %s: %zu connections\n\n%-16s %7s %5s %6s "
                         "%10s %8s %7s %8s %7s %8s %8s %6s %4s %4s %s\n",
                         PACKAGE_VERSION, srv->nconns, "sandbox", "workers", "busy", "queued",
                         "served", "restarts", "crashes", "timeouts", "seccomp", "landlock",
                         "rejected", "moved", "up", "max", "user");
        sandlet_buf_put(&b, line, (size_t)n);
        for (size_t i = 0; i < srv->conf->nsandboxes; i++) {
            const sandlet_pool *p = srv->gen->pool_of[i];
            char user[64];
            runs_as(srv->conf, p->conf, user, sizeof(user));
            n = snprintf(line, sizeof(line),
                         "%-16s %7u %5u %6zu %10" PRIu64 " %8" PRIu64 " %7" PRIu64 " %8" PRIu64
                         " %7" PRIu64 " %8" PRIu64 " %8" PRIu64 " %6" PRIu64 " %4u %4u %s\n",
                         p->conf->name, p->conf->workers, count(p, W_BUSY), p->queued, p->served,
                         p->restarts, p->crashes, p->timeouts, p->seccomp_kills,
                         p->landlock_denials, p->rejected, p->moved,
                         count(p, W_IDLE) + count(p, W_BUSY), p->nworkers, user);
            sandlet_buf_put(&b, line, (size_t)n);
        }
    }
    const char *extra = prom ? "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                               "Cache-Control: no-store\r\n"
                             : "Content-Type: text/plain; charset=utf-8\r\n"
                               "Cache-Control: no-store\r\n";
    if (b.error || sandlet_conn_respond(c, 200, extra, strlen(extra), b.len, b.data,
                                        sandlet_conn_head_only(c) ? 0 : b.len) < 0) {
        sandlet_buf_free(&b);
        sandlet_conn_fail(c, 500);
        return;
    }
    sandlet_buf_free(&b);
    sandlet_conn_request_done(c);
}

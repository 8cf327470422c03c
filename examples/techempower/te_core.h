/*
 * te_core.h - what TechEmpower's database tests compute, apart from how they
 * reach the database: the random ids and numbers, the "queries" parameter,
 * the JSON of World rows and the fortunes page.  Shared, as source, by the
 * sandlet servlet (techempower.c, through sl_db) and its FastCGI peer in the
 * benchmark (bench/fcgi_db.c, through libpq), so that both do the same work
 * per request and a difference in their figures is the server's.
 *
 * Everything writes into a caller's buffer of fixed capacity and reports
 * when it would not fit; it must never write past that capacity, never
 * allocate, and never emit a message unescaped.
 */
#ifndef TE_CORE_H
#define TE_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The standard tables (examples/techempower/create.sql). */
#define TE_WORLD_ROWS  10000
#define TE_MAX_QUERIES 500
/* Fortunes one page shows at most, the added one included: the standard
 * table has 12; a larger table is an error, not an unbounded page. */
#define TE_MAX_FORTUNES 256

#define TE_SQL_WORLD    "SELECT id, randomNumber FROM World WHERE id = $1"
#define TE_SQL_FORTUNES "SELECT id, message FROM Fortune"
/* One statement for all of a request's rows: the ids and the new numbers
 * as two int arrays, paired by unnest.  The ids are sorted, so that two
 * requests updating the same rows lock them in the same order. */
#define TE_SQL_UPDATE                                                                              \
    "UPDATE World SET randomNumber = u.r FROM unnest($1::int[], $2::int[]) AS u(id, r) "           \
    "WHERE World.id = u.id"
#define TE_ADDED_FORTUNE "Additional fortune added at request time."

typedef struct te_world {
    int32_t id;
    int32_t number;
} te_world;

typedef struct te_fortune {
    int32_t id;
    const char *message;
} te_fortune;

/* xorshift64*: per process, seeded once from the kernel; the test wants
 * uniform ids, not secrets. */
static inline uint32_t te_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (uint32_t)((x * UINT64_C(2685821657736338717)) >> 32);
}

/* 1..10000, as the tests' rules ask for both ids and numbers. */
static inline int32_t te_random_id(uint64_t *state)
{
    return (int32_t)(te_next(state) % TE_WORLD_ROWS) + 1;
}

/* The "queries" parameter: 1..500; missing, empty, non-numeric or
 * trailing garbage counts as 1, as the rules say. */
static inline int te_queries(const char *s)
{
    if (!s || *s < '0' || *s > '9')
        return 1;
    long n = 0;
    for (; *s >= '0' && *s <= '9'; s++)
        if (n <= TE_MAX_QUERIES)
            n = n * 10 + (*s - '0');
    if (*s)
        return 1;
    if (n < 1)
        return 1;
    return n > TE_MAX_QUERIES ? TE_MAX_QUERIES : (int)n;
}

/* Appends len bytes; 0, or -1 when they do not fit. */
static inline int te_put(char *out, size_t cap, size_t *at, const char *s, size_t len)
{
    if (len > cap - *at)
        return -1;
    memcpy(out + *at, s, len);
    *at += len;
    return 0;
}

static inline int te_puts(char *out, size_t cap, size_t *at, const char *s)
{
    return te_put(out, cap, at, s, strlen(s));
}

/* {"id":N,"randomNumber":M} */
static inline int te_world_json(char *out, size_t cap, size_t *at, const te_world *w)
{
    char tmp[64];
    int n =
        snprintf(tmp, sizeof(tmp), "{\"id\":%d,\"randomNumber\":%d}", (int)w->id, (int)w->number);
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return -1;
    return te_put(out, cap, at, tmp, (size_t)n);
}

/* [row,row,...] */
static inline int te_worlds_json(char *out, size_t cap, size_t *at, const te_world *w, int n)
{
    if (te_put(out, cap, at, "[", 1) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        if ((i > 0 && te_put(out, cap, at, ",", 1) != 0) || te_world_json(out, cap, at, &w[i]) != 0)
            return -1;
    return te_put(out, cap, at, "]", 1);
}

/* s with & < > " ' escaped for HTML text and attributes. */
static inline int te_html(char *out, size_t cap, size_t *at, const char *s)
{
    for (const char *p = s;; p++) {
        const char *rep = NULL;
        switch (*p) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        case '\0': break;
        default: continue;
        }
        if (te_put(out, cap, at, s, (size_t)(p - s)) != 0)
            return -1;
        if (!rep)
            return 0;
        if (te_puts(out, cap, at, rep) != 0)
            return -1;
        s = p + 1;
    }
}

static inline int te_by_message(const void *a, const void *b)
{
    return strcmp(((const te_fortune *)a)->message, ((const te_fortune *)b)->message);
}

/* The page of list[0..n) plus the added fortune, sorted by message; list
 * must have room for n + 1 entries.  0, or -1 when it does not fit. */
static inline int te_fortunes_html(char *out, size_t cap, size_t *at, te_fortune *list, int n)
{
    list[n].id = 0;
    list[n].message = TE_ADDED_FORTUNE;
    n++;
    qsort(list, (size_t)n, sizeof(list[0]), te_by_message);
    if (te_puts(out, cap, at,
                "<!DOCTYPE html><html><head><title>Fortunes</title></head><body>"
                "<table><tr><th>id</th><th>message</th></tr>") != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "<tr><td>%d</td><td>", (int)list[i].id);
        if (te_puts(out, cap, at, id) != 0 || te_html(out, cap, at, list[i].message) != 0 ||
            te_puts(out, cap, at, "</td></tr>") != 0)
            return -1;
    }
    return te_puts(out, cap, at, "</table></body></html>");
}

static inline int te_by_id(const void *a, const void *b)
{
    int32_t x = ((const te_world *)a)->id, y = ((const te_world *)b)->id;
    return (x > y) - (x < y);
}

/* The two array parameters of TE_SQL_UPDATE ("{1,2,...}") for rows w[0..n),
 * sorted by id; an id drawn twice gets one number (one of those drawn), in
 * the array and in w, so that what the answer shows is what the table holds.
 * sorted has room for n rows.  0, or -1 when the text does not fit. */
static inline int te_update_arrays(te_world *w, int n, te_world *sorted, char *ids, char *nums,
                                   size_t cap)
{
    memcpy(sorted, w, (size_t)n * sizeof(*w));
    qsort(sorted, (size_t)n, sizeof(*sorted), te_by_id);
    for (int i = 1; i < n; i++)
        if (sorted[i].id == sorted[i - 1].id)
            sorted[i].number = sorted[i - 1].number;
    for (int i = 0; i < n; i++) {
        te_world key = w[i];
        const te_world *hit = bsearch(&key, sorted, (size_t)n, sizeof(*sorted), te_by_id);
        if (hit)
            w[i].number = hit->number;
    }
    size_t a = 0, b = 0;
    if (te_put(ids, cap, &a, "{", 1) != 0 || te_put(nums, cap, &b, "{", 1) != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char t[24];
        int len = snprintf(t, sizeof(t), "%s%d", i ? "," : "", (int)sorted[i].id);
        if (len < 0 || te_put(ids, cap, &a, t, (size_t)len) != 0)
            return -1;
        len = snprintf(t, sizeof(t), "%s%d", i ? "," : "", (int)sorted[i].number);
        if (len < 0 || te_put(nums, cap, &b, t, (size_t)len) != 0)
            return -1;
    }
    /* "}" and the terminating NUL. */
    if (te_put(ids, cap, &a, "}", 2) != 0 || te_put(nums, cap, &b, "}", 2) != 0)
        return -1;
    return 0;
}

#endif

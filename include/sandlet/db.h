/*
 * sandlet/db.h - the sandbox's PostgreSQL database, for servlets and pages
 * (sl_db(3)).
 *
 * One connection per worker, opened by sandletd before the worker confines
 * itself (sandlet.conf "database") and kept; when it breaks, the next call
 * that needs it reconnects.  Every call takes the request: results live in
 * its arena (never freed by the servlet), and errors are the request's
 * (sl_db_error, sl_db_sqlstate).  SQL is parameterised only: $1, $2...
 * with values passed apart, never SQL assembled from request data.
 *
 * A result holds at most SL_DB_MAX_RESULT bytes of cell data: a larger
 * one is an error (SQLSTATE "54000"), read row by row and dropped, never
 * an out-of-memory worker.
 *
 * While the database is down, calls fail with SQLSTATE "08006" and
 * sl_db_unavailable is true; a handler that then answers 500 or more is
 * answered 503 with Retry-After instead, and the worker logs it once.
 *
 * A transaction still open when the handler returns is rolled back.  A
 * statement runs at most 9/10 of the servlet's timeout (SQLSTATE 57014).
 *
 * This header must stay plain C11 and name no internals.
 */
#ifndef SANDLET_DB_H
#define SANDLET_DB_H

#include <sandlet.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Cell bytes one result may hold. */
#define SL_DB_MAX_RESULT ((size_t)64 * 1024 * 1024)
/* Prepared statements one connection keeps, and a name's length. */
#define SL_DB_MAX_PREPARED 256
#define SL_DB_MAX_NAME     63

typedef struct sl_db_result sl_db_result;

/* Runs sql with nparams text parameters ($1..$n; a NULL value is SQL
 * NULL).  The result, or NULL on error (sl_db_error says why). */
sl_db_result *sl_db_query(sl_request *rq, const char *sql, int nparams, const char *const *values);
/* As sl_db_query, with per parameter a length and a format (0 text, 1
 * binary: bytea with NUL bytes, or a type's binary form); lengths and
 * formats may be NULL (all text). */
sl_db_result *sl_db_query_params(sl_request *rq, const char *sql, int nparams,
                                 const char *const *values, const int *lengths, const int *formats);
/* Runs the statement called name, preparing it from sql the first time
 * this connection sees the name (and again after a reconnect). */
sl_db_result *sl_db_prepared(sl_request *rq, const char *name, const char *sql, int nparams,
                             const char *const *values, const int *lengths, const int *formats);

/* Transactions: 0, or -1 (sl_db_error says why). */
int sl_db_begin(sl_request *rq);
int sl_db_commit(sl_request *rq);
int sl_db_rollback(sl_request *rq);

/* The last failed call of this request: its message and SQLSTATE ("" when
 * none failed). */
const char *sl_db_error(const sl_request *rq);
const char *sl_db_sqlstate(const sl_request *rq);
/* True once a call of this request found the database unreachable. */
bool sl_db_unavailable(const sl_request *rq);

/* Shape of a result. */
int sl_db_rows(const sl_db_result *r);
int sl_db_columns(const sl_db_result *r);
const char *sl_db_column_name(const sl_db_result *r, int col);
/* Index of the column called name, or -1. */
int sl_db_column(const sl_db_result *r, const char *name);
/* Rows an INSERT, UPDATE, DELETE... touched (or a SELECT returned). */
long long sl_db_affected(const sl_db_result *r);

/* Typed getters by row and column index.  true for SQL NULL, and for a
 * row or column out of range. */
bool sl_db_is_null(const sl_db_result *r, int row, int col);
/* 0, or -1 for NULL, out of range, or a value that is not of the type. */
int sl_db_int32(const sl_db_result *r, int row, int col, int32_t *out);
int sl_db_int64(const sl_db_result *r, int row, int col, int64_t *out);
int sl_db_double(const sl_db_result *r, int row, int col, double *out);
int sl_db_bool(const sl_db_result *r, int row, int col, bool *out);
/* Microseconds since 1970-01-01 UTC of a timestamp or timestamptz (the
 * connection's TimeZone is UTC; a timestamp without zone is read as UTC). */
int sl_db_timestamp(const sl_db_result *r, int row, int col, int64_t *usec);
/* The value as text (in the arena); NULL for SQL NULL, "" for empty. */
const char *sl_db_text(const sl_db_result *r, int row, int col);
/* A bytea's bytes (in the request's arena, NUL bytes kept) and length;
 * NULL for SQL NULL or a value that is not bytea. */
const void *sl_db_bytea(const sl_db_result *r, int row, int col, size_t *len);

/* The same by column name. */
bool sl_db_is_null_by(const sl_db_result *r, int row, const char *name);
int sl_db_int32_by(const sl_db_result *r, int row, const char *name, int32_t *out);
int sl_db_int64_by(const sl_db_result *r, int row, const char *name, int64_t *out);
int sl_db_double_by(const sl_db_result *r, int row, const char *name, double *out);
int sl_db_bool_by(const sl_db_result *r, int row, const char *name, bool *out);
int sl_db_timestamp_by(const sl_db_result *r, int row, const char *name, int64_t *usec);
const char *sl_db_text_by(const sl_db_result *r, int row, const char *name);
const void *sl_db_bytea_by(const sl_db_result *r, int row, const char *name, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* SANDLET_DB_H */

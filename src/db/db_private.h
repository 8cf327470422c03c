/*
 * db_private.h - what db.c lends to the rest of libsandlet's database
 * side (the database session store, session_db.c): the checked
 * connection, and the error bookkeeping that makes a request 503 when the
 * server is down.  Never installed: servlets reach the database through
 * sandlet/db.h only.
 */
#ifndef SANDLET_DB_PRIVATE_H
#define SANDLET_DB_PRIVATE_H

#include "db/pq.h"

/* The process's connection, usable (reconnected if it broke, the
 * request's statement_timeout applied), or NULL with the request marked
 * unavailable when the server cannot be reached or there is no
 * database. */
PGconn *sandlet_lib_db_conn(void);
/* Records a failed call's error (SQLSTATE, message), marking the request
 * unavailable when the connection is gone or going. */
void sandlet_lib_db_failed(const PGresult *r);
/* How many times the connection was made anew: what a server session
 * held (advisory locks, prepared statements) is gone when it changed. */
unsigned long sandlet_lib_db_resets(void);
/* Drops the server session and makes a new one now (or at the next
 * call, when the server cannot be reached): what it held goes with it. */
void sandlet_lib_db_reset(void);
/* The last error's message: one line, never the connection string. */
const char *sandlet_lib_db_last_error(void);

#endif /* SANDLET_DB_PRIVATE_H */

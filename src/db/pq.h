/*
 * pq.h - libpq, loaded the first time something needs it.
 *
 * libpq brings about twenty libraries with it (OpenSSL, GnuTLS through
 * libldap, Kerberos, SASL, p11-kit...) whose constructors and relocations
 * cost some 5 MiB of RSS in every process that maps them.  Most sandboxes
 * have no database, and the acceptor never talks to one, so libsandlet is
 * not linked against libpq: the first user (a worker opening its sandbox's
 * database, the configuration checking a "database" string) loads it with
 * sandlet_lib_pq_load, and every call goes through sandlet_lib_pq.  A
 * process whose configuration names no database never maps it.
 *
 * Include this file instead of <libpq-fe.h>: it includes that for the
 * types, and turns each PQ call used below into a call through the table,
 * so that the callers read as plain libpq.  A call made before a
 * successful sandlet_lib_pq_load is a NULL call: every caller reaches
 * libpq only through a connection or a parse that loaded it first.
 */
#ifndef SANDLET_DB_PQ_H
#define SANDLET_DB_PQ_H

#include <libpq-fe.h>
#include <stddef.h>

/* Every libpq function sandlet calls.  A new one is a line here and a
 * line in the redirections below; the member's type is libpq's own
 * prototype, so a mismatch cannot compile. */
#define SANDLET_PQ_FUNCTIONS(X)                                                                    \
    X(PQclear)                                                                                     \
    X(PQcmdTuples)                                                                                 \
    X(PQconnectdbParams)                                                                           \
    X(PQconninfoFree)                                                                              \
    X(PQconninfoParse)                                                                             \
    X(PQconsumeInput)                                                                              \
    X(PQencryptPasswordConn)                                                                       \
    X(PQenterPipelineMode)                                                                         \
    X(PQerrorMessage)                                                                              \
    X(PQexec)                                                                                      \
    X(PQexecParams)                                                                                \
    X(PQexitPipelineMode)                                                                          \
    X(PQfinish)                                                                                    \
    X(PQfname)                                                                                     \
    X(PQfreemem)                                                                                   \
    X(PQftype)                                                                                     \
    X(PQgetResult)                                                                                 \
    X(PQgetisnull)                                                                                 \
    X(PQgetlength)                                                                                 \
    X(PQgetvalue)                                                                                  \
    X(PQnfields)                                                                                   \
    X(PQntuples)                                                                                   \
    X(PQpipelineSync)                                                                              \
    X(PQprepare)                                                                                   \
    X(PQreset)                                                                                     \
    X(PQresultErrorField)                                                                          \
    X(PQresultStatus)                                                                              \
    X(PQsendQueryParams)                                                                           \
    X(PQsendQueryPrepared)                                                                         \
    X(PQsetSingleRowMode)                                                                          \
    X(PQsocket)                                                                                    \
    X(PQstatus)                                                                                    \
    X(PQtransactionStatus)

typedef struct sandlet_lib_pq_api {
/* f names the member too: it cannot be parenthesised. */
#define SANDLET_PQ_MEMBER(f) __typeof__(f) *f; // NOLINT(bugprone-macro-parentheses)
    SANDLET_PQ_FUNCTIONS(SANDLET_PQ_MEMBER)
#undef SANDLET_PQ_MEMBER
} sandlet_lib_pq_api;

/* Filled by sandlet_lib_pq_load; all NULL before. */
extern sandlet_lib_pq_api sandlet_lib_pq;

/* Loads libpq once per process (later calls return the first answer).
 * 0, or -1 with the reason (dlopen's or dlsym's message) in err. */
int sandlet_lib_pq_load(char *err, size_t errlen);

#define PQclear(...)               sandlet_lib_pq.PQclear(__VA_ARGS__)
#define PQcmdTuples(...)           sandlet_lib_pq.PQcmdTuples(__VA_ARGS__)
#define PQconnectdbParams(...)     sandlet_lib_pq.PQconnectdbParams(__VA_ARGS__)
#define PQconninfoFree(...)        sandlet_lib_pq.PQconninfoFree(__VA_ARGS__)
#define PQconninfoParse(...)       sandlet_lib_pq.PQconninfoParse(__VA_ARGS__)
#define PQconsumeInput(...)        sandlet_lib_pq.PQconsumeInput(__VA_ARGS__)
#define PQencryptPasswordConn(...) sandlet_lib_pq.PQencryptPasswordConn(__VA_ARGS__)
#define PQenterPipelineMode(...)   sandlet_lib_pq.PQenterPipelineMode(__VA_ARGS__)
#define PQerrorMessage(...)        sandlet_lib_pq.PQerrorMessage(__VA_ARGS__)
#define PQexec(...)                sandlet_lib_pq.PQexec(__VA_ARGS__)
#define PQexecParams(...)          sandlet_lib_pq.PQexecParams(__VA_ARGS__)
#define PQexitPipelineMode(...)    sandlet_lib_pq.PQexitPipelineMode(__VA_ARGS__)
#define PQfinish(...)              sandlet_lib_pq.PQfinish(__VA_ARGS__)
#define PQfname(...)               sandlet_lib_pq.PQfname(__VA_ARGS__)
#define PQfreemem(...)             sandlet_lib_pq.PQfreemem(__VA_ARGS__)
#define PQftype(...)               sandlet_lib_pq.PQftype(__VA_ARGS__)
#define PQgetResult(...)           sandlet_lib_pq.PQgetResult(__VA_ARGS__)
#define PQgetisnull(...)           sandlet_lib_pq.PQgetisnull(__VA_ARGS__)
#define PQgetlength(...)           sandlet_lib_pq.PQgetlength(__VA_ARGS__)
#define PQgetvalue(...)            sandlet_lib_pq.PQgetvalue(__VA_ARGS__)
#define PQnfields(...)             sandlet_lib_pq.PQnfields(__VA_ARGS__)
#define PQntuples(...)             sandlet_lib_pq.PQntuples(__VA_ARGS__)
#define PQpipelineSync(...)        sandlet_lib_pq.PQpipelineSync(__VA_ARGS__)
#define PQprepare(...)             sandlet_lib_pq.PQprepare(__VA_ARGS__)
#define PQreset(...)               sandlet_lib_pq.PQreset(__VA_ARGS__)
#define PQresultErrorField(...)    sandlet_lib_pq.PQresultErrorField(__VA_ARGS__)
#define PQresultStatus(...)        sandlet_lib_pq.PQresultStatus(__VA_ARGS__)
#define PQsendQueryParams(...)     sandlet_lib_pq.PQsendQueryParams(__VA_ARGS__)
#define PQsendQueryPrepared(...)   sandlet_lib_pq.PQsendQueryPrepared(__VA_ARGS__)
#define PQsetSingleRowMode(...)    sandlet_lib_pq.PQsetSingleRowMode(__VA_ARGS__)
#define PQsocket(...)              sandlet_lib_pq.PQsocket(__VA_ARGS__)
#define PQstatus(...)              sandlet_lib_pq.PQstatus(__VA_ARGS__)
#define PQtransactionStatus(...)   sandlet_lib_pq.PQtransactionStatus(__VA_ARGS__)

#endif /* SANDLET_DB_PQ_H */

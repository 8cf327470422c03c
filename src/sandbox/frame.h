/*
 * frame.h - the wire format between the acceptor, the supervisor and a
 * sandbox worker: one codec, one set of constants.
 *
 * Every message on a worker's socketpair is one frame: a 12-byte header
 * followed by a payload.  All integers are little-endian, written byte by
 * byte, so that no decoder ever relies on alignment or host order.
 *
 *   offset size field
 *   0      1    version   SANDLET_FRAME_VERSION; any other value is fatal
 *   1      1    type      enum sandlet_frame_type
 *   2      2    flags     SANDLET_FRAME_END: this frame ends its message;
 *                         SANDLET_FRAME_ABORT (only with END, only on an
 *                         empty REQBODY): the body ends unfinished
 *   4      4    id        request id chosen by the acceptor; 0 for INIT,
 *                         READY and FAIL
 *   8      4    length    payload bytes that follow, <= SANDLET_FRAME_MAX
 *
 * Payloads are built from these items:
 *   u8, u16, u32, u64   little-endian integers
 *   str                 u32 length n, n bytes, one NUL byte (the NUL is
 *                       not counted in n and must be present: the reader
 *                       hands out pointers into its buffer, no copies);
 *                       the n bytes hold no NUL (readers use C strings)
 *
 *   INIT     (supervisor→worker) str sandbox, u16 servlet count, then
 *            per servlet: str path, str library, u16 param count,
 *            params × (str name, str value), u32 timeout in ms (0: none;
 *            the database's statement timeout follows it); then the pages (C Server
 *            Pages compiled for this sandbox): u32 pages generation, u16
 *            page count, per page: str path, str library ("" for a page
 *            slot with nothing to load); then the confinement: u8
 *            enabled, u32 uid, u32 gid (0xFFFFFFFF: keep), u32 memory MiB,
 *            u32 open files, u32 cpu seconds (0: unchanged), u8 core
 *            dumps, u8 syscall groups (1 files, 2 database), u8 modes (1 learn,
 *            2 file hints),
 *            u16 readable count, readable × str, u16 writable count,
 *            writable × str, u64 max file size (0: unlimited), u8 database
 *            port count, ports × u16; then the sessions: u8 mode (1:
 *            memory), u32 idle timeout in seconds, u8 cookie Secure, str
 *            cookie name, str cookie path; then the database: str
 *            conninfo ("": none), str password ("": none) -- the only
 *            way either reaches a worker --, u32 the pages' timeout in ms;
 *            and last the sandbox's session
 *            key: the rest of the payload, exactly SANDLET_WIRE_KEY_LEN
 *            bytes.  Written by the supervisor on the worker's socket
 *            before the acceptor ever sees it.
 *   READY    (worker→acceptor) empty: all servlets are initialised
 *            (the acceptor ignores a payload)
 *   FAIL     (worker→acceptor) str message: init failed, worker exits
 *            (bytes after the str are ignored: the frame is only logged)
 *   REQUEST  (acceptor→worker) u16 servlet index, u8 http major,
 *            u8 http minor, u16 header count, str method, str target,
 *            str peer, headers × (str name, str value); the rest of the
 *            payload is the first part of the body.  Without the END flag
 *            more body follows in REQBODY frames, the last one with END.
 *            A body larger than the acceptor's window
 *            (SANDLET_BODY_WINDOW, loop/acceptor.h) is streamed: its
 *            REQUEST leaves before the client has sent all of it, and the
 *            REQBODY frames follow as the client's bytes arrive.  The
 *            worker starts the servlet on such a REQUEST, which pulls the
 *            REQBODY frames as it reads (sl_body_read).
 *   REQBODY  (acceptor→worker) body bytes.  A streamed body always ends
 *            with an END frame, even when its servlet answered before
 *            reading it all (the worker reads and drops the rest up to
 *            that END before it takes another REQUEST).  END|ABORT, empty:
 *            the body will not be complete (the client stopped, timed
 *            out, sent more than max-body-size, or the request was
 *            answered already); the servlet's reader reports an error.
 *   RESPONSE (worker→acceptor) u16 status (200-599), u16 header count,
 *            u64 content length (SANDLET_LENGTH_UNKNOWN when streamed),
 *            headers × (str name, str value); the rest is the first part
 *            of the body.  Without END, BODY frames follow, the last one
 *            with END.
 *   BODY     (worker→acceptor) body bytes; an empty BODY frame must
 *            carry END (one without makes no progress: a protocol error)
 *   SKIP     (worker→acceptor) empty, END: the worker did not serve
 *            request id, because the acceptor took it back before the
 *            worker claimed it (claim.h); the worker drops the request's
 *            frames, and the acceptor may hand it the next request.  Any
 *            payload is ignored; a SKIP for any other id is a protocol
 *            error.
 *
 * A reader that meets a wrong version, an unknown type, a length above the
 * maximum or a payload that does not parse exactly rejects the frame; the
 * acceptor then kills the worker that sent it.  This file must never
 * read past the bytes it was given, and allocates while decoding only the
 * lists of INIT (from the supervisor, which the worker trusts).
 *
 * Every frame type is encoded and decoded here and nowhere else: the
 * acceptor (pool.c), the supervisor (init.c), the worker (worker.c), the
 * tests and the fuzz targets all call the sandlet_wire_ functions below,
 * so that this comment, the constants and the code cannot drift apart.
 */
#ifndef SANDLET_FRAME_H
#define SANDLET_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define SANDLET_FRAME_VERSION 1
#define SANDLET_FRAME_HEADER  12
/* Largest payload; bodies larger than this travel in several frames. */
#define SANDLET_FRAME_MAX ((size_t)1 << 20)
#define SANDLET_FRAME_END 0x0001u
/* With END on an empty REQBODY: the body ends unfinished (see above). */
#define SANDLET_FRAME_ABORT    0x0002u
#define SANDLET_LENGTH_UNKNOWN UINT64_MAX
/* Bytes of the session key that ends INIT (SANDLET_SESSION_KEY_LEN). */
#define SANDLET_WIRE_KEY_LEN 32
/* INIT's uid or gid when the worker keeps the one it runs as. */
#define SANDLET_WIRE_KEEP_ID UINT32_MAX

enum sandlet_frame_type {
    SANDLET_FRAME_INIT = 1,
    SANDLET_FRAME_READY = 2,
    SANDLET_FRAME_FAIL = 3,
    SANDLET_FRAME_REQUEST = 4,
    SANDLET_FRAME_REQBODY = 5,
    SANDLET_FRAME_RESPONSE = 6,
    SANDLET_FRAME_BODY = 7,
    SANDLET_FRAME_SKIP = 8,
    SANDLET_FRAME_LAST = SANDLET_FRAME_SKIP,
};

typedef struct sandlet_frame_hdr {
    uint8_t version;
    uint8_t type;
    uint16_t flags;
    uint32_t id;
    uint32_t length;
} sandlet_frame_hdr;

/* Decodes a header from buf.  Returns 0 when a valid header was read,
 * -EAGAIN when len < SANDLET_FRAME_HEADER, -EPROTO for a wrong version or
 * type or unknown flags, -EMSGSIZE for a length above SANDLET_FRAME_MAX. */
int sandlet_frame_header_decode(const uint8_t *buf, size_t len, sandlet_frame_hdr *out);
void sandlet_frame_header_encode(uint8_t *buf, const sandlet_frame_hdr *hdr);
const char *sandlet_frame_type_name(unsigned type);

/* ---- building payloads ------------------------------------------------ */

/* Appends the payload items above to b (sticky errors, as b's own). */
void sandlet_buf_put_u8(sandlet_buf *b, uint8_t v);
void sandlet_buf_put_u16(sandlet_buf *b, uint16_t v);
void sandlet_buf_put_u32(sandlet_buf *b, uint32_t v);
void sandlet_buf_put_u64(sandlet_buf *b, uint64_t v);
void sandlet_buf_put_str(sandlet_buf *b, const char *s, size_t len);

/* Starts a frame at the end of b; returns the offset to pass to
 * sandlet_frame_finish once the payload has been appended. */
size_t sandlet_frame_begin(sandlet_buf *b, uint8_t type, uint32_t id);
/* Writes the final header (flags, payload length).  Returns 0, the
 * buffer's sticky error, or -EMSGSIZE when the payload exceeds the max. */
int sandlet_frame_finish(sandlet_buf *b, size_t start, uint16_t flags);

/* ---- reading payloads ------------------------------------------------- */

typedef struct sandlet_reader {
    const uint8_t *p;
    size_t len;
    size_t pos;
    bool bad; /* sticky: set by any read past the end or malformed str */
} sandlet_reader;

void sandlet_reader_init(sandlet_reader *r, const uint8_t *p, size_t len);
uint8_t sandlet_read_u8(sandlet_reader *r);
uint16_t sandlet_read_u16(sandlet_reader *r);
uint32_t sandlet_read_u32(sandlet_reader *r);
uint64_t sandlet_read_u64(sandlet_reader *r);
/* Returns a pointer to the NUL-terminated string inside the payload, or
 * "" (and marks the reader bad) when it does not fit, lacks its NUL or
 * holds a NUL before it. */
const char *sandlet_read_str(sandlet_reader *r, size_t *len);
/* The unread remainder. */
const uint8_t *sandlet_read_rest(sandlet_reader *r, size_t *len);

/* ---- typed messages --------------------------------------------------- */

typedef struct sandlet_wire_header {
    const char *name;
    const char *value;
    /* Their lengths, as sandlet_wire_headers_next read them; an encoder
     * (INIT's params) measures the strings itself and ignores these. */
    size_t name_len, value_len;
} sandlet_wire_header;

/* A decoded REQUEST.  Header pairs are not copied out: iterate them with
 * sandlet_wire_headers_next, which re-reads the payload in place. */
typedef struct sandlet_wire_request {
    uint16_t servlet;
    uint8_t http_major, http_minor;
    uint16_t nheaders;
    const char *method;
    size_t method_len;
    const char *target;
    size_t target_len;
    const char *peer;
    size_t peer_len;
    sandlet_reader headers; /* positioned at the first header */
    const uint8_t *body;
    size_t body_len;
} sandlet_wire_request;

typedef struct sandlet_wire_response {
    uint16_t status;
    uint16_t nheaders;
    uint64_t content_length;
    sandlet_reader headers;
    const uint8_t *body;
    size_t body_len;
} sandlet_wire_response;

/* The frame header of a frame whose payload is appended to b after it:
 * sandlet_frame_begin, the payload, then sandlet_frame_finish_more with
 * more bytes of payload the caller sends from elsewhere (a writev of a
 * body it does not copy).  Returns 0, b's sticky error, or -EMSGSIZE. */
int sandlet_frame_finish_more(sandlet_buf *b, size_t start, uint16_t flags, size_t more);

/* REQUEST (and its REQBODY frames).  Encoding is in three steps so that
 * the acceptor can write header values it filters on the way:
 * sandlet_wire_request_begin writes the frame header and the fixed
 * fields of rq (servlet .. peer, with rq->nheaders), then exactly
 * rq->nheaders sandlet_wire_header_put calls, then
 * sandlet_wire_request_finish with the body: as much as fits travels in
 * the REQUEST, the rest in REQBODY frames, the last frame with END.  On
 * any error b is cut back to start and its error cleared. */
size_t sandlet_wire_request_begin(sandlet_buf *b, uint32_t id, const sandlet_wire_request *rq);
void sandlet_wire_header_put(sandlet_buf *b, const char *name, size_t name_len, const char *value,
                             size_t value_len);
int sandlet_wire_request_finish(sandlet_buf *b, size_t start, uint32_t id, const uint8_t *body,
                                size_t len);
int sandlet_wire_request_decode(const uint8_t *payload, size_t len, sandlet_wire_request *out);
/* The REQUEST of a streamed body: instead of sandlet_wire_request_finish,
 * puts as much of body as fits into the REQUEST (*taken bytes) and ends
 * the frame without END; the rest follows with sandlet_wire_reqbody_encode.
 * On error b is cut back to start and its error cleared. */
int sandlet_wire_request_finish_open(sandlet_buf *b, size_t start, const uint8_t *body, size_t len,
                                     size_t *taken);
/* Appends len bytes of a streamed body as REQBODY frames (as many as the
 * maximum needs, at least one); flags (END, END|ABORT with len 0, or 0)
 * go on the last.  0, -EINVAL for ABORT without END or with bytes, or b's
 * error; on error b is as it was. */
int sandlet_wire_reqbody_encode(sandlet_buf *b, uint32_t id, const uint8_t *body, size_t len,
                                uint16_t flags);

/* RESPONSE: sandlet_wire_response_begin writes the frame header and the
 * fixed fields of rs (status, nheaders, content_length), then
 * rs->nheaders sandlet_wire_header_put calls, then body bytes and
 * sandlet_frame_finish (or sandlet_frame_finish_more).  BODY frames are
 * sandlet_wire_body_begin, bytes, finish. */
size_t sandlet_wire_response_begin(sandlet_buf *b, uint32_t id, const sandlet_wire_response *rs);
size_t sandlet_wire_body_begin(sandlet_buf *b, uint32_t id);
/* 0, -EPROTO for a payload that does not parse, or -ERANGE for one that
 * parses (out is filled in) but whose status is not a final HTTP status
 * (200-599): a 1xx would make the acceptor answer with an interim
 * response and leave the connection one answer behind. */
int sandlet_wire_response_decode(const uint8_t *payload, size_t len, sandlet_wire_response *out);
/* Reads the next header pair; returns false when the iteration is done. */
bool sandlet_wire_headers_next(sandlet_reader *r, uint16_t *left, sandlet_wire_header *h);
/* The rule for BODY frames: an empty one must end the response. */
bool sandlet_wire_body_valid(size_t len, uint16_t flags);

/* READY and FAIL, each appended whole (id 0, END).  On error b is cut
 * back and its error cleared. */
int sandlet_wire_ready_encode(sandlet_buf *b);
/* SKIP for request id, which the acceptor took back. */
int sandlet_wire_skip_encode(sandlet_buf *b, uint32_t id);
int sandlet_wire_fail_encode(sandlet_buf *b, const char *msg);
/* *msg points into payload; -EPROTO (and *msg = "") when no str is there. */
int sandlet_wire_fail_decode(const uint8_t *payload, size_t len, const char **msg);

/* INIT: what one sandbox's workers load and how they confine themselves.
 * Strings and the key point into the caller's memory (encode) or into
 * the payload (decode); the arrays of a decoded INIT are allocated, freed
 * with sandlet_wire_init_free. */
typedef struct sandlet_wire_servlet {
    const char *path;
    const char *library;
    sandlet_wire_header *params;
    uint16_t nparams;
    uint32_t timeout; /* ms a request may run; 0: none */
} sandlet_wire_servlet;

/* A page of an INIT: its request path and shared object ("": the slot is
 * empty, its requests get 500). */
typedef struct sandlet_wire_page {
    const char *path;
    const char *library;
} sandlet_wire_page;

typedef struct sandlet_wire_init {
    const char *sandbox;
    sandlet_wire_servlet *servlets;
    uint16_t nservlets;
    /* pages: request index nservlets + i is page i */
    uint32_t pages_gen;
    sandlet_wire_page *pages;
    uint16_t npages;
    /* confinement */
    bool confine;
    uint32_t uid, gid; /* SANDLET_WIRE_KEEP_ID: unchanged */
    uint32_t memory_mib, open_files, cpu_seconds;
    bool core_dumps;
    uint8_t syscalls; /* bit 0 files, bit 1 database */
    bool learn;
    /* development mode where the kernel records no Landlock denial: note
     * refused file calls and explain them (filehint.h) */
    bool file_hints;
    const char **readable;
    uint16_t nreadable;
    const char **writable;
    uint16_t nwritable;
    uint64_t max_file_size;
    uint16_t *ports;
    uint8_t nports;
    /* sessions */
    uint8_t sessions; /* 1: memory */
    uint32_t session_timeout;
    bool cookie_secure;
    const char *cookie_name;
    const char *cookie_path;
    /* database: NULL or "" on encode, "" on decode when none */
    const char *database;
    const char *database_password;
    uint32_t page_timeout; /* ms a page request may run; 0: none */
    const char *spool;     /* the spool folder, when descriptor 6 is a spool file; "": none */
    const uint8_t *key;    /* SANDLET_WIRE_KEY_LEN bytes */
} sandlet_wire_init;

/* Appends the INIT frame of in to b.  0 or -errno (-EMSGSIZE when it
 * would exceed SANDLET_FRAME_MAX); on error b is as it was. */
int sandlet_wire_init_encode(sandlet_buf *b, const sandlet_wire_init *in);
/* 0, -EPROTO for a payload that does not parse exactly, or -ENOMEM. */
int sandlet_wire_init_decode(const uint8_t *payload, size_t len, sandlet_wire_init *out);
void sandlet_wire_init_free(sandlet_wire_init *in);

#endif /* SANDLET_FRAME_H */

/*
 * setcookie.c - the acceptor's judge of the Set-Cookie headers a worker
 * answers with: a servlet may set any cookie but a session cookie that is
 * not its sandbox's, judged by the name a browser will send the cookie
 * back under (src/lib/cookie.c), so that no spelling (a nameless cookie,
 * a prefix, another case) plants or erases another sandbox's session.
 *
 * Pure decision and one log line: it must never change the header, keep
 * state, or log the cookie's value (it may be a session token).
 */
#include "config.h"

#include "common/log.h"
#include "lib/servlet.h"
#include "loop/acceptor.h"
#include "loop/conn.h"

#include <string.h>
#include <strings.h>

bool sandlet_setcookie_allowed(const sandlet_conn *c, const sandlet_sandbox_conf *own,
                               const char *value, size_t value_len)
{
    const char *name;
    size_t len;
    if (!sandlet_lib_set_cookie_foreign(value, value_len, own->session_cookie, &name, &len))
        return true;
    const sandlet_conf *conf = sandlet_conn_server(c)->conf;
    const sandlet_servlet_conf *servlet = sandlet_conn_servlet(c);
    const char *path = servlet ? servlet->path : "?";
    for (size_t i = 0; i < conf->nsandboxes; i++) {
        const sandlet_sandbox_conf *other = &conf->sandboxes[i];
        if (strlen(other->session_cookie) == len &&
            strncasecmp(other->session_cookie, name, len) == 0) {
            sandlet_error("servlet %s of sandbox '%s' tried to set the session cookie %s of "
                          "sandbox '%s' (%s); answering 502 instead",
                          path, own->name, other->session_cookie, other->name,
                          sandlet_conn_reqline(c));
            return false;
        }
    }
    /* No sandbox of this file has it, but one added by a reload, or of
     * another host serving the same site, may: refused all the same.  The
     * name is the worker's, already checked free of control bytes, and
     * cut short. */
    sandlet_error("servlet %s of sandbox '%s' tried to set the session cookie %.*s, which is not "
                  "its own (%s); answering 502 instead",
                  path, own->name, (int)(len < 80 ? len : 80), name, sandlet_conn_reqline(c));
    return false;
}

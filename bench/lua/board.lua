-- board.lua - CSE's bulletin board, for wrk (make bench): read the first
-- batch of ten messages (the server remembers the last one read in the
-- session, so every request also writes the session).  bench/run posts
-- the messages first, through the board's own form.
local cookie = nil

function request()
    local h = {}
    if cookie then
        h["Cookie"] = cookie
    end
    return wrk.format("GET", "/board?action=read&from=0", h)
end

function response(status, headers, body)
    local c = headers["Set-Cookie"] or headers["set-cookie"]
    if c then
        cookie = c:match("^([^;]+)")
    end
end

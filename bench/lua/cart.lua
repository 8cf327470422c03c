-- cart.lua - CSE's shopping-cart session, for wrk (make bench): the start
-- page (which starts the session), add an item, show the cart, remove the
-- item, show it again; round and round.  The session cookie the server
-- sets is sent back from then on (one session per wrk thread).  The same
-- paths and form fields reach sandlet's examples/cart and bench/php/cart.php.
local steps = {
    { "GET", "/cart", nil },
    { "POST", "/cart", "action=add&item=apple" },
    { "GET", "/cart?action=show", nil },
    { "POST", "/cart", "action=remove&item=apple" },
    { "GET", "/cart?action=show", nil },
}
local cookie = nil
local n = 0

function request()
    n = n % #steps + 1
    local s = steps[n]
    local h = {}
    if cookie then
        h["Cookie"] = cookie
    end
    if s[3] then
        h["Content-Type"] = "application/x-www-form-urlencoded"
    end
    return wrk.format(s[1], s[2], h, s[3])
end

function response(status, headers, body)
    local c = headers["Set-Cookie"] or headers["set-cookie"]
    if c then
        cookie = c:match("^([^;]+)")
    end
end

-- page40.lua - CSE's static page with 40 images, for wrk (make bench):
-- every connection fetches the page, then its 40 images, then the page
-- again, as a browser without a cache would.  The files are made by
-- bench/run in the docroot under /page40/.
local paths = { "/page40/index.html" }
for i = 1, 40 do
    paths[#paths + 1] = string.format("/page40/img%02d.png", i)
end
local n = 0

function request()
    n = n % #paths + 1
    return wrk.format("GET", paths[n])
end

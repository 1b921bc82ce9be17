-- wrk script: send DEPTH requests per write (HTTP/1.1 pipelining), default 16.
-- wrk -t1 -c64 -d10s -s bench/pipeline.lua http://127.0.0.1:PORT -- 16
init = function(args)
  local depth = tonumber(args[1]) or 16
  local r = {}
  for i = 1, depth do
    r[i] = wrk.format(nil, "/plaintext")
  end
  req = table.concat(r)
end

request = function()
  return req
end

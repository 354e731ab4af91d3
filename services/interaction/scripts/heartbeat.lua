-- Renew the lease of every pending form of one Host epoch (the broker's HostLink heartbeat).
-- KEYS: 1 epoch, 2 leases:{epoch}
-- ARGV: 1 epoch, 2 new lease deadline ms
-- Returns {"OK", renewed count} | {"STALE_EPOCH", current}
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current ~= tonumber(ARGV[1]) then
  return {'STALE_EPOCH', tostring(current)}
end
local ids = redis.call('ZRANGE', KEYS[2], 0, -1)
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[2], 'XX', ARGV[2], id)
end
return {'OK', tostring(#ids)}

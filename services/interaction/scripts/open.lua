-- Open a pending Interaction (docs/design.md#lua-scripts). One transition, checked before writing.
-- KEYS: 1 epoch, 2 record, 3 leases:{epoch}, 4 pending, 5 inv:{invocation}, 6 session pending, 7 session events,
--       8 Host-wide events
-- ARGV: 1 epoch, 2 id, 3 Interaction pb, 4 InteractionEvent pb, 5 session id, 6 invocation id,
--       7 lease deadline ms, 8 wait deadline ms, 9 created ms, 10 events maxlen, 11 retention ms
-- Returns {"OK", event stream id} | {"STALE_EPOCH", current} | {"ALREADY_PENDING", id} | {"COLLISION"}
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current ~= tonumber(ARGV[1]) then
  return {'STALE_EPOCH', tostring(current)}
end
local existing = redis.call('GET', KEYS[5])
if existing then
  return {'ALREADY_PENDING', existing}
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {'COLLISION'}
end
redis.call('HSET', KEYS[2], 'pb', ARGV[3], 'state', 'pending', 'session', ARGV[5], 'epoch', ARGV[1],
  'invocation', ARGV[6], 'reason', '', 'submission', '')
redis.call('ZADD', KEYS[3], ARGV[7], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[8], ARGV[2])
redis.call('SET', KEYS[5], ARGV[2], 'PX', ARGV[11])
redis.call('ZADD', KEYS[6], ARGV[9], ARGV[2])
local sid = redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[10], '*', 'pb', ARGV[4])
redis.call('PEXPIRE', KEYS[7], ARGV[11])
redis.call('XADD', KEYS[8], 'MAXLEN', '~', ARGV[10], '*', 'pb', ARGV[4])
redis.call('PEXPIRE', KEYS[8], ARGV[11])
return {'OK', sid}

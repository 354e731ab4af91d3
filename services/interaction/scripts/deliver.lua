-- Record whether an answered Interaction reached its provider (docs/security.md "No answer after
-- settlement"): delivery pending -> delivered | lost, exactly once. Compares state, epoch and the
-- delivery field before writing, so the broker's report and a Host restart's loss have one winner.
-- KEYS: 1 epoch, 2 record, 3 undelivered, 4 session events, 5 Host-wide events, 6 history entries
-- ARGV: 1 mode (broker | restart), 2 id, 3 record epoch, 4 outcome (delivered | lost), 5 new Interaction pb,
--       6 InteractionEvent pb, 7 lost reason name ('' when delivered), 8 caller epoch ('' in restart mode),
--       9 retention ms, 10 events maxlen, 11 HistoryEntry pb (with the delivery; no answer value)
-- broker: the caller's epoch must be current and the record of that epoch.
-- restart: only records of older epochs (their broker is gone; nothing can deliver them any more).
-- Returns {"OK"} | {"DONE", delivery, pb} | {"NOT_ANSWERED", state, pb} | {"NOT_FOUND"}
--       | {"STALE_EPOCH", current} | {"NOT_DUE"}
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[3], ARGV[2])
  return {'NOT_FOUND'}
end
local f = redis.call('HMGET', KEYS[2], 'state', 'epoch', 'delivery', 'pb')
if f[2] ~= ARGV[3] then
  return {'NOT_FOUND'}
end
if f[1] ~= 'answered' then
  return {'NOT_ANSWERED', f[1], f[4]}
end
if f[3] ~= 'pending' then
  redis.call('ZREM', KEYS[3], ARGV[2])
  return {'DONE', f[3] or '', f[4]}
end
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local epoch = tonumber(f[2])
if ARGV[1] == 'restart' then
  if epoch >= current then
    return {'NOT_DUE'}
  end
elseif tonumber(ARGV[8]) ~= current or epoch ~= current then
  return {'STALE_EPOCH', tostring(current)}
end
redis.call('HSET', KEYS[2], 'pb', ARGV[5], 'delivery', ARGV[4], 'delivery_reason', ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[9])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[10], '*', 'pb', ARGV[6])
redis.call('PEXPIRE', KEYS[4], ARGV[9])
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[10], '*', 'pb', ARGV[6])
redis.call('PEXPIRE', KEYS[5], ARGV[9])
if redis.call('HEXISTS', KEYS[6], ARGV[2]) == 1 then
  redis.call('HSET', KEYS[6], ARGV[2], ARGV[11])
end
return {'OK'}

-- Settle a pending Interaction: answer it, or close it with a reason (docs/design.md#lua-scripts;
-- docs/design.md#settlement).
-- Compares state, session, epoch, lease and wait before writing, so concurrent settlements have one winner.
-- KEYS: 1 epoch, 2 record, 3 leases:{record epoch}, 4 pending, 5 inv:{invocation}, 6 session pending,
--       7 session events, 8 settled, 9 Host-wide events, 10 undelivered, 11 history, 12 history entries
-- ARGV: 1 mode (answer | close | lease | timeout | restart), 2 id, 3 session id, 4 record epoch,
--       5 new Interaction pb, 6 InteractionEvent pb, 7 new state, 8 close reason name, 9 submission id,
--       10 now ms, 11 retention ms, 12 events maxlen, 13 caller epoch ('' when none),
--       14 HistoryEntry pb (no answer value), 15 history retention ms, 16 history max entries
-- Returns {"OK"} | {"SAME", pb} | {"ANSWERED", pb} | {"CLOSED", reason, pb} | {"NOT_FOUND"} | {"STALE"}
--       | {"STALE_EPOCH", current} | {"EXPIRED", reason} | {"NOT_DUE"}
local mode = ARGV[1]
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {'NOT_FOUND'}
end
local f = redis.call('HMGET', KEYS[2], 'state', 'session', 'epoch', 'reason', 'submission', 'pb')
if f[2] ~= ARGV[3] or f[3] ~= ARGV[4] then
  return {'NOT_FOUND'}
end
if f[1] == 'answered' then
  if mode == 'answer' and f[5] == ARGV[9] then
    return {'SAME', f[6]}
  end
  return {'ANSWERED', f[6]}
end
if f[1] == 'closed' then
  return {'CLOSED', f[4], f[6]}
end
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local epoch = tonumber(f[3])
local now = tonumber(ARGV[10])
if mode == 'restart' then
  if epoch >= current then
    return {'NOT_DUE'}
  end
elseif epoch < current then
  return {'STALE'}
end
if mode == 'close' and ARGV[13] ~= '' and tonumber(ARGV[13]) ~= current then
  return {'STALE_EPOCH', tostring(current)}
end
local lease = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[2]) or '0')
local wait = tonumber(redis.call('ZSCORE', KEYS[4], ARGV[2]) or '0')
if mode == 'lease' and lease > now then
  return {'NOT_DUE'}
end
if mode == 'timeout' and wait > now then
  return {'NOT_DUE'}
end
if mode == 'answer' then
  if wait <= now then
    return {'EXPIRED', 'timed_out'}
  end
  if lease <= now then
    return {'EXPIRED', 'lease_expired'}
  end
end
redis.call('HSET', KEYS[2], 'pb', ARGV[5], 'state', ARGV[7], 'reason', ARGV[8], 'submission', ARGV[9])
redis.call('PEXPIRE', KEYS[2], ARGV[11])
if ARGV[7] == 'answered' then
  -- Committed, not yet delivered: deliver.lua records whether the provider got it (docs/security.md).
  redis.call('HSET', KEYS[2], 'delivery', 'pending')
  redis.call('ZADD', KEYS[10], ARGV[10], ARGV[2])
  redis.call('PEXPIRE', KEYS[10], ARGV[11])
end
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZREM', KEYS[6], ARGV[2])
if redis.call('GET', KEYS[5]) == ARGV[2] then
  redis.call('DEL', KEYS[5])
end
redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[12], '*', 'pb', ARGV[6])
redis.call('PEXPIRE', KEYS[7], ARGV[11])
redis.call('XADD', KEYS[9], 'MAXLEN', '~', ARGV[12], '*', 'pb', ARGV[6])
redis.call('PEXPIRE', KEYS[9], ARGV[11])
redis.call('XADD', KEYS[8], 'MAXLEN', '~', ARGV[12], '*', 'id', ARGV[2], 'epoch', ARGV[4], 'pb', ARGV[5])
redis.call('PEXPIRE', KEYS[8], ARGV[11])
-- History (docs/design.md#history): the entry, then at most 64 entries past retention or the cap trimmed.
redis.call('ZADD', KEYS[11], now, ARGV[2])
redis.call('HSET', KEYS[12], ARGV[2], ARGV[14])
local keep = tonumber(ARGV[15])
local old = redis.call('ZRANGEBYSCORE', KEYS[11], '-inf', '(' .. tostring(now - keep), 'LIMIT', 0, 64)
local over = redis.call('ZCARD', KEYS[11]) - tonumber(ARGV[16])
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[11], 0, math.min(over, 64) - 1)) do
    old[#old + 1] = id
  end
end
for _, id in ipairs(old) do
  redis.call('ZREM', KEYS[11], id)
  redis.call('HDEL', KEYS[12], id)
end
redis.call('PEXPIRE', KEYS[11], keep)
redis.call('PEXPIRE', KEYS[12], keep)
return {'OK'}

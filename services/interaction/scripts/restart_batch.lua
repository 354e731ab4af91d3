-- Close a batch of pending Interactions of older Host epochs as host_restarted (RFC criterion 9; docs/design.md#host-epoch-and-fencing).
-- Per form it runs the same checks and writes as settle.lua in 'restart' mode, so it is safe against
-- concurrent answers, closes, reapers and other replicas: the record exists, its session and epoch match,
-- it is still pending and its epoch is older than the current one; any other form is skipped unchanged.
-- Every key is declared (all share the Host's hash tag: one Redis Cluster slot).
-- KEYS: 1 epoch, 2 pending, 3 settled, 4 Host-wide events, 5 history, 6 history entries, then 5 keys per
--       form i (i = 0..n-1) at 7 + 5*i: record, leases:{record epoch}, inv:{invocation}, session pending,
--       session events
-- ARGV: 1 retention ms, 2 events maxlen, 3 now ms, 4 history retention ms, 5 history max entries, then 6 args
--       per form i at 6 + 6*i: id, session id, record epoch, new Interaction pb (closed), InteractionEvent pb
--       (closed), HistoryEntry pb
-- Returns the ids it closed, in order.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local retention = ARGV[1]
local maxlen = ARGV[2]
local now = tonumber(ARGV[3])
local n = (#KEYS - 6) / 5
local closed = {}
for i = 0, n - 1 do
  local record, leases, inv, session_pending, session_events =
    KEYS[7 + 5 * i], KEYS[8 + 5 * i], KEYS[9 + 5 * i], KEYS[10 + 5 * i], KEYS[11 + 5 * i]
  local id, session, epoch_arg, pb, event, entry =
    ARGV[6 + 6 * i], ARGV[7 + 6 * i], ARGV[8 + 6 * i], ARGV[9 + 6 * i], ARGV[10 + 6 * i], ARGV[11 + 6 * i]
  local f = redis.call('HMGET', record, 'state', 'session', 'epoch')
  if f[1] == 'pending' and f[2] == session and f[3] == epoch_arg and tonumber(f[3]) < current then
    redis.call('HSET', record, 'pb', pb, 'state', 'closed', 'reason', 'host_restarted', 'submission', '')
    redis.call('PEXPIRE', record, retention)
    redis.call('ZREM', leases, id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', session_pending, id)
    if redis.call('GET', inv) == id then
      redis.call('DEL', inv)
    end
    redis.call('XADD', session_events, 'MAXLEN', '~', maxlen, '*', 'pb', event)
    redis.call('PEXPIRE', session_events, retention)
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', 'pb', event)
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', maxlen, '*', 'id', id, 'epoch', epoch_arg, 'pb', pb)
    redis.call('ZADD', KEYS[5], now, id)
    redis.call('HSET', KEYS[6], id, entry)
    closed[#closed + 1] = id
  end
end
if #closed > 0 then
  redis.call('PEXPIRE', KEYS[4], retention)
  redis.call('PEXPIRE', KEYS[3], retention)
  -- History trimmed as in settle.lua: past retention, then over the cap (bounded per call).
  local keep = tonumber(ARGV[4])
  local old = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. tostring(now - keep), 'LIMIT', 0, 64)
  local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[5])
  if over > 0 then
    for _, id in ipairs(redis.call('ZRANGE', KEYS[5], 0, math.min(over, 64) - 1)) do
      old[#old + 1] = id
    end
  end
  for _, id in ipairs(old) do
    redis.call('ZREM', KEYS[5], id)
    redis.call('HDEL', KEYS[6], id)
  end
  redis.call('PEXPIRE', KEYS[5], keep)
  redis.call('PEXPIRE', KEYS[6], keep)
end
return closed

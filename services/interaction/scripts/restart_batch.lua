-- Close a batch of pending Interactions of older Host epochs as host_restarted (RFC criterion 9; docs/design.md#host-epoch-and-fencing).
-- Per form it runs the same checks and writes as settle.lua in 'restart' mode, so it is safe against
-- concurrent answers, closes, reapers and other replicas: the record exists, its session and epoch match,
-- it is still pending and its epoch is older than the current one; any other form is skipped unchanged.
-- Every key is declared (all share the Host's hash tag: one Redis Cluster slot).
-- KEYS: 1 epoch, 2 pending, 3 settled, 4 Host-wide events, then 5 keys per form i (i = 0..n-1) at 5 + 5*i:
--       record, leases:{record epoch}, inv:{invocation}, session pending, session events
-- ARGV: 1 retention ms, 2 events maxlen, then 5 args per form i at 3 + 5*i:
--       id, session id, record epoch, new Interaction pb (closed), InteractionEvent pb (closed)
-- Returns the ids it closed, in order.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local retention = ARGV[1]
local maxlen = ARGV[2]
local n = (#KEYS - 4) / 5
local closed = {}
for i = 0, n - 1 do
  local record, leases, inv, session_pending, session_events =
    KEYS[5 + 5 * i], KEYS[6 + 5 * i], KEYS[7 + 5 * i], KEYS[8 + 5 * i], KEYS[9 + 5 * i]
  local id, session, epoch_arg, pb, event =
    ARGV[3 + 5 * i], ARGV[4 + 5 * i], ARGV[5 + 5 * i], ARGV[6 + 5 * i], ARGV[7 + 5 * i]
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
    closed[#closed + 1] = id
  end
end
if #closed > 0 then
  redis.call('PEXPIRE', KEYS[4], retention)
  redis.call('PEXPIRE', KEYS[3], retention)
end
return closed

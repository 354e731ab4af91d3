-- Read many Interaction records in one call (no writes): for each record key, its fields
-- state, session, epoch, invocation, submission, pb (each nil when the record does not exist).
-- KEYS: record keys. Returns a flat array of 6 values per key, in KEYS order.
local out = {}
for i = 1, #KEYS do
  local f = redis.call('HMGET', KEYS[i], 'state', 'session', 'epoch', 'invocation', 'submission', 'pb')
  for j = 1, 6 do
    out[#out + 1] = f[j]
  end
end
return out

-- Fence one invocation (docs/security.md "No answer after settlement"): from now on no form can be
-- opened for it (open.lua treats any value of inv:{invocation} as ALREADY_PENDING), and the id of the
-- form pending for it, if any, is returned so the caller closes it through settle.lua (which deletes
-- inv:{invocation} only when it still holds that id, so the fence stays).
-- KEYS: 1 epoch, 2 inv:{invocation}
-- ARGV: 1 caller epoch, 2 retention ms
-- Returns {"OK", pending id or ""} | {"STALE_EPOCH", current}
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current ~= tonumber(ARGV[1]) then
  return {'STALE_EPOCH', tostring(current)}
end
local existing = redis.call('GET', KEYS[2]) or ''
if existing == '!settled' then
  existing = ''
end
redis.call('SET', KEYS[2], '!settled', 'PX', ARGV[2])
return {'OK', existing}

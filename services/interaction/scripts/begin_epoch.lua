-- Begin a new Host epoch: the fencing token every other script compares (docs/design.md#host-epoch-and-fencing).
-- From this INCR on, every write of an older epoch is refused (open, close, heartbeat: STALE_EPOCH;
-- settle of an older-epoch record: STALE), so every form still pending can only end host_restarted.
-- KEYS: 1 epoch, 2 pending
-- Returns {new epoch, pending count}: every pending form belongs to an older epoch at this instant.
local epoch = redis.call('INCR', KEYS[1])
return {epoch, redis.call('ZCARD', KEYS[2])}

-- Begin a new Host epoch: the fencing token every other script compares (DESIGN.md §4).
-- KEYS: 1 epoch
-- Returns the new epoch number.
return redis.call('INCR', KEYS[1])

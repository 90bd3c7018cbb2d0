#!lua
--[[
Retry: puts a finished job back in line with a fresh attempt count: a dead-lettered (failed)
one, or, when allowed, a cancelled one. The old output is dropped and `restarted` is written, so
a watcher neither stops on the stale terminal event nor keeps the old text. The job's id stays;
its idempotency key is bound again unless another job took it meanwhile. It waits from now.

KEYS[1] job record   KEYS[2] job stream   KEYS[3] dead set   KEYS[4] ready set
KEYS[5] idempotency key (placeholder if none)   KEYS[6] doorbell list
KEYS[7..19] the books (fair share, job index, holders, outbox, waits: see _lib.lua)
ARGV[1] job id   ARGV[2] stream max length   ARGV[3] the job's idempotency key as read by the caller
ARGV[4] '1' to retry a cancelled job too ('0': dead letters only)
Returns {1} when requeued, {0} when the job is not one that may be retried, {6} when the record
changed under the caller (read it again).
Events: restarted.
]]
local job, events, dead, ready, idem, signal = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local B = books_at(7)
local id = ARGV[1]

local state = redis.call('HMGET', job, 'status', 'idempotency_key', 'rank', 'tenant')
local in_dead_set = state[1] == 'failed' and redis.call('ZSCORE', dead, id)
if not (in_dead_set or (state[1] == 'cancelled' and ARGV[4] == '1')) then
  return {0}
end
if (state[2] or '') ~= ARGV[3] then  -- a job with no key has no field
  return {6}
end
local now = now_ms()
redis.call('ZREM', dead, id)
redis.call('PERSIST', job)
redis.call('PERSIST', events)
reindex(B, job, 'waiting')
redis.call('HSET', job, 'status', 'waiting', 'attempt', 0, 'token', '', 'dead_reason', '',
  'finished_at', '', 'cancel_requested', 0, 'progress', '', 'out', 0, 'eseq', 0,
  'updated_at', now)
restart_stream(events, ARGV[2])
make_ready(B, ready, id, state[3], state[4] or '', now)
ring_doorbell(signal)
if ARGV[3] ~= '' then
  redis.call('SET', idem, id, 'NX')
end
return {1}

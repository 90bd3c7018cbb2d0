#!lua flags=allow-oom
--[[
Cancel: a job that has not started leaves the ready/scheduled set and settles cancelled at once;
a running job is flagged, and its worker is told on its next emit or heartbeat (and at once
through the cancels channel). Safe to run twice. Runs when memory is full.

KEYS[1] job record   KEYS[2] job stream   KEYS[3] ready set   KEYS[4] scheduled set
KEYS[5] lease set    KEYS[6] rank hash    KEYS[7] idempotency key (placeholder if none)
KEYS[8] intake list
KEYS[9..21] the books (fair share, job index, holders, outbox, waits: see _lib.lua)
ARGV[1] job id   ARGV[2] result ttl (ms)   ARGV[3] stream max length   ARGV[4] cancels channel
ARGV[5] the job's idempotency key as read by the caller
Returns {1, status} when the job will not produce a result, {0, status} when it did or cannot
be found (status ''), {6} when the record changed under the caller (read it again).
Events: cancelled (for a job that had not started).
]]
local job, events, ready, scheduled, leases, rank_hash, idem, intake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local B = books_at(9)
local id = ARGV[1]

local state = redis.call('HMGET', job, 'status', 'idempotency_key', 'tenant', 'rank',
  'created_at')
local status = state[1]
if not status then
  return {0, ''}
end
if status == 'cancelled' then
  return {1, status}
end
if status == 'completed' or status == 'failed' then
  return {0, status}
end
if (state[2] or '') ~= ARGV[5] then  -- a job with no key has no field
  return {6}
end

local now = now_ms()
redis.call('HSET', job, 'cancel_requested', 1, 'updated_at', now)
if status == 'active' then
  redis.call('PUBLISH', ARGV[4], id)
  return {1, status}
end

-- A waiting job is in the intake until a pick admits it, then in the ready set.
local tenant = state[3] or ''
if status ~= 'waiting' or redis.call('LREM', intake, 1,
    intake_entry(pad_ms(state[5]), tenant, state[4], id)) == 0 then
  leave_ready(B, ready, id, state[4], tenant)
end
redis.call('ZREM', scheduled, id)
end_lease(B, leases, id, state[3])
redis.call('HDEL', rank_hash, id)
cancel_settle(B, job, events, idem, id, now, tonumber(ARGV[2]), ARGV[3])
return {1, 'cancelled'}

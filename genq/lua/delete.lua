#!lua flags=allow-oom
--[[
Delete: removes a finished job for good: its record, stream, index entries, dead-set entry and
idempotency key (while the key still names it). A job that has not finished is refused: cancel
it first. Safe to run twice. Runs when memory is full (it only frees memory).

KEYS[1] job record   KEYS[2] job stream   KEYS[3] dead set
KEYS[4] idempotency key (placeholder if none)
KEYS[5..17] the books (fair share, job index, holders, outbox, waits: see _lib.lua)
ARGV[1] job id   ARGV[2] the job's idempotency key as read by the caller
Returns {1} deleted, {0} no such job, {2} the job has not finished, {6} when the record changed
under the caller (read it again).
Events: none (the stream is deleted).
]]
local job, events, dead, idem = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local B = books_at(5)
local id = ARGV[1]

local state = redis.call('HMGET', job, 'status', 'idempotency_key')
if not state[1] then
  return {0}
end
if not finished(state[1]) then
  return {2}
end
if (state[2] or '') ~= ARGV[2] then  -- a job with no key has no field
  return {6}
end
reindex(B, job, nil)
redis.call('ZREM', dead, id)
release_key(idem, id)
redis.call('DEL', job, events)
return {1}

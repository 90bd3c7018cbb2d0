#!lua
--[[
Emit: appends one event to a running job's stream, renews its lease and reports a pending
cancel, in one round trip. Only the holder of the current lease token may emit, and only while
that lease has not expired (an expired lease is another worker's to reclaim). Once a cancel
is requested nothing more is appended. A `restarted` event (ActiveJob.restart: the handler starts
its output over) drops the stream's entries first, as a new attempt's restart marker does. Safe to run twice: an emit whose sequence number was
already applied appends nothing.

KEYS[1] job record   KEYS[2] job stream   KEYS[3] lease set
ARGV[1] job id   ARGV[2] lease token   ARGV[3] emit sequence number (per attempt, from 1)
ARGV[4] event type (chunk | progress | restarted | a handler's own, ActiveJob.emit(type=))
ARGV[5] data (JSON)   ARGV[6] lease length (ms)
ARGV[7] stream max length   ARGV[8] progress value (progress events only)
Returns {0, entry id or ''} appended, {5} cancel requested, {4} lease lost.
Events: the one emitted.
]]
local job, events, leases = KEYS[1], KEYS[2], KEYS[3]
local id, token = ARGV[1], ARGV[2]

local state = redis.call('HMGET', job, 'status', 'token', 'cancel_requested', 'eseq')
if state[1] ~= 'active' or state[2] ~= token then
  return {4}
end
local now = now_ms()
local held = redis.call('ZSCORE', leases, id)
if not held or tonumber(held) <= now then
  return {4}
end
redis.call('ZADD', leases, 'XX', now + tonumber(ARGV[6]), id)
if state[3] == '1' then
  return {5}
end
local seq = tonumber(ARGV[3])
if seq <= tonumber(state[4]) then
  return {0, ''}
end
local entry
if ARGV[4] == 'restarted' then
  entry = restart_stream(events, ARGV[7], ARGV[5])
else
  entry = append(events, ARGV[7], ARGV[4], ARGV[5])
end
if ARGV[4] == 'progress' then
  redis.call('HSET', job, 'eseq', seq, 'out', 1, 'progress', ARGV[8], 'updated_at', now)
else
  redis.call('HSET', job, 'eseq', seq, 'out', 1)
end
return {0, entry}

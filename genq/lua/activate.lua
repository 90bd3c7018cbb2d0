#!lua
--[[
Activate (second half of a reserve): turns a claimed job into a running one held by a lease
token. The attempt is counted here, so a handler that kills its process still spends attempts.
When the job's stream holds output of an earlier attempt, that output is dropped and a
`restarted` event is written above every id the earlier attempt used.
Safe to run twice: a re-run with the same token answers with the job as activated.

KEYS[1] job record   KEYS[2] job stream   KEYS[3] lease set
KEYS[4..16] the books (fair share, job index, holders, outbox, waits: see _lib.lua)
ARGV[1] job id   ARGV[2] lease token   ARGV[3] lease length (ms)   ARGV[4] stream max length
Returns {0, HGETALL of the record} when held, {3} when the claim is gone (cancelled or
reclaimed) or expired (its worker was too slow, or vanished: reclaim.lua takes it back).
Events: restarted (when an earlier attempt wrote output).
]]
local job, events, leases = KEYS[1], KEYS[2], KEYS[3]
local B = books_at(4)
local id, token = ARGV[1], ARGV[2]

local status = redis.call('HGET', job, 'status')
if status == 'active' and redis.call('HGET', job, 'token') == token then
  return {0, redis.call('HGETALL', job)}
end
local now = now_ms()
local claim = redis.call('ZSCORE', leases, id)
if not claim or tonumber(claim) <= now then
  return {3}
end
if status ~= 'waiting' and status ~= 'scheduled' then
  if not status then
    redis.call('ZREM', leases, id)
  end
  return {3}
end

local lease_until = now + tonumber(ARGV[3])
redis.call('ZADD', leases, lease_until, id)
if redis.call('HGET', job, 'out') == '1' then
  restart_stream(events, ARGV[4])
end
redis.call('HINCRBY', job, 'attempt', 1)
reindex(B, job, 'active')
redis.call('HSET', job, 'status', 'active', 'token', token, 'started_at', now,
  'updated_at', now, 'lease_until', lease_until, 'out', 0, 'eseq', 0)
return {0, redis.call('HGETALL', job)}

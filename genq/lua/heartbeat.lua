#!lua flags=allow-oom
--[[
Heartbeat: renews a running job's lease and reports a pending cancel. Only the holder of the
current lease token may renew, and only before that lease expires: an expired lease (run out, or
expired by presence.lua when its worker vanished) is another worker's to reclaim. Safe to run twice. Runs when memory is full (it only rewrites
existing values), so a running job keeps its lease and still hears its cancel.

KEYS[1] job record   KEYS[2] lease set
ARGV[1] job id   ARGV[2] lease token   ARGV[3] lease length (ms)
Returns {0} renewed, {5} renewed but cancel requested, {4} lease lost.
Events: none.
]]
local job, leases = KEYS[1], KEYS[2]
local state = redis.call('HMGET', job, 'status', 'token', 'cancel_requested')
if state[1] ~= 'active' or state[2] ~= ARGV[2] then
  return {4}
end
local now = now_ms()
local held = redis.call('ZSCORE', leases, ARGV[1])
if not held or tonumber(held) <= now then
  return {4}
end
local lease_until = now + tonumber(ARGV[3])
redis.call('ZADD', leases, 'XX', lease_until, ARGV[1])
redis.call('HSET', job, 'lease_until', lease_until)
if state[3] == '1' then
  return {5}
end
return {0}

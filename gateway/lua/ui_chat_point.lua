#!lua
--[[
UI chat point: points a useChat chat at a generation, if the chat still points where the caller
last saw it (compare and set), and gives the pointer its expiry. Run with the same id as the one
seen, it only renews the expiry. Safe to run twice: a second run finds its own id and renews.

KEYS[1] the chat's pointer (string: a generation id)
ARGV[1] the generation id the caller saw ('' when the chat pointed nowhere)
ARGV[2] the generation id to point at
ARGV[3] the pointer's lifetime in ms (0: no expiry)
Returns 1 when the chat now points at ARGV[2]; otherwise the id it points at instead (a
concurrent request moved it).
]]
local pointer = KEYS[1]
local seen, target, ttl_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])

local current = redis.call('GET', pointer) or ''
if current ~= seen and current ~= target then
  return current
end
if ttl_ms > 0 then
  redis.call('SET', pointer, target, 'PX', ttl_ms)
else
  redis.call('SET', pointer, target)
end
return 1

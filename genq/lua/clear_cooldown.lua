#!lua
--[[
Clear cooldown: ends a queue's cooldown at once (an operator overriding a provider's
Retry-After) and wakes idle workers, which would otherwise sleep out the pause they read.
Safe to run twice.

KEYS[1] cooldown key   KEYS[2] doorbell list
Returns the cooldown's remaining length (ms) before it was cleared; 0 if none was in force.
Events: none.
]]
local cooldown, signal = KEYS[1], KEYS[2]
local remaining = redis.call('PTTL', cooldown)
if remaining <= 0 then
  return 0
end
redis.call('DEL', cooldown)
ring_doorbell(signal)
return remaining

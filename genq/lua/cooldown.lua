#!lua
--[[
Cooldown: pauses reserving from the queue for a while (a provider's Retry-After, shared by all
workers). A longer cooldown already in force is kept.

KEYS[1] cooldown key
ARGV[1] length (ms)
Returns the cooldown's remaining length (ms).
Events: none.
]]
local key, ms = KEYS[1], tonumber(ARGV[1])
if redis.call('PTTL', key) < ms then
  redis.call('SET', key, '1', 'PX', ms)
end
return redis.call('PTTL', key)

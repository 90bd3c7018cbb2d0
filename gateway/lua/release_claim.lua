#!lua
--[[
Release claim: deletes an Idempotency-Key's acceptance claim if the caller still holds it. A
claim that expired and was taken by another request is left alone. Safe to run twice.

KEYS[1] the claim (string: the holder's token)
ARGV[1] the caller's token
Returns 1 when the claim was released, 0 when the caller no longer held it.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

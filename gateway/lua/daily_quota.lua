#!lua
--[[
Daily quota: counts one accepted generation against a tenant's quota for one UTC day, or
refuses when the day's count already reached it. The key is that day's own (the caller names
the day), and expires after it, so nothing ever resets a count.
Running it twice (a retried reply) charges twice: the caller's refund path cannot tell, and
one generation too few on that day is the price (a quota is not a ledger).
Uses _limits_lib.lua.

KEYS[1] the tenant's count for the day (string)
ARGV[1] the quota (generations per day, >= 1)
ARGV[2] when the key expires (epoch seconds: the end of the day, plus a margin)
Returns {1, count after} when charged, {0, count} when the quota is reached (nothing written).
]]
local counter = KEYS[1]
local quota = tonumber(ARGV[1])
local expire_at = tonumber(ARGV[2])

local count = daily_count(counter)
if count >= quota then
  return {0, count}
end
return {1, daily_add(counter, expire_at)}

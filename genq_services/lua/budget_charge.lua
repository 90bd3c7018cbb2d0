#!lua flags=allow-oom
--[[
Budget charge: replaces a job's open reservation with what its attempt really cost, on the
spend of the current day and month. A release is a charge of 0 (a cancel before the job ran, a
failed enqueue, the sweep of a job that finished without its charge).

Safe to run twice: the reservation's removal decides, so a second charge for the same
reservation (a retried reply, the sweep racing the worker) writes nothing. Runs when Redis is
full (allow-oom): it frees budget, it must not fail half-way.

KEYS[1] the tenant's budget account (hash)
ARGV[1] job id
ARGV[2] cost (nano-USD, integer >= 0)
ARGV[3] today, YYYY-MM-DD (UTC)
ARGV[4] this month, YYYY-MM (UTC)
Returns {1, amount reserved} charged; {0, 0} no open reservation (nothing written).
]]
local account = KEYS[1]
local field = 'r:' .. ARGV[1]
local cost = tonumber(ARGV[2])

local held = redis.call('HGET', account, field)
if not held then
  return {0, 0}
end
local amount = tonumber(string.match(held, '^(%d+)'))
redis.call('HDEL', account, field)
redis.call('HINCRBY', account, 'reserved', string.format('%.0f', -amount))

-- Adds the cost to the named period, starting it over when the stored one is older; a caller
-- whose clock is behind adds to the newer period already stored.
local function add(period_field, spent_field, current)
  local stored = redis.call('HGET', account, period_field)
  if stored == false or stored < current then
    redis.call('HSET', account, period_field, current, spent_field, string.format('%.0f', cost))
  elseif cost > 0 then
    redis.call('HINCRBY', account, spent_field, string.format('%.0f', cost))
  end
end
add('day', 'day_spent', ARGV[3])
add('month', 'month_spent', ARGV[4])
return {1, amount}

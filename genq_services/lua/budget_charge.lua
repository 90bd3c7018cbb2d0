#!lua flags=allow-oom
--[[
Budget charge: replaces a job's open reservation with what its attempt really cost, on the
spend of the current day and month. A release is a charge of 0 (a cancel before the job ran, a
failed enqueue, the sweep of a job that finished without its charge).

A lost attempt's charge (ARGV[5] given: a worker killed mid-attempt, its usage estimated from
what it streamed) adds its cost to the spend and leaves the reservation open: the job's next
attempt adopts it and charges its own cost in its place.

Safe to run twice: the reservation's removal decides, so a second charge for the same
reservation (a retried reply, the sweep racing the worker) writes nothing. A lost attempt's
charge is remembered while the reservation is open (field `l:<job id>`: the last lost attempt
charged, dropped with the reservation), so a retried one writes nothing; with no reservation
open (the next attempt charged already, the sweep released it) its cost is added as it comes:
its caller sends it once and then marks the attempt metered. Runs when Redis is full
(allow-oom): it frees budget, it must not fail half-way.

KEYS[1] the tenant's budget account (hash)
ARGV[1] job id
ARGV[2] cost (nano-USD, integer >= 0)
ARGV[3] today, YYYY-MM-DD (UTC)
ARGV[4] this month, YYYY-MM (UTC)
ARGV[5] the lost attempt's number ('' or absent: the charge of a finished attempt)
Returns {1, amount reserved} charged; {0, 0} no open reservation (nothing written). A lost
attempt's charge: {1, 0} charged, {0, 0} charged already.
]]
local account = KEYS[1]
local field = 'r:' .. ARGV[1]
local lost_mark = 'l:' .. ARGV[1]
local cost = tonumber(ARGV[2])
local lost = tonumber(ARGV[5] or '')

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

local held = redis.call('HGET', account, field)
local amount = 0
if lost then
  if held then
    if tonumber(redis.call('HGET', account, lost_mark) or '0') >= lost then
      return {0, 0}
    end
    redis.call('HSET', account, lost_mark, lost)
  end
else
  if not held then
    return {0, 0}
  end
  amount = tonumber(string.match(held, '^(%d+)'))
  redis.call('HDEL', account, field, lost_mark)
  redis.call('HINCRBY', account, 'reserved', string.format('%.0f', -amount))
end
add('day', 'day_spent', ARGV[3])
add('month', 'month_spent', ARGV[4])
return {1, amount}

#!lua
--[[
Budget reserve: sets aside a job's maximum cost in its tenant's budget account, or refuses when
the day's or the month's spend plus every open reservation plus this amount would exceed the
limit. The whole account (limits, spend, reservations) is one hash, so this is one key and the
check and the write are one step: concurrent requests can never reserve past the limit together.

Safe to run twice, and the way a worker "holds" before an attempt: a job that already has an
open reservation keeps it (nothing written, whatever the amount), so a retried reply, or a
worker adopting what the gateway reserved at enqueue, never reserves twice.

Limits: the account's own (`limit:daily`, `limit:monthly`, set by the admin API; -1 = none)
win over the ones given here (the settings'). Spend rolls over by period name: a stored day
older than ARGV[5] counts as 0 spent; a newer one (a caller whose clock is behind) is kept.

KEYS[1] the tenant's budget account (hash)
ARGV[1] job id
ARGV[2] amount (nano-USD, integer >= 0)
ARGV[3] daily limit from the settings (nano-USD; -1 = none)
ARGV[4] monthly limit from the settings (nano-USD; -1 = none)
ARGV[5] today, YYYY-MM-DD (UTC)
ARGV[6] this month, YYYY-MM (UTC)
Returns {1, amount} reserved; {2, amount held} the job already holds a reservation (kept);
{0, 'daily'|'monthly', remaining} refused (nothing written; remaining may be negative).
]]
local account = KEYS[1]
local job_id = ARGV[1]
local amount = tonumber(ARGV[2])
local today = ARGV[5]
local month = ARGV[6]

local field = 'r:' .. job_id
local held = redis.call('HGET', account, field)
if held then
  return {2, tonumber(string.match(held, '^(%d+)'))}
end

local f = redis.call('HMGET', account, 'limit:daily', 'limit:monthly', 'day', 'day_spent',
  'month', 'month_spent', 'reserved')
local daily = tonumber(f[1] or ARGV[3])
local monthly = tonumber(f[2] or ARGV[4])
local reserved = tonumber(f[7] or '0')

-- Spent in the period the caller names: 0 once the stored period is an older one.
local function spent(stored, value, current)
  if stored == false or stored < current then
    return 0
  end
  return tonumber(value or '0')
end

local checks = {
  {'daily', daily, spent(f[3], f[4], today)},
  {'monthly', monthly, spent(f[5], f[6], month)},
}
for _, check in ipairs(checks) do
  local limit = check[2]
  if limit >= 0 and check[3] + reserved + amount > limit then
    return {0, check[1], string.format('%.0f', limit - check[3] - reserved)}
  end
end

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', account, field, string.format('%.0f:%.0f', amount, now_ms))
redis.call('HINCRBY', account, 'reserved', string.format('%.0f', amount))
return {1, amount}

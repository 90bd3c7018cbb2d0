#!lua
--[[
Budget reserve: sets aside a job's maximum cost in its tenant's budget account, or refuses when
the day's or the month's spend plus every open reservation plus this amount would exceed the
limit. The whole account (limits, spend, reservations) is one hash, so this is one key and the
check and the write are one step: concurrent requests can never reserve past the limit together.

Safe to run twice, and the way a worker "holds" before an attempt: a job that already has an
open reservation keeps it (nothing written, whatever the amount), so a retried reply, or a
worker adopting what the gateway reserved at enqueue, never reserves twice.

Limits and spend as _budget_lib.lua reads them: the account's own limits win over ARGV's (the
settings'); spend rolls over by period name.

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

local b = budget_read(account, ARGV[3], ARGV[4], today, month)
local refused = budget_refusal(b, amount)
if refused then
  return {0, refused[1], refused[2]}
end

local t = redis.call('TIME')
budget_hold(account, job_id, amount, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return {1, amount}

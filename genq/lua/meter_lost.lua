#!lua flags=allow-oom
--[[
Meter lost: adds the usage estimated for an attempt whose worker was lost (reclaim.lua filed
what it streamed in the lost-attempts hash) where every attempt's usage goes (meter() in
_lib.lua): the record's usage totals, the day's and the all-time counters (with `attempts` and
`estimated_attempts`, through the day's journal), and the attempt's history entry (label,
usage). Removing the filed entry is what decides, so an attempt is metered once, however many
callers race or retry. A job whose record is gone (expired, deleted), or whose history does not
hold the attempt unmetered, only loses its filed entry. Runs when memory is full: it frees more
than it writes.

KEYS[1] job record   KEYS[2] lost-attempts hash   KEYS[3..6] the usage keys (meter() in
_lib.lua)
ARGV[1] job id   ARGV[2] attempt   ARGV[3] metered usage (JSON: see meter() in _lib.lua)
ARGV[4] how long the day's usage counters are kept (ms, 0: forever)   ARGV[5] the day (UTC)
Returns {1} metered, {0} nothing to meter (metered already, never filed, or not this record's
attempt: the entry is dropped), {3} the record is gone (the entry is dropped).
Events: none (a job that already finished keeps the usage its terminal event carried).
]]
local job, lost = KEYS[1], KEYS[2]
local id, attempt = ARGV[1], tonumber(ARGV[2])

if redis.call('HDEL', lost, id .. '\0' .. ARGV[2]) == 0 then
  return {0}
end
local f = redis.call('HMGET', job, 'tenant', 'history', 'usage')
if redis.call('EXISTS', job) == 0 then
  return {3}
end
-- The attempt's history entry, still unmetered. None: the id now names another job (a custom
-- id enqueued again once its job finished), whose record is not this attempt's to charge.
local history, entry = cjson.decode(f[2] or '[]'), nil
for i = #history, 1, -1 do
  local e = history[i]
  if e.attempt == attempt and e.outcome == 'lease_expired' and e.usage == nil then
    entry = e
    break
  end
end
if not entry then
  return {0}
end
local metered, usage = meter(ARGV[3], f[1], 3, 4, f[3])
entry.label, entry.usage = metered.label, metered.usage
redis.call('HSET', job, 'history', cjson.encode(history), 'usage', usage)
return {1}

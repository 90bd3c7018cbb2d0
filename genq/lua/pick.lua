#!lua
--[[
Pick (first half of a reserve): promotes due scheduled jobs, drops dead-set entries older than
the dead-letter retention (their records have expired), then moves up to N ready jobs into
the lease set under a short claim. The worker activates each claimed job with activate.lua; a
claim that is never activated expires and reclaim.lua puts the job back, with no attempt spent.

KEYS[1] ready set   KEYS[2] scheduled set   KEYS[3] lease set   KEYS[4] rank hash
KEYS[5] cooldown key   KEYS[6] dead set
ARGV[1] how many jobs to claim   ARGV[2] claim length (ms)   ARGV[3] dead-letter retention (ms)
Returns {claimed ids, expired lease ids, ms until the next scheduled job or lease expiry (-1 none)}.
While the cooldown key lives nothing is claimed and the wait is its remaining time.
Events: none.
]]
local ready, scheduled, leases, rank_hash, cooldown, dead =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now = now_ms()

redis.call('ZREMRANGEBYSCORE', dead, '-inf', '(' .. int(now - tonumber(ARGV[3])))

local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', int(now), 'LIMIT', 0, 20)

local due = redis.call('ZRANGEBYSCORE', scheduled, '-inf', int(now), 'LIMIT', 0, 500)
for _, id in ipairs(due) do
  local rank = redis.call('HGET', rank_hash, id)
  redis.call('ZREM', scheduled, id)
  redis.call('HDEL', rank_hash, id)
  if rank then
    redis.call('ZADD', ready, rank, id)
  end
end

local pause = redis.call('PTTL', cooldown)
if pause > 0 then
  return {{}, expired, pause}
end

local claimed = {}
local n = tonumber(ARGV[1])
if n > 0 then
  local popped = redis.call('ZPOPMIN', ready, n)
  local until_ms = int(now + tonumber(ARGV[2]))
  for i = 1, #popped, 2 do
    claimed[#claimed + 1] = popped[i]
    redis.call('ZADD', leases, until_ms, popped[i])
  end
end

local wait = -1
local s = redis.call('ZRANGE', scheduled, 0, 0, 'WITHSCORES')
if s[2] then wait = math.max(0, tonumber(s[2]) - now) end
local l = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
if l[2] then
  local d = math.max(0, tonumber(l[2]) - now)
  if wait < 0 or d < wait then wait = d end
end
return {claimed, expired, wait}

#!lua flags=allow-oom
--[[
Presence: a worker's sign of life, and the takeover of the leases of workers that stopped giving
one. Renews this worker's presence until now + ttl (ttl 0 withdraws it: a clean stop). Then, for
up to 10 holders whose presence has lapsed, it expires every lease they hold (a claim or a
running job) at once, so that reclaim.lua takes each job back exactly as after a lease expiry.
Should the lapsed worker wake (a SIGSTOP, a long pause), it finds its leases expired: emit,
heartbeat and activate refuse them, and a reclaimed job's token is gone. A lapsed holder leaves
the presence set once all its leases have been expired. A lapsed holder's offer and the jobs
handed off under it leave their lists (see _lib.lua: those jobs' leases are among the ones
expired), and a withdrawn presence takes its offer with it. Runs when memory is full (it only
rewrites existing values, or removes them). Safe to run twice.

KEYS[1] presence zset   KEYS[2] lease set   KEYS[3] holders hash   KEYS[4] holds zset
KEYS[5] offers list   KEYS[6] hand-offs list
ARGV[1] holder id   ARGV[2] presence ttl (ms; 0 withdraws the presence)
Returns the ids of the leases that lapsed with their holder (to reclaim now).
Events: none.
]]
local presence, leases, holders, holds = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local holder, ttl = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local PER_HOLDER = 500

if ttl > 0 then
  redis.call('ZADD', presence, now + ttl, holder)
else
  redis.call('ZREM', presence, holder)
  take_listed(KEYS[5], holder .. '\0')
end

local taken = {}
local lapsed = redis.call('ZRANGEBYSCORE', presence, '-inf', '(' .. int(now), 'LIMIT', 0, 10)
for _, gone in ipairs(lapsed) do
  take_listed(KEYS[5], gone .. '\0')
  take_listed(KEYS[6], gone .. '\0')
  local entries = redis.call('ZRANGEBYLEX', holds, '[' .. gone .. '\0', '(' .. gone .. '\1',
    'LIMIT', 0, PER_HOLDER)
  for _, entry in ipairs(entries) do
    local id = string.sub(entry, #gone + 2)
    local score = redis.call('ZSCORE', leases, id)
    if score and redis.call('HGET', holders, id) == gone then
      if tonumber(score) > now then
        redis.call('ZADD', leases, 'XX', now, id)
      end
      taken[#taken + 1] = id
    else
      -- The lease ended without end_lease (its record was deleted) or is someone else's now.
      redis.call('ZREM', holds, entry)
      if not score then
        redis.call('HDEL', holders, id)
      end
    end
  end
  if #entries < PER_HOLDER then
    redis.call('ZREM', presence, gone)
  end
end
return taken

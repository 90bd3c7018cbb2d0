#!lua
--[[
History peak: keeps, per time step (server clock), the largest queue depth and the longest
wait seen, for the operations chart. Any number of gateway processes may sample: keeping the
maximum makes every sample idempotent. Steps older than the window are dropped.

KEYS[1] depth hash (step start, epoch s -> peak depth)
KEYS[2] wait hash  (step start, epoch s -> longest wait, s)
ARGV[1] step (s)   ARGV[2] steps kept   ARGV[3] depth now   ARGV[4] oldest wait now (s)
Returns the current step's start (epoch s).
]]
local depth_hash, wait_hash = KEYS[1], KEYS[2]
local step, kept = tonumber(ARGV[1]), tonumber(ARGV[2])
local depth, wait = tonumber(ARGV[3]), tonumber(ARGV[4])

local now = tonumber(redis.call('TIME')[1])
local start = now - (now % step)
local field = string.format('%d', start)

local function keep_max(hash, value)
  local old = tonumber(redis.call('HGET', hash, field))
  if old == nil or value > old then
    redis.call('HSET', hash, field, tostring(value))
  end
end
keep_max(depth_hash, depth)
keep_max(wait_hash, wait)

local horizon = start - step * kept
for _, hash in ipairs({depth_hash, wait_hash}) do
  for _, f in ipairs(redis.call('HKEYS', hash)) do
    if tonumber(f) <= horizon then
      redis.call('HDEL', hash, f)
    end
  end
  redis.call('EXPIRE', hash, step * (kept + 2))
end
return start

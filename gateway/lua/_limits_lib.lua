--[[
Shared by the gateway's limit scripts (gateway/admission/lua_source.py puts it right after a
script's header): each limit as a check that writes nothing and a commit that writes, so one
script can check every limit first and then take all of them or none.
]]

-- The server's clock in ms.
local function clock_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Token bucket (hash: tokens, ts): the tokens in it at now_ms, refilled continuously at rate
-- per second up to capacity.
local function bucket_tokens(bucket, rate, capacity, now_ms)
  local state = redis.call('HMGET', bucket, 'tokens', 'ts')
  local tokens = tonumber(state[1]) or capacity
  local last = tonumber(state[2]) or now_ms
  return math.min(capacity, tokens + math.max(0, now_ms - last) * rate / 1000)
end

-- ms until a bucket holding `tokens` (< 1) has a whole one.
local function bucket_wait_ms(tokens, rate)
  return math.ceil((1 - tokens) * 1000 / rate)
end

local function bucket_store(bucket, tokens, rate, capacity, now_ms)
  redis.call('HSET', bucket, 'tokens', string.format('%.6f', tokens), 'ts', string.format('%.0f', now_ms))
  redis.call('PEXPIRE', bucket, math.ceil(capacity * 1000 / rate) + 1000)
end

-- A tenant's count of generations accepted on one UTC day (string; the day's own key).
local function daily_count(counter)
  return tonumber(redis.call('GET', counter)) or 0
end

local function daily_add(counter, expire_at)
  local count = redis.call('INCR', counter)
  redis.call('EXPIREAT', counter, expire_at)
  return count
end

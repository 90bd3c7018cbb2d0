#!lua
--[[
Token bucket: takes one token from a tenant's enqueue bucket, or says how long until one is
free. Refill is continuous at ARGV[1] tokens per second up to ARGV[2]; time is the server's.
Running it twice (a retried reply) takes two tokens: harmless for a rate limit.

KEYS[1] the bucket (hash: tokens, ts)
ARGV[1] refill rate (tokens per second)
ARGV[2] capacity (burst)
Returns {1, 0} when a token was taken, {0, ms until the next token} otherwise.
]]
local bucket = KEYS[1]
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local state = redis.call('HMGET', bucket, 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local last = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - last) * rate / 1000)

local allowed, wait_ms = 0, 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait_ms = math.ceil((1 - tokens) * 1000 / rate)
end

redis.call('HSET', bucket, 'tokens', string.format('%.6f', tokens), 'ts', string.format('%.0f', now))
redis.call('PEXPIRE', bucket, math.ceil(capacity * 1000 / rate) + 1000)
return {allowed, wait_ms}

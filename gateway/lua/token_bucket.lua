#!lua
--[[
Token bucket: takes one token from a tenant's enqueue bucket, or says how long until one is
free. Refill is continuous at ARGV[1] tokens per second up to ARGV[2]; time is the server's.
Running it twice (a retried reply) takes two tokens: harmless for a rate limit.
Uses _limits_lib.lua.

KEYS[1] the bucket (hash: tokens, ts)
ARGV[1] refill rate (tokens per second)
ARGV[2] capacity (burst)
Returns {1, 0} when a token was taken, {0, ms until the next token} otherwise.
]]
local bucket = KEYS[1]
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])

local now = clock_ms()
local tokens = bucket_tokens(bucket, rate, capacity, now)
local allowed, wait_ms = 0, 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait_ms = bucket_wait_ms(tokens, rate)
end
bucket_store(bucket, tokens, rate, capacity, now)
return {allowed, wait_ms}

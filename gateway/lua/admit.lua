#!lua
--[[
Admit: one generation's way in, every check and every charge in one step. A keyed request is
first looked up (a replay is answered before anything is charged) and its key's acceptance
claimed; then the tenant's enqueue rate, daily quota, in-flight cap and budget are checked, in
that order, and only when every one lets the generation in are they all taken: a refusal writes
nothing, so it has nothing to give back. Uses _limits_lib.lua and _budget_lib.lua.
Run twice after an 'ok' (a retried reply), it finds its own claim and takes a second rate
token and daily count (harmless for limits, as token_bucket.lua and daily_quota.lua say); a
job id holds one reservation, however often it runs.

KEYS[1] the key's acceptance claim (string: the holder's token; unused without a key)
KEYS[2] the tenant's token bucket (hash)
KEYS[3] the tenant's count for today (string; unused without a quota)
KEYS[4] the tenant's in-flight set (zset: job id -> ms accepted)
KEYS[5] the tenant's budget account (hash)
KEYS[6] the published prices (hash: model -> price JSON)
KEYS[7] the tenant's webhook endpoints (zset)   KEYS[8] the generations whose end is owed an
        event (zset: note -> ms; genq_services.webhook_endpoints.note_pending's, which this does)
KEYS[9..] with a key: the key's binding in each provider queue (string: the bound job's id),
          in the order the caller gave the queues (genq adds them: genq.run_with_bindings)
ARGV[1] the claim token ('' without an Idempotency-Key)   ARGV[2] the claim's lifetime (ms)
ARGV[3] rate (tokens/s)          ARGV[4] burst
ARGV[5] daily quota (0: none)    ARGV[6] when today's count expires (epoch s)
ARGV[7] in-flight cap            ARGV[8] the new job's id
ARGV[9] daily budget of the settings (nano-USD; -1 none)  ARGV[10] monthly, likewise
ARGV[11] today (YYYY-MM-DD, UTC) ARGV[12] this month (YYYY-MM)
ARGV[13] the model               ARGV[14] the price JSON ARGV[15] was computed from ('' none)
ARGV[15] the generation's maximum cost at that price (nano-USD)
ARGV[16] the in-flight set's lifetime (s)
ARGV[17] the webhook note to add when the tenant has an endpoint ('' none)
Returns one of
  {'ok', reserved (1|0), daily charged (1|0)}  everything taken, the claim held; {'ok', 0, 0}
                          when the key is bound to the new job's id (ARGV[8]) already: a
                          resent write, whose first send admitted and enqueued it
  {'replay', n, job id}   the key is bound, in the n-th queue given (nothing taken)
  {'busy'}                another request holds the key's claim (nothing taken)
  {'rate', ms until a token}, {'daily'}, {'in_flight'}, {'no_price'},
  {'price', the price JSON now published} (the amount must be computed again),
  {'budget', 'daily'|'monthly', remaining (nano-USD)}   refusals (nothing taken)
]]
local claim, bucket, day_count, in_flight = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local account, prices = KEYS[5], KEYS[6]
local token, claim_ms = ARGV[1], ARGV[2]
local rate, capacity = tonumber(ARGV[3]), tonumber(ARGV[4])
local quota, day_expires = tonumber(ARGV[5]), ARGV[6]
local cap, job_id = tonumber(ARGV[7]), ARGV[8]
local model, price_seen, amount = ARGV[13], ARGV[14], tonumber(ARGV[15])

if token ~= '' then
  for i = 9, #KEYS do
    local bound = redis.call('GET', KEYS[i])
    if bound == job_id then
      -- Bound to this request's own job: the write was sent again (after a NOSCRIPT or a lost
      -- connection) and its enqueue, behind the first send, bound the key: admitted already.
      return {'ok', 0, 0}
    end
    if bound then
      return {'replay', i - 8, bound}
    end
  end
  local holder = redis.call('GET', claim)
  if holder and holder ~= token then
    return {'busy'}
  end
end

local now = clock_ms()
local tokens = bucket_tokens(bucket, rate, capacity, now)
if tokens < 1 then
  return {'rate', bucket_wait_ms(tokens, rate)}
end
if quota > 0 and daily_count(day_count) >= quota then
  return {'daily'}
end
if redis.call('ZCARD', in_flight) >= cap then
  return {'in_flight'}
end
local b = budget_read(account, ARGV[9], ARGV[10], ARGV[11], ARGV[12])
local budgeted = b.daily >= 0 or b.monthly >= 0
if budgeted then
  local price = redis.call('HGET', prices, model)
  if not price then
    return {'no_price'}
  end
  if price ~= price_seen then
    return {'price', price}
  end
  local refused = budget_refusal(b, amount)
  if refused then
    return {'budget', refused[1], refused[2]}
  end
end

if token ~= '' then
  redis.call('SET', claim, token, 'PX', claim_ms)
end
bucket_store(bucket, tokens - 1, rate, capacity, now)
local charged = 0
if quota > 0 then
  daily_add(day_count, day_expires)
  charged = 1
end
redis.call('ZADD', in_flight, now, job_id)
redis.call('EXPIRE', in_flight, ARGV[16])
local reserved = 0
if budgeted and redis.call('HEXISTS', account, 'r:' .. job_id) == 0 then
  budget_hold(account, job_id, amount, now)
  reserved = 1
end
if ARGV[17] ~= '' and redis.call('ZCARD', KEYS[7]) > 0 then
  redis.call('ZADD', KEYS[8], now, ARGV[17])
end
return {'ok', reserved, charged}

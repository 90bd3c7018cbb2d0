#!lua
--[[
Enqueue: creates a job record and makes it ready (or scheduled when delayed), in one step.
A ready job joins its tenant's line too (fair share: see _lib.lua).

A job with an idempotency key that is still bound answers with the bound job's id. A finished
job with the same id is dropped (record, stream, dead entry) and started clean; a live one is
refused. Safe to run twice: a re-run carrying the same nonce answers with the job it created.

KEYS[1] job record          KEYS[2] job stream         KEYS[3] ready set
KEYS[4] scheduled set       KEYS[5] rank hash          KEYS[6] dead set
KEYS[7] doorbell list       KEYS[8] sequence counter   KEYS[9] idempotency key (placeholder if none)
KEYS[10..18] the books (fair share and job index: see _lib.lua)
ARGV[1] job id              ARGV[2] nonce              ARGV[3] encoded payload
ARGV[4] priority            ARGV[5] delay (ms)         ARGV[6] max attempts
ARGV[7] idempotency key ('' for none)                  ARGV[8] idempotency ttl (ms)
ARGV[9] tenant ('' for the default one)
Returns {code, id}: 0 created, 1 deduplicated (id is the bound job's), 2 id is live.
Events: none.
]]
local job, events, ready, scheduled, rank_hash, dead, signal, seq, idem =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local B = books_at(10)
local id, nonce, tenant = ARGV[1], ARGV[2], ARGV[9]

if ARGV[7] ~= '' then
  local bound = redis.call('GET', idem)
  if bound then
    if bound == id and redis.call('HGET', job, 'nonce') == nonce then
      return {0, id}
    end
    return {1, bound}
  end
end

local status = redis.call('HGET', job, 'status')
if status then
  if redis.call('HGET', job, 'nonce') == nonce then
    return {0, id}
  end
  if status ~= 'completed' and status ~= 'failed' and status ~= 'cancelled' then
    return {2, id}
  end
  reindex(B, job, nil)
  redis.call('DEL', job, events)
  redis.call('ZREM', dead, id)
end

local now = now_ms()
local priority = tonumber(ARGV[4])
local delay = tonumber(ARGV[5])
local rank = (1000 - priority) * 1000000000000 + redis.call('INCR', seq)

local status_now = 'waiting'
if delay > 0 then
  status_now = 'scheduled'
end
redis.call('HSET', job,
  'id', id, 'nonce', nonce, 'status', status_now, 'payload', ARGV[3], 'priority', ARGV[4],
  'attempt', 0, 'max_attempts', ARGV[6], 'progress', '', 'rank', int(rank),
  'created_at', int(now), 'updated_at', int(now), 'run_at', int(now + delay),
  'idempotency_key', ARGV[7], 'idem_ttl', ARGV[8], 'cancel_requested', 0, 'out', 0, 'eseq', 0,
  'tenant', tenant)
index_add(B, tenant, status_now, now, id)

if delay > 0 then
  redis.call('ZADD', scheduled, int(now + delay), id)
  redis.call('HSET', rank_hash, id, scheduled_entry(int(rank), tenant))
else
  make_ready(B, ready, id, int(rank), tenant)
  ring_doorbell(signal)
end

if ARGV[7] ~= '' then
  redis.call('SET', idem, id)
end
return {0, id}

#!lua flags=allow-oom
--[[
Settle: records the outcome of a running attempt. Only the holder of the current lease token
may settle, and only before that lease expires, so a zombie worker cannot clobber the attempt
that replaced it (or will). A requested cancel
wins over every outcome: the job settles cancelled and is not retried.

Outcomes: complete (result) | retry (error, delay) | fail (error, reason) | cancel |
release (hand the job back untouched by shutdown: ready again, waiting from now, attempt not
counted). Every outcome but release adds the attempt to the record's history (a release too,
when it reports usage). The attempt's metered usage (ActiveJob.meter), if any, is added to the
record and to the queue's usage counters here, so a re-run or a lost reply never counts it
twice.
A retry past the last attempt dead-letters. Safe to run twice: a re-run by the same token after
the job left `active` answers with the status it settled to. Runs when memory is full.

KEYS[1] job record   KEYS[2] job stream   KEYS[3] lease set   KEYS[4] scheduled set
KEYS[5] ready set    KEYS[6] dead set     KEYS[7] rank hash   KEYS[8] idempotency key
KEYS[9] doorbell list
KEYS[10..22] the books (fair share, job index, holders, outbox, waits: see _lib.lua)
KEYS[23..26] with a metered attempt only: the usage keys (the day's counters, the all-time
counters, the day's journal, the days with a journal: meter() in _lib.lua)
ARGV[1] job id   ARGV[2] lease token   ARGV[3] outcome   ARGV[4] result (encoded) or error text
ARGV[5] retry delay (ms)   ARGV[6] dead reason (error | terminal)   ARGV[7] result ttl (ms)
ARGV[8] dead ttl (ms)   ARGV[9] stream max length   ARGV[10] dead-letters channel
ARGV[11] metered usage (JSON, '' for none: see meter() in _lib.lua)
ARGV[12], ARGV[13] with a metered attempt only: how long the day's usage counters are kept
(ms, 0: forever), the day (UTC, YYYY-MM-DD)
Returns {0, status after settling} or {4} when the lease is lost.
Events: completed | failed | cancelled when the job finishes; none for retry and release.
A dead-lettered job's notice is appended to the outbox (a book) and published on the
dead-letters channel.
]]
local job, events, leases, scheduled, ready, dead, rank_hash, idem, signal =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local B = books_at(10)
local id, outcome, data = ARGV[1], ARGV[3], ARGV[4]
local result_ttl, dead_ttl, maxlen = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]

local state = redis.call('HMGET', job, 'status', 'token', 'cancel_requested', 'attempt',
  'max_attempts', 'rank', 'idem_ttl', 'tenant', 'started_at', 'history', 'created_at', 'id',
  'usage')
if state[2] ~= ARGV[2] then
  return {4}
end
if state[1] ~= 'active' then
  return {0, state[1]}
end

local now = now_ms()
local held = redis.call('ZSCORE', leases, id)
if not held or tonumber(held) <= now then
  return {4}  -- expired: the job is reclaim.lua's now (the same rule as emit and heartbeat)
end
local tenant = state[8]
end_lease(B, leases, id, tenant)
local metered, usage = meter(ARGV[11], tenant, 23, 12, state[13])

-- The attempt's history entry, written with the status the outcome leads to (one HSET).
-- A release adds one only when it reports usage.
local history = nil
if outcome == 'release' then
  if metered then
    history = 'released'
  end
elseif state[3] == '1' then
  history = 'cancelled'
else
  local outcomes = {complete = 'completed', retry = 'retry', fail = 'failed', cancel = 'cancelled'}
  history = outcomes[outcome]
end
-- written with the history: a metered attempt's usage (the record's totals)
local written = {}
if history then
  local err = nil
  if history == 'retry' or history == 'failed' then
    err = data
  end
  history = attempt_history(state[4], state[9], state[10], now, history, err, metered)
  written = {'history', history}
  if usage then
    written[3], written[4] = 'usage', usage
  end
end

if state[3] == '1' or outcome == 'cancel' then
  if history then
    redis.call('HSET', job, unpack(written))
  end
  cancel_settle(B, job, events, idem, id, now, result_ttl, maxlen)
  return {0, 'cancelled'}
end

if outcome == 'complete' then
  local idem_ttl = tonumber(state[7]) or result_ttl  -- a job with no key has no idem_ttl
  local keep = math.max(result_ttl, idem_ttl)
  if result_ttl == 0 or idem_ttl == 0 then
    keep = 0  -- kept forever (a key kept forever keeps its job too)
  end
  local read = {status = 'active', tenant = tenant, created = state[11], id = state[12],
    usage = usage or state[13]}
  written[#written + 1], written[#written + 2] = 'result', data
  written[#written + 1], written[#written + 2] = 'progress', 1
  finish_read(B, job, events, read, 'completed', now, data, keep, maxlen, written)
  if state[7] and idem_ttl > 0 and redis.call('GET', idem) == id then
    redis.call('PEXPIRE', idem, idem_ttl)
  end
  return {0, 'completed'}
end

if outcome == 'release' then
  index_move(B, tenant or '', 'active', 'waiting', state[11], state[12])
  local fields = {'attempt', tonumber(state[4]) - 1, 'status', 'waiting', 'updated_at', now,
    unpack(written)}
  redis.call('HSET', job, unpack(fields))
  make_ready(B, ready, id, state[6], tenant or '', now)
  ring_doorbell(signal)
  return {0, 'waiting'}
end

if outcome == 'retry' and tonumber(state[4]) < tonumber(state[5]) then
  local run_at = now + tonumber(ARGV[5])
  index_move(B, tenant or '', 'active', 'scheduled', state[11], state[12])
  redis.call('HSET', job, 'status', 'scheduled', 'error', data, 'run_at', run_at,
    'updated_at', now, unpack(written))
  redis.call('ZADD', scheduled, run_at, id)
  redis.call('HSET', rank_hash, id, scheduled_entry(state[6], tenant or ''))
  return {0, 'scheduled'}
end

local reason = ARGV[6]
if outcome == 'retry' then
  reason = 'error'
end
if history then
  redis.call('HSET', job, unpack(written))
end
dead_letter(B, job, events, dead, idem, id, now, reason, data, dead_ttl, maxlen, ARGV[10])
return {0, 'failed'}

#!lua
--[[
Enqueue: creates job records and makes each job ready (or scheduled when delayed), in one step.
A ready job joins its tenant's line too (fair share: see _lib.lua). It takes two shapes of call:

- One new job, ready at once: what Queue.enqueue sends when the id is generated and there is no
  delay, the common case. It runs straight through, with only the keys it touches.
- Items: one for Queue.enqueue with a job_id or a delay, a chunk of a batch for
  Queue.enqueue_many. Items are taken in order, each exactly as if it were enqueued alone (an
  earlier item's job and idempotency key are there for the later ones), except that the writes
  to the queue's shared keys are gathered into one command per key.

An item whose idempotency key is still bound answers with the bound job's id. A finished job
with the item's id is dropped (record, stream, dead entry) and started clean; a live one is
refused. Safe to run twice: a re-run carrying the same nonces answers with the jobs it created
(a generated id is its own nonce, so a record with that id can only be the call's own).

A ready job's record is written whole (its rank included) and the job goes into the intake;
the next pick admits it into the ready set, its tenant's line and the job index (see _lib.lua).
A delayed job goes into the scheduled set and the job index at once.

The record leaves out the fields that still hold their defaults, which genq/_job.py reads back:
attempt 0, progress '', cancel_requested 0, out 0, eseq 0, priority 0, tenant '', updated_at
and run_at equal to created_at (the scripts that change a job write the ones they change), the
nonce when it is the job's id (a generated id), and idempotency_key '' and idem_ttl when the job
has no key (the scripts read a missing key as '', and settle.lua a missing ttl as the result's).

One new job (the values that hold their defaults are left off the end):
KEYS[1] intake list         KEYS[2] doorbell list      KEYS[3] sequence counter
KEYS[4] job record          KEYS[5] idempotency key (only with one)
ARGV[1] job id (and nonce), ARGV[2] encoded payload, ARGV[3] max attempts, then as far as
needed: ARGV[4] priority ('0'), ARGV[5] tenant ('' for the default one), ARGV[6] idempotency
key, ARGV[7] idempotency ttl (ms)

Items:
KEYS[1] intake list         KEYS[2] scheduled set      KEYS[3] rank hash
KEYS[4] dead set            KEYS[5] doorbell list      KEYS[6] sequence counter
KEYS[7] job index           KEYS[8] tenant index       KEYS[9] index expiry
then for item i (from 0): KEYS[10 + 3i] job record, KEYS[11 + 3i] job stream,
KEYS[12 + 3i] idempotency key (any placeholder if none)
ARGV, nine per item: ARGV[9i + 1] job id, ARGV[9i + 2] nonce, ARGV[9i + 3] encoded payload,
ARGV[9i + 4] priority, ARGV[9i + 5] delay (ms, '0' for none), ARGV[9i + 6] max attempts,
ARGV[9i + 7] idempotency key ('' for none), ARGV[9i + 8] idempotency ttl (ms),
ARGV[9i + 9] tenant ('' for the default one)
KEYS[13] optional, with one item: a sorted set that a layer's admission script, sent before
this call in the same write (genq.enqueue_admitted), adds the job's id to when it admits it;
the item is enqueued only if its id is there.

Returns {code, id} per item, one flat list: 0 created, 1 deduplicated (id is the bound job's),
2 id is live, 7 not admitted (KEYS[13] does not hold the id; nothing was written).
Events: none.
]]

-- A job's rank: its priority's band, then its place in the sequence (FIFO within a priority).
-- The priority is compared as text first: reading a number from text costs more than the
-- comparison, and the default priority needs no number.
local function rank_of(priority, n)
  local band = 1000e12
  if priority ~= '0' then
    band = (1000 - tonumber(priority)) * 1e12
  end
  return pad_rank(band + n)
end

-- The record's fields, the defaults left out (see above).
local function record(id, nonce, status, payload, attempts, rank, created, key, idem_ttl,
  priority, tenant)
  local fields = {
    'id', id, 'status', status, 'payload', payload, 'max_attempts', attempts, 'rank', rank,
    'created_at', created,
  }
  if key ~= '' then
    local n = #fields
    fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] =
      'idempotency_key', key, 'idem_ttl', idem_ttl
  end
  if nonce ~= id then
    fields[#fields + 1], fields[#fields + 2] = 'nonce', nonce
  end
  if priority ~= '0' then
    fields[#fields + 1], fields[#fields + 2] = 'priority', priority
  end
  if tenant ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'tenant', tenant
  end
  return fields
end

-- One new job, straight through, sent with only the keys and arguments it needs: fewer values
-- to read, and it returns before the items' path makes its inner functions and the helpers
-- only that path uses: the server does markedly less work than for the same enqueue through
-- the items' path (bench/script_cost.py counts it; docs/KNOWN_LIMITS.md).
if #KEYS <= 5 then  -- the items' shape sends 12 or more
  local job = KEYS[4]
  local id, key = ARGV[1], ARGV[6] or ''
  if key ~= '' then
    local bound = redis.call('GET', KEYS[5])
    if bound then
      if bound == id then
        return {0, id}
      end
      return {1, bound}
    end
  end
  if redis.call('HGET', job, 'status') then
    return {0, id}
  end
  local created, priority, tenant = now_digits(), ARGV[4] or '0', ARGV[5] or ''
  local rank = rank_of(priority, redis.call('INCR', KEYS[3]))
  redis.call('RPUSH', KEYS[1], intake_entry(pad_ms(created), tenant, rank, id))
  redis.call('HSET', job, unpack(record(id, id, 'waiting', ARGV[2], ARGV[3], rank, created, key,
    ARGV[7], priority, tenant)))
  if key ~= '' then
    redis.call('SET', KEYS[5], id)
  end
  ring_doorbell(KEYS[2], 1, id)
  return {0, id}
end

local intake, scheduled, rank_hash, dead, signal, seq, index, tindex, expiry =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local STATIC, NARGS = 9, 9
local single = #ARGV == NARGS
if single and KEYS[STATIC + 4] and not redis.call('ZSCORE', KEYS[STATIC + 4], ARGV[1]) then
  return {7, ''}
end

-- A write to a shared key: sent at once for a single item; for many, gathered per key and
-- sent once at the end (RPUSH takes many entries, ZADD and HSET many pairs).
local gathered
local later = redis.call
if not single then
  gathered = {}
  later = function(command, key, ...)
    local args = gathered[key]
    if not args then
      args = {command, key}
      gathered[key] = args
    end
    for _, value in ipairs({...}) do
      args[#args + 1] = value
    end
  end
end

local created, padded, first, made, rung = nil, nil, 0, 0, 0

local function enqueue(i)
  local a, k = NARGS * i, STATIC + 3 * i
  local job, events, idem = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local id, nonce, key = ARGV[a + 1], ARGV[a + 2], ARGV[a + 7]
  if key ~= '' then
    local bound = redis.call('GET', idem)
    if bound then
      if bound == id and (redis.call('HGET', job, 'nonce') or id) == nonce then
        return 0, id
      end
      return 1, bound
    end
  end

  local status = redis.call('HGET', job, 'status')
  if status then
    if (redis.call('HGET', job, 'nonce') or id) == nonce then
      return 0, id
    end
    if not finished(status) then
      return 2, id
    end
    reindex({index = index, tindex = tindex, expiry = expiry}, job, nil) -- the books it keeps
    redis.call('DEL', job, events)
    redis.call('ZREM', dead, id)
  end

  if not created then
    created = now_digits()
    padded = pad_ms(created)
    first = redis.call('INCR', seq)
  end
  made = made + 1
  local priority, delay, tenant = ARGV[a + 4], ARGV[a + 5], ARGV[a + 9]
  -- The ready set's score, padded once for the record, the rank hash and the intake entry.
  local rank = rank_of(priority, first + made - 1)
  status = 'waiting'
  if delay ~= '0' then
    status = 'scheduled'
  end
  local fields = record(id, nonce, status, ARGV[a + 3], ARGV[a + 6], rank, created, key,
    ARGV[a + 8], priority, tenant)
  if delay ~= '0' then
    local run_at = tonumber(created) + tonumber(delay)
    fields[#fields + 1], fields[#fields + 2] = 'run_at', run_at
    later('ZADD', scheduled, run_at, id)
    later('HSET', rank_hash, id, scheduled_entry(rank, tenant))
    local entry = index_entry(status, padded, id)
    later('ZADD', index, 0, entry)
    later('ZADD', tindex, 0, tenant .. '\0' .. entry)
  else
    later('RPUSH', intake, intake_entry(padded, tenant, rank, id))
    rung = rung + 1
  end
  redis.call('HSET', job, unpack(fields))
  if key ~= '' then
    redis.call('SET', idem, id)
  end
  return 0, id
end

if single then
  local replies = {enqueue(0)}
  if rung > 0 then
    ring_doorbell(signal, 1, replies[2])  -- named: the woken worker's pick activates it
  end
  return replies
end

local replies = {}
for i = 0, #ARGV / NARGS - 1 do
  local code, answer = enqueue(i)
  replies[#replies + 1] = code
  replies[#replies + 1] = answer
end
if made > 1 then
  redis.call('INCRBY', seq, made - 1)
end
for _, args in pairs(gathered) do
  redis.call(unpack(args))
end
if rung > 0 then
  ring_doorbell(signal, rung)
end
return replies

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

A job ready at once that no other job is ahead of, enqueued alone while a worker waits idle, is
handed off: started here under that worker's offer (see hand_off below), not put in the intake.
A call for one item sends the 19 hand-off keys (Keys.hand_off) or only the first of them, the
offers list (then its job is never handed off); the shape for one new job sends the offers list
alone. The producer sends a job ready at once in the items' shape with the hand-off keys while
its last such call saw an offer listed, which the reply tells.

One new job (the values that hold their defaults are left off the end):
KEYS[1] intake list         KEYS[2] doorbell list      KEYS[3] sequence counter
KEYS[4] job record          KEYS[5] offers list        KEYS[6] idempotency key (only with one)
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
With one item, optionally, KEYS[13]: a sorted set that a layer's admission script, sent before
this call in the same write (genq.enqueue_admitted), adds the job's id to when it admits it (the
item is enqueued only if its id is there); and after it, the offers list or the hand-off keys
(always with the set).

Returns {code, id} per item, one flat list: 0 created, 1 deduplicated (id is the bound job's),
2 id is live, 7 not admitted (KEYS[13] does not hold the id; nothing was written); with the
offers list, a third value: 1 when an offer is listed (or the job was handed off), else 0 (the
list is read only when the call's ring, if it rang, is the doorbell's only one: rings that pile
up mean no worker waits).
Events: none.
]]

local NARGS = 9  -- an item's arguments; a new job alone sends fewer

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
if #ARGV < NARGS then
  local job, idem = KEYS[4], KEYS[6]
  local id, key = ARGV[1], ARGV[6] or ''
  if key ~= '' then
    local bound = redis.call('GET', idem)
    if bound then
      if bound == id then
        return {0, id, math.min(redis.call('LLEN', KEYS[5]), 1)}
      end
      return {1, bound, math.min(redis.call('LLEN', KEYS[5]), 1)}
    end
  end
  if redis.call('HGET', job, 'status') then
    return {0, id, math.min(redis.call('LLEN', KEYS[5]), 1)}
  end
  local created, priority, tenant = now_digits(), ARGV[4] or '0', ARGV[5] or ''
  local rank = rank_of(priority, redis.call('INCR', KEYS[3]))
  redis.call('RPUSH', KEYS[1], intake_entry(pad_ms(created), tenant, rank, id))
  redis.call('HSET', job, unpack(record(id, id, 'waiting', ARGV[2], ARGV[3], rank, created, key,
    ARGV[7], priority, tenant)))
  -- Whether an idle worker's offer is listed, read only when the ring does not pile up on
  -- rings no worker took (then no worker waits, and none offers).
  local seen = 0
  if ring_doorbell(KEYS[2], 1, id) == 1 then
    seen = math.min(redis.call('LLEN', KEYS[5]), 1)
  end
  if key ~= '' then
    redis.call('SET', idem, id)
  end
  return {0, id, seen}
end

--[[ The hand-off (see _lib.lua). The job (its record's fields, as record() lays them out,
status second) is started under the oldest offer when nothing is ahead of it: nothing in the
intake or the ready set, no scheduled job due, the queue not cooling down, and its tenant
holding fewer leases than the offer's cap. That is what the offering worker's pick and
activation would do with it: the lease (the offer's token and length) filed under the offer's
holder, the tenant's lease count, the job index (active), fair share's bookkeeping reset (nobody
waits, as pick.lua leaves it), and the record as activated (attempt 1, started now). The record
then goes to the hand-off list, where the idle workers wait before the doorbell: no ring. When
something is ahead, the offer goes back to the head of its list and nothing is written.
at: the index of the first hand-off key (Keys.hand_off: the offers, the hand-offs, the ready
set, the cooldown, the scheduled set, the lease set, then the books). Returns whether the job
was handed off (its record then written). ]]
local HAND_OFF_KEYS = 19
local function hand_off(at, job, id, tenant, created, padded, fields)
  local offers = KEYS[at]
  local offer = redis.call('LPOP', offers)
  if not offer then
    return false
  end
  local a = string.find(offer, '\0', 1, true)
  local b = string.find(offer, '\0', a + 1, true)
  local c = string.find(offer, '\0', b + 1, true)
  local cap = string.sub(offer, c + 1)
  local B = books_at(at + 6)
  local now = tonumber(created)
  local due = redis.call('ZRANGE', KEYS[at + 4], 0, 0, 'WITHSCORES')
  if redis.call('LLEN', KEYS[1]) > 0 or redis.call('ZCARD', KEYS[at + 2]) > 0
      or redis.call('EXISTS', KEYS[at + 3]) == 1 or (due[2] and tonumber(due[2]) <= now)
      or (cap ~= '0'
        and tonumber(redis.call('HGET', B.running, tenant) or '0') >= tonumber(cap)) then
    redis.call('LPUSH', offers, offer)
    return false
  end
  local holder, token = string.sub(offer, 1, a - 1), string.sub(offer, a + 1, b - 1)
  local lease_until = int(now + tonumber(string.sub(offer, b + 1, c - 1)))
  redis.call('ZADD', KEYS[at + 5], lease_until, id)
  redis.call('HINCRBY', B.running, tenant, 1)
  redis.call('HSET', B.holders, id, holder)
  redis.call('ZADD', B.holds, 0, holder .. '\0' .. id)
  index_add(B, tenant, 'active', padded, id)
  redis.call('DEL', B.passes, B.vtime, B.waits)
  -- the fields activate_claim writes (emit reads eseq as a number)
  local n = #fields
  fields[4] = 'active'
  fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = 'attempt', '1', 'token', token
  fields[n + 5], fields[n + 6], fields[n + 7], fields[n + 8] =
    'started_at', created, 'updated_at', created
  fields[n + 9], fields[n + 10], fields[n + 11], fields[n + 12] =
    'lease_until', lease_until, 'out', '0'
  fields[n + 13], fields[n + 14] = 'eseq', '0'
  redis.call('HSET', job, unpack(fields))
  redis.call('RPUSH', KEYS[at + 1],
    holder .. '\0' .. token .. '\0' .. id .. '\0' .. cjson.encode(fields))
  return true
end

local intake, scheduled, rank_hash, dead, signal, seq, index, tindex, expiry =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local STATIC = 9
local single = #ARGV == NARGS
-- With one item, what follows its keys: nothing, the offers list or the hand-off keys, each
-- after the admission's set or not.
local extra = #KEYS - STATIC - 3
local offers = single and extra > 0 and KEYS[#KEYS - (extra > 2 and HAND_OFF_KEYS - 1 or 0)]
local handing = single and extra >= HAND_OFF_KEYS
if single and (extra == 2 or extra == HAND_OFF_KEYS + 1)
    and not redis.call('ZSCORE', KEYS[STATIC + 4], ARGV[1]) then
  return {7, '', 0}
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

local created, padded, first, made, rung, handed = nil, nil, 0, 0, 0, false

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
  elseif handing and hand_off(#KEYS - HAND_OFF_KEYS + 1, job, id, tenant, created, padded,
      fields) then
    fields, handed = nil, true  -- written
  else
    later('RPUSH', intake, intake_entry(padded, tenant, rank, id))
    rung = rung + 1
  end
  if fields then
    redis.call('HSET', job, unpack(fields))
  end
  if key ~= '' then
    redis.call('SET', idem, id)
  end
  return 0, id
end

if single then
  local replies = {enqueue(0)}
  local rings = 1
  if rung > 0 then
    rings = ring_doorbell(signal, 1, replies[2])  -- named: the woken worker's pick activates it
  end
  if offers then
    -- as for one new job: rings piling up mean no worker waits
    replies[3] = (handed or rings == 1 and redis.call('LLEN', offers) > 0) and 1 or 0
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

-- Shared helpers: genq/_scripts.py splices the ones a script uses into it, each just before the
-- first of the script's top-level statements that needs it.

-- The server's clock in ms. TIME answers two strings of digits; Lua's arithmetic reads them.
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- The same clock as digits, for a script that only writes it: the seconds, then the first three
-- of the microseconds' six. No arithmetic: reading TIME's strings as numbers and writing the
-- sum back as text is a share of every enqueue that the digits avoid. Two helpers, not one
-- derived from the other: now_ms as tonumber(now_digits()) would make every emit, pick and
-- settle read text as a number again (docs/KNOWN_LIMITS.md has the counts).
local function now_digits()
  local t = redis.call('TIME')
  return t[1] .. string.sub('00000' .. t[2], -6, -4)
end

-- Scores and timestamps are integers below 2^53. redis.call sends a Lua number that holds an
-- integer as its exact digits, so they go to Redis as numbers; text built in Lua from one goes
-- through int(): '%.0f' keeps every digit (tostring would not).
local function int(n)
  return string.format('%.0f', n)
end

local function append(events, maxlen, etype, data)
  return redis.call('XADD', events, 'MAXLEN', '~', maxlen, '*', 'type', etype, 'data', data)
end

-- Drops the stream's entries but keeps its last id, so the next entry sorts above all of them.
-- data: the restart marker's data (JSON), 'null' unless the handler restarted on purpose.
local function restart_stream(events, maxlen, data)
  redis.call('XTRIM', events, 'MAXLEN', 0)
  return append(events, maxlen, 'restarted', data or 'null')
end

-- Releases an idempotency key, but only while it still points at this job.
local function release_key(idem, id)
  if redis.call('GET', idem) == id then
    redis.call('DEL', idem)
  end
end

--[[ The books: the keys every state change keeps in step with the job, passed by each script
as its last thirteen KEYS, in the order of genq/_keys.py's Keys.books (books_at builds the table):
  lines     zset, all scores 0: "<tenant>\0<rank, 16 digits>\0<id>" per runnable job, so one
            tenant's jobs are one lexical range, in rank order (its line)
  turns     zset: tenants with runnable jobs under their cap, by pass (lowest served next)
  parked    zset: tenants with runnable jobs at their cap, by pass
  passes    hash: tenant -> pass, for tenants with nothing runnable
  running   hash: tenant -> leases held (claimed or running)
  vtime     string: the pass last served
  index     zset, scores 0: "<status>\0<created ms, 15 digits>\0<id>" per job (the job index)
  tindex    zset, scores 0: "<tenant>\0<status>\0<created ms>\0<id>" per job
  expiry    zset: "<status>\0<tenant>\0<created ms>\0<id>" per finished job that expires, by
            its record's expiry
  holders   hash: job id -> the worker holding its lease (claimed or running), when it said
  holds     zset, all scores 0: "<holder>\0<id>" per such lease, so one worker's leases are one
            lexical range (presence.lua expires them when the worker's presence lapses)
  outbox    stream: a notice per dead-lettered job, read by the workers' alerts through a
            consumer group (dead_letter writes it)
  waits     zset: the ready set's jobs, each scored by when it became runnable (ms), so the
            oldest wait is its first entry whatever the job's priority or tenant (make_ready,
            admit and leave_ready keep it, and pick.lua for the jobs it claims)
Tenants and ids never contain a NUL, and tenants no character below a space, so a prefix
range picks out exactly one tenant or status. ]]

local function books_at(i)
  return {
    lines = KEYS[i], turns = KEYS[i + 1], parked = KEYS[i + 2], passes = KEYS[i + 3],
    running = KEYS[i + 4], vtime = KEYS[i + 5], index = KEYS[i + 6], tindex = KEYS[i + 7],
    expiry = KEYS[i + 8], holders = KEYS[i + 9], holds = KEYS[i + 10], outbox = KEYS[i + 11],
    waits = KEYS[i + 12],
  }
end

-- A time in ms zero-padded to 15 digits, so that times sort as text. It comes as digits (a
-- record's created_at, an entry's slice, now_digits()), so it is padded as text: '%015d' would
-- read it as a number first.
local function pad_ms(digits)
  return string.sub('000000000000000' .. digits, -15)
end

-- A rank (a whole number) zero-padded to 16 digits. '%d' formats Lua's number as a 64-bit
-- integer: every digit kept, and cheaper than '%.0f'. Constant formats: a format built per call
-- is Lua string work that every enqueue would pay for.
local function pad_rank(n)
  return string.format('%016d', n)
end

-- The record's history with the attempt that just ended appended: a JSON list of {attempt,
-- started_at, ended_at (ms), outcome, error, label, usage}, the newest 50 kept. attempt,
-- started_at and history are the record's fields (false when absent); metered is the
-- attempt's usage as meter() decoded it, or nil.
local function attempt_history(attempt, started_at, history, now, outcome, err, metered)
  local list = {}
  if history and history ~= '' then
    list = cjson.decode(history)
  end
  local entry = {
    attempt = tonumber(attempt), started_at = tonumber(started_at), ended_at = now,
    outcome = outcome, error = err,
  }
  if metered then
    entry.label = metered.label
    entry.usage = metered.usage
  end
  list[#list + 1] = entry
  while #list > 50 do
    table.remove(list, 1)
  end
  return cjson.encode(list)
end

-- Appends the attempt that just ended to the record's history (attempt_history), for a script
-- that has not read those fields.
local function record_attempt(job, now, outcome, err, metered)
  local f = redis.call('HMGET', job, 'attempt', 'started_at', 'history')
  redis.call('HSET', job, 'history', attempt_history(f[1], f[2], f[3], now, outcome, err,
    metered))
end

--[[ Metering: the usage an attempt reports (ActiveJob.meter), added once, by the script that
settles the attempt. metered (JSON, '' for none) = {label, counts = {name = n}, estimated,
counted}. The record's usage field sums the counts of every attempt (and says whether any was
estimated); the caller writes it with the attempt's history entry, in the same HSET. When
counted, the attempt also goes to the queue's counters, the day's and the all-time hash, field
"<tenant>\0<label>\0<name>", with "attempts" (and "estimated_attempts") beside them: not one
HINCRBY per count and hash on every settle (they were most of a metered settle's cost), but
through the day's journal, a list of "<tenant>\0<metered>" that fold_usage() adds to both
hashes in one HINCRBY per field and hash for the whole batch. A settle appends to it and folds
it once it holds USAGE_FOLD_AT attempts; whoever reads the counters folds every journal first
(fold_usage.lua), so a reader never misses an attempt. ]]

-- A fold's worst case, every attempt of a tenant and label of its own, runs in one call the
-- HINCRBY the settles used to run one by one: at this size it holds the server about half as
-- long as an admit of ADMIT_MAX entries, or half as long again into a day's new counters
-- (docs/KNOWN_LIMITS.md has the counts).
local USAGE_FOLD_AT = 128
-- A count's sum stays exact below 2^53 (Lua's numbers are doubles); a field about to pass it
-- is added to the counters and summed again from zero.
local EXACT_MAX = 9007199254740991

-- Adds a day's journal to its counters and the all-time ones, then empties it. Returns how
-- many attempts it held.
local function fold_usage(journal, journals, day, day_counters, all_counters, day_ttl)
  local entries = redis.call('LRANGE', journal, 0, -1)
  -- summed per tenant and label first, so a count's field is built once per fold
  local sums, prefixes = {}, {}
  local function add_now(field, n)
    redis.call('HINCRBY', day_counters, field, int(n))
    redis.call('HINCRBY', all_counters, field, int(n))
  end
  for _, entry in ipairs(entries) do
    local nul = string.find(entry, '\0', 1, true)
    local m = cjson.decode(string.sub(entry, nul + 1))
    local prefix = string.sub(entry, 1, nul) .. m.label .. '\0'
    local t = sums[prefix]
    if not t then
      t = {attempts = 0}
      sums[prefix], prefixes[#prefixes + 1] = t, prefix
    end
    for name, n in pairs(m.counts) do
      local sum = (t[name] or 0) + n
      if sum > EXACT_MAX then
        add_now(prefix .. name, t[name])
        sum = n
      end
      t[name] = sum
    end
    t.attempts = t.attempts + 1
    if m.estimated then
      t.estimated_attempts = (t.estimated_attempts or 0) + 1
    end
  end
  for _, prefix in ipairs(prefixes) do
    for name, sum in pairs(sums[prefix]) do
      add_now(prefix .. name, sum)
    end
  end
  if #prefixes > 0 and day_ttl > 0 then
    redis.call('PEXPIRE', day_counters, day_ttl)
  end
  redis.call('DEL', journal)
  redis.call('SREM', journals, day)
  return #entries
end

-- Meters an attempt (see above). k, a: where the script's usage keys and arguments start,
-- KEYS[k..k+3] (the day's counters, the all-time counters, the day's journal, the set of days
-- with a journal) and ARGV[a], ARGV[a + 1] (how long the day's counters are kept, ms, 0:
-- forever; the day, YYYY-MM-DD): a script passes them only with a metered attempt. raw: the
-- record's usage field (false when absent). Returns {label, usage = counts + estimated} for
-- the history entry, and the record's usage field after, to write; nil when nothing was
-- metered.
local function meter(metered, tenant, k, a, raw)
  if metered == '' then
    return nil
  end
  local m = cjson.decode(metered)
  local totals = {}
  if raw and raw ~= '' then
    totals = cjson.decode(raw)
  end
  local usage = {}
  for name, n in pairs(m.counts) do
    totals[name] = (totals[name] or 0) + n
    usage[name] = n
  end
  usage.estimated = m.estimated
  totals.estimated = totals.estimated == true or m.estimated
  if m.counted then
    local journal, journals, day = KEYS[k + 2], KEYS[k + 3], ARGV[a + 1]
    local held = redis.call('RPUSH', journal, (tenant or '') .. '\0' .. metered)
    if held == 1 then
      redis.call('SADD', journals, day)
    elseif held >= USAGE_FOLD_AT then
      fold_usage(journal, journals, day, KEYS[k], KEYS[k + 1], tonumber(ARGV[a]))
    end
  end
  return {label = m.label, usage = usage}, cjson.encode(totals)
end

--[[ Job index. Every job is listed under its status, for the queue (index) and for its tenant
(tindex), ordered by the millisecond it was created, so a listing pages newest first by a
position that does not move while the job keeps its status. An active job stays listed as
waiting: the active ones are few (each holds a lease) and genq/_job_index.py finds them in the
lease set, so an activation and a release move no entry. The script that changes a job's
status moves it (reindex, called before the status is written). A finished job's entries leave
with its record: finish_read() files them in expiry under the record's expiry, and pick.lua
drops the due ones. ]]

-- A function rather than a table of the three: a script makes its helpers on every call, and
-- a table costs several times as much to make as a function.
local function finished(status)
  return status == 'completed' or status == 'failed' or status == 'cancelled'
end

-- The status a job is listed under (see above).
local function listed_as(status)
  if status == 'active' then
    return 'waiting'
  end
  return status
end

local function index_entry(status, created, id)
  return listed_as(status) .. '\0' .. pad_ms(created) .. '\0' .. id
end

local function index_add(B, tenant, status, created, id)
  local entry = index_entry(status, created, id)
  redis.call('ZADD', B.index, 0, entry)
  redis.call('ZADD', B.tindex, 0, tenant .. '\0' .. entry)
end

local function index_drop(B, tenant, status, created, id)
  local entry = index_entry(status, created, id)
  redis.call('ZREM', B.index, entry)
  redis.call('ZREM', B.tindex, tenant .. '\0' .. entry)
end

local function expiry_entry(status, tenant, created, id)
  return status .. '\0' .. tenant .. '\0' .. pad_ms(created) .. '\0' .. id
end

-- Moves a job's index entries from status `from` (false or nil: not listed) to `to` (nil: out
-- of the index), given its record's tenant, creation time and id: for a script that read them
-- with the rest of the record.
local function index_move(B, tenant, from, to, created, id)
  if not id or (from and to and listed_as(from) == listed_as(to)) then
    return
  end
  if from then
    index_drop(B, tenant, from, created, id)
    if finished(from) then
      redis.call('ZREM', B.expiry, expiry_entry(from, tenant, created, id))
    end
  end
  if to then
    index_add(B, tenant, to, created, id)
  end
end

-- Moves the job's index entries from its current status to `to` (nil: out of the index).
-- Returns the record's tenant, creation time and id (nil when there is no record).
local function reindex(B, job, to)
  local f = redis.call('HMGET', job, 'status', 'tenant', 'created_at', 'id')
  local tenant, created, id = f[2] or '', f[3], f[4]
  if not id then
    return nil
  end
  index_move(B, tenant, f[1], to, created, id)
  return tenant, created, id
end

-- Stamps a terminal status on a job whose record was read (r: its status, tenant, created_at,
-- id and usage, false when absent), writes the terminal event and starts the retention clock
-- (a ttl of 0 keeps the job forever). fields: more of the record's fields and values to write
-- with the status, in the same HSET.
local function finish_read(B, job, events, r, status, now, data, ttl_ms, maxlen, fields)
  local tenant = r.tenant or ''
  index_move(B, tenant, r.status, status, r.created, r.id)
  local n = #fields
  fields[n + 1], fields[n + 2], fields[n + 3] = 'status', status, 'finished_at'
  fields[n + 4], fields[n + 5], fields[n + 6] = now, 'updated_at', now
  redis.call('HSET', job, unpack(fields))
  if r.usage then
    -- the terminal event carries the generation's usage totals (Event.usage)
    redis.call('XADD', events, 'MAXLEN', '~', maxlen, '*', 'type', status, 'data', data,
      'usage', r.usage)
  else
    append(events, maxlen, status, data)
  end
  if ttl_ms > 0 then
    redis.call('PEXPIRE', job, ttl_ms)
    redis.call('PEXPIRE', events, ttl_ms)
    if r.id then
      redis.call('ZADD', B.expiry, now + ttl_ms, expiry_entry(status, tenant, r.created, r.id))
    end
  end
end

-- finish_read for a script that has not read the record.
local function finish(B, job, events, status, now, data, ttl_ms, maxlen)
  local f = redis.call('HMGET', job, 'status', 'tenant', 'created_at', 'id', 'usage')
  finish_read(B, job, events,
    {status = f[1], tenant = f[2], created = f[3], id = f[4], usage = f[5]},
    status, now, data, ttl_ms, maxlen, {})
end

-- The outbox keeps about this many notices (MAXLEN ~): alerts written while no worker reads
-- them survive until this many more jobs have dead-lettered.
local OUTBOX_MAX_LEN = 10000

-- Dead-letters a job. Its notice goes to the queue's outbox (a stream the workers' alerts read
-- through a consumer group: durable, so it waits for a worker) and, for whoever listens now
-- (`genq dead watch`), on the dead-letters channel.
local function dead_letter(B, job, events, dead, idem, id, now, reason, err, ttl_ms, maxlen,
  channel)
  redis.call('HSET', job, 'error', err, 'dead_reason', reason)
  finish(B, job, events, 'failed', now, cjson.encode(err), ttl_ms, maxlen)
  redis.call('ZADD', dead, now, id)
  if ttl_ms > 0 then
    redis.call('ZREMRANGEBYSCORE', dead, '-inf', '(' .. int(now - ttl_ms))
  end
  release_key(idem, id)
  -- The tenant the job was enqueued for (fair share's), null for the default one: a record
  -- leaves the field out for it.
  local f = redis.call('HMGET', job, 'attempt', 'tenant')
  local tenant = f[2]
  if not tenant or tenant == '' then
    tenant = cjson.null
  end
  local notice = cjson.encode({
    id = id, reason = reason, error = err, died_at = now, attempts = tonumber(f[1]),
    tenant = tenant,
  })
  redis.call('XADD', B.outbox, 'MAXLEN', '~', OUTBOX_MAX_LEN, '*', 'notice', notice)
  redis.call('PUBLISH', channel, notice)
end

-- Wakes up to `count` (default 1, at most 100) idle workers, one ring each. Past 1,000 rings
-- (no worker listening) the list is cut back to its newest 100, so that happens once per 900.
-- Returns the list's length after the push (1: every earlier ring was taken).
-- A ring is '1', or the id of the one job that rang (`hint`): the worker it wakes passes that
-- id to its pick, which activates the job in the same call when it is the one claimed (an
-- idle worker then starts a lone job one round trip sooner).
local function ring_doorbell(signal, count, hint)
  local length
  if not count or count <= 1 then
    length = redis.call('LPUSH', signal, hint or '1')
  else
    local rings = {}
    for i = 1, math.min(count, 100) do
      rings[i] = '1'
    end
    length = redis.call('LPUSH', signal, unpack(rings))
  end
  if length > 1000 then
    redis.call('LTRIM', signal, 0, 99)
  end
  return length
end

--[[ Hand-offs. A built-in worker about to wait on the doorbell with a free slot appends an
offer to the offers list (Keys.idle); the enqueue of a job that no other job is ahead of starts
it under the oldest offer and appends it to the hand-offs list (Keys.handoffs), which the idle
workers wait on before the doorbell (enqueue.lua). The worker's next pick withdraws its offer if
it is still there, and when it is not, takes the job handed off under it if no other worker took
it first (pick.lua); presence.lua drops both of a worker that vanished. Both lists stay short:
one offer per idle worker, and a hand-off is taken within a round trip. ]]

-- Takes out of `list` (offers or hand-offs) the entries that start with `prefix`, at most
-- `limit` (nil: all), and returns them.
local function take_listed(list, prefix, limit)
  local taken = {}
  for _, entry in ipairs(redis.call('LRANGE', list, 0, 999)) do
    if string.sub(entry, 1, #prefix) == prefix then
      redis.call('LREM', list, 1, entry)
      taken[#taken + 1] = entry
      if limit and #taken >= limit then
        break
      end
    end
  end
  return taken
end

-- Turns a claimed job into a running one held by `token` (activate.lua, and pick.lua for the
-- job its doorbell named). Returns activate.lua's reply.
local function activate_claim(B, job, events, leases, id, token, lease_ms, maxlen)
  local f = redis.call('HMGET', job, 'status', 'token', 'out', 'attempt', 'tenant',
    'created_at', 'id')
  local status = f[1]
  if status == 'active' and f[2] == token then
    return {0, redis.call('HGETALL', job)}
  end
  local now = now_ms()
  local claim = redis.call('ZSCORE', leases, id)
  if not claim or tonumber(claim) <= now then
    return {3}
  end
  if status ~= 'waiting' and status ~= 'scheduled' then
    if not status then
      redis.call('ZREM', leases, id)
    end
    return {3}
  end

  local lease_until = now + tonumber(lease_ms)
  redis.call('ZADD', leases, lease_until, id)
  if f[3] == '1' then
    restart_stream(events, maxlen)
  end
  index_move(B, f[5] or '', status, 'active', f[6], f[7])
  redis.call('HSET', job, 'status', 'active', 'attempt', (tonumber(f[4]) or 0) + 1,
    'token', token, 'started_at', now, 'updated_at', now, 'lease_until', lease_until,
    'out', 0, 'eseq', 0)
  return {0, redis.call('HGETALL', job)}
end

local function cancel_settle(B, job, events, idem, id, now, ttl_ms, maxlen)
  finish(B, job, events, 'cancelled', now, 'null', ttl_ms, maxlen)
  release_key(idem, id)
end

--[[ Fair share. Every runnable job is in the queue's ready set (all runnable jobs, by rank: the
counts), in the waits (by when it became runnable: the oldest wait) and in its tenant's line
(lines). A tenant with runnable jobs takes turns: it is in turns, scored by its pass (stride
scheduling: each job it is served adds STRIDE / weight), or, while it holds as many leases as
the per-tenant cap allows, in parked. The next job is the first in the line of the tenant with
the lowest pass (ties by name). A tenant that runs out of runnable jobs keeps its pass in
passes, and one that (re)joins starts at the pass last served (vtime) if that is later, so
idling earns no credit and leaving does not forgive a debt (once no tenant waits at all, every
tenant starts even again). running counts each tenant's leases. ]]

local STRIDE = 1000000

local function line_entry(tenant, rank, id)
  return tenant .. '\0' .. pad_rank(rank) .. '\0' .. id
end

-- The first `count` entries of a tenant's line (after its first `skip`, if given).
local function line_head(B, tenant, count, skip)
  return redis.call('ZRANGEBYLEX', B.lines, '[' .. tenant .. '\0', '(' .. tenant .. '\1',
    'LIMIT', skip or 0, count)
end

-- The job id of a line entry (what follows its second NUL).
local function line_id(entry)
  local a = string.find(entry, '\0', 1, true)
  return string.sub(entry, string.find(entry, '\0', a + 1, true) + 1)
end

local function join_turns(B, tenant)
  local pass = tonumber(redis.call('GET', B.vtime) or '0')
  local owed = redis.call('HGET', B.passes, tenant)
  if owed then
    redis.call('HDEL', B.passes, tenant)
    pass = math.max(pass, tonumber(owed))
  end
  redis.call('ZADD', B.turns, pass, tenant)
end

-- A tenant that now has a runnable job takes turns, unless it already does (or is parked).
local function take_turn(B, tenant)
  if not (redis.call('ZSCORE', B.turns, tenant) or redis.call('ZSCORE', B.parked, tenant)) then
    join_turns(B, tenant)
  end
end

-- Makes a job runnable: into the ready set, the waits (since: when it became runnable, ms) and
-- its tenant's line (a tenant with no other runnable job joins the turns).
local function make_ready(B, ready, id, rank, tenant, since)
  redis.call('ZADD', ready, rank, id)
  redis.call('ZADD', B.waits, since, id)
  redis.call('ZADD', B.lines, 0, line_entry(tenant, rank, id))
  take_turn(B, tenant)
end

--[[ Intake. An enqueue writes the job's whole record (its rank included) and appends one
entry to the intake: of the keys shared by the queue, that is all it touches. admit moves the
entries, oldest first, into the ready set, the waits (since their creation), their tenants'
lines (each tenant takes turns) and the job index (waiting), one command per key, at most
ADMIT_MAX per call so that no call holds the server long. pick.lua admits before it serves, and
claims nothing while more than one call's worth waits (its worker picks again at once);
admit.lua admits for the readers of the ready set, the lines or the index; cancel.lua takes a
job that is still in the intake out of it. An entry is "<created ms, 15 digits>\0" and then the
job's line entry. ]]

local ADMIT_MAX = 1000

-- created and rank come padded (15 and 16 digits), as the record's rank is.
local function intake_entry(created, tenant, rank, id)
  return created .. '\0' .. tenant .. '\0' .. rank .. '\0' .. id
end

-- Admits up to ADMIT_MAX entries. Returns how many, and how many are left in the intake.
local function admit(B, ready, intake)
  local entries = redis.call('LRANGE', intake, 0, ADMIT_MAX - 1)
  if #entries == 0 then
    return 0, 0
  end
  redis.call('LTRIM', intake, #entries, -1)
  local scored, since, lines, index, tindex, tenants = {}, {}, {}, {}, {}, {}
  for i, entry in ipairs(entries) do
    local line = string.sub(entry, 17)
    local a = string.find(line, '\0', 1, true)
    local tenant, id = string.sub(line, 1, a - 1), line_id(line)
    local created = string.sub(entry, 1, 15)
    local listed = index_entry('waiting', created, id)
    local n = 2 * i
    scored[n - 1], scored[n] = string.sub(line, a + 1, a + 16), id
    since[n - 1], since[n] = created, id
    lines[n - 1], lines[n] = 0, line
    index[n - 1], index[n] = 0, listed
    tindex[n - 1], tindex[n] = 0, tenant .. '\0' .. listed
    tenants[tenant] = true
  end
  redis.call('ZADD', ready, unpack(scored))
  redis.call('ZADD', B.waits, unpack(since))
  redis.call('ZADD', B.lines, unpack(lines))
  redis.call('ZADD', B.index, unpack(index))
  redis.call('ZADD', B.tindex, unpack(tindex))
  for tenant in pairs(tenants) do
    take_turn(B, tenant)
  end
  local left = 0
  if #entries == ADMIT_MAX then
    left = redis.call('LLEN', intake)
  end
  return #entries, left
end

-- Takes a runnable job out of the ready set, the waits and its line (a tenant left with none
-- leaves the turns, keeping its pass).
local function leave_ready(B, ready, id, rank, tenant)
  redis.call('ZREM', ready, id)
  redis.call('ZREM', B.waits, id)
  if redis.call('ZREM', B.lines, line_entry(tenant, rank, id)) == 1
      and #line_head(B, tenant, 1) == 0 then
    local pass = redis.call('ZSCORE', B.turns, tenant) or redis.call('ZSCORE', B.parked, tenant)
    redis.call('ZREM', B.turns, tenant)
    redis.call('ZREM', B.parked, tenant)
    if pass then
      redis.call('HSET', B.passes, tenant, pass)
    end
  end
end

-- Ends a job's lease. When the job held one, it leaves its holder's leases, its tenant's count
-- drops and a parked tenant takes turns again (the next pick parks it again if it is still at
-- the cap). A record written
-- before fair share has no tenant: its job is the default tenant's, as pick.lua adopted it.
local function end_lease(B, leases, id, tenant)
  if redis.call('ZREM', leases, id) == 0 then
    return
  end
  local holder = redis.call('HGET', B.holders, id)
  if holder then
    redis.call('HDEL', B.holders, id)
    redis.call('ZREM', B.holds, holder .. '\0' .. id)
  end
  tenant = tenant or ''
  if redis.call('HINCRBY', B.running, tenant, -1) <= 0 then
    redis.call('HDEL', B.running, tenant)
  end
  local pass = redis.call('ZSCORE', B.parked, tenant)
  if pass then
    redis.call('ZREM', B.parked, tenant)
    redis.call('ZADD', B.turns, pass, tenant)
  end
end

-- The rank hash holds "<rank>:<tenant>" for each job in the scheduled set.
local function scheduled_entry(rank, tenant)
  return rank .. ':' .. tenant
end

local function parse_scheduled(entry)
  local colon = string.find(entry, ':', 1, true)
  if not colon then
    return entry, ''
  end
  return string.sub(entry, 1, colon - 1), string.sub(entry, colon + 1)
end

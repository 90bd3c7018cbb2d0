-- Shared helpers, spliced by genq/scripts.py into every script right after its #!lua line.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Scores and timestamps are integers below 2^53; '%.0f' keeps every digit (tostring would not).
local function int(n)
  return string.format('%.0f', n)
end

local function append(events, maxlen, etype, data)
  return redis.call('XADD', events, 'MAXLEN', '~', maxlen, '*', 'type', etype, 'data', data)
end

-- Drops the stream's entries but keeps its last id, so the next entry sorts above all of them.
local function restart_stream(events, maxlen)
  redis.call('XTRIM', events, 'MAXLEN', 0)
  return append(events, maxlen, 'restarted', 'null')
end

-- Releases an idempotency key, but only while it still points at this job.
local function release_key(idem, id)
  if redis.call('GET', idem) == id then
    redis.call('DEL', idem)
  end
end

--[[ Job index. Every job is listed under its status twice, for the queue ({P}:ix:<status>) and
for its tenant ({P}:ix:t:<tenant>:<status>), scored by the millisecond it was created, so a
listing pages newest first by a position that does not move while the job keeps its status.
The script that changes a job's status moves it (reindex, called before the status is
written). A finished job's entries leave with its record: finish() files them in
{P}:ix:expiry under the record's expiry, and pick.lua drops the due ones. ]]

local FINISHED = {completed = true, failed = true, cancelled = true}

-- The hash tag every key of a queue starts with ("{P}").
local function tag_of(key)
  return string.match(key, '^({.-})')
end

local function index_add(tag, tenant, status, created, id)
  redis.call('ZADD', tag .. ':ix:' .. status, created, id)
  redis.call('ZADD', tag .. ':ix:t:' .. tenant .. ':' .. status, created, id)
end

-- An {P}:ix:expiry member: status, tenant and id, which neither of them contains a NUL in.
local function expiry_entry(status, tenant, id)
  return status .. '\0' .. tenant .. '\0' .. id
end

-- Moves the job's index entries from its current status to `to` (none: out of the index).
-- Returns the job's tenant and id (nil when there is no record).
local function reindex(job, to)
  local f = redis.call('HMGET', job, 'status', 'tenant', 'created_at', 'id')
  local tag, tenant, id = tag_of(job), f[2] or '', f[4]
  if not id then
    return nil, nil
  end
  if f[1] then
    redis.call('ZREM', tag .. ':ix:' .. f[1], id)
    redis.call('ZREM', tag .. ':ix:t:' .. tenant .. ':' .. f[1], id)
    if FINISHED[f[1]] then
      redis.call('ZREM', tag .. ':ix:expiry', expiry_entry(f[1], tenant, id))
    end
  end
  if to then
    index_add(tag, tenant, to, f[3], id)
  end
  return tenant, id
end

-- Stamps a terminal status, writes the terminal event and starts the retention clock (a ttl of
-- 0 keeps the job forever).
local function finish(job, events, status, now, data, ttl_ms, maxlen)
  local tenant, id = reindex(job, status)
  redis.call('HSET', job, 'status', status, 'finished_at', int(now), 'updated_at', int(now))
  append(events, maxlen, status, data)
  if ttl_ms > 0 then
    redis.call('PEXPIRE', job, ttl_ms)
    redis.call('PEXPIRE', events, ttl_ms)
    redis.call('ZADD', tag_of(job) .. ':ix:expiry', int(now + ttl_ms),
      expiry_entry(status, tenant, id))
  end
end

-- Dead-letters a job and announces it on the dead-letters channel, for alerting.
local function dead_letter(job, events, dead, idem, id, now, reason, err, ttl_ms, maxlen, channel)
  redis.call('HSET', job, 'error', err, 'dead_reason', reason)
  finish(job, events, 'failed', now, cjson.encode(err), ttl_ms, maxlen)
  redis.call('ZADD', dead, int(now), id)
  if ttl_ms > 0 then
    redis.call('ZREMRANGEBYSCORE', dead, '-inf', '(' .. int(now - ttl_ms))
  end
  release_key(idem, id)
  redis.call('PUBLISH', channel, cjson.encode({
    id = id, reason = reason, error = err, died_at = now,
    attempts = tonumber(redis.call('HGET', job, 'attempt')),
  }))
end

local function ring_doorbell(signal)
  if redis.call('LPUSH', signal, '1') > 1000 then
    redis.call('LTRIM', signal, 0, 999)
  end
end

local function cancel_settle(job, events, idem, id, now, ttl_ms, maxlen)
  finish(job, events, 'cancelled', now, 'null', ttl_ms, maxlen)
  release_key(idem, id)
end

--[[ Fair share. Every waiting job is in the queue's ready set (all waiting jobs, by rank) and in
its tenant's ready set. A tenant with waiting jobs takes turns: it is in the turn set, scored by
its pass (stride scheduling: each job it is served adds STRIDE / weight), or, while it holds as
many leases as the per-tenant cap allows, in the parked set. The next job is the best-ranked
one of the tenant with the lowest pass. A tenant that runs out of waiting jobs keeps its pass in
the passes hash, and one that (re)joins starts at the pass last served (the virtual time) if
that is later, so idling earns no credit and leaving does not forgive a debt (once no tenant
waits at all, every tenant starts even again). The running hash
counts each tenant's leases. These keys are named after the ready set's (genq/keys.py says how)
and share its hash tag, so a script that is given the ready set can reach them. ]]

local STRIDE = 1000000

local function tenant_ready(ready, tenant)
  return ready .. ':t:' .. tenant
end

local function join_turns(ready, tenant)
  local passes = ready .. ':passes'
  local pass = tonumber(redis.call('GET', ready .. ':vtime') or '0')
  local owed = redis.call('HGET', passes, tenant)
  if owed then
    redis.call('HDEL', passes, tenant)
    pass = math.max(pass, tonumber(owed))
  end
  redis.call('ZADD', ready .. ':turns', int(pass), tenant)
end

-- Makes a job runnable: into the ready set and its tenant's (a tenant with no other waiting
-- job joins the turns).
local function make_ready(ready, id, rank, tenant)
  redis.call('ZADD', ready, rank, id)
  local own = tenant_ready(ready, tenant)
  redis.call('ZADD', own, rank, id)
  if redis.call('ZCARD', own) == 1 then
    join_turns(ready, tenant)
  end
end

-- Takes a waiting job out of the ready sets (a tenant left with none leaves the turns, keeping
-- its pass).
local function leave_ready(ready, id, tenant)
  redis.call('ZREM', ready, id)
  local own = tenant_ready(ready, tenant)
  if redis.call('ZREM', own, id) == 1 and redis.call('EXISTS', own) == 0 then
    local pass = redis.call('ZSCORE', ready .. ':turns', tenant)
      or redis.call('ZSCORE', ready .. ':parked', tenant)
    redis.call('ZREM', ready .. ':turns', tenant)
    redis.call('ZREM', ready .. ':parked', tenant)
    if pass then
      redis.call('HSET', ready .. ':passes', tenant, pass)
    end
  end
end

-- Ends a job's lease. When the job held one, its tenant's count drops and a parked tenant
-- takes turns again (the next pick parks it again if it is still at the cap). A record written
-- before fair share has no tenant: its job is the default tenant's, as pick.lua adopted it.
local function end_lease(leases, ready, id, tenant)
  if redis.call('ZREM', leases, id) == 0 then
    return
  end
  tenant = tenant or ''
  local running = ready .. ':running'
  if redis.call('HINCRBY', running, tenant, -1) <= 0 then
    redis.call('HDEL', running, tenant)
  end
  local pass = redis.call('ZSCORE', ready .. ':parked', tenant)
  if pass then
    redis.call('ZREM', ready .. ':parked', tenant)
    redis.call('ZADD', ready .. ':turns', pass, tenant)
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

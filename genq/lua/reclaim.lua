#!lua flags=allow-oom
--[[
Reclaim: handles a lease that expired. A claim that was never activated goes back to the ready
set with no attempt spent. A running job whose worker went silent loses its holder (the token
is cleared, fencing the zombie; the attempt enters the record's history as lease_expired)
and goes back to the ready set, or is dead-lettered
(`lease_expired`) when out of attempts, or settles cancelled if a cancel was requested.
A job back in line waits from now (the waits: see _lib.lua).
A lost attempt's output is copied to the lost-attempts hash before anything can drop it (the
next attempt's restart marker trims the stream): every entry of the job's stream from the
attempt's start (its progress left out), as {type, data} pairs, under "<id>\0<attempt>". The
caller estimates its usage from it and meters it with meter_lost.lua (Queue.lost_attempts). An
attempt that streamed nothing is filed too, with no entries: it cost its prompt. Taking the
lease back is what decides, so one attempt is filed once, however many reclaimers race.
Safe to run twice: a lease that is no longer expired is left alone.

KEYS[1] job record   KEYS[2] job stream   KEYS[3] lease set   KEYS[4] ready set
KEYS[5] dead set     KEYS[6] idempotency key (placeholder if none)   KEYS[7] doorbell list
KEYS[8] lost-attempts hash
KEYS[9..21] the books (fair share, job index, holders, outbox, waits: see _lib.lua)
ARGV[1] job id   ARGV[2] result ttl (ms)   ARGV[3] dead ttl (ms)   ARGV[4] stream max length
ARGV[5] the job's idempotency key as read by the caller   ARGV[6] dead-letters channel
Returns {1, status} when reclaimed, {0} when there was nothing to do, {6} when the record
changed under the caller (read it again).
Events: failed or cancelled when the job finishes here (a dead letter's notice is also appended
to the outbox and published on the dead-letters channel); none when it goes back to ready.
]]
local job, events, leases, ready, dead, idem, signal =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local lost = KEYS[8]
local B = books_at(9)
local id = ARGV[1]
local now = now_ms()

-- Files what the attempt streamed since it started: every entry's type and data but progress.
local function file_lost(attempt)
  local f = redis.call('HMGET', job, 'started_at', 'out')
  local output = {}
  if f[2] == '1' then
    for _, entry in ipairs(redis.call('XRANGE', events, f[1] or '-', '+')) do
      local fields, etype, data = entry[2], nil, nil
      for i = 1, #fields, 2 do
        if fields[i] == 'type' then
          etype = fields[i + 1]
        elseif fields[i] == 'data' then
          data = fields[i + 1]
        end
      end
      if etype and etype ~= 'progress' then
        output[#output + 1] = {etype, data or 'null'}
      end
    end
  end
  redis.call('HSET', lost, id .. '\0' .. attempt,
    cjson.encode({attempt = tonumber(attempt), output = output}))
end

local score = redis.call('ZSCORE', leases, id)
if not score or tonumber(score) > now then
  return {0}
end
local state = redis.call('HMGET', job, 'status', 'idempotency_key', 'cancel_requested',
  'attempt', 'max_attempts', 'rank', 'tenant')
local status = state[1]
if not status then
  redis.call('ZREM', leases, id)
  return {0}
end
if (state[2] or '') ~= ARGV[5] then  -- a job with no key has no field
  return {6}
end
end_lease(B, leases, id, state[7])

if status == 'active' then
  redis.call('HSET', job, 'token', '')
  local err = 'lease expired on attempt ' .. state[4] .. ' (worker lost)'
  record_attempt(job, now, 'lease_expired', err)
  file_lost(state[4])
  if state[3] == '1' then
    cancel_settle(B, job, events, idem, id, now, tonumber(ARGV[2]), ARGV[4])
    return {1, 'cancelled'}
  end
  if tonumber(state[4]) >= tonumber(state[5]) then
    dead_letter(B, job, events, dead, idem, id, now, 'lease_expired', err, tonumber(ARGV[3]),
      ARGV[4], ARGV[6])
    return {1, 'failed'}
  end
  redis.call('HSET', job, 'error', err)
elseif status ~= 'waiting' and status ~= 'scheduled' then
  return {0}
end
reindex(B, job, 'waiting')
redis.call('HSET', job, 'status', 'waiting', 'updated_at', now)
make_ready(B, ready, id, state[6], state[7] or '', now)
ring_doorbell(signal)
return {1, 'waiting'}

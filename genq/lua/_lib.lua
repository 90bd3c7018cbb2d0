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

-- Stamps a terminal status, writes the terminal event and starts the retention clock.
local function finish(job, events, status, now, data, ttl_ms, maxlen)
  redis.call('HSET', job, 'status', status, 'finished_at', int(now), 'updated_at', int(now))
  append(events, maxlen, status, data)
  redis.call('PEXPIRE', job, ttl_ms)
  redis.call('PEXPIRE', events, ttl_ms)
end

-- Dead-letters a job and announces it on the dead-letters channel, for alerting.
local function dead_letter(job, events, dead, idem, id, now, reason, err, ttl_ms, maxlen, channel)
  redis.call('HSET', job, 'error', err, 'dead_reason', reason)
  finish(job, events, 'failed', now, cjson.encode(err), ttl_ms, maxlen)
  redis.call('ZADD', dead, int(now), id)
  redis.call('ZREMRANGEBYSCORE', dead, '-inf', '(' .. int(now - ttl_ms))
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

#!lua flags=allow-oom
--[[
Purge dead: deletes a dead-lettered job for good: its dead entry, record and stream.

KEYS[1] job record   KEYS[2] job stream   KEYS[3] dead set
KEYS[4..16] the books (fair share, job index, holders, outbox, waits: see _lib.lua)
ARGV[1] job id
Returns 1 when purged, 0 when the job was not dead-lettered.
Events: none (the stream is deleted).
]]
local job, events, dead = KEYS[1], KEYS[2], KEYS[3]
local B = books_at(4)
if redis.call('ZREM', dead, ARGV[1]) == 0 then
  return 0
end
if redis.call('HGET', job, 'status') == 'failed' then
  reindex(B, job, nil)
  redis.call('DEL', job, events)
end
return 1

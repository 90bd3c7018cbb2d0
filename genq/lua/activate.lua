#!lua
--[[
Activate (second half of a reserve): turns a claimed job into a running one held by a lease
token. The attempt is counted here, so a handler that kills its process still spends attempts.
When the job's stream holds output of an earlier attempt, that output is dropped and a
`restarted` event is written above every id the earlier attempt used.
Safe to run twice: a re-run with the same token answers with the job as activated.

KEYS[1] job record   KEYS[2] job stream   KEYS[3] lease set
KEYS[4..16] the books (fair share, job index, holders, outbox, waits: see _lib.lua)
ARGV[1] job id   ARGV[2] lease token   ARGV[3] lease length (ms)   ARGV[4] stream max length
Returns {0, HGETALL of the record} when held, {3} when the claim is gone (cancelled or
reclaimed) or expired (its worker was too slow, or vanished: reclaim.lua takes it back).
Events: restarted (when an earlier attempt wrote output).
]]
return activate_claim(books_at(4), KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3],
  ARGV[4])

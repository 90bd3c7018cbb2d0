#!lua
--[[
Admit: moves the jobs enqueued since the last pick from the intake into the ready set, the
waits, their tenants' lines and the job index (see _lib.lua), as the next pick would. Run by
the readers of those keys (job listings and counts, the queue's checks) so that they see every
waiting job even while no worker picks.

KEYS[1] intake list   KEYS[2] ready set
KEYS[3..15] the books (fair share, job index, holders, outbox, waits: see _lib.lua)
Returns {how many jobs it admitted (at most 1,000: ADMIT_MAX), how many are still in the intake}.
Events: none.
]]
return {admit(books_at(3), KEYS[2], KEYS[1])}

#!lua flags=allow-oom
--[[
Fold usage: adds the journals of the days named to the usage counters (fold_usage() in
_lib.lua), so a reader of the counters sees every attempt settled. The reader passes the days
the set of days with a journal held when it looked; a day whose journal was folded meanwhile
(by a settle) has none left and is only dropped from the set. Runs when memory is full: the
counters' fields are few, and the journals it empties are what grows.

KEYS[1] the days with a journal (set)   KEYS[2] all-time usage counters
KEYS[3 + 2i], KEYS[4 + 2i] (i = 0, 1, ...) a day's journal and its counters
ARGV[1] how long a day's usage counters are kept (ms, 0: forever)   ARGV[2 + i] the days
Returns how many attempts were folded.
Events: none.
]]
local journals, all_counters, day_ttl = KEYS[1], KEYS[2], tonumber(ARGV[1])
local folded = 0
for i = 2, #ARGV do
  local at = 3 + 2 * (i - 2)
  folded = folded + fold_usage(KEYS[at], journals, ARGV[i], KEYS[at + 1], all_counters, day_ttl)
end
return folded

#!lua
--[[
Pick (first half of a reserve): admits the jobs enqueued since the last pick (see _lib.lua),
promotes due scheduled jobs, drops dead-set entries older than the dead-letter retention and
the index entries of expired records, then moves up to N runnable jobs into the lease set
under a short claim. The worker activates each claimed job
with activate.lua; a claim that is never activated expires and reclaim.lua puts the job back,
with no attempt spent.

Jobs are served by fair share (see _lib.lua): each claim goes to the tenant whose turn it is,
which gives the first job of its line (priority, then FIFO) and moves back by STRIDE / its
weight; a tenant holding as many leases as the cap is parked until one of its leases ends.
A promoted job's record keeps saying `scheduled` until it is activated (Job reads it as waiting);
it waits since it was due (its score in the scheduled set), which the waits keep.

KEYS[1] ready set   KEYS[2] scheduled set   KEYS[3] lease set   KEYS[4] rank hash
KEYS[5] cooldown key   KEYS[6] dead set   KEYS[7] intake list
KEYS[8..20] the books (fair share, job index, holders, outbox, waits: see _lib.lua)
KEYS[21] offers list   KEYS[22] hand-offs list   (see _lib.lua)
KEYS[23] the hinted job's record   KEYS[24] its stream   (only with a hint)
ARGV[1] how many jobs to claim   ARGV[2] claim length (ms)   ARGV[3] dead-letter retention (ms,
0: forever)   ARGV[4] leases per tenant (0: no cap)
ARGV[5] tenant weights, JSON {tenant: weight} (default 1)
ARGV[6] the picking worker's holder id ('' for none): its claims are filed under it (holders,
holds), so presence.lua can take them back if the worker vanishes
ARGV[7] the picking worker's offer, withdrawn here if still listed; if it was taken, the job
handed off under it is taken off the hand-offs list and returned (when no other worker took it
first), and this pick claims one job fewer ('' for none)
ARGV[8] "<offerer>\0<id>": a job this worker took off the hand-offs list under another worker's
offer, whose lease is filed here under this worker instead ('' for none)
ARGV[9..12] optional, a hint: the id of a job the doorbell named (enqueue.lua rings with a lone
job's id), a lease token, the lease length (ms), the stream max length: when this pick claims
that job it also activates it, as activate.lua would (one round trip fewer for a lone job)
Returns {claimed ids, expired lease ids, ms until the next scheduled job or lease expiry (-1 none),
1 when it only admitted (more than one admission's worth waits: pick again at once) else 0,
activate.lua's reply for the hinted job ({} when there was no hint or it was not claimed here),
the hand-off taken for the withdrawn offer as listed ('' for none)}; the hinted job, activated or
not, is in the claimed ids.
While the cooldown key lives nothing is claimed and the wait is its remaining time.
Events: restarted, as activate.lua (only for a hinted job).
]]
local ready, scheduled, leases, rank_hash, cooldown, dead, intake =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local B = books_at(8)
local now = now_ms()
local holder = ARGV[6] or ''

-- The offer first: a job handed off under it counts against this pick's claims.
local owed = ''
if ARGV[7] ~= '' and redis.call('LREM', KEYS[21], 1, ARGV[7]) == 0 then
  local b = string.find(ARGV[7], '\0', string.find(ARGV[7], '\0', 1, true) + 1, true)
  owed = take_listed(KEYS[22], string.sub(ARGV[7], 1, b), 1)[1] or ''
end
if ARGV[8] ~= '' and holder ~= '' then
  local a = string.find(ARGV[8], '\0', 1, true)
  local offerer, id = string.sub(ARGV[8], 1, a - 1), string.sub(ARGV[8], a + 1)
  if redis.call('HGET', B.holders, id) == offerer then
    redis.call('HSET', B.holders, id, holder)
    redis.call('ZREM', B.holds, ARGV[8])
    redis.call('ZADD', B.holds, 0, holder .. '\0' .. id)
  end
end

-- While more than one admission's worth waits, nothing is claimed: every job enqueued before
-- this pick must be in line when the turns are decided. The worker picks again at once, and
-- each call holds the server no longer than one admission.
local _, left = admit(B, ready, intake)
if left > 0 then
  return {{}, {}, 0, 1, {}, owed}
end

if tonumber(ARGV[3]) > 0 then
  redis.call('ZREMRANGEBYSCORE', dead, '-inf', '(' .. int(now - tonumber(ARGV[3])))
end

-- Finished jobs whose records expired leave the job index.
local gone = redis.call('ZRANGEBYSCORE', B.expiry, '-inf', now, 'LIMIT', 0, 200)
for _, entry in ipairs(gone) do
  local a = string.find(entry, '\0', 1, true)
  local b = string.find(entry, '\0', a + 1, true)
  local c = string.find(entry, '\0', b + 1, true)
  index_drop(B, string.sub(entry, a + 1, b - 1), string.sub(entry, 1, a - 1),
    string.sub(entry, b + 1, c - 1), string.sub(entry, c + 1))
end
if #gone > 0 then
  redis.call('ZREM', B.expiry, unpack(gone))
end

local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, 20)

local due = redis.call('ZRANGEBYSCORE', scheduled, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 500)
for i = 1, #due, 2 do
  local id = due[i]
  local entry = redis.call('HGET', rank_hash, id)
  redis.call('ZREM', scheduled, id)
  redis.call('HDEL', rank_hash, id)
  if entry then
    local rank, tenant = parse_scheduled(entry)
    make_ready(B, ready, id, rank, tenant, due[i + 1])
  end
end

-- Jobs an older genq made ready are in no tenant's line: the default tenant adopts them.
if redis.call('EXISTS', B.turns) == 0 and redis.call('EXISTS', B.parked) == 0 then
  local orphans = redis.call('ZRANGE', ready, 0, 499, 'WITHSCORES')
  for i = 1, #orphans, 2 do
    make_ready(B, ready, orphans[i], orphans[i + 1], '', now)
  end
end

local pause = redis.call('PTTL', cooldown)
if pause > 0 then
  return {{}, expired, pause, 0, {}, owed}
end

local claimed = {}
local n = tonumber(ARGV[1])
if owed ~= '' then
  n = n - 1
end
local cap = tonumber(ARGV[4])
local weights = {}
if ARGV[5] ~= '' and ARGV[5] ~= '{}' then
  weights = cjson.decode(ARGV[5])
end
local until_ms = now + tonumber(ARGV[2])
-- The claims' writes wait until every turn is decided (one command per key): meanwhile a
-- tenant's line is read past the entries already taken, and its lease count is kept here.
local taken, held, entries, scored, held_by, holds = {}, {}, {}, {}, {}, {}
local taken_ids = {}
local served

-- The turns are decided in the script's memory: `order` holds the lowest tenants of the turns
-- set as it orders them (pass, then name), {tenant, pass} each, and every tenant outside it
-- sorts after all of them. A tenant whose new pass sorts past the last tenant read (`edge`)
-- while the set holds unread ones leaves `order`: its place among those is unknown. `moved`
-- keeps each tenant's new pass (false: it left the turns) until one ZADD and one ZREM write
-- them, before `order` is read again and at the end. Nothing is read yet: the first turn reads.
local window = n + 1
local order, edge, unread, moved = {}, nil, true, {}
local function write_turns()
  local add, drop = {}, {}
  for tenant, pass in pairs(moved) do
    if pass then
      add[#add + 1] = pass
      add[#add + 1] = tenant
    else
      drop[#drop + 1] = tenant
    end
  end
  if #add > 0 then redis.call('ZADD', B.turns, unpack(add)) end
  if #drop > 0 then redis.call('ZREM', B.turns, unpack(drop)) end
  moved = {}
end
local function read_turns()
  write_turns()
  local raw = redis.call('ZRANGE', B.turns, 0, window - 1, 'WITHSCORES')
  order = {}
  for i = 1, #raw, 2 do
    order[#order + 1] = {raw[i], tonumber(raw[i + 1])}
  end
  local last = order[#order]
  edge, unread = last and {last[1], last[2]}, #order == window
end
local function sorts_before(a, b)
  return a[2] < b[2] or (a[2] == b[2] and a[1] < b[1])
end
-- The head of the turns leaves `order`; with a pass, it takes its new place in the turns.
local function move_head(pass)
  local turn = table.remove(order, 1)
  moved[turn[1]] = pass or false
  if not pass then return end
  turn[2] = pass
  if unread and not sorts_before(turn, edge) then return end
  local lo, hi = 1, #order + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if sorts_before(order[mid], turn) then lo = mid + 1 else hi = mid end
  end
  table.insert(order, lo, turn)
end

while #claimed < n do
  if unread and #order < 2 then read_turns() end
  local head = order[1]
  if not head then break end
  local tenant, pass = head[1], head[2]
  local next_turn = order[2]
  served = pass
  if cap > 0 and not held[tenant] then
    held[tenant] = tonumber(redis.call('HGET', B.running, tenant) or '0')
  end
  if cap > 0 and held[tenant] >= cap then
    move_head(nil)
    redis.call('ZADD', B.parked, pass, tenant)
  else
    -- Claims, in one go, the jobs this tenant gets before the next tenant's turn comes (the
    -- lowest pass, ties by name): the same jobs one claim at a time would give.
    local stride = math.floor(STRIDE / (tonumber(weights[tenant]) or 1))
    local take = n - #claimed
    if cap > 0 then
      take = math.min(take, cap - held[tenant])
    end
    if next_turn then
      local gap = next_turn[2] - pass
      local turns_before = math.floor(gap / stride)
      if turns_before * stride ~= gap or tenant < next_turn[1] then
        turns_before = turns_before + 1
      end
      take = math.min(take, math.max(turns_before, 1))
    end
    local skip = taken[tenant] or 0
    -- one entry more than it takes: whether the line still has a job after them
    local line = line_head(B, tenant, take + 1, skip)
    local count = math.min(#line, take)
    for i = 1, count do
      local entry = line[i]
      local id = line_id(entry)
      entries[#entries + 1] = entry
      claimed[#claimed + 1] = id
      taken_ids[id] = true
      scored[#scored + 1] = until_ms
      scored[#scored + 1] = id
      held_by[#held_by + 1] = id
      held_by[#held_by + 1] = holder
      holds[#holds + 1] = 0
      holds[#holds + 1] = holder .. '\0' .. id
    end
    taken[tenant] = skip + count
    if cap > 0 then
      held[tenant] = held[tenant] + count
    end
    local served_count = math.max(count, 1)
    served = pass + (served_count - 1) * stride
    local after = pass + served_count * stride
    if #line > count then
      move_head(after)
    else
      move_head(nil)
      redis.call('HSET', B.passes, tenant, after)
    end
  end
end
write_turns()
if #claimed > 0 then
  redis.call('ZREM', B.lines, unpack(entries))
  redis.call('ZREM', ready, unpack(claimed))
  redis.call('ZREM', B.waits, unpack(claimed))
  redis.call('ZADD', leases, unpack(scored))
  for tenant, count in pairs(taken) do
    if count > 0 then
      redis.call('HINCRBY', B.running, tenant, count)
    end
  end
  if holder ~= '' then
    redis.call('HSET', B.holders, unpack(held_by))
    redis.call('ZADD', B.holds, unpack(holds))
  end
end
if served then
  if redis.call('EXISTS', B.turns) == 0 and redis.call('EXISTS', B.parked) == 0 then
    -- Nobody waits: every tenant starts even, and no key is left behind (the waits too,
    -- with any entry a script of an older genq left there when it took a job out of line).
    redis.call('DEL', B.passes, B.vtime, B.waits)
  else
    redis.call('SET', B.vtime, served)
  end
end

local wait = -1
local s = redis.call('ZRANGE', scheduled, 0, 0, 'WITHSCORES')
if s[2] then wait = math.max(0, tonumber(s[2]) - now) end
local l = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
if l[2] then
  local d = math.max(0, tonumber(l[2]) - now)
  if wait < 0 or d < wait then wait = d end
end
local hint = ARGV[9]
local hinted = {}
if hint and taken_ids[hint] then
  hinted = activate_claim(B, KEYS[23], KEYS[24], leases, hint, ARGV[10], ARGV[11], ARGV[12])
end
return {claimed, expired, wait, 0, hinted, owed}

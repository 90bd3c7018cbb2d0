--[[
Shared by the scripts that reserve against a budget account (genq_services/budget.py puts it
right after a script's header; so does the gateway's admit.lua): the account read, the check
that writes nothing, and the reservation's write.

Limits: the account's own (`limit:daily`, `limit:monthly`, set by the admin API; -1 = none)
win over the caller's (the settings'). Spend rolls over by period name: a stored day older
than `today` counts as 0 spent; a newer one (a caller whose clock is behind) is kept.
]]

-- The account as the checks need it: {daily, monthly, reserved, day_spent, month_spent}.
local function budget_read(account, daily_setting, monthly_setting, today, month)
  local f = redis.call('HMGET', account, 'limit:daily', 'limit:monthly', 'day', 'day_spent',
    'month', 'month_spent', 'reserved')
  -- Spent in the period the caller names: 0 once the stored period is an older one.
  local function spent(stored, value, current)
    if stored == false or stored < current then
      return 0
    end
    return tonumber(value or '0')
  end
  return {
    daily = tonumber(f[1] or daily_setting),
    monthly = tonumber(f[2] or monthly_setting),
    reserved = tonumber(f[7] or '0'),
    day_spent = spent(f[3], f[4], today),
    month_spent = spent(f[5], f[6], month),
  }
end

-- nil when `amount` fits both limits, else {'daily'|'monthly', remaining (text)}.
local function budget_refusal(b, amount)
  local checks = {{'daily', b.daily, b.day_spent}, {'monthly', b.monthly, b.month_spent}}
  for _, check in ipairs(checks) do
    local limit = check[2]
    if limit >= 0 and check[3] + b.reserved + amount > limit then
      return {check[1], string.format('%.0f', limit - check[3] - b.reserved)}
    end
  end
  return nil
end

-- Sets `amount` aside for the job (field r:<job id> = '<amount>:<ms reserved>').
local function budget_hold(account, job_id, amount, now_ms)
  redis.call('HSET', account, 'r:' .. job_id, string.format('%.0f:%.0f', amount, now_ms))
  redis.call('HINCRBY', account, 'reserved', string.format('%.0f', amount))
end

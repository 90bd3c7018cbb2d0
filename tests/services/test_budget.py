"""Budget accounts (genq_services.budget) against a real server: reserve, hold, charge,
release, periods, the operator's limits and the sweep."""

from __future__ import annotations

import asyncio
import calendar
import datetime

import pytest
import redis.asyncio as aioredis

from genq import Queue, as_text
from genq_contract.budget_limits import BudgetExceeded, Limits
from genq_contract.keys import GatewayKeys
from genq_contract.settings import CommonSettings
from genq_services import budget

DAY1 = calendar.timegm((2026, 3, 31, 12, 0, 0))
DAY2 = DAY1 + 86_400  # April 1st: a new day and a new month


async def _account(redis: aioredis.Redis, prefix: str, tenant: str = "acme") -> dict[str, str]:
    raw = await redis.hgetall(GatewayKeys(prefix).budget(tenant))
    return {as_text(k): as_text(v) for k, v in raw.items()}


async def test_reserve_refuses_past_the_daily_limit_with_remaining_and_reset(
    redis: aioredis.Redis, prefix: str
) -> None:
    limits = Limits(daily_nanos=1000, monthly_nanos=None)
    await budget.reserve(redis, prefix, "acme", "j1", 600, limits, now=DAY1)
    with pytest.raises(BudgetExceeded) as refused:
        await budget.reserve(redis, prefix, "acme", "j2", 600, limits, now=DAY1)
    assert refused.value.limit == "daily"
    assert refused.value.remaining_nanos == 400
    assert refused.value.resets_at == datetime.datetime(2026, 4, 1, tzinfo=datetime.UTC)
    assert (await _account(redis, prefix))["reserved"] == "600"
    hold = await budget.reserve(redis, prefix, "acme", "j3", 400, limits, now=DAY1)
    assert hold == budget.Hold(400, adopted=False)


async def test_monthly_limit_counts_spend_of_earlier_days(
    redis: aioredis.Redis, prefix: str
) -> None:
    limits = Limits(daily_nanos=1000, monthly_nanos=1500)
    now = DAY1 - 86_400  # March 30th
    await budget.reserve(redis, prefix, "acme", "j1", 1000, limits, now=now)
    assert await budget.charge(redis, prefix, "acme", "j1", 900, now=now)
    await budget.reserve(redis, prefix, "acme", "j2", 500, limits, now=DAY1)
    with pytest.raises(BudgetExceeded) as refused:
        await budget.reserve(redis, prefix, "acme", "j3", 200, limits, now=DAY1)
    assert (refused.value.limit, refused.value.remaining_nanos) == ("monthly", 100)
    assert refused.value.resets_at == datetime.datetime(2026, 4, 1, tzinfo=datetime.UTC)


async def test_hold_adopts_the_open_reservation_and_charge_is_idempotent(
    redis: aioredis.Redis, prefix: str
) -> None:
    limits = Limits(daily_nanos=1000)
    await budget.reserve(redis, prefix, "acme", "j1", 700, limits, now=DAY1)
    # The worker's hold adopts it (a larger amount would not fit: nothing is reserved again).
    held = await budget.hold(redis, prefix, "acme", "j1", 900, limits, now=DAY1)
    assert held == budget.Hold(700, adopted=True)
    assert await budget.charge(redis, prefix, "acme", "j1", 250, now=DAY1)
    assert not await budget.charge(redis, prefix, "acme", "j1", 250, now=DAY1)  # a re-run
    assert not await budget.release(redis, prefix, "acme", "j1", now=DAY1)
    account = await budget.read_account(redis, prefix, "acme", now=DAY1)
    assert (account.spent_day_nanos, account.spent_month_nanos) == (250, 250)
    assert (account.reserved_nanos, account.reservations) == (0, 0)
    # The next attempt holds anew against what is left (750).
    with pytest.raises(BudgetExceeded):
        await budget.hold(redis, prefix, "acme", "j1", 800, limits, now=DAY1)
    await budget.hold(redis, prefix, "acme", "j1", 750, limits, now=DAY1)


async def test_periods_roll_over_and_a_late_clock_never_resets_them(
    redis: aioredis.Redis, prefix: str
) -> None:
    limits = Limits(daily_nanos=1000, monthly_nanos=10_000)
    await budget.reserve(redis, prefix, "acme", "j1", 1000, limits, now=DAY1)
    await budget.charge(redis, prefix, "acme", "j1", 1000, now=DAY1)
    with pytest.raises(BudgetExceeded):
        await budget.reserve(redis, prefix, "acme", "j2", 1, limits, now=DAY1)
    # April 1st: the day's and the month's spend start over.
    await budget.reserve(redis, prefix, "acme", "j2", 800, limits, now=DAY2)
    await budget.charge(redis, prefix, "acme", "j2", 800, now=DAY2)
    # A caller whose clock still says March adds to April, never back to March.
    await budget.reserve(redis, prefix, "acme", "j3", 100, limits, now=DAY1)
    await budget.charge(redis, prefix, "acme", "j3", 100, now=DAY1)
    account = await budget.read_account(redis, prefix, "acme", now=DAY2)
    assert (account.spent_day_nanos, account.spent_month_nanos) == (900, 900)
    fields = await _account(redis, prefix)
    assert (fields["day"], fields["month"]) == ("2026-04-01", "2026-04")


async def test_concurrent_reserves_never_exceed_the_limit(
    redis: aioredis.Redis, prefix: str
) -> None:
    limits = Limits(daily_nanos=10 * 77 + 50)
    outcomes = await asyncio.gather(
        *(budget.reserve(redis, prefix, "acme", f"j{i}", 77, limits) for i in range(60)),
        return_exceptions=True,
    )
    assert sum(isinstance(o, budget.Hold) for o in outcomes) == 10
    assert all(isinstance(o, budget.Hold | BudgetExceeded) for o in outcomes)
    assert (await _account(redis, prefix))["reserved"] == "770"


async def test_stored_limits_win_over_the_settings_and_can_lift_them(
    redis: aioredis.Redis, prefix: str
) -> None:
    settings = CommonSettings.model_validate(
        {"queue_namespace": prefix, "tenant_budgets": {"acme": {"daily_usd": 1}}}
    )
    assert await budget.limits_for(redis, settings, "acme") == Limits(1_000_000_000, None)
    assert await budget.limits_for(redis, settings, "other") is None
    await budget.set_limits(redis, prefix, "other", Limits(None, 2_000_000_000))
    assert await budget.limits_for(redis, settings, "other") == Limits(None, 2_000_000_000)
    await budget.set_limits(redis, prefix, "acme", Limits(None, None))  # lifted
    assert await budget.limits_for(redis, settings, "acme") is None
    # The script applies the stored limits itself, whatever the caller passed.
    await budget.set_limits(redis, prefix, "acme", Limits(10, None))
    with pytest.raises(BudgetExceeded):
        await budget.reserve(redis, prefix, "acme", "j1", 11, Limits(1_000_000_000, None))
    assert await budget.clear_limits(redis, prefix, "acme")
    assert not await budget.clear_limits(redis, prefix, "acme")
    assert await budget.limits_for(redis, settings, "acme") == Limits(1_000_000_000, None)
    assert await budget.known_tenants(redis, prefix) == {"acme", "other"}


async def test_sweep_releases_finished_and_vanished_jobs_only_after_the_grace(
    redis: aioredis.Redis, prefix: str
) -> None:
    queue = Queue(redis, prefix=f"{prefix}:demo")
    limits = Limits(daily_nanos=10_000)
    waiting = (await queue.enqueue({"n": 1}, job_id="demo." + "a" * 32)).id
    cancelled = (await queue.enqueue({"n": 2}, job_id="demo." + "b" * 32)).id
    assert await queue.cancel(cancelled)
    vanished = "demo." + "c" * 32  # reserved, then its enqueue failed
    foreign = "f" * 32  # not a gateway id: looked for in every queue
    for job_id in (waiting, cancelled, vanished, foreign):
        await budget.reserve(redis, prefix, "acme", job_id, 100, limits)
    await budget.set_limits(redis, prefix, "acme", limits)  # an account the sweep knows
    queues = {"demo": queue}
    assert await budget.sweep(redis, prefix, queues, older_than=30) == 0
    await asyncio.sleep(0.3)
    assert await budget.sweep(redis, prefix, queues, older_than=0.2) == 3
    account = await budget.read_account(redis, prefix, "acme")
    assert (account.reservations, account.reserved_nanos) == (1, 100)
    assert account.spent_day_nanos == 0  # released at no cost
    assert f"r:{waiting}" in await _account(redis, prefix)


async def test_sweep_covers_the_tenants_it_is_given(redis: aioredis.Redis, prefix: str) -> None:
    queue = Queue(redis, prefix=f"{prefix}:demo")
    await budget.reserve(redis, prefix, "cfg", "demo." + "d" * 32, 5, Limits(daily_nanos=10))
    await asyncio.sleep(0.05)
    assert await budget.sweep(redis, prefix, {"demo": queue}, older_than=0.01) == 0
    assert await budget.sweep(redis, prefix, {"demo": queue}, 0.01, tenants=["cfg"]) == 1

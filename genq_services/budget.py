"""Per-tenant budgets in USD that hold under concurrency: reserve, hold, charge, release, sweep.

A tenant's budget account is one Redis hash (``GatewayKeys.budget``): its limits when an
operator set them (the admin API; they win over ``GENQ_TENANT_BUDGETS``), the spend of the
current UTC day and month, the total reserved, and one reservation per job id. Every change is
one Lua script on that one key (``genq_services/lua/budget_*.lua``), so on Redis Cluster each
account lives in one slot and a check and its write are one step.

The life of a reservation:

- the gateway :func:`reserve`\\ s a generation's maximum cost at enqueue (refused:
  :class:`BudgetExceeded`, a 402) and releases it when the enqueue fails or turns out to be a
  replay, or when the job is cancelled before it ever ran;
- the worker :func:`hold`\\ s before each attempt (adopting the gateway's reservation, or
  reserving anew for a later attempt) and :func:`charge`\\ s the attempt's real cost after it,
  which replaces the reservation on the day's and the month's spend;
- :func:`sweep` releases, at no cost, reservations whose job finished (or vanished) longer ago
  than a grace period without a charge: a worker killed between an attempt and its charge.

The limits and the refusal are the contract's (``genq_contract.budget_limits``); amounts are
integers in nano-USD (``genq_contract.money``), as the usage counters count cost. Days and
months are UTC, named by the caller's clock; a caller whose clock is behind adds to the newer
period already stored, never resets it.
"""

from __future__ import annotations

import datetime
import time
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from genq import TERMINAL, JobState, Queue, as_text, job_states
from genq_contract.budget_limits import BudgetExceeded, LimitKind, Limits, configured_limits
from genq_contract.keys import GatewayKeys

NO_LIMIT = -1
"""A limit stored as -1: none of that kind (an operator's override may lift the settings')."""
RESERVATION_PREFIX = "r:"


@dataclass(frozen=True)
class Hold:
    """A reservation in force for a job: ``amount_nanos``, and whether it was already there
    (adopted: made at enqueue, or by an earlier try of the same call)."""

    amount_nanos: int
    adopted: bool


@dataclass(frozen=True)
class Periods:
    """The UTC day and month of an instant, and when each ends."""

    day: str
    month: str
    day_ends: datetime.datetime
    month_ends: datetime.datetime

    @classmethod
    def at(cls, now: float) -> Periods:
        moment = datetime.datetime.fromtimestamp(now, datetime.UTC)
        midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        first = midnight.replace(day=1)
        next_month = (first + datetime.timedelta(days=32)).replace(day=1)
        return cls(
            day=midnight.strftime("%Y-%m-%d"),
            month=midnight.strftime("%Y-%m"),
            day_ends=midnight + datetime.timedelta(days=1),
            month_ends=next_month,
        )

    def resets_at(self, limit: LimitKind) -> datetime.datetime:
        return self.day_ends if limit == "daily" else self.month_ends


@dataclass(frozen=True)
class Account:
    """A budget account as read: spend of the current day and month, what is reserved."""

    tenant: str
    stored_limits: Limits | None
    """The operator's limits (admin API), None when the settings' apply."""
    spent_day_nanos: int
    spent_month_nanos: int
    reserved_nanos: int
    reservations: int


# -- scripts ------------------------------------------------------------------------------------

_LUA = resources.files("genq_services") / "lua"
LIBRARY = (_LUA / "_budget_lib.lua").read_text()
"""The Lua functions that read an account, check an amount against it and reserve it: one
definition for every script that reserves (``budget_reserve.lua``, the gateway's admission)."""


def spliced(script: str, *libraries: str) -> str:
    """``script`` with ``libraries`` (Lua text of local functions) put right after its first
    line, the ``#!lua`` flags line, which must stay first."""
    flags, _, body = script.partition("\n")
    return "\n".join([flags, *libraries, body])


_SOURCES = {
    "reserve": spliced((_LUA / "budget_reserve.lua").read_text(), LIBRARY),
    "charge": (_LUA / "budget_charge.lua").read_text(),
}
_registered: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _script(redis: Any, name: str) -> Any:
    scripts = _registered.get(redis)
    if scripts is None:
        scripts = {n: redis.register_script(src) for n, src in _SOURCES.items()}
        _registered[redis] = scripts
    return scripts[name]


def _limit_arg(nanos: int | None) -> int:
    return NO_LIMIT if nanos is None else nanos


# -- limits ---------------------------------------------------------------------------------------


def _parse_stored(daily: Any, monthly: Any) -> Limits | None:
    if daily is None and monthly is None:
        return None
    values = [int(as_text(v)) if v is not None else NO_LIMIT for v in (daily, monthly)]
    return Limits(*(None if v < 0 else v for v in values))


async def stored_limits(redis: Any, namespace: str, tenant: str) -> Limits | None:
    """The operator's limits for the tenant (admin API), None when none are stored."""
    daily, monthly = await redis.hmget(
        GatewayKeys(namespace).budget(tenant), "limit:daily", "limit:monthly"
    )
    return _parse_stored(daily, monthly)


async def limits_for(redis: Any, settings: Any, tenant: str) -> Limits | None:
    """The tenant's budget: the operator's (stored in Redis by the admin API) if set, else
    ``GENQ_TENANT_BUDGETS``'s; None when the tenant has no budget (nothing to reserve).

    ``settings``: any ``CommonSettings`` (its ``queue_namespace`` and ``tenant_budgets``)."""
    stored = await stored_limits(redis, settings.queue_namespace, tenant)
    if stored is not None:
        return stored if stored.any else None
    return configured_limits(settings, tenant)


async def set_limits(redis: Any, namespace: str, tenant: str, limits: Limits) -> None:
    """Stores the operator's limits for the tenant; they win over the settings' (a None kind
    lifts that kind's limit)."""
    keys = GatewayKeys(namespace)
    await redis.hset(
        keys.budget(tenant),
        mapping={
            "limit:daily": _limit_arg(limits.daily_nanos),
            "limit:monthly": _limit_arg(limits.monthly_nanos),
        },
    )
    await redis.sadd(keys.budget_tenants, tenant)


async def clear_limits(redis: Any, namespace: str, tenant: str) -> bool:
    """Drops the operator's limits (the settings' apply again); False when none were set."""
    removed = await redis.hdel(
        GatewayKeys(namespace).budget(tenant), "limit:daily", "limit:monthly"
    )
    return bool(removed)


async def known_tenants(redis: Any, namespace: str) -> set[str]:
    """Tenants whose limits an operator ever stored (their accounts may hold spend)."""
    return {as_text(t) for t in await redis.smembers(GatewayKeys(namespace).budget_tenants)}


async def read_account(
    redis: Any, namespace: str, tenant: str, now: float | None = None
) -> Account:
    """The tenant's account: spend of the current UTC day and month, reservations open."""
    raw = await redis.hgetall(GatewayKeys(namespace).budget(tenant))
    fields = {as_text(k): as_text(v) for k, v in raw.items()}
    periods = Periods.at(time.time() if now is None else now)

    def spent(period_field: str, spent_field: str, current: str) -> int:
        stored = fields.get(period_field)
        return int(fields.get(spent_field, 0)) if stored and stored >= current else 0

    return Account(
        tenant=tenant,
        stored_limits=_parse_stored(fields.get("limit:daily"), fields.get("limit:monthly")),
        spent_day_nanos=spent("day", "day_spent", periods.day),
        spent_month_nanos=spent("month", "month_spent", periods.month),
        reserved_nanos=int(fields.get("reserved", 0)),
        reservations=sum(1 for k in fields if k.startswith(RESERVATION_PREFIX)),
    )


# -- state changes --------------------------------------------------------------------------------


async def reserve(
    redis: Any,
    namespace: str,
    tenant: str,
    job_id: str,
    amount_nanos: int,
    limits: Limits,
    now: float | None = None,
) -> Hold:
    """Sets ``amount_nanos`` aside for ``job_id`` in the tenant's account, atomically against
    its daily and monthly limits (the operator's stored ones win over ``limits``); raises
    :class:`BudgetExceeded` when spent + reserved + amount would exceed either. A job that
    already holds a reservation keeps it (``Hold.adopted``), so this is safe to repeat."""
    periods = Periods.at(time.time() if now is None else now)
    reply = await _script(redis, "reserve")(
        keys=[GatewayKeys(namespace).budget(tenant)],
        args=[
            job_id,
            max(0, int(amount_nanos)),
            _limit_arg(limits.daily_nanos),
            _limit_arg(limits.monthly_nanos),
            periods.day,
            periods.month,
        ],
    )
    code = int(reply[0])
    if code == 0:
        kind: LimitKind = "daily" if as_text(reply[1]) == "daily" else "monthly"
        raise BudgetExceeded(kind, int(as_text(reply[2])), periods.resets_at(kind))
    return Hold(int(reply[1]), adopted=code == 2)


async def hold(
    redis: Any,
    namespace: str,
    tenant: str,
    job_id: str,
    amount_nanos: int,
    limits: Limits,
    now: float | None = None,
) -> Hold:
    """What a worker calls before each attempt: adopts the job's open reservation (the one the
    gateway made at enqueue, or an earlier attempt's left by a crash), else reserves
    ``amount_nanos`` anew exactly as :func:`reserve` (raising :class:`BudgetExceeded`)."""
    return await reserve(redis, namespace, tenant, job_id, amount_nanos, limits, now)


async def charge(
    redis: Any,
    namespace: str,
    tenant: str,
    job_id: str,
    cost_nanos: int,
    now: float | None = None,
    lost_attempt: int | None = None,
) -> bool:
    """Replaces the job's open reservation with ``cost_nanos`` on the spend of the current UTC
    day and month. Idempotent: False (nothing written) when the job holds no reservation.

    ``lost_attempt``: charges that attempt of the job, lost with its worker, instead: its cost
    is added to the spend and the reservation stays open for the job's next attempt. False when
    it was charged already (remembered while the reservation is open: see budget_charge.lua)."""
    periods = Periods.at(time.time() if now is None else now)
    lost = "" if lost_attempt is None else str(int(lost_attempt))
    reply = await _script(redis, "charge")(
        keys=[GatewayKeys(namespace).budget(tenant)],
        args=[job_id, max(0, int(cost_nanos)), periods.day, periods.month, lost],
    )
    return bool(int(reply[0]))


async def release(
    redis: Any, namespace: str, tenant: str, job_id: str, now: float | None = None
) -> bool:
    """Gives the job's reservation back unspent (a charge of 0); False when there was none."""
    return await charge(redis, namespace, tenant, job_id, 0, now)


# -- the sweep ------------------------------------------------------------------------------------


def _reservations(raw: Mapping[Any, Any]) -> dict[str, int]:
    """job id -> when it was reserved (ms, Redis clock)."""
    found: dict[str, int] = {}
    for key, value in raw.items():
        field = as_text(key)
        if field.startswith(RESERVATION_PREFIX):
            _, _, at_ms = as_text(value).partition(":")
            found[field.removeprefix(RESERVATION_PREFIX)] = int(at_ms or 0)
    return found


async def _finished(
    queues: Mapping[str, Queue], job_ids: Iterable[str], older_than_ms: float
) -> list[str]:
    """The ids among ``job_ids`` whose job finished before ``older_than_ms`` (Redis clock),
    or that no queue holds (a finished job whose record expired, an enqueue that failed)."""
    ids = list(job_ids)
    if not ids or not queues:
        return []
    # A job id names its provider ("<provider>.<hex>"); any other id is looked for in every
    # queue (jobs enqueued by other means than the gateway).
    wanted: dict[str, list[str]] = {name: [] for name in queues}
    for job_id in ids:
        provider = job_id.rpartition(".")[0]
        for name in [provider] if provider in queues else queues:
            wanted[name].append(job_id)
    pairs = [(queues[name], job_id) for name, mine in wanted.items() for job_id in mine]
    state: dict[str, JobState | None] = dict.fromkeys(ids)
    for (_, job_id), found in zip(pairs, await job_states(pairs), strict=True):
        if found is not None:
            state[job_id] = found
    done = []
    for job_id, found in state.items():
        if found is None:
            done.append(job_id)  # checked against the reservation's age by the caller
            continue
        finished_ms = (found.finished_at or 0) * 1000
        if found.status in TERMINAL and finished_ms < older_than_ms:
            done.append(job_id)
    return done


async def sweep(
    redis: Any,
    namespace: str,
    queues_by_name: Mapping[str, Queue],
    older_than: float,
    tenants: Iterable[str] = (),
) -> int:
    """Releases (at no cost) the reservations of jobs that finished, or vanished, more than
    ``older_than`` seconds ago without being charged: a worker killed between an attempt and
    its charge, a job cancelled or failed by other means than a worker. Sweeps the accounts
    of ``tenants`` (those with a budget in the settings) and of every tenant an operator gave
    limits. Returns how many it released. ``older_than`` must exceed the longest a worker
    takes from the end of an attempt to its charge, or a late charge would find nothing."""
    if not queues_by_name:
        return 0
    now_ms = (await next(iter(queues_by_name.values())).server_time()) * 1000
    cutoff = now_ms - older_than * 1000
    released = 0
    for tenant in sorted(set(tenants) | await known_tenants(redis, namespace)):
        raw = await redis.hgetall(GatewayKeys(namespace).budget(tenant))
        reservations = _reservations(raw)
        old = [job_id for job_id, at_ms in reservations.items() if at_ms < cutoff]
        for job_id in await _finished(queues_by_name, old, cutoff):
            if await release(redis, namespace, tenant, job_id):
                released += 1
    return released

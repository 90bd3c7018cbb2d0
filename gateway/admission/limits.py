"""Per-tenant limits: an enqueue rate (token bucket, in Redis), a daily quota of accepted
generations (one counter per tenant per UTC day, in Redis) and a cap on jobs in flight.

All are shared by every gateway process, since they live in Redis. The in-flight set holds the
tenant's unfinished job ids; it is pruned of finished jobs only when it looks full, so the
common path costs one round trip.

Each limit here is one step of its own (a round trip, or one for a batch's items): what a
Cluster and the batch route take. A single POST on one server takes them all in one script with
the claim and the replay lookup (:mod:`gateway.admission.admit`); both read the same keys and
run the same Lua (``gateway/lua/_limits_lib.lua``).

A replay (an Idempotency-Key already bound to a job) is never charged, even when it races the
original: the queue binds a key only once its job is enqueued, so 50 simultaneous requests
with one key would all find it unbound and all pay before 49 learnt they were replays (those
past the burst refused 429 for a limit the original had paid). :meth:`Limiter.claim` makes
the acceptance of one key one request at a time: the holder of its claim checks the binding
and only then charges; the others wait for the claim and find the job bound.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from genq import TERMINAL, Queue, as_text, job_states, run_streamed

from ..errors import Conflict, NotFound, RateLimited
from ..queues import Queues
from ..settings import Settings
from .lua_source import script_text

IN_FLIGHT_KEY_TTL = 86_400
RESERVATION_GRACE_MS = 60_000
"""A reserved id without a job record is an enqueue still under way, unless it is this old."""
PRUNE_BATCH = 1000
"""In-flight members whose status one pipeline reads when the set is pruned."""
CLAIM_TTL_MS = 10_000
"""An Idempotency-Key's claim outlives a gateway that died holding it by at most this long."""
CLAIM_WAIT = 15.0
"""Seconds a request waits for another one accepting the same key before a 409."""
CLAIM_POLL = (0.002, 0.05)
"""First and longest pause between two tries at a claim (doubling, jittered)."""
DAY = 86_400
DAILY_KEY_MARGIN = 3_600
"""A day's count outlives its day by this long (gateway clocks a little apart agree on it)."""


def utc_day(now: float) -> tuple[str, float]:
    """The UTC day ``now`` (epoch seconds) falls in, as ``YYYY-MM-DD``, and when it ends."""
    start = now - now % DAY
    return time.strftime("%Y-%m-%d", time.gmtime(start)), start + DAY


class Limiter:
    def __init__(self, redis: Any, settings: Settings, queues: Queues) -> None:
        self.redis = redis
        self.settings = settings
        self.queues = queues
        self._token_bucket = redis.register_script(script_text("token_bucket"))
        self.release_claim_script = redis.register_script(script_text("release_claim"))
        self._daily_quota = redis.register_script(script_text("daily_quota"))

    @asynccontextmanager
    async def claim(self, scoped_key: str) -> AsyncIterator[None]:
        """Holds the acceptance of one (tenant-scoped) Idempotency-Key: inside, no other
        request with this key is being accepted, so a binding checked here stays true until
        this request enqueues or leaves. Raises :class:`Conflict` after ``CLAIM_WAIT``."""
        key = self.settings.keys.idempotency_claim(scoped_key)
        token = uuid.uuid4().hex
        await self._wait_for_claim(key, token)
        try:
            yield
        finally:
            await asyncio.shield(self.release_claim_script(keys=[key], args=[token]))

    @asynccontextmanager
    async def claim_many(self, scoped_keys: Sequence[str]) -> AsyncIterator[dict[str, Conflict]]:
        """:meth:`claim` for many distinct keys: the free ones are claimed in one round trip,
        each busy one waited for as :meth:`claim` waits. Yields the keys not claimed, each with
        its :class:`Conflict`; every other key is held inside."""
        token = uuid.uuid4().hex
        names = [self.settings.keys.idempotency_claim(key) for key in scoped_keys]
        held: list[str] = []
        refused: dict[str, Conflict] = {}
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for name in names:
                    pipe.set(name, token, nx=True, px=CLAIM_TTL_MS)
                taken = await pipe.execute()
            for scoped_key, name, ok in zip(scoped_keys, names, taken, strict=True):
                if not ok:
                    try:
                        await self._wait_for_claim(name, token)
                    except Conflict as exc:
                        refused[scoped_key] = exc
                        continue
                held.append(name)
            yield refused
        finally:
            if held:
                calls = [([name], [token]) for name in held]
                await asyncio.shield(run_streamed(self.redis, self.release_claim_script, calls))

    async def _wait_for_claim(self, key: str, token: str) -> None:
        deadline = time.monotonic() + CLAIM_WAIT
        pause, longest = CLAIM_POLL
        while not await self.redis.set(key, token, nx=True, px=CLAIM_TTL_MS):
            if time.monotonic() > deadline:
                raise Conflict("another request with this Idempotency-Key is still being accepted")
            await asyncio.sleep(pause * random.uniform(0.5, 1.0))
            pause = min(pause * 2, longest)

    async def take_enqueue_token(self, tenant: str) -> None:
        (refusal,) = await self.take_enqueue_tokens(tenant, 1)
        if refusal is not None:
            raise refusal

    async def take_enqueue_tokens(self, tenant: str, count: int) -> list[RateLimited | None]:
        """One token each for ``count`` items, taken in order in one round trip (as ``count``
        calls of :meth:`take_enqueue_token`): None for an item that got one, else its
        refusal."""
        rate, burst, _ = self.settings.limits_for(tenant)
        key = self.settings.keys.rate(tenant)
        replies = await run_streamed(
            self.redis, self._token_bucket, [([key], [rate, burst])] * count
        )
        return [
            None if int(allowed) else self.rate_refusal(tenant, int(wait_ms))
            for allowed, wait_ms in replies
        ]

    def rate_refusal(self, tenant: str, wait_ms: int) -> RateLimited:
        rate, burst, _ = self.settings.limits_for(tenant)
        return RateLimited(
            f"enqueue rate limit reached ({rate:g}/s, bursts of {burst}); retry later",
            retry_after=wait_ms / 1000,
        )

    async def charge_daily(self, tenant: str) -> str | None:
        """Counts one accepted generation against the tenant's quota for today (UTC, by this
        gateway's clock), or raises RateLimited until the next UTC midnight. Returns the key
        charged, for :meth:`refund_daily`; None when the tenant has no quota."""
        (charged,) = await self.charge_daily_many(tenant, 1)
        if isinstance(charged, RateLimited):
            raise charged
        return charged

    async def charge_daily_many(self, tenant: str, count: int) -> list[str | RateLimited | None]:
        """:meth:`charge_daily` for ``count`` items, in order in one round trip: each item's
        key charged (None: no quota), or its refusal."""
        quota = self.settings.daily_quota_for(tenant)
        if not quota:
            return [None] * count
        now = time.time()
        day, day_ends = utc_day(now)
        key = self.settings.keys.daily_count(tenant, day)
        call = ([key], [quota, int(day_ends) + DAILY_KEY_MARGIN])
        replies = await run_streamed(self.redis, self._daily_quota, [call] * count)
        return [key if int(charged) else self.daily_refusal(tenant, now) for charged, _ in replies]

    def daily_refusal(self, tenant: str, now: float) -> RateLimited:
        quota = self.settings.daily_quota_for(tenant)
        return RateLimited(
            f"daily quota reached ({quota} generations per UTC day); it resets at 00:00 UTC",
            retry_after=utc_day(now)[1] - now,
        )

    async def refund_daily(self, key: str | None, count: int = 1) -> None:
        """Gives back ``count`` charges of :meth:`charge_daily` on ``key`` (generations that
        were not accepted)."""
        if key is not None:
            await self.redis.decrby(key, count)

    async def admit_in_flight(self, tenant: str, job_id: str) -> None:
        """Counts ``job_id`` against the tenant's in-flight cap, or raises RateLimited."""
        if not await self.admit_in_flight_many(tenant, [job_id]):
            raise self.in_flight_refusal(tenant)

    async def admit_in_flight_many(self, tenant: str, job_ids: Sequence[str]) -> int:
        """:meth:`admit_in_flight` for many jobs in order, in one round trip unless the cap is
        reached: returns how many of them (the first ones) have a place; the others were
        refused (and hold none), as one call per job in order would have left them."""
        _, _, cap = self.settings.limits_for(tenant)
        key = self.settings.keys.in_flight(tenant)
        now_ms = int(time.time() * 1000)
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.zadd(key, {job_id: now_ms})
                pipe.zcard(key)
            pipe.expire(key, IN_FLIGHT_KEY_TTL)
            replies = await pipe.execute()
        counts = replies[1:-1:2]
        if not counts or counts[-1] <= cap:
            return len(job_ids)
        # Past the cap: once the finished jobs are pruned, the first ones that fit keep their
        # place (this request's jobs are not finished, so the prune keeps them all).
        others = await self.prune(key) - len(job_ids)
        fit = min(len(job_ids), max(0, cap - others))
        if fit < len(job_ids):
            await self.redis.zrem(key, *job_ids[fit:])
        return fit

    def in_flight_refusal(self, tenant: str) -> RateLimited:
        _, _, cap = self.settings.limits_for(tenant)
        return RateLimited(
            f"{cap} generations already in flight for this tenant; wait for one to finish",
            retry_after=1,
        )

    async def release_in_flight(self, tenant: str, job_id: str) -> None:
        await self.redis.zrem(self.settings.keys.in_flight(tenant), job_id)

    async def prune(self, key: str) -> int:
        """Drops the finished jobs from an in-flight set: one pipelined status read per
        ``PRUNE_BATCH`` members, so a full set of ten thousand costs ten round trips."""
        members = await self.redis.zrange(key, 0, -1, withscores=True)
        now_ms = time.time() * 1000
        finished: list[str] = []
        for start in range(0, len(members), PRUNE_BATCH):
            located: list[tuple[Queue, str]] = []
            reserved: list[float] = []
            for member, reserved_ms in members[start : start + PRUNE_BATCH]:
                job_id = as_text(member)
                try:
                    _, queue = self.queues.locate(job_id)
                except NotFound:
                    finished.append(job_id)
                    continue
                located.append((queue, job_id))
                reserved.append(reserved_ms)
            states = await job_states(located)
            for (_, job_id), reserved_ms, state in zip(located, reserved, states, strict=True):
                if state is None:
                    if now_ms - reserved_ms > RESERVATION_GRACE_MS:
                        finished.append(job_id)
                elif state.status in TERMINAL:
                    finished.append(job_id)
        if finished:
            await self.redis.zrem(key, *finished)
        return int(await self.redis.zcard(key))

"""A generation admitted and enqueued in one round trip, on a single Redis server.

``gateway/lua/admit.lua`` does in one step what :mod:`gateway.admission.limits` and
:mod:`gateway.admission.budgets` do one round trip each: the replay lookup (the key's binding in
every provider queue, which genq adds to the script's keys), the key's acceptance claim, the
tenant's rate, daily quota, in-flight cap and budget reservation. It takes all of them or none,
so a refusal has nothing to give back. The enqueue and the claim's release are written right
behind it on the same connection (``genq.enqueue_admitted``): the enqueue goes ahead only when
the script admitted the job, which it shows by the job's place in the tenant's in-flight set.
A refusal, a replay or a busy key costs the same one round trip, with nothing enqueued.

The price a reservation is computed at is the one workers published: this process keeps the
last one it saw per model and the script compares it with the published one, answering the new
one when it changed (then the amount is computed again), so a price is never stale.

On a Cluster the gateway's keys and the queues' are in other slots: there each step is a round
trip of its own (``Admission.at_once`` is False and ``submit`` takes the stepwise path).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster

import genq
from genq import Enqueued, EnqueueItem, Job, Queue, ScriptCall, as_text
from genq_contract.budget_limits import BudgetExceeded, LimitKind, configured_limits
from genq_contract.payload import GenerationPayload
from genq_contract.spend import Price, max_cost_nanos, prices_key
from genq_contract.webhooks import WebhookKeys
from genq_services import budget

from ..errors import Conflict, GatewayError
from ..metrics import Metrics
from ..settings import Settings
from .budgets import no_price, over_budget
from .limits import (
    CLAIM_POLL,
    CLAIM_TTL_MS,
    CLAIM_WAIT,
    DAILY_KEY_MARGIN,
    DAY,
    IN_FLIGHT_KEY_TTL,
    Limiter,
    utc_day,
)
from .lua_source import script_text


@dataclass(frozen=True)
class Claim:
    """A request's hold on the acceptance of one tenant-scoped Idempotency-Key."""

    scoped_key: str
    key: str
    token: str


@dataclass(frozen=True)
class Admitted:
    """An admitted generation's enqueue, and what admitting it took: the daily count charged
    (its key) and whether a budget reservation was made."""

    enqueued: Enqueued
    daily_key: str | None
    reserved: bool
    job: Job | None = None
    """The job as enqueued, when it was asked for (``read_back``) and this request made it."""


@dataclass(frozen=True)
class Bound:
    """The key is bound already (a replay): the job, in which provider's queue."""

    provider: str
    queue: Queue
    job_id: str


class Admission:
    def __init__(self, redis: Any, settings: Settings, limiter: Limiter, metrics: Metrics) -> None:
        self.redis = redis
        self.settings = settings
        self.limiter = limiter
        self.metrics = metrics
        self.at_once = not isinstance(redis, RedisCluster)
        self._script = redis.register_script(script_text("admit", budget.LIBRARY))
        self._webhooks = WebhookKeys(settings.queue_namespace)
        self._day = (0.0, "", 0.0, budget.Periods.at(0))
        self._prices: dict[str, tuple[str, Price]] = {}
        """model -> the price last published (its JSON, and read), as this process saw it."""

    def claim(self, scoped_key: str, token: str) -> Claim:
        """The claim of ``scoped_key`` this request would hold: ``token`` unique to it (the
        new job's id)."""
        return Claim(scoped_key, self.settings.keys.idempotency_claim(scoped_key), token)

    async def admit_and_enqueue(
        self,
        payload: GenerationPayload,
        item: EnqueueItem,
        queue: Queue,
        queues: Sequence[tuple[str, Queue]],
        claim: Claim | None,
        note: str = "",
        read_back: bool = False,
    ) -> Admitted | Bound:
        """Admits the generation ``item`` (its ``job_id`` set) of ``payload`` for its tenant,
        holding ``claim`` (a keyed request) and adding the webhook ``note`` (a
        ``PendingGeneration`` member: ``genq_services.webhook_endpoints.note_pending``), and
        enqueues it into ``queue``, releasing the claim; or finds the key bound in one of
        ``queues``. With ``read_back`` the job's record is read in the same round trip
        (``Admitted.job``). Raises the refusal (429, 402, 503; 409 when another request holds
        the claim past ``CLAIM_WAIT``), and what the enqueue raises."""
        tenant = payload.tenant or ""
        job_id = str(item.job_id)
        release: ScriptCall | None = None
        if claim is not None:
            release = (self.limiter.release_claim_script, [claim.key], [claim.token])
        bound_in = [queue for _, queue in queues] if claim is not None else []
        deadline = time.monotonic() + CLAIM_WAIT
        pause, longest = CLAIM_POLL
        pruned = False
        while True:
            now = time.time()
            keys, args, daily_key = self._call(payload, job_id, claim, now)
            args.append(note)
            admitted_in = keys[3]  # the in-flight set: the script adds the job to it on "ok"
            sent = await genq.enqueue_admitted(
                queue, item, (self._script, keys, args), admitted_in, release, bound_in, read_back
            )
            reply = sent.admission
            kind = as_text(reply[0])
            if kind == "ok":
                if sent.enqueued is None:
                    raise RuntimeError(f"{job_id}: admitted, but the enqueue did not see it")
                daily = daily_key if int(reply[2]) else None
                return Admitted(sent.enqueued, daily, bool(int(reply[1])), sent.job)
            if kind == "replay":
                provider, bound_queue = queues[int(reply[1]) - 1]
                return Bound(provider, bound_queue, as_text(reply[2]))
            if kind == "busy":
                if time.monotonic() > deadline:
                    raise Conflict(
                        "another request with this Idempotency-Key is still being accepted"
                    )
                await asyncio.sleep(pause * random.uniform(0.5, 1.0))
                pause = min(pause * 2, longest)
            elif kind == "price":
                published = as_text(reply[1])
                self._prices[payload.model] = published, Price.from_json(json.loads(published))
            elif kind == "in_flight" and not pruned:
                # The set looks full: once the finished jobs are pruned, there may be room.
                await self.limiter.prune(self.settings.keys.in_flight(tenant))
                pruned = True
            else:
                raise self._refusal(kind, reply, payload, tenant, now)

    def _call(
        self, payload: GenerationPayload, job_id: str, claim: Claim | None, now: float
    ) -> tuple[list[str], list[Any], str]:
        """``admit.lua``'s keys (without the bindings) and arguments; the daily count's key."""
        settings = self.settings
        tenant = payload.tenant or ""
        keys = settings.keys
        rate, burst, cap = settings.limits_for(tenant)
        day, day_ends, periods = self._today(now)
        limits = configured_limits(settings, tenant)
        price, amount = "", 0
        if payload.model in self._prices:
            price, read = self._prices[payload.model]
            amount = max_cost_nanos(payload, read)
        rate_key, daily_key = keys.rate(tenant), keys.daily_count(tenant, day)
        return (
            [
                claim.key if claim else rate_key,  # unused without a key: any key of ours
                rate_key,
                daily_key,
                keys.in_flight(tenant),
                keys.budget(tenant),
                prices_key(settings.queue_namespace),
                self._webhooks.tenant(tenant),
                self._webhooks.pending,
            ],
            [
                claim.token if claim else "",
                CLAIM_TTL_MS,
                rate,
                burst,
                settings.daily_quota_for(tenant),
                int(day_ends) + DAILY_KEY_MARGIN,
                cap,
                job_id,
                _nanos(limits.daily_nanos if limits else None),
                _nanos(limits.monthly_nanos if limits else None),
                periods.day,
                periods.month,
                payload.model,
                price,
                amount,
                IN_FLIGHT_KEY_TTL,
            ],
            daily_key,
        )

    def _today(self, now: float) -> tuple[str, float, budget.Periods]:
        """The UTC day of ``now``, when it ends, and its budget periods (made once a day)."""
        if not self._day[0] <= now < self._day[2]:
            day, ends = utc_day(now)
            self._day = (ends - DAY, day, ends, budget.Periods.at(now))
        _, day, ends, periods = self._day
        return day, ends, periods

    def _refusal(
        self, kind: str, reply: Sequence[Any], payload: GenerationPayload, tenant: str, now: float
    ) -> GatewayError:
        limiter = self.limiter
        if kind == "no_price":
            return no_price(payload.model)
        label = {"rate": "rate", "daily": "daily_quota", "in_flight": "in_flight"}.get(kind)
        if label is None:  # the budget's: {'budget', kind, remaining}
            self.metrics.refused.labels("budget").inc()
            limit: LimitKind = "daily" if as_text(reply[1]) == "daily" else "monthly"
            periods = budget.Periods.at(now)
            exceeded = BudgetExceeded(limit, int(as_text(reply[2])), periods.resets_at(limit))
            _, price = self._prices[payload.model]
            return over_budget(max_cost_nanos(payload, price), exceeded)
        self.metrics.refused.labels(label).inc()
        if kind == "rate":
            return limiter.rate_refusal(tenant, int(reply[1]))
        if kind == "daily":
            return limiter.daily_refusal(tenant, now)
        return limiter.in_flight_refusal(tenant)

    @staticmethod
    async def enqueue(queue: Queue, item: EnqueueItem) -> Enqueued:
        """Enqueues ``item`` admitted step by step (a Cluster's path)."""
        return await queue.enqueue(
            item.payload,
            idempotency_key=item.idempotency_key,
            priority=item.priority,
            delay=item.delay,
            job_id=item.job_id,
            max_attempts=item.max_attempts,
            tenant=item.tenant,
        )

    async def release(self, claim: Claim) -> None:
        await self.limiter.release_claim_script(keys=[claim.key], args=[claim.token])


def _nanos(limit: int | None) -> int:
    return budget.NO_LIMIT if limit is None else limit

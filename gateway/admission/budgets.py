"""Budgets on the gateway's side: reserve at enqueue, release what never ran, sweep.

A tenant with a budget (``GENQ_TENANT_BUDGETS``, or limits an operator set) has each accepted
generation's maximum cost reserved against it before the job is enqueued: one Lua script on the
tenant's account (``genq_services.budget``), so concurrent requests never reserve past the limit
together. The maximum is the prompt's token bound plus ``max_tokens`` (or the documented
default) at the model's price as the workers published it; a model with no published price yet
is refused (503) for budgeted tenants only. The workers adopt that reservation and replace it
with what each attempt cost; the gateway gives it back when the enqueue fails, when it turns
out to be a replay, and when a cancel stops a job before any attempt ran. The sweep releases
what a killed worker never charged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from genq import Job, JobStatus, Queue, cancel_and_wait, raise_if_cancelled
from genq_contract.budget_limits import BudgetExceeded, Limits
from genq_contract.money import nanos_to_usd
from genq_contract.payload import GenerationPayload, payload_fields
from genq_contract.spend import Price, max_cost_nanos
from genq_services import budget
from genq_services.prices import read_prices

from ..errors import PaymentRequired, Unavailable
from ..settings import Settings

log = logging.getLogger("gateway.budgets")


@dataclass(frozen=True)
class Terms:
    """What reserving against a tenant's budget reads first: its limits and the prices of
    the models asked for (read once for a whole batch)."""

    limits: Limits
    prices: dict[str, Price]


async def terms_for(
    redis: Any, settings: Settings, tenant: str, models: Iterable[str]
) -> Terms | None:
    """The tenant's budget terms for ``models``; None when the tenant has no budget."""
    limits = await budget.limits_for(redis, settings, tenant)
    if limits is None:
        return None
    return Terms(limits, await read_prices(redis, settings.queue_namespace, sorted(set(models))))


async def reserve(
    redis: Any, settings: Settings, job_id: str, payload: GenerationPayload, terms: Terms | None
) -> bool:
    """Reserves the generation's maximum cost for its tenant on its ``terms`` (read by
    :func:`terms_for`); False when the tenant has no budget (nothing reserved). Raises
    :class:`PaymentRequired` past the budget and :class:`Unavailable` when no worker has
    published the model's price yet."""
    tenant = payload.tenant or ""
    if terms is None:
        return False
    price = terms.prices.get(payload.model)
    if price is None:
        raise no_price(payload.model)
    amount = max_cost_nanos(payload, price)
    try:
        await budget.reserve(redis, settings.queue_namespace, tenant, job_id, amount, terms.limits)
    except BudgetExceeded as exc:
        raise over_budget(amount, exc) from None
    return True


def no_price(model: str) -> Unavailable:
    """The refusal of a budgeted tenant's generation whose model has no published price."""
    return Unavailable(
        f"no price is known yet for model {model!r} (workers publish the prices "
        "of the models they serve when they start), so a budget cannot be checked: retry "
        "once a worker for it runs"
    )


def over_budget(amount_nanos: int, exc: BudgetExceeded) -> PaymentRequired:
    """The 402 of a generation whose maximum cost ``amount_nanos`` did not fit."""
    return PaymentRequired(
        f"this generation may cost up to ${nanos_to_usd(amount_nanos):.6f}, more than "
        f"the ${exc.remaining_usd:.6f} left of the tenant's {exc.limit} budget; it resets "
        f"at {exc.resets_at.isoformat()}",
        limit=exc.limit,
        remaining_usd=exc.remaining_usd,
        resets_at=exc.resets_at.isoformat(),
    )


async def release(redis: Any, settings: Settings, tenant: str, job_id: str) -> None:
    await budget.release(redis, settings.queue_namespace, tenant, job_id)


async def release_if_never_ran(redis: Any, settings: Settings, job: Job | None) -> None:
    """Gives back the reservation of a job a cancel stopped before any attempt: no worker
    holds it, so nobody else will. (A job that ran is charged by its worker, or swept.)"""
    if job is None or job.status is not JobStatus.CANCELLED or job.attempt > 0:
        return
    tenant = payload_fields(job.payload).get("tenant")
    if isinstance(tenant, str):
        await release(redis, settings, tenant, job.id)


class BudgetSweep:
    """Every ``interval`` seconds, :func:`genq_services.budget.sweep` over every provider
    queue: reservations of jobs finished (or gone) for ``grace`` seconds are released."""

    def __init__(
        self, redis: Any, settings: Settings, queues: dict[str, Queue], interval: float
    ) -> None:
        self.redis = redis
        self.settings = settings
        self.queues = queues
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._sweep_forever(), name="budget sweep")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)

    async def sweep(self) -> int:
        return await budget.sweep(
            self.redis,
            self.settings.queue_namespace,
            self.queues,
            self.settings.budget_sweep_grace,
            tenants=self.settings.tenant_budgets,
        )

    async def _sweep_forever(self) -> None:
        while True:
            try:
                released = await self.sweep()
                if released:
                    log.info("budget sweep released %d reservations", released)
            except (RedisError, OSError) as exc:
                log.warning("budget sweep failed: %s", type(exc).__name__)
            raise_if_cancelled()
            await asyncio.sleep(self.interval)

"""Accepting a generation: validation against routing, idempotency, tenant limits, enqueue.

Idempotency keys are scoped to the tenant (``<tenant>:<key>``) and stored by the queue, so their
lifetime is the queue's: bound while the job lives and for ``result_ttl`` after it completed,
released when it failed or was cancelled. A replay with the same body gets the same job; the
same key with another body (another model included, which is another provider's queue) is
refused with 422. A replay is answered before any limit (rate, daily quota, in flight) is
charged, even one racing its original: the key's acceptance is claimed first
(:meth:`gateway.limits.Limiter.claim`). A daily charge is given back when the enqueue fails.
A tenant with a budget has the generation's maximum cost reserved last, just before the enqueue
(402 past the budget: ``gateway.budgets``), and given back with the rest when the enqueue
fails or turns out to be a replay.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

from fastapi import Response

from genq import Job, Queue, ReplicationTimeoutError
from genq.events import text
from genq_contract.payload import GenerationPayload, payload_fields
from genq_contract.routing import RoutingError

from . import budgets
from .auth import Principal
from .deps import Gateway, tenant_of
from .errors import PaymentRequired, RateLimited, Unprocessable
from .records import events_url
from .schemas import GenerationCreated, GenerationRequest


@dataclass(frozen=True)
class Submitted:
    id: str
    status: str
    deduplicated: bool
    key_id: str = ""
    """The id of the key that asked (its watch token is bound to it)."""


def created(gateway: Gateway, tenant: str, submitted: Submitted) -> GenerationCreated:
    """The answer to an accepted generation, with a watch token for ``tenant``."""
    token, expires = gateway.tokens.issue(tenant, submitted.id, key_id=submitted.key_id)
    return GenerationCreated(
        id=submitted.id,
        status=submitted.status,
        deduplicated=submitted.deduplicated,
        events_url=events_url(submitted.id),
        result_url=f"/v1/generations/{submitted.id}/result",
        watch_token=token,
        watch_token_expires_at=expires,
    )


def answer_created(
    gateway: Gateway, tenant: str, submitted: Submitted, response: Response
) -> GenerationCreated:
    """:func:`created` for a single POST: 202, or 200 for a replay, and its Location."""
    if submitted.deduplicated:
        response.status_code = 200
    response.headers["Location"] = f"/v1/generations/{submitted.id}"
    return created(gateway, tenant, submitted)


async def submit(
    gateway: Gateway, principal: Principal, body: GenerationRequest, idempotency_key: str | None
) -> Submitted:
    if not idempotency_key:
        return await _submit(gateway, principal, body, None)
    async with gateway.limiter.claim(f"{principal.tenant}:{idempotency_key}"):
        return await _submit(gateway, principal, body, idempotency_key)


async def _submit(
    gateway: Gateway, principal: Principal, body: GenerationRequest, idempotency_key: str | None
) -> Submitted:
    settings = gateway.settings
    if body.delay_ms > settings.max_delay_ms:
        raise Unprocessable(f"delay_ms must be at most {settings.max_delay_ms}")
    if body.max_attempts is not None and body.max_attempts > settings.max_attempts_ceiling:
        raise Unprocessable(f"max_attempts must be at most {settings.max_attempts_ceiling}")
    try:
        provider, queue = gateway.queues.for_model(body.model)
        gateway.queues.routing.check_params(body.model, body.params)
        if body.fallbacks is not None:
            gateway.queues.routing.check_fallbacks(body.model, body.fallbacks, body.params)
    except RoutingError as exc:
        raise Unprocessable(str(exc)) from exc
    delay_ms = body.delay_ms
    if body.run_at is not None:
        until_ms = await _until(queue, body.run_at)
        if until_ms > settings.max_delay_ms:
            raise Unprocessable(f"run_at must be at most {settings.max_delay_ms} ms from now")
        delay_ms = math.ceil(until_ms)  # never before the instant asked for

    tenant = principal.tenant
    fingerprint = body.fingerprint()
    scoped_key = f"{tenant}:{idempotency_key}" if idempotency_key else None
    if scoped_key:
        bound = await _bound_job(gateway, scoped_key)
        if bound is not None:
            return _replay(bound, principal, fingerprint, gateway, queue_name=provider)

    job_id = gateway.queues.new_job_id(provider)
    try:
        await gateway.limiter.take_enqueue_token(tenant)
    except RateLimited:
        gateway.metrics.refused.labels("rate").inc()
        raise
    try:
        charged = await gateway.limiter.charge_daily(tenant)
    except RateLimited:
        gateway.metrics.refused.labels("daily_quota").inc()
        raise
    try:
        await gateway.limiter.hold_slot(tenant, job_id)
    except RateLimited:
        await gateway.limiter.refund_daily(charged)
        gateway.metrics.refused.labels("in_flight").inc()
        raise
    payload = GenerationPayload(
        tenant=tenant,
        key_id=principal.key_id or None,  # who it runs as: workers check it is still allowed
        model=body.model,
        messages=body.conversation(),
        params=body.params,
        fallbacks=body.fallbacks,
        metadata=body.metadata,
        fingerprint=fingerprint,
    )
    try:
        reserved = await budgets.reserve(gateway.redis, settings, job_id, payload)
    except BaseException as exc:
        await asyncio.shield(_undo(gateway, tenant, job_id, charged))
        if isinstance(exc, PaymentRequired):
            gateway.metrics.refused.labels("budget").inc()
        raise
    try:
        enqueued = await queue.enqueue(
            payload.model_dump(),
            idempotency_key=scoped_key,
            priority=body.priority,
            delay=delay_ms / 1000,
            job_id=job_id,
            max_attempts=body.max_attempts,  # None: the queue's GENQ_MAX_ATTEMPTS
            tenant=tenant,  # waiting jobs are served round-robin across tenants
        )
    except BaseException as exc:
        # Not confirmed by the replicas, the job was still written: it keeps what it took
        # (the sweeps give it back if a failover loses it).
        if not isinstance(exc, ReplicationTimeoutError):
            await asyncio.shield(_undo(gateway, tenant, job_id, charged, reserved))
        raise
    if enqueued.deduplicated:  # a concurrent request with the same key won the race
        await _undo(gateway, tenant, job_id, charged, reserved)
        job = await queue.get(enqueued.id)
        if job is not None:
            return _replay(job, principal, fingerprint, gateway, queue_name=provider)
        raise Unprocessable("the generation bound to this Idempotency-Key just expired; retry")
    gateway.metrics.enqueued.labels(provider).inc()
    return Submitted(
        job_id, "scheduled" if delay_ms else "waiting", deduplicated=False, key_id=principal.key_id
    )


async def _undo(
    gateway: Gateway, tenant: str, job_id: str, charged: str | None, reserved: bool = False
) -> None:
    """Gives back what accepting ``job_id`` took: its in-flight slot, its daily charge and
    its budget reservation."""
    await gateway.limiter.release(tenant, job_id)
    await gateway.limiter.refund_daily(charged)
    if reserved:
        await budgets.release(gateway.redis, gateway.settings, tenant, job_id)


async def _until(queue: Queue, run_at: float) -> float:
    """Milliseconds from now to ``run_at`` on the Redis clock (the one the queue schedules
    by, so gateways with skewed clocks agree); 0 for an instant already past."""
    return max(0.0, (run_at - await queue.server_time()) * 1000)


async def _bound_job(gateway: Gateway, scoped_key: str) -> Job | None:
    """The live job an Idempotency-Key is bound to, in whichever provider queue holds it."""
    queues: list[Queue] = [queue for _, queue in gateway.queues]
    async with gateway.redis.pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.get(queue.keys.idempotency(scoped_key))
        bound_ids: list[Any] = await pipe.execute()
    for queue, job_id in zip(queues, bound_ids, strict=True):
        if job_id:
            job = await queue.get(text(job_id))
            if job is not None:
                return job
    return None


def _replay(
    job: Job, principal: Principal, fingerprint: str, gateway: Gateway, queue_name: str
) -> Submitted:
    fields = payload_fields(job.payload)
    if tenant_of(job) != principal.tenant or fields.get("fingerprint") != fingerprint:
        raise Unprocessable("this Idempotency-Key was already used with a different request body")
    gateway.metrics.deduplicated.labels(queue_name).inc()
    return Submitted(job.id, job.status.value, deduplicated=True, key_id=principal.key_id)

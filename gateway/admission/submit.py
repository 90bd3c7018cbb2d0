"""Accepting a generation: validation against routing, the Chat format (``genq_contract.chat``:
422 naming the field, the image cap) and the models' published capabilities (400), idempotency,
tenant limits, enqueue.

Idempotency keys are scoped to the tenant (``<tenant>:<key>``) and stored by the queue, so their
lifetime is the queue's: bound while the job lives and for ``result_ttl`` after it completed,
released when it failed or was cancelled. A replay with the same body gets the same job; the
same key with another body (another model included, which is another provider's queue) is
refused with 422. A replay is answered before any limit (rate, daily quota, in flight) is
charged, even one racing its original: the key's acceptance is claimed first
(:meth:`gateway.admission.limits.Limiter.claim`). A daily charge is given back when the enqueue
fails.
A tenant with a budget has the generation's maximum cost reserved last, just before the enqueue
(402 past the budget: ``gateway.admission.budgets``), and given back with the rest when the enqueue
fails or turns out to be a replay.
On a single Redis server all of that and the enqueue are one round trip
(:mod:`gateway.admission.admit`); on a Cluster each step is its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Response

import genq
from genq import Enqueued, EnqueueItem, Job, Queue, ReplicationTimeoutError
from genq_contract import chat
from genq_contract.payload import GenerationPayload, payload_fields
from genq_contract.routing import RoutingError
from genq_services import capabilities
from genq_services.webhook_endpoints import PendingGeneration

from ..access.auth import Principal
from ..access.owned_jobs import tenant_of
from ..errors import BadRequest, GatewayError, PaymentRequired, RateLimited, Unprocessable
from ..records import events_url
from ..state import Gateway
from ..telemetry import enqueue_span
from . import budgets
from .admit import Bound
from .schemas import GenerationCreated, GenerationRequest
from .webhook_note import WebhookNote, note_end


@dataclass(frozen=True)
class Submitted:
    id: str
    status: str
    deduplicated: bool
    key_id: str = ""
    """The id of the key that asked (its watch token is bound to it)."""
    job: Job | None = None
    """The job as enqueued, when the caller asked for it (``read_back``) and it came with the
    enqueue's round trip (single server); None otherwise: read it."""


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
    locate(submitted, response)
    return created(gateway, tenant, submitted)


def locate(submitted: Submitted, response: Response) -> None:
    """A single POST's status (200 for a replay, else the route's 202) and Location."""
    if submitted.deduplicated:
        response.status_code = 200
    response.headers["Location"] = f"/v1/generations/{submitted.id}"


async def submit(
    gateway: Gateway,
    principal: Principal,
    body: GenerationRequest,
    idempotency_key: str | None,
    notify: WebhookNote | None = None,
    read_back: bool = False,
) -> Submitted:
    """``notify``: the generation's end is a webhook event of this kind for its tenant's
    endpoints (noted before the enqueue: ``gateway.admission.webhook_note``). ``read_back``:
    the new job's record is read in the enqueue's round trip where that is one
    (``Submitted.job``), for a caller that answers with it."""
    if gateway.admission.at_once:
        return await _submit_at_once(gateway, principal, body, idempotency_key, notify, read_back)
    if not idempotency_key:
        return await _submit(gateway, principal, body, None, notify)
    async with gateway.limiter.claim(f"{principal.tenant}:{idempotency_key}"):
        return await _submit(gateway, principal, body, idempotency_key, notify)


async def _submit_at_once(
    gateway: Gateway,
    principal: Principal,
    body: GenerationRequest,
    idempotency_key: str | None,
    notify: WebhookNote | None,
    read_back: bool = False,
) -> Submitted:
    """:func:`submit` on a single server: the replay lookup, the key's claim, every limit, the
    budget, the enqueue and the claim's release in one round trip
    (:mod:`gateway.admission.admit`)."""
    route = await check_route(gateway, body)
    scoped_key = scoped(principal, idempotency_key) if idempotency_key else None
    pending = draft_job(gateway, principal, body, route, scoped_key)
    admission = gateway.admission
    claim = admission.claim(scoped_key, pending.job_id) if scoped_key else None
    note = ""
    if notify is not None:  # noted with the admission: before the enqueue, as note_end does
        object_id = notify.id_prefix + pending.job_id
        end = PendingGeneration(
            notify.kind, pending.tenant, pending.queue.prefix, pending.job_id, object_id
        )
        note = end.member()
    queues = list(gateway.queues)
    try:
        with enqueue_span(
            pending.queue.prefix, [(pending.job_id, pending.item.payload)], pending.tenant
        ):
            admitted = await admission.admit_and_enqueue(
                pending.payload, pending.item, pending.queue, queues, claim, note, read_back
            )
    except GatewayError:
        raise  # a refusal: nothing was taken, nothing enqueued
    except BaseException as exc:
        # Not confirmed by the replicas, the job was still written: it keeps what it took.
        # Otherwise whether the write admitted it is not known: its in-flight place and any
        # reservation are given back by the job's id (nothing, where none was taken).
        if not isinstance(exc, ReplicationTimeoutError):
            pending.reserved = True
            await asyncio.shield(undo(gateway, pending))
        if claim is not None:
            await asyncio.shield(admission.release(claim))
        raise
    if isinstance(admitted, Bound):
        job = await admitted.queue.get(admitted.job_id)
        if job is None:
            raise Unprocessable("the generation bound to this Idempotency-Key just expired; retry")
        return replay(job, principal, body.fingerprint(), gateway, admitted.provider)
    pending.charged, pending.reserved = admitted.daily_key, admitted.reserved
    submitted = await finish(gateway, principal, pending, admitted.enqueued)
    # Admitted.job is there only for a job this request made, which finish answers with.
    return dataclasses.replace(submitted, job=admitted.job) if admitted.job else submitted


async def _submit(
    gateway: Gateway,
    principal: Principal,
    body: GenerationRequest,
    idempotency_key: str | None,
    notify: WebhookNote | None = None,
) -> Submitted:
    prepared = await _prepare(gateway, principal, body, idempotency_key)
    if isinstance(prepared, Submitted):
        return prepared
    item = prepared.item
    if notify is not None:
        await note_end(gateway, notify, prepared.tenant, prepared.queue.prefix, prepared.job_id)
    try:
        with enqueue_span(prepared.queue.prefix, [(prepared.job_id, item.payload)], item.tenant):
            enqueued = await gateway.admission.enqueue(prepared.queue, item)
    except BaseException as exc:
        # Not confirmed by the replicas, the job was still written: it keeps what it took
        # (the sweeps give it back if a failover loses it).
        if not isinstance(exc, ReplicationTimeoutError):
            await asyncio.shield(undo(gateway, prepared))
        raise
    return await finish(gateway, principal, prepared, enqueued)


@dataclass(frozen=True)
class Route:
    """Where a checked request goes: its provider's queue, after how long."""

    provider: str
    queue: Queue
    delay_ms: int


@dataclass(eq=False)
class Pending:
    """A generation on its way to its enqueue: the job, and what accepting it took so far
    (given back by :func:`undo` when it is refused or the enqueue fails or is a replay)."""

    provider: str
    queue: Queue
    payload: GenerationPayload
    item: EnqueueItem
    charged: str | None = None
    """The daily count charged (:meth:`gateway.admission.limits.Limiter.charge_daily`), if any."""
    reserved: bool = False
    """Whether a budget reservation was made."""

    @property
    def job_id(self) -> str:
        return str(self.item.job_id)

    @property
    def tenant(self) -> str:
        return self.item.tenant


def scoped(principal: Principal, idempotency_key: str) -> str:
    return f"{principal.tenant}:{idempotency_key}"


async def _prepare(
    gateway: Gateway, principal: Principal, body: GenerationRequest, idempotency_key: str | None
) -> Pending | Submitted:
    """Everything before the enqueue, in order: checks, the replay lookup (a replay is
    answered here), then the limits and the budget. Raises what a single POST answers."""
    route = await check_route(gateway, body)
    scoped_key = scoped(principal, idempotency_key) if idempotency_key else None
    if scoped_key:
        bound = await _bound_job(gateway, scoped_key)
        if bound is not None:
            return replay(bound, principal, body.fingerprint(), gateway, route.provider)
    pending = draft_job(gateway, principal, body, route, scoped_key)
    try:
        await gateway.limiter.take_enqueue_token(pending.tenant)
    except RateLimited:
        gateway.metrics.refused.labels("rate").inc()
        raise
    await charge_one(gateway, pending)
    return pending


async def check_route(gateway: Gateway, body: GenerationRequest) -> Route:
    """The checks against the settings and the routing; 422 for a request they refuse."""
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
    messages = body.conversation()
    check_chat_messages(messages, settings.max_image_bytes)
    models = [body.model, *gateway.queues.routing.fallbacks_of(body.model, body.fallbacks)]
    await check_capabilities(gateway, models, body.params, messages)
    delay_ms = body.delay_ms
    if body.run_at is not None:
        until_ms = await _until(queue, body.run_at)
        if until_ms > settings.max_delay_ms:
            raise Unprocessable(f"run_at must be at most {settings.max_delay_ms} ms from now")
        delay_ms = math.ceil(until_ms)  # never before the instant asked for
    return Route(provider, queue, delay_ms)


def check_chat_messages(messages: list[dict[str, Any]], max_image_bytes: int) -> None:
    """422 naming the field for messages that do not fit the Chat format or carry more image
    bytes than ``max_image_bytes`` (:mod:`genq_contract.chat`)."""
    try:
        chat.check_messages(messages)
        chat.check_image_bytes(messages, max_image_bytes)
    except chat.ChatFormatError as exc:
        raise Unprocessable(str(exc)) from None


async def check_capabilities(
    gateway: Gateway, models: list[str], params: Mapping[str, Any], messages: list[dict[str, Any]]
) -> None:
    """400 naming the field when a request needs what one of ``models`` (the model, then its
    fallbacks) is known not to take: tools, images, a JSON schema (the capabilities workers
    publish). A plain text request reads nothing."""
    needs = capabilities.needed(params, messages)
    if not needs:
        return
    namespace = gateway.settings.queue_namespace
    known = await capabilities.read_capabilities(gateway.redis, namespace, models)
    for model in models:
        refused = capabilities.refusal(model, known[model], needs) if model in known else None
        if refused is not None:
            raise BadRequest(refused)


def draft_job(
    gateway: Gateway,
    principal: Principal,
    body: GenerationRequest,
    route: Route,
    scoped_key: str | None,
) -> Pending:
    tenant = principal.tenant
    payload = GenerationPayload(
        tenant=tenant,
        key_id=principal.key_id or None,  # who it runs as: workers check it is still allowed
        model=body.model,
        messages=body.conversation(),
        params=body.params,
        fallbacks=body.fallbacks,
        metadata=body.metadata,
        fingerprint=body.fingerprint(),
    )
    item = EnqueueItem(
        payload.model_dump(),
        idempotency_key=scoped_key,
        priority=body.priority,
        delay=route.delay_ms / 1000,
        job_id=gateway.queues.new_job_id(route.provider),
        max_attempts=body.max_attempts,  # None: the queue's GENQ_MAX_ATTEMPTS
        tenant=tenant,  # waiting jobs are served round-robin across tenants
    )
    return Pending(route.provider, route.queue, payload, item)


async def charge_one(gateway: Gateway, pending: Pending) -> None:
    """What a generation that got its rate token pays next, in order: its daily charge, its
    in-flight place, its budget reservation; raises the first refusal (having given back what
    the others took)."""
    tenant = pending.tenant
    try:
        pending.charged = await gateway.limiter.charge_daily(tenant)
    except RateLimited:
        gateway.metrics.refused.labels("daily_quota").inc()
        raise
    try:
        await gateway.limiter.admit_in_flight(tenant, pending.job_id)
    except RateLimited:
        await refund(gateway, [pending])
        gateway.metrics.refused.labels("in_flight").inc()
        raise
    await reserve_budget(gateway, pending, await budget_terms(gateway, [pending]))


async def budget_terms(gateway: Gateway, pending: list[Pending]) -> budgets.Terms | None:
    """The budget terms ``pending`` (one tenant's) reserve on; a failed read gives back what
    they took."""
    models = [item.payload.model for item in pending]
    try:
        return await budgets.terms_for(gateway.redis, gateway.settings, pending[0].tenant, models)
    except BaseException:
        await asyncio.shield(undo_all(gateway, pending))
        raise


async def reserve_budget(gateway: Gateway, pending: Pending, terms: budgets.Terms | None) -> None:
    try:
        pending.reserved = await budgets.reserve(
            gateway.redis, gateway.settings, pending.job_id, pending.payload, terms
        )
    except BaseException as exc:
        await asyncio.shield(undo(gateway, pending))
        if isinstance(exc, PaymentRequired):
            gateway.metrics.refused.labels("budget").inc()
        raise


async def refund(gateway: Gateway, pending: list[Pending]) -> None:
    """Gives back the daily charges of ``pending`` (all on one tenant's count of one day)."""
    charged = [item for item in pending if item.charged is not None]
    if charged:
        await gateway.limiter.refund_daily(charged[0].charged, len(charged))
    for item in charged:
        item.charged = None


async def finish(
    gateway: Gateway, principal: Principal, pending: Pending, enqueued: Enqueued
) -> Submitted:
    """The answer once ``pending`` was enqueued: its generation, or, when a concurrent request
    with the same key won the race, the replay of that one's (this one gives back all)."""
    if enqueued.deduplicated:
        await undo(gateway, pending)
        job = await pending.queue.get(enqueued.id)
        if job is not None:
            return replay(
                job, principal, pending.payload.fingerprint or "", gateway, pending.provider
            )
        raise Unprocessable("the generation bound to this Idempotency-Key just expired; retry")
    gateway.metrics.enqueued.labels(pending.provider).inc()
    status = "scheduled" if pending.item.delay else "waiting"
    return Submitted(pending.job_id, status, deduplicated=False, key_id=principal.key_id)


async def undo_all(gateway: Gateway, pending: Iterable[Pending]) -> None:
    """:func:`undo` for each of ``pending``, as far as it can: storage that failed a step
    can fail the give-back too, and each item still gets its own answer (what is left held is
    swept: in-flight places of jobs that never came, reservations of jobs that do not exist)."""
    with contextlib.suppress(Exception):
        for item in pending:
            await undo(gateway, item)


async def undo(gateway: Gateway, pending: Pending) -> None:
    """Gives back what accepting ``pending`` took: its in-flight place, its daily charge and
    its budget reservation."""
    await gateway.limiter.release_in_flight(pending.tenant, pending.job_id)
    await refund(gateway, [pending])
    if pending.reserved:
        await budgets.release(gateway.redis, gateway.settings, pending.tenant, pending.job_id)
        pending.reserved = False


async def _until(queue: Queue, run_at: float) -> float:
    """Milliseconds from now to ``run_at`` on the Redis clock (the one the queue schedules
    by, so gateways with skewed clocks agree); 0 for an instant already past."""
    return max(0.0, (run_at - await queue.server_time()) * 1000)


async def _bound_job(gateway: Gateway, scoped_key: str) -> Job | None:
    """The live job an Idempotency-Key is bound to, in whichever provider queue holds it."""
    return (await bound_jobs(gateway, [scoped_key])).get(scoped_key)


async def bound_jobs(gateway: Gateway, scoped_keys: list[str]) -> dict[str, Job]:
    """:func:`_bound_job` for many keys, looked up in one round trip: the keys bound."""
    return await genq.bound_jobs([queue for _, queue in gateway.queues], scoped_keys)


def replay(
    job: Job, principal: Principal, fingerprint: str, gateway: Gateway, queue_name: str
) -> Submitted:
    fields = payload_fields(job.payload)
    if tenant_of(job) != principal.tenant or fields.get("fingerprint") != fingerprint:
        raise Unprocessable("this Idempotency-Key was already used with a different request body")
    gateway.metrics.deduplicated.labels(queue_name).inc()
    return Submitted(job.id, job.status.value, deduplicated=True, key_id=principal.key_id)

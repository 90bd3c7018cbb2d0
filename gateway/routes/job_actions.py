"""Acting on jobs (admin role): cancel, retry or delete one generation, or many (given ids,
or all of a status and tenant: a snapshot of the ids matching when the request arrived).

Every action writes an audit entry (actor, action, queue, count, ids, the operator's reason).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Query

from genq import TERMINAL, Job, JobNotFinishedError, Queue

from ..access.auth import Principal
from ..access.schemas import MAX_REASON
from ..admission.budgets import release_if_never_ran
from ..deps import AdminDep, GatewayDep, JobId
from ..errors import ERRORS, BadRequest, Conflict, NotFound
from ..state import Gateway
from .jobs import load_queue_job
from .ops_schemas import ActionReason, BulkCount, BulkSelection, CancelDone, Done
from .queues import QueueName

router = APIRouter(tags=["operations"], responses=ERRORS)

BULK_STATUSES = {
    "cancel": ("waiting", "scheduled", "active"),
    "retry": ("failed", "cancelled", "dead"),
    "delete": ("completed", "failed", "cancelled", "dead"),
}
"""The statuses ``{"all": true, "status": ...}`` may select, per action."""
SNAPSHOT_PAGE = 1000
CONCURRENCY = 16
"""Jobs acted on at once by a bulk action."""


# -- one job -----------------------------------------------------------------------------------


@router.post("/v1/queues/{name}/jobs/{job_id}/cancel", response_model=CancelDone)
async def cancel_job(
    name: QueueName,
    job_id: JobId,
    gateway: GatewayDep,
    principal: AdminDep,
    body: ActionReason | None = None,
) -> CancelDone:
    """Stops any tenant's generation: a waiting one at once, a running one on its worker's next
    step. ``ok`` is false when it had already finished."""
    queue, job = await load_queue_job(gateway, name, job_id)
    ok = await _cancel(gateway, name, queue, job_id)
    after = await queue.get(job_id) or job
    await gateway.audit.record(
        principal.actor, "cancel", name, int(ok), [job_id], body.reason if body else None
    )
    return CancelDone(ok=ok, status=after.status.value)


@router.post(
    "/v1/queues/{name}/jobs/{job_id}/retry",
    response_model=Done,
    responses={409: {"description": "The generation is not failed or cancelled"}},
)
async def retry_job(
    name: QueueName,
    job_id: JobId,
    gateway: GatewayDep,
    principal: AdminDep,
    body: ActionReason | None = None,
) -> Done:
    """Puts a failed or cancelled generation back in line under the same id, with fresh
    attempts; its old output is dropped (watchers get ``restarted``)."""
    queue, _ = await load_queue_job(gateway, name, job_id)
    if not await queue.retry(job_id):
        job = await queue.get(job_id)
        if job is None:
            raise NotFound("generation not found")
        raise Conflict(f"only a failed or cancelled generation can be retried, not a {_is(job)}")
    await gateway.audit.record(
        principal.actor, "retry", name, 1, [job_id], body.reason if body else None
    )
    return Done(ok=True)


@router.delete(
    "/v1/queues/{name}/jobs/{job_id}",
    response_model=Done,
    responses={409: {"description": "The generation has not finished"}},
)
async def delete_job(
    name: QueueName,
    job_id: JobId,
    gateway: GatewayDep,
    principal: AdminDep,
    reason: Annotated[str | None, Query(max_length=MAX_REASON, description="Why (audit)")] = None,
) -> Done:
    """Deletes a finished generation for good: record, output, its idempotency key."""
    queue, _ = await load_queue_job(gateway, name, job_id)
    try:
        deleted = await queue.delete(job_id)
    except JobNotFinishedError:
        job = await queue.get(job_id)
        raise Conflict(
            f"only a finished generation can be deleted (cancel it first), not a {_is(job)}"
        ) from None
    if not deleted:
        raise NotFound("generation not found")
    await gateway.audit.record(principal.actor, "delete", name, 1, [job_id], reason)
    return Done(ok=True)


def _is(job: Job | None) -> str:
    return f"{job.status.value} one" if job else "running one"


async def _cancel(gateway: Gateway, name: str, queue: Queue, job_id: str) -> bool:
    """True when this call stopped the job (False: it had finished, or is gone)."""
    job = await queue.get(job_id)
    if job is None or job.status in TERMINAL:
        return False
    cancelled = await queue.cancel(job_id)
    if cancelled:
        gateway.metrics.cancels.labels(name).inc()
        await release_if_never_ran(gateway.redis, gateway.settings, await queue.get(job_id))
    return cancelled


async def _retry(gateway: Gateway, name: str, queue: Queue, job_id: str) -> bool:
    return await queue.retry(job_id)


async def _delete(gateway: Gateway, name: str, queue: Queue, job_id: str) -> bool:
    try:
        return await queue.delete(job_id)
    except JobNotFinishedError:
        return False


Act = Callable[[Gateway, str, Queue, str], Awaitable[bool]]
ACTIONS: dict[str, Act] = {"cancel": _cancel, "retry": _retry, "delete": _delete}


# -- many jobs ---------------------------------------------------------------------------------


@router.post("/v1/queues/{name}/jobs/cancel", response_model=BulkCount)
async def cancel_jobs(
    name: QueueName, body: BulkSelection, gateway: GatewayDep, principal: AdminDep
) -> BulkCount:
    """Cancels the given generations, or all of a status (waiting, scheduled, active) and
    optionally of one tenant. ``count``: those this stopped; ``matched``: those selected."""
    return await _bulk(gateway, name, principal, body, "cancel")


@router.post("/v1/queues/{name}/jobs/retry", response_model=BulkCount)
async def retry_jobs(
    name: QueueName, body: BulkSelection, gateway: GatewayDep, principal: AdminDep
) -> BulkCount:
    """Retries the given generations, or all of a status (failed, cancelled, dead) and
    optionally of one tenant. ``count``: those put back; ``matched``: those selected."""
    return await _bulk(gateway, name, principal, body, "retry")


@router.post("/v1/queues/{name}/jobs/delete", response_model=BulkCount)
async def delete_jobs(
    name: QueueName, body: BulkSelection, gateway: GatewayDep, principal: AdminDep
) -> BulkCount:
    """Deletes the given generations, or all of a status (completed, failed, cancelled, dead)
    and optionally of one tenant; unfinished ones are left alone. ``count``: those deleted."""
    return await _bulk(gateway, name, principal, body, "delete")


async def _bulk(
    gateway: Gateway, name: str, principal: Principal, body: BulkSelection, action: str
) -> BulkCount:
    queue = gateway.queues.by_provider(name)
    if body.ids is not None:
        ids = await _existing(gateway, name, queue, body.ids)
    else:
        allowed = BULK_STATUSES[action]
        if body.status not in allowed:
            raise BadRequest(f"{action} with all takes a status of {', '.join(allowed)}")
        ids = await _snapshot(queue, body.status, body.tenant)
    act = ACTIONS[action]
    acted: list[str] = []
    for start in range(0, len(ids), CONCURRENCY):
        chunk = ids[start : start + CONCURRENCY]
        done = await asyncio.gather(*(act(gateway, name, queue, job_id) for job_id in chunk))
        acted += [job_id for job_id, ok in zip(chunk, done, strict=True) if ok]
    await gateway.audit.record(principal.actor, action, name, len(acted), acted, body.reason)
    return BulkCount(count=len(acted), matched=len(ids))


async def _existing(gateway: Gateway, name: str, queue: Queue, ids: list[str]) -> list[str]:
    """The distinct ``ids`` that name a job of this queue, in the order given."""
    mine = []
    for job_id in dict.fromkeys(ids):
        try:
            provider, _ = gateway.queues.locate(job_id)
        except NotFound:
            continue
        if provider == name:
            mine.append(job_id)
    return await queue.existing(mine)


async def _snapshot(queue: Queue, status: str | None, tenant: str | None) -> list[str]:
    """The ids of the jobs listed under ``status`` (and ``tenant``) now."""
    ids: list[str] = []
    cursor = None
    while True:
        try:
            page = await queue.job_ids(status, tenant, SNAPSHOT_PAGE, cursor)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        ids += page.ids
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor

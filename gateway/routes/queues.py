"""Operating the queues (admin role): stats, history, dead letters, the audit log (jobs:
``routes/jobs.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Path, Query

from genq import Queue

from ..access.schemas import MAX_REASON
from ..deps import AdminDep, GatewayDep, JobId
from ..errors import ERRORS, BadRequest, NotFound
from ..history import STEP
from ..state import Gateway
from .ops_schemas import (
    ActionReason,
    AuditEntryOut,
    AuditLog,
    Count,
    DeadEntryOut,
    DeadList,
    DeadSelection,
    Done,
    HistoryBucket,
    QueueHistory,
    QueueStatsOut,
)

router = APIRouter(tags=["operations"], responses=ERRORS)

QueueName = Annotated[str, Path(min_length=1, max_length=100, description="A provider name")]
ReasonQuery = Annotated[
    str | None, Query(max_length=MAX_REASON, description="Why: kept in the audit log")
]
DEAD_PAGE = 500


async def _stats(gateway: Gateway, name: str, queue: Queue) -> QueueStatsOut:
    stats = await queue.stats()
    tail = gateway.tails.get(name)
    return QueueStatsOut(
        name=name,
        waiting=stats.waiting,
        scheduled=stats.scheduled,
        active=stats.active,
        dead=stats.dead,
        oldest_wait=stats.oldest_wait,
        cooldown_remaining=await queue.cooldown_remaining(),
        viewers=tail.viewers if tail else 0,
    )


@router.get("/v1/queues", response_model=list[QueueStatsOut])
async def list_queues(gateway: GatewayDep, _: AdminDep) -> list[QueueStatsOut]:
    """Every provider queue with its depths (viewers: of this gateway process)."""
    return [await _stats(gateway, name, queue) for name, queue in gateway.queues]


@router.get("/v1/queues/{name}", response_model=QueueStatsOut)
async def queue_stats(name: QueueName, gateway: GatewayDep, _: AdminDep) -> QueueStatsOut:
    return await _stats(gateway, name, gateway.queues.by_provider(name))


@router.delete("/v1/queues/{name}/cooldown", response_model=QueueStatsOut)
async def clear_cooldown(
    name: QueueName, gateway: GatewayDep, principal: AdminDep, reason: ReasonQuery = None
) -> QueueStatsOut:
    """Ends the queue's cooldown (the pause after a provider's 429) now, so its jobs run again
    at once; answers the queue's stats. Audited (count 1 when a cooldown was in force)."""
    queue = gateway.queues.by_provider(name)
    remaining = await queue.clear_cooldown()
    await gateway.audit.record(
        principal.actor, "clear_cooldown", name, int(remaining > 0), [], reason
    )
    return await _stats(gateway, name, queue)


@router.get("/v1/queues/{name}/history", response_model=QueueHistory)
async def queue_history(name: QueueName, gateway: GatewayDep, _: AdminDep) -> QueueHistory:
    """The last 24 hours in half-hour steps, oldest first: peak depth and longest wait."""
    buckets = await gateway.history.read(gateway.queues.by_provider(name))
    return QueueHistory(queue=name, step=STEP, buckets=[HistoryBucket(**vars(b)) for b in buckets])


@router.get("/v1/queues/{name}/dead", response_model=DeadList)
async def list_dead(
    name: QueueName,
    gateway: GatewayDep,
    _: AdminDep,
    count: Annotated[int, Query(ge=1, le=500)] = 20,
    cursor: Annotated[
        str | None, Query(max_length=300, description="next_cursor of the previous page")
    ] = None,
) -> DeadList:
    """Dead-lettered generations, newest first, with why they died. Page with ``next_cursor``:
    entries that die, are retried or purged meanwhile never shift a page."""
    queue = gateway.queues.by_provider(name)
    try:
        page = await queue.dead_page(count=count, cursor=cursor or None)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    total = (await queue.stats()).dead
    return DeadList(
        queue=name,
        total=total,
        entries=[DeadEntryOut(**vars(e)) for e in page.entries],
        next_cursor=page.next_cursor,
    )


@router.post("/v1/queues/{name}/dead/{job_id}/retry", response_model=Done)
async def retry_dead(
    name: QueueName,
    job_id: JobId,
    gateway: GatewayDep,
    principal: AdminDep,
    body: ActionReason | None = None,
) -> Done:
    """Puts a dead generation back in its queue with fresh attempts."""
    queue = gateway.queues.by_provider(name)
    if not await queue.retry_dead(job_id):
        raise NotFound("no dead generation with this id in this queue")
    await gateway.audit.record(
        principal.actor, "retry", name, 1, [job_id], body.reason if body else None
    )
    return Done(ok=True)


@router.post("/v1/queues/{name}/dead/retry", response_model=Count)
async def retry_dead_many(
    name: QueueName, body: DeadSelection, gateway: GatewayDep, principal: AdminDep
) -> Count:
    """Puts the given dead generations (or all of them: ``{"all": true}``) back."""
    queue = gateway.queues.by_provider(name)
    moved = await _each_dead(queue, body, queue.retry_dead)
    await gateway.audit.record(principal.actor, "retry", name, len(moved), moved, body.reason)
    return Count(count=len(moved))


@router.post("/v1/queues/{name}/dead/purge", response_model=Count)
async def purge_dead(
    name: QueueName, body: DeadSelection, gateway: GatewayDep, principal: AdminDep
) -> Count:
    """Deletes dead generations for good: the given ids, or all of them (``{"all": true}``)."""
    queue = gateway.queues.by_provider(name)
    ids = body.ids if body.ids is not None else await _all_dead(queue)
    purged = await queue.purge_dead(ids=ids) if ids else 0
    await gateway.audit.record(principal.actor, "purge", name, purged, ids, body.reason)
    return Count(count=purged)


@router.get("/v1/audit", response_model=AuditLog)
async def audit_log(
    gateway: GatewayDep, _: AdminDep, limit: Annotated[int, Query(ge=1, le=1000)] = 50
) -> AuditLog:
    """Operators' actions, newest first: who, what, how many, which ids, why (retries,
    purges, cancels, deletes, enqueues on a tenant's behalf, cooldowns cleared)."""
    entries = await gateway.audit.recent(limit)
    return AuditLog(entries=[AuditEntryOut(**vars(e)) for e in entries])


async def _all_dead(queue: Queue) -> list[str]:
    ids: list[str] = []
    while True:
        page = await queue.dead(count=DEAD_PAGE + len(ids))
        fresh = page[len(ids) :]
        ids.extend(fresh)
        if len(fresh) < DEAD_PAGE:
            return ids


async def _each_dead(
    queue: Queue, body: DeadSelection, act: Callable[[str], Awaitable[bool]]
) -> list[str]:
    ids = body.ids if body.ids is not None else await _all_dead(queue)
    return [job_id for job_id in ids if await act(job_id)]

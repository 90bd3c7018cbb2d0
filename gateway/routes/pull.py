"""Workers anywhere: pull jobs over HTTP, stream their output, ack or nack them.

Any process that speaks HTTP works a queue with a worker key (``genq keys create --worker
--queues demo``) or an admin key: it pulls jobs with a visibility, posts their chunks, progress
and the generation's other parts (reasoning, tool calls: ``genq_contract.parts``; watchers see
them on the generation's SSE stream, as a built-in worker's), extends the visibility while it
works, and acks or nacks with the job's receipt. The same Lua scripts
and fencing as the built-in worker (``genq._pull``): a stale receipt is 409 and changes nothing;
an expired visibility redelivers the job, its next attempt starting with ``restarted``. Only
the key that pulled a job may use its receipt (403 for any other, an admin's included). Chunks
and results are typed as the built-in worker's (``genq_contract.result``), and a nack's error
is redacted as a provider's message is, since the tenant reads both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, Path

from genq import JobLeaseLostError, PulledJob, Queue
from genq_contract.parts import PART_TYPES
from genq_contract.payload import payload_fields
from genq_contract.redact import redact
from genq_services.access import Access

from ..deps import GatewayDep, JobId, PullerDep
from ..errors import ERRORS, Conflict, Forbidden, NotFound
from ..pull.receipts import Receipts
from ..pull.schemas import (
    AckRequest,
    EventsRequest,
    ExtendRequest,
    HoldResponse,
    NackRequest,
    PulledJobOut,
    PullRequest,
    PullResponse,
    SettleResponse,
    event_data,
)
from ..state import Gateway

router = APIRouter(tags=["workers"], responses={**ERRORS, 409: ERRORS[400]})

QueueName = Annotated[str, Path(min_length=1, max_length=100, description="A queue name")]
T = TypeVar("T")

FOREIGN = (
    "receipt refused: the job was pulled by another key; only the key that pulled it may use "
    "its receipt; nothing was changed"
)
STALE = (
    "stale receipt: the job was settled, redelivered after its visibility passed, or the "
    "receipt is not this job's; nothing was changed"
)


def _queue(gateway: Gateway, name: str) -> Queue:
    return gateway.queues.by_provider(name)


@router.post("/v1/queues/{name}/pull", response_model=PullResponse)
async def pull_jobs(
    name: QueueName,
    body: PullRequest,
    gateway: GatewayDep,
    principal: PullerDep,
) -> PullResponse:
    """Takes up to ``max`` jobs for ``visibility`` seconds; with none ready, waits up to
    ``wait`` seconds (at most 20) for one. ``{"jobs": []}`` when none came."""
    queue = _queue(gateway, name)  # 404 for a queue this gateway does not serve
    waiter = gateway.pull_waiters[name]
    jobs = await runnable(gateway, queue, await waiter.pull(body.max, body.visibility, body.wait))
    receipts = gateway.receipts
    return PullResponse(
        jobs=[
            PulledJobOut(
                id=job.id,
                receipt=receipts.issue(job.id, job.receipt, principal.key_id, principal.tenant),
                attempt=job.attempt,
                max_attempts=job.max_attempts,
                payload=job.payload,
            )
            for job in jobs
        ]
    )


@dataclass(frozen=True)
class HeldJob:
    """A job route's target: the queue, the job id, and how to act under a receipt."""

    gateway: Gateway
    receipts: Receipts
    name: str
    queue: Queue
    id: str
    key_id: str
    """The key sending the receipt: it must be the one that pulled the job."""

    async def run(self, receipt: str, call: Callable[[Queue, str], Awaitable[T]]) -> T:
        """``call(queue, genq receipt)`` for a receipt that verifies, whose key and tenant are
        still allowed and that the key that pulled sends; a stale receipt is 409, another
        key's 403, an unknown job 404."""
        try:
            held = self.receipts.verify(self.id, receipt)
            await check_receipt_access(self.gateway, held.key_id, held.tenant)
            if held.key_id != self.key_id:
                raise Forbidden(FOREIGN)
            return await call(self.queue, held.inner)
        except JobLeaseLostError:
            if not await self.queue.existing([self.id]):
                raise NotFound(f"no job {self.id!r} in queue {self.name!r}") from None
            raise Conflict(STALE) from None


async def held_job(
    name: QueueName, job_id: JobId, gateway: GatewayDep, principal: PullerDep
) -> HeldJob:
    queue = _queue(gateway, name)
    return HeldJob(gateway, gateway.receipts, name, queue, job_id, principal.key_id)


HeldJobDep = Annotated[HeldJob, Depends(held_job)]


async def runnable(gateway: Gateway, queue: Queue, jobs: list[PulledJob]) -> list[PulledJob]:
    """The pulled jobs whose key and tenant are still allowed. The others (accepted by a
    gateway whose key cache still held a revoked key) fail terminally at once, as a built-in
    worker fails them before it calls a provider, and are not handed out."""
    if not jobs:
        return jobs
    snapshot = await Access(gateway.redis, gateway.settings.queue_namespace).snapshot()
    allowed = []
    for job in jobs:
        fields = payload_fields(job.payload)
        refusal = snapshot.refusal(fields.get("key_id"), fields.get("tenant"))
        if refusal is None:
            allowed.append(job)
        else:
            await queue.nack(
                job.id, job.receipt, f"{refusal}; the generation was not run", terminal=True
            )
    return allowed


async def check_receipt_access(gateway: Gateway, key_id: str, tenant: str) -> None:
    """A receipt of a revoked key or a disabled tenant stops working at once (read on every
    use, no cache: ``genq_services.access``)."""
    refusal = await Access(gateway.redis, gateway.settings.queue_namespace).refusal(
        key_id or None, tenant or None
    )
    if refusal is not None:
        raise Forbidden(f"receipt refused: {refusal}")


@router.post("/v1/queues/{name}/jobs/{job_id}/events", response_model=HoldResponse)
async def post_events(body: EventsRequest, job: HeldJobDep) -> HoldResponse:
    """Appends chunks, progress and parts to the job's stream, in order (adjacent text chunks are
    joined, as a built-in worker's are), and renews its visibility. Once a cancel is pending
    nothing more is appended and ``cancel_requested`` is true: stop, then ack or nack."""
    events = [(event.type, event_data(event)) for event in body.events]
    cancel = await job.run(
        body.receipt,
        lambda queue, receipt: queue.push_events(
            job.id, receipt, events, body.seq, types=PART_TYPES
        ),
    )
    return HoldResponse(cancel_requested=cancel)


@router.post("/v1/queues/{name}/jobs/{job_id}/extend", response_model=HoldResponse)
async def extend_job(body: ExtendRequest, job: HeldJobDep) -> HoldResponse:
    """Holds the job ``visibility`` seconds from now (a job that is quiet for long)."""
    cancel = await job.run(
        body.receipt, lambda queue, receipt: queue.extend(job.id, receipt, body.visibility)
    )
    return HoldResponse(cancel_requested=cancel)


@router.post("/v1/queues/{name}/jobs/{job_id}/ack", response_model=SettleResponse)
async def ack_job(body: AckRequest, job: HeldJobDep) -> SettleResponse:
    """Completes the job with ``result`` (``cancelled`` if a cancel was pending). Sending the
    same ack again answers the same."""
    result = body.result.as_json() if body.result is not None else None
    status = await job.run(body.receipt, lambda queue, receipt: queue.ack(job.id, receipt, result))
    return SettleResponse(status=status)


@router.post("/v1/queues/{name}/jobs/{job_id}/nack", response_model=SettleResponse)
async def nack_job(body: NackRequest, job: HeldJobDep) -> SettleResponse:
    """Fails this attempt: retried after ``retry_after`` (or the queue's backoff) while
    attempts remain, dead-lettered when ``terminal`` or out of attempts. The error is shown
    to the tenant: credentials in it are redacted, as a built-in worker's are."""
    error = redact(body.error)
    status = await job.run(
        body.receipt,
        lambda queue, receipt: queue.nack(job.id, receipt, error, body.retry_after, body.terminal),
    )
    return SettleResponse(status=status)

"""Jobs (admin role): list and search a queue's generations, look at any one, enqueue on a
tenant's behalf (acting on them: ``routes/job_actions.py``).

Every enqueue writes an audit entry (actor, action, queue, count, ids, the operator's reason).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from genq import Job, JobStatus, Queue
from genq_contract.payload import payload_fields
from genq_contract.routing import RoutingError

from ..access.auth import Principal
from ..access.owned_jobs import tenant_of
from ..admission.schemas import enqueue_answers, idempotency_key_header
from ..admission.submit import answer_created, submit
from ..admission.tenant_warnings import unknown_tenant
from ..deps import AdminDep, GatewayDep, JobId
from ..errors import ERRORS, BadRequest, NotFound
from ..records import AdminGeneration, position, to_generation
from ..state import Gateway
from .ops_schemas import (
    AdminGenerationCreated,
    AdminGenerationRequest,
    AdminJobList,
    AdminJobRow,
    JobCounts,
)
from .queues import QueueName

router = APIRouter(tags=["operations"], responses=ERRORS)
TenantReplayKey = Annotated[
    str | None, idempotency_key_header("As on POST /v1/generations, scoped to the body's tenant")
]

STATUSES = frozenset({s.value for s in JobStatus} | {"dead"})
MODEL_SCAN_PAGE = 200
MODEL_SCAN_PAGES = 5
"""A model-filtered page reads at most this many pages of the listing (then answers what it
found, with a cursor to go on)."""


# -- reading -----------------------------------------------------------------------------------


@router.get("/v1/queues/{name}/jobs", response_model=AdminJobList)
async def list_jobs(
    name: QueueName,
    gateway: GatewayDep,
    _: AdminDep,
    status: Annotated[
        str | None, Query(max_length=20, description="A status, or dead (= failed)")
    ] = None,
    tenant: Annotated[str | None, Query(max_length=200)] = None,
    model: Annotated[str | None, Query(max_length=200, description="The request's model")] = None,
    q: Annotated[
        str | None,
        Query(
            max_length=300,
            description="A job id, or an idempotency key (with tenant): at most one row",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[
        str | None, Query(max_length=300, description="next_cursor of the previous page")
    ] = None,
) -> AdminJobList:
    """Any tenant's generations in this queue, newest first (by creation), with the count per
    status. Paging with ``next_cursor`` while jobs come and go never repeats a job and never
    skips one that kept its status. Finished jobs leave once their records expire."""
    queue = gateway.queues.by_provider(name)
    status, tenant, model, q, cursor = (v or None for v in (status, tenant, model, q, cursor))
    if status is not None and status not in STATUSES:
        raise BadRequest(f"status must be one of {', '.join(sorted(STATUSES))}")
    try:
        counts = await queue.job_counts(tenant)
        if q is not None:
            jobs, next_cursor = await _search(gateway, name, queue, q, status, tenant, model), None
        else:
            jobs, next_cursor = await _page(queue, status, tenant, model, limit, cursor)
    except ValueError as exc:  # a malformed cursor or tenant
        raise BadRequest(str(exc)) from None
    now = await queue.server_time()
    return AdminJobList(
        queue=name,
        jobs=[_row(job, name, now) for job in jobs],
        next_cursor=next_cursor,
        counts=JobCounts(**counts),
    )


@router.get("/v1/queues/{name}/jobs/{job_id}", response_model=AdminGeneration)
async def queue_job(
    name: QueueName, job_id: JobId, gateway: GatewayDep, principal: AdminDep
) -> AdminGeneration:
    """Any tenant's generation in this queue, with its request and a watch token (bound to
    the admin's key: revoking it stops the token)."""
    queue, job = await load_queue_job(gateway, name, job_id)
    tenant = tenant_of(job)
    token, expires = gateway.tokens.issue(str(tenant), job_id, key_id=principal.key_id)
    payload = job.payload if isinstance(job.payload, dict) else {"value": job.payload}
    now = await queue.server_time()
    return AdminGeneration(
        **to_generation(job, now).model_dump(),
        tenant=tenant,
        queue=name,
        payload={k: v for k, v in payload.items() if k not in ("tenant", "fingerprint")},
        result=job.result,
        watch_token=token,
        watch_token_expires_at=expires,
    )


def _row(job: Job, queue: str, now: float) -> AdminJobRow:
    return AdminJobRow(**to_generation(job, now).model_dump(), tenant=_tenant(job), queue=queue)


def _tenant(job: Job) -> str | None:
    """The gateway's tenant (the payload's); the core's for a job enqueued another way."""
    tenant = tenant_of(job)
    return str(tenant) if tenant is not None else (job.tenant or None)


def _model(job: Job) -> Any:
    return payload_fields(job.payload).get("model")


def _matches(job: Job, status: str | None, tenant: str | None, model: str | None) -> bool:
    wanted = "failed" if status == "dead" else status
    return (
        (wanted is None or job.status.value == wanted)
        and (tenant is None or _tenant(job) == tenant)
        and (model is None or _model(job) == model)
    )


async def _page(
    queue: Queue,
    status: str | None,
    tenant: str | None,
    model: str | None,
    limit: int,
    cursor: str | None,
) -> tuple[list[Job], str | None]:
    if model is None:
        page = await queue.jobs(status, tenant, limit, cursor)
        return page.jobs, page.next_cursor
    rows: list[Job] = []
    for _ in range(MODEL_SCAN_PAGES):
        page = await queue.jobs(status, tenant, MODEL_SCAN_PAGE, cursor)
        for i, job in enumerate(page.jobs):
            if _model(job) != model:
                continue
            rows.append(job)
            if len(rows) == limit:
                at_end = i == len(page.jobs) - 1 and page.next_cursor is None
                return rows, None if at_end else position(job)
        cursor = page.next_cursor
        if cursor is None:
            return rows, None
    return rows, cursor


async def _search(
    gateway: Gateway,
    name: str,
    queue: Queue,
    q: str,
    status: str | None,
    tenant: str | None,
    model: str | None,
) -> list[Job]:
    """The job ``q`` names: its id, else (with a tenant) that tenant's idempotency key."""
    try:
        provider, _ = gateway.queues.locate(q)
    except NotFound:
        provider = None
    job = await queue.get(q) if provider == name else None
    if job is None and tenant is not None:
        job = await queue.find(f"{tenant}:{q}")
    elif job is None and provider is None:
        raise BadRequest("q is not a generation id: give tenant to search by idempotency key")
    return [job] if job is not None and _matches(job, status, tenant, model) else []


async def load_queue_job(gateway: Gateway, name: str, job_id: str) -> tuple[Queue, Job]:
    """This queue's job ``job_id``; NotFound for an unknown queue or job."""
    queue = gateway.queues.by_provider(name)
    provider, _ = gateway.queues.locate(job_id)
    job = await queue.get(job_id) if provider == name else None
    if job is None:
        raise NotFound("generation not found")
    return queue, job


# -- enqueue on a tenant's behalf --------------------------------------------------------------


@router.post("/v1/queues/{name}/jobs", **enqueue_answers(AdminGenerationCreated))
async def enqueue_job(
    name: QueueName,
    body: AdminGenerationRequest,
    gateway: GatewayDep,
    principal: AdminDep,
    response: Response,
    idempotency_key: TenantReplayKey = None,
) -> AdminGenerationCreated:
    """Enqueues a generation for ``tenant`` exactly as that tenant's POST /v1/generations would
    (validation, its limits, replays); the model must run on this queue. The watch token is
    that tenant's. ``warnings`` says when no API key acts as the tenant (enqueued all the
    same)."""
    gateway.queues.by_provider(name)
    try:
        provider, _ = gateway.queues.for_model(body.model)
    except RoutingError:
        provider = name  # submit answers it (422) as POST /v1/generations does
    if provider != name:
        raise BadRequest(f"model {body.model!r} runs on queue {provider!r}, not {name!r}")
    on_behalf = Principal(tenant=body.tenant, key_id=principal.key_id)  # runs as the admin key
    submitted = await submit(gateway, on_behalf, body, idempotency_key)
    await gateway.audit.record(
        principal.actor, "enqueue", name, int(not submitted.deduplicated), [submitted.id],
        body.reason,
    )  # fmt: skip
    answer = answer_created(gateway, body.tenant, submitted, response)
    warnings = await unknown_tenant(gateway, body.tenant)
    return AdminGenerationCreated(**answer.model_dump(), warnings=warnings)

"""Generations: enqueue (one, or a batch), list the caller's, read, cancel, wait for the
result, mint a fresh watch token."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field, ValidationError

from genq import TERMINAL, JobStatus

from .._fast_path import JSON, fast_path_route, json_body
from ..access.owned_jobs import load_owned_job, tenant_of
from ..admission.cancel import cancel
from ..admission.schemas import (
    BatchCreated,
    BatchItem,
    BatchItemFailed,
    BatchRequest,
    GenerationCreated,
    GenerationRequest,
    enqueue_answers,
    idempotency_key_header,
    well_formed_idempotency_key,
)
from ..admission.submit import answer_created, created, locate, submit
from ..admission.submit_batch import submit_many
from ..admission.webhook_note import WebhookNote
from ..deps import GatewayDep, JobId, JobTenantDep, PrincipalDep, gateway_and_caller
from ..errors import ERRORS, BadRequest
from ..records import Generation, GenerationList, newest_first, position, to_generation
from ..streaming.disconnect import unless_disconnected
from ..streaming.terminal import wait_for_end

router = APIRouter(prefix="/v1/generations", tags=["generations"], responses=ERRORS)
ReplayKey = Annotated[
    str | None,
    idempotency_key_header("Replays with the same key and body return the same generation"),
]
NATIVE_END = WebhookNote("generation")
"""A native generation's end is a webhook event for its tenant's endpoints."""


class CancelResult(BaseModel):
    cancelled: bool = Field(description="True if the generation will not produce a result")
    status: str


class WatchToken(BaseModel):
    watch_token: str
    expires_at: int


async def create_generation(
    body: GenerationRequest,
    gateway: GatewayDep,
    principal: PrincipalDep,
    response: Response,
    idempotency_key: ReplayKey = None,
) -> GenerationCreated:
    """Enqueues a generation (202), or returns the one this Idempotency-Key made (200)."""
    submitted = await submit(gateway, principal, body, idempotency_key, NATIVE_END)
    return answer_created(gateway, principal.tenant, submitted, response)


async def create_generation_directly(request: Request) -> Response | None:
    """:func:`create_generation` for a request FastAPI would take as it is: a JSON body that
    is a valid ``GenerationRequest``, a well-formed Idempotency-Key or none. Any other is
    declined (``None``) before anything happened, for FastAPI to answer."""
    idempotency_key = request.headers.get("idempotency-key")
    if not well_formed_idempotency_key(idempotency_key):
        return None
    body = await json_body(request, GenerationRequest)
    if body is None:
        return None
    gateway, principal = await gateway_and_caller(request)
    submitted = await submit(gateway, principal, body, idempotency_key, NATIVE_END)
    answer = created(gateway, principal.tenant, submitted).model_dump_json()
    response = Response(answer, status_code=202, media_type=JSON)
    locate(submitted, response)
    return response


router.add_api_route(
    "",
    create_generation,
    methods=["POST"],
    route_class_override=fast_path_route(create_generation_directly),
    **enqueue_answers(GenerationCreated),
)


@router.post(
    ":batch",
    response_model=BatchCreated,
    responses={207: {"model": BatchCreated, "description": "Some items failed"}},
)
async def create_generations(
    body: BatchRequest, gateway: GatewayDep, principal: PrincipalDep, response: Response
) -> BatchCreated:
    """Enqueues 1 to 100 generations, each item exactly as a single POST with its own
    ``idempotency_key`` would be (validation, limits, replays), in request order, all of them
    in one enqueue per provider queue.

    Answers one entry per item, in order: the created (or replayed) generation, or
    ``{"error": {status, detail}}`` with the status a single POST would have answered. 200 when
    no item failed, 207 when some did. Once storage is unavailable (503) the remaining items
    get that answer without being tried."""
    bodies: list[BatchItem | ValidationError] = []
    for raw in body.items:
        try:
            bodies.append(BatchItem.model_validate(raw))
        except ValidationError as exc:
            bodies.append(exc)
    answers = await submit_many(gateway, principal, bodies)
    items = [
        a if isinstance(a, BatchItemFailed) else created(gateway, principal.tenant, a)
        for a in answers
    ]
    if any(isinstance(item, BatchItemFailed) for item in items):
        response.status_code = 207
    return BatchCreated(items=items)


@router.get("", response_model=GenerationList)
async def list_generations(
    gateway: GatewayDep,
    principal: PrincipalDep,
    status: Annotated[
        str | None, Query(max_length=20, description="A status, or dead (= failed)")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
    cursor: Annotated[
        str | None, Query(max_length=300, description="next_cursor of the previous page")
    ] = None,
) -> GenerationList:
    """The caller's own generations across every model, newest first (by creation). Paging
    with ``next_cursor`` while generations come and go never repeats one and never skips one
    that kept its status; a page may hold fewer than ``limit`` and still have a next one.
    Finished generations leave once their records expire (``GENQ_RESULT_TTL``)."""
    tenant = principal.tenant
    try:
        pages = await asyncio.gather(
            *(
                queue.jobs(status or None, tenant, limit, cursor or None)
                for _, queue in gateway.queues
            )
        )
    except ValueError as exc:  # a malformed status or cursor
        raise BadRequest(str(exc)) from None
    # Each queue's page ends somewhere; past the newest of those ends a queue may hold jobs not
    # read yet, so the merged page stops there (and goes on from there next time).
    ends = [page.next_cursor for page in pages if page.next_cursor is not None]
    stop = max(ends, key=_position_key, default=None)
    jobs = sorted(
        (job for page in pages for job in page.jobs if tenant_of(job) == tenant),
        key=newest_first,
        reverse=True,
    )
    if stop is not None:
        jobs = [job for job in jobs if newest_first(job) >= _position_key(stop)]
    shown = jobs[:limit]
    next_cursor = position(shown[-1]) if len(jobs) > limit else stop
    scheduled = any(job.status is JobStatus.SCHEDULED for job in shown)
    now = await next(iter(gateway.queues))[1].server_time() if scheduled else None
    generations = [to_generation(job, now) for job in shown]
    return GenerationList(generations=generations, next_cursor=next_cursor)


def _position_key(cursor: str) -> tuple[int, bytes]:
    """A listing cursor (``"<ms>:<id>"``, well formed: a queue made it) as a ``newest_first``
    key."""
    created, _, job_id = cursor.partition(":")
    return int(created), job_id.encode()


@router.get("/{job_id}", response_model=Generation)
async def get_generation(job_id: JobId, gateway: GatewayDep, tenant: JobTenantDep) -> Generation:
    """The generation's record; ``text`` is set once it completed, ``retry_in`` while it is
    scheduled. Takes a watch token too."""
    owned = await load_owned_job(gateway, job_id, tenant)
    now = await owned.queue.server_time() if owned.job.status is JobStatus.SCHEDULED else None
    return to_generation(owned.job, now)


@router.post("/{job_id}/cancel", response_model=CancelResult)
async def cancel_generation(
    job_id: JobId, gateway: GatewayDep, tenant: JobTenantDep
) -> CancelResult:
    """Stops the generation: a waiting one at once, a running one on its worker's next step.

    ``cancelled`` is true when it will not produce a result. Takes a watch token too."""
    owned = await load_owned_job(gateway, job_id, tenant)
    cancelled, job = await cancel(gateway, owned)
    return CancelResult(cancelled=cancelled, status=job.status.value)


@router.get(
    "/{job_id}/result",
    response_model=Generation,
    responses={202: {"model": Generation, "description": "Not finished within the timeout"}},
)
async def generation_result(
    job_id: JobId,
    gateway: GatewayDep,
    principal: PrincipalDep,
    request: Request,
    response: Response,
    timeout: Annotated[
        float, Query(ge=0, le=3600, description="Seconds to wait; capped by the server")
    ] = 30.0,
) -> Generation | Response:
    """Waits for the generation to finish: 200 with the terminal record (completed, failed or
    cancelled alike), or 202 with the current record when the timeout passed first. A tenant
    holds at most ``GENQ_TENANT_MAX_WAITS`` waits at once (429 beyond)."""
    owned = await load_owned_job(gateway, job_id, principal.tenant)
    with gateway.open_waits.hold(principal.tenant):  # 429 past the tenant's cap
        wait = wait_for_end(gateway, owned, min(timeout, gateway.settings.max_wait))
        answered, job = await unless_disconnected(request, wait)
    if not answered or job is None:  # the client hung up: free its wait at once
        return Response(status_code=499)
    if job.status not in TERMINAL:
        response.status_code = 202
    return to_generation(job)


@router.post("/{job_id}/token", response_model=WatchToken)
async def new_watch_token(
    job_id: JobId, gateway: GatewayDep, principal: PrincipalDep
) -> WatchToken:
    """A fresh watch token, for a page that outlived the first one."""
    await load_owned_job(gateway, job_id, principal.tenant)
    token, expires = gateway.tokens.issue(principal.tenant, job_id, key_id=principal.key_id)
    return WatchToken(watch_token=token, expires_at=expires)

"""Batches (``/v1/batches``), the shapes the ``openai`` SDKs' ``batches`` call: create,
retrieve, list (``after``, ``limit``), cancel. Any provider's models: each line becomes a
generation on its provider's batch lane, which runs below interactive work
(:mod:`genq_contract.lanes`). The batch itself is driven by the gateways' runners
(:mod:`.batch_runner`); these routes only write what was asked. A tenant sees its own
batches only; another's id answers 404.

A create takes one of the tenant's rate tokens (``GENQ_TENANT_RATE``), as one request; its
lines are then admitted as single requests to their route, but without the per-request rate,
daily and in-flight limits (:mod:`.batch_lines`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from genq_contract.keys import GatewayKeys
from genq_services import telemetry

from ..deps import AdminDep, GatewayDep, PrincipalDep
from ..errors import ERRORS, NotFound, RateLimited
from ..state import Gateway
from .batch_store import (
    CANCELLING,
    COMPLETION_WINDOWS,
    ENDPOINTS,
    IN_PROGRESS,
    VALIDATING,
    BatchStore,
    batch_object,
)
from .errors import OpenAIError, OpenAIRoute
from .files import file_store
from .objects import list_page

router = APIRouter(prefix="/v1/batches", tags=["openai"], route_class=OpenAIRoute)


class BatchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_file_id: str = Field(min_length=1, max_length=80)
    endpoint: str
    completion_window: str
    metadata: dict[str, Annotated[str, Field(max_length=512)]] | None = Field(
        default=None, max_length=16
    )
    output_expires_after: dict[str, object] | None = None
    """Accepted for the SDK's sake; output files follow GENQ_BATCH_RESULT_TTL."""


def batch_store(gateway: Gateway) -> BatchStore:
    return BatchStore(gateway.redis, GatewayKeys(gateway.settings.queue_namespace))


def not_found(batch_id: str) -> OpenAIError:
    return OpenAIError(404, f"No such Batch object: {batch_id}", param="batch_id")


def wake_runner(request: Request) -> None:
    runner = getattr(request.app.state, "batch_runner", None)
    if runner is not None:
        runner.wake()


@router.post("")
async def create_batch(
    body: BatchCreate, request: Request, gateway: GatewayDep, principal: PrincipalDep
) -> JSONResponse:
    """Creates the batch (``validating``); the runners take it from there."""
    if body.endpoint not in ENDPOINTS:
        raise OpenAIError(400, f"endpoint must be one of {list(ENDPOINTS)}", param="endpoint")
    if body.completion_window not in COMPLETION_WINDOWS:
        raise OpenAIError(400, "completion_window must be '24h'", param="completion_window")
    record = await file_store(gateway).get(principal.tenant, body.input_file_id)
    if record is None or record.generated:
        raise OpenAIError(404, f"No such File object: {body.input_file_id}", param="input_file_id")
    if record.purpose != "batch":
        raise OpenAIError(400, "the input file's purpose must be 'batch'", param="input_file_id")
    try:
        await gateway.limiter.take_enqueue_token(principal.tenant)
    except RateLimited:
        gateway.metrics.refused.labels("rate").inc()
        raise
    raw = await batch_store(gateway).create(
        tenant=principal.tenant,
        key_id=principal.key_id,
        endpoint=body.endpoint,
        input_file_id=body.input_file_id,
        completion_window=body.completion_window,
        metadata=body.metadata,
        window=gateway.settings.batch_window,
        traceparent=telemetry.current_traceparent(),
    )
    wake_runner(request)
    return JSONResponse(batch_object(raw))


@router.get("")
async def list_batches(
    gateway: GatewayDep,
    principal: PrincipalDep,
    after: Annotated[str | None, Query(max_length=80)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> JSONResponse:
    """The tenant's batches, newest first, after the batch ``after``."""
    found, more = await batch_store(gateway).page(principal.tenant, after, limit)
    return JSONResponse(list_page([batch_object(raw) for raw in found], more))


@router.get("/{batch_id}")
async def retrieve_batch(
    batch_id: str, gateway: GatewayDep, principal: PrincipalDep
) -> JSONResponse:
    raw = await batch_store(gateway).get(principal.tenant, batch_id)
    if raw is None:
        raise not_found(batch_id)
    return JSONResponse(batch_object(raw))


@router.post("/{batch_id}/cancel")
async def cancel_batch(
    batch_id: str, request: Request, gateway: GatewayDep, principal: PrincipalDep
) -> JSONResponse:
    """``cancelling`` at once; the runner cancels the lines not finished (a waiting one at
    once, a running one as Stop does) and then answers ``cancelled``. A final batch is
    answered as it is (409 would break the SDK's idempotent retry)."""
    store = batch_store(gateway)
    raw = await store.get(principal.tenant, batch_id)
    if raw is None:
        raise not_found(batch_id)
    return JSONResponse(batch_object(await request_cancel(request, store, raw)))


async def request_cancel(
    request: Request, store: BatchStore, raw: dict[str, str]
) -> dict[str, str]:
    """Moves a batch not yet running or running to ``cancelling``; its record after."""
    if await store.move(raw["id"], frozenset({VALIDATING, IN_PROGRESS}), CANCELLING):
        wake_runner(request)
        return await store.read(raw["id"]) or raw
    return raw


# -- operators: every tenant's batches (the admin page's Batches panel, `genq batches`) ------

admin_router = APIRouter(tags=["operations"], responses=ERRORS)


def with_tenant(raw: dict[str, str]) -> dict[str, Any]:
    return {**batch_object(raw), "tenant": raw["tenant"]}


@admin_router.get("/v1/admin/batches")
async def all_batches(
    gateway: GatewayDep,
    _: AdminDep,
    after: Annotated[str | None, Query(max_length=80)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    """Every tenant's batches, newest first, each with its tenant and progress."""
    found, more = await batch_store(gateway).page(None, after, limit)
    return {"batches": [with_tenant(raw) for raw in found], "has_more": more}


@admin_router.post("/v1/admin/batches/{batch_id}/cancel")
async def cancel_any_batch(
    batch_id: str, request: Request, gateway: GatewayDep, _: AdminDep
) -> dict[str, Any]:
    """Cancels any tenant's batch (as its own ``cancel``); 404 for an unknown id."""
    store = batch_store(gateway)
    raw = await store.read(batch_id)
    if raw is None:
        raise NotFound("batch not found")
    return with_tenant(await request_cancel(request, store, raw))

"""``/v1/webhook_endpoints``: OpenAI's webhook endpoints, as the SDKs' ``client.webhooks``
calls them (create, retrieve, update, list, delete, rotate_secret, test), tenant-scoped (another
tenant's endpoint is 404), errors in OpenAI's shape; plus ``GET /v1/webhook_event_types`` and
genq's delivery log of an endpoint (``GET /v1/webhook_endpoints/{id}/deliveries``).

Limits: :data:`~genq_contract.webhooks.MAX_ENDPOINTS_PER_TENANT` endpoints per tenant, URLs
up to :data:`~genq_contract.webhooks.MAX_URL_LENGTH` characters, https to public addresses only
unless ``GENQ_WEBHOOK_ALLOW_PRIVATE`` (``genq_services.webhook_urls``). What the events are and
how they are delivered: ``workers.webhook_delivery`` and docs/OPENAI.md.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any, Literal

import httpx
from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from genq_contract.webhooks import (
    EVENT_TYPES,
    LOG_ENTRIES,
    MAX_NAME_LENGTH,
    MAX_URL_LENGTH,
    event_body,
)
from genq_services import webhook_endpoints as store
from genq_services.webhook_endpoints import DeliveryAttempt, Endpoint, TooManyEndpointsError
from genq_services.webhook_send import client, send
from genq_services.webhook_urls import UnsafeUrlError, check_url

from ..deps import AdminDep, GatewayDep, PrincipalDep
from ..errors import ERRORS, BadRequest, NotFound
from ..state import Gateway
from .errors import OpenAIError, OpenAIRoute
from .objects import list_page

router = APIRouter(tags=["webhooks"], route_class=OpenAIRoute)

EventType = Literal[
    "response.completed",
    "response.failed",
    "response.cancelled",
    "response.incomplete",
    "batch.completed",
    "batch.failed",
    "batch.cancelled",
    "batch.expired",
]
assert set(EventType.__args__) == set(EVENT_TYPES)  # type: ignore[attr-defined]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH)]
Url = Annotated[str, Field(min_length=1, max_length=MAX_URL_LENGTH)]
EventTypes = Annotated[list[EventType], Field(min_length=1, max_length=len(EVENT_TYPES))]
SAMPLE_IDS = {"response": "resp_test", "batch": "batch_test"}


class EndpointCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    url: Url
    event_types: EventTypes


class EndpointUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    url: Url | None = None
    event_types: EventTypes | None = None


class RotateSecret(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keep_old_secret_active_for_24_hours: bool = False


class TestEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event_type: EventType


def not_found(endpoint_id: str) -> OpenAIError:
    return OpenAIError(
        404, f"No webhook endpoint found with id '{endpoint_id}'.", param="webhook_endpoint_id"
    )


async def checked_url(gateway: Gateway, url: str) -> str:
    try:
        await check_url(url, gateway.settings.webhook_allow_private)
    except UnsafeUrlError as exc:
        raise OpenAIError(400, str(exc), param="url", code="invalid_url") from None
    return url


async def owned(gateway: Gateway, tenant: str, endpoint_id: str) -> Endpoint:
    endpoint = await store.get(gateway.redis, gateway.settings.queue_namespace, endpoint_id, tenant)
    if endpoint is None:
        raise not_found(endpoint_id)
    return endpoint


@router.post("/v1/webhook_endpoints")
async def create_endpoint(
    body: EndpointCreate, gateway: GatewayDep, principal: PrincipalDep
) -> dict[str, Any]:
    """Creates an endpoint; the answer holds its ``signing_secret``, never shown again."""
    url = await checked_url(gateway, body.url)
    try:
        endpoint = await store.create(
            gateway.redis,
            gateway.settings.queue_namespace,
            principal.tenant,
            body.name,
            url,
            body.event_types,
        )
    except TooManyEndpointsError as exc:
        raise OpenAIError(400, str(exc), code="limit_exceeded") from None
    return endpoint.with_secret()


@router.get("/v1/webhook_endpoints")
async def list_endpoints(
    gateway: GatewayDep,
    principal: PrincipalDep,
    after: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    """The tenant's endpoints, newest first, ``limit`` after the one ``after`` names."""
    page = await store.page(
        gateway.redis, gateway.settings.queue_namespace, principal.tenant, after, limit
    )
    return list_page([endpoint.public() for endpoint in page.data], page.has_more)


@router.get("/v1/webhook_endpoints/{endpoint_id}")
async def retrieve_endpoint(
    endpoint_id: str, gateway: GatewayDep, principal: PrincipalDep
) -> dict[str, Any]:
    return (await owned(gateway, principal.tenant, endpoint_id)).public()


@router.post("/v1/webhook_endpoints/{endpoint_id}")
async def update_endpoint(
    endpoint_id: str, body: EndpointUpdate, gateway: GatewayDep, principal: PrincipalDep
) -> dict[str, Any]:
    """Changes what is given (``event_types`` is the complete new set)."""
    endpoint = await owned(gateway, principal.tenant, endpoint_id)
    url = await checked_url(gateway, body.url) if body.url is not None else None
    updated = await store.update(
        gateway.redis,
        gateway.settings.queue_namespace,
        endpoint,
        name=body.name,
        url=url,
        event_types=body.event_types,
    )
    return updated.public()


@router.delete("/v1/webhook_endpoints/{endpoint_id}")
async def delete_endpoint(
    endpoint_id: str, gateway: GatewayDep, principal: PrincipalDep
) -> dict[str, Any]:
    """Deletes the endpoint; deliveries still queued for it are dropped unsent."""
    endpoint = await owned(gateway, principal.tenant, endpoint_id)
    await store.delete(gateway.redis, gateway.settings.queue_namespace, endpoint)
    return {"id": endpoint.id, "object": "webhook_endpoint.deleted", "deleted": True}


@router.post("/v1/webhook_endpoints/{endpoint_id}/rotate_secret")
async def rotate_secret(
    endpoint_id: str,
    gateway: GatewayDep,
    principal: PrincipalDep,
    body: RotateSecret | None = None,
) -> dict[str, Any]:
    """A new signing secret (answered once); with ``keep_old_secret_active_for_24_hours``
    deliveries carry a signature with each secret for 24 h."""
    endpoint = await owned(gateway, principal.tenant, endpoint_id)
    keep = body.keep_old_secret_active_for_24_hours if body is not None else False
    rotated = await store.rotate(gateway.redis, gateway.settings.queue_namespace, endpoint, keep)
    return rotated.with_secret()


async def send_test(gateway: Gateway, endpoint: Endpoint, event_type: str) -> int:
    """POSTs a sample event of ``event_type`` now (no retry) and logs the attempt; the
    receiver's status. 400 when it cannot be reached or must not be."""
    object_id = SAMPLE_IDS[event_type.split(".", 1)[0]]
    event = event_body("evt_" + secrets.token_hex(16), event_type, int(time.time()), object_id)
    message_id = "msg_" + secrets.token_hex(16)
    settings = gateway.settings
    status: int | None = None
    error: str | None = None
    try:
        async with client(settings.webhook_timeout) as http:
            status = (
                await send(http, endpoint, message_id, event, settings.webhook_allow_private)
            ).status_code
    except UnsafeUrlError as exc:
        error = str(exc)
    except httpx.HTTPError as exc:
        error = f"endpoint unreachable: {type(exc).__name__}: {exc}"
    delivered = status is not None and 200 <= status < 300
    attempt = DeliveryAttempt(
        event_id=event["id"],
        event_type=event_type,
        webhook_id=message_id,
        attempt=1,
        outcome="delivered" if delivered else "given_up",
        status=status,
        error=error,
    )
    await store.record_attempt(gateway.redis, settings.queue_namespace, endpoint.id, attempt)
    if status is None:
        raise OpenAIError(400, f"the test delivery failed: {error}", code="webhook_unreachable")
    return status


@router.post("/v1/webhook_endpoints/{endpoint_id}/test")
async def test_endpoint(
    endpoint_id: str, body: TestEvent, gateway: GatewayDep, principal: PrincipalDep
) -> dict[str, Any]:
    """Sends a sample event of ``event_type`` now, signed as every delivery is; answers the
    receiver's HTTP status."""
    endpoint = await owned(gateway, principal.tenant, endpoint_id)
    status = await send_test(gateway, endpoint, body.event_type)
    return {
        "object": "webhook_endpoint.test",
        "webhook_endpoint_id": endpoint.id,
        "event_type": body.event_type,
        "status_code": status,
        "success": True,
    }


@router.get("/v1/webhook_endpoints/{endpoint_id}/deliveries")
async def endpoint_deliveries(
    endpoint_id: str,
    gateway: GatewayDep,
    principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=LOG_ENTRIES)] = 50,
) -> dict[str, Any]:
    """genq's delivery log of the endpoint, newest first: one entry per POST attempt (event,
    ``webhook-id``, attempt, HTTP status or error, delivered / retrying / given_up)."""
    endpoint = await owned(gateway, principal.tenant, endpoint_id)
    return await deliveries_of(gateway, endpoint, limit)


async def deliveries_of(gateway: Gateway, endpoint: Endpoint, limit: int) -> dict[str, Any]:
    attempts = await store.recent_attempts(
        gateway.redis, gateway.settings.queue_namespace, endpoint.id, limit
    )
    return {
        "object": "list",
        "webhook_endpoint_id": endpoint.id,
        "data": [attempt.as_dict() for attempt in attempts],
        "max_entries": LOG_ENTRIES,
    }


@router.get("/v1/webhook_event_types")
async def event_types(principal: PrincipalDep) -> dict[str, Any]:
    """The event types endpoints may subscribe to here."""
    return {"object": "list", "data": list(EVENT_TYPES)}


# -- the operators' view (admin key, native ``{"detail"}`` errors: /admin and ``genq webhooks``)

admin_router = APIRouter(tags=["operations"], responses=ERRORS)


async def any_endpoint(gateway: Gateway, endpoint_id: str) -> Endpoint:
    endpoint = await store.get(gateway.redis, gateway.settings.queue_namespace, endpoint_id, None)
    if endpoint is None:
        raise NotFound("webhook endpoint not found")
    return endpoint


@admin_router.get("/v1/webhooks")
async def all_endpoints(
    gateway: GatewayDep,
    _: AdminDep,
    tenant: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    """Every tenant's webhook endpoints (or one tenant's), each with its tenant."""
    found = await store.every_endpoint(gateway.redis, gateway.settings.queue_namespace)
    chosen = [e for e in found if tenant is None or e.tenant == tenant]
    return {"endpoints": [{**e.public(), "tenant": e.tenant} for e in chosen]}


@admin_router.get("/v1/webhooks/{endpoint_id}/deliveries")
async def any_deliveries(
    endpoint_id: str,
    gateway: GatewayDep,
    _: AdminDep,
    limit: Annotated[int, Query(ge=1, le=LOG_ENTRIES)] = 50,
) -> dict[str, Any]:
    """An endpoint's delivery log, newest first (any tenant's)."""
    return await deliveries_of(gateway, await any_endpoint(gateway, endpoint_id), limit)


@admin_router.post("/v1/webhooks/{endpoint_id}/test")
async def any_test(
    endpoint_id: str, body: TestEvent, gateway: GatewayDep, _: AdminDep
) -> dict[str, Any]:
    """Sends a sample event to any tenant's endpoint now; the receiver's HTTP status."""
    endpoint = await any_endpoint(gateway, endpoint_id)
    try:
        status = await send_test(gateway, endpoint, body.event_type)
    except OpenAIError as exc:
        raise BadRequest(exc.detail) from None
    return {
        "webhook_endpoint_id": endpoint.id,
        "event_type": body.event_type,
        "status_code": status,
    }

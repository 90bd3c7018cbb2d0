"""Webhook endpoints in Redis: each tenant's endpoints, their signing secrets, their delivery
logs, and the generations waiting to become events (``genq_contract.webhooks`` has the keys).

The gateway writes endpoints (``/v1/webhook_endpoints``) and notes generations at admission;
the workers read endpoints to fan events out and sign deliveries, and write the logs. An
endpoint is one JSON value in one hash (its tenant inside), so a read is one HGET and an id
that is not the caller's tenant's reads as absent.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from genq import as_text
from genq_contract.webhooks import (
    LOG_ENTRIES,
    MAX_ENDPOINTS_PER_TENANT,
    ROTATED_SECRET_GRACE,
    WebhookKeys,
    new_secret,
    secret_hint,
)

ENDPOINT_PREFIX = "we_"
MAX_ERROR = 500
"""Characters of a delivery error kept in the log."""


class TooManyEndpointsError(Exception):
    """The tenant has :data:`MAX_ENDPOINTS_PER_TENANT` endpoints already."""


@dataclass(frozen=True)
class Endpoint:
    id: str
    tenant: str
    name: str
    url: str
    event_types: list[str]
    created_at: int
    updated_at: int
    secret: str
    old_secret: str | None = None
    """The secret before the last rotation, when it was kept valid."""
    old_secret_until: int = 0
    """Until when (epoch seconds) ``old_secret`` still signs."""

    def public(self) -> dict[str, Any]:
        """OpenAI's ``webhook_endpoint`` object (no secret)."""
        return {
            "id": self.id,
            "object": "webhook_endpoint",
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "name": self.name,
            "url": self.url,
            "event_types": list(self.event_types),
            "signing_secret_hint": secret_hint(self.secret),
        }

    def with_secret(self) -> dict[str, Any]:
        """The object with ``signing_secret`` (create and rotate answer it, once)."""
        return {**self.public(), "signing_secret": self.secret}

    def signing_secrets(self, now: float) -> list[str]:
        """The secrets a delivery is signed with now: the current one, and the previous one
        while its grace lasts."""
        if self.old_secret and now < self.old_secret_until:
            return [self.secret, self.old_secret]
        return [self.secret]

    def wants(self, event_type: str) -> bool:
        return event_type in self.event_types


def _decode(raw: Any) -> Endpoint | None:
    if raw is None:
        return None
    return Endpoint(**json.loads(as_text(raw)))


def _encode(endpoint: Endpoint) -> str:
    return json.dumps(asdict(endpoint))


async def create(
    redis: Any, namespace: str, tenant: str, name: str, url: str, event_types: Sequence[str]
) -> Endpoint:
    """A new endpoint with a fresh secret; :class:`TooManyEndpointsError` past the cap."""
    keys = WebhookKeys(namespace)
    now = int(time.time())
    endpoint = Endpoint(
        id=ENDPOINT_PREFIX + secrets.token_hex(12),
        tenant=tenant,
        name=name,
        url=url,
        event_types=list(dict.fromkeys(event_types)),
        created_at=now,
        updated_at=now,
        secret=new_secret(),
    )
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hset(keys.endpoints, endpoint.id, _encode(endpoint))
        pipe.zadd(keys.tenant(tenant), {endpoint.id: time.time() * 1000})
        pipe.zcard(keys.tenant(tenant))
        count = (await pipe.execute())[-1]
    if count > MAX_ENDPOINTS_PER_TENANT:  # two racing creates may both be refused: never both kept
        await delete(redis, namespace, endpoint)
        raise TooManyEndpointsError(
            f"a tenant may have at most {MAX_ENDPOINTS_PER_TENANT} webhook endpoints"
        )
    return endpoint


async def get(redis: Any, namespace: str, endpoint_id: str, tenant: str | None) -> Endpoint | None:
    """The endpoint, if it exists and is ``tenant``'s (None: any tenant's, for workers)."""
    endpoint = _decode(await redis.hget(WebhookKeys(namespace).endpoints, endpoint_id))
    if endpoint is None or (tenant is not None and endpoint.tenant != tenant):
        return None
    return endpoint


async def save(redis: Any, namespace: str, endpoint: Endpoint) -> None:
    await redis.hset(WebhookKeys(namespace).endpoints, endpoint.id, _encode(endpoint))


async def update(
    redis: Any,
    namespace: str,
    endpoint: Endpoint,
    *,
    name: str | None = None,
    url: str | None = None,
    event_types: Sequence[str] | None = None,
) -> Endpoint:
    """The endpoint with what was given changed; ``updated_at`` moves only on a change."""
    changes: dict[str, Any] = {}
    if name is not None and name != endpoint.name:
        changes["name"] = name
    if url is not None and url != endpoint.url:
        changes["url"] = url
    if event_types is not None and list(dict.fromkeys(event_types)) != endpoint.event_types:
        changes["event_types"] = list(dict.fromkeys(event_types))
    if not changes:
        return endpoint
    updated = replace(endpoint, **changes, updated_at=int(time.time()))
    await save(redis, namespace, updated)
    return updated


async def rotate(redis: Any, namespace: str, endpoint: Endpoint, keep_old: bool) -> Endpoint:
    """A new secret; the old one keeps signing for 24 h when ``keep_old``."""
    now = int(time.time())
    rotated = replace(
        endpoint,
        secret=new_secret(),
        old_secret=endpoint.secret if keep_old else None,
        old_secret_until=now + ROTATED_SECRET_GRACE if keep_old else 0,
        updated_at=now,
    )
    await save(redis, namespace, rotated)
    return rotated


async def delete(redis: Any, namespace: str, endpoint: Endpoint) -> None:
    """Removes the endpoint and its log; deliveries still queued for it are dropped."""
    keys = WebhookKeys(namespace)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hdel(keys.endpoints, endpoint.id)
        pipe.zrem(keys.tenant(endpoint.tenant), endpoint.id)
        pipe.delete(keys.log(endpoint.id))
        await pipe.execute()


async def of_tenant(redis: Any, namespace: str, tenant: str) -> list[Endpoint]:
    """The tenant's endpoints, newest first."""
    keys = WebhookKeys(namespace)
    ids = [as_text(i) for i in await redis.zrevrange(keys.tenant(tenant), 0, -1)]
    if not ids:
        return []
    raws = await redis.hmget(keys.endpoints, ids)
    return [e for e in (_decode(raw) for raw in raws) if e is not None and e.tenant == tenant]


async def every_endpoint(redis: Any, namespace: str) -> list[Endpoint]:
    """Every tenant's endpoints (at most the cap per tenant), by tenant, newest first."""
    raw = await redis.hgetall(WebhookKeys(namespace).endpoints)
    found = [e for e in (_decode(value) for value in raw.values()) if e is not None]
    return sorted(found, key=lambda e: (e.tenant, -e.created_at, e.id))


@dataclass(frozen=True)
class Page:
    data: list[Endpoint]
    has_more: bool


async def page(redis: Any, namespace: str, tenant: str, after: str | None, limit: int) -> Page:
    """Newest first, the ``limit`` endpoints after the one ``after`` names (OpenAI's cursor);
    an ``after`` that is not one of the tenant's starts from the top."""
    endpoints = await of_tenant(redis, namespace, tenant)
    start = 0
    if after:
        ids = [e.id for e in endpoints]
        start = ids.index(after) + 1 if after in ids else 0
    chosen = endpoints[start : start + limit]
    return Page(chosen, has_more=start + limit < len(endpoints))


async def has_endpoints(redis: Any, namespace: str, tenant: str) -> bool:
    return bool(await redis.zcard(WebhookKeys(namespace).tenant(tenant)))


# -- the delivery log ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryAttempt:
    """One POST of one event to one endpoint, and what came of it."""

    event_id: str
    event_type: str
    webhook_id: str
    """``webhook-id``: the same on every attempt of one delivery."""
    attempt: int
    outcome: str
    """delivered | retrying | given_up"""
    status: int | None = None
    error: str | None = None
    at: float = field(default=0.0)

    def fields(self) -> dict[str, str]:
        out = {
            "event_id": self.event_id,
            "event_type": self.event_type,
            "webhook_id": self.webhook_id,
            "attempt": str(self.attempt),
            "outcome": self.outcome,
        }
        if self.status is not None:
            out["status"] = str(self.status)
        if self.error is not None:
            out["error"] = self.error[:MAX_ERROR]
        return out

    @classmethod
    def from_entry(cls, entry_id: Any, raw: dict[Any, Any]) -> DeliveryAttempt:
        f = {as_text(k): as_text(v) for k, v in raw.items()}
        status = f.get("status")
        return cls(
            event_id=f.get("event_id", ""),
            event_type=f.get("event_type", ""),
            webhook_id=f.get("webhook_id", ""),
            attempt=int(f.get("attempt", 0)),
            outcome=f.get("outcome", "given_up"),
            status=int(status) if status else None,
            error=f.get("error"),
            at=int(as_text(entry_id).split("-", 1)[0]) / 1000,
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def record_attempt(
    redis: Any, namespace: str, endpoint_id: str, attempt: DeliveryAttempt
) -> None:
    """Appends to the endpoint's log, unless the endpoint was deleted (no log left behind)."""
    keys = WebhookKeys(namespace)
    if not await redis.hexists(keys.endpoints, endpoint_id):
        return
    await redis.xadd(keys.log(endpoint_id), attempt.fields(), maxlen=LOG_ENTRIES, approximate=True)


async def recent_attempts(
    redis: Any, namespace: str, endpoint_id: str, limit: int
) -> list[DeliveryAttempt]:
    """The newest ``limit`` attempts, newest first."""
    entries = await redis.xrevrange(WebhookKeys(namespace).log(endpoint_id), count=limit)
    return [DeliveryAttempt.from_entry(entry_id, fields) for entry_id, fields in entries]


# -- generations waiting to become events -------------------------------------------------------

KIND_RESPONSE = "response"
KIND_GENERATION = "generation"
_SEP = "\0"


@dataclass(frozen=True)
class PendingGeneration:
    """A generation admitted while its tenant had an endpoint: when it ends, its event."""

    kind: str
    """``response`` (a background response: data.id is ``resp_<id>``) or ``generation``."""
    tenant: str
    queue_prefix: str
    job_id: str
    object_id: str

    def member(self) -> str:
        return _SEP.join((self.kind, self.tenant, self.queue_prefix, self.job_id, self.object_id))

    @classmethod
    def from_member(cls, member: Any) -> PendingGeneration | None:
        parts = as_text(member).split(_SEP)
        return cls(*parts) if len(parts) == 5 else None


async def note_pending(redis: Any, namespace: str, pending: PendingGeneration) -> bool:
    """Remembers the generation until the workers publish its end (before its enqueue, so an
    accepted generation is never missed); nothing when the tenant has no endpoint. Whether it
    was noted."""
    keys = WebhookKeys(namespace)
    if not await redis.zcard(keys.tenant(pending.tenant)):
        return False
    await redis.zadd(keys.pending, {pending.member(): time.time() * 1000})
    return True

"""Publishing webhook events: one durable append to the events outbox per event.

The workers read the outbox through a consumer group and fan each event out to its tenant's
endpoints that subscribe to its type (``workers.webhook_delivery``), so an event published
while no worker runs is delivered when one starts. Event ids are deterministic (tenant, type,
object id): publishing the same event twice (a retried batch step, two sweepers) delivers it
once per endpoint.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from genq import Queue
from genq_contract.routing import DEFAULT_NAMESPACE
from genq_contract.webhooks import (
    BATCH_CANCELLED,
    BATCH_COMPLETED,
    BATCH_EVENTS,
    BATCH_EXPIRED,
    BATCH_FAILED,
    EVENT_TYPES,
    EVENTS_EXTRA,
    OUTBOX_ENTRIES,
    RESPONSE_CANCELLED,
    RESPONSE_COMPLETED,
    RESPONSE_EVENTS,
    RESPONSE_FAILED,
    RESPONSE_INCOMPLETE,
    WebhookKeys,
    deliveries_prefix,
    event_id,
)

__all__ = [
    "BATCH_CANCELLED",
    "BATCH_COMPLETED",
    "BATCH_EVENTS",
    "BATCH_EXPIRED",
    "BATCH_FAILED",
    "EVENT_TYPES",
    "RESPONSE_CANCELLED",
    "RESPONSE_COMPLETED",
    "RESPONSE_EVENTS",
    "RESPONSE_FAILED",
    "RESPONSE_INCOMPLETE",
    "events_stream",
    "publish",
]


def namespace_from_env() -> str:
    """The queue namespace of this process (``GENQ_QUEUE_NAMESPACE``), for callers that do
    not pass one."""
    return os.environ.get("GENQ_QUEUE_NAMESPACE") or DEFAULT_NAMESPACE


def events_stream(redis: Any, namespace: str) -> str:
    """The events outbox's key (in the deliveries queue's slot)."""
    return Queue(redis, deliveries_prefix(namespace)).extra_key(EVENTS_EXTRA)


async def publish(
    redis: Any,
    *,
    tenant: str,
    type: str,
    object_id: str,
    namespace: str | None = None,
    event: str | None = None,
) -> None:
    """Appends event ``type`` about ``object_id`` (a response, generation or batch id) for
    ``tenant`` to the outbox; returns once Redis holds it. A tenant with no endpoint costs
    one ZCARD and nothing is written. ``event``: its id (default: deterministic, see the
    module); ``namespace``: default ``GENQ_QUEUE_NAMESPACE``."""
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown webhook event type {type!r}")
    ns = namespace or namespace_from_env()
    if not await redis.zcard(WebhookKeys(ns).tenant(tenant)):
        return
    await redis.xadd(
        events_stream(redis, ns),
        {
            # one JSON field, as the dead-letter outbox's notices: the same reader takes both
            "notice": json.dumps(
                {
                    "tenant": tenant,
                    "type": type,
                    "object_id": object_id,
                    "event": event or event_id(tenant, type, object_id),
                    "created_at": int(time.time()),
                }
            )
        },
        maxlen=OUTBOX_ENTRIES,
        approximate=True,
    )

"""Webhook endpoints and their events (OpenAI's ``/v1/webhook_endpoints``): the event types,
the limits, the event body, and the Redis keys the gateway and the workers share.

Keys:

- under the gateway namespace (``<namespace>:gateway:{webhooks}:...``): the endpoints (one hash,
  id -> JSON record), each tenant's endpoint ids (a zset scored by creation time: the list
  route's order and pagination), one delivery log stream per endpoint, and the generations
  waiting to become events (``pending``, a zset scored by when they were admitted);
- under the deliveries queue's hash tag (``<namespace>-webhooks``, its own genq queue): the
  events outbox, a stream :func:`genq_services.webhook_events.publish` appends to and the
  workers read through a consumer group (``workers.webhook_delivery``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from typing import Any, Final

RESPONSE_COMPLETED: Final = "response.completed"
RESPONSE_FAILED: Final = "response.failed"
RESPONSE_CANCELLED: Final = "response.cancelled"
RESPONSE_INCOMPLETE: Final = "response.incomplete"
BATCH_COMPLETED: Final = "batch.completed"
BATCH_FAILED: Final = "batch.failed"
BATCH_CANCELLED: Final = "batch.cancelled"
BATCH_EXPIRED: Final = "batch.expired"

RESPONSE_EVENTS: Final = (
    RESPONSE_COMPLETED,
    RESPONSE_FAILED,
    RESPONSE_CANCELLED,
    RESPONSE_INCOMPLETE,
)
BATCH_EVENTS: Final = (BATCH_COMPLETED, BATCH_FAILED, BATCH_CANCELLED, BATCH_EXPIRED)
EVENT_TYPES: Final = RESPONSE_EVENTS + BATCH_EVENTS
"""Every event type an endpoint may subscribe to (``event_types``)."""

MAX_ENDPOINTS_PER_TENANT: Final = 20
MAX_URL_LENGTH: Final = 2048
MAX_NAME_LENGTH: Final = 256
LOG_ENTRIES: Final = 200
"""Delivery attempts kept per endpoint (about: ``MAXLEN ~``)."""
OUTBOX_ENTRIES: Final = 100_000
"""Events the outbox keeps (about) while no worker reads it."""
SECRET_PREFIX: Final = "whsec_"
ROTATED_SECRET_GRACE: Final = 86_400
"""Seconds a rotated-out secret still signs deliveries when rotation keeps it."""


def event_id(tenant: str, type_: str, object_id: str) -> str:
    """The id of the one event of ``type_`` about ``object_id`` (deterministic, so the same
    terminal state published twice, by a retry or a second sweeper, is one event)."""
    digest = hashlib.sha256(f"{tenant}\0{type_}\0{object_id}".encode()).hexdigest()
    return f"evt_{digest[:32]}"


def event_body(event_id_: str, type_: str, created_at: int, object_id: str) -> dict[str, Any]:
    """The JSON body OpenAI's webhooks carry (``openai.types.webhooks``)."""
    return {
        "id": event_id_,
        "object": "event",
        "type": type_,
        "created_at": created_at,
        "data": {"id": object_id},
    }


def encode_body(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """One Standard Webhooks signature, ``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``,
    keyed with the base64 key after ``whsec_``."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signature_header(secrets: list[str], message_id: str, timestamp: int, body: bytes) -> str:
    """``webhook-signature``: one signature per secret still valid, space separated (a
    receiver accepts the message when any of them matches)."""
    return " ".join(sign(secret, message_id, timestamp, body) for secret in secrets)


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(32)).decode()


def secret_hint(secret: str) -> str:
    """What ``signing_secret_hint`` shows: the prefix and the last four characters."""
    return f"{SECRET_PREFIX}...{secret[-4:]}"


def deliveries_prefix(namespace: str) -> str:
    """The genq queue prefix deliveries run on (and whose slot holds the events outbox)."""
    return f"{namespace}-webhooks"


EVENTS_EXTRA: Final = "webhook-events"
"""The events outbox: ``Queue(redis, deliveries_prefix(ns)).extra_key(EVENTS_EXTRA)``."""


@dataclass(frozen=True)
class WebhookKeys:
    """The webhook keys under the gateway namespace."""

    namespace: str

    def _key(self, name: str) -> str:
        # one hash tag: a Redis Cluster keeps an endpoint, its tenant's list and the pending
        # generations in one slot, so a MULTI may span them
        return f"{self.namespace}:gateway:{{webhooks}}:{name}"

    @property
    def endpoints(self) -> str:
        """hash: endpoint id -> its record (JSON, with its tenant and secrets)."""
        return self._key("endpoints")

    def tenant(self, tenant: str) -> str:
        """zset: the tenant's endpoint ids, scored by creation time (ms)."""
        return self._key(f"tenant:{tenant}")

    def log(self, endpoint_id: str) -> str:
        """stream: the endpoint's delivery attempts, newest last."""
        return self._key(f"log:{endpoint_id}")

    @property
    def sweeping(self) -> str:
        """string: the worker process sweeping ``pending`` now (expires after one interval),
        so the sweep costs Redis the same however many worker processes run."""
        return self._key("sweeping")

    @property
    def pending(self) -> str:
        """zset: ``<kind>\\0<tenant>\\0<queue prefix>\\0<job id>\\0<object id>`` of admitted
        generations whose tenant had an endpoint, scored by admission time (ms); the workers'
        sweeper publishes each one's event when it ends, then removes it."""
        return self._key("pending")

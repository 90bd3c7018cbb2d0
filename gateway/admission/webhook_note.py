"""Noting, at admission, that a generation's end owes its tenant's webhook endpoints an event.

Written before the enqueue, so a generation the gateway accepted is always in the set the
workers sweep (``workers.webhook_delivery``); a note whose enqueue then fails (or was a
replay) names a job that never appears and is dropped after a grace. One ZCARD when the
tenant has no endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

from genq_services.webhook_endpoints import PendingGeneration, note_pending

from ..state import Gateway


@dataclass(frozen=True)
class WebhookNote:
    """What the route that admits a generation says its end is."""

    kind: str
    """``response`` (a background response) or ``generation`` (a native one)."""
    id_prefix: str = ""
    """Put before the job id to make the event's ``data.id`` (``resp_`` for a response)."""


async def note_end(
    gateway: Gateway, note: WebhookNote, tenant: str, queue_prefix: str, job_id: str
) -> None:
    pending = PendingGeneration(note.kind, tenant, queue_prefix, job_id, note.id_prefix + job_id)
    await note_pending(gateway.redis, gateway.settings.queue_namespace, pending)

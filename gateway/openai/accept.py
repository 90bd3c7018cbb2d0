"""What both OpenAI creation routes do once they hold what their answer needs, if any (a
stream hold, :func:`gateway.streaming.sse.stream_hold`, or a wait hold, ``gateway.open_waits``:
a 429 for either must mean nothing was enqueued): check the model the way OpenAI does (404
``model_not_found``), then hand the request to the native
:func:`gateway.admission.submit.submit` (the same tenant limits and idempotency as
``POST /v1/generations``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from genq_contract.routing import ModelNotAllowedError

from ..access.auth import Principal
from ..access.owned_jobs import OwnedJob, load_owned_job
from ..admission.schemas import GenerationRequest, idempotency_key_header
from ..admission.submit import submit
from ..admission.webhook_note import WebhookNote
from ..state import Gateway
from .errors import model_not_found

IdempotencyKey = Annotated[
    str | None,
    idempotency_key_header("The same key and body re-attach to the same generation"),
]


@dataclass(frozen=True)
class Accepted:
    owned: OwnedJob
    created: bool
    """This request made the generation (False: an Idempotency-Key replay found it)."""


async def accept(
    gateway: Gateway,
    principal: Principal,
    body: GenerationRequest,
    idempotency_key: str | None,
    notify: WebhookNote | None = None,
) -> Accepted:
    """Enqueues the generation (or finds the one this Idempotency-Key made); ``notify``: its
    end is a webhook event (a background response's)."""
    try:
        gateway.queues.for_model(body.model)
    except ModelNotAllowedError as exc:
        raise model_not_found(body.model) from exc
    submitted = await submit(gateway, principal, body, idempotency_key, notify, read_back=True)
    if submitted.job is None:
        owned = await load_owned_job(gateway, submitted.id, principal.tenant)
    else:  # read in the enqueue's round trip: this caller's own new job
        owned = OwnedJob(*gateway.queues.locate(submitted.id), submitted.job)
    return Accepted(owned, created=not submitted.deduplicated)

"""The Responses API subset: create (background, stream, or wait), retrieve (poll or resume
the stream with ``starting_after``), cancel.

A stream holds one of the tenant's stream holds and a wait one of its wait holds, taken before
the generation is enqueued (:mod:`gateway.streaming.sse`); ``background: true`` without
``stream`` holds neither (it answers at once)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from genq import JobStatus

from ..access.owned_jobs import OwnedJob, load_owned_job
from ..admission.cancel import cancel
from ..admission.webhook_note import WebhookNote
from ..deps import GatewayDep, PrincipalDep
from ..state import Gateway
from ..streaming.sse import StreamHold, stream_hold
from ..streaming.terminal import settled
from ..telemetry import viewed
from .accept import IdempotencyKey, accept
from .connection_bound import end_or_leave, tied
from .errors import OpenAIError, OpenAIRoute
from .objects import RESPONSE_PREFIX, ResponseOutput, job_id_of, response_object
from .response_chain import previous_history
from .response_events import current_output, response_stream
from .schemas import ResponseCreate

router = APIRouter(prefix="/v1/responses", tags=["openai"], route_class=OpenAIRoute)


async def as_response(owned: OwnedJob) -> dict[str, Any]:
    return response_object(owned.job, await current_output(owned.queue, owned.job))


def event_stream(
    hold: StreamHold, gateway: Gateway, owned: OwnedJob, after: int, cancel: bool
) -> Response:
    events = response_stream(gateway, owned, after, hold.until, goes_on=not cancel)
    return hold.respond(viewed(owned.job, owned.queue.prefix, tied(events, owned, cancel)))


@router.post("")
async def create_response(
    body: ResponseCreate,
    request: Request,
    gateway: GatewayDep,
    principal: PrincipalDep,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """``background: true`` answers at once (``queued``); ``stream: true`` streams the events;
    otherwise the answer waits for the end. Without ``background`` or an Idempotency-Key the
    generation is tied to this request: disconnecting cancels it."""
    history = None
    if body.previous_response_id is not None:
        history = await previous_history(gateway, principal.tenant, body.previous_response_id)
    generation = body.generation(gateway.settings.max_image_bytes, history)
    bound = body.background or idempotency_key is not None
    # a background response's end is a webhook event (as OpenAI sends them)
    notify = WebhookNote("response", RESPONSE_PREFIX) if body.background else None
    if body.stream:
        with stream_hold(gateway, principal.tenant) as hold:  # 429 here: nothing enqueued
            owned = (await accept(gateway, principal, generation, idempotency_key, notify)).owned
            return event_stream(hold, gateway, owned, -1, cancel=not bound)
    if body.background:
        accepted = await accept(gateway, principal, generation, idempotency_key, notify)
        owned = accepted.owned
        if accepted.created:  # as OpenAI answers: the state at acceptance, even if a worker
            # already picked it up (a replay shows the state it is in now)
            return JSONResponse(response_object(owned.job, ResponseOutput(), status="queued"))
        return JSONResponse(await as_response(owned))
    with gateway.open_waits.hold(principal.tenant):  # 429 here: nothing enqueued
        owned = (await accept(gateway, principal, generation, idempotency_key)).owned
        job = await end_or_leave(request, gateway, owned, cancel=not bound)
    if job is None:
        return Response(status_code=499)  # nobody is listening any more
    return JSONResponse(await as_response(OwnedJob(owned.provider, owned.queue, job)))


@router.get("/{response_id}")
async def retrieve_response(
    response_id: str,
    gateway: GatewayDep,
    principal: PrincipalDep,
    stream: bool = False,
    starting_after: Annotated[int | None, Query(ge=-1)] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=20)] = None,
) -> Response:
    """The response as it is now; with ``stream=true`` its events numbered above
    ``starting_after`` (or ``Last-Event-ID``), live until it ends."""
    owned = await load_owned_job(gateway, job_id_of(response_id), principal.tenant)
    if not stream:
        return JSONResponse(await as_response(owned))
    after = starting_after if starting_after is not None else _last_event(last_event_id)
    with stream_hold(gateway, principal.tenant) as hold:
        return event_stream(hold, gateway, owned, after, cancel=False)


def _last_event(value: str | None) -> int:
    if not value:
        return -1
    if not (value.isascii() and value.isdigit()):
        raise OpenAIError(400, "Last-Event-ID must be a sequence_number", param="Last-Event-ID")
    return int(value)


@router.post("/{response_id}/cancel")
async def cancel_response(
    response_id: str, gateway: GatewayDep, principal: PrincipalDep
) -> Response:
    """Cancels the response; idempotent. A finished response is returned as it is. A running
    one is stopped by its worker's next step: the answer waits a little for that, and shows
    ``cancelled`` with the usage of what was generated."""
    owned = await load_owned_job(gateway, job_id_of(response_id), principal.tenant)
    cancelled, job = await cancel(gateway, owned)
    if cancelled:
        job = await settled(gateway, OwnedJob(owned.provider, owned.queue, job), principal.tenant)
    view = OwnedJob(owned.provider, owned.queue, job)
    body = await as_response(view)
    if cancelled and job.status is not JobStatus.CANCELLED:
        body["status"] = "cancelled"  # cancel() returned True: it settles cancelled
    return JSONResponse(body)

"""``POST /v1/ui/chat``, ``GET /v1/ui/chat/{chatId}/stream``, ``POST /v1/ui/chat/{chatId}/stop``:
the routes ``useChat``'s ``DefaultChatTransport`` calls, and the Stop it lacks.

Each stream holds one of the tenant's stream holds, taken before anything is enqueued
(:mod:`gateway.streaming.sse`: 429 past ``GENQ_TENANT_MAX_STREAMS``, nothing done); which
generation a POST gets is :mod:`gateway.ui_chat.attach`'s to say. A chat id is its tenant's:
another tenant's is a chat with nothing running (204).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response
from fastapi.responses import JSONResponse

from ..access.owned_jobs import OwnedJob
from ..admission.cancel import cancel
from ..deps import GatewayDep, PrincipalDep
from ..errors import ERRORS
from ..streaming.sse import stream_hold
from ..streaming.terminal import settled
from ..telemetry import viewed
from .active import ChatPointer
from .attach import asked, attach, message_id_of, running
from .schemas import CHAT_ID_PATTERN, StopResult, UIChatRequest
from .stream import HEADERS, ui_stream

router = APIRouter(prefix="/v1/ui/chat", tags=["ai-sdk"], responses={**ERRORS, 409: ERRORS[400]})

ChatId = Annotated[str, Path(alias="chatId", pattern=CHAT_ID_PATTERN, description="useChat's id")]
STREAM: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "The UI message stream"},
}


@router.post("", response_class=Response, responses=STREAM)
async def send_chat_message(
    body: UIChatRequest, gateway: GatewayDep, principal: PrincipalDep
) -> Response:
    """Starts the answer to the chat's messages (or re-attaches to it: the same message sent
    again) and streams it as UI message chunks. 409 while another message's answer runs."""
    request = asked(body, gateway.settings.max_image_bytes)
    with stream_hold(gateway, principal.tenant) as hold:  # 429 here: nothing enqueued
        owned = await attach(gateway, principal, request)
        stream = ui_stream(
            gateway, owned, body.id, message_id_of(owned.job), hold.until, hold.ending
        )
        return hold.respond(viewed(owned.job, owned.queue.prefix, stream), headers=HEADERS)


@router.get(
    "/{chatId}/stream",
    response_class=Response,
    responses={**STREAM, 204: {"description": "Nothing running in this chat"}},
)
async def resume_chat_stream(
    chat_id: ChatId, gateway: GatewayDep, principal: PrincipalDep
) -> Response:
    """The chat's running answer from its start, then live until it ends (the AI SDK's
    resume is a replay); 204 when nothing runs."""
    pointer = ChatPointer(gateway, principal.tenant, chat_id)
    seen = await pointer.get()
    owned = await running(gateway, seen, principal.tenant)
    if owned is None:
        return Response(status_code=204)
    await pointer.point(seen, owned.job.id)  # renews it
    with stream_hold(gateway, principal.tenant) as hold:
        message_id = message_id_of(owned.job)
        stream = ui_stream(gateway, owned, chat_id, message_id, hold.until, hold.ending)
        return hold.respond(viewed(owned.job, owned.queue.prefix, stream), headers=HEADERS)


@router.post(
    "/{chatId}/stop",
    response_model=StopResult,
    responses={204: {"description": "Nothing running in this chat: nothing to stop"}},
)
async def stop_chat(chat_id: ChatId, gateway: GatewayDep, principal: PrincipalDep) -> Response:
    """Stops the chat's running answer: the provider's call is cancelled and every stream of
    it ends with ``abort`` and ``finish``. Answers once the worker let go (5 s at most), so
    a resume after it is 204; 204 when nothing runs."""
    seen = await ChatPointer(gateway, principal.tenant, chat_id).get()
    owned = await running(gateway, seen, principal.tenant)
    if owned is None:
        return Response(status_code=204)
    cancelled, job = await cancel(gateway, owned)
    if cancelled:
        job = await settled(gateway, OwnedJob(owned.provider, owned.queue, job), principal.tenant)
    result = StopResult(generationId=job.id, cancelled=cancelled, status=job.status.value)
    return JSONResponse(result.model_dump())

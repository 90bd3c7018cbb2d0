"""Which generation a chat's request gets: a new one, the one it re-attaches to, or a 409.

The Idempotency-Key of a chat's generation is derived from the chat, never sent:
``ui-chat:<chat id>:<trigger>:<anchor>:<digest>``, where the anchor is the last message's id for
``submit-message``, the ``messageId`` asked again for ``regenerate-message`` (or, when the app
left it out, the chat's previous generation), and the digest the first 16 hex digits of the
generation's fingerprint (its model, messages and params). So the same message sent again (a
retry, a second tab) finds the same generation, running or completed, and the provider is called
once; a message edited under the same id, or an answer asked again once the last one ended, is
a new one. Keys are scoped to the tenant and live as the other routes' do (released when the
generation failed or was cancelled).

The chat points at the generation it last started (:class:`~gateway.ui_chat.active.ChatPointer`).
While that one runs, a request for anything else is refused (409 naming it and the stop route):
genq never cancels billed work implicitly; the app stops it first, or waits. The pointer moves
by compare and set: of two requests racing to start the chat's next generation one wins, and
the other, which may already have enqueued its own, cancels that (nobody saw it) and gets 409.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pydantic import ValidationError

from genq import TERMINAL, Job
from genq_contract.chat import ChatFormatError
from genq_contract.payload import payload_fields

from ..access.auth import Principal
from ..access.owned_jobs import OwnedJob, load_owned_job
from ..admission.cancel import cancel
from ..admission.schemas import GenerationRequest
from ..admission.submit import submit
from ..errors import BadRequest, Conflict, NotFound, Unprocessable
from ..state import Gateway
from .active import ChatPointer
from .chat_messages import Conversation, check_images, conversation
from .schemas import UIChatRequest

KEY_PREFIX = "ui-chat"
DIGEST_LENGTH = 16
CHAT_KEY = "genq:ui_chat"
"""In a generation's metadata: the chat that started it."""
MESSAGE_KEY = "genq:ui_message_id"
"""In a generation's metadata: the assistant message its parts extend, when it continues one
(the ``start`` part names it; otherwise the message's id is the generation's)."""
RACES = 3


@dataclass(frozen=True)
class Asked:
    """What a ``POST /v1/ui/chat`` asks for: the chat, and the generation it would start."""

    body: UIChatRequest
    generation: GenerationRequest
    conversation: Conversation

    @functools.cached_property
    def digest(self) -> str:
        return self.generation.fingerprint()[:DIGEST_LENGTH]

    def key(self, previous: str | None) -> str:
        """The Idempotency-Key of the generation (``previous``: the chat's last one)."""
        body = self.body
        if body.trigger == "submit-message":
            anchor = body.messages[-1].id
        else:
            anchor = body.message_id or previous or "-"
        return f"{KEY_PREFIX}:{body.id}:{body.trigger}:{anchor}:{self.digest}"

    def asks_for(self, job: Job) -> bool:
        """Whether ``job`` is the generation this request would start (or started it)."""
        key = job.idempotency_key or ""
        family = f":{KEY_PREFIX}:{self.body.id}:{self.body.trigger}:"
        return family in key and key.endswith(f":{self.digest}")


def asked(body: UIChatRequest, max_image_bytes: int) -> Asked:
    """The request checked and translated; 422 naming the request's field for what cannot be
    sent."""
    if {"tools", "tool_choice"} & body.params.keys():
        raise Unprocessable("params: give tools and tool_choice as the body's own fields")
    try:
        said = conversation(body.messages, body.system)
        check_images(said, max_image_bytes)
    except ChatFormatError as exc:
        raise Unprocessable(str(exc)) from None
    params = dict(body.params)
    if body.tools is not None:
        params["tools"] = body.tools
    if body.tool_choice is not None:
        params["tool_choice"] = body.tool_choice
    metadata = {**body.metadata, CHAT_KEY: body.id}
    if body.continues is not None:
        metadata[MESSAGE_KEY] = body.continues
    try:
        generation = GenerationRequest.model_validate(
            {"model": body.model, "messages": said.messages, "params": params, "metadata": metadata}
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise Unprocessable(said.ui_field(f"{where}: {first.get('msg')}")) from None
    return Asked(body, generation, said)


def message_id_of(job: Job) -> str:
    """The id of the assistant message a generation's parts make (or extend)."""
    metadata = payload_fields(job.payload).get("metadata")
    continued = metadata.get(MESSAGE_KEY) if isinstance(metadata, dict) else None
    return continued if isinstance(continued, str) and continued else job.id


async def running(gateway: Gateway, job_id: str | None, tenant: str) -> OwnedJob | None:
    """The generation ``job_id`` if it is ``tenant``'s and has not ended."""
    if not job_id:
        return None
    try:
        owned = await load_owned_job(gateway, job_id, tenant)
    except NotFound:
        return None
    return None if owned.job.status in TERMINAL else owned


async def attach(gateway: Gateway, principal: Principal, request: Asked) -> OwnedJob:
    """The generation the request's stream shows (see the module's docstring)."""
    tenant, chat_id = principal.tenant, request.body.id
    pointer = ChatPointer(gateway, tenant, chat_id)
    made: OwnedJob | None = None
    created = False  # this request enqueued ``made``: no other request has seen it
    for _ in range(RACES):
        seen = await pointer.get()
        live = await running(gateway, seen, tenant)
        if live is not None and (made is None or live.job.id != made.job.id):
            if made is not None and created:
                await cancel(gateway, made)
            if not request.asks_for(live.job):
                raise Conflict(busy(chat_id, live.job.id))
            await pointer.point(live.job.id, live.job.id)  # renews it
            return live
        if made is None:
            made, created = await _submit(gateway, principal, request, seen)
            if not created and made.job.status in TERMINAL:
                return made  # sent again after it ended: its stream is replayed as it was
        if await pointer.point(seen, made.job.id) is None:
            return made
    raise Conflict(f"chat {chat_id!r} changed under this request: send it again")


async def _submit(
    gateway: Gateway, principal: Principal, request: Asked, previous: str | None
) -> tuple[OwnedJob, bool]:
    """The generation of the request's key, and whether this call enqueued it."""
    try:
        submitted = await submit(gateway, principal, request.generation, request.key(previous))
    except (BadRequest, Unprocessable) as exc:
        # The admission checks name the translated messages' fields: name the request's.
        raise type(exc)(request.conversation.ui_field(exc.detail)) from None
    owned = await load_owned_job(gateway, submitted.id, principal.tenant)
    return owned, not submitted.deduplicated


def busy(chat_id: str, generation_id: str) -> str:
    return (
        f"chat {chat_id!r} has a generation running for another message ({generation_id}): "
        f"wait for it to end, or stop it first with POST /v1/ui/chat/{chat_id}/stop"
    )

"""Chat Completions, executed as a genq generation (queued, leased, retried, cancellable).

``stream: false`` waits for the result; ``stream: true`` streams ``chat.completion.chunk``s
(``data:`` lines with the stream entry id as ``id:``, so ``Last-Event-ID`` resumes) and ends
with ``data: [DONE]``: text as ``delta.content``, reasoning as ``delta.reasoning_content``, tool
calls as ``delta.tool_calls`` by index (:mod:`gateway.openai.chat_deltas`). A worker restart
shows as a chunk with an empty delta and ``"genq": {"event": "restarted"}``: drop the text,
reasoning and tool calls received so far. With an Idempotency-Key a
second identical POST re-attaches to the same generation (a stream replays from its start or
from ``Last-Event-ID``); without one, a client that disconnects cancels the generation.

A stream holds a stream hold and a wait a wait hold of the tenant, taken before the
generation is enqueued (:mod:`gateway.streaming.sse`); a stream the gateway ends before the
generation did (``GENQ_SSE_MAX_DURATION``) ends with an error chunk (``code: "stream_cut"``).

The route's ordinary requests skip FastAPI's request handling (:mod:`gateway._fast_path`): a
chat stream's first token need not wait for it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse

from genq import Job, JobStatus

from .._fast_path import fast_path_route, json_body
from ..access.auth import Principal
from ..access.owned_jobs import OwnedJob
from ..admission.schemas import well_formed_idempotency_key
from ..deps import GatewayDep, PrincipalDep, gateway_and_caller
from ..state import Gateway
from ..streaming.cursors import parse_cursor
from ..streaming.frames import DONE
from ..streaming.sse import stream_hold
from ..telemetry import viewed
from .accept import IdempotencyKey, accept
from .chat_deltas import ChatDeltas
from .connection_bound import CUT, StreamCut, end_or_leave, tied
from .errors import OpenAIError, OpenAIRoute, error_body
from .objects import chat_chunk, chat_completion, chat_usage, error_code, result_of
from .response_events import KEEPALIVE
from .schemas import ChatCompletionCreate

router = APIRouter(prefix="/v1/chat", tags=["openai"], route_class=OpenAIRoute)

RESTARTED = {"event": "restarted"}
LAST_EVENT_ID_LENGTH = 60
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=LAST_EVENT_ID_LENGTH)]


def frame(body: dict[str, Any], entry_id: str | None = None) -> bytes:
    data = json.dumps(body, separators=(",", ":"))
    return (f"id: {entry_id}\n" if entry_id else "").encode() + f"data: {data}\n\n".encode()


_MARK = "\x00genq text\x00"


class TextFrames:
    """One stream's text chunks, each the bytes :func:`frame` makes of ``chat_chunk(job,
    {"content": text}, **extra)``: that chunk's JSON is made once, and each text's JSON string
    put in its place (a viewer's stream is mostly these; a chunk's dict and JSON made for each
    took two thirds of the frame's time)."""

    __slots__ = ("_after", "_before", "_extra", "_job")

    def __init__(self, job: Job, **extra: Any) -> None:
        self._job, self._extra = job, extra
        body = json.dumps(chat_chunk(job, {"content": _MARK}, **extra), separators=(",", ":"))
        parts = body.split(json.dumps(_MARK))
        # Two parts unless the job's own fields held the mark: then each frame is made whole.
        self._before, self._after = (parts[0], parts[1]) if len(parts) == 2 else ("", "")

    def frame(self, text: str, entry_id: str) -> bytes:
        if not self._before:
            return frame(chat_chunk(self._job, {"content": text}, **self._extra), entry_id)
        head = f"id: {entry_id}\n" if entry_id else ""
        return f"{head}data: {self._before}{json.dumps(text)}{self._after}\n\n".encode()


def failure(job: Job) -> OpenAIError:
    """The error a chat client gets for a generation that did not complete."""
    if job.status is JobStatus.CANCELLED:
        return OpenAIError(409, "the generation was cancelled", code="cancelled")
    message = job.error or "the generation failed"
    if error_code(message) == "rate_limit_exceeded":
        return OpenAIError(429, message, code="rate_limit_exceeded", headers={"Retry-After": "1"})
    if job.dead_reason == "terminal":
        return OpenAIError(400, message)
    return OpenAIError(500, message, code="server_error")


def ending(job: Job, include_usage: bool, entry_id: str) -> list[bytes]:
    """The last frames: the finish chunk (and usage) and ``[DONE]``, or the error."""
    if job.status is not JobStatus.COMPLETED:
        error = failure(job)
        return [frame(error_body(error.status, error.detail, error.code), entry_id)]
    result = result_of(job)
    frames = [
        frame(
            chat_chunk(
                job,
                {},
                result.get("finish_reason") or "stop",
                **({"usage": None} if include_usage else {}),
            ),
            entry_id,
        )
    ]
    if include_usage:
        frames.append(frame(chat_chunk(job, None, usage=chat_usage(job, result.get("text") or ""))))
    return [*frames, DONE]


def cut_frame(bound: bool) -> bytes:
    """The last frame of a stream that ended before its generation did."""
    then = (
        "it goes on: POST again with the same Idempotency-Key and Last-Event-ID to resume"
        if bound
        else "it was cancelled (with an Idempotency-Key it would go on, and could be resumed)"
    )
    return frame(error_body(503, f"{CUT}; {then}", code="stream_cut"))


async def chunk_stream(
    gateway: Gateway,
    owned: OwnedJob,
    include_usage: bool,
    cursor: str | None,
    until: float,
    bound: bool,
) -> AsyncGenerator[bytes, None]:
    """The chunks after ``cursor``, until the generation ends; at ``until`` (the event loop's
    time) the stream ends with :func:`cut_frame` and :class:`StreamCut`."""
    job = owned.job
    usage: dict[str, Any] = {"usage": None} if include_usage else {}
    if cursor is None:
        yield frame(chat_chunk(job, {"role": "assistant", "content": "", "refusal": None}, **usage))
    deltas = ChatDeltas()
    texts = TextFrames(job, **usage)
    if cursor is not None:
        deltas.prime(await owned.queue.events_range(job.id, upto=cursor))
    tail = gateway.tails[owned.provider]
    ended = False
    async with contextlib.aclosing(tail.follow(job.id, cursor, until=until)) as batches:
        async for batch in batches:
            if not batch:
                yield KEEPALIVE
                continue
            out: list[bytes] = []
            for entry in batch:
                delta = deltas.delta(entry)
                if delta is not None and delta.keys() == {"content"}:
                    out.append(texts.frame(delta["content"], entry.id))
                elif delta is not None:
                    out.append(frame(chat_chunk(job, delta, **usage), entry.id))
                elif entry.type == "restarted":
                    restart = chat_chunk(job, {"content": ""}, genq=RESTARTED, **usage)
                    out.append(frame(restart, entry.id))
                elif entry.terminal:
                    final = await owned.queue.get(job.id) or job
                    out.extend(ending(final, include_usage, entry.id))
                    ended = True
            if out:
                yield b"".join(out)
    if not ended:
        yield cut_frame(bound)
        raise StreamCut


async def create_chat_completion(
    body: ChatCompletionCreate,
    request: Request,
    gateway: GatewayDep,
    principal: PrincipalDep,
    idempotency_key: IdempotencyKey = None,
    last_event_id: LastEventId = None,
) -> Response:
    """A chat completion; see the module's docstring for re-attaching and cancelling."""
    return await complete(request, gateway, principal, body, idempotency_key, last_event_id)


async def create_chat_completion_directly(request: Request) -> Response | None:
    """:func:`create_chat_completion` for a request FastAPI would take as it is: a JSON body
    that is a valid ``ChatCompletionCreate``, a well-formed Idempotency-Key and Last-Event-ID
    or none. Any other is declined (``None``) before anything happened, for FastAPI to answer
    (in OpenAI's shape, as the fast path's own errors are)."""
    headers = request.headers
    idempotency_key = headers.get("idempotency-key")
    if not well_formed_idempotency_key(idempotency_key):
        return None
    last_event_id = headers.get("last-event-id")
    if last_event_id is not None and len(last_event_id) > LAST_EVENT_ID_LENGTH:
        return None
    body = await json_body(request, ChatCompletionCreate)
    if body is None:
        return None
    gateway, principal = await gateway_and_caller(request)
    return await complete(request, gateway, principal, body, idempotency_key, last_event_id)


async def complete(
    request: Request,
    gateway: Gateway,
    principal: Principal,
    body: ChatCompletionCreate,
    idempotency_key: str | None,
    last_event_id: str | None,
) -> Response:
    """What both ways into the route do once they hold its parameters: the stream, or the
    wait for the result."""
    generation = body.generation(gateway.settings.max_image_bytes)
    bound = idempotency_key is not None
    if body.stream:
        cursor = parse_cursor(last_event_id, "Last-Event-ID") if bound else None
        with stream_hold(gateway, principal.tenant) as hold:  # 429 here: nothing enqueued
            owned = (await accept(gateway, principal, generation, idempotency_key)).owned
            chunks = chunk_stream(gateway, owned, body.include_usage, cursor, hold.until, bound)
            stream = tied(chunks, owned, cancel=not bound)
            return hold.respond(viewed(owned.job, owned.queue.prefix, stream))
    with gateway.open_waits.hold(principal.tenant):  # 429 here: nothing enqueued
        owned = (await accept(gateway, principal, generation, idempotency_key)).owned
        job = await end_or_leave(request, gateway, owned, cancel=not bound)
    if job is None:
        return Response(status_code=499)  # nobody is listening any more
    if job.status is not JobStatus.COMPLETED:
        raise failure(job)
    return JSONResponse(chat_completion(job))


router.add_api_route(
    "/completions",
    create_chat_completion,
    methods=["POST"],
    route_class_override=fast_path_route(create_chat_completion_directly, around=OpenAIRoute),
)

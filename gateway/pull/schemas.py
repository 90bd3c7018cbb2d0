"""Request and response bodies of the pull/ack routes (workers anywhere: routes/pull.py).

The limits are here, once, and documented in docs/GATEWAY.md ("Workers anywhere"); the whole
body is also bounded by ``GENQ_MAX_BODY_BYTES``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from genq_contract.parts import ToolArgs, ToolCallStart, ToolDone
from genq_contract.result import GenerationResult

MAX_PULL_JOBS = 100
"""Jobs one pull may take."""
MIN_VISIBILITY = 1.0
MAX_VISIBILITY = 3600.0
"""Seconds a pulled job stays invisible to other pullers and workers (pull and extend)."""
MAX_PULL_WAIT = 20.0
"""The longest a pull waits for a job (long poll)."""
MAX_EVENTS_PER_CALL = 500
MAX_RECEIPT = 400
MAX_ERROR = 2000
MAX_RETRY_AFTER = 86_400.0

Visibility = Annotated[
    float,
    Field(
        ge=MIN_VISIBILITY,
        le=MAX_VISIBILITY,
        description="Seconds the job stays held; not acked, nacked or extended by then, it is "
        "redelivered (its next attempt starts with a `restarted` event)",
    ),
]
ReceiptField = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_RECEIPT,
        description="The receipt the pull returned with the job; stale (the visibility "
        "passed, or the job was settled or redelivered) -> 409",
    ),
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PullRequest(_Body):
    max: int = Field(default=1, ge=1, le=MAX_PULL_JOBS, description="Most jobs to take")
    visibility: Visibility = 60.0
    wait: float = Field(
        default=0.0,
        ge=0,
        le=MAX_PULL_WAIT,
        description="Seconds to wait for a job when none is ready (long poll); 0 answers at once",
    )


class PulledJobOut(BaseModel):
    id: str
    receipt: str
    attempt: int = Field(description="1 on the first delivery, more after a redelivery")
    max_attempts: int
    payload: Any = Field(description="The job as enqueued (a generation's request)")


class PullResponse(BaseModel):
    jobs: list[PulledJobOut]


class ChunkEvent(_Body):
    type: Literal["chunk"]
    data: str = Field(
        strict=True,
        description="A piece of the generation's text: the chunks of the attempt that "
        "completes concatenate to the result's text",
    )


class ProgressEvent(_Body):
    type: Literal["progress"]
    data: float = Field(strict=True, ge=0, le=1, allow_inf_nan=False, description="0 to 1")


class ReasoningEvent(_Body):
    type: Literal["reasoning"]
    data: str = Field(strict=True, description="A piece of the model's reasoning text")


class ToolCallEvent(_Body):
    type: Literal["tool_call"]
    data: ToolCallStart = Field(description="A tool call starts: `{index, id, name}`")


class ToolArgsEvent(_Body):
    type: Literal["tool_args"]
    data: ToolArgs = Field(description="A piece of that call's JSON arguments: `{index, delta}`")


class ToolDoneEvent(_Body):
    type: Literal["tool_done"]
    data: ToolDone = Field(
        description="The whole call, once its arguments are complete: "
        "`{index, id, name, arguments}`"
    )


EventIn = Annotated[
    ChunkEvent | ProgressEvent | ReasoningEvent | ToolCallEvent | ToolArgsEvent | ToolDoneEvent,
    Field(discriminator="type"),
]
"""An event of the job's stream, typed as the built-in worker emits them
(``workers.coalesce``; the generation's parts as :mod:`genq_contract.parts` defines them) and as
every reader takes them (``genq.visible_text``, the transcript, SSE, the OpenAI routes)."""


def event_data(event: EventIn) -> Any:
    """What the stream stores for ``event``: its data as JSON (a part as its model dumps it)."""
    data = event.data
    return data.model_dump() if isinstance(data, BaseModel) else data


class EventsRequest(_Body):
    receipt: ReceiptField
    events: list[EventIn] = Field(min_length=1, max_length=MAX_EVENTS_PER_CALL)
    seq: int | None = Field(
        default=None,
        ge=1,
        le=2**53,
        description="The number of the first event of this call among every event sent for "
        "this attempt (from 1): a call sent again after a timeout then appends nothing twice. "
        "Without it a resent call appends its events again.",
    )


class ExtendRequest(_Body):
    receipt: ReceiptField
    visibility: Visibility


class HoldResponse(BaseModel):
    cancel_requested: bool = Field(
        description="The job was cancelled: stop working on it and ack or nack (either "
        "settles it as cancelled)"
    )


class AckRequest(_Body):
    receipt: ReceiptField
    result: GenerationResult | None = Field(
        default=None,
        description="The generation's result, `{text, model?, finish_reason?, usage?, "
        "reasoning?, tool_calls?}` as a built-in worker's (a job cancelled while held may be "
        "acked without one)",
    )


class NackRequest(_Body):
    receipt: ReceiptField
    error: str = Field(min_length=1, max_length=MAX_ERROR, description="Why the attempt failed")
    retry_after: float | None = Field(
        default=None,
        ge=0,
        le=MAX_RETRY_AFTER,
        description="Seconds before the retry (default: the queue's backoff)",
    )
    terminal: bool = Field(
        default=False, description="Dead-letter now: a retry would fail the same way"
    )


class SettleResponse(BaseModel):
    status: str = Field(
        description="The job's status after: completed | scheduled (a retry) | failed "
        "(dead-lettered) | cancelled"
    )

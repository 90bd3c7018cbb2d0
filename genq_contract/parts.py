"""The generation's own event types: what a model returns besides text, as a job's stream holds it.

Written by workers (``genq.ActiveJob.emit(data, type=...)``, batched by ``workers.coalesce``),
read through :class:`genq_contract.transcript.Transcript`. The text stays ``chunk`` (data: a
piece of text), so readers that know only text keep working.

- ``reasoning``: data a piece of the model's reasoning text.
- ``tool_call``: ``{"index", "id", "name"}``: a call starts (the provider's index of it).
- ``tool_args``: ``{"index", "delta"}``: a piece of that call's JSON arguments, in order.
- ``tool_done``: ``{"index", "id", "name", "arguments"}``: the whole call, written once the
  provider's stream moved past it; it replaces what the pieces added up to.

There is no ``finish`` event: the finish reason and the usage are known only when the provider's
stream ends, and the ``completed`` event, written right after, carries both in its result.

The models below validate what a writer sends (the built-in worker or, through the pull routes,
an HTTP worker); readers take each part through :func:`parse_part`, which gives None for one
that does not validate instead of raising, so one bad entry never breaks a reader.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

REASONING = "reasoning"
TOOL_CALL = "tool_call"
TOOL_ARGS = "tool_args"
TOOL_DONE = "tool_done"
PART_TYPES = (REASONING, TOOL_CALL, TOOL_ARGS, TOOL_DONE)
"""The generation's event types besides ``chunk``, in the order a stream may hold them."""

MAX_TOOL_INDEX = 1023
"""The largest tool-call index a part may carry (a provider numbers its calls from 0)."""


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class ToolCallStart(_Part):
    """A ``tool_call`` event's data."""

    index: int = Field(ge=0, le=MAX_TOOL_INDEX)
    id: str
    name: str


class ToolArgs(_Part):
    """A ``tool_args`` event's data."""

    index: int = Field(ge=0, le=MAX_TOOL_INDEX)
    delta: str


class ToolCall(_Part):
    """A whole tool call, as a result holds it."""

    id: str = Field(description="The provider's id of the call: a tool result names it")
    name: str = Field(description="The function called")
    arguments: str = Field(description="Its arguments: JSON text, as the model wrote it")


class ToolDone(ToolCall):
    """A ``tool_done`` event's data."""

    index: int = Field(ge=0, le=MAX_TOOL_INDEX)

    def call(self) -> ToolCall:
        return ToolCall(id=self.id, name=self.name, arguments=self.arguments)


PART_MODELS: dict[str, type[_Part]] = {
    TOOL_CALL: ToolCallStart,
    TOOL_ARGS: ToolArgs,
    TOOL_DONE: ToolDone,
}


def parse_part(kind: str, data: Any) -> Any:
    """The data of a ``kind`` event, validated: text for ``reasoning``, a model for the tool
    parts; None when it does not validate (or ``kind`` is not a part)."""
    if kind == REASONING:
        return data if isinstance(data, str) else None
    model = PART_MODELS.get(kind)
    if model is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None

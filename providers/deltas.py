"""What a streamed chat answer is made of, whichever path streamed it: :class:`Delta` s."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ToolCallPiece:
    """A piece of a streamed tool call: ``id`` and ``name`` come with a call's first piece
    (None after), ``arguments`` is the next bit of its JSON arguments."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class Delta:
    """One step of a stream: some text, reasoning text, tool-call pieces, and on the last
    steps the finish reason and usage (the provider's report only: None when it sent none).

    Read-only by convention, not frozen: a frozen dataclass sets each field through
    ``object.__setattr__``, and one is made per token."""

    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    reasoning: str = ""
    tool_calls: tuple[ToolCallPiece, ...] = ()

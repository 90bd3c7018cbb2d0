"""What a streamed chat answer is made of, whichever path streamed it: :class:`Delta` s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


def tool_call_pieces(calls: Any) -> tuple[ToolCallPiece, ...]:
    """A chunk's ``delta.tool_calls`` (LiteLLM's or the SDK's objects, or dicts) as pieces; one
    without an index is the ``n``-th of its chunk."""
    pieces = []
    for n, call in enumerate(calls):
        index = field_of(call, "index")
        function = field_of(call, "function")
        name = field_of(function, "name") if function is not None else None
        arguments = field_of(function, "arguments") if function is not None else None
        pieces.append(
            ToolCallPiece(
                index if isinstance(index, int) else n,
                field_of(call, "id") or None,
                name or None,
                arguments if isinstance(arguments, str) else "",
            )
        )
    return tuple(pieces)


def field_of(value: Any, name: str) -> Any:
    """``value``'s field ``name`` (None when missing), whether ``value`` is a model object
    (LiteLLM's, the SDK's) or the JSON object itself."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def usage_counts(usage: Any) -> dict[str, int] | None:
    """The provider's token counts (from LiteLLM's or the SDK's usage object, or the JSON
    object itself); ``cached_tokens``: prompt tokens read from its cache (LiteLLM
    puts OpenAI's and Anthropic's under ``prompt_tokens_details``), 0 when it says nothing;
    ``reasoning_tokens`` (of the completion tokens) only when it reported some."""
    if usage is None:
        return None
    fields = ("prompt_tokens", "completion_tokens", "total_tokens")
    values = {name: field_of(usage, name) for name in fields}
    if all(v is None for v in values.values()):
        return None
    counts = {name: int(v or 0) for name, v in values.items()}
    details = field_of(usage, "prompt_tokens_details")
    counts["cached_tokens"] = int(field_of(details, "cached_tokens") or 0)
    reasoning = field_of(field_of(usage, "completion_tokens_details"), "reasoning_tokens")
    if reasoning:
        counts["reasoning_tokens"] = int(reasoning)
    return counts

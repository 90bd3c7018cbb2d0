"""What a generation returned, folded from its events: text, reasoning, tool calls.

The client stands alone (no genq package), so this is the client's copy of the one rule,
``genq_contract.transcript.Transcript``; a test feeds both the same streams and compares. A part
that does not have the expected shape is skipped, never raised on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str
    """JSON text, as the model wrote it."""


@dataclass
class _Call:
    id: str
    name: str
    pieces: list[str] = field(default_factory=list)
    whole: str | None = None


@dataclass
class Generation:
    """A generation as its events told it: ``add`` each event (its type and data) in order."""

    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    _text: list[str] = field(default_factory=list, repr=False)
    _reasoning: list[str] = field(default_factory=list, repr=False)
    _calls: dict[int, _Call] = field(default_factory=dict, repr=False)

    @property
    def text(self) -> str:
        return "".join(self._text)

    @property
    def reasoning(self) -> str | None:
        """The reasoning text; None when the model streamed none."""
        return "".join(self._reasoning) if self._reasoning else None

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The calls in the order they started."""
        return [
            ToolCall(c.id, c.name, c.whole if c.whole is not None else "".join(c.pieces))
            for c in self._calls.values()
        ]

    def _indexed_calls(self) -> list[tuple[int, ToolCall, bool]]:
        """Each call's index, the call, and whether a ``tool_done`` closed it, in the order they
        started (what the pull client settles its stream against)."""
        pairs = zip(self._calls.items(), self.tool_calls, strict=True)
        return [(index, call, state.whole is not None) for (index, state), call in pairs]

    def add(self, kind: str, data: Any) -> None:
        if kind in ("chunk", "reasoning"):
            if isinstance(data, str):
                (self._text if kind == "chunk" else self._reasoning).append(data)
        elif kind in ("tool_call", "tool_args", "tool_done"):
            if isinstance(data, dict) and _index(data) is not None:
                self._tool_part(kind, data)
        elif kind == "restarted":
            self._text, self._reasoning, self._calls = [], [], {}
            self.finish_reason = self.usage = None
        elif kind == "completed" and isinstance(data, dict):
            finish, usage = data.get("finish_reason"), data.get("usage")
            self.finish_reason = finish if isinstance(finish, str) else None
            self.usage = usage if isinstance(usage, dict) else None

    def _tool_part(self, kind: str, data: dict[str, Any]) -> None:
        index = _index(data)
        assert index is not None
        call = self._calls.get(index)
        if kind == "tool_args":
            delta = data.get("delta")
            if call is not None and call.whole is None and isinstance(delta, str):
                call.pieces.append(delta)
            return
        call_id, name, arguments = data.get("id"), data.get("name"), data.get("arguments")
        if not isinstance(call_id, str) or not isinstance(name, str):
            return
        if kind == "tool_call":
            if call is None:
                self._calls[index] = _Call(call_id, name)
        elif isinstance(arguments, str):
            if call is None:
                self._calls[index] = _Call(call_id, name, whole=arguments)
            else:
                call.id, call.name, call.whole = call_id, name, arguments

    def as_json(self) -> dict[str, Any]:
        """``{text, reasoning, tool_calls: [{id, name, arguments}], finish_reason, usage}``."""
        return {
            "text": self.text,
            "reasoning": self.reasoning,
            "tool_calls": [vars(call) for call in self.tool_calls],
            "finish_reason": self.finish_reason,
            "usage": self.usage,
        }


def _index(data: dict[str, Any]) -> int | None:
    index = data.get("index")
    if isinstance(index, int) and not isinstance(index, bool) and 0 <= index <= 1023:
        return index
    return None

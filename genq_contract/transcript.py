"""The one rule that turns a job's events into what the generation returned so far.

:class:`Transcript` folds a stream's events, in order, into ``{text, reasoning, tool_calls,
finish_reason, usage}``: ``chunk`` pieces add to the text, ``reasoning`` pieces to the
reasoning, ``tool_call`` / ``tool_args`` / ``tool_done`` build the calls by their index,
``restarted`` starts everything over (a retried attempt), and ``completed`` gives the finish
reason and the usage from its result. Every reader of a generation (the CLI, ``genq_client``,
the gateway and, through ``web/api.js``, the pages) uses it; ``genq.visible_text`` remains the
rule for the text alone, and gives the same text.

A part whose data does not validate (:func:`genq_contract.parts.parse_part`) is skipped, as is
an argument piece of a call that never started: a bad entry never makes a reader fail.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from genq import CHUNK, RESTARTED, Event

from .events import COMPLETED
from .parts import REASONING, TOOL_ARGS, TOOL_CALL, TOOL_DONE, ToolCall, parse_part
from .result import read_result


@dataclass
class _Call:
    id: str
    name: str
    pieces: list[str] = field(default_factory=list)
    whole: str | None = None  # the arguments a tool_done gave: they replace the pieces

    @property
    def arguments(self) -> str:
        return self.whole if self.whole is not None else "".join(self.pieces)


@dataclass
class Transcript:
    """A generation as its events have told it so far; :meth:`add` each event in order."""

    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    _text: list[str] = field(default_factory=list, repr=False)
    _reasoning: list[str] = field(default_factory=list, repr=False)
    _calls: dict[int, _Call] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, events: Iterable[Event]) -> Transcript:
        transcript = cls()
        for event in events:
            transcript.add(event.type, event.data)
        return transcript

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
        return [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in self._calls.values()]

    def add(self, kind: str, data: Any) -> None:
        """Takes one event (its type and decoded data)."""
        if kind == CHUNK:
            if isinstance(data, str):
                self._text.append(data)
        elif kind == REASONING:
            if isinstance(data, str):
                self._reasoning.append(data)
        elif kind in (TOOL_CALL, TOOL_ARGS, TOOL_DONE):
            self._tool_part(kind, data)
        elif kind == RESTARTED:
            self._text.clear()
            self._reasoning.clear()
            self._calls.clear()
            self.finish_reason = self.usage = None
        elif kind == COMPLETED:
            result = read_result(data)
            self.finish_reason = result.finish_reason
            self.usage = None if result.usage is None else result.usage.as_json()

    def _tool_part(self, kind: str, data: Any) -> None:
        part = parse_part(kind, data)
        if part is None:
            return
        call = self._calls.get(part.index)
        if kind == TOOL_CALL:
            if call is None:
                self._calls[part.index] = _Call(part.id, part.name)
        elif kind == TOOL_ARGS:
            if call is not None and call.whole is None:
                call.pieces.append(part.delta)
        elif call is None:
            self._calls[part.index] = _Call(part.id, part.name, whole=part.arguments)
        else:
            call.id, call.name, call.whole = part.id, part.name, part.arguments

    def as_json(self) -> dict[str, Any]:
        """``{text, reasoning, tool_calls: [{id, name, arguments}], finish_reason, usage}``."""
        return {
            "text": self.text,
            "reasoning": self.reasoning,
            "tool_calls": [call.model_dump() for call in self.tool_calls],
            "finish_reason": self.finish_reason,
            "usage": self.usage,
        }

"""A generation's stream events -> the ``delta`` s of ``chat.completion.chunk`` s.

Text is ``content``, reasoning ``reasoning_content``; a tool call starts with ``{index, id,
type: "function", function: {name, arguments: ""}}`` and goes on with ``{index, function:
{arguments: piece}}``, as OpenAI streams them. A ``tool_done`` adds only what its pieces did not
send (nothing, from the built-in worker; the whole call from a writer that sent no pieces).
A stream resumed after a cursor is first told what came before it (:meth:`ChatDeltas.prime`),
so what a ``tool_done`` adds is exact there too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from genq import CHUNK, RESTARTED, StreamEntry
from genq_contract.parts import (
    REASONING,
    ToolArgs,
    ToolCallStart,
    ToolDone,
    parse_part,
)


def _start(index: int, call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {
        "tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]
    }


def _arguments(index: int, piece: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


class ChatDeltas:
    """The deltas of one stream's events, in order; keeps what each tool call has sent."""

    def __init__(self) -> None:
        self._sent: dict[int, str] = {}  # a started call's index -> the arguments sent

    def prime(self, entries: Iterable[StreamEntry]) -> None:
        """Takes the events a resumed stream's client already has."""
        for entry in entries:
            self.delta(entry)

    def delta(self, entry: StreamEntry) -> dict[str, Any] | None:
        """The delta of one event; None for an event that sends none (a ``restarted`` or an
        ending is the route's to send)."""
        if entry.terminal:
            return None
        kind, data = entry.type, json.loads(entry.data)
        if kind == CHUNK:
            return {"content": data} if isinstance(data, str) else None
        if kind == REASONING:
            return {"reasoning_content": data} if isinstance(data, str) else None
        if kind == RESTARTED:
            self._sent.clear()
            return None
        part = parse_part(kind, data)
        if isinstance(part, ToolCallStart):
            if part.index in self._sent:
                return None
            self._sent[part.index] = ""
            return _start(part.index, part.id, part.name)
        if isinstance(part, ToolArgs):
            if part.index not in self._sent or not part.delta:
                return None
            self._sent[part.index] += part.delta
            return _arguments(part.index, part.delta)
        if isinstance(part, ToolDone):
            return self._done(part)
        return None

    def _done(self, part: ToolDone) -> dict[str, Any] | None:
        sent = self._sent.get(part.index)
        self._sent[part.index] = part.arguments
        if sent is None:
            return _start(part.index, part.id, part.name, part.arguments)
        rest = part.arguments.removeprefix(sent)
        # Arguments that do not extend what was sent cannot be taken back in a delta.
        return _arguments(part.index, rest) if rest and part.arguments.startswith(sent) else None

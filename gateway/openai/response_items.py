"""The Responses events of a job's stream entries, item by item: the text of the message the
preamble opened (output 0), then a ``reasoning`` item and ``function_call`` items, each opened
when its first entry comes (outputs 1, 2 ... in that order).

An entry gives at most :data:`EVENTS_PER_ENTRY` events (the first reasoning piece opens its
item and its summary part, then adds its text): :class:`.response_events.EventNumbers` counts
on that bound. The state is built from the first retained entry on, by every reader alike (a
live follower and one resuming), so both give the same events. ``restarted`` starts the items
over, as it voids what they held (OpenAI's SDK stream helpers, which refuse an output index
given twice, cannot follow a response across a restart that had opened items; reading the
events, or the final response, is unaffected).

The reasoning is relayed as ``response.reasoning_summary_text.delta`` / ``.done`` (the provider's
reasoning as the item's one summary part), the events OpenAI's SDKs type for a reasoning
model's visible reasoning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from genq import Job, StreamEntry
from genq_contract.parts import REASONING, TOOL_ARGS, TOOL_CALL, TOOL_DONE, ToolCall, parse_part

from .objects import call_item, call_item_id, item_id, reasoning_item, reasoning_item_id

EVENTS_PER_ENTRY = 3
RESTARTED = "response.genq.restarted"

Event = tuple[str, dict[str, Any]]


@dataclass
class _OpenCall:
    output_index: int
    number: int
    call_id: str
    name: str
    pieces: list[str] = field(default_factory=list)
    done: bool = False


@dataclass
class StreamItems:
    """The items a response's stream opened so far; :meth:`events` of each entry, in order."""

    job: Job
    _next_index: int = 1
    _reasoning_index: int | None = None
    _reasoning: list[str] = field(default_factory=list)
    _calls: dict[int, _OpenCall] = field(default_factory=dict)

    def events(self, entry: StreamEntry) -> list[Event]:
        """The events of a non-terminal entry."""
        data = json.loads(entry.data)
        if entry.type == "chunk":
            where = {"item_id": item_id(self.job.id), "output_index": 0, "content_index": 0}
            return [("response.output_text.delta", {**where, "delta": data, "logprobs": []})]
        if entry.type == "restarted":
            self._next_index, self._reasoning_index = 1, None
            self._reasoning.clear()
            self._calls.clear()
            where = {"item_id": item_id(self.job.id), "output_index": 0, "content_index": 0}
            return [(RESTARTED, where)]
        if entry.type == REASONING:
            return self._reasoning_piece(parse_part(REASONING, data))
        if entry.type in (TOOL_CALL, TOOL_ARGS, TOOL_DONE):
            part = parse_part(entry.type, data)
            return [] if part is None else self._call_part(entry.type, part)
        return []

    def closing(self) -> list[Event]:
        """What closes the items still open once the response ended (the message aside)."""
        events: list[Event] = []
        if self._reasoning_index is not None:
            events += self._reasoning_done()
        for call in self._calls.values():
            if not call.done:
                events += self._call_done(call, "".join(call.pieces), "incomplete")
        return events

    def _open(self) -> int:
        index = self._next_index
        self._next_index += 1
        return index

    def _reasoning_piece(self, piece: str | None) -> list[Event]:
        if piece is None:
            return []
        events: list[Event] = []
        where = {"item_id": reasoning_item_id(self.job.id), "summary_index": 0}
        if self._reasoning_index is None:
            self._reasoning_index = self._open()
            item = reasoning_item(self.job, None, "in_progress")
            events.append(
                (
                    "response.output_item.added",
                    {"output_index": self._reasoning_index, "item": item},
                )
            )
            part = {"type": "summary_text", "text": ""}
            events.append(
                (
                    "response.reasoning_summary_part.added",
                    {**where, "output_index": self._reasoning_index, "part": part},
                )
            )
        self._reasoning.append(piece)
        body = {**where, "output_index": self._reasoning_index, "delta": piece}
        events.append(("response.reasoning_summary_text.delta", body))
        return events

    def _reasoning_done(self) -> list[Event]:
        text = "".join(self._reasoning)
        index = self._reasoning_index
        where = {"item_id": reasoning_item_id(self.job.id), "output_index": index}
        part = {"type": "summary_text", "text": text}
        return [
            ("response.reasoning_summary_text.done", {**where, "summary_index": 0, "text": text}),
            ("response.reasoning_summary_part.done", {**where, "summary_index": 0, "part": part}),
            (
                "response.output_item.done",
                {"output_index": index, "item": reasoning_item(self.job, text, "completed")},
            ),
        ]

    def _call_part(self, kind: str, part: Any) -> list[Event]:
        events: list[Event] = []
        call = self._calls.get(part.index)
        if call is None:
            if kind == TOOL_ARGS:
                return []  # a piece of a call that never started: the fold skips it too
            call = _OpenCall(self._open(), len(self._calls), part.id, part.name)
            self._calls[part.index] = call
            item = call_item(
                self.job,
                call.number,
                ToolCall(id=call.call_id, name=call.name, arguments=""),
                "in_progress",
            )
            events.append(
                ("response.output_item.added", {"output_index": call.output_index, "item": item})
            )
        if call.done:
            return events
        if kind == TOOL_ARGS:
            call.pieces.append(part.delta)
            where = {"item_id": call_item_id(self.job.id, call.number)}
            body = {**where, "output_index": call.output_index, "delta": part.delta}
            events.append(("response.function_call_arguments.delta", body))
        elif kind == TOOL_DONE:
            call.call_id, call.name = part.id, part.name
            events += self._call_done(call, part.arguments, "completed")
        return events

    def _call_done(self, call: _OpenCall, arguments: str, status: str) -> list[Event]:
        call.done = True
        whole = ToolCall(id=call.call_id, name=call.name, arguments=arguments)
        where = {"item_id": call_item_id(self.job.id, call.number)}
        return [
            (
                "response.function_call_arguments.done",
                {
                    **where,
                    "output_index": call.output_index,
                    "name": call.name,
                    "arguments": arguments,
                },
            ),
            (
                "response.output_item.done",
                {
                    "output_index": call.output_index,
                    "item": call_item(self.job, call.number, whole, status),
                },
            ),
        ]

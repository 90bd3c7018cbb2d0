"""A generation's stream as the AI SDK's UI message chunks, in SSE ``data: {json}`` frames.

=====================  =====================================================================
stream entry           chunks
=====================  =====================================================================
(the stream's start)   ``start`` (``messageId``; ``messageMetadata.genq.generationId``),
                       ``start-step``
``chunk``              ``text-start`` (opening a text part), ``text-delta``
``reasoning``          ``reasoning-start`` (opening a reasoning part), ``reasoning-delta``
``tool_call``          ``tool-input-start`` (``toolCallId``, ``toolName``)
``tool_args``          ``tool-input-delta`` (``inputTextDelta``)
``tool_done``          ``tool-input-available`` (``input``: the parsed arguments), or
                       ``tool-input-error`` when they are not JSON
``restarted``          ``reset-step``, ``data-genq-restarted``
``completed``          ``finish-step``, ``finish`` (``finishReason``)
``failed``             ``error`` (``errorText``), ``finish`` (``finishReason: "error"``)
``cancelled``          ``abort``, ``finish`` (``finishReason: "other"``)
=====================  =====================================================================

A text or reasoning part is ended (``text-end``, ``reasoning-end``) when another kind of part
comes or the generation ends. Every ``finish`` carries ``messageMetadata.genq``: the generation
id, its status and its usage totals; after it, ``data: [DONE]``. One frame of each entry
carries the entry's id (``id:``, as on the native stream); the AI SDK reads none.

A worker that died mid-answer: the retried attempt's stream starts with ``restarted``, and the
lost attempt's parts must not stay beside the new ones. ``reset-step`` (the AI SDK's own chunk
for a retried step) makes ``useChat`` and ``readUIMessageStream`` drop every part of the current
step, so the message holds the new attempt's parts alone, under fresh part ids; the
``data-genq-restarted`` part that follows tells an app it happened (``data``: the generation
id, and what the restart said, such as a fallback's model).

One :class:`UIParts` per stream: every stream of these routes starts at the generation's first
event (the AI SDK's resume is a replay), so its part ids are the same on every replay.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from genq import CHUNK, RESTARTED, StreamEntry
from genq_contract.parts import (
    REASONING,
    TOOL_ARGS,
    TOOL_CALL,
    TOOL_DONE,
    ToolArgs,
    ToolCallStart,
    ToolDone,
    parse_part,
)
from genq_contract.result import read_result

from ..streaming.frames import usage_totals

FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}
"""A provider's finish reason -> the AI SDK's; any other is ``other``."""
ENDED = {"completed": "stop", "failed": "error", "cancelled": "other"}
"""A terminal event -> the ``finishReason`` of its ``finish`` (a completed one's result says
better)."""


_TEXT_DELTA = 'data: {"type":"text-delta","id":"%s","delta":%s}\n\n'
"""A ``text-delta`` frame: the part's id, then the piece's JSON text as written."""


def data_frame(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk, separators=(',', ':'), ensure_ascii=False)}\n\n"


class UIParts:
    """The chunks of one stream's entries, in order (it keeps which parts are open)."""

    __slots__ = ("_calls", "_count", "_reasoning", "_text", "generation_id")

    def __init__(self, generation_id: str) -> None:
        self.generation_id = generation_id
        self._text: str | None = None
        """The id of the open text part."""
        self._reasoning: str | None = None
        self._calls: dict[int, tuple[str, str, bool]] = {}
        """A tool call's index -> (its id, its name, whether its input was sent whole)."""
        self._count = 0

    def opening(self, message_id: str) -> bytes:
        """The stream's first frames: ``start`` and ``start-step``."""
        start = {
            "type": "start",
            "messageId": message_id,
            "messageMetadata": {"genq": {"generationId": self.generation_id}},
        }
        return (data_frame(start) + data_frame({"type": "start-step"})).encode()

    def frames(self, entry: StreamEntry) -> bytes:
        """The frames of one entry (none for one that shows nothing: ``progress`` ...)."""
        kind = entry.type
        if kind == CHUNK:
            text, data = self._text, entry.data
            if text is not None and data.startswith('"'):  # most entries: the open text goes on
                return f"id: {entry.id}\n{_TEXT_DELTA % (text, data)}".encode()
            out = self._delta(data)
        elif entry.terminal:
            out = self._ending(entry)
        else:
            out = self._other(kind, entry.data)
        if not out:
            return b""
        out[-1] = f"id: {entry.id}\n{out[-1]}"
        return "".join(out).encode()

    def _delta(self, data: str) -> list[str]:
        """A piece of text: its JSON text goes into the frame as it was written (a JSON
        string holds no raw line break, so the frame stays one ``data:`` line)."""
        if not data.startswith('"'):
            return []  # not text: shows nothing, as on every reader
        out = self._close_reasoning()
        if self._text is None:
            self._text = self._new_id("text")
            out.append(data_frame({"type": "text-start", "id": self._text}))
        out.append(_TEXT_DELTA % (self._text, data))
        return out

    def _other(self, kind: str, raw: str) -> list[str]:
        if kind == RESTARTED:
            return self._restarted(json.loads(raw))
        if kind not in (REASONING, TOOL_CALL, TOOL_ARGS, TOOL_DONE):
            return []
        part = parse_part(kind, json.loads(raw))
        if isinstance(part, str):
            out = self._close_text()
            if self._reasoning is None:
                self._reasoning = self._new_id("reasoning")
                out.append(data_frame({"type": "reasoning-start", "id": self._reasoning}))
            out.append(
                data_frame({"type": "reasoning-delta", "id": self._reasoning, "delta": part})
            )
            return out
        if isinstance(part, ToolCallStart):
            return self._tool_start(part.index, part.id, part.name)
        if isinstance(part, ToolArgs) and part.index in self._calls and part.delta:
            call_id = self._calls[part.index][0]
            return [
                data_frame(
                    {
                        "type": "tool-input-delta",
                        "toolCallId": call_id,
                        "inputTextDelta": part.delta,
                    }
                )
            ]
        if isinstance(part, ToolDone):
            return self._tool_done(part)
        return []

    def _tool_start(self, index: int, call_id: str, name: str) -> list[str]:
        if index in self._calls:
            return []
        out = self._close_text() + self._close_reasoning()
        self._calls[index] = (call_id, name, False)
        out.append(
            data_frame({"type": "tool-input-start", "toolCallId": call_id, "toolName": name})
        )
        return out

    def _tool_done(self, part: ToolDone) -> list[str]:
        out = self._tool_start(part.index, part.id, part.name)
        call_id, name, whole = self._calls[part.index]
        if whole:
            return out
        self._calls[part.index] = (call_id, name, True)
        chunk: dict[str, Any] = {"toolCallId": call_id, "toolName": name}
        try:
            chunk.update(type="tool-input-available", input=json.loads(part.arguments))
        except ValueError:
            error = "the model's arguments are not JSON"
            chunk.update(type="tool-input-error", input=part.arguments, errorText=error)
        out.append(data_frame(chunk))
        return out

    def _restarted(self, data: Any) -> list[str]:
        self._text = self._reasoning = None
        self._calls.clear()
        said = {"generationId": self.generation_id}
        if isinstance(data, dict):
            said.update(data)
        restarted = {"type": "data-genq-restarted", "id": "genq-restarted", "data": said}
        return [data_frame({"type": "reset-step"}), data_frame(restarted)]

    def _ending(self, entry: StreamEntry) -> list[str]:
        return [*self._close_text(), *self._close_reasoning(), ended(entry, self.generation_id)]

    def _close_text(self) -> list[str]:
        if self._text is None:
            return []
        ended, self._text = self._text, None
        return [data_frame({"type": "text-end", "id": ended})]

    def _close_reasoning(self) -> list[str]:
        if self._reasoning is None:
            return []
        ended, self._reasoning = self._reasoning, None
        return [data_frame({"type": "reasoning-end", "id": ended})]

    def _new_id(self, kind: str) -> str:
        self._count += 1
        return f"{kind}-{self._count}"


@functools.lru_cache(maxsize=128)
def ended(entry: StreamEntry, generation_id: str) -> str:
    """The frames a terminal entry ends every stream with, once the open parts are ended: the
    same for all the generation's streams, so made once for those the shared tail gives that
    entry (they all end together: reading the result per stream would hold the others up)."""
    reason = ENDED.get(entry.type, "other")
    usage = usage_totals(entry)
    if entry.type == "completed":
        result = read_result(json.loads(entry.data))
        reason = FINISH_REASONS.get(result.finish_reason or "stop", "other")
        if usage is None and result.usage is not None:  # no attempt metered: its report
            usage = result.usage.as_json()
        frames = data_frame({"type": "finish-step"})
    elif entry.type == "failed":
        message = json.loads(entry.data)
        error = message if isinstance(message, str) and message else "the generation failed"
        frames = data_frame({"type": "error", "errorText": error})
    else:
        frames = data_frame({"type": "abort", "reason": "stopped"})
    genq: dict[str, Any] = {"generationId": generation_id, "status": entry.type}
    if usage is not None:
        genq["usage"] = usage
    finish = {"type": "finish", "finishReason": reason, "messageMetadata": {"genq": genq}}
    return frames + data_frame(finish)

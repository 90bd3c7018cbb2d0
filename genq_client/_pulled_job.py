"""What a pull client's handler gets (:class:`PulledJob`) and how its return becomes the result.

A handler's ``emit`` and ``progress`` only buffer: the puller posts the buffer to the job's
``/events`` route from the event loop, so they never block and may be called from the thread a
blocking handler runs in. What a handler emits and returns is checked first
(:mod:`genq_client._output`), and the stream is made to agree with the result it acks: the text
and reasoning a result continues are emitted, and every tool call of the result ends with its
``tool_done``, as a built-in worker's stream does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from ._generation import Generation, ToolCall
from ._output import (
    CHUNK,
    MAX_TOOL_INDEX,
    REASONING,
    RESULT_KEYS,
    TOOL_ARGS,
    TOOL_DONE,
    OutputError,
    check_part,
    check_result,
)

log = logging.getLogger("genq_client.puller")

MAX_PIECE = 8_000
"""Characters of one text event (a chunk, a piece of reasoning or of a call's arguments); a
longer emit is split, and adjacent emits of one kind (and call) are joined up to it."""
MAX_BATCH_CHARS = 32_000
"""Text per events call: even at six JSON bytes a character it stays under the gateway's body
limit (``GENQ_MAX_BODY_BYTES``, 256 KiB by default)."""
MAX_BATCH_EVENTS = 500
"""Events per call (the gateway's limit)."""


class PulledJob:
    """One attempt of a pulled job, handed to the handler.

    ``id``, ``payload`` (the generation's request: ``model``, ``messages``, ``params``,
    ``metadata``), ``attempt`` (1 on the first delivery), ``max_attempts``,
    ``queue`` and ``receipt`` (the pull's receipt, for calls of your own). ``emit(data,
    type=)`` (text, reasoning, tool calls) and ``progress(fraction)`` stream to the generation's
    viewers; ``text``, ``reasoning`` and ``tool_calls`` are what was emitted so far;
    ``cancelled`` turns true once the gateway says the generation was cancelled, ``abandoned``
    once the job is no longer this worker's (a stale receipt, a refused key): stop working on
    it then.
    """

    def __init__(self, queue: str, body: Mapping[str, Any], visibility: float) -> None:
        self.queue = queue
        self.id: str = body["id"]
        self.receipt: str = body["receipt"]
        self.attempt: int = body["attempt"]
        self.max_attempts: int = body["max_attempts"]
        self.payload: Any = body["payload"]
        self.visibility = visibility
        self.held_at = time.monotonic()
        """When the last call that renewed the visibility was sent (the pull's answer first)."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._lock = threading.Lock()
        self._pending: deque[dict[str, Any]] = deque()
        self._emitted = Generation()
        self._sent = 0
        self._closed = False
        self._cancelled = False
        self._abandoned: str | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def abandoned(self) -> bool:
        return self._abandoned is not None

    @property
    def text(self) -> str:
        """The text emitted so far."""
        with self._lock:
            return self._emitted.text

    @property
    def reasoning(self) -> str | None:
        """The reasoning emitted so far; None when there was none."""
        with self._lock:
            return self._emitted.reasoning

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls emitted so far, in the order they started, as readers fold them."""
        with self._lock:
            return self._emitted.tool_calls

    @property
    def deadline(self) -> float:
        """When the visibility runs out unless renewed (``time.monotonic``)."""
        return self.held_at + self.visibility

    def emit(self, data: Any, type: str = CHUNK) -> None:
        """Appends ``data`` to the generation's output as an event of ``type``; returns at once.

        ``chunk`` (the default): a piece of the text. ``reasoning``: a piece of the model's
        reasoning. ``tool_call`` ``{index, id, name}``: a tool call starts (``index`` 0-1023,
        the call's number in this generation); ``tool_args`` ``{index, delta}``: a piece of
        its JSON arguments; ``tool_done`` ``{index, id, name, arguments}``: the whole call
        (sent by the ack for every call that has none). Raises :class:`OutputError` for any
        other type or shape, as the gateway would refuse it."""
        shown = check_part(type, data)
        with self._lock:
            if self._closed or shown == "":  # no text: no event (and reasoning stays None)
                return
            self._emitted.add(type, shown)
            if type in (CHUNK, REASONING):
                self._queue_text(type, shown, None)
            elif type == TOOL_ARGS:
                self._queue_text(type, shown["delta"], shown["index"])
            else:
                self._pending.append({"type": type, "data": shown})
        self._notify()

    def progress(self, fraction: float) -> None:
        """Reports progress from 0 to 1 (a ``progress`` event); returns at once."""
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise TypeError(f"progress takes a number, not {type(fraction).__name__}")
        if not 0 <= fraction <= 1:
            raise ValueError("progress must be from 0 to 1")
        with self._lock:
            if self._closed:
                return
            last = self._pending[-1] if self._pending else None
            if last is not None and last["type"] == "progress":
                last["data"] = fraction  # only the latest matters
            else:
                self._pending.append({"type": "progress", "data": fraction})
        self._notify()

    def _queue_text(self, kind: str, text: str, index: int | None) -> None:
        """Queues a text delta (of a call's arguments when ``index`` is given) in pieces of at
        most MAX_PIECE, joined to the last pending event of the same kind and call."""
        for start in range(0, len(text), MAX_PIECE):
            piece = text[start : start + MAX_PIECE]
            last = self._pending[-1] if self._pending else None
            if last is not None and last["type"] == kind and _index_of(last) == index:
                held = _text_of(last)
                if len(held) + len(piece) <= MAX_PIECE:
                    last["data"] = _delta(held + piece, index)
                    continue
            self._pending.append({"type": kind, "data": _delta(piece, index)})

    def _notify(self) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: the puller is gone
            self._loop.call_soon_threadsafe(self._wake.set)

    def _take_batch(self) -> tuple[int, list[dict[str, Any]]]:
        """The next events to post and the ``seq`` of the first; nothing once cancelled."""
        with self._lock:
            if self._cancelled or self._abandoned is not None:
                self._pending.clear()
            batch: list[dict[str, Any]] = []
            chars = 0
            while self._pending and len(batch) < MAX_BATCH_EVENTS:
                size = _chars(self._pending[0]["data"])
                if batch and chars + size > MAX_BATCH_CHARS:
                    break
                batch.append(self._pending.popleft())
                chars += size
            return self._sent + 1, batch

    def _posted(self, count: int) -> None:
        self._sent += count

    def _close(self) -> None:
        """No more events: later emits (a stray thread's) are dropped."""
        with self._lock:
            self._closed = True
        self._wake.set()

    def _cancel(self) -> None:
        self._cancelled = True

    def _abandon(self, reason: str) -> bool:
        """Marks the job as no longer ours; False if it already was."""
        if self._abandoned is not None:
            return False
        self._abandoned = reason
        self._wake.set()
        return True


def _index_of(event: dict[str, Any]) -> int | None:
    data = event["data"]
    return data.get("index") if isinstance(data, dict) else None


def _text_of(event: dict[str, Any]) -> str:
    data = event["data"]
    return str(data["delta"] if isinstance(data, dict) else data)


def _delta(text: str, index: int | None) -> Any:
    """A text event's data: the text, or a piece of call ``index``'s arguments."""
    return text if index is None else {"index": index, "delta": text}


def _chars(data: Any) -> int:
    """The text an event carries, counted against ``MAX_BATCH_CHARS``."""
    if isinstance(data, str):
        return len(data)
    if isinstance(data, dict):
        return sum(len(value) for value in data.values() if isinstance(value, str))
    return 0


def _fields_of(returned: object) -> dict[str, Any]:
    if returned is None:
        return {}
    if isinstance(returned, str):
        return {"text": returned}
    if isinstance(returned, Mapping):
        return check_result(returned)
    raise OutputError(
        f"a handler returns None, a str or a dict of {list(RESULT_KEYS)}, "
        f"not {type(returned).__name__}"
    )


def _continue(job: PulledJob, kind: str, whole: str, emitted: str) -> None:
    """Emits the rest of ``whole`` when it continues what was emitted, so the events add up
    to the result."""
    if whole.startswith(emitted):
        job.emit(whole[len(emitted) :], type=kind)
    else:
        name = "text" if kind == CHUNK else kind
        log.warning("job %s: the result's %s does not continue the %s emitted", job.id, name, name)


def _close_calls(job: PulledJob, calls: list[dict[str, str]]) -> None:
    """Ends the stream with ``calls``, as the result holds them: the call emitted at the same
    place gets a ``tool_done`` unless one already closed it with these fields, and a call never
    emitted is added as a ``tool_done`` at an index no emitted call uses."""
    with job._lock:
        emitted = job._emitted._indexed_calls()
    used = {index for index, _, _ in emitted}
    free = (index for index in range(MAX_TOOL_INDEX + 1) if index not in used)
    for place, call in enumerate(calls):
        if place < len(emitted):
            index, shown, closed = emitted[place]
            if closed and vars(shown) == call:
                continue
        else:
            index = next(free)
        job.emit({"index": index, **call}, type=TOOL_DONE)
    if len(emitted) > len(calls):
        log.warning("job %s: the result leaves out tool calls that were emitted", job.id)


def result_of(job: PulledJob, returned: object) -> dict[str, Any]:
    """The ack's ``result`` for what the handler returned: ``text``, ``model``,
    ``finish_reason`` and ``usage``, and ``reasoning`` and ``tool_calls`` when there are any.
    ``None`` acks what was emitted; a str is the whole text; a dict gives any of those keys
    (``text``, ``reasoning`` and ``tool_calls`` default to what was emitted, ``model`` to the
    payload's, ``finish_reason`` to ``"tool_calls"`` when there are calls and ``"stop"``
    otherwise, ``usage`` to null). A returned text or reasoning that continues the emitted one
    has its rest emitted first, and each call gets its ``tool_done``, so the events add up to
    the result. Raises :class:`OutputError` for a result the gateway would refuse."""
    fields = _fields_of(returned)
    text = fields.get("text", job.text)
    _continue(job, CHUNK, text, job.text)
    reasoning = fields.get("reasoning", job.reasoning)
    _continue(job, REASONING, reasoning or "", job.reasoning or "")
    calls = fields.get("tool_calls", [vars(call) for call in job.tool_calls])
    _close_calls(job, calls)
    model = job.payload.get("model") if isinstance(job.payload, Mapping) else None
    result = {
        "text": text,
        "model": fields.get("model", model),
        "finish_reason": fields.get("finish_reason", "tool_calls" if calls else "stop"),
        "usage": dict(fields["usage"]) if fields.get("usage") is not None else None,
    }
    if reasoning is not None:
        result["reasoning"] = reasoning
    if calls:
        result["tool_calls"] = calls
    return result

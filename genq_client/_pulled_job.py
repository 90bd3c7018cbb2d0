"""What a pull client's handler gets (:class:`PulledJob`) and how its return becomes the result.

A handler's ``emit`` and ``progress`` only buffer: the puller posts the buffer to the job's
``/events`` route from the event loop, so they never block and may be called from the thread a
blocking handler runs in.
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

log = logging.getLogger("genq_client.puller")

MAX_PIECE = 8_000
"""Characters of one chunk event; a longer emit is split, and adjacent emits are joined up
to it."""
MAX_BATCH_CHARS = 32_000
"""Text per events call: even at six JSON bytes a character it stays under the gateway's body
limit (``GENQ_MAX_BODY_BYTES``, 256 KiB by default)."""
MAX_BATCH_EVENTS = 500
"""Events per call (the gateway's limit)."""
RESULT_KEYS = frozenset({"text", "model", "finish_reason", "usage"})
"""A generation's result, as the built-in workers ack it."""


class PulledJob:
    """One attempt of a pulled job, handed to the handler.

    ``id``, ``payload`` (the generation's request: ``model``, ``messages``, ``params``,
    ``metadata``), ``attempt`` (1 on the first delivery), ``max_attempts``,
    ``queue`` and ``receipt`` (the pull's receipt, for calls of your own). ``emit(text)`` and
    ``progress(fraction)`` stream to the generation's viewers; ``cancelled`` turns true once
    the gateway says the generation was cancelled, ``abandoned`` once the job is no longer this
    worker's (a stale receipt, a refused key): stop working on it then.
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
        self._text: list[str] = []
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
        """Everything emitted so far."""
        with self._lock:
            return "".join(self._text)

    @property
    def deadline(self) -> float:
        """When the visibility runs out unless renewed (``time.monotonic``)."""
        return self.held_at + self.visibility

    def emit(self, text: str) -> None:
        """Appends ``text`` to the output (a ``chunk`` event); returns at once."""
        if not isinstance(text, str):
            raise TypeError(f"emit takes a str, not {type(text).__name__}")
        if not text:
            return
        with self._lock:
            if self._closed:
                return
            self._text.append(text)
            for start in range(0, len(text), MAX_PIECE):
                self._queue_chunk(text[start : start + MAX_PIECE])
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

    def _queue_chunk(self, piece: str) -> None:
        last = self._pending[-1] if self._pending else None
        if (
            last is not None
            and last["type"] == "chunk"
            and len(last["data"]) + len(piece) <= MAX_PIECE
        ):
            last["data"] += piece
        else:
            self._pending.append({"type": "chunk", "data": piece})

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
                event = self._pending[0]
                size = len(event["data"]) if event["type"] == "chunk" else 0
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


def _expect(name: str, value: object, kind: Any, what: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"a result's {name} is {what}, not {type(value).__name__}")


def result_of(job: PulledJob, returned: object) -> dict[str, Any]:
    """The ack's ``result`` for what the handler returned: exactly ``text``, ``model``,
    ``finish_reason`` and ``usage``. ``None`` acks the emitted text; a str is the whole text;
    a dict gives any of the four keys (``text`` defaults to the emitted text, ``model`` to the
    payload's, ``finish_reason`` to ``"stop"``, ``usage`` to null). A returned text that
    continues the emitted one has its rest emitted first, so the chunks add up to it."""
    if returned is None:
        fields: dict[str, Any] = {}
    elif isinstance(returned, str):
        fields = {"text": returned}
    elif isinstance(returned, Mapping):
        fields = dict(returned)
        unknown = sorted(set(fields) - RESULT_KEYS)
        if unknown:
            raise TypeError(f"a handler's result has only {sorted(RESULT_KEYS)}; not {unknown}")
    else:
        raise TypeError(
            f"a handler returns None, a str or a dict of {sorted(RESULT_KEYS)}, "
            f"not {type(returned).__name__}"
        )
    emitted = job.text
    text = fields.get("text", emitted)
    _expect("text", text, str, "a str")
    _expect("model", fields.get("model"), str | None, "a str or None")
    _expect("finish_reason", fields.get("finish_reason"), str | None, "a str or None")
    _expect("usage", fields.get("usage"), Mapping | None, "a dict or None")
    if text.startswith(emitted):
        job.emit(text[len(emitted) :])
    else:
        log.warning("job %s: the result's text does not continue the text emitted", job.id)
    model = job.payload.get("model") if isinstance(job.payload, Mapping) else None
    return {
        "text": text,
        "model": fields.get("model", model),
        "finish_reason": fields.get("finish_reason", "stop"),
        "usage": dict(fields["usage"]) if fields.get("usage") is not None else None,
    }

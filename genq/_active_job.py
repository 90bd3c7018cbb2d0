"""The handle a handler gets for the job it runs."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._cancellation import raise_if_cancelled
from ._errors import JobLeaseLostError
from ._events import as_text, check_event_type
from ._job import Attempt, _history
from ._queue_base import QueueBase
from ._retrying import with_retry
from ._scripts import Code
from ._status import CHUNK, PROGRESS, RESTARTED
from ._streamed import run_streamed
from ._usage import encode_meter


class ActiveJob:
    """A job held by this worker under a lease token.

    ``emit`` is also the heartbeat and the cancellation check: one round trip appends, renews
    the lease and learns of a cancel. On a cancel, ``signal`` is set and the handler's task is
    cancelled, so an awaited provider call is torn down. A stale holder gets
    :class:`JobLeaseLostError`.
    """

    def __init__(
        self,
        queue: QueueBase,
        fields: dict[str, str],
        token: str,
        lease: float,
        on_cancel: Callable[[], None],
    ) -> None:
        self.queue = queue
        self.id = fields["id"]
        self.payload: Any = queue.codec.decode(fields["payload"])
        self.attempt = int(fields["attempt"])
        self.max_attempts = int(fields["max_attempts"])
        self.priority = int(fields.get("priority", 0))
        self.idempotency_key = fields.get("idempotency_key") or None
        self.tenant = fields.get("tenant", "")
        self.waited = _waited(fields)
        """Seconds this attempt waited in line (server clock) until this activation: since the
        job became runnable, at its enqueue, when it was due (a delay, a retry's backoff) or
        when its previous attempt ended (a reclaimed one)."""
        self._history = fields.get("history") if self.attempt > 1 else None
        self.metered = ""
        """This attempt's usage as settle.lua takes it ('' until :meth:`meter` is called)."""
        self.signal = asyncio.Event()
        self.token = token
        self._lease_ms = max(1, int(lease * 1000))
        self._seq = 0
        self._on_cancel = on_cancel
        self.renewed_at = time.monotonic()

    def __repr__(self) -> str:
        return f"ActiveJob(id={self.id!r}, attempt={self.attempt})"

    @property
    def history(self) -> tuple[Attempt, ...]:
        """The attempts before this one that ended, oldest first (an attempt lost with its
        worker as ``lease_expired``), as this attempt's activation read them."""
        return _history(self._history)

    async def emit(self, data: Any, type: str = CHUNK) -> None:
        """Appends ``data`` as an event of ``type`` (and renews the lease): a ``chunk`` by
        default, or a type of the handler's own (a short lowercase name, not one of the
        queue's: :class:`genq.EventTypeError`), which readers tell apart from the text."""
        if type is not CHUNK:
            check_event_type(type)
        await self._append(type, json.dumps(data, ensure_ascii=False), "")

    async def restart(self, data: Any = None) -> None:
        """Starts this attempt's output over: drops the stream's events and appends a
        ``restarted`` event with ``data``, as a new attempt does (watchers clear their text)."""
        await self._append(RESTARTED, json.dumps(data, ensure_ascii=False), "")

    def meter(
        self,
        label: str,
        counts: Mapping[str, int],
        *,
        estimated: bool = False,
        counted: bool = True,
    ) -> None:
        """Reports this attempt's usage: ``counts`` (names ``[a-z][a-z0-9_]{0,39}``, integers
        >= 0) under ``label`` (what answered). A later call replaces an earlier one. The settle
        of this attempt, whatever its outcome, adds it to the job's record (``Job.usage``, the
        attempt in ``Job.history``) and, unless ``counted`` is false, to the queue's counters
        (:meth:`genq.Queue.usage`), exactly once. Raises ValueError on bad input."""
        self.metered = encode_meter(label, counts, estimated=estimated, counted=counted)

    async def progress(self, value: float) -> None:
        """Reports progress from 0 to 1 as a ``progress`` event."""
        if not 0.0 <= value <= 1.0:
            raise ValueError("progress must be between 0 and 1")
        await self._append(PROGRESS, json.dumps(value), repr(float(value)))

    async def _append(self, kind: str, data: str, progress: str) -> None:
        keys, args = self._emit_call(kind, data, progress)
        # A resent emit carries the same sequence number, so retrying a blip cannot duplicate.
        reply = await with_retry(
            lambda: self.queue.scripts.emit(keys=keys, args=args), within=self._lease_ms / 2000
        )
        await self._handle(int(reply[0]))

    def _emit_call(self, kind: str, data: str, progress: str) -> tuple[list[str], list[Any]]:
        self._seq += 1
        k = self.queue.keys
        keys = [k.job(self.id), k.events(self.id), k.leases]
        args = [
            self.id,
            self.token,
            self._seq,
            kind,
            data,
            self._lease_ms,
            self.queue.events_max_len,
            progress,
        ]
        return keys, args

    async def heartbeat(self) -> None:
        """Renews the lease; the worker calls this when the handler is quiet."""
        k = self.queue.keys
        reply = await self.queue.scripts.heartbeat(
            keys=[k.job(self.id), k.leases], args=[self.id, self.token, self._lease_ms]
        )
        await self._handle(int(reply[0]))

    async def _handle(self, code: int) -> None:
        if code == Code.LEASE_LOST:
            raise JobLeaseLostError(self.id)
        self.renewed_at = time.monotonic()
        if code == Code.CANCEL_REQUESTED:
            self._on_cancel()
            # The cancel reaches the handler's task at its next await; yielding here makes
            # that await this one, so no more provider output is processed after a Stop.
            await asyncio.sleep(0)
        raise_if_cancelled()


EmitItem = tuple[ActiveJob, Any] | tuple[ActiveJob, Any, str]
"""``(job, data)`` emits a ``chunk``; ``(job, data, type)`` an event of that type."""


async def emit_many(items: Sequence[EmitItem]) -> list[BaseException | None]:
    """Emits events of several jobs of one queue in a single round trip, in order.

    Each item keeps emit's meaning for its job (append, lease renewal, cancellation check); a
    job may have several items, appended in their order. Returns, aligned with ``items``, None
    or the job's :class:`JobLeaseLostError`; a job whose cancel was requested has its handler
    cancelled, as with :meth:`ActiveJob.emit`. A bad type raises :class:`genq.EventTypeError`
    before anything is sent.
    """
    if not items:
        return []
    queue = items[0][0].queue
    if any(item[0].queue is not queue for item in items):
        raise ValueError("emit_many takes jobs of one queue")
    calls = [_emit_call(item) for item in items]
    replies = await with_retry(
        lambda: run_streamed(queue.redis, queue.scripts.emit, calls), within=queue.lease / 2
    )
    results: list[BaseException | None] = []
    for item, reply in zip(items, replies, strict=True):
        job = item[0]
        code = int(reply[0])
        if code == Code.LEASE_LOST:
            results.append(JobLeaseLostError(job.id))
            continue
        job.renewed_at = time.monotonic()
        if code == Code.CANCEL_REQUESTED:
            job._on_cancel()
        results.append(None)
    return results


def _emit_call(item: EmitItem) -> tuple[list[str], list[Any]]:
    if len(item) == 2:
        return item[0]._emit_call(CHUNK, json.dumps(item[1], ensure_ascii=False), "")
    job, data, kind = item
    return job._emit_call(check_event_type(kind), json.dumps(data, ensure_ascii=False), "")


def _waited(fields: Mapping[str, str]) -> float:
    started = int(fields.get("started_at") or 0)
    since = int(fields.get("run_at") or fields.get("created_at") or started)
    if int(fields.get("attempt") or 1) > 1 and fields.get("history"):
        since = max(since, int(json.loads(fields["history"])[-1].get("ended_at") or 0))
    return max(0, started - since) / 1000


def record_fields(raw: list[Any]) -> dict[str, str]:
    """HGETALL as a flat list (a script's reply) -> dict."""
    it = iter(raw)
    return {as_text(k): as_text(v) for k, v in zip(it, it, strict=True)}

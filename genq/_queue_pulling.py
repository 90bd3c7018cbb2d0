"""Workers anywhere: jobs pulled under a receipt, and their acks, nacks, extensions and events
(:mod:`genq._pull`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ._pull import Pulled, PulledJob, ack, extend, nack, pull, push_events
from ._queue_base import QueueBase


class Pulling(QueueBase):
    """What a puller (a worker that reaches the queue through someone else, such as the
    gateway's pull API) calls on :class:`genq.Queue`."""

    async def pull(self, max: int = 1, visibility: float = 60.0) -> list[PulledJob]:
        """Takes up to ``max`` runnable jobs (fair share and ``tenant_weights`` apply), each
        held for ``visibility`` seconds under its ``receipt``. A job not acked or nacked by
        then goes back in line and its next attempt starts with ``restarted``. [] when none."""
        return (await self.pull_batch(max, visibility)).jobs

    async def pull_batch(self, max: int = 1, visibility: float = 60.0) -> Pulled:
        """:meth:`pull`, plus when the queue may next have a runnable job (``next_change``,
        seconds; None when nothing is waiting): what a caller that waits for work naps by."""
        return await pull(self, max, visibility)

    async def ack(self, job_id: str, receipt: str, result: Any = None) -> str:
        """Completes a pulled job; returns its status after (``completed``, or ``cancelled``
        when a cancel was pending). A stale receipt raises :class:`JobLeaseLostError`."""
        return await ack(self, job_id, receipt, result)

    async def nack(
        self,
        job_id: str,
        receipt: str,
        error: str,
        retry_after: float | None = None,
        terminal: bool = False,
    ) -> str:
        """Fails a pulled job's attempt: retried (after ``retry_after`` seconds, or the
        queue's backoff) while attempts remain, dead-lettered when ``terminal`` or out of
        attempts. Returns its status after; a stale receipt raises JobLeaseLostError."""
        return await nack(self, job_id, receipt, error, retry_after, terminal)

    async def extend(self, job_id: str, receipt: str, visibility: float) -> bool:
        """Holds a pulled job ``visibility`` more seconds from now; True if a cancel is
        pending. A receipt whose visibility already passed raises JobLeaseLostError."""
        return await extend(self, job_id, receipt, visibility)

    async def push_events(
        self,
        job_id: str,
        receipt: str,
        events: Sequence[tuple[str, Any]],
        seq: int | None = None,
        types: Collection[str] = (),
    ) -> bool:
        """Appends ``(type, data)`` events (``chunk``, ``progress`` or one of ``types``, the
        caller's own, as :meth:`genq.ActiveJob.emit` takes them) to a pulled job's stream,
        adjacent text chunks joined as a worker's emits are; each renews the visibility. True if
        a cancel is pending. ``seq`` (the first event's number among this attempt's events,
        from 1) makes a resend append nothing twice."""
        return await push_events(self, job_id, receipt, events, seq, types)

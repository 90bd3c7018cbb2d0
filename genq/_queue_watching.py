"""Following a job: its events as they are written, until the terminal one, and waiting for
its outcome."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ._cancellation import raise_if_cancelled
from ._errors import JobCancelledError, JobFailedError, JobNotFoundError
from ._events import Event, as_text, check_cursor, decode_entry
from ._queue_base import ms
from ._queue_events import JobEvents
from ._queue_records import Records
from ._status import TERMINAL, JobStatus


class Watching(Records, JobEvents):
    """What a watcher calls on :class:`genq.Queue`: it reads the record for the status and the
    outcome, and the stream for the events."""

    async def watch(self, job_id: str, after: str | None = None) -> AsyncIterator[Event]:
        """Yields the job's events in order and ends after the terminal one.

        Without ``after`` it replays from the first retained event; with ``after`` it resumes
        strictly after that event id. A cursor already at the terminal event ends at once.
        """
        cursor = check_cursor(after) if after else "0-0"
        key = self.keys.events(job_id)
        if not await self.redis.exists(self.keys.job(job_id)):
            raise JobNotFoundError(job_id)
        while True:
            entries = await self._entries_after(key, cursor)
            if not entries:
                status = await self.redis.hget(self.keys.job(job_id), "status")
                if status is None:
                    return
                if JobStatus(as_text(status)) in TERMINAL:
                    entries = await self._entries_after(key, cursor)
                    if not entries:
                        return
                else:
                    # RESP2, one stream: [[key, entries]], or empty when the block timed out.
                    reply: Any = await self.redis.xread({key: cursor}, block=ms(self.watch_block))
                    entries = reply[0][1] if reply else []
            raise_if_cancelled()
            for entry_id, fields in entries:
                event = decode_entry(entry_id, fields, self.result_codec)
                cursor = event.id
                yield event
                if event.terminal:
                    return

    async def _entries_after(self, key: str, cursor: str) -> list[Any]:
        """Up to 500 entries of the stream ``key`` strictly after ``cursor``."""
        return await self.redis.xrange(key, f"({cursor}", "+", count=500) or []

    async def wait(self, job_id: str, timeout: float | None = None) -> Any:
        """Waits for the job to finish and returns its result.

        Raises :class:`JobNotFoundError`, :class:`JobFailedError`, :class:`JobCancelledError`,
        or ``TimeoutError``. A job that already finished answers at once.
        """
        async with asyncio.timeout(timeout):
            while True:
                # Not MULTI: at maxmemory Redis refuses every command queued in a MULTI, reads
                # included. Atomicity is not needed: the loop reads the status again anyway.
                async with self.redis.pipeline(transaction=False) as pipe:
                    pipe.hget(self.keys.job(job_id), "status")
                    pipe.xrevrange(self.keys.events(job_id), count=1)
                    status, newest = await pipe.execute()
                raise_if_cancelled()  # the timeout's cancel must not be lost in redis-py
                if status is None:
                    raise JobNotFoundError(job_id)
                if JobStatus(as_text(status)) in TERMINAL:
                    return await self._outcome(job_id)
                last = self._newest(newest)
                async for event in self.watch(job_id, after=last.id if last else None):
                    if event.terminal:
                        return await self._outcome(job_id)

    async def _outcome(self, job_id: str) -> Any:
        job = await self.get(job_id)
        if job is None:
            raise JobNotFoundError(job_id)
        if job.status is JobStatus.FAILED:
            raise JobFailedError(job_id, job.error)
        if job.status is JobStatus.CANCELLED:
            raise JobCancelledError(job_id)
        return job.result

"""Following a job: its events as they are written, until the terminal one, and waiting for
its outcome."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from ._cancellation import raise_if_cancelled
from ._errors import JobCancelledError, JobFailedError, JobNotFoundError
from ._events import Event, as_text, check_cursor, decode_entry
from ._queue_base import ms
from ._queue_events import JobEvents
from ._queue_records import Records
from ._retrying import with_retry
from ._status import TERMINAL, JobStatus

T = TypeVar("T")


class Watching(Records, JobEvents):
    """What a watcher calls on :class:`genq.Queue`: it reads the record for the status and the
    outcome, and the stream for the events."""

    async def watch(self, job_id: str, after: str | None = None) -> AsyncIterator[Event]:
        """Yields the job's events in order and ends after the terminal one.

        Without ``after`` it replays from the first retained event; with ``after`` it resumes
        strictly after that event id. A cursor already at the terminal event ends at once.
        A dropped connection or a failover is ridden out for up to the queue's lease: every
        read is one that can be sent again from the same cursor.
        """
        cursor = check_cursor(after) if after else "0-0"
        key, job_key = self.keys.events(job_id), self.keys.job(job_id)
        if not await self._read(lambda: self.redis.exists(job_key)):
            raise JobNotFoundError(job_id)
        while True:
            entries = await self._entries_after(key, cursor)
            if not entries:
                status = await self._read(lambda: self.redis.hget(job_key, "status"))
                if status is None:
                    return
                if JobStatus(as_text(status)) in TERMINAL:
                    entries = await self._entries_after(key, cursor)
                    if not entries:
                        return
                else:
                    entries = await self._entries_blocking(key, cursor)
            raise_if_cancelled()
            for entry_id, fields in entries:
                event = decode_entry(entry_id, fields, self.result_codec)
                cursor = event.id
                yield event
                if event.terminal:
                    return

    async def _entries_after(self, key: str, cursor: str) -> list[Any]:
        """Up to 500 entries of the stream ``key`` strictly after ``cursor``."""
        return await self._read(lambda: self.redis.xrange(key, f"({cursor}", "+", count=500)) or []

    async def _entries_blocking(self, key: str, cursor: str) -> list[Any]:
        """The entries of the stream ``key`` after ``cursor``, waiting up to ``watch_block``
        for the first (none when it timed out)."""
        block = ms(self.watch_block)
        reply: Any = await self._read(lambda: self.redis.xread({key: cursor}, block=block))
        # RESP2, one stream: [[key, entries]], or empty when the block timed out.
        return reply[0][1] if reply else []

    async def _read(self, call: Callable[[], Awaitable[T]]) -> T:
        """A read of a watcher or waiter, sent again after a transient error (a failover
        closes the connections of a master that turns replica) for up to the lease."""

        async def once() -> T:
            raise_if_cancelled()  # a cancel redis-py swallowed must not be retried away
            return await call()

        return await with_retry(once, within=self.lease)

    async def wait(self, job_id: str, timeout: float | None = None) -> Any:
        """Waits for the job to finish and returns its result.

        Raises :class:`JobNotFoundError`, :class:`JobFailedError`, :class:`JobCancelledError`,
        or ``TimeoutError``. A job that already finished answers at once. Like :meth:`watch`,
        it rides out a dropped connection or a failover.
        """
        async with asyncio.timeout(timeout):
            while True:
                status, newest = await self._read(lambda: self._status_and_newest(job_id))
                raise_if_cancelled()  # the timeout's cancel must not be lost in redis-py
                if status is None:
                    raise JobNotFoundError(job_id)
                if JobStatus(as_text(status)) in TERMINAL:
                    return await self._outcome(job_id)
                last = self._newest(newest)
                async for event in self.watch(job_id, after=last.id if last else None):
                    if event.terminal:
                        return await self._outcome(job_id)

    async def _status_and_newest(self, job_id: str) -> list[Any]:
        # Not MULTI: at maxmemory Redis refuses every command queued in a MULTI, reads
        # included. Atomicity is not needed: the waiter reads the status again anyway.
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(self.keys.job(job_id), "status")
            pipe.xrevrange(self.keys.events(job_id), count=1)
            return await pipe.execute()

    async def _outcome(self, job_id: str) -> Any:
        job = await self._read(lambda: self.get(job_id))
        if job is None:
            raise JobNotFoundError(job_id)
        if job.status is JobStatus.FAILED:
            raise JobFailedError(job_id, job.error)
        if job.status is JobStatus.CANCELLED:
            raise JobCancelledError(job_id)
        return job.result

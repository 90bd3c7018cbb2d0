"""The queue: producers, watchers and operators talk to this."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from ._active_job import ActiveJob
from ._calls import cancel_call, delete_call, purge_dead_call, retry_call
from ._cancellation import raise_if_cancelled
from ._dead_letters import DeadEntry, DeadPage, format_cursor, parse_cursor, rows_after
from ._doorbell import Doorbell
from ._enqueue import (
    Enqueued,
    EnqueueItem,
    confirm,
    enqueue_batch,
    enqueued,
    item_call,
    one_call,
    run_enqueue,
)
from ._errors import JobCancelledError, JobFailedError, JobNotFinishedError, JobNotFoundError
from ._events import Event, StreamEntry, as_text, check_cursor, decode_entry
from ._job import Job
from ._job_index import IdPage, JobPage, count_jobs, list_ids, list_jobs
from ._outbox import OutboxGroup
from ._pull import Pulled, PulledJob, ack, extend, nack, pull, push_events
from ._queue_base import QueueBase, ms
from ._scripts import Code
from ._status import TERMINAL, JobStatus
from ._stream_reads import first_ordinal, read_range, read_retained
from ._streamed import run_streamed
from ._usage import UsageRow, days, parse_counters
from ._worker import PRESENCE_SECONDS, Worker
from .connection import RedisPipeline

__all__ = ["EnqueueItem", "Enqueued", "IdPage", "JobPage", "Queue", "QueueStats"]


@dataclass(frozen=True)
class QueueStats:
    waiting: int
    scheduled: int
    active: int
    dead: int
    oldest_wait: float = 0.0
    """Seconds the longest-waiting job has waited since it became runnable (enqueued, due, or
    put back in line), whatever its priority or tenant; 0 when none waits."""


class Queue(QueueBase):
    """A durable job queue with a per-job output stream, on one Redis (Cluster slot).

    ``Queue(redis, prefix="queue", *, codec, result_codec, lease, max_attempts, backoff,
    max_backoff, result_ttl, dead_ttl, events_max_len, watch_block, tenant_weights,
    tenant_concurrency, durable_replicas, durable_timeout)``. All durations are seconds.
    ``redis`` is a ``redis.asyncio.Redis`` or ``RedisCluster``.

    Fair share: waiting jobs are served round-robin across tenants, ``tenant_weights`` (tenant
    -> 1..1000, default 1) turns each served job of a tenant into 1/weight of a turn, and
    ``tenant_concurrency`` (0: none) caps the jobs one tenant holds at once; jobs beyond it wait
    for its running ones. Both are read by this queue's workers when they reserve, so every
    worker of a queue should be given the same ones.

    Durable acceptance: with ``durable_replicas=N`` (0-10; 0, the default, is off and sends
    nothing more), ``enqueue``, ``enqueue_many`` and workers' settles wait, on the connection
    that wrote, until N replicas hold the write (Redis ``WAIT``), for up to
    ``durable_timeout`` seconds (1.0; under the client's socket timeout). An enqueue that is
    not confirmed in time raises :class:`ReplicationTimeoutError`; a settle logs a warning.
    It costs a replication round trip per call and makes nothing lost on a failover that
    promotes a replica which confirmed.
    """

    # -- producing -----------------------------------------------------------------------------

    async def enqueue(
        self,
        payload: Any,
        idempotency_key: str | None = None,
        priority: int = 0,
        delay: float = 0.0,
        job_id: str | None = None,
        max_attempts: int | None = None,
        idempotency_ttl: float | None = None,
        tenant: str = "",
    ) -> Enqueued:
        """Adds a job in one atomic round trip. Higher ``priority`` runs first; FIFO within one.

        With ``idempotency_key``, a key still bound to a job returns that job's id with
        ``deduplicated=True``. Reusing a finished ``job_id`` starts clean; a live one raises
        :class:`JobExistsError`.

        Waiting jobs are served round-robin across ``tenant`` values (weighted by the queue's
        ``tenant_weights``), by priority and then FIFO within a tenant.

        With ``durable_replicas`` set, it returns only once that many replicas hold the job,
        or raises :class:`ReplicationTimeoutError` (the job is on the primary; resend with the
        same idempotency key or job id to confirm it).
        """
        keys, args = item_call(
            self, payload, idempotency_key, priority, delay, job_id, max_attempts,
            idempotency_ttl, tenant,
        )  # fmt: skip
        (code, bound), acknowledged = await run_enqueue(self, one_call(self, keys, args))
        result = enqueued(args[0], code, bound)
        confirm(self, acknowledged, [result.id])
        return result

    async def enqueue_many(self, items: Iterable[EnqueueItem]) -> list[Enqueued]:
        """Adds many jobs in one round trip: each item is one ``enqueue`` (same checks, same
        idempotency), taken in order by one script call per 20 items, each call written while
        the next is made. Outcomes come in item order. Each call is atomic; the batch as a
        whole is not a transaction.

        An item that fails (a bad option, a payload the codec cannot encode, or
        :class:`JobExistsError` for a live custom id) does not stop the others: every other
        item is enqueued, and then
        :class:`EnqueueManyError` is raised with ``results``, one per item: its
        :class:`Enqueued` or its exception. Two items with one idempotency key make one job
        (the later one is ``deduplicated``). Safe to resend, as ``enqueue`` is.
        """
        return await enqueue_batch(self, items)

    # -- reading -------------------------------------------------------------------------------

    async def get(self, job_id: str) -> Job | None:
        """The job's record, or None when the id is unknown or its record expired."""
        (raw,), now = await self.read_with_time(lambda pipe: pipe.hgetall(self.keys.job(job_id)))
        if not raw:
            return None
        return Job.from_hash(raw, self.codec, self.result_codec, now)

    async def find(self, idempotency_key: str) -> Job | None:
        """The job an idempotency key is bound to, or None when it is bound to none."""
        bound = await self.redis.get(self.keys.idempotency(idempotency_key))
        return await self.get(as_text(bound)) if bound else None

    async def jobs(
        self,
        status: str | None = None,
        tenant: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobPage:
        """A page of jobs, newest first (by creation), of one status (``dead`` is ``failed``)
        or all, of one tenant or all. Pass the page's ``next_cursor`` back for the next page:
        paging while jobs change never repeats a job and never skips one that kept its status.
        Finished jobs leave the listing when their records expire."""
        return await list_jobs(self, status, tenant, limit, cursor)

    async def job_ids(
        self,
        status: str | None = None,
        tenant: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> IdPage:
        """:meth:`jobs` without reading the records: the ids of a page, from the index alone
        (an operator's "all of a status" needs only those)."""
        return await list_ids(self, status, tenant, limit, cursor)

    async def job_counts(self, tenant: str | None = None) -> dict[str, int]:
        """How many jobs the listing holds in each status (of ``tenant``, or all)."""
        return await count_jobs(self, tenant)

    async def usage(
        self, first_day: date, last_day: date, tenant: str | None = None
    ) -> list[UsageRow]:
        """The usage settled on each UTC day from ``first_day`` to ``last_day`` (at most
        ``USAGE_DAYS_KEPT`` days), per tenant (or of ``tenant``) and label, days in order."""
        span = days(first_day, last_day)
        async with self.redis.pipeline(transaction=False) as pipe:
            for day in span:
                pipe.hgetall(self.keys.usage_day(day.isoformat()))
            replies: list[Any] = await pipe.execute()
        return [
            row
            for day, raw in zip(span, replies, strict=True)
            for row in parse_counters(raw, day, tenant)
        ]

    async def usage_totals(self, tenant: str | None = None) -> list[UsageRow]:
        """All the usage ever settled, per tenant (or of ``tenant``) and label."""
        return parse_counters(await self.redis.hgetall(self.keys.usage_total), None, tenant)

    async def existing(self, job_ids: Iterable[str]) -> list[str]:
        """The ``job_ids`` this queue holds a record of, in the order given (one round trip)."""
        ids = list(job_ids)
        if not ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.exists(self.keys.job(job_id))
            found: list[Any] = await pipe.execute()
        return [job_id for job_id, n in zip(ids, found, strict=True) if n]

    async def last_event(self, job_id: str) -> Event | None:
        """The newest event still on the job's stream; None when there is none.

        With the record's status it tells whether a finished job's stream already ended, or
        where to start following a running one.
        """
        return self._newest(await self.redis.xrevrange(self.keys.events(job_id), count=1))

    def _newest(self, reply: list[Any] | None) -> Event | None:
        """An ``XREVRANGE ... COUNT 1`` reply -> its event."""
        if not reply:
            return None
        entry_id, fields = reply[0]
        return decode_entry(entry_id, fields, self.result_codec)

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

    async def stats(self) -> QueueStats:
        """The jobs per state and the oldest wait, in one round trip."""
        k = self.keys

        def fill(pipe: RedisPipeline) -> None:
            for key in (k.ready, k.scheduled, k.leases, k.dead):
                pipe.zcard(key)
            pipe.zrange(k.waits, 0, 0, withscores=True)
            pipe.llen(k.intake)
            pipe.lindex(k.intake, 0)

        (ready, scheduled, active, dead, head, intake, first), now = await self.read_with_time(fill)
        # Waiting: admitted (the ready set; the waits order its jobs by when they became
        # runnable) and not yet (the intake, oldest first, each entry beginning with its job's
        # creation time).
        since = [float(score) for _, score in head]
        if first:
            since.append(float(as_text(first)[:15]))
        oldest = max(0.0, now - min(since) / 1000) if since else 0.0
        return QueueStats(ready + intake, scheduled, active, dead, oldest)

    async def count(self, name: str) -> int:
        """Adds one to the named counter kept with this queue (in its slot; it never expires),
        for layers built on the queue (a provider's 429 answers); returns the new count."""
        return int(await self.redis.incr(self.keys.extra(name)))

    async def counter(self, name: str) -> int:
        """The named counter's count (0 before the first :meth:`count`)."""
        return int(await self.redis.get(self.keys.extra(name)) or 0)

    def extra_key(self, name: str) -> str:
        """A key in this queue's slot for a layer built on the queue that keeps data of its
        own there, and runs its own commands (and scripts) on it: genq never touches it."""
        return self.keys.extra(name)

    # -- controlling ---------------------------------------------------------------------------

    async def cancel(self, job_id: str) -> bool:
        """Cancels a job. True if the job will not produce a result (now, or ever)."""
        reply = await self.run_keyed(
            job_id, lambda idem: self.scripts.cancel(*cancel_call(self, job_id, idem))
        )
        return bool(reply[0] == 1)

    async def cooldown(self, seconds: float) -> float:
        """Pauses reserving from this queue for ``seconds`` (kept if a longer one is in force).

        Returns the cooldown's remaining seconds."""
        remaining = await self.scripts.cooldown(keys=[self.keys.cooldown], args=[ms(seconds)])
        return max(0, int(remaining)) / 1000

    async def cooldown_remaining(self) -> float:
        return max(0, int(await self.redis.pttl(self.keys.cooldown))) / 1000

    async def clear_cooldown(self) -> float:
        """Ends this queue's cooldown now and wakes idle workers (an operator's override).

        Returns the seconds that were left (0 when none was in force)."""
        k = self.keys
        remaining = await self.scripts.clear_cooldown(keys=[k.cooldown, k.signal])
        return max(0, int(remaining)) / 1000

    async def wake(self) -> None:
        """Rings the doorbell once: one idle worker (or gateway pull listener) looks again."""
        await self.redis.lpush(self.keys.signal, "1")

    def doorbell(self, block: float) -> Doorbell:
        """A listener of the doorbell on a connection of its own, each wait ``block`` seconds
        at most (see :class:`genq.Doorbell`)."""
        return Doorbell(self, block)

    def outbox(self, group: str) -> OutboxGroup:
        """The consumer group ``group`` on this queue's dead-letter outbox."""
        return OutboxGroup(self, group)

    # -- dead letters --------------------------------------------------------------------------

    async def dead(self, count: int = 20) -> list[str]:
        """Ids of dead-lettered jobs, oldest first."""
        ids: list[Any] = await self.redis.zrange(self.keys.dead, 0, count - 1)
        return [as_text(i) for i in ids]

    async def dead_entries(self, count: int = 20) -> list[DeadEntry]:
        """The newest ``count`` dead-lettered jobs with why they died, newest first."""
        return (await self.dead_page(count)).entries

    async def dead_page(self, count: int = 20, cursor: str | None = None) -> DeadPage:
        """A page of dead-lettered jobs with why they died, newest first.

        Pass the page's ``next_cursor`` back for the next one. Paging while jobs die, are
        retried or purged never repeats an entry and never skips one that stayed dead: the
        cursor is a position (died-at time and id), not an offset.
        """
        if count < 1:
            raise ValueError("count must be >= 1")
        key = self.keys.dead
        async with self.redis.pipeline(transaction=False) as pipe:
            if cursor is None:
                pipe.zrevrangebyscore(key, "+inf", "-inf", start=0, num=count + 1, withscores=True)
            else:
                died, last_id = parse_cursor(cursor)
                # Entries that died in the same millisecond as the cursor's, then older ones.
                pipe.zrevrangebyscore(key, died, died, withscores=True)
                below = f"({died}"
                pipe.zrevrangebyscore(key, below, "-inf", start=0, num=count + 1, withscores=True)
            replies = await pipe.execute()
        rows = replies[0] if cursor is None else rows_after(replies[0], replies[1], last_id)
        page = rows[:count]
        fields = ("dead_reason", "error", "attempt")
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id, _ in page:
                pipe.hmget(self.keys.job(as_text(job_id)), *fields)
            records = await pipe.execute()
        entries = []
        for (job_id, died_ms), (reason, error, attempt) in zip(page, records, strict=True):
            if reason is None:  # the record expired before the dead entry was trimmed
                continue
            entries.append(
                DeadEntry(
                    id=as_text(job_id),
                    reason=as_text(reason),
                    error=as_text(error) if error else None,
                    attempts=int(attempt or 0),
                    died_at=died_ms / 1000,
                )
            )
        more = len(rows) > count
        return DeadPage(entries, format_cursor(page[-1]) if more else None)

    async def retry_dead(self, job_id: str) -> bool:
        """Puts a dead-lettered job back with fresh attempts; its old output is dropped."""
        return await self._retry(job_id, cancelled_too=False)

    async def retry(self, job_id: str) -> bool:
        """Puts a failed or cancelled job back in line with fresh attempts, under the same id;
        its old output is dropped (watchers get ``restarted``). False for any other job."""
        return await self._retry(job_id, cancelled_too=True)

    async def _retry(self, job_id: str, cancelled_too: bool) -> bool:
        reply = await self.run_keyed(
            job_id,
            lambda idem: self.scripts.retry(*retry_call(self, job_id, idem, cancelled_too)),
        )
        return bool(reply[0] == 1)

    async def delete(self, job_id: str) -> bool:
        """Deletes a finished job for good (record, output, listing entries, its idempotency
        key). False when there is no such job; :class:`JobNotFinishedError` when it has not
        finished (cancel it first)."""
        reply = await self.run_keyed(
            job_id, lambda idem: self.scripts.delete(*delete_call(self, job_id, idem))
        )
        if reply[0] == Code.EXISTS:
            raise JobNotFinishedError(job_id)
        return bool(reply[0] == 1)

    async def purge_dead(self, ids: list[str] | None = None) -> int:
        """Deletes dead-lettered jobs for good (all of them when ``ids`` is None)."""
        purged = 0
        while True:
            batch = ids if ids is not None else await self.dead(count=500)
            if not batch:
                return purged
            calls = [purge_dead_call(self, job_id) for job_id in batch]
            replies = await run_streamed(self.redis, self.scripts.purge_dead, calls)
            purged += sum(int(n) for n in replies)
            if ids is not None:
                return purged

    # -- pulling (workers anywhere: genq/_pull.py) ----------------------------------------------

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
    ) -> bool:
        """Appends ``(type, data)`` events (``chunk`` or ``progress``) to a pulled job's
        stream, adjacent text chunks joined as a worker's emits are; each renews the
        visibility. True if a cancel is pending. ``seq`` (the first event's number among this
        attempt's events, from 1) makes a resend append nothing twice."""
        return await push_events(self, job_id, receipt, events, seq)

    # -- working -------------------------------------------------------------------------------

    def worker(
        self,
        handler: Callable[[ActiveJob], Awaitable[Any]],
        concurrency: int = 8,
        lease: float | None = None,
        heartbeat: float | None = None,
        poll: float | None = None,
        is_retryable: Callable[[BaseException], bool] | None = None,
        on_error: Callable[[ActiveJob, BaseException], Any] | None = None,
        presence: float = PRESENCE_SECONDS,
    ) -> Worker:
        """A worker running ``handler``; use ``async with`` (leaving = graceful stop).

        ``presence`` (seconds): how long the worker may give no sign of life (killed, cut off,
        paused) before the other workers of the queue take its jobs back, whatever the lease."""
        return Worker(
            self,
            handler,
            concurrency=concurrency,
            lease=lease,
            heartbeat=heartbeat,
            poll=poll,
            is_retryable=is_retryable,
            on_error=on_error,
            presence=presence,
        )

    # -- reading a job's stream as written -----------------------------------------------------

    async def events_range(
        self, job_id: str, after: str | None = None, upto: str = "+", count: int | None = None
    ) -> list[StreamEntry]:
        """The job's stream entries strictly after ``after`` (None: from the first retained)
        up to the entry id ``upto`` included (``+``: the newest), at most ``count`` of them,
        undecoded (:meth:`StreamEntry.event` decodes one)."""
        cursor = None if after is None else check_cursor(after)
        return await read_range(self.redis, self.keys.events(job_id), cursor, upto, count)

    async def retained_events(self, job_id: str) -> tuple[int, list[StreamEntry]] | None:
        """(the ordinal of the first, every retained entry of the job's stream); ``(0, [])``
        for an empty stream. An entry's ordinal is its rank among all the entries ever added
        to the stream: it only grows, across restarts and trims. None when the stream kept
        changing (restarts, trims) through several consistent reads: try again later."""
        return await read_retained(self.redis, self.keys.events(job_id))

    async def event_ordinal(self, job_id: str, entry_id: str) -> int | None:
        """The ordinal of ``entry_id`` if it is (still) the first entry of the job's stream
        (a ``restarted`` entry is, when it is written); None otherwise."""
        return await first_ordinal(self.redis, self.keys.events(job_id), entry_id)

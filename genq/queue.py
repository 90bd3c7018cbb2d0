"""The queue: producers, watchers and operators talk to this."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .cancellation import raise_if_cancelled
from .cluster import is_cluster, run_pipelined, server_time, socket_timeout
from .codecs import Codec, json_codec
from .errors import JobCancelledError, JobFailedError, JobNotFoundError
from .events import Event, check_cursor, decode_entry, text
from .job import Job
from .keys import Keys, check_job_id, check_prefix
from .scripts import Code, Scripts, raise_for
from .status import TERMINAL, JobStatus

if TYPE_CHECKING:
    from .active_job import ActiveJob
    from .worker import Worker

PRIORITY_RANGE = range(-1000, 1001)
MAX_IDEMPOTENCY_KEY = 512


def ms(seconds: float) -> int:
    return max(0, math.ceil(seconds * 1000))


def safe_block(redis: Any, wanted: float) -> float:
    """A blocking command's wait, kept under the client's socket timeout.

    redis-py 8.1 applies its socket timeout (5 s by default) to XREAD BLOCK and BLPOP too, so a
    block as long as the timeout ends in a TimeoutError instead of an empty reply.
    """
    timeout = socket_timeout(redis)
    return wanted if not timeout else min(wanted, timeout / 2)


@dataclass(frozen=True)
class Enqueued:
    id: str
    deduplicated: bool


@dataclass(frozen=True)
class QueueStats:
    waiting: int
    scheduled: int
    active: int
    dead: int
    oldest_wait: float = 0.0
    """Seconds the job at the head of the ready set has been waiting since it was enqueued."""


@dataclass(frozen=True)
class DeadEntry:
    id: str
    reason: str
    error: str | None
    attempts: int
    died_at: float


class Queue:
    """A durable job queue with a per-job output stream, on one Redis (Cluster slot).

    All durations are seconds. ``redis`` is a ``redis.asyncio.Redis`` or ``RedisCluster``.
    """

    def __init__(
        self,
        redis: Any,
        prefix: str = "queue",
        *,
        codec: Codec[Any] = json_codec,
        result_codec: Codec[Any] = json_codec,
        lease: float = 60.0,
        max_attempts: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        result_ttl: float = 3600.0,
        dead_ttl: float = 14 * 86400.0,
        events_max_len: int = 10_000,
        watch_block: float = 2.0,
    ) -> None:
        if lease <= 0 or max_attempts < 1 or backoff < 0 or max_backoff < backoff:
            raise ValueError("lease > 0, max_attempts >= 1, 0 <= backoff <= max_backoff")
        if result_ttl <= 0 or dead_ttl <= 0 or events_max_len < 1:
            raise ValueError("result_ttl, dead_ttl and events_max_len must be positive")
        self.redis = redis
        self.prefix = check_prefix(prefix)
        self.keys = Keys(prefix)
        self.codec = codec
        self.result_codec = result_codec
        self.lease = lease
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.result_ttl = result_ttl
        self.dead_ttl = dead_ttl
        self.events_max_len = events_max_len
        self.watch_block = safe_block(redis, watch_block)
        self.scripts = Scripts(redis)

    def __repr__(self) -> str:
        return f"Queue(prefix={self.prefix!r})"

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
    ) -> Enqueued:
        """Adds a job in one atomic round trip. Higher ``priority`` runs first; FIFO within one.

        With ``idempotency_key``, a key still bound to a job returns that job's id with
        ``deduplicated=True``. Reusing a finished ``job_id`` starts clean; a live one raises
        :class:`JobExistsError`.
        """
        if not isinstance(priority, int) or priority not in PRIORITY_RANGE:
            raise ValueError("priority must be an integer from -1000 to 1000")
        if not math.isfinite(delay) or delay < 0:
            raise ValueError("delay must be a finite number of seconds >= 0")
        attempts = self.max_attempts if max_attempts is None else max_attempts
        if attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if idempotency_key is not None and not 0 < len(idempotency_key) <= MAX_IDEMPOTENCY_KEY:
            raise ValueError(f"idempotency_key must be 1-{MAX_IDEMPOTENCY_KEY} characters")
        idem_ttl = self.result_ttl if idempotency_ttl is None else idempotency_ttl
        if idem_ttl <= 0:
            raise ValueError("idempotency_ttl must be positive")
        # The nonce lets a resent enqueue recognise the job it already made; a generated id
        # is unique on its own.
        nonce = uuid.uuid4().hex
        job_id = check_job_id(job_id) if job_id is not None else nonce
        k = self.keys
        code, bound = await self.scripts.enqueue(
            keys=[
                k.job(job_id),
                k.events(job_id),
                k.ready,
                k.scheduled,
                k.rank,
                k.dead,
                k.signal,
                k.seq,
                k.idempotency(idempotency_key or ""),
            ],
            args=[
                job_id,
                nonce,
                self.codec.encode(payload),
                priority,
                ms(delay),
                attempts,
                idempotency_key or "",
                ms(idem_ttl),
            ],
        )
        raise_for(code, job_id)
        return Enqueued(id=text(bound), deduplicated=code == Code.DEDUPLICATED)

    # -- reading -------------------------------------------------------------------------------

    async def server_time(self) -> float:
        seconds, micros = await server_time(self.redis, self.keys.ready)
        return seconds + micros / 1e6

    async def _read_with_time(self, fill: Callable[[Any], object]) -> tuple[list[Any], float]:
        """The replies of the reads ``fill`` queues on a pipeline, and the server's time.

        A cluster pipeline refuses TIME (it has no key to route by), so there the time is read
        from the queue's node right after the pipeline.
        """
        cluster = is_cluster(self.redis)
        async with self.redis.pipeline(transaction=False) as pipe:
            fill(pipe)
            if not cluster:
                pipe.time()
            replies: list[Any] = await pipe.execute()
        if cluster:
            return replies, await self.server_time()
        seconds, micros = replies.pop()
        return replies, int(seconds) + int(micros) / 1e6

    async def get(self, job_id: str) -> Job | None:
        """The job's record, or None when the id is unknown or its record expired."""
        (raw,), now = await self._read_with_time(lambda pipe: pipe.hgetall(self.keys.job(job_id)))
        if not raw:
            return None
        return Job.from_hash(raw, self.codec, self.result_codec, now)

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
            entries = await self.redis.xrange(key, f"({cursor}", "+", count=500)
            if not entries:
                status = await self.redis.hget(self.keys.job(job_id), "status")
                if status is None:
                    return
                if JobStatus(text(status)) in TERMINAL:
                    entries = await self.redis.xrange(key, f"({cursor}", "+", count=500)
                    if not entries:
                        return
                else:
                    reply = await self.redis.xread({key: cursor}, block=ms(self.watch_block))
                    entries = reply[0][1] if reply else []
            raise_if_cancelled()
            for entry_id, fields in entries:
                event = decode_entry(entry_id, fields, self.result_codec)
                cursor = event.id
                yield event
                if event.terminal:
                    return

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
                    status, last = await pipe.execute()
                raise_if_cancelled()  # the timeout's cancel must not be lost in redis-py
                if status is None:
                    raise JobNotFoundError(job_id)
                if JobStatus(text(status)) in TERMINAL:
                    return await self._outcome(job_id)
                cursor = text(last[0][0]) if last else "0-0"
                async for event in self.watch(job_id, after=cursor):
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
        k = self.keys

        def fill(pipe: Any) -> None:
            for key in (k.ready, k.scheduled, k.leases, k.dead):
                pipe.zcard(key)
            pipe.zrange(k.ready, 0, 0)

        (waiting, scheduled, active, dead, head), now = await self._read_with_time(fill)
        oldest = 0.0
        if head:
            created = await self.redis.hget(k.job(text(head[0])), "created_at")
            if created:
                oldest = max(0.0, int(now) - int(created) / 1000)
        return QueueStats(waiting, scheduled, active, dead, oldest)

    # -- controlling ---------------------------------------------------------------------------

    async def cancel(self, job_id: str) -> bool:
        """Cancels a job. True if the job will not produce a result (now, or ever)."""
        k = self.keys
        reply = await self.run_keyed(
            job_id,
            lambda idem: self.scripts.cancel(
                keys=[k.job(job_id), k.events(job_id), k.ready, k.scheduled, k.leases, k.rank,
                      k.idempotency(idem)],
                args=[job_id, ms(self.result_ttl), self.events_max_len, k.cancels, idem],
            ),
        )  # fmt: skip
        return bool(reply[0] == 1)

    async def run_keyed(
        self, job_id: str, call: Callable[[str], Awaitable[list[Any]]]
    ) -> list[Any]:
        """Runs a script that releases or binds the job's idempotency key.

        A script cannot build that key's name itself (every key must be passed in), so the
        caller reads the job's key first; the script checks it is still the job's and answers
        ``STALE_READ`` if it changed in between (a custom id re-enqueued), and then it is read
        again.
        """
        for _ in range(10):
            raw = await self.redis.hget(self.keys.job(job_id), "idempotency_key")
            reply = await call(text(raw) if raw else "")
            if reply[0] != Code.STALE_READ:
                return reply
        raise RuntimeError(f"job {job_id!r} kept changing under a state change")

    async def cooldown(self, seconds: float) -> float:
        """Pauses reserving from this queue for ``seconds`` (kept if a longer one is in force).

        Returns the cooldown's remaining seconds."""
        remaining = await self.scripts.cooldown(keys=[self.keys.cooldown], args=[ms(seconds)])
        return max(0, int(remaining)) / 1000

    async def cooldown_remaining(self) -> float:
        return max(0, int(await self.redis.pttl(self.keys.cooldown))) / 1000

    # -- dead letters --------------------------------------------------------------------------

    async def dead(self, count: int = 20) -> list[str]:
        """Ids of dead-lettered jobs, oldest first."""
        return [text(i) for i in await self.redis.zrange(self.keys.dead, 0, count - 1)]

    async def dead_entries(self, count: int = 20, offset: int = 0) -> list[DeadEntry]:
        """Dead-lettered jobs with why they died, newest first."""
        ids = await self.redis.zrevrange(
            self.keys.dead, offset, offset + count - 1, withscores=True
        )
        fields = ("dead_reason", "error", "attempt")
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id, _ in ids:
                pipe.hmget(self.keys.job(text(job_id)), *fields)
            rows = await pipe.execute()
        entries = []
        for (job_id, died), (reason, error, attempt) in zip(ids, rows, strict=True):
            if reason is None:  # the record expired before the dead entry was trimmed
                continue
            entries.append(
                DeadEntry(
                    id=text(job_id),
                    reason=text(reason),
                    error=text(error) if error else None,
                    attempts=int(attempt or 0),
                    died_at=died / 1000,
                )
            )
        return entries

    async def retry_dead(self, job_id: str) -> bool:
        """Puts a dead-lettered job back with fresh attempts; its old output is dropped."""
        k = self.keys
        reply = await self.run_keyed(
            job_id,
            lambda idem: self.scripts.retry_dead(
                keys=[k.job(job_id), k.events(job_id), k.dead, k.ready, k.idempotency(idem),
                      k.signal],
                args=[job_id, self.events_max_len, idem],
            ),
        )  # fmt: skip
        return bool(reply[0] == 1)

    async def purge_dead(self, ids: list[str] | None = None) -> int:
        """Deletes dead-lettered jobs for good (all of them when ``ids`` is None)."""
        k = self.keys
        purged = 0
        while True:
            batch = ids if ids is not None else await self.dead(count=500)
            if not batch:
                return purged
            calls = [([k.job(job_id), k.events(job_id), k.dead], [job_id]) for job_id in batch]
            replies = await run_pipelined(self.redis, self.scripts.purge_dead, calls)
            purged += sum(int(n) for n in replies)
            if ids is not None:
                return purged

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
    ) -> Worker:
        """A worker running ``handler``; use ``async with`` (leaving = graceful stop)."""
        from .worker import Worker

        return Worker(
            self,
            handler,
            concurrency=concurrency,
            lease=lease,
            heartbeat=heartbeat,
            poll=poll,
            is_retryable=is_retryable,
            on_error=on_error,
        )

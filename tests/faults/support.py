"""Helpers shared by the fault tests: resuming viewers, tagged handlers, worker processes, the
scripts called one by one, and what a queue's intake holds."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from genq import ActiveJob, Event, JobNotFoundError, Queue
from genq._calls import activate_call, presence_call, reclaim_call, settle_call
from genq._reserve import pick
from tests.processes import WorkerProcess, launch
from workers.lifetime import die_with_parent

ROOT = Path(__file__).resolve().parents[2]
WORKER_MODULE = "tests.genq.worker_process"
BLIPS = (RedisConnectionError, RedisTimeoutError, OSError)


class Viewer:
    """Follows a job like a browser tab: reconnects after any Redis error and resumes after
    the last event it saw (``watch(after=...)``), until the terminal event or the job vanished.
    """

    def __init__(self, queue: Queue, job_id: str, retry: float = 0.1) -> None:
        self.queue = queue
        self.job_id = job_id
        self.events: list[Event] = []
        self.errors: list[str] = []
        self.vanished = False
        self._retry = retry
        self.task = asyncio.create_task(self._follow(), name=f"viewer {job_id}")

    @property
    def last_id(self) -> str | None:
        return self.events[-1].id if self.events else None

    @property
    def ended(self) -> bool:
        return self.task.done()

    async def _follow(self) -> None:
        while True:
            try:
                async for event in self.queue.watch(self.job_id, after=self.last_id):
                    self.events.append(event)
                    if event.terminal:
                        return
                # watch() returned without a terminal event: the record is gone.
                self.vanished = True
                return
            except JobNotFoundError:
                self.vanished = True
                return
            except BLIPS as exc:
                self.errors.append(type(exc).__name__)
                await asyncio.sleep(self._retry)

    async def finished(self, timeout: float) -> list[Event]:
        async with asyncio.timeout(timeout):
            await asyncio.shield(self.task)
        return self.events

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def tagged_handler(
    name: str, delay: float = 0.02, gate: asyncio.Event | None = None
) -> Callable[[ActiveJob], Awaitable[dict[str, Any]]]:
    """A handler whose chunks say who wrote them: ``<name>#<attempt>:tok<n> ``.

    Emits ``payload["chunks"]`` chunks, ``delay`` apart; waits for ``gate`` (if given) before
    returning ``{"text", "writer"}``. Meters each attempt (the chunks it emitted).
    """

    async def handle(job: ActiveJob) -> dict[str, Any]:
        writer = f"{name}#{job.attempt}"
        text = ""
        emitted = 0
        try:
            for n in range(1, int(job.payload["chunks"]) + 1):
                await asyncio.sleep(delay)
                piece = f"{writer}:tok{n} "
                await job.emit(piece)
                emitted += 1
                text += piece
            if gate is not None:
                await gate.wait()
            return {"text": text, "writer": writer}
        finally:  # every attempt meters what it emitted: invariant 9 checks it counts once
            job.meter(name, {"completion_tokens": emitted, "prompt_tokens": 1})

    return handle


async def eventually(
    predicate: Callable[[], Awaitable[bool]], timeout: float, interval: float = 0.05
) -> None:
    """Polls an async predicate until it holds; fails after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(interval)


async def spawn_worker_process(
    name: str, redis_url: str, prefix: str, stderr: Path, **options: Any
) -> WorkerProcess:
    """Starts ``tests/genq/worker_process.py`` (dies with this process) and waits for ready."""
    base_args = ["--redis-url", redis_url, "--prefix", prefix]
    worker = await launch(
        WORKER_MODULE, name, base_args, options, stderr, preexec_fn=die_with_parent
    )
    await worker.expect("ready")
    return worker


class ScriptCalls:
    """A queue's state changes called the way the Worker calls them, one script at a time,
    for tests that must place a job in an exact state (as tests/genq/test_leases.py does)."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.k = queue.keys

    async def pick(self, count: int = 1, claim_ms: int = 10_000, holder: str = "") -> list[str]:
        claimed, _, _ = await pick(self.queue, count, holder, claim_ms / 1000)
        return claimed

    async def presence(self, holder: str, ttl_ms: int) -> list[str]:
        """Renews ``holder``'s presence; returns the ids taken from lapsed holders."""
        taken = await self.queue.scripts.presence(*presence_call(self.queue, holder, ttl_ms / 1000))
        return [t.decode() for t in taken]

    async def activate(self, job_id: str, token: str, lease_ms: int = 30_000) -> int:
        call = activate_call(self.queue, job_id, token, lease_ms / 1000)
        return int((await self.queue.scripts.activate(*call))[0])

    async def emit(self, job_id: str, token: str, seq: int, data: str) -> int:
        k = self.k
        reply = await self.queue.scripts.emit(
            keys=[k.job(job_id), k.events(job_id), k.leases],
            args=[job_id, token, seq, "chunk", data, 30_000, self.queue.events_max_len, ""],
        )
        return int(reply[0])

    async def settle(
        self,
        job_id: str,
        token: str,
        outcome: str,
        data: str = "",
        delay_ms: int = 0,
        reason: str = "error",
        idem_key: str = "",
    ) -> list[Any]:
        call = settle_call(
            self.queue, job_id, token, idem_key, outcome, data, delay_ms / 1000, reason
        )
        return list(await self.queue.scripts.settle(*call))

    async def reclaim(self, job_id: str) -> list[Any]:
        q, k = self.queue, self.k
        idem = await q.redis.hget(k.job(job_id), "idempotency_key")
        idem_key = idem.decode() if idem else ""
        return list(await q.scripts.reclaim(*reclaim_call(q, job_id, idem_key)))

    async def expire_lease(self, job_id: str) -> None:
        await self.queue.redis.zadd(self.k.leases, {job_id: 0}, xx=True)


async def intake_ids(queue: Any) -> list[str]:
    """The ids in ``queue``'s intake (enqueued ready, not yet admitted), in order."""
    entries = await queue.redis.lrange(queue.keys.intake, 0, -1)
    return [entry.rsplit(b"\0", 1)[1].decode() for entry in entries]

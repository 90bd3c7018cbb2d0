"""The long poll of ``POST /v1/queues/{name}/pull``: one doorbell listener per queue.

A pull that finds nothing waits for the queue's doorbell (``{P}:signal``, the list every job
made ready pushes onto). A BLPOP per waiting request would hold one Redis connection per
request, so per gateway process and queue a single task blocks on the doorbell, on a connection
of its own, while any request waits, and wakes all of them at each ring; each then pulls again.
It runs only while requests wait. A request also wakes by itself when the queue changes on its
own (a scheduled job comes due, a lease expires: ``pick.lua`` says when), so an expired
visibility is redelivered to a waiting puller without any enqueue.

The listener consumes rings that built-in workers of the same queue might have used. A ring
popped while no request waits is pushed back, and a woken pull that took all it asked for rings
again, since more jobs may be ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.exceptions import RedisError

from genq import TRANSIENT, PulledJob, Queue, raise_if_cancelled

log = logging.getLogger("gateway.pull")

MIN_NAP = 0.02
"""Shortest wait before a pull is retried on the queue's own schedule."""


class PullWaiter:
    """Pulls from one queue, waiting on its doorbell (shared by every request)."""

    def __init__(self, queue: Queue, block: float = 2.0) -> None:
        self.queue = queue
        self._block = block
        self._waiting = 0
        self._rung = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.rings = 0
        """Doorbell rings the listener heard (for tests and metrics)."""

    @property
    def waiting(self) -> int:
        return self._waiting

    async def pull(self, count: int, visibility: float, wait: float) -> list[PulledJob]:
        """Up to ``count`` jobs; with none ready, waits up to ``wait`` seconds for one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        woken = False
        while True:
            rung = self._rung  # taken before the pull: a ring during it is not missed
            pulled = await self.queue.pull_batch(count, visibility)
            remaining = deadline - loop.time()
            if pulled.jobs or remaining <= 0:
                if woken and len(pulled.jobs) == count:
                    await self.queue.wake()
                return pulled.jobs
            nap = remaining
            if pulled.next_change is not None:
                nap = min(remaining, max(MIN_NAP, pulled.next_change))
            woken = await self._wait(rung, nap)

    async def _wait(self, rung: asyncio.Event, timeout: float) -> bool:
        """Waits for a ring or ``timeout``; True when rung."""
        self._waiting += 1
        try:
            if self._task is None:
                self._task = asyncio.create_task(self._listen(), name="genq-pull-doorbell")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await rung.wait()
            return rung.is_set()
        finally:
            self._waiting -= 1

    def _ring(self) -> None:
        self.rings += 1
        rung, self._rung = self._rung, asyncio.Event()
        rung.set()

    async def _listen(self) -> None:
        doorbell = self.queue.doorbell(self._block)
        try:
            while self._waiting > 0:
                try:
                    rung = await doorbell.wait()
                    raise_if_cancelled()  # a cancel redis-py swallowed (genq._cancellation)
                except (*TRANSIENT, RedisError) as exc:
                    log.warning("pull doorbell unavailable (%s); waiting pulls poll", exc)
                    self._ring()  # let them pull (and fail, or find work) on their own
                    await asyncio.sleep(0.5)
                    continue
                if not rung:
                    continue
                if self._waiting == 0:
                    await self.queue.wake()  # not ours to use: put it back
                    continue  # ends the loop, unless a request came to wait meanwhile
                self._ring()
        finally:
            self._task = None  # before any await: a new waiter starts a new listener
            await doorbell.aclose()

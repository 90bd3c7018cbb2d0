"""Queue history for the operations chart: per half hour, the peak depth and longest wait.

Every gateway process samples its queues every few seconds into two small hashes under each
queue's hash tag (``queue.keys.extra("history:*")``); a Lua script keeps the maximum per step on
the Redis clock, so samples from several processes agree. Depth is waiting + scheduled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.exceptions import RedisError

from genq import Queue

log = logging.getLogger("gateway.history")

STEP = 1800
STEPS = 48


@dataclass(frozen=True)
class Bucket:
    start: int
    peak_depth: int
    longest_wait: float | None


class History:
    def __init__(self, redis: Any, queues: Any, interval: float = 5.0) -> None:
        self.queues = queues
        self.interval = interval
        source = (resources.files("gateway") / "lua" / "history_peak.lua").read_text()
        self._peak = redis.register_script(source)
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    def keys(queue: Queue) -> list[str]:
        return [queue.keys.extra("history:depth"), queue.keys.extra("history:wait")]

    def start(self) -> None:
        self._task = asyncio.create_task(self._sample_forever(), name="queue history")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def sample(self) -> None:
        for _, queue in self.queues:
            stats = await queue.stats()
            await self._peak(
                keys=self.keys(queue),
                args=[STEP, STEPS, stats.waiting + stats.scheduled, round(stats.oldest_wait, 3)],
            )

    async def _sample_forever(self) -> None:
        while True:
            try:
                await self.sample()
            except (RedisError, OSError) as exc:
                log.warning("history sample failed: %s", type(exc).__name__)
            await asyncio.sleep(self.interval)

    async def read(self, queue: Queue) -> list[Bucket]:
        """The last ``STEPS`` steps, oldest first, empty ones included."""
        depth_key, wait_key = self.keys(queue)
        async with queue.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(depth_key)
            pipe.hgetall(wait_key)
            pipe.time()
            depths, waits, (seconds, _) = await pipe.execute()
        depth = {int(k): int(float(v)) for k, v in depths.items()}
        wait = {int(k): float(v) for k, v in waits.items()}
        current = int(seconds) - int(seconds) % STEP
        starts = [current - STEP * i for i in range(STEPS - 1, -1, -1)]
        return [Bucket(s, depth.get(s, 0), wait.get(s)) for s in starts]

"""Queue history for the operations chart: per half hour, the peak depth and longest wait.

Every gateway process samples its queues every few seconds into two small hashes under each
queue's hash tag (``genq_contract.keys.history_keys``); a Lua script keeps the maximum per step on
the Redis clock, so samples from several processes agree. Depth is waiting + scheduled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

from redis.exceptions import RedisError

from genq import Queue, RedisClient, RedisPipeline, cancel_and_wait, raise_if_cancelled
from genq_contract.keys import history_keys

log = logging.getLogger("gateway.history")

STEP = 1800
STEPS = 48


@dataclass(frozen=True)
class Bucket:
    start: int
    peak_depth: int
    longest_wait: float | None


class History:
    def __init__(
        self, redis: RedisClient, queues: Iterable[tuple[str, Queue]], interval: float = 5.0
    ) -> None:
        self.queues = queues
        self.interval = interval
        source = (resources.files("gateway") / "lua" / "history_peak.lua").read_text()
        self._peak = redis.register_script(source)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._sample_forever(), name="queue history")

    async def stop(self) -> None:
        if self._task is not None:
            # Cancelled until it ends: redis-py can swallow a cancel that lands mid-command
            # (one cancel() then left shutdown waiting for this loop forever).
            await cancel_and_wait(self._task)

    async def sample(self) -> None:
        for _, queue in self.queues:
            stats = await queue.stats()
            await self._peak(
                keys=list(history_keys(queue)),
                args=[STEP, STEPS, stats.waiting + stats.scheduled, round(stats.oldest_wait, 3)],
            )

    async def _sample_forever(self) -> None:
        while True:
            try:
                await self.sample()
            except (RedisError, OSError) as exc:
                log.warning("history sample failed: %s", type(exc).__name__)
            raise_if_cancelled()
            await asyncio.sleep(self.interval)

    async def read(self, queue: Queue) -> list[Bucket]:
        """The last ``STEPS`` steps, oldest first, empty ones included."""

        def fill(pipe: RedisPipeline) -> None:
            for key in history_keys(queue):
                pipe.hgetall(key)

        (depths, waits), now = await queue.read_with_time(fill)
        depth = {int(k): int(float(v)) for k, v in depths.items()}
        wait = {int(k): float(v) for k, v in waits.items()}
        current = int(now) - int(now) % STEP
        starts = [current - STEP * i for i in range(STEPS - 1, -1, -1)]
        return [Bucket(s, depth.get(s, 0), wait.get(s)) for s in starts]

"""How many jobs a queue holds in each state, and how long the oldest has waited."""

from __future__ import annotations

from dataclasses import dataclass

from ._events import as_text
from ._queue_base import QueueBase
from .connection import RedisPipeline


@dataclass(frozen=True)
class QueueStats:
    waiting: int
    scheduled: int
    active: int
    dead: int
    oldest_wait: float = 0.0
    """Seconds the longest-waiting job has waited since it became runnable (enqueued, due, or
    put back in line), whatever its priority or tenant; 0 when none waits."""


class Stats(QueueBase):
    """:meth:`stats` of :class:`genq.Queue`."""

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

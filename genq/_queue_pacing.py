"""When a queue's workers look for work: the cooldown that pauses them, and the doorbell that
wakes them."""

from __future__ import annotations

from ._doorbell import Doorbell
from ._queue_base import QueueBase, ms


class Pacing(QueueBase):
    """What :class:`genq.Queue` offers to pause its workers and to wake them."""

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

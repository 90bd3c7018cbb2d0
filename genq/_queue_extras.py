"""Room in a queue's slot for the layers built on it: named counters, and keys of their own."""

from __future__ import annotations

from ._queue_base import QueueBase


class Extras(QueueBase):
    """What :class:`genq.Queue` keeps for layers built on it (``keys.extra``)."""

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

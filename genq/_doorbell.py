"""A queue's doorbell (``Keys.signal``, the list every job made ready pushes onto), heard by a
listener outside the built-in worker (the gateway's long-polled pulls)."""

from __future__ import annotations

import contextlib

from ._queue_base import QueueBase, safe_block
from ._worker import dedicated_client


class Doorbell:
    """Waits for rings of one queue's doorbell on a connection of its own: a BLPOP on a pool
    connection would hold it from everyone else for the whole wait. Close it when done."""

    def __init__(self, queue: QueueBase, block: float) -> None:
        self._queue = queue
        self._client = dedicated_client(queue.redis)
        self.block = safe_block(queue.redis, block)
        """Seconds one :meth:`wait` blocks (kept under the client's socket timeout)."""

    async def wait(self) -> bool:
        """Takes one ring, waiting up to :attr:`block` seconds; True when one was taken."""
        return await self._client.blpop([self._queue.keys.signal], self.block) is not None

    async def aclose(self) -> None:
        if self._client is not self._queue.redis:
            with contextlib.suppress(Exception):
                await self._client.aclose()

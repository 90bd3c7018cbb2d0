"""Hearing, live, the dead-letter notices queues publish (``Keys.dead_letters``).

Pub/sub keeps nothing for a listener that is not there: the outbox (:meth:`genq.Queue.outbox`)
is the record that loses no notice; this is for watching as it happens.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Self

from ._cluster import open_pubsub
from ._events import as_text
from ._queue_base import QueueBase


class DeadLetterWatch:
    """The notices of ``queues`` (of one client), each with its queue, as they are published:
    ``async with DeadLetterWatch(queues) as watch: async for queue, notice in watch``.
    Subscribed once entered: a notice published after that is heard."""

    def __init__(self, queues: Sequence[QueueBase]) -> None:
        if not queues:
            raise ValueError("watch at least one queue")
        self._by_channel = {queue.keys.dead_letters: queue for queue in queues}
        self._redis = queues[0].redis
        self._pubsub: Any = None

    async def __aenter__(self) -> Self:
        self._pubsub = await open_pubsub(self._redis)
        try:
            await self._pubsub.subscribe(*self._by_channel)
        except BaseException:
            await self._pubsub.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._pubsub.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> tuple[QueueBase, dict[str, Any]]:
        if self._pubsub is None:
            raise RuntimeError("enter the watch (async with) before reading it")
        while True:
            message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if message is not None:
                return self._by_channel[as_text(message["channel"])], json.loads(message["data"])

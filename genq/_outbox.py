"""Reading a queue's dead-letter outbox (``Keys.outbox``) through a consumer group.

The script that dead-letters a job appends its notice there; readers (the workers' alerts)
share the entries through a consumer group, so each entry goes to one reader and an entry read
but never acknowledged can be taken over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from ._events import as_text
from ._queue_base import QueueBase

OutboxEntry = tuple[str, dict[Any, Any] | None]
"""An entry's id and its fields (None for an entry trimmed while pending)."""


@dataclass(frozen=True)
class ConsumerInfo:
    """One consumer of the group: its name, entries pending on it, ms since its last read."""

    name: str
    pending: int
    idle_ms: int


class OutboxGroup:
    """One consumer group on a queue's outbox (made by :meth:`genq.Queue.outbox`)."""

    def __init__(self, queue: QueueBase, group: str) -> None:
        self._redis = queue.redis
        self.stream = queue.keys.outbox
        self.group = group

    async def create(self) -> None:
        """Creates the group at the stream's start (id 0), so entries written before any
        reader existed are read too; an existing group is left as it is."""
        try:
            await self._redis.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def read(self, consumer: str, count: int, block_ms: int) -> list[OutboxEntry]:
        """Up to ``count`` entries no consumer of the group was given yet, waiting up to
        ``block_ms`` for one. A group that no longer exists raises ``ResponseError``
        (NOGROUP)."""
        answer = await self._redis.xreadgroup(
            self.group, consumer, {self.stream: ">"}, count=count, block=block_ms
        )
        return [(as_text(entry_id), fields) for entry_id, fields in _entries(answer)]

    async def claim(
        self, consumer: str, idle_ms: int, start: str, count: int
    ) -> tuple[str, list[OutboxEntry]]:
        """Takes over up to ``count`` entries pending over ``idle_ms`` from ``start`` on:
        the cursor to go on from ('0-0' when done) and the entries."""
        answer = await self._redis.xautoclaim(
            self.stream, self.group, consumer, idle_ms, start_id=start, count=count
        )
        return as_text(answer[0]), [(as_text(entry_id), fields) for entry_id, fields in answer[1]]

    async def ack(self, entry_ids: list[str]) -> None:
        await self._redis.xack(self.stream, self.group, *entry_ids)

    async def consumers(self) -> list[ConsumerInfo]:
        infos = []
        for consumer in await self._redis.xinfo_consumers(self.stream, self.group):
            info = {as_text(k): v for k, v in consumer.items()}
            infos.append(
                ConsumerInfo(
                    as_text(info.get("name", "")),
                    int(info.get("pending", 0) or 0),
                    int(info.get("idle", 0) or 0),  # since its last read, even an empty one
                )
            )
        return infos

    async def remove_consumer(self, name: str) -> None:
        await self._redis.xgroup_delconsumer(self.stream, self.group, name)


def _entries(answer: Any) -> list[Any]:
    """XREADGROUP's entries of one stream, from a RESP2 (list) or RESP3 (dict) answer."""
    if not answer:
        return []
    if isinstance(answer, dict):
        entries: list[Any] = []
        for value in answer.values():
            entries += value[0] if value and isinstance(value[0], list) else value
        return entries
    return [entry for _, stream_entries in answer for entry in stream_entries]

"""A queue's dead letters: listing them with why they died, purging them, and the outbox that
announces them to consumer groups."""

from __future__ import annotations

from typing import Any

from ._calls import purge_dead_call
from ._dead_letters import DeadEntry, DeadPage, format_cursor, parse_cursor, rows_after
from ._events import as_text
from ._outbox import OutboxGroup
from ._queue_base import QueueBase
from ._streamed import run_streamed


class DeadLetters(QueueBase):
    """What :class:`genq.Queue` offers on its dead-lettered jobs (retrying one is
    :meth:`genq.Queue.retry_dead`, with the other actions on a job)."""

    async def dead(self, count: int = 20) -> list[str]:
        """Ids of dead-lettered jobs, oldest first."""
        ids: list[Any] = await self.redis.zrange(self.keys.dead, 0, count - 1)
        return [as_text(i) for i in ids]

    async def dead_entries(self, count: int = 20) -> list[DeadEntry]:
        """The newest ``count`` dead-lettered jobs with why they died, newest first."""
        return (await self.dead_page(count)).entries

    async def dead_page(self, count: int = 20, cursor: str | None = None) -> DeadPage:
        """A page of dead-lettered jobs with why they died, newest first.

        Pass the page's ``next_cursor`` back for the next one. Paging while jobs die, are
        retried or purged never repeats an entry and never skips one that stayed dead: the
        cursor is a position (died-at time and id), not an offset.
        """
        if count < 1:
            raise ValueError("count must be >= 1")
        key = self.keys.dead
        async with self.redis.pipeline(transaction=False) as pipe:
            if cursor is None:
                pipe.zrevrangebyscore(key, "+inf", "-inf", start=0, num=count + 1, withscores=True)
            else:
                died, last_id = parse_cursor(cursor)
                # Entries that died in the same millisecond as the cursor's, then older ones.
                pipe.zrevrangebyscore(key, died, died, withscores=True)
                below = f"({died}"
                pipe.zrevrangebyscore(key, below, "-inf", start=0, num=count + 1, withscores=True)
            replies = await pipe.execute()
        rows = replies[0] if cursor is None else rows_after(replies[0], replies[1], last_id)
        page = rows[:count]
        fields = ("dead_reason", "error", "attempt")
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id, _ in page:
                pipe.hmget(self.keys.job(as_text(job_id)), *fields)
            records = await pipe.execute()
        entries = []
        for (job_id, died_ms), (reason, error, attempt) in zip(page, records, strict=True):
            if reason is None:  # the record expired before the dead entry was trimmed
                continue
            entries.append(
                DeadEntry(
                    id=as_text(job_id),
                    reason=as_text(reason),
                    error=as_text(error) if error else None,
                    attempts=int(attempt or 0),
                    died_at=died_ms / 1000,
                )
            )
        more = len(rows) > count
        return DeadPage(entries, format_cursor(page[-1]) if more else None)

    async def purge_dead(self, ids: list[str] | None = None) -> int:
        """Deletes dead-lettered jobs for good (all of them when ``ids`` is None)."""
        purged = 0
        while True:
            batch = ids if ids is not None else await self.dead(count=500)
            if not batch:
                return purged
            calls = [purge_dead_call(self, job_id) for job_id in batch]
            replies = await run_streamed(self.redis, self.scripts.purge_dead, calls)
            purged += sum(int(n) for n in replies)
            if ids is not None:
                return purged

    def outbox(self, group: str) -> OutboxGroup:
        """The consumer group ``group`` on this queue's dead-letter outbox."""
        return OutboxGroup(self, group)

"""Job listings, read from the job index the scripts keep (``genq/lua/_lib.lua``).

The index holds one sorted set per status, for the queue and for each tenant, scored by the
millisecond the job was created. A listing runs newest first and pages by position (the
``"<ms>:<job id>"`` cursor dead-letter listings use), so paging while jobs come, go and change
status never repeats a job and never skips one that kept its status all along. Without a status
the listing merges the six sets' pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._dead_letters import Row, format_cursor, parse_cursor, rows_after
from ._queue_base import QueueBase
from .events import text
from .job import Job
from .keys import check_tenant
from .status import JobStatus

LISTED = tuple(status.value for status in JobStatus)
MAX_LIMIT = 1000


@dataclass(frozen=True)
class JobPage:
    """One page of a job listing, newest first."""

    jobs: list[Job]
    next_cursor: str | None
    """Pass it back for the page after this one; None once the listing is exhausted."""


def statuses_for(status: str | None) -> tuple[str, ...]:
    """The index sets a ``status`` filter reads: one status, or all six. ``dead`` is ``failed``
    (every failed job is a dead letter)."""
    if status is None:
        return LISTED
    if status == "dead":
        return (JobStatus.FAILED.value,)
    if status not in LISTED:
        raise ValueError(f"status must be one of {', '.join(LISTED)} or dead, not {status!r}")
    return (status,)


async def list_jobs(
    queue: QueueBase,
    status: str | None = None,
    tenant: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> JobPage:
    """See :meth:`genq.Queue.jobs`."""
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be from 1 to {MAX_LIMIT}")
    if tenant is not None:
        check_tenant(tenant)
    keys = [queue.keys.index(s, tenant) for s in statuses_for(status)]
    position = parse_cursor(cursor) if cursor is not None else None
    async with queue.redis.pipeline(transaction=False) as pipe:
        for key in keys:
            if position is None:
                pipe.zrevrangebyscore(key, "+inf", "-inf", start=0, num=limit + 1, withscores=True)
            else:
                created, _ = position
                pipe.zrevrangebyscore(key, created, created, withscores=True)
                pipe.zrevrangebyscore(
                    key, f"({created}", "-inf", start=0, num=limit + 1, withscores=True
                )
        replies = await pipe.execute()
    rows: list[Row] = []
    if position is None:
        for reply in replies:
            rows += reply
    else:
        for ties, older in zip(replies[::2], replies[1::2], strict=True):
            rows += rows_after(ties, older, position[1])
    rows.sort(key=_newest_first, reverse=True)
    page = rows[:limit]
    jobs = await read_jobs(queue, [text(member) for member, _ in page])
    more = len(rows) > limit
    return JobPage(jobs, format_cursor(page[-1]) if more else None)


async def count_jobs(queue: QueueBase, tenant: str | None = None) -> dict[str, int]:
    """See :meth:`genq.Queue.job_counts`."""
    if tenant is not None:
        check_tenant(tenant)
    async with queue.redis.pipeline(transaction=False) as pipe:
        for status in LISTED:
            pipe.zcard(queue.keys.index(status, tenant))
        counts = await pipe.execute()
    return dict(zip(LISTED, (int(n) for n in counts), strict=True))


def _newest_first(row: Row) -> tuple[float, bytes]:
    """The order of ``ZREVRANGEBYSCORE`` across several sets: score, then member bytes."""
    return row[1], text(row[0]).encode()


async def read_jobs(queue: QueueBase, ids: list[str]) -> list[Job]:
    """The records of ``ids`` in order, leaving out those that expired meanwhile."""
    if not ids:
        return []

    def fill(pipe: Any) -> None:
        for job_id in ids:
            pipe.hgetall(queue.keys.job(job_id))

    raws, now = await queue.read_with_time(fill)
    return [Job.from_hash(raw, queue.codec, queue.result_codec, now) for raw in raws if raw]

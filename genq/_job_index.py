"""Job listings, read from the job index the scripts keep (``genq/lua/_lib.lua``).

The index is two sorted sets read by lexical range (``Keys.index``: ``<status>\\0<created
ms>\\0<id>``; ``Keys.tenant_index``: the same behind ``<tenant>\\0``), so one status, or one
tenant's status, is one range in creation order. A listing runs newest first and pages by
position (the ``"<ms>:<job id>"`` cursor dead-letter listings use), so paging while jobs come,
go and change status never repeats a job and never skips one that kept its status all along.
Without a status the listing merges the six ranges' pages. A listing or a count first admits
the jobs still in the intake (:meth:`genq.Queue.admit`), so a waiting job is listed even while
no worker picks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._dead_letters import format_cursor, parse_cursor
from ._job import Job
from ._keys import check_tenant
from ._queue_base import QueueBase
from ._status import JobStatus

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


def _prefix(status: str, tenant: str | None) -> bytes:
    """The index entries of one status (and tenant) all start with this."""
    head = f"{status}\0" if tenant is None else f"{tenant}\0{status}\0"
    return head.encode()


def _entry_position(entry: bytes) -> tuple[int, str]:
    """``...<status>\\0<created ms>\\0<id>`` -> (created ms, id)."""
    *_, created, job_id = entry.split(b"\0")  # neither tenants nor ids contain a NUL
    return int(created), job_id.decode()


def _created(ms: int) -> bytes:
    return b"%015d" % ms


@dataclass(frozen=True)
class IdPage:
    """One page of a job listing's ids, newest first, read from the index alone."""

    ids: list[str]
    next_cursor: str | None


async def list_jobs(
    queue: QueueBase,
    status: str | None = None,
    tenant: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> JobPage:
    """See :meth:`genq.Queue.jobs`."""
    page = await list_ids(queue, status, tenant, limit, cursor)
    return JobPage(await read_jobs(queue, page.ids), page.next_cursor)


async def list_ids(
    queue: QueueBase,
    status: str | None = None,
    tenant: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> IdPage:
    """See :meth:`genq.Queue.job_ids`."""
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be from 1 to {MAX_LIMIT}")
    if tenant is not None:
        check_tenant(tenant)
    key = queue.keys.index if tenant is None else queue.keys.tenant_index
    position = parse_cursor(cursor) if cursor is not None else None
    await queue.admit()
    async with queue.redis.pipeline(transaction=False) as pipe:
        for listed in statuses_for(status):
            prefix = _prefix(listed, tenant)
            if position is None:
                top = b"(" + prefix[:-1] + b"\1"
            else:
                top = b"(" + prefix + _created(position[0]) + b"\0" + position[1].encode()
            pipe.zrevrangebylex(key, top, b"[" + prefix, start=0, num=limit + 1)
        replies = await pipe.execute()
    rows = sorted(
        (_entry_position(entry) for reply in replies for entry in reply),
        key=lambda row: (row[0], row[1].encode()),
        reverse=True,
    )
    page = rows[:limit]
    more = len(rows) > limit
    next_cursor = format_cursor((page[-1][1], page[-1][0])) if more else None
    return IdPage([job_id for _, job_id in page], next_cursor)


async def count_jobs(queue: QueueBase, tenant: str | None = None) -> dict[str, int]:
    """See :meth:`genq.Queue.job_counts`."""
    if tenant is not None:
        check_tenant(tenant)
    key = queue.keys.index if tenant is None else queue.keys.tenant_index
    await queue.admit()
    async with queue.redis.pipeline(transaction=False) as pipe:
        for status in LISTED:
            prefix = _prefix(status, tenant)
            pipe.zlexcount(key, b"[" + prefix, b"(" + prefix[:-1] + b"\1")
        counts = await pipe.execute()
    return dict(zip(LISTED, (int(n) for n in counts), strict=True))


async def read_jobs(queue: QueueBase, ids: list[str]) -> list[Job]:
    """The records of ``ids`` in order, leaving out those that expired meanwhile."""
    if not ids:
        return []

    def fill(pipe: Any) -> None:
        for job_id in ids:
            pipe.hgetall(queue.keys.job(job_id))

    raws, now = await queue.read_with_time(fill)
    return [Job.from_hash(raw, queue.codec, queue.result_codec, now) for raw in raws if raw]

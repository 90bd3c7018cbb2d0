"""Job listings, read from the job index the scripts keep (``genq/lua/_lib.lua``).

The index is two sorted sets read by lexical range (``Keys.index``: ``<status>\\0<created
ms>\\0<id>``; ``Keys.tenant_index``: the same behind ``<tenant>\\0``), so one status, or one
tenant's status, is one range in creation order. An active job stays listed as waiting (its
activation moves no entry): the active jobs are the lease set's whose records say so, few
because each holds a lease, and the waiting range is read past them. A listing runs newest
first and pages by position (the ``"<ms>:<job id>"`` cursor dead-letter listings use), so
paging while jobs come, go and change status never repeats a job and never skips one that
kept its status all along. Without a status the listing merges the six statuses' pages. A
listing or a count first admits the jobs still in the intake (:meth:`genq.Queue.admit`), so a
waiting job is listed even while no worker picks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from ._dead_letters import format_cursor, parse_cursor
from ._events import as_text
from ._job import Job
from ._keys import check_tenant
from ._queue_base import QueueBase
from ._status import JobStatus

LISTED = tuple(status.value for status in JobStatus)
ACTIVE, WAITING = JobStatus.ACTIVE.value, JobStatus.WAITING.value
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
    statuses = statuses_for(status)
    await queue.admit()
    active = await _active(queue, tenant) if {ACTIVE, WAITING} & set(statuses) else []
    async with queue.redis.pipeline(transaction=False) as pipe:
        for listed in statuses:
            if listed == ACTIVE:
                continue  # read from the lease set
            prefix = _prefix(listed, tenant)
            if position is None:
                top = b"(" + prefix[:-1] + b"\1"
            else:
                top = b"(" + prefix + _created(position[0]) + b"\0" + position[1].encode()
            # the waiting range also lists the active jobs: read past as many as there are
            num = limit + 1 + (len(active) if listed == WAITING else 0)
            pipe.zrevrangebylex(key, top, b"[" + prefix, start=0, num=num)
        replies = await pipe.execute()
    running = {job_id for _, job_id in active}
    shown = active if ACTIVE in statuses else []
    rows = [row for row in shown if position is None or _below(row, position)]
    for reply in replies:
        rows += (row for row in map(_entry_position, reply) if row[1] not in running)
    rows.sort(key=lambda row: (row[0], row[1].encode()), reverse=True)
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
    active = await _active(queue, tenant)
    # The active jobs listed as waiting (a job that was running while an older genq listed it
    # as active has no such entry: the count must not go below the listing).
    waiting = _prefix(WAITING, tenant)
    entries = [(waiting + _created(ms)).decode() + f"\0{job_id}" for ms, job_id in active]
    async with queue.redis.pipeline(transaction=False) as pipe:
        for status in LISTED:
            prefix = _prefix(status, tenant)
            pipe.zlexcount(key, b"[" + prefix, b"(" + prefix[:-1] + b"\1")
        if entries:
            pipe.zmscore(key, entries)
        replies = await pipe.execute()
    counts = dict(zip(LISTED, (int(n) for n in replies[: len(LISTED)]), strict=True))
    counts[ACTIVE] = len(active)
    if entries:
        counts[WAITING] -= sum(score is not None for score in replies[-1])
    return counts


async def _active(queue: QueueBase, tenant: str | None) -> list[tuple[int, str]]:
    """(created ms, id) of the active jobs (of ``tenant`` if given): the lease set's (claimed
    or running) whose records say active."""
    ids = cast(list[bytes], await queue.redis.zrange(queue.keys.leases, 0, -1))
    leased = [as_text(job_id) for job_id in ids]
    if not leased:
        return []
    async with queue.redis.pipeline(transaction=False) as pipe:
        for job_id in leased:
            pipe.hmget(queue.keys.job(job_id), "status", "created_at", "tenant")
        states = await pipe.execute()
    rows = []
    for job_id, (status, created, owner) in zip(leased, states, strict=True):
        if status is None or as_text(status) != ACTIVE or created is None:
            continue
        if tenant is not None and as_text(owner or b"") != tenant:
            continue
        rows.append((int(created), job_id))
    return rows


def _below(row: tuple[int, str], position: tuple[int, str]) -> bool:
    """Whether ``row`` comes after the cursor's ``position`` in a newest-first listing, as
    the index's lexical order has it."""
    return (row[0], row[1].encode()) < (position[0], position[1].encode())


async def read_jobs(queue: QueueBase, ids: list[str]) -> list[Job]:
    """The records of ``ids`` in order, leaving out those that expired meanwhile."""
    if not ids:
        return []

    def fill(pipe: Any) -> None:
        for job_id in ids:
            pipe.hgetall(queue.keys.job(job_id))

    raws, now = await queue.read_with_time(fill)
    return [Job.from_hash(raw, queue.codec, queue.result_codec, now) for raw in raws if raw]

"""Reading jobs' records: one by id or by idempotency key, which ids exist, and the listing
(pages and counts from the job index, :mod:`genq._job_index`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._events import as_text
from ._job import Job
from ._job_index import IdPage, JobPage, count_jobs, list_ids, list_jobs
from ._queue_base import QueueBase


class Records(QueueBase):
    """What :class:`genq.Queue` answers about jobs' records."""

    async def find(self, idempotency_key: str) -> Job | None:
        """The job an idempotency key is bound to, or None when it is bound to none."""
        bound = await self.redis.get(self.keys.idempotency(idempotency_key))
        return await self.get(as_text(bound)) if bound else None

    async def existing(self, job_ids: Iterable[str]) -> list[str]:
        """The ``job_ids`` this queue holds a record of, in the order given (one round trip)."""
        ids = list(job_ids)
        if not ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.exists(self.keys.job(job_id))
            found: list[Any] = await pipe.execute()
        return [job_id for job_id, n in zip(ids, found, strict=True) if n]

    async def jobs(
        self,
        status: str | None = None,
        tenant: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobPage:
        """A page of jobs, newest first (by creation), of one status (``dead`` is ``failed``)
        or all, of one tenant or all. Pass the page's ``next_cursor`` back for the next page:
        paging while jobs change never repeats a job and never skips one that kept its status.
        Finished jobs leave the listing when their records expire."""
        return await list_jobs(self, status, tenant, limit, cursor)

    async def job_ids(
        self,
        status: str | None = None,
        tenant: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> IdPage:
        """:meth:`jobs` without reading the records of the page: its ids, from the index (and,
        for waiting and active jobs, the lease set and the status of the leased jobs' records:
        an active job is listed as waiting in the index). An operator's "all of a status" needs
        only those."""
        return await list_ids(self, status, tenant, limit, cursor)

    async def job_counts(self, tenant: str | None = None) -> dict[str, int]:
        """How many jobs the listing holds in each status (of ``tenant``, or all)."""
        return await count_jobs(self, tenant)

"""Reads of many jobs at once, possibly of several queues: one pipeline per Redis client.

A gateway checks jobs of all its provider queues together (the in-flight caps, replays of
idempotency keys, budget sweeps); these reads keep that to one round trip, as the queues of a
process share one client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._events import as_text
from ._job import Job
from ._queue import Queue
from ._queue_base import QueueBase
from ._status import JobStatus
from .connection import RedisPipeline

Read = tuple[QueueBase, Callable[[RedisPipeline], object]]
"""A queue and the one command to queue on a pipeline of its client."""


@dataclass(frozen=True)
class JobState:
    """A job's status and when it finished (seconds, server clock; None while unfinished)."""

    status: JobStatus
    finished_at: float | None


async def pipelined(reads: Sequence[Read]) -> list[Any]:
    """The replies of ``reads``, in order: one pipeline per distinct client, none when empty."""
    groups: dict[int, list[int]] = {}
    for n, (queue, _) in enumerate(reads):
        groups.setdefault(id(queue.redis), []).append(n)
    replies: list[Any] = [None] * len(reads)
    for members in groups.values():
        async with reads[members[0]][0].redis.pipeline(transaction=False) as pipe:
            for n in members:
                reads[n][1](pipe)
            for n, reply in zip(members, await pipe.execute(), strict=True):
                replies[n] = reply
    return replies


async def job_states(jobs: Sequence[tuple[QueueBase, str]]) -> list[JobState | None]:
    """Each ``(queue, job id)``'s :class:`JobState`, or None where its queue holds no record
    of it (unknown, or expired), in one round trip for queues of one client."""

    def state(queue: QueueBase, job_id: str) -> Read:
        return queue, lambda pipe: pipe.hmget(queue.keys.job(job_id), "status", "finished_at")

    replies = await pipelined([state(queue, job_id) for queue, job_id in jobs])
    return [
        JobState(JobStatus(as_text(status)), int(as_text(finished)) / 1000 if finished else None)
        if status is not None
        else None
        for status, finished in replies
    ]


async def bound_jobs(queues: Sequence[Queue], idempotency_keys: Sequence[str]) -> dict[str, Job]:
    """The job each idempotency key is bound to, looked for in ``queues`` in order (the first
    queue holding a live job for it wins); keys bound to none are left out. The bindings are
    read in one round trip for queues of one client, then each bound job's record."""

    def binding(queue: QueueBase, key: str) -> Read:
        return queue, lambda pipe: pipe.get(queue.keys.idempotency(key))

    reads = [binding(queue, key) for key in idempotency_keys for queue in queues]
    bound_ids = await pipelined(reads)
    jobs: dict[str, Job] = {}
    for n, key in enumerate(idempotency_keys):
        for queue, job_id in zip(queues, bound_ids[n * len(queues) :], strict=False):
            job = await queue.get(as_text(job_id)) if job_id else None
            if job is not None:
                jobs[key] = job
                break
    return jobs

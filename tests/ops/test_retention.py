"""Retention: finished and dead jobs expire on separate clocks; live jobs never expire."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from genq import ActiveJob, JobStatus, Queue, TerminalJobError
from workers.run import WorkerProcess
from workers.settings import WorkerSettings


def handler(release: asyncio.Event | None = None) -> Callable[[ActiveJob], Awaitable[str]]:
    """``ok`` completes, ``die`` dead-letters, ``hold`` runs until ``release`` is set."""

    async def handle(job: ActiveJob) -> str:
        if job.payload == "die":
            raise TerminalJobError("dead on purpose")
        if job.payload == "hold" and release is not None:
            await release.wait()
        return "done"

    return handle


async def settled(queue: Queue, job_id: str, status: JobStatus) -> None:
    async with asyncio.timeout(10):
        while (job := await queue.get(job_id)) is None or job.status is not status:
            await asyncio.sleep(0.01)


async def test_retention_completed_and_dead_jobs_have_separate_clocks(
    redis: aioredis.Redis, prefix: str
) -> None:
    short_results = Queue(redis, prefix=f"{prefix}:a", result_ttl=0.3, dead_ttl=60)
    short_dead = Queue(redis, prefix=f"{prefix}:b", result_ttl=60, dead_ttl=0.3)
    jobs = {}
    for queue in (short_results, short_dead):
        async with queue.worker(handler()):
            done = await queue.enqueue("ok")
            dead = await queue.enqueue("die")
            await settled(queue, done.id, JobStatus.COMPLETED)
            await settled(queue, dead.id, JobStatus.FAILED)
        jobs[queue.prefix] = (done.id, dead.id)
    await asyncio.sleep(0.6)

    done, dead = jobs[short_results.prefix]
    assert await short_results.get(done) is None
    assert (await short_results.get(dead)).status is JobStatus.FAILED  # type: ignore[union-attr]
    assert [e.id for e in await short_results.dead_entries()] == [dead]

    done, dead = jobs[short_dead.prefix]
    assert (await short_dead.get(done)).status is JobStatus.COMPLETED  # type: ignore[union-attr]
    assert await short_dead.get(dead) is None
    assert await short_dead.dead_entries() == []


async def test_retention_never_removes_running_or_scheduled_jobs(
    redis: aioredis.Redis, prefix: str
) -> None:
    queue = Queue(redis, prefix=prefix, result_ttl=0.1, dead_ttl=0.1, lease=5)
    later = await queue.enqueue("ok", delay=3600)
    release = asyncio.Event()
    async with queue.worker(handler(release)):
        running = await queue.enqueue("hold")
        await settled(queue, running.id, JobStatus.ACTIVE)
        await asyncio.sleep(0.8)  # eight times both TTLs
        for job_id, status in ((later.id, JobStatus.SCHEDULED), (running.id, JobStatus.ACTIVE)):
            job = await queue.get(job_id)
            assert job is not None and job.status is status
            assert await redis.pttl(queue.keys.job(job_id)) == -1  # no TTL on a live record
        stats = await queue.stats()
        assert (stats.scheduled, stats.active) == (1, 1)
        release.set()
        await settled(queue, running.id, JobStatus.COMPLETED)


async def test_retention_worker_settings_pass_both_ttls_to_every_queue(
    monkeypatch: pytest.MonkeyPatch, redis: aioredis.Redis
) -> None:
    monkeypatch.setenv("GENQ_RESULT_TTL", "120")
    monkeypatch.setenv("GENQ_DEAD_TTL", "7200")
    monkeypatch.setenv("GENQ_BATCH_RESULT_TTL", "3600")
    monkeypatch.setenv("GENQ_MODELS", "demo/fast,openai/gpt-4o-mini")
    settings = WorkerSettings(_env_file=None)  # type: ignore[call-arg]
    process = WorkerProcess.build(settings, redis)
    # A batch lane keeps its lines' records for the batch's output file instead.
    assert {name: (q.result_ttl, q.dead_ttl) for name, q in process.queues.items()} == {
        "demo": (120.0, 7200.0),
        "openai": (120.0, 7200.0),
        "demo.batch": (3600.0, 7200.0),
        "openai.batch": (3600.0, 7200.0),
    }
    assert WorkerSettings.model_fields["dead_ttl"].default == 14 * 86400

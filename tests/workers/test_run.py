"""The worker process's parts: settings, per-provider concurrency, the drain."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from genq import JobStatus, Queue
from workers.drain import Drain
from workers.run import POOL_SPARE, WorkerProcess, connect, pool_size
from workers.settings import WorkerSettings

from .conftest import most_at_once


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GENQ_REDIS_URL", "redis://redis.test:6379/2")
    monkeypatch.setenv("GENQ_MODELS", "demo/*,openai/gpt-4o-mini")
    monkeypatch.setenv("GENQ_WORKER_PROVIDERS", "openai")
    monkeypatch.setenv("GENQ_COALESCE_WINDOW_MS", "5")
    monkeypatch.setenv("GENQ_DRAIN_DEADLINE", "12.5")
    settings = WorkerSettings()
    assert settings.redis_url == "redis://redis.test:6379/2"
    assert settings.selected_providers() == ["openai"]
    assert settings.coalesce_window_ms == 5
    assert settings.drain_deadline == 12.5


def test_settings_reject_an_unknown_provider() -> None:
    settings = WorkerSettings(models=["demo/fast"], worker_providers=["openai"])
    with pytest.raises(ValueError, match="openai"):
        settings.selected_providers()


async def test_provider_concurrency_caps_running_jobs(start_workers) -> None:
    workers = await start_workers(provider_concurrency={"demo": 2})
    queue = workers.queues["demo"]
    params = {"demo_tokens": 15, "demo_delay_ms": 20}
    jobs = [
        await queue.enqueue({"model": "demo/fast", "prompt": f"j{i}", "params": params})
        for i in range(5)
    ]
    for job in jobs:
        await queue.wait(job.id, timeout=20)
    assert await most_at_once(queue, [job.id for job in jobs]) == 2


async def test_generation_workers_never_read_jobs_ahead(start_workers) -> None:
    # a generation that ends within milliseconds failed: reading more ahead spends attempts
    workers = await start_workers(provider_concurrency={"demo": 2})
    assert workers.workers and all(w.read_ahead == 0 for w in workers.workers.values())


def test_worker_pool_has_a_connection_for_each_job_it_can_run(
    worker_settings: Callable[..., WorkerSettings],
) -> None:
    big = worker_settings(provider_concurrency={"demo": 100, "openai": 20})
    # three held per queue's worker; two queues per provider (its own and its batch lane)
    assert pool_size(big) == 100 + 20 + 3 * 2 * 2 + POOL_SPARE
    small = worker_settings(provider_concurrency={"demo": 2, "openai": 2})
    assert pool_size(small) == 64  # genq's default, at least
    only = worker_settings(provider_concurrency={"demo": 100}, worker_providers=["openai"])
    assert pool_size(only) == 64  # the providers this process does not serve take none


async def test_unbatched_emits_of_more_jobs_than_the_default_pool_all_run(
    redis: Any, worker_settings: Callable[..., WorkerSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """80 generations emitting one token per round trip (GENQ_COALESCE_WINDOW_MS=0) at once:
    the process's pool opens past genq's default 64 instead of refusing the 65th emit."""
    monkeypatch.setenv("GENQ_TEST_OPENAI_KEY", "sk-test-worker-0123456789")
    settings = worker_settings(provider_concurrency={"demo": 80}, coalesce_window_ms=0)
    client = connect(settings)
    assert client.connection_pool.max_connections == pool_size(settings) > 80

    async def workers_connections() -> int:
        return sum(1 for c in await redis.client_list() if c["name"] == "genq-worker")

    before = await workers_connections()
    process = WorkerProcess.build(settings, client)
    await process.start()
    try:
        queue = Queue(redis, prefix=process.queues["demo"].prefix)
        params = {"demo_tokens": 60, "demo_delay_ms": 0}
        jobs = [
            await queue.enqueue({"model": "demo/fast", "prompt": f"j{i}", "params": params})
            for i in range(80)
        ]
        await asyncio.gather(*(queue.wait(job.id, timeout=30) for job in jobs))
        opened = await workers_connections() - before
    finally:
        await process.stop(deadline=5)
        await client.aclose()
    assert opened > 64, opened
    for job in jobs:
        record = await queue.get(job.id)
        assert record is not None and (record.status, record.attempt) == (JobStatus.COMPLETED, 1)


async def test_second_stop_request_aborts_at_once(start_workers) -> None:
    workers = await start_workers(lease=30.0)
    queue = workers.queues["demo"]
    params = {"demo_tokens": 500, "demo_delay_ms": 20}
    job = await queue.enqueue({"model": "demo/fast", "prompt": "long", "params": params})
    async with asyncio.timeout(10):
        async for event in queue.watch(job.id):
            if event.type == "chunk":
                break
    drain = Drain(deadline=60)
    drain.request()
    started = time.monotonic()
    stopping = asyncio.create_task(drain.stop(list(workers.workers.values())))
    await asyncio.sleep(0.2)
    assert not stopping.done()  # draining: the job may still finish
    drain.request()
    await asyncio.wait_for(stopping, 5)
    assert time.monotonic() - started < 3
    assert (await queue.get(job.id)).status.value == "waiting"  # handed back, not lost

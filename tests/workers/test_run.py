"""The worker process's parts: settings, per-provider concurrency, the drain."""

from __future__ import annotations

import asyncio
import time

import pytest

from workers.drain import Drain
from workers.settings import WorkerSettings


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
    peak = 0
    done = asyncio.gather(*(queue.wait(j.id, timeout=20) for j in jobs))
    while not done.done():
        peak = max(peak, (await queue.stats()).active)
        await asyncio.sleep(0.01)
    await done
    assert peak == 2


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

"""Fixtures for worker tests: a fake OpenAI server and workers running in this process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from genq import Event, Queue
from tests.fakes.fixtures import fake_openai
from tests.fakes.litellm_warnings import ignore_litellm_warnings
from tests.fakes.openai_server import FakeOpenAI
from workers.run import WorkerProcess
from workers.settings import WorkerSettings

__all__ = ["fake_openai"]  # shared with the other folders that run LiteLLM


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ignore_litellm_warnings(items, Path(__file__).parent)


@pytest.fixture
def demo_queue(redis: Any, prefix: str) -> Queue:
    """The demo provider's queue of the workers this test runs (``<prefix>-gen:demo``)."""
    return Queue(redis, prefix=f"{prefix}-gen:demo")


@pytest.fixture
def worker_settings(
    redis_url: str, prefix: str, fake_openai: FakeOpenAI
) -> Callable[..., WorkerSettings]:
    """Settings for a worker on this test's own queues (``<prefix>-gen:<provider>``)."""

    def make(**overrides: Any) -> WorkerSettings:
        values: dict[str, Any] = {
            "redis_url": redis_url,
            "queue_namespace": f"{prefix}-gen",
            "models": ["demo/*", "openai/gpt-4o-mini"],
            "provider_api_bases": {"openai": fake_openai.base_url},
            "provider_api_key_envs": {"openai": "GENQ_TEST_OPENAI_KEY"},
            "lease": 10.0,
            "backoff": 0.05,
            "max_backoff": 0.2,
            "silence_timeout": 5.0,
            "drain_deadline": 2.0,
        }
        values.update(overrides)
        return WorkerSettings(**values)

    return make


@pytest.fixture
async def start_workers(
    redis: Any, worker_settings: Callable[..., WorkerSettings], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., Any]]:
    """Starts a WorkerProcess in this event loop; stopped at teardown."""
    monkeypatch.setenv("GENQ_TEST_OPENAI_KEY", "sk-test-worker-0123456789")
    started: list[WorkerProcess] = []

    async def start(**overrides: Any) -> WorkerProcess:
        process = WorkerProcess.build(worker_settings(**overrides), redis)
        await process.start()
        started.append(process)
        return process

    yield start
    for process in started:
        with contextlib.suppress(Exception):
            await process.stop(deadline=0)


async def events_of(queue: Queue, job_id: str, timeout: float = 20.0) -> list[Event]:
    """Every event of a job up to its terminal one."""

    async def read() -> list[Event]:
        return [event async for event in queue.watch(job_id)]

    return await asyncio.wait_for(read(), timeout)


async def chunk_span(queue: Queue, job_id: str) -> tuple[int, int]:
    """The ms of a job's first and last chunk (its stream entries' ids)."""
    entries = await queue.redis.xrange(queue.keys.events(job_id))
    ms = [int(entry_id.split(b"-")[0]) for entry_id, f in entries if f[b"type"] == b"chunk"]
    return min(ms), max(ms)


async def most_at_once(queue: Queue, job_ids: list[str]) -> int:
    """How many of the jobs streamed at once at most (each from its first to its last chunk,
    which lie inside its handler). Not the lease count: a finished job's slot takes the next job
    while its settle is on the way, so leases briefly outnumber the handlers by design."""
    spans = [await chunk_span(queue, job_id) for job_id in job_ids]
    return max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)

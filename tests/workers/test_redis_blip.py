"""A Redis outage mid-generation: the worker rides it out and settles each job once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from genq import Queue, visible_text
from genq_cli.embedded_redis import EmbeddedRedis
from tests.workers.conftest import events_of
from workers.run import WorkerProcess, connect

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def restartable_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A server of our own that keeps its data across a restart (append-only file)."""
    server = EmbeddedRedis(data_dir=tmp_path, appendonly="yes", appendfsync="always")
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_worker_survives_a_redis_restart_mid_generation(
    restartable_redis: EmbeddedRedis, worker_settings
) -> None:
    settings = worker_settings(redis_url=restartable_redis.url, redis_socket_timeout=2.0)
    client = connect(settings)
    workers = WorkerProcess.build(settings, client)
    await workers.start()
    prefix = workers.queues["demo"].prefix
    try:
        # The test's own client waits on XREAD BLOCK (longer than the worker's 2 s socket
        # timeout), and is replaced after the restart: only the worker has to ride it out.
        async with aioredis.Redis.from_url(restartable_redis.url) as before:
            queue = Queue(before, prefix=prefix)
            params = {"demo_tokens": 100, "demo_delay_ms": 20}
            job = await queue.enqueue({"model": "demo/fast", "prompt": "blip", "params": params})
            async with asyncio.timeout(10):
                async for event in queue.watch(job.id):
                    if event.type == "chunk":
                        break

        await asyncio.to_thread(restartable_redis.stop)  # the outage
        await asyncio.sleep(1.0)
        await asyncio.to_thread(restartable_redis.start)

        async with aioredis.Redis.from_url(restartable_redis.url) as after:
            queue = Queue(after, prefix=prefix)
            events = await events_of(queue, job.id, timeout=30)
            terminal = [e.type for e in events if e.type in ("completed", "failed", "cancelled")]
            assert terminal == ["completed"]  # settled exactly once
            assert visible_text(events) == events[-1].data["text"]
            assert len(events[-1].data["text"].split()) == 100
            assert (await queue.get(job.id)).attempt <= 2

            later = await queue.enqueue({"model": "demo/instant", "prompt": "still here"})
            assert (await queue.wait(later.id, timeout=15))["text"].startswith("Echo: still here")
    finally:
        await workers.stop(deadline=0)
        await client.aclose()

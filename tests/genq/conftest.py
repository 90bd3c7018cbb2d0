from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from genq import Queue
from tests.processes import Spawn, Watcher, watcher_list, worker_processes

# Run with -m: a script in a directory named genq would shadow the genq package.
WORKER_MODULE = "tests.genq.worker_process"


@pytest.fixture
def queue(redis, prefix) -> Queue:
    """A queue with short timings, so retries and leases play out within a test."""
    return Queue(redis, prefix, lease=5.0, backoff=0.05, max_backoff=0.2, result_ttl=60.0)


@pytest.fixture
async def spawn(
    request: pytest.FixtureRequest, redis_url: str, prefix: str, tmp_path: Path
) -> AsyncIterator[Spawn]:
    """Starts ``tests/genq/worker_process.py`` workers on the test's queue, with the lease the
    test module names (its ``LEASE``)."""
    lease = request.module.LEASE
    args = ["--redis-url", redis_url, "--prefix", prefix, "--lease", str(lease)]
    async with worker_processes(WORKER_MODULE, args, tmp_path) as start:
        yield start


@pytest.fixture
async def watchers() -> AsyncIterator[list[Watcher]]:
    async with watcher_list() as made:
        yield made

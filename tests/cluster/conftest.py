"""Fixtures for the Redis Cluster tests: one local 3-master cluster per test session, a cluster
client per test, job watchers and worker processes (cleaned up by pid).

The cluster runs a real server binary (see ``local_cluster.server_binary``); when none can be
started, every test here fails and says why.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster

from genq.connection import connect
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import running_cluster
from tests.processes import Spawn, Watcher, WorkerProcess, watcher_list, worker_processes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    with running_cluster(masters=3) as local:
        yield local


@pytest.fixture(scope="session")
def cluster_url(cluster: LocalCluster) -> str:
    return f"redis+cluster://127.0.0.1:{cluster.port}"


@pytest.fixture
async def client(cluster_url: str) -> AsyncIterator[RedisCluster]:
    redis = connect(cluster_url)
    assert isinstance(redis, RedisCluster)
    try:
        yield redis
    finally:
        await redis.aclose()


@pytest.fixture
async def watchers() -> AsyncIterator[list[Watcher]]:
    async with watcher_list() as made:
        yield made


@pytest.fixture
async def spawn(cluster_url: str, tmp_path: Path) -> AsyncIterator[Spawn]:
    """``spawn(name, prefix, **options)``: a worker process on the cluster, killed at the end."""
    async with worker_processes(
        "tests.genq.worker_process", ["--redis-url", cluster_url], tmp_path
    ) as start:

        async def start_on(name: str, prefix: str, **options: Any) -> WorkerProcess:
            return await start(name, prefix=prefix, **options)

        yield start_on

"""Fixtures for the Redis Cluster tests: one local 3-master cluster per test session, a cluster
client per test, job watchers and worker processes (cleaned up by pid).

The cluster runs a real server binary (see ``local_cluster.server_binary``); when none can be
started, every test here fails and says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster

from genq.connection import connect
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import Spawn, Watcher, WorkerProcess, running_cluster

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
    made: list[Watcher] = []
    yield made
    for watcher in made:
        watcher.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher.task


@pytest.fixture
async def spawn(cluster_url: str, tmp_path: Path) -> AsyncIterator[Spawn]:
    """Starts worker processes; whatever is still alive at the end is killed (by pid)."""
    started: list[WorkerProcess] = []

    async def start(name: str, prefix: str, **options: Any) -> WorkerProcess:
        args = [sys.executable, "-m", "tests.cluster.worker_process", "--name", name]
        args += ["--url", cluster_url, "--prefix", prefix]
        for key, value in options.items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        stderr = tmp_path / f"{name}.stderr"
        with stderr.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                *args,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        worker = WorkerProcess(proc, name, stderr)
        started.append(worker)
        await worker.expect("ready")
        return worker

    try:
        yield start
    finally:
        for worker in started:
            if worker.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.kill()
            await worker.proc.wait()

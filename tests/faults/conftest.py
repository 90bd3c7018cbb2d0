"""Fault-test fixtures: Redis servers of the test's own (to kill, freeze or fill), clients
that are closed at the end, and worker processes that are killed at the end.

The servers run Debian's ``redis-server`` (``GENQ_FAULTS_REDIS_SERVER`` overrides the path):
append-only files, ``CLIENT PAUSE``, ``maxmemory`` and script flags are exercised on a real Redis.
A missing binary fails these tests with a message saying so; it never skips them.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from genq_cli.embedded_redis import EmbeddedRedis
from tests.fakes.litellm_warnings import ignore_litellm_warnings
from tests.faults.support import WorkerProcess, spawn_worker_process

REDIS_SERVER = os.environ.get("GENQ_FAULTS_REDIS_SERVER", "/usr/bin/redis-server")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ignore_litellm_warnings(items, Path(__file__).parent)


@pytest.fixture(scope="session")
def redis_server_binary() -> str:
    if not (os.path.isfile(REDIS_SERVER) and os.access(REDIS_SERVER, os.X_OK)):
        pytest.fail(
            f"the fault tests need a redis-server binary at {REDIS_SERVER}: "
            "`apt-get install redis-server`, or point GENQ_FAULTS_REDIS_SERVER at one"
        )
    return REDIS_SERVER


StartServer = Callable[..., EmbeddedRedis]


@pytest.fixture
def servers(redis_server_binary: str, tmp_path: Path) -> Iterator[StartServer]:
    """Starts redis-server instances (config flags as kwargs); all stopped at the end."""
    started: list[EmbeddedRedis] = []

    def start(**config: str) -> EmbeddedRedis:
        data_dir = tmp_path / f"redis-{len(started)}"
        data_dir.mkdir()
        server = EmbeddedRedis(binary=redis_server_binary, data_dir=data_dir, **config)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        if server.process is not None:
            server.send_signal(signal.SIGCONT)  # a frozen server cannot handle SIGTERM
        server.stop()


@pytest.fixture
async def clients() -> AsyncIterator[Callable[..., aioredis.Redis]]:
    """Makes Redis clients (``clients(url, **options)``); all closed at the end."""
    made: list[aioredis.Redis] = []

    def make(url: str, **options: Any) -> aioredis.Redis:
        client = aioredis.Redis.from_url(url, **options)
        made.append(client)
        return client

    yield make
    for client in made:
        with contextlib.suppress(Exception):
            await client.aclose()


SpawnWorker = Callable[..., Awaitable[WorkerProcess]]


@pytest.fixture
async def worker_processes(tmp_path: Path) -> AsyncIterator[SpawnWorker]:
    """Starts ``tests/genq/worker_process.py`` children; all killed (by pid) at the end."""
    started: list[WorkerProcess] = []

    async def start(name: str, redis_url: str, prefix: str, **options: Any) -> WorkerProcess:
        stderr = tmp_path / f"{name}.stderr"
        worker = await spawn_worker_process(name, redis_url, prefix, stderr, **options)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                worker.proc.kill()
        await worker.proc.wait()

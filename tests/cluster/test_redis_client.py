"""``genq.connect``: the right client for the URL, with sane defaults.

Against real servers: the session's single server (``redis_url``) and the local cluster.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest
import uvloop
from redis.asyncio import BlockingConnectionPool, Connection, ConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import SSLConnection
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

import genq._redis_patches
from genq.connection import (
    DEFAULTS,
    LeanConnectionPool,
    connect,
    hiredis_packing,
    is_cluster_url,
)
from tests.cluster.local_cluster import LocalCluster
from tests.ports import free_port

pytestmark = pytest.mark.timeout(30)


async def test_connect_plain_url_gives_a_single_node_client_with_defaults(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        assert type(client) is Redis
        kwargs = client.connection_pool.connection_kwargs
        assert kwargs["socket_timeout"] == DEFAULTS["socket_timeout"] == 5.0
        assert kwargs["socket_connect_timeout"] == 2.0
        assert kwargs["health_check_interval"] == 30.0
        assert client.connection_pool.max_connections == DEFAULTS["max_connections"]
        assert await client.ping() is True
    finally:
        await client.aclose()


async def test_connect_packs_commands_with_hiredis_and_sends_what_redis_py_would(
    redis_url: str,
) -> None:
    client = connect(redis_url)
    connection = client.connection_pool.make_connection()
    plain = Redis.from_url(redis_url).connection_pool.make_connection()
    for command in [("SCRIPT LOAD", "return 1"), ("SET", "k", 1.5), ("EVALSHA", "ab", 1, b"\x00k")]:
        assert b"".join(connection.pack_command(*command)) == b"".join(plain.pack_command(*command))
    try:
        sha = await client.script_load("return {ARGV[1], KEYS[1]}")
        assert await client.evalsha(sha, 1, "{k}é", 2.5) == [b"2.5", "{k}é".encode()]
        assert await client.execute_command("CLIENT SETNAME", "genq-test") is True
    finally:
        await client.aclose()


async def write_after_teardown(redis_url: str, connection_class: type[Connection]) -> None:
    """Connects, lets ``connection_class`` tear its connection down (``armed``) just before
    the next write, and checks that write raises ``ConnectionError`` with the connection
    dropped."""
    client = connect(redis_url)
    connection: Any = connection_class(**client.connection_pool.connection_kwargs)
    try:
        await connection.connect()
        connection.armed = True
        with pytest.raises(RedisConnectionError, match="closed while writing"):
            await connection.send_packed_command(connection.pack_command("PING"))
        assert not connection.is_connected
    finally:
        await connection.disconnect()
        await client.aclose()


async def test_a_write_on_a_connection_torn_down_under_it_is_a_connection_error(
    redis_url: str,
) -> None:
    """Another task disconnects the connection while this one awaits its health check: redis-py
    then writes through a writer that is gone (``AttributeError``), which must reach genq's
    retries as the ``ConnectionError`` it is, with the connection dropped."""

    class TornDown(hiredis_packing(Connection)):  # type: ignore[misc]
        armed = False

        async def check_health(self) -> None:
            if self.armed:
                await self.disconnect()

    await write_after_teardown(redis_url, TornDown)


def test_a_write_on_a_transport_closed_under_it_is_a_connection_error_on_uvloop(
    redis_url: str,
) -> None:
    """The same on uvloop (the gateway's loop), where the write raises ``RuntimeError`` ("the
    handler is closed") when the transport was reset between connect and the first write."""

    class Aborted(hiredis_packing(Connection)):  # type: ignore[misc]
        armed = False

        async def check_health(self) -> None:
            if self.armed:
                self._writer.transport.abort()

    uvloop.run(write_after_teardown(redis_url, Aborted))


async def test_a_write_the_server_does_not_take_times_out_and_drops_the_connection() -> None:
    """genq writes without redis-py's per-write ``asyncio.wait_for``; the socket timeout must
    still bound a write that has to wait: here a peer that answers the connection's handshake
    and then never reads, and a command larger than the socket buffers take."""
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    peers: list[socket.socket] = []

    async def answer_handshake() -> None:
        peer, _ = await loop.sock_accept(listener)
        peers.append(peer)
        while data := await loop.sock_recv(peer, 65536):
            commands = data.count(b"\r\n*") + data.startswith(b"*")
            await loop.sock_sendall(peer, b"+OK\r\n" * commands)

    answering = asyncio.create_task(answer_handshake())
    port = listener.getsockname()[1]
    connection: Any = hiredis_packing(Connection)(host="127.0.0.1", port=port, socket_timeout=0.5)
    try:
        await connection.connect()
        answering.cancel()  # from here on nothing reads
        started = time.monotonic()
        with pytest.raises(RedisTimeoutError, match="Timeout writing"):
            await connection.send_packed_command(connection.pack_command("SET", "k", "x" * 2**25))
        assert 0.4 < time.monotonic() - started < 5
        assert not connection.is_connected
    finally:
        answering.cancel()
        await connection.disconnect()
        for peer in peers:
            peer.close()
        listener.close()


async def test_connect_keyword_arguments_override_the_defaults(redis_url: str) -> None:
    client = connect(redis_url, socket_timeout=1.5, max_connections=3, client_name="genq-test")
    try:
        assert isinstance(client, Redis)
        assert client.connection_pool.connection_kwargs["socket_timeout"] == 1.5
        assert client.connection_pool.max_connections == 3
        assert await client.client_getname() == "genq-test"
    finally:
        await client.aclose()


async def test_connect_plain_pool_reuses_caps_and_replaces_its_connections(redis_url: str) -> None:
    # genq's pool (LeanConnectionPool) skips redis-py's per-checkout bookkeeping; what a pool
    # is for must hold: reuse, the cap, and a connection the server closed reopened.
    client = connect(redis_url, max_connections=2, client_name="genq-lean-pool")
    admin = Redis.from_url(redis_url)

    async def connections() -> list[int]:
        return [int(c["id"]) for c in await admin.client_list() if c["name"] == "genq-lean-pool"]

    try:
        assert isinstance(client.connection_pool, LeanConnectionPool)
        for n in range(50):
            assert await client.echo(str(n)) == str(n).encode()
        first = await connections()
        assert len(first) == 1  # one sequential caller: one connection, reused
        blocked = [asyncio.create_task(client.blpop(["{lean}:nothing"], 2)) for _ in range(2)]
        await asyncio.sleep(0.2)
        with pytest.raises(RedisConnectionError, match="Too many connections"):
            await client.ping()  # both connections are held by the blocking reads
        await admin.lpush("{lean}:nothing", "a", "b")
        assert {r[1] for r in await asyncio.gather(*blocked)} == {b"a", b"b"}
        assert len(await connections()) == 2

        # Connections the server closed: the command that meets one fails (as on redis-py's
        # pool, with no retry configured) and returns it closed; the next checkout reopens it.
        for connection_id in await connections():
            await admin.client_kill_filter(_id=connection_id)
        with pytest.raises(RedisConnectionError, match="closed"):
            await client.echo("lost")
        assert await client.echo("revived") == b"revived"
        assert len(set(await connections()) - set(first)) >= 1
    finally:
        await client.aclose()
        await admin.aclose()


async def test_connect_plain_pool_runs_redis_pys_own_checkout_when_its_metrics_are_on(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[str] = []
    real_get, real_release = ConnectionPool.get_connection, ConnectionPool.release

    async def counted_get(self: ConnectionPool, *args: Any) -> Any:
        taken.append("get")
        return await real_get(self, *args)

    async def counted_release(self: ConnectionPool, connection: Any) -> None:
        taken.append("release")
        await real_release(self, connection)

    monkeypatch.setattr(ConnectionPool, "get_connection", counted_get)
    monkeypatch.setattr(ConnectionPool, "release", counted_release)
    client = connect(redis_url)
    try:
        assert await client.ping() is True
        assert taken == []  # metrics off (the default): genq's checkout alone
        monkeypatch.setattr(genq._redis_patches, "_metrics_on", lambda: True)
        assert await client.ping() is True
        assert taken == ["get", "release"]
    finally:
        await client.aclose()


async def test_connect_pool_timeout_makes_a_bounded_waiting_pool(redis_url: str) -> None:
    client = connect(redis_url, pool_timeout=0.2, max_connections=1)
    try:
        assert isinstance(client, Redis)
        assert isinstance(client.connection_pool, BlockingConnectionPool)
        held = await client.connection_pool.get_connection()
        try:
            with pytest.raises(Exception, match="No connection available"):
                await client.ping()  # waits 0.2 s for the one connection, then gives up
        finally:
            await client.connection_pool.release(held)
        assert await client.ping() is True
    finally:
        await client.aclose()
        await client.connection_pool.aclose()


async def test_connect_cluster_url_gives_a_cluster_client_that_routes_by_slot(
    cluster: LocalCluster, cluster_url: str
) -> None:
    assert is_cluster_url(cluster_url) and not is_cluster_url(cluster.url)
    client = connect(cluster_url)
    try:
        assert isinstance(client, RedisCluster)
        assert client.connection_kwargs["socket_timeout"] == 5.0
        assert client.connection_kwargs["health_check_interval"] == 30.0
        keys = ["{gen:openai}:k", "{gen:demo}:k", "{gen:anthropic}:k"]
        owners = {cluster.node_for_slot(key_slot(k.encode())).port for k in keys}
        assert len(owners) == 3  # one key on each master, written through one client
        for key in keys:
            await client.set(key, key)
        assert [await client.get(key) for key in keys] == [k.encode() for k in keys]
        # every node, the startup one and those discovered, packs with hiredis too
        classes = {node.connection_class for node in client.get_nodes()}
        assert classes == {hiredis_packing(Connection)}
    finally:
        await client.aclose()


async def test_connect_cluster_flag_turns_a_plain_url_into_a_cluster_client(
    cluster: LocalCluster,
) -> None:
    client = connect(cluster.url, cluster=True)
    try:
        assert isinstance(client, RedisCluster)
        assert await client.ping() is True
        assert len(client.get_primaries()) == 3
    finally:
        await client.aclose()


async def test_connect_cluster_url_with_several_startup_nodes_skips_a_dead_one(
    cluster: LocalCluster,
) -> None:
    dead = free_port()  # nothing listens there
    client = connect(f"redis+cluster://127.0.0.1:{dead},127.0.0.1:{cluster.nodes[1].port}")
    try:
        assert isinstance(client, RedisCluster)
        assert await client.ping() is True
        assert len(client.get_primaries()) == 3
    finally:
        await client.aclose()


def test_connect_cluster_url_options_reach_the_cluster_client() -> None:
    client = connect("rediss+cluster://app:s%40cret@[::1]:7000,[::1]:7001/0?socket_timeout=3")
    assert isinstance(client, RedisCluster)
    kwargs = client.connection_kwargs
    assert kwargs["connection_class"] is hiredis_packing(SSLConnection)
    assert (kwargs["username"], kwargs["password"]) == ("app", "s@cret")
    assert kwargs["socket_timeout"] == 3.0  # the URL's query wins over the defaults
    assert sorted(node.port for node in client.startup_nodes) == [7000, 7001]
    assert {node.host for node in client.startup_nodes} == {"::1"}


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        ("http://user:hunter2@example.com", {}, "unsupported Redis URL"),
        ("redis+cluster://127.0.0.1:7000", {"cluster": False}, "cluster=False"),
        ("unix:///tmp/redis.sock", {"cluster": True}, "unix sockets"),
        ("redis+cluster://127.0.0.1:7000", {"pool_timeout": 1.0}, "cannot wait"),
        ("redis+cluster://127.0.0.1:notaport", {}, "bad port"),
        ("redis+cluster://", {}, "at least one host"),
    ],
)
def test_connect_rejects_what_it_cannot_honour(
    url: str, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        connect(url, **options)  # type: ignore[arg-type]
    assert "hunter2" not in str(raised.value)

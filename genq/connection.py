"""One way to open a Redis client for the gateway, the workers and the CLI.

``connect(url)`` returns a ``redis.asyncio.Redis`` for ``redis://``, ``rediss://`` and
``unix://`` URLs, and a ``redis.asyncio.cluster.RedisCluster`` for ``redis+cluster://`` and
``rediss+cluster://`` URLs (or any TCP URL with ``cluster=True``). A cluster URL may list
several startup nodes, so the client can discover the cluster while one of them is down::

    redis+cluster://:secret@10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000

genq works the same on both: every key of a queue shares the hash tag ``{prefix}``, so a queue
lives in one cluster slot and each provider's queue can sit on a different node.
"""

from __future__ import annotations

from typing import Any, TypeAlias
from urllib.parse import unquote

import hiredis
from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster

RedisClient: TypeAlias = Redis | RedisCluster
"""The clients genq works on: a single node's or a cluster's (``redis.asyncio``)."""

RedisPipeline: TypeAlias = Pipeline | ClusterPipeline
"""What ``RedisClient.pipeline()`` gives."""

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
TCP_SCHEMES = {"redis", "rediss"}

DEFAULTS: dict[str, Any] = {
    # A dead connection fails after this instead of hanging forever (redis-py's default is
    # to wait indefinitely). genq keeps its blocking reads under half of it.
    "socket_timeout": 5.0,
    "socket_connect_timeout": 2.0,
    # Pings a connection that sat idle this long before using it, so a connection cut by a
    # proxy or a failover is replaced instead of failing the next command.
    "health_check_interval": 30.0,
    # Per client for a single node; per node for a cluster.
    "max_connections": 64,
}


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0].lower() in CLUSTER_SCHEMES


def connect(
    url: str,
    *,
    cluster: bool | None = None,
    pool_timeout: float | None = None,
    **kwargs: Any,
) -> RedisClient:
    """A Redis client for ``url``, with the defaults in :data:`DEFAULTS` (``kwargs`` win).

    ``cluster=None`` decides from the scheme; ``True`` makes a cluster client from a plain
    ``redis://``/``rediss://`` URL; ``False`` refuses a cluster URL. ``pool_timeout`` (single
    node only) bounds the pool: a caller waits up to that long for a free connection instead of
    getting an error; a cluster client's per-node pools cannot wait, so it is refused there.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or (scheme not in CLUSTER_SCHEMES and scheme not in TCP_SCHEMES | {"unix"}):
        raise ValueError(
            f"unsupported Redis URL {_redact(url)!r}: use redis://, rediss://, unix://, "
            "redis+cluster:// or rediss+cluster://"
        )
    wants_cluster = scheme in CLUSTER_SCHEMES
    if cluster is False and wants_cluster:
        raise ValueError(f"{scheme}:// is a cluster URL but cluster=False was given")
    options = {**DEFAULTS, **kwargs}
    if not (cluster or wants_cluster):
        if pool_timeout is None:
            pool: ConnectionPool = ConnectionPool.from_url(url, **options)
        else:
            pool = BlockingConnectionPool.from_url(url, timeout=pool_timeout, **options)
        pool.connection_class = hiredis_packing(pool.connection_class)
        return Redis.from_pool(pool)  # the client owns its pool: aclose() closes it

    if scheme == "unix":
        raise ValueError("Redis Cluster does not support unix sockets")
    if pool_timeout is not None:
        raise ValueError("pool_timeout is for a single node; a cluster client cannot wait")
    base = CLUSTER_SCHEMES.get(scheme, scheme)
    userinfo, hosts, tail = _split_netloc(rest)
    nodes = [_host_port(part) for part in hosts.split(",") if part]
    if not nodes:
        raise ValueError("a cluster URL needs at least one host:port")
    first = f"{base}://{userinfo}{hosts.split(',')[0]}{tail}"
    startup = [ClusterNode(host, port) for host, port in nodes[1:]]
    if startup:
        options["startup_nodes"] = startup
    return RedisCluster.from_url(first, **options)


class _HiredisPacking:
    """Packs each command with hiredis (C) instead of redis-py's asyncio packer (pure Python;
    redis-py's sync client already uses hiredis): ~15 µs less CPU per script call of a queue's
    size. Like redis-py, a command name with a space ("SCRIPT LOAD") is two words."""

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]
        if isinstance(first, str) and " " in first:
            args = (*first.split(), *args[1:])
        return [hiredis.pack_command(args)]


_PACKING: dict[type, type] = {}


def hiredis_packing(connection_class: type) -> type:
    """``connection_class`` (TCP, TLS or unix socket) packing its commands with hiredis."""
    if connection_class not in _PACKING:
        name = f"Hiredis{connection_class.__name__}"
        _PACKING[connection_class] = type(name, (_HiredisPacking, connection_class), {})
    return _PACKING[connection_class]


def _split_netloc(rest: str) -> tuple[str, str, str]:
    """``user:pw@h1:p1,h2:p2/0?x=1`` -> (``user:pw@``, ``h1:p1,h2:p2``, ``/0?x=1``)."""
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    userinfo, at, hosts = netloc.rpartition("@")
    return (userinfo + at, hosts, tail)


def _host_port(part: str) -> tuple[str, int]:
    if part.startswith("["):  # [ipv6]:port
        host, _, port = part[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, colon, port = part.rpartition(":")
        if not colon:
            host, port = part, ""
    if not host:
        raise ValueError(f"no host in {part!r}")
    try:
        return unquote(host), int(port) if port else 6379
    except ValueError:
        raise ValueError(f"bad port in {part!r}") from None


def _redact(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    userinfo, hosts, tail = _split_netloc(rest) if sep else ("", url, "")
    return f"{scheme}{sep}{'***@' if userinfo else ''}{hosts}{tail}"

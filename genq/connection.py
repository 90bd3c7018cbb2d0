"""One way to open a Redis client for the gateway, the workers and the CLI.

``connect(url)`` returns a ``redis.asyncio.Redis`` for ``redis://``, ``rediss://`` and
``unix://`` URLs, and a ``redis.asyncio.cluster.RedisCluster`` for ``redis+cluster://`` and
``rediss+cluster://`` URLs (or any TCP URL with ``cluster=True``). A cluster URL may list
several startup nodes, so the client can discover the cluster while one of them is down::

    redis+cluster://:secret@10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000

genq works the same on both: every key of a queue shares the hash tag ``{prefix}``, so a queue
lives in one cluster slot and each provider's queue can sit on a different node.

``redis+sentinel://`` and ``rediss+sentinel://`` URLs name a primary watched by Redis Sentinel:
the sentinels (default port 26379), the service name, an optional database::

    redis+sentinel://:secret@10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/mymaster/0

They give a ``redis.asyncio.Redis`` whose pool asks the sentinels for the primary's address
before each new connection, so after a failover every reconnect (a blocking read's, the
worker's doorbell's, the gateway's tail reader's) lands on the promoted replica. The user and
password in the URL are the data nodes'; the sentinels take ``sentinel_username`` and
``sentinel_password`` from the query string. ``rediss+sentinel://`` is TLS to the data nodes
and, unless ``sentinel_ssl=false``, to the sentinels too (``sentinel_ssl=true`` asks for TLS to
the sentinels alone); the ``ssl_*`` options apply to both.

The pool and connection classes it gives are genq's patches of redis-py
(:mod:`genq._redis_patches`) on the tested redis-py, redis-py's own on any other.
"""

from __future__ import annotations

from typing import Any, TypeAlias
from urllib.parse import parse_qsl, unquote, urlencode

from redis.asyncio import BlockingConnectionPool, Connection, ConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import (
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from ._redis_patches import LeanConnectionPool as LeanConnectionPool
from ._redis_patches import blocking_pool_class, connection_class, pool_class
from ._redis_patches import hiredis_packing as hiredis_packing

RedisClient: TypeAlias = Redis | RedisCluster
"""The clients genq works on: a single node's or a cluster's (``redis.asyncio``)."""

RedisPipeline: TypeAlias = Pipeline | ClusterPipeline
"""What ``RedisClient.pipeline()`` gives."""

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
SENTINEL_SCHEMES = {"redis+sentinel": "redis", "rediss+sentinel": "rediss"}
TCP_SCHEMES = {"redis", "rediss"}
SENTINEL_PORT = 26379

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

SENTINEL_DEFAULTS: dict[str, Any] = {
    # A pooled connection to a primary that failed over breaks on its next command; redis-py
    # re-resolves the primary through the sentinels on reconnecting, so one immediate retry on
    # a connection error replaces it instead of failing the command. Timeouts are not
    # retried (a hung server would hold the caller several socket timeouts). Safe: every
    # genq script can run twice. A ``retry`` given to connect() replaces this one.
    "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
}


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0].lower() in CLUSTER_SCHEMES


def is_sentinel_url(url: str) -> bool:
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


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
    ``single_connection_client=True`` (not for a cluster) gives a client holding one connection
    of its own, for a blocking read that other commands must address (``CLIENT UNBLOCK``).
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    known = CLUSTER_SCHEMES.keys() | SENTINEL_SCHEMES.keys() | TCP_SCHEMES | {"unix"}
    if not sep or scheme not in known:
        raise ValueError(
            f"unsupported Redis URL {_redact(url)!r}: use redis://, rediss://, unix://, "
            "redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://"
        )
    wants_cluster = scheme in CLUSTER_SCHEMES
    if cluster is False and wants_cluster:
        raise ValueError(f"{scheme}:// is a cluster URL but cluster=False was given")
    options = {**DEFAULTS, **kwargs}
    single = bool(options.pop("single_connection_client", False))
    if scheme in SENTINEL_SCHEMES:
        if cluster:
            raise ValueError(f"{scheme}:// is a Sentinel URL but cluster=True was given")
        options = {**SENTINEL_DEFAULTS, **options}
        return _owning(_sentinel_pool(url, scheme, rest, pool_timeout, options), single)
    if not (cluster or wants_cluster):
        if pool_timeout is None:
            pool: ConnectionPool = pool_class().from_url(url, **options)
        else:
            pool = blocking_pool_class().from_url(url, timeout=pool_timeout, **options)
        pool.connection_class = connection_class(pool.connection_class)
        return _owning(pool, single)
    if single:
        raise ValueError("a cluster client routes by key: it has no single connection")

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
    client = RedisCluster.from_url(first, **options)
    # RedisCluster picks its connection class itself; every node it meets later is built from
    # the manager's kwargs, and the startup nodes have not connected yet.
    manager = client.nodes_manager
    packing = connection_class(manager.connection_kwargs.get("connection_class", Connection))
    manager.connection_kwargs["connection_class"] = packing
    for node in manager.startup_nodes.values():
        node.connection_class = packing
    return client


def _owning(pool: ConnectionPool, single: bool) -> Redis:
    """A client that owns ``pool``: its ``aclose()`` closes the pool (and a Sentinel pool's
    connections to the sentinels)."""
    client = Redis(connection_pool=pool, single_connection_client=single)
    client.auto_close_connection_pool = True
    return client


class _SentinelPool(SentinelConnectionPool):
    """A pool following a Sentinel-watched primary that closes its sentinel clients with it
    (redis-py leaves them to whoever built the ``Sentinel``, here nobody else)."""

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            await self.sentinel_manager.aclose()


class _BlockingSentinelPool(_SentinelPool, BlockingConnectionPool):
    """The same, waiting up to ``timeout`` for a free connection (``pool_timeout``)."""


class _DialsPrimary:
    """Asks the sentinels for the primary's address each time it opens its socket.

    redis-py's Sentinel connection resolves the primary only in ``connect()``; a connection
    that broke under a command is reopened by ``send_command`` through ``_connect()``, which
    dials the last address: the dead primary, for good (a single-connection client never gets
    a fresh connection from the pool). redis/redis-py#3874, open in 8.1."""

    connection_pool: SentinelConnectionPool

    async def _connect(self) -> None:
        if self.connection_pool.is_master:
            address = await self.connection_pool.get_master_address()  # type: ignore[no-untyped-call]
            self.host, self.port = address
        await super()._connect()  # type: ignore[misc]


class _PrimaryConnection(_DialsPrimary, SentinelManagedConnection):
    pass


class _PrimarySSLConnection(_DialsPrimary, SentinelManagedSSLConnection):
    pass


SENTINEL_OPTIONS = {"sentinel_username", "sentinel_password", "sentinel_ssl"}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _sentinel_pool(
    url: str, scheme: str, rest: str, pool_timeout: float | None, options: dict[str, Any]
) -> SentinelConnectionPool:
    """``[user:pw@]h1:p1,h2:p2/service[/db][?options]`` -> a pool that follows the primary."""
    userinfo, hosts, tail = _split_netloc(rest)
    sentinels = [_host_port(part, SENTINEL_PORT) for part in hosts.split(",") if part]
    if not sentinels:
        raise ValueError(
            f"a Sentinel URL needs at least one sentinel host[:port] ({_redact(url)!r}), "
            "e.g. redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster"
        )
    path, _, query = tail.partition("?")
    names = [unquote(part) for part in path.split("/") if part]
    if not names or len(names) > 2:
        raise ValueError(
            f"a Sentinel URL names the service after the hosts, then optionally a database "
            f"({_redact(url)!r}), e.g. redis+sentinel://10.0.0.1:26379/mymaster/0"
        )
    if len(names) == 2 and not names[1].isdigit():
        raise ValueError(f"a Sentinel URL's database is a number, not {names[1]!r}")
    params = parse_qsl(query, keep_blank_values=True)
    mine = {name: value for name, value in params if name in SENTINEL_OPTIONS}
    theirs = [(name, value) for name, value in params if name not in SENTINEL_OPTIONS]
    base = SENTINEL_SCHEMES[scheme]
    db = f"/{names[1]}" if len(names) == 2 else ""
    # redis-py parses the data nodes' credentials, database and query options as for one node.
    node = dict(parse_url(f"{base}://{userinfo}sentinel-service{db}?{urlencode(theirs)}"))
    for name in ("host", "port", "connection_class"):
        node.pop(name, None)
    node = {**options, **node}  # the URL wins over connect()'s arguments, as in from_url()
    tls = base == "rediss"
    sentinel_tls = _flag(mine.get("sentinel_ssl"), default=tls)
    sentinel_options: dict[str, Any] = {
        k: v for k, v in node.items() if k.startswith("socket_") or k == "health_check_interval"
    }
    # discover_master() moves on to the next sentinel itself: no retries on a dead one.
    sentinel_options["retry"] = Retry(NoBackoff(), 0)
    if "sentinel_username" in mine:
        sentinel_options["username"] = mine["sentinel_username"]
    if "sentinel_password" in mine:
        sentinel_options["password"] = mine["sentinel_password"]
    if sentinel_tls:
        sentinel_options["ssl"] = True
        sentinel_options.update({k: v for k, v in node.items() if k.startswith("ssl_")})
    if not tls:
        for name in [k for k in node if k.startswith("ssl_")]:
            node.pop(name)
    managed = _PrimarySSLConnection if tls else _PrimaryConnection
    node["connection_class"] = connection_class(managed)
    # redis-py's Sentinel classes are untyped.
    manager = Sentinel(sentinels, sentinel_kwargs=sentinel_options)  # type: ignore[no-untyped-call]
    pool: type[SentinelConnectionPool] = (
        _SentinelPool if pool_timeout is None else _BlockingSentinelPool
    )
    if pool_timeout is not None:
        node["timeout"] = pool_timeout
    return pool(names[0], manager, is_master=True, **node)


def _flag(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    if value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    raise ValueError(f"sentinel_ssl must be true or false, not {value!r}")


def _split_netloc(rest: str) -> tuple[str, str, str]:
    """``user:pw@h1:p1,h2:p2/0?x=1`` -> (``user:pw@``, ``h1:p1,h2:p2``, ``/0?x=1``)."""
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    userinfo, at, hosts = netloc.rpartition("@")
    return (userinfo + at, hosts, tail)


def _host_port(part: str, default_port: int = 6379) -> tuple[str, int]:
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
        return unquote(host), int(port) if port else default_port
    except ValueError:
        raise ValueError(f"bad port in {part!r}") from None


def _redact(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    userinfo, hosts, tail = _split_netloc(rest) if sep else ("", url, "")
    return f"{scheme}{sep}{'***@' if userinfo else ''}{hosts}{tail}"

"""Redis clients of the gateway: the shared pool, and each shared tail's dedicated reader.

A tail's blocking XREAD needs a connection of its own, and waking it needs ``CLIENT UNBLOCK``
sent to the same server with that connection's id. On a single Redis both are simple. On a
Cluster the reader connects straight to the node serving the queue's hash slot (every key of a
queue shares one tag, so one XREAD covers all its streams) and the unblock is routed to that
node. After an error (a failover, a slot moved: MOVED) the tail asks for a new link, which
reloads the slot map first.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from genq.connection import connect, is_cluster_url

from .settings import Settings

REDIS_OPTIONS = frozenset(inspect.signature(Redis.__init__).parameters) - {"self"}
POOL_WAIT_SECONDS = 5.0
READER_SLACK = 10.0
"""The reader's socket timeout exceeds its longest XREAD BLOCK by this much."""


def open_shared(settings: Settings) -> Redis | RedisCluster:
    """The client every request shares. On a single node the pool is bounded and blocking: a
    burst of viewers waits for a connection instead of opening more."""
    options: dict[str, Any] = {
        "max_connections": settings.redis_max_connections,
        "client_name": f"genq-gateway:{settings.queue_namespace}",
    }
    if not is_cluster_url(settings.redis_url):
        options["pool_timeout"] = POOL_WAIT_SECONDS
    return connect(settings.redis_url, **options)


@dataclass(frozen=True)
class ReaderLink:
    reader: Redis
    """One connection, no automatic retry: a silent reconnect would change its client id."""
    unblock: Callable[[int], Awaitable[bool]]


def reader_links(
    shared: Redis | RedisCluster, settings: Settings, slot_key: str
) -> Callable[[], Awaitable[ReaderLink]]:
    """A factory of reader links for the queue whose keys hash like ``slot_key``."""
    reader_options: dict[str, Any] = {
        "single_connection_client": True,
        "client_name": f"genq-tail:{settings.queue_namespace}",
        "socket_connect_timeout": 2,
        "socket_timeout": settings.tail_block + READER_SLACK,
        "retry": Retry(NoBackoff(), 0),
    }
    if not isinstance(shared, RedisCluster):

        async def single_node() -> ReaderLink:
            # connect(): a Sentinel URL's reader follows the primary too.
            reader = connect(settings.redis_url, **reader_options)
            assert isinstance(reader, Redis)  # a single node (a cluster URL is handled below)
            return ReaderLink(reader, shared.client_unblock)

        return single_node

    cluster = shared
    made = 0

    async def on_cluster() -> ReaderLink:
        nonlocal made
        await cluster.initialize()
        if made:  # a link died: the slot may have moved, reload the map
            await cluster.nodes_manager.initialize()
        made += 1
        node = cluster.get_node_from_key(slot_key)
        if node is None:
            raise ConnectionError(f"no cluster node serves {slot_key!r}")
        # The node's own settings (password, TLS, timeouts) minus what a Redis does not take.
        kwargs = {k: v for k, v in node.connection_kwargs.items() if k in REDIS_OPTIONS}
        kwargs.update(reader_options, host=node.host, port=int(node.port))
        reader = Redis(**kwargs)

        async def unblock(client_id: int) -> bool:
            return bool(await cluster.client_unblock(client_id, target_nodes=node))

        return ReaderLink(reader, unblock)

    return on_cluster

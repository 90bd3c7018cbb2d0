"""A shared tail's dedicated reader connection, and how to wake it.

A tail's blocking XREAD needs a connection of its own, and waking it needs ``CLIENT UNBLOCK``
sent to the same server with that connection's id. On a single Redis (or a Sentinel-watched
primary) both are simple. On a Cluster the reader connects straight to the node serving the
queue's hash slot (every key of a queue shares one tag, so one XREAD covers all its streams)
and the unblock is routed to that node. After an error (a failover, a slot moved: MOVED) the
tail asks for a new link, which reloads the slot map first.
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

from .connection import RedisClient, connect

REDIS_OPTIONS = frozenset(inspect.signature(Redis.__init__).parameters) - {"self"}
READER_SLACK = 10.0
"""The reader's socket timeout exceeds its longest XREAD BLOCK by this much."""


@dataclass(frozen=True)
class ReaderLink:
    reader: Redis
    """One connection, no automatic retry: a silent reconnect would change its client id."""
    unblock: Callable[[int], Awaitable[bool]]
    """Sends ``CLIENT UNBLOCK <id>`` where the reader is connected."""


ReaderLinks = Callable[[str], Awaitable[ReaderLink]]
"""Makes a reader link for the queue whose keys hash like the key it is given."""


def reader_links(
    shared: RedisClient, url: str, *, client_name: str, block: float = 5.0
) -> ReaderLinks:
    """A factory of reader links for :class:`genq.Tail`: ``shared`` is the client the queue
    uses, ``url`` the one it was opened with (a Sentinel URL's reader follows the primary
    too), ``block`` the longest XREAD BLOCK of the tail, in seconds."""
    reader_options: dict[str, Any] = {
        "single_connection_client": True,
        "client_name": client_name,
        "socket_connect_timeout": 2,
        "socket_timeout": block + READER_SLACK,
        "retry": Retry(NoBackoff(), 0),
    }
    if not isinstance(shared, RedisCluster):

        async def single_node(slot_key: str) -> ReaderLink:
            reader = connect(url, **reader_options)
            assert isinstance(reader, Redis)  # a single node (a cluster URL is handled below)
            return ReaderLink(reader, shared.client_unblock)

        return single_node

    cluster = shared
    made = 0

    async def on_cluster(slot_key: str) -> ReaderLink:
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

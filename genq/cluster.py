"""What genq does differently on a ``redis.asyncio.cluster.RedisCluster`` client.

A queue is one slot, so every command genq sends already lands on one node; only what
redis-py's cluster client refuses or does differently needs another path:

- its pipelines block ``evalsha`` (and never load a missing script), so a batch of script calls
  is sent as raw ``EVALSHA`` commands, and a NOSCRIPT (a node that never saw the script, or
  came back empty after a failover) loads it on every primary and sends the batch again;
- its pipelines block ``time``, and a plain ``TIME`` goes to whichever node it likes, so the
  clock is read from the node that holds the queue's slot: the same clock its scripts use;
- its ``pubsub()`` picks a node from the slot map without loading it, so on a client that has
  not sent a command yet ``subscribe`` fails with a ``KeyError``: the map is loaded first;
- it has no ``connection_pool``: its socket timeout, which bounds blocking reads, is in its
  ``connection_kwargs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterPubSub, RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from .connection import RedisClient

Call = tuple[Sequence[Any], Sequence[Any]]
"""One script call: (keys, args)."""


def is_cluster(redis: RedisClient) -> TypeGuard[RedisCluster]:
    return isinstance(redis, RedisCluster)


async def run_pipelined(
    redis: RedisClient, script: AsyncScript, calls: Sequence[Call]
) -> list[Any]:
    """Runs a registered ``script`` once per call in one round trip; returns the replies.

    The batch goes out as raw ``EVALSHA`` commands: redis-py's own pipelined scripts cost an
    extra ``SCRIPT EXISTS`` round trip per batch, and its cluster pipelines refuse them. A
    NOSCRIPT (a restarted or failed-over server) loads the script and re-sends the whole
    batch: every genq script is safe to run twice.
    """
    try:
        return await _evalsha_batch(redis, script, calls)
    except NoScriptError:
        script.sha = await redis.script_load(script.script)  # on a cluster: every primary
        return await _evalsha_batch(redis, script, calls)


async def _evalsha_batch(
    redis: RedisClient, script: AsyncScript, calls: Sequence[Call]
) -> list[Any]:
    async with redis.pipeline(transaction=False) as pipe:
        for keys, args in calls:
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        replies: list[Any] = await pipe.execute()
        return replies


async def server_time(redis: RedisClient, key: str) -> tuple[int, int]:
    """The server's ``TIME`` as (seconds, microseconds); on a cluster, from ``key``'s node."""
    if not is_cluster(redis):
        seconds, micros = await redis.time()
    else:
        await redis.initialize()  # the slot map is loaded on first use
        seconds, micros = await redis.time(target_nodes=redis.get_node_from_key(key))
    return int(seconds), int(micros)


async def open_pubsub(redis: RedisClient) -> PubSub | ClusterPubSub:
    """``redis.pubsub()``, on a cluster client once its slot map is loaded."""
    if is_cluster(redis):
        await redis.initialize()
    return redis.pubsub()


def socket_timeout(redis: RedisClient) -> float | None:
    """The client's socket timeout (a cluster client keeps it in its own connection kwargs)."""
    pool = getattr(redis, "connection_pool", None)
    if pool is not None:
        timeout: float | None = pool.connection_kwargs.get("socket_timeout")
        return timeout
    if is_cluster(redis):
        timeout = redis.connection_kwargs.get("socket_timeout")
        return timeout
    return 5.0

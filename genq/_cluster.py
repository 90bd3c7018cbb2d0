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
  ``connection_kwargs``;
- durable acceptance's ``WAIT`` has no key, and only counts the writes of its own connection:
  it is sent with the scripts in one pipeline on one connection of the node holding the
  queue's slot (:func:`run_durably`), never through the cluster pipeline's retries, which
  would resend the scripts alone or route the ``WAIT`` elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterPubSub, PipelineCommand, RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    MovedError,
    NoScriptError,
    SlotNotCoveredError,
    TimeoutError,
)

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


async def run_durably(
    redis: RedisClient, script: AsyncScript, calls: Sequence[Call], replicas: int, timeout_ms: int
) -> tuple[list[Any], int]:
    """:func:`run_pipelined`, then ``WAIT replicas timeout_ms`` on the same connection.

    Returns the scripts' replies and how many replicas confirmed every write of that
    connection (fewer than ``replicas`` once ``timeout_ms`` passed). ``WAIT`` counts only the
    writes of the connection it is sent on, so it must follow the scripts on theirs: one
    pipeline, never a pooled call of its own. A script that wrote nothing (a deduplicated
    enqueue) leaves ``WAIT`` counting the connection's earlier writes.
    """
    try:
        replies = await _durable_batch(redis, script, calls, replicas, timeout_ms)
    except NoScriptError:
        script.sha = await redis.script_load(script.script)  # on a cluster: every primary
        replies = await _durable_batch(redis, script, calls, replicas, timeout_ms)
    return replies[:-1], int(replies[-1])


async def _durable_batch(
    redis: RedisClient, script: AsyncScript, calls: Sequence[Call], replicas: int, timeout_ms: int
) -> list[Any]:
    commands = [("EVALSHA", script.sha, len(keys), *keys, *args) for keys, args in calls]
    commands.append(("WAIT", replicas, timeout_ms))
    if is_cluster(redis):
        return await _on_slot_node(redis, str(calls[0][0][0]), commands)
    async with redis.pipeline(transaction=False) as pipe:
        for command in commands:
            pipe.execute_command(*command)
        replies: list[Any] = await pipe.execute()
        return replies


REDIRECTS = 3
"""Tries of a durable batch whose slot moved (to the node the MOVED names, each time)."""

_RELOAD_MAP = (ConnectionError, TimeoutError, OSError, ClusterDownError)


async def _on_slot_node(
    redis: RedisCluster, key: str, commands: Sequence[Sequence[Any]]
) -> list[Any]:
    """Sends ``commands`` in one pipeline on one connection of the primary holding ``key``.

    The cluster pipeline cannot be trusted with this: after a MOVED it resends the failed
    scripts alone on another connection (the ``WAIT`` would then count nothing of theirs), and
    after a connection error it resends the batch with the ``WAIT`` routed by its own rules.
    Here a MOVED updates the slot map (as redis-py does) and resends the whole batch to the new
    owner; a connection error or CLUSTERDOWN reloads the map and is raised, for the caller's
    infrastructure retries. Anything else (NOSCRIPT, an ASK during a slot migration) is raised.
    """
    for attempt in range(1, REDIRECTS + 1):
        await redis.initialize()  # no-op unless the slot map must be (re)loaded
        node = redis.get_node_from_key(key)
        if node is None:  # the slot has no known primary: the map is being rebuilt
            await redis.aclose()
            raise SlotNotCoveredError(f"no primary known for the slot of {key!r}; retry")
        stack = [PipelineCommand(i, *command) for i, command in enumerate(commands)]
        try:
            await node.execute_pipeline(stack)
        except _RELOAD_MAP:
            await redis.aclose()  # the next call reloads the slot map, as redis-py does
            raise
        failed = [cmd.result for cmd in stack if isinstance(cmd.result, Exception)]
        if not failed:
            return [cmd.result for cmd in stack]
        error = failed[0]
        if isinstance(error, MovedError) and attempt < REDIRECTS:
            await redis.nodes_manager.move_slot(error)
            continue
        if isinstance(error, _RELOAD_MAP):
            await redis.aclose()
        raise error
    raise AssertionError("unreachable: the last try returns or raises")


async def server_time(redis: RedisClient, key: str) -> tuple[int, int]:
    """The server's ``TIME`` as (seconds, microseconds); on a cluster, from ``key``'s node."""
    if not is_cluster(redis):
        seconds, micros = await redis.time()
    else:
        await redis.initialize()  # the slot map is loaded on first use
        try:
            seconds, micros = await redis.time(target_nodes=redis.get_node_from_key(key))
        except (ConnectionError, TimeoutError, OSError):
            # redis-py retries no command sent to named nodes: after a failover the first one
            # can meet a pooled connection the old primary closed. That connection is dropped
            # now; the node is looked up again, once.
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

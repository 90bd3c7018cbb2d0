"""Helpers shared by the cluster tests: a cluster, queues placed on its nodes, what the nodes
hold, watchers and worker processes."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from genq import Event, Keys, Queue
from tests.cluster.local_cluster import ClusterSetupError, LocalCluster, Node


@contextlib.contextmanager
def running_cluster(**options: Any) -> Iterator[LocalCluster]:
    """A started ``LocalCluster``; the test fails (never skips) when it cannot start, since a
    cluster test that skips silently would let a cluster regression through."""
    try:
        local = LocalCluster(**options).start()
    except ClusterSetupError as exc:
        problem = str(exc)
    else:
        try:
            yield local
        finally:
            local.stop()
        return
    pytest.fail(f"cannot start the local Redis Cluster: {problem}", pytrace=False)


def slot_of(prefix: str) -> int:
    """The one cluster slot every key of the queue ``prefix`` hashes to."""
    return key_slot(Keys(prefix).ready.encode())


def prefix_on(cluster: LocalCluster, node: int, base: str) -> str:
    """A fresh queue prefix ``<base>-<random>`` whose slot is served by ``cluster.nodes[node]``.

    Tests share one cluster, so each needs its own queue; this keeps the node under control."""
    want = cluster.nodes[node].port
    while True:
        prefix = f"{base}-{uuid.uuid4().hex[:8]}"
        if cluster.node_for_slot(slot_of(prefix)).port == want:
            return prefix


# -- queues and what the nodes hold ------------------------------------------------------------


"""Upper bound for one awaited step (a lease expiry plus a process start)."""


def make_queue(client: Any, prefix: str, **options: Any) -> Queue:
    """A queue with short timings, so retries and leases play out within a test."""
    settings = {"lease": 5.0, "backoff": 0.05, "max_backoff": 0.2, "result_ttl": 60.0}
    return Queue(client, prefix, **{**settings, **options})


async def node_client(cluster: LocalCluster, index: int) -> Redis:
    """A plain client on one master, to see what that node really holds."""
    return Redis(host="127.0.0.1", port=cluster.nodes[index].port)


async def keys_on_node(cluster: LocalCluster, index: int, pattern: str) -> set[str]:
    direct = await node_client(cluster, index)
    try:
        return {key.decode() async for key in direct.scan_iter(match=pattern, count=1000)}
    finally:
        await direct.aclose()


async def collect(queue: Queue, job_id: str, after: str | None = None) -> list[Event]:
    return [event async for event in queue.watch(job_id, after=after)]


async def subscribers(cluster: LocalCluster, channel: str) -> int:
    count = 0
    for index in range(len(cluster.nodes)):
        direct = await node_client(cluster, index)
        try:
            count += dict(await direct.pubsub_numsub(channel)).get(channel.encode(), 0)
        finally:
            await direct.aclose()
    return count


async def cluster_state(node: Node) -> str:
    direct = Redis(host="127.0.0.1", port=node.port, socket_timeout=1)
    try:
        info = (await direct.execute_command("CLUSTER", "INFO")).decode()
    finally:
        await direct.aclose()
    return info.split("cluster_state:")[1].split()[0]

"""The failover drill on a local 3-master Redis Cluster with a replica per master.

Producers stream enqueues into two queues on master M, one with durable acceptance
(``durable_replicas=1``) and one without. M's replica R falls behind (SIGSTOP, as a stalled or
partitioned replica would), M is SIGKILLed, R resumes and the cluster promotes it. Every job
whose durable enqueue returned is still there afterwards; the jobs the plain queue accepted
while R lagged are gone: what durable acceptance buys. The enqueues carry on after the failover
(infra retries, and resending a durable enqueue the replicas did not confirm), and a worker
finishes every job.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from genq import ActiveJob, EnqueueItem, JobStatus, Queue, ReplicationTimeoutError
from genq._retrying import with_retry
from genq.connection import connect
from tests.cluster.local_cluster import LocalCluster, Node
from tests.cluster.support import cluster_state, prefix_on, running_cluster

pytestmark = pytest.mark.timeout(90)

NODE_TIMEOUT_MS = 1000


@pytest.fixture
def replicated() -> Iterator[LocalCluster]:
    with running_cluster(masters=3, replicas=1, node_timeout_ms=NODE_TIMEOUT_MS) as local:
        yield local


@pytest.fixture
async def client(replicated: LocalCluster) -> AsyncIterator[RedisCluster]:
    """A cluster client that knows every node, so it finds the cluster while M is down."""
    hosts = ",".join(node.address for node in replicated.all_nodes)
    redis = connect(f"redis+cluster://{hosts}")
    assert isinstance(redis, RedisCluster)
    try:
        yield redis
    finally:
        await redis.aclose()


async def wait_calls(node: Node) -> int:
    direct = Redis(host="127.0.0.1", port=node.port)
    try:
        stats = await direct.info("commandstats")
    finally:
        await direct.aclose()
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


async def test_cluster_wait_counts_the_replicas_of_the_queues_own_master(
    replicated: LocalCluster, client: RedisCluster
) -> None:
    on_m = Queue(client, prefix_on(replicated, 1, "dur"), durable_replicas=1, durable_timeout=2.0)
    elsewhere = Queue(client, prefix_on(replicated, 2, "dur"), durable_replicas=1)
    await on_m.enqueue({"n": 0})  # loads the script on M (a NOSCRIPT resends the batch)
    calls = [await wait_calls(node) for node in replicated.nodes]
    await on_m.enqueue({"n": 1})
    await on_m.enqueue_many([])  # nothing to send: no WAIT either
    after = [await wait_calls(node) for node in replicated.nodes]
    assert [b - a for a, b in zip(calls, after, strict=True)] == [0, 1, 0]

    # With M's replica gone, M's WAIT counts 0: the other masters' replicas do not count.
    replicated.replicas_of[1][0].server.kill()
    with pytest.raises(ReplicationTimeoutError) as caught:
        await on_m.enqueue({"n": 2})
    assert (caught.value.replicas, caught.value.acknowledged) == (1, 0)
    assert await on_m.get(caught.value.job_ids[0]) is not None
    await elsewhere.enqueue({"n": 3})  # its master's replica is up


async def test_cluster_durable_batch_follows_a_moved_slot_with_its_wait(
    replicated: LocalCluster, client: RedisCluster
) -> None:
    """A slot moved under the client: the MOVED resends scripts and WAIT to the new owner."""
    queue = Queue(client, prefix_on(replicated, 0, "moved"), durable_replicas=1)
    await client.initialize()  # the client's map: the slot is on master 0
    source, target = replicated.nodes[0], replicated.nodes[1]
    slot = client.keyslot(queue.keys.ready)
    with target.client() as direct_target:
        target_id = direct_target.execute_command("CLUSTER", "MYID")
    for node in (target, source):  # an empty slot: reassigned at once
        with node.client() as direct_node:
            direct_node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
    await client.script_load(queue.scripts.enqueue.script)  # on every primary: no NOSCRIPT
    assert client.get_node_from_key(queue.keys.ready).port == source.port  # not yet told
    before = await wait_calls(target)
    jobs = await queue.enqueue_many([EnqueueItem({"n": n}) for n in range(3)])
    assert client.get_node_from_key(queue.keys.ready).port == target.port  # the MOVED taught it
    assert await wait_calls(target) == before + 1
    direct = Redis(host="127.0.0.1", port=target.port)
    try:
        assert all([await direct.exists(queue.keys.job(job.id)) for job in jobs])
    finally:
        await direct.aclose()


@dataclass
class Producer:
    """Enqueues job after job, each with its own idempotency key, until stopped. A durable
    enqueue the replicas did not confirm is resent with the same key until it is."""

    queue: Queue
    accepted: list[str] = field(default_factory=list)
    unconfirmed: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            key = f"job-{n}"
            while True:
                try:
                    job = await with_retry(
                        lambda: self.queue.enqueue({"n": n}, idempotency_key=key),  # noqa: B023
                        within=30,
                    )
                    break
                except ReplicationTimeoutError:
                    self.unconfirmed += 1
                    await asyncio.sleep(0.02)
            self.accepted.append(job.id)
            n += 1

    async def until(self, count: int, within: float = 20) -> None:
        deadline = time.monotonic() + within
        while len(self.accepted) < count:
            assert time.monotonic() < deadline, f"{len(self.accepted)} accepted of {count}"
            await asyncio.sleep(0.01)


async def cluster_ok(node: Node) -> bool:
    return await cluster_state(node) == "ok"


async def is_master(node: Node) -> bool:
    direct = Redis(host="127.0.0.1", port=node.port, socket_timeout=1)
    try:
        role = await direct.execute_command("ROLE")
    finally:
        await direct.aclose()
    return bool(role[0] == b"master")


async def until(check: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(Exception):
            if await check():
                return
        assert time.monotonic() < deadline, f"not {what} after {within}s"
        await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_cluster_failover_loses_no_durably_accepted_job(
    replicated: LocalCluster, client: RedisCluster
) -> None:
    m, r = replicated.nodes[0], replicated.replicas_of[0][0]
    durable = Queue(
        client, prefix_on(replicated, 0, "durable"), durable_replicas=1, durable_timeout=0.3
    )
    plain = Queue(client, prefix_on(replicated, 0, "plain"))
    producers = {"durable": Producer(durable), "plain": Producer(plain)}
    tasks = [asyncio.create_task(p.run()) for p in producers.values()]
    try:
        for producer in producers.values():
            await producer.until(30)
        # R falls behind, then M dies: what M accepted meanwhile never reached R.
        r.server.send_signal(signal.SIGSTOP)
        lag_start = {name: len(p.accepted) for name, p in producers.items()}
        await asyncio.sleep(0.5)
        m.server.kill()
        killed_at = time.monotonic()
        during_lag = {name: len(p.accepted) - lag_start[name] for name, p in producers.items()}
        r.server.send_signal(signal.SIGCONT)

        await until(lambda: is_master(r), 20, "R promoted")
        promoted_after = time.monotonic() - killed_at
        await until(lambda: cluster_ok(replicated.nodes[1]), 10, "cluster ok")
        # M comes back as R's replica, so durable enqueues can be confirmed again.
        replicated.restart(m)
        before_restart = {name: len(p.accepted) for name, p in producers.items()}
        for name, producer in producers.items():
            await producer.until(before_restart[name] + 30)
    finally:
        for producer in producers.values():
            producer.stop.set()
        _, pending = await asyncio.wait(tasks, timeout=30)
        for task in pending:  # a failed drill: the durable producer may never be confirmed
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert not pending, "producers did not finish"

    lost = {}
    for name, producer in producers.items():
        missing = [job for job in producer.accepted if await producer.queue.get(job) is None]
        lost[name] = len(missing)
    print(
        f"\nfailover drill: promoted {promoted_after:.1f}s after the kill; accepted while R "
        f"lagged {during_lag}; accepted in all "
        f"{ {n: len(p.accepted) for n, p in producers.items()} }; lost {lost}; durable "
        f"enqueues resent after a replication timeout: {producers['durable'].unconfirmed}"
    )
    assert lost["durable"] == 0
    assert during_lag["plain"] > 0 and lost["plain"] > 0, "the drill must put jobs at risk"

    async def handler(job: ActiveJob) -> int:
        return int(job.payload["n"])

    async with durable.worker(handler, concurrency=32):
        for job_id in producers["durable"].accepted:
            await durable.wait(job_id, timeout=30)
    statuses = {(await durable.get(j)).status for j in producers["durable"].accepted}  # type: ignore[union-attr]
    assert statuses == {JobStatus.COMPLETED}

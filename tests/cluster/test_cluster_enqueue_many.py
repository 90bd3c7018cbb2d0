"""Queue.enqueue_many on a real 3-master Redis Cluster: a queue is one slot, so a batch is one
pipeline of raw EVALSHA to its node, reloaded after a SCRIPT FLUSH."""

from __future__ import annotations

import pytest
from redis.asyncio.cluster import RedisCluster

from genq import ActiveJob, EnqueueItem, EnqueueManyError, JobExistsError
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import keys_on_node, make_queue, node_client, prefix_on
from tests.processes import WAIT

pytestmark = pytest.mark.timeout(60)


async def test_cluster_enqueue_many_batches_on_each_queue_node_after_script_flush(
    cluster: LocalCluster, client: RedisCluster
) -> None:
    queues = [make_queue(client, prefix_on(cluster, index, "gen:batch")) for index in (0, 2)]
    for index in range(len(cluster.nodes)):
        direct = await node_client(cluster, index)
        try:
            await direct.script_flush()  # as after a failover to an empty replica
        finally:
            await direct.aclose()
    await queues[0].enqueue({"old": True}, job_id="taken")
    items = [EnqueueItem({"n": n}, idempotency_key=f"k{n % 5}") for n in range(10)]
    first = await queues[1].enqueue_many(items)
    assert [e.id for e in first[5:]] == [e.id for e in first[:5]]
    assert [e.deduplicated for e in first] == [False] * 5 + [True] * 5
    with pytest.raises(EnqueueManyError) as caught:
        await queues[0].enqueue_many([EnqueueItem({"n": 0}), EnqueueItem({}, job_id="taken")])
    assert isinstance(caught.value.results[1], JobExistsError)
    made = caught.value.results[0]
    assert await keys_on_node(cluster, 0, queues[0].keys.job(made.id))
    assert await keys_on_node(cluster, 2, queues[1].keys.job(first[0].id))

    async def handler(job: ActiveJob) -> object:
        return job.payload

    async with queues[1].worker(handler, concurrency=4):
        for n, e in enumerate(first[:5]):
            assert await queues[1].wait(e.id, timeout=WAIT) == {"n": n}

"""Faults on a real Redis Cluster: a worker process killed mid-stream, a master going down.

The worker-kill test runs ``tests/genq/worker_process.py`` as separate processes and waits for
the markers they print, never for a guessed amount of time.
"""

from __future__ import annotations

import asyncio
import signal

import pytest
from redis.asyncio.cluster import RedisCluster

from genq import ActiveJob, JobStatus
from genq.connection import connect
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import (
    cluster_state,
    collect,
    make_queue,
    prefix_on,
    running_cluster,
)
from tests.processes import WAIT, Spawn, Watcher, chunks

pytestmark = pytest.mark.timeout(60)


async def test_cluster_worker_killed_mid_stream_job_finishes_on_another(
    cluster: LocalCluster, client: RedisCluster, spawn: Spawn, watchers: list[Watcher]
) -> None:
    prefix = prefix_on(cluster, 0, "gen:openai")
    q = make_queue(client, prefix)
    # A holds the job after 3 chunks (renewing its lease) until the kill: starting B takes
    # seconds on a loaded machine, and A must still be mid-stream when the kill comes.
    a = await spawn("A", prefix, lease=2.0, delay=0.01, stall_after=3)
    job = await q.enqueue({"chunks": 20})
    watchers.append(watcher := Watcher(q, job.id))
    await a.expect("stalled", id=job.id, attempt=1)
    b = await spawn("B", prefix, lease=2.0, delay=0.01)  # idle, while A holds the job

    a.proc.send_signal(signal.SIGKILL)
    assert await a.exit_code() == -signal.SIGKILL
    by_a = len(a.saw("emit", id=job.id))
    assert by_a == 3, "A dies mid-stream, after its third chunk"

    await b.expect("start", id=job.id, attempt=2)
    events = await watcher.finished()
    types = [e.type for e in events]
    assert types.count("restarted") == 1, types
    cut = types.index("restarted")
    before, after = events[:cut], events[cut + 1 :]
    assert [e.data for e in before] == chunks("A", by_a)
    assert [e.type for e in after] == ["chunk"] * 20 + ["completed"]
    assert [e.data for e in after[:-1]] == chunks("B", 20)
    assert after[-1].data == {"worker": "B", "attempt": 2, "text": "".join(chunks("B", 20))}
    ids = [tuple(int(part) for part in e.id.split("-")) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)

    record = await q.get(job.id)
    assert record is not None and record.status is JobStatus.COMPLETED and record.attempt == 2

    b.proc.send_signal(signal.SIGTERM)
    assert await b.exit_code() == 0 and b.saw("exit")


@pytest.mark.timeout(90)
async def test_cluster_running_job_and_worker_ride_out_cluster_down() -> None:
    """A master dies: the survivors answer CLUSTERDOWN until it is back (seconds). A job
    streaming on a survivor keeps its attempt: its emits wait the outage out instead of failing
    it, and the worker goes on to take the next job."""
    with running_cluster(masters=3, node_timeout_ms=500) as small:
        survivor, victim = small.nodes[0], small.nodes[2]
        client = connect(f"redis+cluster://127.0.0.1:{survivor.port}")
        try:
            q = make_queue(client, prefix_on(small, 0, "gen:openai"), lease=30.0)
            recovered = asyncio.Event()

            async def handler(job: ActiveJob) -> int:
                n = 0
                while n < 3 or not recovered.is_set():
                    n += 1
                    await job.emit(n)
                    await asyncio.sleep(0.1)
                return n

            first = await q.enqueue({})
            async with q.worker(handler, poll=0.2) as worker:
                async with asyncio.timeout(WAIT):
                    while (await q.get(first.id)).status is not JobStatus.ACTIVE:  # type: ignore[union-attr]
                        await asyncio.sleep(0.02)
                victim.server.kill()
                async with asyncio.timeout(WAIT):
                    while await cluster_state(survivor) != "fail":
                        await asyncio.sleep(0.05)
                await asyncio.sleep(4.0)  # longer than redis-py retries a CLUSTERDOWN (~3 s)
                victim.server.start()
                async with asyncio.timeout(WAIT):
                    while await cluster_state(survivor) != "ok":
                        await asyncio.sleep(0.05)
                recovered.set()

                emitted = await q.wait(first.id, timeout=WAIT)
                record = await q.get(first.id)
                assert record is not None and record.attempt == 1, "the outage cost an attempt"
                events = await collect(q, first.id)
                assert [e.data for e in events[:-1]] == list(range(1, emitted + 1))

                second = await q.enqueue({})
                assert await q.wait(second.id, timeout=WAIT) == 3
                assert worker._fetcher is not None and not worker._fetcher.done()
        finally:
            await client.aclose()

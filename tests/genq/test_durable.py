"""Durable acceptance: enqueue and settle wait for replicas (Redis WAIT) on a real primary with a
real replica, and say so when the replicas do not confirm in time."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import redis.asyncio as aioredis

from genq import ActiveJob, EnqueueItem, GenqError, Queue, ReplicationTimeoutError
from tests.replicas import ReplicatedRedis

pytestmark = pytest.mark.timeout(60)


SHORT = 0.3
"""The durable timeout of tests that expect it to pass; the others wait up to 2 s (a replica
on a loaded CI machine can take longer than SHORT to confirm)."""


def durable(client: aioredis.Redis, prefix: str, **options: object) -> Queue:
    settings: dict[str, object] = {"durable_replicas": 1, "durable_timeout": 2.0, "lease": 5.0}
    return Queue(client, prefix, **{**settings, **options})  # type: ignore[arg-type]


def on_replica(pair: ReplicatedRedis, key: str) -> dict[bytes, bytes]:
    with pair.replica_client() as replica:
        return replica.hgetall(key)  # type: ignore[no-any-return]


async def wait_calls(client: aioredis.Redis) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


async def test_enqueue_durable_returns_once_the_replica_holds_the_job(
    pair: ReplicatedRedis, primary: aioredis.Redis, prefix: str
) -> None:
    queue = durable(primary, prefix, durable_timeout=2.0)
    with pair.replica_client() as replica:
        # The replica stalls for 0.4 s: a durable enqueue must wait it out, not return first.
        replica.execute_command("DEBUG", "SLEEP", "0")  # warm the command up
        sleeper = asyncio.create_task(
            asyncio.to_thread(replica.execute_command, "DEBUG", "SLEEP", "0.4")
        )
        await asyncio.sleep(0.05)
        started = time.monotonic()
        job = await queue.enqueue({"n": 1}, idempotency_key="k1")
        took = time.monotonic() - started
        await sleeper
    assert took >= 0.25, f"returned after {took:.3f}s, before the stalled replica had the job"
    assert on_replica(pair, queue.keys.job(job.id))[b"status"] == b"waiting"

    batch = await queue.enqueue_many([EnqueueItem({"n": i}) for i in range(3)])
    for item in batch:
        assert on_replica(pair, queue.keys.job(item.id))  # there the moment it returned


async def test_enqueue_without_durability_sends_no_wait(
    pair: ReplicatedRedis, primary: aioredis.Redis, prefix: str
) -> None:
    before = await wait_calls(primary)
    queue = Queue(primary, prefix)
    await queue.enqueue({"n": 1})
    await queue.enqueue_many([EnqueueItem({"n": 2})])
    assert await wait_calls(primary) == before
    await durable(primary, prefix).enqueue({"n": 3})
    assert await wait_calls(primary) == before + 1


async def test_enqueue_with_the_replica_down_raises_and_the_retry_confirms_it(
    pair: ReplicatedRedis, primary: aioredis.Redis, prefix: str
) -> None:
    queue = durable(primary, prefix, durable_timeout=SHORT)
    pair.stop_replica()
    started = time.monotonic()
    with pytest.raises(ReplicationTimeoutError) as caught:
        await queue.enqueue({"n": 1}, idempotency_key="order-1")
    took = time.monotonic() - started
    assert 0.25 <= took < 2.0
    error = caught.value
    assert isinstance(error, GenqError)
    assert (error.replicas, error.acknowledged, len(error.job_ids)) == (1, 0, 1)
    assert "0 of 1 replicas" in str(error) and "same idempotency key" in str(error)
    job = await queue.get(error.job_ids[0])
    assert job is not None and job.status == "waiting"  # written on the primary all the same

    await asyncio.to_thread(pair.restart_replica)
    again = await queue.enqueue({"n": 1}, idempotency_key="order-1")
    assert (again.id, again.deduplicated) == (error.job_ids[0], True)
    assert on_replica(pair, queue.keys.job(again.id))
    assert (await queue.job_counts())["waiting"] == 1


async def test_asking_for_more_replicas_than_exist_times_out_for_single_and_batch(
    pair: ReplicatedRedis, primary: aioredis.Redis, prefix: str
) -> None:
    # It times out in any case; the timeout is long enough for the one replica to confirm.
    queue = durable(primary, prefix, durable_replicas=2, durable_timeout=1.5)
    with pytest.raises(ReplicationTimeoutError) as single:
        await queue.enqueue({"n": 1})
    assert (single.value.replicas, single.value.acknowledged) == (2, 1)

    items = [EnqueueItem({"n": i}, job_id=f"job-{i}") for i in range(3)]
    with pytest.raises(ReplicationTimeoutError) as batch:
        await queue.enqueue_many(items)
    assert batch.value.job_ids == ["job-0", "job-1", "job-2"]
    assert batch.value.acknowledged == 1
    for item in items:
        assert await queue.get(str(item.job_id)) is not None


async def test_settle_waits_for_the_replica_and_warns_when_it_cannot(
    pair: ReplicatedRedis, primary: aioredis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    queue = durable(primary, prefix)

    async def handler(job: ActiveJob) -> str:
        return f"done {job.payload['n']}"

    async with queue.worker(handler):
        first = await queue.enqueue({"n": 1})
        assert await queue.wait(first.id, timeout=10) == "done 1"
        await asyncio.sleep(0.1)  # the settle's WAIT returns right after the write
        assert on_replica(pair, queue.keys.job(first.id))[b"status"] == b"completed"
        assert "replicas" not in caplog.text

        pair.stop_replica()
        second = await Queue(primary, prefix).enqueue({"n": 2})  # the worker's settle waits
        with caplog.at_level(logging.WARNING, logger="genq.worker"):
            assert await queue.wait(second.id, timeout=10) == "done 2"
            deadline = time.monotonic() + 5
            while "confirmed by 0 of 1 replicas" not in caplog.text:
                assert time.monotonic() < deadline, caplog.text
                await asyncio.sleep(0.05)
    job = await queue.get(second.id)
    assert job is not None and job.status == "completed"  # settled on the primary


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"durable_replicas": -1}, "durable_replicas"),
        ({"durable_replicas": 11}, "durable_replicas"),
        ({"durable_replicas": True}, "durable_replicas"),
        ({"durable_replicas": 1.0}, "durable_replicas"),
        ({"durable_replicas": 1, "durable_timeout": 0}, "durable_timeout"),
        ({"durable_replicas": 1, "durable_timeout": float("nan")}, "durable_timeout"),
        ({"durable_replicas": 1, "durable_timeout": 5.0}, "socket timeout"),
    ],
)
def test_durable_options_are_checked(prefix: str, options: dict[str, object], message: str) -> None:
    client = aioredis.Redis(socket_timeout=5)
    with pytest.raises(ValueError, match=message):
        Queue(client, prefix, **options)  # type: ignore[arg-type]

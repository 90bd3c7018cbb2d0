"""genq on a real 3-master Redis Cluster, through redis-py's ``RedisCluster`` client.

Each test gets fresh queues placed on chosen nodes (``prefix_on``), so the provider queues of one
test sit on different masters and one client serves them all. Faults (a killed worker process, a
master going down) are in ``test_cluster_faults.py``.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from redis.asyncio.cluster import RedisCluster

from genq import (
    ActiveJob,
    JobCancelledError,
    JobExistsError,
    JobFailedError,
    JobStatus,
    Keys,
    RetryJobError,
    TerminalJobError,
    emit_many,
)
from genq.connection import connect
from tests.cluster.local_cluster import LocalCluster
from tests.cluster.support import (
    collect,
    keys_on_node,
    make_queue,
    node_client,
    prefix_on,
    slot_of,
    subscribers,
)
from tests.processes import WAIT, Watcher

pytestmark = pytest.mark.timeout(60)

PROVIDERS = ("gen:openai", "gen:demo", "gen:anthropic")


# -- the cluster and where queues live -------------------------------------------------------------


async def test_local_cluster_has_three_masters_covering_every_slot(
    cluster: LocalCluster, client: RedisCluster
) -> None:
    await client.initialize()
    primaries = client.get_primaries()
    assert len(primaries) == 3 and client.get_replicas() == []
    assert {node.port for node in primaries} == {node.port for node in cluster.nodes}
    for index in range(3):
        direct = await node_client(cluster, index)
        try:
            info = (await direct.execute_command("CLUSTER", "INFO")).decode()
        finally:
            await direct.aclose()
        assert "cluster_state:ok" in info and "cluster_slots_assigned:16384" in info
        assert "cluster_size:3" in info
    for slot in (0, 5461, 10922, 16383):  # redis-py's slot map agrees with the one we made
        owner = client.nodes_manager.get_node_from_slot(slot)
        assert owner.port == cluster.node_for_slot(slot).port


async def test_cluster_provider_queues_run_on_different_nodes(
    cluster: LocalCluster, client: RedisCluster
) -> None:
    await client.initialize()
    home = {name: client.get_node_from_key(Keys(name).ready).port for name in PROVIDERS}
    assert home["gen:openai"] != home["gen:demo"], "provider queues must spread over nodes"
    assert len(set(home.values())) == 3, home
    for name in PROVIDERS:
        assert home[name] == cluster.node_for_slot(slot_of(name)).port

    queues = {name: make_queue(client, name) for name in PROVIDERS}

    async def handler(job: ActiveJob) -> str:
        await job.emit(f"hello from {job.payload['queue']}")
        return f"done:{job.payload['queue']}"

    jobs = {name: await q.enqueue({"queue": name}) for name, q in queues.items()}
    async with contextlib.AsyncExitStack() as stack:
        for q in queues.values():
            await stack.enter_async_context(q.worker(handler, concurrency=2))
        results = await asyncio.gather(
            *(queues[name].wait(jobs[name].id, timeout=WAIT) for name in PROVIDERS)
        )
    assert results == [f"done:{name}" for name in PROVIDERS]

    # Every key of a queue is on its own node, and on no other.
    for index, node in enumerate(cluster.nodes):
        for name in PROVIDERS:
            held = await keys_on_node(cluster, index, f"{Keys(name).tag}*")
            if node.port == home[name]:
                assert Keys(name).job(jobs[name].id) in held
                assert Keys(name).events(jobs[name].id) in held
            else:
                assert held == set(), f"{name} keys leaked to {node.address}: {held}"


# -- producing and reading -------------------------------------------------------------------------


async def test_cluster_enqueue_is_idempotent_and_get_reads_the_record(
    cluster: LocalCluster, client: RedisCluster
) -> None:
    q = make_queue(client, prefix_on(cluster, 1, "gen:demo"))
    first = await q.enqueue({"prompt": "hi"}, idempotency_key="req-1", priority=5)
    again = await q.enqueue({"prompt": "hi"}, idempotency_key="req-1", priority=5)
    other = await q.enqueue({"prompt": "hi"}, idempotency_key="req-2")
    assert not first.deduplicated and again.deduplicated and again.id == first.id
    assert other.id != first.id

    custom = await q.enqueue({"n": 1}, job_id="order-42")
    assert custom.id == "order-42"
    with pytest.raises(JobExistsError):
        await q.enqueue({"n": 2}, job_id="order-42")
    later = await q.enqueue({"n": 3}, delay=30)

    job = await q.get(first.id)
    assert job is not None
    assert job.status is JobStatus.WAITING and job.payload == {"prompt": "hi"}
    assert job.idempotency_key == "req-1" and job.priority == 5 and job.attempt == 0
    scheduled = await q.get(later.id)
    assert scheduled is not None and scheduled.status is JobStatus.SCHEDULED
    assert scheduled.run_at is not None
    assert scheduled.run_at - scheduled.created_at == pytest.approx(30, abs=0.01)
    assert await q.get("no-such-job") is None

    stats = await q.stats()
    assert (stats.waiting, stats.scheduled, stats.active, stats.dead) == (3, 1, 0, 0)
    assert 0 <= stats.oldest_wait < 5
    assert abs(await q.server_time() - scheduled.created_at) < 5


async def test_cluster_worker_streams_chunks_to_watch_and_wait(
    cluster: LocalCluster, client: RedisCluster, watchers: list[Watcher]
) -> None:
    q = make_queue(client, prefix_on(cluster, 2, "gen:anthropic"))
    words = [f"tok{n} " for n in range(6)]

    async def handler(job: ActiveJob) -> str:
        for word in words:
            await job.emit(word)
            await asyncio.sleep(0.02)
        await job.progress(1.0)
        return "".join(words)

    job = await q.enqueue({"prompt": "stream"})
    watchers.append(watcher := Watcher(q, job.id))  # watching before any worker runs
    await asyncio.sleep(0.1)
    async with q.worker(handler):
        assert await q.wait(job.id, timeout=WAIT) == "".join(words)
    events = await watcher.finished()

    assert [e.type for e in events] == ["chunk"] * 6 + ["progress", "completed"]
    assert [e.data for e in events[:6]] == words
    assert events[-1].data == "".join(words)
    assert await collect(q, job.id) == events  # a late viewer replays it all
    assert await collect(q, job.id, after=events[2].id) == events[3:]  # and resumes after an id
    assert await collect(q, job.id, after=events[-1].id) == []

    record = await q.get(job.id)
    assert record is not None and record.status is JobStatus.COMPLETED
    assert record.result == "".join(words) and record.attempt == 1 and record.progress == 1.0


async def test_cluster_emit_many_appends_for_several_jobs_in_one_batch(
    cluster: LocalCluster, client: RedisCluster
) -> None:
    """The generation worker coalesces chunks of many jobs into one ``emit_many`` batch."""
    q = make_queue(client, prefix_on(cluster, 1, "gen:demo"))
    running: dict[str, ActiveJob] = {}
    all_started, release = asyncio.Event(), asyncio.Event()

    async def handler(job: ActiveJob) -> str:
        running[job.payload] = job
        if len(running) == 3:
            all_started.set()
        await release.wait()
        return str(job.payload)

    ids = {name: (await q.enqueue(name)).id for name in ("a", "b", "c")}
    async with q.worker(handler, concurrency=3):
        try:
            async with asyncio.timeout(WAIT):
                await all_started.wait()
            await client.hset(q.keys.job(ids["c"]), "cancel_requested", 1)  # as cancel() does
            batch = [(running[name], f"{name}-1") for name in ("a", "b", "c")]
            assert await emit_many(batch) == [None, None, None]
            assert running["c"].signal.is_set()
        finally:
            release.set()
        assert await q.wait(ids["a"], timeout=WAIT) == "a"
        assert await q.wait(ids["b"], timeout=WAIT) == "b"
        with pytest.raises(JobCancelledError):
            await q.wait(ids["c"], timeout=WAIT)
    assert [(e.type, e.data) for e in await collect(q, ids["a"])] == [
        ("chunk", "a-1"),
        ("completed", "a"),
    ]


async def test_cluster_blocking_reads_stay_under_a_short_socket_timeout(
    cluster: LocalCluster, cluster_url: str, watchers: list[Watcher]
) -> None:
    """XREAD BLOCK and BLPOP must not outlast the cluster client's socket timeout."""
    client = connect(cluster_url, socket_timeout=1.0)
    try:
        q = make_queue(client, prefix_on(cluster, 0, "gen:openai"))
        assert q.watch_block == 0.5

        async def handler(job: ActiveJob) -> str:
            await asyncio.sleep(1.6)  # quiet for longer than the socket timeout
            await job.emit("late")
            return "ok"

        job = await q.enqueue({})
        watchers.append(watcher := Watcher(q, job.id))
        async with q.worker(handler) as worker:
            assert worker.poll == 0.5
            await asyncio.sleep(1.2)  # the idle fetch loop blocks on BLPOP meanwhile
            events = await watcher.finished()
        assert [(e.type, e.data) for e in events] == [("chunk", "late"), ("completed", "ok")]
    finally:
        await client.aclose()


# -- cancelling ------------------------------------------------------------------------------------


async def test_cluster_cancel_of_running_job_stops_handler_at_once(
    cluster: LocalCluster, cluster_url: str, client: RedisCluster
) -> None:
    """The handler never emits, and the heartbeat is 5 s away: only the cancels channel, a
    pub/sub subscription through the cluster client, can stop it within a second. The worker
    has a client of its own that it uses first, as a worker process does."""
    prefix = prefix_on(cluster, 1, "gen:demo")
    q = make_queue(client, prefix, lease=20.0)
    worker_client = connect(cluster_url)
    worker_queue = make_queue(worker_client, prefix, lease=20.0)
    started, interrupted = asyncio.Event(), asyncio.Event()

    async def handler(job: ActiveJob) -> str:
        await job.emit("partial")
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            interrupted.set()
            raise
        return "never"

    worker = await worker_queue.worker(handler).start()
    try:
        async with asyncio.timeout(WAIT):
            while not await subscribers(cluster, q.keys.cancels):
                await asyncio.sleep(0.02)
        job = await q.enqueue({}, idempotency_key="stop-me")
        async with asyncio.timeout(WAIT):
            await started.wait()
        assert (await q.get(job.id)).status is JobStatus.ACTIVE  # type: ignore[union-attr]
        t0 = asyncio.get_running_loop().time()
        assert await q.cancel(job.id) is True
        async with asyncio.timeout(2.0):
            await interrupted.wait()
        assert asyncio.get_running_loop().time() - t0 < 1.0
        with pytest.raises(JobCancelledError):
            await q.wait(job.id, timeout=WAIT)
    finally:
        try:
            async with asyncio.timeout(WAIT):
                await worker.stop()
        finally:
            await worker_client.aclose()

    record = await q.get(job.id)
    assert record is not None and record.status is JobStatus.CANCELLED and record.cancel_requested
    assert [e.type for e in await collect(q, job.id)] == ["chunk", "cancelled"]
    assert await q.cancel(job.id) is True  # still cancelled, still true
    fresh = await q.enqueue({}, idempotency_key="stop-me")  # a cancelled job releases its key
    assert fresh.id != job.id and not fresh.deduplicated


async def test_cluster_cancel_of_waiting_job_settles_at_once(
    cluster: LocalCluster, client: RedisCluster
) -> None:
    q = make_queue(client, prefix_on(cluster, 2, "gen:anthropic"))
    job = await q.enqueue({"prompt": "never run"})
    assert await q.cancel(job.id) is True
    record = await q.get(job.id)
    assert record is not None and record.status is JobStatus.CANCELLED
    assert [e.type for e in await collect(q, job.id)] == ["cancelled"]
    assert (await q.stats()).waiting == 0
    with pytest.raises(JobCancelledError):
        await q.wait(job.id, timeout=1)


# -- failures, dead letters and cooldowns ----------------------------------------------------------


async def test_cluster_retry_backs_off_then_completes(
    cluster: LocalCluster, client: RedisCluster
) -> None:
    q = make_queue(client, prefix_on(cluster, 1, "gen:demo"))
    starts: list[float] = []

    async def handler(job: ActiveJob) -> str:
        starts.append(asyncio.get_running_loop().time())
        if job.attempt == 1:
            raise RetryJobError("429 from the provider", retry_after=0.5)
        return f"ok on attempt {job.attempt}"

    job = await q.enqueue({})
    async with q.worker(handler):
        assert await q.wait(job.id, timeout=WAIT) == "ok on attempt 2"
    assert starts[1] - starts[0] >= 0.45  # the scheduled set held it for retry_after
    record = await q.get(job.id)
    assert record is not None and record.error == "429 from the provider"


async def test_cluster_dead_letters_retry_dead_and_purge(
    cluster: LocalCluster, client: RedisCluster
) -> None:
    q = make_queue(client, prefix_on(cluster, 2, "gen:anthropic"))
    broken = {"fixed": False}

    async def handler(job: ActiveJob) -> str:
        await job.emit("partial")
        if not broken["fixed"]:
            raise TerminalJobError("model not found")
        return "fixed"

    job = await q.enqueue({}, idempotency_key="dl-1")
    doomed = await q.enqueue({})
    async with q.worker(handler, concurrency=2):
        with pytest.raises(JobFailedError, match="model not found"):
            await q.wait(job.id, timeout=WAIT)
        with pytest.raises(JobFailedError):
            await q.wait(doomed.id, timeout=WAIT)
        assert sorted(await q.dead()) == sorted([job.id, doomed.id])
        entries = {e.id: e for e in await q.dead_entries()}
        assert entries[job.id].reason == "terminal" and entries[job.id].attempts == 1
        assert entries[job.id].error == "model not found"
        first = await q.dead_page(count=1)
        assert first.next_cursor is not None
        second = await q.dead_page(count=1, cursor=first.next_cursor)
        assert second.next_cursor is None
        assert {*first.entries, *second.entries} == {*entries.values()}
        last = await q.last_event(job.id)
        assert last is not None and (last.type, last.data) == ("failed", "model not found")
        assert (await q.stats()).dead == 2
        record = await q.get(job.id)
        assert record is not None and record.status is JobStatus.FAILED

        broken["fixed"] = True
        assert await q.retry_dead(job.id) is True
        assert await q.wait(job.id, timeout=WAIT) == "fixed"
    assert await q.dead() == [doomed.id]
    # The failed attempt's output is gone; the marker tells a viewer to clear its text.
    assert [e.type for e in await collect(q, job.id)] == ["restarted", "chunk", "completed"]
    assert (await q.enqueue({}, idempotency_key="dl-1")).id == job.id  # completed: key bound

    assert await q.purge_dead() == 1
    assert await q.dead() == [] and await q.get(doomed.id) is None


async def test_cluster_cooldown_pauses_only_its_own_queue(
    cluster: LocalCluster, client: RedisCluster
) -> None:
    hot = make_queue(client, prefix_on(cluster, 0, "gen:openai"))
    calm = make_queue(client, prefix_on(cluster, 1, "gen:demo"))
    loop = asyncio.get_running_loop()
    started: dict[str, float] = {}

    async def handler(job: ActiveJob) -> str:
        started[job.payload["queue"]] = loop.time()
        return "ok"

    cool = 3.0  # long enough for the calm queue's job to run on a loaded machine
    t0 = loop.time()
    assert await hot.cooldown(cool) == pytest.approx(cool, abs=0.01)
    assert await hot.cooldown(0.2) > cool - 1  # a shorter cooldown does not cut a longer one
    assert cool - 1 < await hot.cooldown_remaining() <= cool
    hot_job = await hot.enqueue({"queue": "hot"})
    calm_job = await calm.enqueue({"queue": "calm"})
    async with hot.worker(handler), calm.worker(handler):
        assert await calm.wait(calm_job.id, timeout=WAIT) == "ok"
        # the other provider's queue kept flowing while this one cooled down
        assert "hot" not in started and await hot.cooldown_remaining() > 0
        assert (await hot.get(hot_job.id)).status is JobStatus.WAITING  # type: ignore[union-attr]
        assert await hot.wait(hot_job.id, timeout=WAIT) == "ok"
    assert started["hot"] - t0 >= cool - 0.05


async def test_cluster_batched_scripts_survive_a_script_flush(
    cluster: LocalCluster, client: RedisCluster
) -> None:
    """Activation and purge send batches of EVALSHA; after SCRIPT FLUSH on every node (as after
    a failover to an empty replica) they must load the scripts again, not fail."""
    q = make_queue(client, prefix_on(cluster, 0, "gen:openai"))

    async def handler(job: ActiveJob) -> str:
        if job.payload.get("fail"):
            raise TerminalJobError("no")
        return "ok"

    for index in range(len(cluster.nodes)):
        direct = await node_client(cluster, index)
        try:
            await direct.script_flush()
        finally:
            await direct.aclose()
    jobs = [await q.enqueue({"n": n}) for n in range(3)]
    failed = await q.enqueue({"fail": True})
    async with q.worker(handler, concurrency=4):
        assert [await q.wait(j.id, timeout=WAIT) for j in jobs] == ["ok"] * 3
        with pytest.raises(JobFailedError):
            await q.wait(failed.id, timeout=WAIT)
    for index in range(len(cluster.nodes)):
        direct = await node_client(cluster, index)
        try:
            await direct.script_flush()
        finally:
            await direct.aclose()
    assert await q.purge_dead() == 1

"""Network faults between a worker and Redis, through ``tests/faults/proxy.py``.

- A blackhole (a partition) longer than the lease: another worker takes the job over; the
  partitioned worker, once the network heals, is fenced and works again.
- Connection resets mid-stream: the job finishes once with its text once, and the worker's
  cancel listener subscribes again.
- A reply lost after the command ran: redis-py re-sends the command on a new connection; the
  command's effect must not be applied twice (enqueue, activate, emit, settle, cancel, pick,
  retry_dead are each checked in Redis afterwards).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from genq import ActiveJob, JobCancelledError, JobStatus, Queue, RetryJobError, TerminalJobError
from tests.faults.invariants import check_invariants, result_writer, tag
from tests.faults.proxy import Mode, Proxy
from tests.faults.support import Viewer, eventually, intake_ids, tagged_handler

pytestmark = pytest.mark.timeout(45)

LEASE = 2.0


def proxied_client(clients: Any, proxy: Proxy, timeout: float = 0.5) -> aioredis.Redis:
    return clients(
        proxy.url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=3),
    )


@pytest.fixture
async def proxy(servers) -> AsyncIterator[Proxy]:
    server = servers()
    async with Proxy(server.port) as running:
        running.server = server  # type: ignore[attr-defined]
        yield running


def direct_url(proxy: Proxy) -> str:
    return proxy.server.url  # type: ignore[attr-defined]


async def chunks_seen(viewer: Viewer, n: int) -> bool:
    return sum(e.type == "chunk" for e in viewer.events) >= n


async def test_blackholed_worker_is_fenced_after_takeover_and_recovers(
    proxy: Proxy, clients, prefix: str
) -> None:
    queue = Queue(clients(direct_url(proxy)), prefix, lease=LEASE, result_ttl=30.0)
    a_queue = Queue(proxied_client(clients, proxy), prefix, lease=LEASE, result_ttl=30.0)
    job = await queue.enqueue({"chunks": 40})
    viewer = Viewer(queue, job.id)
    async with a_queue.worker(tagged_handler("A", delay=0.05), concurrency=1) as a:
        await eventually(lambda: chunks_seen(viewer, 5), 10)
        proxy.set_mode(Mode.BLACKHOLE)
        partitioned_at = time.monotonic()
        async with queue.worker(tagged_handler("B", delay=0.02), concurrency=1):
            events = await viewer.finished(20)
        assert time.monotonic() - partitioned_at >= LEASE * 0.9  # B waited for the lease
        proxy.set_mode(Mode.PASS)

        # A, partitioned all along, is fenced: nothing of its attempt after B's restart.
        assert [e.type for e in events].count("restarted") == 1
        record = await queue.get(job.id)
        assert record is not None and record.result["writer"] == "B#2"
        # Healed, A works again (its fetch loop outlived the errors).
        later = await queue.enqueue({"chunks": 3})
        later_viewer = Viewer(queue, later.id)
        result = await queue.wait(later.id, timeout=15)
        assert result["writer"] == "A#1"
        assert not a.running or a.running == [later.id]
    await check_invariants(
        queue,
        [job.id, later.id],
        views={job.id: [events], later.id: [await later_viewer.finished(5)]},
        writer_of=tag,
        result_writer=result_writer,
    )


async def test_connection_resets_mid_stream_job_completes_once_and_cancel_listener_returns(
    proxy: Proxy, clients, prefix: str
) -> None:
    redis = clients(direct_url(proxy))
    queue = Queue(redis, prefix, lease=10.0, result_ttl=30.0)
    worker_queue = Queue(proxied_client(clients, proxy, timeout=1.0), prefix, lease=10.0)
    streaming = tagged_handler("A", delay=0.03)
    interrupted = asyncio.Event()

    async def handler(job: ActiveJob) -> Any:
        if job.payload.get("quiet"):  # awaits a "provider" without emitting
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                interrupted.set()
                raise
        return await streaming(job)

    job = await queue.enqueue({"chunks": 60})
    viewer = Viewer(queue, job.id)
    async with worker_queue.worker(handler, concurrency=2):
        await eventually(lambda: chunks_seen(viewer, 5), 10)
        proxy.set_mode(Mode.RESET)  # every connection (emits, doorbell, pub/sub) is reset
        await asyncio.sleep(0.5)
        proxy.set_mode(Mode.PASS)
        events = await viewer.finished(20)
        assert events[-1].type == "completed"

        # The cancel listener came back: a Stop reaches a quiet job long before the
        # heartbeat (every 2.5 s here) would have carried it.
        async def subscribed() -> bool:
            counts = await redis.pubsub_numsub(queue.keys.cancels)
            return bool(counts and counts[0][1] == 1)

        await eventually(subscribed, 10)
        quiet = await queue.enqueue({"quiet": True})
        await eventually(lambda: is_active(queue, quiet.id), 10)
        cancelled_at = time.monotonic()
        assert await queue.cancel(quiet.id)
        async with asyncio.timeout(5):
            await interrupted.wait()
        assert time.monotonic() - cancelled_at < 1.0
        with pytest.raises(JobCancelledError):
            await queue.wait(quiet.id, timeout=5)
    audit = await check_invariants(
        queue, [job.id, quiet.id], views={job.id: [events]}, writer_of=tag
    )
    assert audit.records[job.id]["attempt"] == "1"  # the resets cost no attempt
    assert proxy.accepted > 4  # the worker really reconnected through the proxy


async def is_active(queue: Queue, job_id: str) -> bool:
    job = await queue.get(job_id)
    return job is not None and job.status is JobStatus.ACTIVE


# -- a reply lost after the command ran ------------------------------------------------------


@dataclass
class Lossy:
    """A queue whose client goes through the proxy, and the same queue on a direct client."""

    proxy: Proxy
    queue: Queue  # through the proxy: its replies can be lost
    direct: Queue

    def drop(self, script: str) -> Any:
        sha = getattr(self.queue.scripts, script).sha
        return self.proxy.drop_next_reply(match=sha.encode())

    async def assert_dropped(self, armed: Any) -> None:
        await armed.wait(5)
        assert self.proxy.dropped_replies == 1


@pytest.fixture
async def lossy(proxy: Proxy, clients, prefix: str) -> Lossy:
    options = {"lease": 5.0, "backoff": 0.05, "max_backoff": 0.1, "result_ttl": 30.0}
    # Retries as the workers' client has them (workers.run.connect): redis-py re-sends a
    # command whose connection died. (A client made by from_url() without ``retry`` does not.)
    proxied = clients(
        proxy.url,
        socket_timeout=2.0,
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=3),
    )
    lossy = Lossy(
        proxy,
        Queue(proxied, prefix, **options),
        Queue(clients(direct_url(proxy)), prefix, **options),
    )
    # Load every script first: a NOSCRIPT round trip would otherwise come before the match.
    for name in ("enqueue", "activate", "emit", "settle", "cancel", "pick", "retry"):
        await proxied.script_load(getattr(lossy.queue.scripts, name).script)
    return lossy


@pytest.mark.parametrize("key", ["order-17", None])
async def test_lost_enqueue_reply_makes_one_job(lossy: Lossy, key: str | None) -> None:
    armed = lossy.drop("enqueue")
    created = await lossy.queue.enqueue({"n": 1}, idempotency_key=key)
    await lossy.assert_dropped(armed)
    assert not created.deduplicated  # the re-sent enqueue knew its own job (nonce)
    k, redis = lossy.direct.keys, lossy.direct.redis
    assert int(await redis.get(k.seq)) == 1  # the script's body ran once
    assert await intake_ids(lossy.direct) == [created.id]
    assert await redis.llen(k.signal) == 1  # one doorbell ring
    if key:
        again = await lossy.direct.enqueue({"n": 1}, idempotency_key=key)
        assert again.deduplicated and again.id == created.id
    await check_invariants(lossy.direct, [created.id], settled=False)


async def test_lost_enqueue_reply_retried_by_the_caller_with_its_key_makes_one_job(
    proxy: Proxy, clients, prefix: str
) -> None:
    # A client without retries (redis-py's from_url default, as the gateway's pool) sees the
    # error; the producer retries with the same Idempotency-Key and gets the job that exists.
    queue = Queue(clients(proxy.url, socket_timeout=2.0), prefix)
    await queue.redis.script_load(queue.scripts.enqueue.script)
    armed = proxy.drop_next_reply(match=queue.scripts.enqueue.sha.encode())
    with pytest.raises(RedisConnectionError):
        await queue.enqueue({"n": 1}, idempotency_key="order-18")
    await armed.wait(5)
    again = await queue.enqueue({"n": 1}, idempotency_key="order-18")
    assert again.deduplicated
    assert int(await queue.redis.get(queue.keys.seq)) == 1
    await check_invariants(queue, [again.id], settled=False)


async def test_lost_emit_reply_appends_once(lossy: Lossy) -> None:
    armed: list[Any] = []

    async def handler(job: ActiveJob) -> dict[str, str]:
        await job.emit("one ")
        armed.append(lossy.drop("emit"))
        await job.emit("two ")
        await job.emit("three ")
        return {"text": "one two three "}

    job = await lossy.direct.enqueue({})
    async with lossy.queue.worker(handler, concurrency=1):
        result = await lossy.direct.wait(job.id, timeout=10)
    await lossy.assert_dropped(armed[0])
    events = [(e.type, e.data) async for e in lossy.direct.watch(job.id)]
    assert events == [
        ("chunk", "one "),
        ("chunk", "two "),
        ("chunk", "three "),
        ("completed", result),
    ]
    await check_invariants(lossy.direct, [job.id])


@pytest.mark.parametrize("outcome", ["complete", "retry", "fail"])
async def test_lost_settle_reply_settles_once(lossy: Lossy, outcome: str) -> None:
    armed: list[Any] = []

    async def handler(job: ActiveJob) -> dict[str, str]:
        await job.emit(f"attempt {job.attempt} ")
        if job.attempt == 1:
            armed.append(lossy.drop("settle"))
            if outcome == "retry":
                raise RetryJobError("again", retry_after=0)
            if outcome == "fail":
                raise TerminalJobError("no")
        return {"text": f"attempt {job.attempt} "}

    job = await lossy.direct.enqueue({})
    async with lossy.queue.worker(handler, concurrency=1):
        await eventually(lambda: is_finished(lossy.direct, job.id), 10)
    await lossy.assert_dropped(armed[0])
    record = await lossy.direct.get(job.id)
    assert record is not None
    expected = {"complete": ("completed", 1), "retry": ("completed", 2), "fail": ("failed", 1)}
    assert (record.status.value, record.attempt) == expected[outcome]  # no extra attempt
    types = [e.type async for e in lossy.direct.watch(job.id)]
    assert types.count("restarted") == (outcome == "retry")
    assert await lossy.direct.dead() == ([job.id] if outcome == "fail" else [])
    await check_invariants(lossy.direct, [job.id])


@pytest.mark.parametrize("running", [False, True])
async def test_lost_cancel_reply_cancels_once(lossy: Lossy, running: bool) -> None:
    started = asyncio.Event()

    async def handler(job: ActiveJob) -> None:
        await job.emit("partial ")
        started.set()
        await asyncio.sleep(30)

    job = await lossy.direct.enqueue({}, idempotency_key="stop-me")
    async with lossy.direct.worker(handler, concurrency=1) if running else _nothing():
        if running:
            await asyncio.wait_for(started.wait(), 5)
        armed = lossy.drop("cancel")
        assert await lossy.queue.cancel(job.id) is True  # the re-run answers the same
        await lossy.assert_dropped(armed)
        with pytest.raises(JobCancelledError):
            await lossy.direct.wait(job.id, timeout=10)
    types = [e.type async for e in lossy.direct.watch(job.id)]
    assert types == (["chunk", "cancelled"] if running else ["cancelled"])
    assert not await lossy.direct.redis.exists(lossy.direct.keys.idempotency("stop-me"))
    await check_invariants(lossy.direct, [job.id])


async def test_lost_activate_reply_spends_one_attempt(lossy: Lossy) -> None:
    runs: list[int] = []

    async def handler(job: ActiveJob) -> dict[str, str]:
        runs.append(job.attempt)
        await job.emit("hello ")
        return {"text": "hello "}

    job = await lossy.direct.enqueue({})
    armed = lossy.drop("activate")
    async with lossy.queue.worker(handler, concurrency=1):
        await lossy.direct.wait(job.id, timeout=10)
    await lossy.assert_dropped(armed)
    assert runs == [1]
    assert [e.type async for e in lossy.direct.watch(job.id)] == ["chunk", "completed"]
    await check_invariants(lossy.direct, [job.id])


async def test_lost_pick_reply_returns_the_claim_without_spending_an_attempt(
    lossy: Lossy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pick.lua is the one script a re-run does not answer the same: the re-sent pick claims
    # other jobs, and the lost claim comes back when it expires (no attempt spent). The claim
    # is shortened so the test does not wait the default 10 s.
    monkeypatch.setattr("genq._reserve.CLAIM_SECONDS", 1.0)
    runs: list[tuple[str, int]] = []

    async def handler(job: ActiveJob) -> dict[str, str]:
        runs.append((job.id, job.attempt))
        await job.emit("x ")
        return {"text": "x "}

    first = await lossy.direct.enqueue({})
    armed = lossy.drop("pick")
    async with lossy.queue.worker(handler, concurrency=1):
        await lossy.assert_dropped(armed)
        second = await lossy.direct.enqueue({})
        await lossy.direct.wait(second.id, timeout=10)
        await lossy.direct.wait(first.id, timeout=10)
    assert sorted(runs) == sorted([(first.id, 1), (second.id, 1)])
    await check_invariants(lossy.direct, [first.id, second.id])


async def test_lost_retry_dead_reply_requeues_once(lossy: Lossy) -> None:
    runs: list[int] = []

    async def handler(job: ActiveJob) -> dict[str, str]:
        runs.append(job.attempt)
        await job.emit(f"run {len(runs)} ")
        if len(runs) == 1:
            raise TerminalJobError("broken")
        return {"text": f"run {len(runs)} "}

    job = await lossy.direct.enqueue({}, idempotency_key="revive")
    async with lossy.direct.worker(handler, concurrency=1):
        await eventually(lambda: is_finished(lossy.direct, job.id), 10)
        armed = lossy.drop("retry")
        await lossy.queue.retry_dead(job.id)  # its answer is wrong: see docs/KNOWN_LIMITS.md
        await lossy.assert_dropped(armed)
        result = await lossy.direct.wait(job.id, timeout=10)
    assert result == {"text": "run 2 "} and runs == [1, 1]  # requeued once, attempts reset
    types = [e.type async for e in lossy.direct.watch(job.id)]
    assert types == ["restarted", "chunk", "completed"]
    again = await lossy.direct.enqueue({}, idempotency_key="revive")
    assert again.deduplicated and again.id == job.id  # the key is bound again, once
    await check_invariants(lossy.direct, [job.id])


async def is_finished(queue: Queue, job_id: str) -> bool:
    job = await queue.get(job_id)
    return job is not None and job.status in (
        JobStatus.COMPLETED,
        JobStatus.FAILED,
        JobStatus.CANCELLED,
    )


class _nothing:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None

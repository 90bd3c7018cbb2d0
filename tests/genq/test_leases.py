import asyncio

import pytest

from genq import JobLeaseLostError, JobStatus, Queue
from genq._calls import activate_call
from tests.faults.support import ScriptCalls


async def test_leases_zombie_gets_lease_lost_and_exactly_one_settle(redis, prefix):
    queue = Queue(redis, prefix, lease=0.5, backoff=0.01, max_backoff=0.02)
    e = await queue.enqueue("p")
    zombie_paused = asyncio.Event()
    resume_zombie = asyncio.Event()
    zombie_error = []

    async def zombie(job):
        await job.emit("zombie-1 ")
        zombie_paused.set()
        await resume_zombie.wait()
        try:
            await job.emit("zombie-2 ")
        except JobLeaseLostError as exc:
            zombie_error.append(exc)
            raise
        return "zombie result"

    zw = await queue.worker(zombie, concurrency=1).start()
    await asyncio.wait_for(zombie_paused.wait(), 5)
    # Stall the zombie's automatic heartbeat, as a paused process would: its lease expires.
    for slot in zw._slots.values():
        slot.finished = True
    await asyncio.sleep(0.8)

    async def healthy(job):
        await job.emit("healthy ")
        return "healthy result"

    async with queue.worker(healthy):
        assert await queue.wait(e.id, timeout=10) == "healthy result"
    resume_zombie.set()
    await zw.stop()
    assert len(zombie_error) == 1
    events = [(ev.type, ev.data) async for ev in queue.watch(e.id)]
    assert events == [("restarted", None), ("chunk", "healthy "), ("completed", "healthy result")]
    job = await queue.get(e.id)
    assert job.status is JobStatus.COMPLETED and job.result == "healthy result"
    assert job.attempt == 2


async def test_leases_stale_token_cannot_emit_heartbeat_or_settle(queue):
    e = await queue.enqueue("p")
    held = asyncio.Event()
    release = asyncio.Event()
    outcome = {}

    async def handler(job):
        held.set()
        await release.wait()
        for name, call in [
            ("emit", job.emit("x")),
            ("progress", job.progress(0.5)),
            ("heartbeat", job.heartbeat()),
        ]:
            try:
                await call
                outcome[name] = "accepted"
            except JobLeaseLostError:
                outcome[name] = "refused"
        return "stale result"

    async with queue.worker(handler):
        await asyncio.wait_for(held.wait(), 5)
        # Another holder took over: tamper with the record's token, as BullMQ's tests do.
        await queue.redis.hset(queue.keys.job(e.id), "token", "someone-else")
        release.set()
        for _ in range(100):
            if len(outcome) == 3:
                break
            await asyncio.sleep(0.02)
    assert outcome == {"emit": "refused", "progress": "refused", "heartbeat": "refused"}
    job = await queue.get(e.id)
    assert job.status is JobStatus.ACTIVE and job.result is None  # the settle was refused


async def test_leases_emit_rerun_with_same_sequence_appends_once(queue):
    """A resent emit (reply lost, client retried) must not duplicate text."""
    e = await queue.enqueue("p")
    held = asyncio.Event()
    done = asyncio.Event()

    async def handler(job):
        await job.emit("once")
        k = queue.keys
        # Replay the exact script call the emit made (sequence number 1).
        await queue.scripts.emit(
            keys=[k.job(job.id), k.events(job.id), k.leases],
            args=[job.id, job.token, 1, "chunk", '"once"', 5000, 100, ""],
        )
        held.set()
        await done.wait()
        return "ok"

    async with queue.worker(handler):
        await asyncio.wait_for(held.wait(), 5)
        done.set()
        await queue.wait(e.id, timeout=5)
    assert [ev.data async for ev in queue.watch(e.id) if ev.type == "chunk"] == ["once"]


async def test_leases_expired_claim_returns_without_spending_attempt(queue):
    e = await queue.enqueue("p")
    # A worker claims the job and dies before activating it.
    assert await ScriptCalls(queue).pick(1, claim_ms=50) == [e.id]
    await asyncio.sleep(0.1)

    async def handler(job):
        return job.attempt

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=5) == 1


@pytest.mark.parametrize("cancel_first", [True, False])
async def test_leases_dead_worker_job_is_reclaimed_or_cancelled(redis, prefix, cancel_first):
    queue = Queue(redis, prefix, lease=0.3)
    e = await queue.enqueue("p")
    # A worker claims and activates the job, then dies without a word.
    assert await ScriptCalls(queue).pick(1) == [e.id]
    await queue.scripts.activate(*activate_call(queue, e.id, "dead-worker", 0.3))
    if cancel_first:
        assert await queue.cancel(e.id)
    await asyncio.sleep(0.4)

    async def handler(job):
        return "recovered"

    async with queue.worker(handler):
        if cancel_first:
            for _ in range(100):
                if (await queue.get(e.id)).status is JobStatus.CANCELLED:
                    break
                await asyncio.sleep(0.05)
            assert (await queue.get(e.id)).status is JobStatus.CANCELLED
        else:
            assert await queue.wait(e.id, timeout=5) == "recovered"
            assert (await queue.get(e.id)).attempt == 2
    history = (await queue.get(e.id)).history
    assert history[0].outcome == "lease_expired" and "worker lost" in history[0].error
    assert [a.outcome for a in history[1:]] == ([] if cancel_first else ["completed"])

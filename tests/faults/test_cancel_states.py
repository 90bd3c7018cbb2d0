"""Cancel in the states tests/genq/test_cancel.py does not reach, and at the exact instant a
job settles.

tests/genq/test_cancel.py covers waiting, delayed, running (emitting and quiet), finished,
unknown, a handler that swallows the cancel, and 200 cancels racing completions. Here:
scheduled for a retry (after a failed attempt that wrote output), claimed but not activated,
active on a worker that died (a real process, SIGKILL), and cancel and settle arriving
back to back in one round trip, in both orders, for each outcome.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from genq import ActiveJob, JobCancelledError, JobStatus, Queue, RetryJobError
from genq._calls import activate_call, cancel_call, settle_call
from genq._cluster import Call
from tests.faults.invariants import check_invariants
from tests.faults.support import ScriptCalls, Viewer, eventually

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def queue(redis, prefix: str) -> Queue:
    return Queue(redis, prefix, lease=5.0, backoff=0.05, max_backoff=0.1, result_ttl=30.0)


async def status_of(queue: Queue, job_id: str) -> str | None:
    raw = await queue.redis.hget(queue.keys.job(job_id), "status")
    return raw.decode() if raw else None


async def test_cancel_a_job_scheduled_for_retry_settles_at_once_and_never_runs_again(
    queue: Queue,
) -> None:
    runs: list[int] = []

    async def handler(job: ActiveJob) -> None:
        runs.append(job.attempt)
        await job.emit("partial ")
        raise RetryJobError("provider overloaded", retry_after=1.0)

    job = await queue.enqueue({}, idempotency_key="retry-me")
    viewer = Viewer(queue, job.id)
    async with queue.worker(handler, concurrency=1):
        await eventually(lambda: is_status(queue, job.id, "scheduled"), 5)
        assert await queue.cancel(job.id) is True
        record = await queue.get(job.id)
        assert record is not None and record.status is JobStatus.CANCELLED
        assert record.error == "provider overloaded"  # the failed attempt's error is kept
        await asyncio.sleep(1.5)  # past the retry time: the job must not come back
    assert runs == [1]
    events = await viewer.finished(5)
    assert [e.type for e in events] == ["chunk", "cancelled"]
    k = queue.keys
    assert not await queue.redis.zscore(k.scheduled, job.id)
    assert not await queue.redis.hexists(k.rank, job.id)
    assert not await queue.redis.exists(k.idempotency("retry-me"))  # released
    await check_invariants(queue, [job.id], views={job.id: [events]})


async def test_cancel_a_claimed_not_activated_job_settles_and_the_claim_is_refused(
    queue: Queue,
) -> None:
    job = await queue.enqueue({})
    k = queue.keys
    assert await ScriptCalls(queue).pick(1) == [job.id]
    assert await queue.cancel(job.id) is True
    assert await status_of(queue, job.id) == "cancelled"
    assert await queue.redis.zcard(k.leases) == 0
    # The worker that claimed it activates it now: refused, nothing runs.
    reply = await queue.scripts.activate(*activate_call(queue, job.id, "late", 5))
    assert int(reply[0]) == 3
    record = await queue.get(job.id)
    assert record is not None and (record.status, record.attempt) == (JobStatus.CANCELLED, 0)
    assert [e.type async for e in queue.watch(job.id)] == ["cancelled"]
    await check_invariants(queue, [job.id])


async def test_cancel_an_active_job_whose_worker_died_settles_at_lease_expiry_unrun(
    queue: Queue, worker_processes, redis_url: str, prefix: str
) -> None:
    lease = 2.0
    dying = await worker_processes("A", redis_url, prefix, lease=lease, delay=0.05)
    job = await queue.enqueue({"chunks": 100})
    viewer = Viewer(queue, job.id)
    await dying.expect("emit", id=job.id, n=3)
    dying.signal(signal.SIGKILL)
    assert await dying.exit_code() == -signal.SIGKILL

    cancelled_at = time.monotonic()
    assert await queue.cancel(job.id) is True  # flagged: nobody is there to hear it yet
    record = await queue.get(job.id)
    assert record is not None and record.status is JobStatus.ACTIVE and record.cancel_requested
    runs: list[str] = []

    async def handler(job: ActiveJob) -> None:
        runs.append(job.id)

    async with queue.worker(handler, concurrency=1):  # its pick reclaims the expired lease
        with pytest.raises(JobCancelledError):
            await queue.wait(job.id, timeout=lease + 3)
    assert time.monotonic() - cancelled_at < lease + 1.5
    assert runs == []  # settled cancelled, not run again
    events = await viewer.finished(5)
    types = [e.type for e in events]
    assert types[-1] == "cancelled" and "restarted" not in types
    assert set(types[:-1]) == {"chunk"}
    await check_invariants(queue, [job.id], views={job.id: [events]})


def settle_of(queue: Queue, job_id: str, token: str, outcome: str) -> Call:
    """The exact call Worker._settle makes."""
    data = {"complete": '"the result"', "retry": "flaky", "fail": "broken"}[outcome]
    return settle_call(queue, job_id, token, "", outcome, data, 0.06, "terminal")


OUTCOMES = {
    # (settle outcome, cancel first?) -> (status, cancel's answer)
    ("complete", True): ("cancelled", 1),
    ("retry", True): ("cancelled", 1),
    ("fail", True): ("cancelled", 1),
    ("complete", False): ("completed", 0),
    ("retry", False): ("cancelled", 1),  # the retry waits in the scheduled set: cancellable
    ("fail", False): ("failed", 0),
}


@pytest.mark.parametrize(("outcome", "cancel_first"), list(OUTCOMES))
async def test_cancel_and_settle_in_the_same_instant(
    queue: Queue, outcome: str, cancel_first: bool
) -> None:
    job = await queue.enqueue({})
    await ScriptCalls(queue).pick(1)
    await queue.scripts.activate(*activate_call(queue, job.id, "tok", 5))
    calls = [
        ("settle", settle_of(queue, job.id, "tok", outcome)),
        ("cancel", cancel_call(queue, job.id, "")),
    ]
    if cancel_first:
        calls.reverse()
    async with queue.redis.pipeline(transaction=False) as pipe:  # one round trip, back to back
        for name, (keys, args) in calls:
            await getattr(queue.scripts, name)(keys=keys, args=args, client=pipe)
        replies = dict(zip([name for name, _ in calls], await pipe.execute(), strict=True))
    status, answer = OUTCOMES[(outcome, cancel_first)]
    assert await status_of(queue, job.id) == status
    assert int(replies["cancel"][0]) == answer  # True exactly when no result will come
    record = await queue.get(job.id)
    assert record is not None
    assert (record.result is not None) == (status == "completed")
    terminal = [e.type async for e in queue.watch(job.id) if e.terminal]
    assert terminal == [status]
    await check_invariants(queue, [job.id])


async def is_status(queue: Queue, job_id: str, status: str) -> bool:
    return await status_of(queue, job_id) == status

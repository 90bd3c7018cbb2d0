"""Queue.pull/ack/nack/extend/push_events: the same scripts and fencing as a worker's job."""

from __future__ import annotations

import asyncio

import pytest

from genq import JobLeaseLostError, JobStatus, PulledJob, Queue, visible_text

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def queue(redis, prefix) -> Queue:
    return Queue(redis, prefix, backoff=0.05, max_backoff=0.1, max_attempts=3)


async def events_of(queue: Queue, job_id: str) -> list[tuple[str, object]]:
    return [(e.type, e.data) async for e in queue.watch(job_id)]


async def test_pull_ack_streams_and_completes(queue):
    e = await queue.enqueue({"prompt": "hi"})
    (job,) = await queue.pull(max=5, visibility=30)
    assert isinstance(job, PulledJob)
    assert (job.id, job.attempt, job.payload) == (e.id, 1, {"prompt": "hi"})
    assert await queue.push_events(job.id, job.receipt, [("chunk", "a"), ("chunk", "b ")]) is False
    await queue.push_events(job.id, job.receipt, [("progress", 0.5), ("chunk", "c")])
    assert await queue.ack(job.id, job.receipt, {"text": "ab c"}) == "completed"
    events = await events_of(queue, e.id)
    # Adjacent text chunks of one push are joined, as a worker's emit batcher joins deltas.
    assert events == [
        ("chunk", "ab "),
        ("progress", 0.5),
        ("chunk", "c"),
        ("completed", {"text": "ab c"}),
    ]
    assert await queue.ack(job.id, job.receipt, {"text": "ab c"}) == "completed"  # a resend
    assert await queue.pull() == []


async def test_pull_events_with_seq_are_safe_to_send_again(queue):
    """A call resent after a lost reply (same ``seq``) appends nothing twice, even when its
    chunks were joined; the next call goes on from its own number."""
    e = await queue.enqueue("p")
    (job,) = await queue.pull(visibility=30)
    first = [("chunk", "a"), ("chunk", "b "), ("progress", 0.5)]
    for _ in range(3):  # the same call, three times
        await queue.push_events(job.id, job.receipt, first, seq=1)
    await queue.push_events(job.id, job.receipt, [("chunk", "c")], seq=4)
    await queue.push_events(job.id, job.receipt, [("chunk", "c")], seq=4)
    await queue.push_events(job.id, job.receipt, [("chunk", "a")], seq=2)  # an old number
    assert await queue.ack(job.id, job.receipt, "done") == "completed"
    assert await events_of(queue, e.id) == [
        ("chunk", "ab "),
        ("progress", 0.5),
        ("chunk", "c"),
        ("completed", "done"),
    ]
    with pytest.raises(ValueError, match="seq"):
        await queue.push_events(job.id, job.receipt, [("chunk", "x")], seq=0)


async def test_pull_stale_receipt_changes_nothing(queue):
    e = await queue.enqueue("p")
    (job,) = await queue.pull(visibility=30)
    _token, _, vis = job.receipt.partition(".")
    stale = f"{'0' * 32}.{vis}"
    before = await queue.get(e.id)
    for call in (
        queue.ack(e.id, stale, "x"),
        queue.nack(e.id, stale, "boom", terminal=True),
        queue.extend(e.id, stale, 10),
        queue.push_events(e.id, stale, [("chunk", "x")]),
        queue.ack(e.id, "garbage", "x"),
    ):
        with pytest.raises(JobLeaseLostError):
            await call
    after = await queue.get(e.id)
    assert after.status is JobStatus.ACTIVE and after.attempt == before.attempt == 1
    assert await queue.last_event(e.id) is None
    assert await queue.ack(e.id, job.receipt, "ok") == "completed"


async def test_pull_expired_visibility_redelivers_with_restarted(queue):
    e = await queue.enqueue("p")
    (first,) = await queue.pull(visibility=0.3)
    await queue.push_events(first.id, first.receipt, [("chunk", "lost ")])
    await asyncio.sleep(0.5)
    # The visibility passed: the receipt is dead, even before anybody reclaimed the job.
    with pytest.raises(JobLeaseLostError):
        await queue.push_events(first.id, first.receipt, [("chunk", "late")])
    with pytest.raises(JobLeaseLostError):
        await queue.extend(first.id, first.receipt, 10)
    with pytest.raises(JobLeaseLostError):
        await queue.ack(first.id, first.receipt, "late")
    (second,) = await queue.pull(visibility=30)
    assert (second.id, second.attempt) == (e.id, 2)
    await queue.push_events(second.id, second.receipt, [("chunk", "kept")])
    await queue.ack(second.id, second.receipt, "done")
    events = await events_of(queue, e.id)
    assert events == [("restarted", None), ("chunk", "kept"), ("completed", "done")]
    assert visible_text([ev async for ev in queue.watch(e.id)]) == "kept"


async def test_pull_extend_keeps_the_job(queue):
    e = await queue.enqueue("p")
    (job,) = await queue.pull(visibility=0.4)
    for _ in range(3):
        await asyncio.sleep(0.2)
        assert await queue.extend(job.id, job.receipt, 0.4) is False
    # Events renew to at least the pull's visibility, never shorter than an extend gave.
    assert await queue.extend(job.id, job.receipt, 5) is False
    await queue.push_events(job.id, job.receipt, [("chunk", "x")])
    await asyncio.sleep(0.6)
    assert await queue.pull() == []
    assert await queue.ack(e.id, job.receipt, "ok") == "completed"


async def test_pull_nack_retries_then_dead_letters(queue):
    e = await queue.enqueue("p", max_attempts=2)
    (job,) = await queue.pull()
    assert await queue.nack(job.id, job.receipt, "try later", retry_after=0) == "scheduled"
    (again,) = await queue.pull()
    assert again.attempt == 2
    assert await queue.nack(again.id, again.receipt, "still broken") == "failed"
    dead = await queue.dead_entries()
    assert [(d.id, d.error) for d in dead] == [(e.id, "still broken")]


async def test_pull_nack_terminal_dead_letters_at_once(queue):
    e = await queue.enqueue("p")
    (job,) = await queue.pull()
    assert await queue.nack(job.id, job.receipt, "bad input", terminal=True) == "failed"
    assert (await queue.get(e.id)).status is JobStatus.FAILED


async def test_pull_cancel_reaches_the_puller(queue):
    e = await queue.enqueue("p")
    (job,) = await queue.pull()
    assert await queue.cancel(e.id)
    assert await queue.push_events(job.id, job.receipt, [("chunk", "x")]) is True
    assert await queue.extend(job.id, job.receipt, 10) is True
    assert await queue.ack(job.id, job.receipt, "ignored") == "cancelled"


async def test_pull_fair_share_and_max(queue):
    for i in range(3):
        await queue.enqueue(i, tenant="a")
    await queue.enqueue("b0", tenant="b")
    jobs = await queue.pull(max=2)
    assert sorted(j.tenant for j in jobs) == ["a", "b"]
    with pytest.raises(ValueError):
        await queue.pull(max=0)
    with pytest.raises(ValueError):
        await queue.pull(visibility=0)
    with pytest.raises(ValueError):
        await queue.push_events(jobs[0].id, jobs[0].receipt, [("shout", "x")])

import asyncio
import time

import pytest

from genq import JobFailedError, JobStatus, RetryJobError, TerminalJobError, visible_text
from tests.genq.streams import entry_id


async def test_retries_until_success_keeping_last_error(queue):
    e = await queue.enqueue("p")

    async def handler(job):
        if job.attempt < 3:
            raise ConnectionError(f"flaky {job.attempt}")
        return "third time"

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=10) == "third time"
    job = await queue.get(e.id)
    assert job.attempt == 3 and job.error == "ConnectionError: flaky 2"


async def test_retries_exhausted_dead_letters_with_reason_error(queue):
    e = await queue.enqueue("p", max_attempts=2)
    seen = []

    async def handler(job):
        seen.append(job.attempt)
        raise ValueError("always")

    async with queue.worker(handler):
        with pytest.raises(JobFailedError) as info:
            await queue.wait(e.id, timeout=10)
    assert info.value.error == "ValueError: always"
    assert seen == [1, 2]
    [entry] = await queue.dead_entries()
    assert (entry.id, entry.reason, entry.attempts) == (e.id, "error", 2)
    assert (await queue.get(e.id)).status is JobStatus.FAILED


async def test_retries_terminal_error_dead_letters_at_once(queue):
    e = await queue.enqueue("p")
    seen = []

    async def handler(job):
        seen.append(job.attempt)
        raise TerminalJobError("400 malformed")

    async with queue.worker(handler):
        with pytest.raises(JobFailedError, match="400 malformed"):
            await queue.wait(e.id, timeout=10)
    assert seen == [1]
    assert (await queue.dead_entries())[0].reason == "terminal"


async def test_retries_retry_after_is_a_floor(queue):
    e = await queue.enqueue("p")
    starts = []

    async def handler(job):
        starts.append(time.monotonic())
        if job.attempt == 1:
            raise RetryJobError("429 rate limited", retry_after=2)
        return "ok"

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=15) == "ok"
    assert starts[1] - starts[0] >= 2.0
    job = await queue.get(e.id)
    assert job.error == "429 rate limited"


async def test_retries_scheduled_status_while_backing_off(queue):
    e = await queue.enqueue("p")
    failed_once = asyncio.Event()

    async def handler(job):
        if job.attempt == 1:
            failed_once.set()
            raise RetryJobError("later", retry_after=30)
        return "never"

    async with queue.worker(handler):
        await asyncio.wait_for(failed_once.wait(), 5)
        for _ in range(100):
            job = await queue.get(e.id)
            if job.status is JobStatus.SCHEDULED:
                break
            await asyncio.sleep(0.02)
    assert job.status is JobStatus.SCHEDULED and job.run_at > job.updated_at + 29


async def test_retries_is_retryable_replaces_classification(queue):
    e1 = await queue.enqueue("terminal-but-retryable", max_attempts=2)
    e2 = await queue.enqueue("plain-but-final")
    attempts = {}

    async def handler(job):
        attempts[job.payload] = job.attempt
        if job.payload == "terminal-but-retryable":
            raise TerminalJobError("x")
        raise KeyError("y")

    def is_retryable(exc):
        return isinstance(exc, TerminalJobError)

    async with queue.worker(handler, is_retryable=is_retryable):
        for e in (e1, e2):
            with pytest.raises(JobFailedError):
                await queue.wait(e.id, timeout=10)
    assert attempts == {"terminal-but-retryable": 2, "plain-but-final": 1}


async def test_retries_on_error_sees_every_failure(queue):
    e = await queue.enqueue("p", max_attempts=2)
    reported = []

    async def handler(job):
        raise RuntimeError(f"attempt {job.attempt}")

    async def on_error(job, exc):
        reported.append((job.attempt, str(exc)))

    async with queue.worker(handler, on_error=on_error):
        with pytest.raises(JobFailedError):
            await queue.wait(e.id, timeout=10)
    assert reported == [(1, "attempt 1"), (2, "attempt 2")]


async def test_retries_restart_marker_drops_old_output(queue):
    e = await queue.enqueue("p")

    async def handler(job):
        if job.attempt == 1:
            await job.emit("The capital of")
            raise ConnectionError("dropped")
        await job.emit("The capital of France is Paris")
        return "Paris"

    watched = []

    async def watcher():
        async for ev in queue.watch(e.id):
            watched.append(ev)

    watch_task = asyncio.create_task(watcher())
    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=10) == "Paris"
    await asyncio.wait_for(watch_task, 5)
    types = [ev.type for ev in watched]
    assert types == ["chunk", "restarted", "chunk", "completed"]
    assert entry_id(watched[1].id) > entry_id(watched[0].id)
    replay = [(ev.type, ev.data) async for ev in queue.watch(e.id)]
    assert replay == [
        ("restarted", None),
        ("chunk", "The capital of France is Paris"),
        ("completed", "Paris"),
    ]
    assert visible_text(watched) == "The capital of France is Paris"


async def test_retries_no_restart_marker_when_first_attempt_wrote_nothing(queue):
    e = await queue.enqueue("p")

    async def handler(job):
        if job.attempt == 1:
            raise ConnectionError("before any output")
        await job.emit("hi")
        return "ok"

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=10)
    assert [ev.type async for ev in queue.watch(e.id)] == ["chunk", "completed"]


async def test_retries_each_attempt_is_kept_in_the_history(queue):
    """A job's record lists every attempt that ended: when it ran, how it ended, why."""

    async def handler(job):
        if job.attempt < 3:
            raise RuntimeError(f"flaky {job.attempt}")
        return "ok"

    e = await queue.enqueue("p", max_attempts=3)
    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=10) == "ok"
    job = await queue.get(e.id)
    assert job is not None
    assert [(a.attempt, a.outcome, a.error) for a in job.history] == [
        (1, "retry", "RuntimeError: flaky 1"),
        (2, "retry", "RuntimeError: flaky 2"),
        (3, "completed", None),
    ]
    assert all(a.started_at is not None and a.started_at <= a.ended_at for a in job.history)
    assert job.history[0].ended_at <= job.history[1].started_at  # type: ignore[operator]

"""What an attempt knows of its own start, from its activation's read of the record: how long
it waited in line (``ActiveJob.waited``) and how the attempts before it ended
(``ActiveJob.history``). Tracing reads them (docs/OBSERVABILITY.md); no round trip more."""

from __future__ import annotations

from genq import RetryJobError


async def test_an_attempt_knows_its_wait_and_the_attempts_before_it(queue):
    seen = []

    async def handler(job):
        seen.append((job.attempt, job.waited, [(a.attempt, a.outcome) for a in job.history]))
        if job.attempt == 1:
            raise RetryJobError("again", retry_after=0.3)
        return "done"

    async with queue.worker(handler):
        e = await queue.enqueue("p")
        assert await queue.wait(e.id, timeout=10) == "done"
    (first, waited_1, before_1), (second, waited_2, before_2) = seen
    assert (first, before_1) == (1, [])
    assert (second, before_2) == (2, [(1, "retry")])
    record = await queue.get(e.id)
    assert record is not None and record.started_at is not None
    # The first attempt waited from the enqueue to its start (the server's clock, in ms), and an
    # idle worker took it at once: well under its 1 s poll (not a tight bound: a machine busy
    # with other suites has stalled a process for a quarter of a second).
    assert record.history[0].started_at is not None
    assert abs(waited_1 - (record.history[0].started_at - record.created_at)) <= 0.002
    assert 0 <= waited_1 < 0.5
    # From when the retry was due: its backoff (at least the Retry-After) is not time in line.
    gap = record.started_at - record.history[0].ended_at  # attempt 1's end to attempt 2's start
    assert gap >= 0.3
    assert 0 <= waited_2 <= gap - 0.3 + 0.002


async def test_a_delayed_job_waits_from_when_it_is_due(queue):
    waits = []

    async def handler(job):
        waits.append(job.waited)

    e = await queue.enqueue("p", delay=0.6)
    async with queue.worker(handler):
        await queue.wait(e.id, timeout=10)
    (waited,) = waits
    record = await queue.get(e.id)
    assert record is not None and record.started_at is not None
    in_line = record.started_at - record.created_at
    assert in_line >= 0.6
    assert 0 <= waited <= in_line - 0.6 + 0.002  # the delay is not time in line

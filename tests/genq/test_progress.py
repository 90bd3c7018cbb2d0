"""A job's progress is None until its handler reports one: 0 would claim a report."""

import pytest

from genq import JobFailedError, TerminalJobError


async def test_progress_is_none_until_the_handler_reports_it(queue):
    e = await queue.enqueue("p", max_attempts=1)
    assert (await queue.get(e.id)).progress is None
    seen = {}

    async def handler(job):
        seen["before"] = (await queue.get(job.id)).progress
        await job.progress(0.4)
        seen["after"] = (await queue.get(job.id)).progress
        raise TerminalJobError("gives up after reporting")

    async with queue.worker(handler):
        with pytest.raises(JobFailedError):
            await queue.wait(e.id, timeout=5)
    assert seen == {"before": None, "after": 0.4}
    assert (await queue.get(e.id)).progress == 0.4  # a dead letter keeps what it reported


async def test_progress_is_none_again_after_a_dead_letter_is_retried(queue):
    e = await queue.enqueue("p", max_attempts=1)

    async def handler(job):
        await job.progress(0.7)
        raise TerminalJobError("no")

    async with queue.worker(handler):
        with pytest.raises(JobFailedError):
            await queue.wait(e.id, timeout=5)
    assert await queue.retry_dead(e.id)
    assert (await queue.get(e.id)).progress is None


async def test_progress_reported_as_zero_reads_zero(queue):
    e = await queue.enqueue("p")

    async def handler(job):
        await job.progress(0.0)
        return (await queue.get(job.id)).progress

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=5) == 0.0

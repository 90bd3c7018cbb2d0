"""Metered usage: an attempt's counts reach the record, its history entry, the queue's counters
and the terminal event exactly once, in the script that settles the attempt."""

import asyncio
from datetime import UTC, date, datetime, timedelta

import pytest

from genq import JobCancelledError, JobFailedError, JobStatus, RetryJobError, UsageRow
from genq._calls import settle_call
from genq._scripts import lua_constant
from genq._usage import encode_meter
from tests.faults.support import ScriptCalls


def today() -> date:
    return datetime.now(UTC).date()


async def test_a_completed_attempt_meters_record_history_counters_and_terminal_event(queue):
    e = await queue.enqueue("p", tenant="acme")

    async def handler(job):
        await job.emit("hi")
        job.meter("m/1", {"prompt_tokens": 7, "cost_nanos": 900}, estimated=True)
        return "done"

    async with queue.worker(handler):
        assert await queue.wait(e.id, timeout=5) == "done"
    job = await queue.get(e.id)
    assert job.usage == {"prompt_tokens": 7, "cost_nanos": 900, "estimated": True}
    (attempt,) = job.history
    assert attempt.label == "m/1" and attempt.outcome == "completed"
    assert attempt.usage == {"prompt_tokens": 7, "cost_nanos": 900, "estimated": True}
    counts = {"prompt_tokens": 7, "cost_nanos": 900, "attempts": 1, "estimated_attempts": 1}
    assert await queue.usage_totals() == [UsageRow(None, "acme", "m/1", counts)]
    assert await queue.usage(today(), today()) == [UsageRow(today(), "acme", "m/1", counts)]
    events = [ev async for ev in queue.watch(e.id)]
    assert [ev.type for ev in events] == ["chunk", "completed"]
    assert events[0].usage is None and events[1].usage == job.usage


async def test_every_attempt_counts_and_the_record_sums_them(queue):
    e = await queue.enqueue("p", tenant="t", max_attempts=3)

    async def handler(job):
        job.meter(f"m/{job.attempt}", {"completion_tokens": 10 * job.attempt})
        if job.attempt < 3:
            raise RetryJobError("again")
        return "ok"

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=10)
    job = await queue.get(e.id)
    assert job.usage == {"completion_tokens": 60, "estimated": False}
    assert [(a.outcome, a.label, a.usage) for a in job.history] == [
        ("retry", "m/1", {"completion_tokens": 10, "estimated": False}),
        ("retry", "m/2", {"completion_tokens": 20, "estimated": False}),
        ("completed", "m/3", {"completion_tokens": 30, "estimated": False}),
    ]
    totals = {row.label: row.counts for row in await queue.usage_totals("t")}
    assert totals == {f"m/{i}": {"completion_tokens": 10 * i, "attempts": 1} for i in (1, 2, 3)}


async def test_a_cancelled_attempt_reports_what_it_metered_before_stop(queue):
    e = await queue.enqueue("p")
    started = asyncio.Event()

    async def handler(job):
        await job.emit("partial")
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            job.meter("m", {"completion_tokens": 1}, estimated=True)
            raise

    async with queue.worker(handler):
        await asyncio.wait_for(started.wait(), 5)
        await queue.cancel(e.id)
        with pytest.raises(JobCancelledError):
            await queue.wait(e.id, timeout=5)
    events = [ev async for ev in queue.watch(e.id)]
    assert events[-1].type == "cancelled"
    assert events[-1].usage == {"completion_tokens": 1, "estimated": True}
    assert (await queue.get(e.id)).history[0].outcome == "cancelled"


async def test_a_failed_job_carries_its_usage_on_the_failed_event(queue):
    e = await queue.enqueue("p", max_attempts=1)

    async def handler(job):
        job.meter("m", {"prompt_tokens": 3})
        raise RetryJobError("boom")

    async with queue.worker(handler):
        with pytest.raises(JobFailedError):
            await queue.wait(e.id, timeout=5)
    events = [ev async for ev in queue.watch(e.id)]
    assert events[-1].type == "failed" and events[-1].usage == {
        "prompt_tokens": 3,
        "estimated": False,
    }


async def test_uncounted_usage_stays_on_the_record_only(queue):
    e = await queue.enqueue("p")

    async def handler(job):
        job.meter("relayed", {"prompt_tokens": 5}, counted=False)
        return 1

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=5)
    assert (await queue.get(e.id)).usage == {"prompt_tokens": 5, "estimated": False}
    assert await queue.usage_totals() == []


async def test_a_resent_settle_counts_once(queue):
    e = await queue.enqueue("p", tenant="a")
    steps = ScriptCalls(queue)
    assert await steps.pick() == [e.id]
    assert await steps.activate(e.id, "tok") == 0
    metered = encode_meter("m", {"cost_nanos": 5}, estimated=False, counted=True)
    call = settle_call(queue, e.id, "tok", "", "complete", '"r"', metered=metered)
    assert list(await queue.scripts.settle(*call)) == [0, b"completed"]
    assert list(await queue.scripts.settle(*call)) == [0, b"completed"]  # a lost reply's resend
    assert (await queue.usage_totals())[0].counts == {"cost_nanos": 5, "attempts": 1}
    assert (await queue.get(e.id)).usage == {"cost_nanos": 5, "estimated": False}


async def test_usage_reads_days_and_tenants(queue):
    day_key = queue.keys.usage_day((today() - timedelta(days=2)).isoformat())
    await queue.redis.hset(day_key, mapping={"a\0m\0cost_nanos": 4, "b\0m\0cost_nanos": 6})
    rows = await queue.usage(today() - timedelta(days=3), today())
    assert [(r.day, r.tenant, r.counts) for r in rows] == [
        (today() - timedelta(days=2), "a", {"cost_nanos": 4}),
        (today() - timedelta(days=2), "b", {"cost_nanos": 6}),
    ]
    assert [r.tenant for r in await queue.usage(today() - timedelta(days=3), today(), "b")] == ["b"]
    with pytest.raises(ValueError, match="at most 400 days"):
        await queue.usage(today() - timedelta(days=400), today())
    with pytest.raises(ValueError, match="before the first"):
        await queue.usage(today(), today() - timedelta(days=1))


FOLD_AT = lua_constant("USAGE_FOLD_AT")


async def settle_metered(queue, tenant: str, counts: dict[str, int], day: str | None = None):
    """One job of ``tenant`` run to completion by the scripts, its attempt metered with
    ``counts`` (label "m"); ``day`` (YYYY-MM-DD): counted under that UTC day, not today."""
    e = await queue.enqueue("p", tenant=tenant)
    steps = ScriptCalls(queue)
    assert await steps.pick() == [e.id]
    assert await steps.activate(e.id, "tok") == 0
    metered = encode_meter("m", counts, estimated=False, counted=True)
    keys, args = settle_call(queue, e.id, "tok", "", "complete", '"r"', metered=metered)
    if day is not None:
        k = queue.keys
        keys[-4:] = [k.usage_day(day), k.usage_total, k.usage_journal(day), k.usage_journals]
        args[-1] = day
    assert list(await queue.scripts.settle(keys, args)) == [0, b"completed"]


async def test_settles_count_through_the_days_journal_folded_once_it_is_long(queue):
    k, day = queue.keys, today().isoformat()
    for i in range(FOLD_AT - 1):
        await settle_metered(queue, "ab"[i % 2], {"prompt_tokens": 1, "cost_nanos": i})
    assert await queue.redis.llen(k.usage_journal(day)) == FOLD_AT - 1
    assert await queue.redis.smembers(k.usage_journals) == {day.encode()}
    assert await queue.redis.hgetall(k.usage_total) == {}  # not counted yet: only journaled
    await settle_metered(queue, "a", {"prompt_tokens": 1, "cost_nanos": FOLD_AT - 1})
    # the settle that filled the journal folded it, with no reader
    assert await queue.redis.exists(k.usage_journal(day), k.usage_journals) == 0
    a_nanos = sum(i for i in range(FOLD_AT - 1) if i % 2 == 0) + FOLD_AT - 1
    totals = await queue.redis.hgetall(k.usage_total)
    assert int(totals[b"a\0m\0cost_nanos"]) == a_nanos
    assert int(totals[b"a\0m\0attempts"]) + int(totals[b"b\0m\0attempts"]) == FOLD_AT
    assert await queue.redis.hgetall(k.usage_day(day)) == totals
    assert 0 < await queue.redis.pttl(k.usage_day(day)) <= 400 * 86_400_000
    # the next attempt waits in a new journal, and a read folds it first
    await settle_metered(queue, "b", {"prompt_tokens": 1})
    assert await queue.redis.llen(k.usage_journal(day)) == 1
    rows = {row.tenant: row.counts for row in await queue.usage_totals()}
    assert rows["a"]["prompt_tokens"] + rows["b"]["prompt_tokens"] == FOLD_AT + 1
    assert await queue.redis.exists(k.usage_journal(day), k.usage_journals) == 0


async def test_a_read_folds_the_journal_of_every_day_into_that_day(queue):
    earlier = (today() - timedelta(days=3)).isoformat()
    await settle_metered(queue, "a", {"cost_nanos": 4}, day=earlier)
    await settle_metered(queue, "a", {"cost_nanos": 6})
    assert await queue.redis.smembers(queue.keys.usage_journals) == {
        earlier.encode(),
        today().isoformat().encode(),
    }
    rows = await queue.usage(today() - timedelta(days=5), today())
    assert [(r.day, r.counts) for r in rows] == [
        (today() - timedelta(days=3), {"cost_nanos": 4, "attempts": 1}),
        (today(), {"cost_nanos": 6, "attempts": 1}),
    ]
    assert await queue.usage_totals() == [
        UsageRow(None, "a", "m", {"cost_nanos": 10, "attempts": 2})
    ]
    assert await queue.fold_usage() == 0  # folded once: a second read adds nothing


async def test_a_fold_keeps_sums_past_the_doubles_exact_range_exact(queue):
    big = 2**53 - 1  # the largest count an attempt may report
    for _ in range(3):
        await settle_metered(queue, "a", {"cost_nanos": big})
    assert (await queue.usage_totals())[0].counts == {"cost_nanos": 3 * big, "attempts": 3}


@pytest.mark.parametrize(
    ("label", "counts", "message"),
    [
        ("", {"a": 1}, "label"),
        ("m", {"Bad": 1}, "invalid count name"),
        ("m", {"a": -1}, "integer"),
        ("m", {"a": 1.5}, "integer"),
        ("m", {"attempts": 1}, "reserved"),
    ],
)
async def test_bad_meter_input_is_refused_at_the_call(queue, label, counts, message):
    e = await queue.enqueue("p")
    seen = []

    async def handler(job):
        with pytest.raises(ValueError, match=message):
            job.meter(label, counts)
        seen.append(job.metered)
        return 1

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=5)
    assert seen == [""]
    assert (await queue.get(e.id)).usage is None


async def test_restart_drops_the_output_and_marks_the_restart(queue):
    e = await queue.enqueue("p")

    async def handler(job):
        await job.emit("first try")
        await job.restart({"model": "b"})
        await job.emit("second")
        return "second"

    async with queue.worker(handler):
        await queue.wait(e.id, timeout=5)
    events = [(ev.type, ev.data) async for ev in queue.watch(e.id)]
    assert events == [("restarted", {"model": "b"}), ("chunk", "second"), ("completed", "second")]
    assert (await queue.get(e.id)).status is JobStatus.COMPLETED

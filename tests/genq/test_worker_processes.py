"""Worker processes dying, freezing and shutting down, for real.

Each test runs ``tests/genq/worker_process.py`` as separate processes against the shared server
and forces the failure with a signal (SIGKILL, SIGSTOP/SIGCONT, SIGTERM), or, where a signal
cannot time it exactly, by ending a lease through its key (as BullMQ's tests do). The tests wait
for the markers the processes print, never for a guessed amount of time. The test's own ``queue``
(tests/genq/conftest.py) only enqueues and watches: the lease that counts is the processes'
``--lease`` (LEASE here), short so that a reclaim happens within seconds.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest

from genq import Event, JobFailedError, JobStatus, Queue
from tests.faults.invariants import check_invariants, result_writer, tag
from tests.processes import WAIT, Spawn, Watcher, chunks

pytestmark = pytest.mark.timeout(30)

LEASE = 2.0


def split_at_restart(events: list[Event]) -> tuple[list[Event], list[Event]]:
    types = [e.type for e in events]
    assert types.count("restarted") == 1, types
    cut = types.index("restarted")
    return events[:cut], events[cut + 1 :]


def assert_ids_increase(events: list[Event]) -> None:
    keys = [tuple(int(part) for part in e.id.split("-")) for e in events]
    assert keys == sorted(keys) and len(set(keys)) == len(keys), [e.id for e in events]


async def lease_expired(queue: Queue, redis: Any, job_id: str) -> None:
    """Returns once the job's lease has expired by the server's clock (leases use it)."""
    async with asyncio.timeout(WAIT):
        while True:
            until = await redis.zscore(queue.keys.leases, job_id)
            if until is not None and until < await queue.server_time() * 1000:
                return
            await asyncio.sleep(0.05)


async def status_is(queue: Queue, job_id: str, status: JobStatus) -> None:
    async with asyncio.timeout(WAIT):
        while (job := await queue.get(job_id)) is None or job.status is not status:
            await asyncio.sleep(0.02)


async def test_worker_process_killed_mid_stream_job_finishes_on_another(
    queue: Queue, spawn: Spawn, watchers: list[Watcher]
) -> None:
    # A holds the job after 3 chunks (renewing its lease) until the kill: starting B (a new
    # Python process) takes seconds on a loaded machine, and A must still be mid-stream.
    a = await spawn("A", delay=0.01, stall_after=3)
    job = await queue.enqueue({"chunks": 60})
    watchers.append(watcher := Watcher(queue, job.id))
    await a.expect("stalled", id=job.id, attempt=1)
    b = await spawn("B", delay=0.01)  # an idle fleet member, started while A holds the job

    a.signal(signal.SIGKILL)
    assert await a.exit_code() == -signal.SIGKILL
    emitted_by_a = len(a.saw("emit", id=job.id))
    assert emitted_by_a == 3, "A dies mid-stream, after its third chunk"

    await b.expect("start", id=job.id, attempt=2)
    events = await watcher.finished()

    before, after = split_at_restart(events)
    assert [e.type for e in before] == ["chunk"] * 3
    assert [e.data for e in before] == chunks("A", 3)
    assert [e.type for e in after] == ["chunk"] * 60 + ["completed"]
    assert [e.data for e in after[:-1]] == chunks("B", 60)
    result = {"worker": "B", "attempt": 2, "text": "".join(chunks("B", 60))}
    assert after[-1].data == result
    assert_ids_increase(events)

    record = await queue.get(job.id)
    assert record is not None
    assert (record.status, record.attempt, record.result) == (JobStatus.COMPLETED, 2, result)
    assert await queue.wait(job.id, timeout=5) == result
    # A page refreshed now replays no text of the dead attempt.
    replay = [e async for e in queue.watch(job.id)]
    assert [e.type for e in replay] == ["restarted"] + ["chunk"] * 60 + ["completed"]
    assert [e.id for e in replay] == [e.id for e in events[len(before) :]]
    await check_invariants(
        queue,
        [job.id],
        views={job.id: [events, replay]},
        writer_of=tag,
        result_writer=result_writer,
    )


async def test_worker_process_frozen_past_lease_cannot_settle_after_takeover(
    queue: Queue, spawn: Spawn, watchers: list[Watcher], redis: Any
) -> None:
    # Once thawed, A's next emit and its automatic heartbeat are both overdue: whichever
    # reaches Redis first meets the lost lease. The emit: it raises JobLeaseLostError ("lost").
    # The heartbeat: the worker cancels the handler ("interrupted") before its emit is
    # written. The heartbeat is made rare, so the emit usually comes first; either way no
    # chunk of A's is accepted after the freeze and A never settles.
    a = await spawn("A", delay=0.1, heartbeat=LEASE * 0.9)
    job = await queue.enqueue({"chunks": 20})
    watchers.append(watcher := Watcher(queue, job.id))
    await a.expect("emit", id=job.id, attempt=1, n=2)
    a.signal(signal.SIGSTOP)
    frozen_at = len(a.saw("emit", id=job.id))

    b = await spawn("B", delay=0.01)
    await b.expect("start", id=job.id, attempt=2)
    await b.expect("returned", id=job.id, attempt=2)
    events = await watcher.finished()
    result = {"worker": "B", "attempt": 2, "text": "".join(chunks("B", 20))}
    assert events[-1].type == "completed" and events[-1].data == result

    a.signal(signal.SIGCONT)
    ended = await a.expect(("lost", "interrupted"), id=job.id, attempt=1)
    a.signal(signal.SIGTERM)  # stop() waits for the zombie's job task, settle attempt included
    assert await a.exit_code() == 0
    assert not a.saw("returned") and not a.saw("start", attempt=2)
    # The stop can land between an accepted emit and its marker line: allow that one.
    accepted = len(a.saw("emit", id=job.id))
    assert accepted in (frozen_at, frozen_at + 1), "the zombie's next emit must be refused"
    if ended["ev"] == "lost":
        assert ended["n"] == accepted + 1, ended
    assert len(a.saw(("lost", "interrupted"), id=job.id)) == 1, a.markers

    raw = await redis.xrange(queue.keys.events(job.id))
    types = [fields[b"type"].decode() for _, fields in raw]
    assert types.count("completed") == 1 and types[-1] == "completed", types
    assert "failed" not in types and "cancelled" not in types
    assert not any(b"A:" in fields[b"data"] for _, fields in raw), "zombie output leaked"
    record = await queue.get(job.id)
    assert record is not None
    assert (record.status, record.attempt, record.result) == (JobStatus.COMPLETED, 2, result)
    await check_invariants(
        queue, [job.id], views={job.id: [events]}, writer_of=tag, result_writer=result_writer
    )


async def test_worker_process_settling_after_losing_its_lease_cannot_overwrite_new_attempt(
    queue: Queue, spawn: Spawn, watchers: list[Watcher], redis: Any
) -> None:
    # A's lease runs out while its handler is between its last chunk and its return (as when
    # A's heartbeats could not reach Redis for a lease's length), and B takes the job over.
    # A's handler then returns: its settle meets an *active* job held by B's token, and only
    # the token fences it. The lease is ended by editing its score, so the timing is exact.
    # A lingers 5 s (starting B can take seconds on a loaded machine) on a 10 s lease whose
    # heartbeat (9.5 s) cannot come first; B lingers longer, so A's settle lands mid-attempt 2.
    a = await spawn("A", delay=0.01, linger=5.0, lease=10.0, heartbeat=9.5)
    job = await queue.enqueue({"chunks": 2})
    watchers.append(watcher := Watcher(queue, job.id))
    await a.expect("emit", id=job.id, attempt=1, n=1)
    b = await spawn("B", delay=0.01, linger=6.0)
    await a.expect("emit", id=job.id, attempt=1, n=2)
    assert await redis.zadd(queue.keys.leases, {job.id: 0}, xx=True, ch=True) == 1
    await redis.lpush(queue.keys.signal, "1")  # wake B now rather than at its next poll

    await b.expect("start", id=job.id, attempt=2)
    await a.expect("returned", id=job.id, attempt=1)
    a.signal(signal.SIGTERM)  # stop() returns once A's settle attempt is over
    assert await a.exit_code() == 0
    assert "before settling" in a.stderr.read_text(), "A must have tried to settle, refused"

    running = await queue.get(job.id)
    assert running is not None
    assert (running.status, running.attempt, running.result) == (JobStatus.ACTIVE, 2, None)

    await b.expect("returned", id=job.id, attempt=2)
    events = await watcher.finished()
    result = {"worker": "B", "attempt": 2, "text": "".join(chunks("B", 2))}
    before, after = split_at_restart(events)
    assert [e.data for e in before] == chunks("A", 2)
    assert [e.type for e in after] == ["chunk", "chunk", "completed"]
    assert after[-1].data == result
    record = await queue.get(job.id)
    assert record is not None
    assert (record.status, record.attempt, record.result) == (JobStatus.COMPLETED, 2, result)
    await check_invariants(
        queue, [job.id], views={job.id: [events]}, writer_of=tag, result_writer=result_writer
    )


async def test_worker_process_taking_back_its_own_lost_job_still_drains_on_sigterm(
    queue: Queue, spawn: Spawn, watchers: list[Watcher], redis: Any
) -> None:
    # A is frozen past its lease; another fleet member reclaims the job; A thaws and its
    # attempt 1 starts cleaning up after the lost lease (closing a provider stream takes a
    # moment) while A's own fetcher takes the job back as attempt 2. For a while both attempts
    # of one job live in one worker; SIGTERM must still wait for attempt 2.
    a = await spawn("A", delay=0.1, concurrency=2, cleanup=3.0)
    job = await queue.enqueue({"chunks": 40})
    watchers.append(watcher := Watcher(queue, job.id))
    await a.expect("emit", id=job.id, attempt=1, n=2)
    a.signal(signal.SIGSTOP)
    await lease_expired(queue, redis, job.id)

    await queue.cooldown(1.0)  # the reclaimed job waits in the ready set until A is back

    async def never(job: Any) -> None:
        raise AssertionError("the reclaiming worker must not run the job")

    async with queue.worker(never, concurrency=1):  # its first pass reclaims the lease
        await status_is(queue, job.id, JobStatus.WAITING)
    a.signal(signal.SIGCONT)

    await a.expect("start", id=job.id, attempt=2)
    await a.expect("cleaned", id=job.id, attempt=1)  # attempt 1 is over; attempt 2 runs on
    assert not a.saw("returned"), "attempt 2 must still be running"
    a.signal(signal.SIGTERM)
    assert await a.exit_code() == 0
    evs = [(m["ev"], m.get("attempt")) for m in a.markers]
    assert ("returned", 2) in evs, f"stop() did not wait for attempt 2: {evs[-6:]}"
    assert evs.index(("returned", 2)) < evs.index(("exit", None))

    result = {"worker": "A", "attempt": 2, "text": "".join(chunks("A", 40))}
    events = await watcher.finished()
    _, after = split_at_restart(events)
    assert [e.type for e in after] == ["chunk"] * 40 + ["completed"]
    assert after[-1].data == result
    record = await queue.get(job.id)
    assert record is not None
    assert (record.status, record.attempt, record.result) == (JobStatus.COMPLETED, 2, result)
    assert "Traceback" not in a.stderr.read_text()
    await check_invariants(
        queue, [job.id], views={job.id: [events]}, writer_of=tag, result_writer=result_writer
    )


async def test_worker_process_killing_itself_dead_letters_after_max_attempts(
    queue: Queue, spawn: Spawn, watchers: list[Watcher]
) -> None:
    job = await queue.enqueue({"chunks": 10}, max_attempts=2)
    watchers.append(watcher := Watcher(queue, job.id))

    for attempt, name in ((1, "P1"), (2, "P2")):
        proc = await spawn(name, die_after=2)
        await proc.expect("start", id=job.id, attempt=attempt)
        assert await proc.exit_code() == -signal.SIGKILL
        assert proc.saw("dying", id=job.id, attempt=attempt)

    last = await spawn("P3", die_after=2)  # would die too, if the job ever reached it
    events = await watcher.finished()

    before, after = split_at_restart(events)
    assert [e.data for e in before] == chunks("P1", 2)
    assert [e.type for e in after] == ["chunk", "chunk", "failed"]
    assert [e.data for e in after[:2]] == chunks("P2", 2)
    assert "lease expired" in after[-1].data

    record = await queue.get(job.id)
    assert record is not None
    dead = (JobStatus.FAILED, 2, "lease_expired")
    assert (record.status, record.attempt, record.dead_reason) == dead
    assert await queue.dead() == [job.id]
    stats = await queue.stats()
    assert (stats.waiting, stats.scheduled, stats.active, stats.dead) == (0, 0, 0, 1)
    with pytest.raises(JobFailedError):
        await queue.wait(job.id, timeout=5)

    last.signal(signal.SIGTERM)
    assert await last.exit_code() == 0
    assert not last.saw("start"), "a dead-lettered job must not run a third time"
    await check_invariants(
        queue, [job.id], views={job.id: [events]}, writer_of=tag, result_writer=result_writer
    )


async def test_worker_process_sigterm_lets_running_job_finish_then_exits_zero(
    queue: Queue, spawn: Spawn, watchers: list[Watcher]
) -> None:
    a = await spawn("A", delay=0.1, concurrency=2)
    job = await queue.enqueue({"chunks": 15})
    watchers.append(watcher := Watcher(queue, job.id))
    await a.expect("emit", id=job.id, n=2)

    a.signal(signal.SIGTERM)
    await a.expect("stopping")
    assert not a.saw("returned"), "SIGTERM must land mid-job"
    later = await queue.enqueue({"chunks": 1})  # a stopping worker takes no new job

    assert await a.exit_code() == 0
    evs = [m["ev"] for m in a.markers]
    assert evs.index("stopping") < evs.index("returned") < evs.index("exit")
    assert not a.saw("start", id=later.id)

    result = {"worker": "A", "attempt": 1, "text": "".join(chunks("A", 15))}
    events = await watcher.finished()
    assert [e.type for e in events] == ["chunk"] * 15 + ["completed"]
    assert events[-1].data == result
    record = await queue.get(job.id)
    assert record is not None
    assert (record.status, record.attempt, record.result) == (JobStatus.COMPLETED, 1, result)
    waiting = await queue.get(later.id)
    assert waiting is not None and waiting.status is JobStatus.WAITING
    assert (await queue.stats()).active == 0
    await check_invariants(
        queue, [job.id], views={job.id: [events]}, writer_of=tag, result_writer=result_writer
    )
    await check_invariants(queue, [later.id], settled=False)

"""The emit batcher: few round trips for many jobs, the same text, a bounded delay.

These tests drive the batcher with a recording stand-in for ``genq.emit_many`` (no Redis is
involved at this level); tests/workers/test_generation.py runs it against real genq jobs.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from typing import Any

import pytest

from genq import JobLeaseLostError
from workers.coalesce import DirectEmitter, EmitBatcher, EmitStats


class Job:
    def __init__(self, name: str) -> None:
        self.id = name
        self.emitted: list[str] = []

    async def emit(self, text: str) -> None:
        self.emitted.append(text)


class RoundTrips:
    """Records each batch; an optional delay stands for the Redis round trip."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.batches: list[tuple[float, list[tuple[str, str]]]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lose: set[str] = set()  # job ids whose lease is lost
        self.fail_next = False

    async def __call__(self, items: Sequence[tuple[Any, str]]) -> list[BaseException | None]:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.fail_next:
                self.fail_next = False
                raise ConnectionError("redis went away")
            self.batches.append((time.perf_counter(), [(job.id, text) for job, text in items]))
            results: list[BaseException | None] = []
            for job, text in items:
                if job.id in self.lose:
                    results.append(JobLeaseLostError(job.id))
                else:
                    job.emitted.append(text)
                    results.append(None)
            return results
        finally:
            self.in_flight -= 1


@pytest.fixture
async def trips() -> RoundTrips:
    return RoundTrips()


async def test_batcher_keeps_every_jobs_text_in_order() -> None:
    trips = RoundTrips(delay=0.002)
    batcher = EmitBatcher(trips, window=0.005, max_chars=64)
    rng = random.Random(7)
    jobs = [Job(f"j{i}") for i in range(8)]

    async def stream(job: Job) -> None:
        emitter = batcher.open(job)
        for n in range(300):
            await emitter.write(f"<{job.id}:{n}>")
            if rng.random() < 0.05:
                await asyncio.sleep(rng.random() * 0.01)
        await emitter.aclose()

    await asyncio.gather(*(stream(job) for job in jobs))
    for job in jobs:
        assert "".join(job.emitted) == "".join(f"<{job.id}:{n}>" for n in range(300))
    assert trips.max_in_flight == 1  # one batch at a time: nothing can overtake
    assert len(trips.batches) < 300  # far fewer round trips than deltas of one job
    await batcher.aclose()


async def test_batcher_sends_many_jobs_deltas_in_one_round_trip(trips: RoundTrips) -> None:
    batcher = EmitBatcher(trips, window=0.02)
    jobs = [Job(f"j{i}") for i in range(10)]
    emitters = [batcher.open(job) for job in jobs]
    for emitter in emitters:
        await emitter.write("t0 ")  # each first delta goes at once, alone (nothing else waits)
    assert len(trips.batches) == 10
    for n in range(1, 5):
        for emitter in emitters:
            await emitter.write(f"t{n} ")
    await asyncio.sleep(0.05)
    assert len(trips.batches) == 11
    _, items = trips.batches[-1]
    assert sorted(items) == sorted((job.id, "t1 t2 t3 t4 ") for job in jobs)  # one chunk each
    assert (batcher.stats.writes, batcher.stats.chunks, batcher.stats.round_trips) == (50, 20, 11)
    await batcher.aclose()


async def test_batcher_sends_a_lone_delta_within_the_window(trips: RoundTrips) -> None:
    batcher = EmitBatcher(trips, window=0.01)
    emitter = batcher.open(Job("a"))
    await emitter.write("hello")  # the first delta waits for no window
    while not trips.batches:
        await asyncio.sleep(0.001)
    written = time.perf_counter()
    await emitter.write(" world")
    while len(trips.batches) < 2:
        await asyncio.sleep(0.001)
    assert 0.009 <= trips.batches[1][0] - written < 0.01 + 0.05  # the window, plus loop slack
    await batcher.aclose()


async def test_batcher_first_delta_is_in_the_stream_when_write_returns() -> None:
    trips = RoundTrips(delay=0.01)
    batcher = EmitBatcher(trips, window=10.0)
    job = Job("a")
    emitter = batcher.open(job)
    await emitter.write("first")
    assert job.emitted == ["first"]  # sent by the writer itself: no flusher had to run
    await emitter.write(" second")
    assert job.emitted == ["first"]  # the rest waits for the window
    await emitter.aclose()
    assert job.emitted == ["first", " second"]
    assert (batcher.stats.writes, batcher.stats.round_trips) == (2, 2)
    await batcher.aclose()


async def test_batcher_first_delta_waits_for_the_batch_in_flight() -> None:
    trips = RoundTrips(delay=0.05)
    batcher = EmitBatcher(trips, window=10.0)
    a, b = Job("a"), Job("b")
    first, second = batcher.open(a), batcher.open(b)
    sending = asyncio.create_task(first.write("a0"))  # in flight for 50 ms
    await asyncio.sleep(0.01)
    await second.write("b0")  # a batch is in flight: the flusher sends it once that one landed
    assert b.emitted == []
    await sending
    await second.aclose()
    assert trips.max_in_flight == 1
    assert [items for _, items in trips.batches] == [[("a", "a0")], [("b", "b0")]]
    await batcher.aclose()


async def test_batcher_sends_each_emitters_first_delta_at_once(trips: RoundTrips) -> None:
    batcher = EmitBatcher(trips, window=10.0)
    first, second = batcher.open(Job("a")), batcher.open(Job("b"))
    await first.write("a0")
    await asyncio.sleep(0.05)
    await first.write("a1")  # not the first: waits for the (long) window
    await second.write("b0")  # the first of its emitter
    await asyncio.sleep(0.05)
    assert [items for _, items in trips.batches] == [
        [("a", "a0")],
        [("a", "a1"), ("b", "b0")],  # what was buffered rides along
    ]
    await batcher.aclose()


async def test_batcher_sends_a_full_buffer_without_waiting(trips: RoundTrips) -> None:
    batcher = EmitBatcher(trips, window=10.0, max_chars=10)
    emitter = batcher.open(Job("a"))
    await emitter.write("0123456789abc")
    await asyncio.sleep(0.02)
    assert [items for _, items in trips.batches] == [[("a", "0123456789abc")]]
    await batcher.aclose()


async def test_aclose_returns_once_the_text_is_sent() -> None:
    trips = RoundTrips(delay=0.05)
    batcher = EmitBatcher(trips, window=10.0)
    job = Job("a")
    emitter = batcher.open(job)
    await emitter.write("first ")  # at once
    await emitter.write("second ")
    await emitter.write("third")
    started = time.perf_counter()
    await emitter.aclose()  # does not wait for the 10 s window
    assert job.emitted == ["first ", "second third"]
    assert time.perf_counter() - started < 1.0
    await batcher.aclose()


async def test_lost_lease_fails_only_that_job(trips: RoundTrips) -> None:
    batcher = EmitBatcher(trips, window=0.001)
    lost, kept = Job("lost"), Job("kept")
    lost_emitter, kept_emitter = batcher.open(lost), batcher.open(kept)
    trips.lose.add("lost")
    await lost_emitter.write("a")
    await kept_emitter.write("b")
    await asyncio.sleep(0.02)
    with pytest.raises(JobLeaseLostError):
        await lost_emitter.write("c")
    await kept_emitter.write("d")
    await kept_emitter.aclose()
    assert kept.emitted == ["b", "d"]
    with pytest.raises(JobLeaseLostError):
        await lost_emitter.aclose()
    await batcher.aclose()


async def test_failed_round_trip_reaches_every_job_in_it(trips: RoundTrips) -> None:
    batcher = EmitBatcher(trips, window=0.001)
    a, b = batcher.open(Job("a")), batcher.open(Job("b"))
    await a.write("a0")  # each first delta goes alone: the round trip below carries both jobs
    await b.write("b0")
    trips.fail_next = True
    await a.write("x")
    await b.write("y")
    await asyncio.sleep(0.02)
    for emitter in (a, b):
        with pytest.raises(ConnectionError):
            await emitter.write("more")
    later = Job("later")  # the batcher itself carries on
    emitter = batcher.open(later)
    await emitter.write("fine")
    await emitter.aclose()
    assert later.emitted == ["fine"]
    await batcher.aclose()


async def test_write_waits_when_redis_falls_behind() -> None:
    trips = RoundTrips(delay=0.05)
    batcher = EmitBatcher(trips, window=0.001, max_chars=4)
    job = Job("a")
    emitter = batcher.open(job)
    started = time.perf_counter()
    for _ in range(40):
        await emitter.write("xxxx")
    assert time.perf_counter() - started >= 0.04  # writes waited for the slow round trips
    await emitter.aclose()
    assert "".join(job.emitted) == "xxxx" * 40
    await batcher.aclose()


async def test_abort_drops_the_jobs_unsent_text(trips: RoundTrips) -> None:
    batcher = EmitBatcher(trips, window=0.03)
    gone, stays = Job("gone"), Job("stays")
    gone_emitter, stays_emitter = batcher.open(gone), batcher.open(stays)
    await gone_emitter.write("first")  # at once
    await stays_emitter.write("first")
    await gone_emitter.write("never")
    await stays_emitter.write("sent")
    gone_emitter.abort()
    await stays_emitter.aclose()
    assert gone.emitted == ["first"]
    assert stays.emitted == ["first", "sent"]
    await batcher.aclose()


async def test_direct_emitter_emits_each_delta() -> None:
    stats = EmitStats()
    job = Job("a")
    emitter = DirectEmitter(job, stats)
    for piece in ("a", "", "b", "c"):
        await emitter.write(piece)
    await emitter.aclose()
    assert job.emitted == ["a", "b", "c"]
    assert (stats.writes, stats.chunks, stats.round_trips) == (3, 3, 3)


def test_batcher_rejects_a_zero_window(trips: RoundTrips) -> None:
    with pytest.raises(ValueError):
        EmitBatcher(trips, window=0)

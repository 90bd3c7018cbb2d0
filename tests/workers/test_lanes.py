"""A provider's batch lane runs below its interactive work: batch lines never hold more than
GENQ_BATCH_SHARE of the provider's concurrency, and interactive jobs start at once while a
batch fills its share; a 429 pauses the lane first and longer."""

from __future__ import annotations

import asyncio
from typing import Any

from genq import Queue
from genq_contract.lanes import batch_lane, batch_slots
from providers.errors import RateLimitedError
from providers.limits import LANE_COOLDOWN_FACTOR, note_rate_limit
from workers.lanes import Lanes

from .conftest import most_at_once


def test_lanes_limits_share_one_concurrency() -> None:
    lanes = Lanes(concurrency=4, batch_slots=batch_slots(4, 0.5))
    assert lanes.limits() == (4, 2)  # idle: interactive may take all, batch its share
    lanes.running["batch"] = 2
    assert lanes.limits() == (2, 2)  # a full share leaves the rest to interactive work
    lanes.running["interactive"] = 2
    assert lanes.limits() == (2, 2)
    lanes.running["interactive"] = 3
    assert lanes.limits() == (2, 1)  # busy interactive work squeezes the batch out
    lanes.running = {"interactive": 4, "batch": 0}
    assert lanes.limits() == (4, 0)


def test_batch_slots_are_a_share_of_at_least_one() -> None:
    assert batch_slots(4, 0.5) == 2
    assert batch_slots(1, 0.5) == 1
    assert batch_slots(10, 1.0) == 10
    assert batch_slots(3, 0.1) == 1


async def test_batch_lane_holds_its_share_and_interactive_work_starts_at_once(
    start_workers: Any,
) -> None:
    workers = await start_workers(provider_concurrency={"demo": 4}, batch_share=0.5)
    queue, lane = workers.queues["demo"], workers.queues[batch_lane("demo")]
    slow = {"demo_tokens": 10, "demo_delay_ms": 60}
    lines = [
        await lane.enqueue({"model": "demo/fast", "prompt": f"line {i}", "params": slow})
        for i in range(10)
    ]
    batch_done = asyncio.gather(*(lane.wait(j.id, timeout=30) for j in lines))
    while (await lane.stats()).active < 2:
        await asyncio.sleep(0.01)
    chats = [
        await queue.enqueue(
            {"model": "demo/fast", "prompt": f"chat {i}", "params": {"demo_tokens": 3}}
        )
        for i in range(2)
    ]
    for chat in chats:
        await queue.wait(chat.id, timeout=10)
    for chat in chats:
        job = await queue.get(chat.id)
        assert job is not None and job.started_at is not None
        # the two free slots: no wait for a batch line to end (each takes ~0.6 s)
        assert job.started_at - job.created_at < 0.3
    await batch_done
    assert await most_at_once(lane, [line.id for line in lines]) == 2


async def test_a_429_pauses_the_batch_lane_longer(redis: Any, prefix: str) -> None:
    queue = Queue(redis, prefix=f"{prefix}-gen:x")
    lane = Queue(redis, prefix=batch_lane(f"{prefix}-gen:x"))
    error = RateLimitedError("slow down", retry_after=10.0, provider_wide=True)
    assert await note_rate_limit(queue, error, max_cooldown=60, lane=lane) == 10.0
    interactive = await queue.cooldown_remaining()
    batch = await lane.cooldown_remaining()
    assert 9 < interactive <= 10
    assert batch > interactive * (LANE_COOLDOWN_FACTOR - 0.5)
    # a batch line's 429 pauses the lane alone
    other = Queue(redis, prefix=f"{prefix}-gen:y")
    other_lane = Queue(redis, prefix=batch_lane(f"{prefix}-gen:y"))
    await note_rate_limit(other_lane, error, max_cooldown=60)
    assert await other.cooldown_remaining() == 0
    assert await other_lane.cooldown_remaining() > 9

"""A job's handler starts in the event loop's turn right after its activation.

Every task hop between the pick's reply and the handler is on each job's first-token path, so
the worker makes the handler's task itself when it activates the job (genq/_worker.py,
``_spawn``), rather than from a task of its own, which would start it a turn later.
"""

from __future__ import annotations

import asyncio
from typing import Any

from genq import ActiveJob, Queue


async def test_worker_handler_starts_in_the_loop_turn_after_its_activation(queue: Queue) -> None:
    started = asyncio.Event()
    seen: list[bool] = []

    async def handler(job: ActiveJob) -> str:
        started.set()
        return "ok"

    worker = queue.worker(handler)
    spawn = worker._spawn

    def spawn_and_look(fields: dict[str, str], token: str) -> None:
        spawn(fields, token)
        # Runs once every callback ready now has run: where a task that awaited
        # asyncio.sleep(0) right after the activation would look.
        asyncio.get_running_loop().call_soon(lambda: seen.append(started.is_set()))

    worker._spawn = spawn_and_look  # type: ignore[method-assign]
    async with worker:
        enqueued = await queue.enqueue("p")
        assert await queue.wait(enqueued.id, timeout=10) == "ok"
    assert seen == [True]


async def test_worker_handler_start_keeps_cancel_and_settle(queue: Queue) -> None:
    """A cancel that reaches the handler before its first step still settles the job cancelled."""
    ran: list[Any] = []

    async def handler(job: ActiveJob) -> str:
        ran.append(job.id)
        return "ok"

    worker = queue.worker(handler)
    spawn = worker._spawn

    def spawn_and_cancel(fields: dict[str, str], token: str) -> None:
        spawn(fields, token)
        worker._on_cancel(worker._slots[token])  # as a cancel seen by an emit or heartbeat

    worker._spawn = spawn_and_cancel  # type: ignore[method-assign]
    async with worker:
        enqueued = await queue.enqueue("p")
        for _ in range(500):
            record = await queue.get(enqueued.id)
            if record is not None and record.status.value == "cancelled":
                break
            await asyncio.sleep(0.01)
    assert record is not None and record.status.value == "cancelled"
    assert ran == []  # cancelled before its first step: the handler never ran

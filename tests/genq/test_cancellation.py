"""Stopping a task whose cancel redis-py swallowed (genq._cancellation)."""

from __future__ import annotations

import asyncio

from genq import cancel_and_wait


async def swallows_one_cancel(swallowed: list[int]) -> None:
    """A loop whose first cancel is lost mid-command, as redis-py 8.1 sometimes loses one."""
    while True:
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            if swallowed:
                raise
            swallowed.append(1)
            asyncio.current_task().uncancel()  # type: ignore[union-attr]


async def test_cancel_and_wait_ends_a_task_that_swallowed_a_cancel() -> None:
    swallowed: list[int] = []
    task = asyncio.create_task(swallows_one_cancel(swallowed))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(cancel_and_wait(task), 3)
    assert task.cancelled() and swallowed == [1]


async def test_cancel_and_wait_a_single_cancel_would_hang() -> None:
    """The defect the helper exists for: one cancel() leaves such a task running."""
    task = asyncio.create_task(swallows_one_cancel([]))
    await asyncio.sleep(0.05)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=0.3)
    assert not done
    await cancel_and_wait(task)
    assert task.cancelled()

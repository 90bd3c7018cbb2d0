"""The quiet gate: stream endings wait while the event loop is busy, never longer than
``MAX_WAIT``, and go through in arrival order."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from gateway.streaming import _quiet
from gateway.streaming._quiet import QuietGate


@contextlib.asynccontextmanager
async def busy_loop(step: float = 0.02) -> AsyncIterator[None]:
    """Keeps every iteration of the event loop busy for ``step`` seconds (a blocking step, as
    a burst of deliveries would), until the block exits."""
    running = True

    async def hog() -> None:
        while running:
            time.sleep(step)  # noqa: ASYNC251 - blocking on purpose: a loop with no time to spare
            await asyncio.sleep(0)

    task = asyncio.create_task(hog())
    try:
        yield
    finally:
        running = False
        await task


async def test_quiet_gate_lets_endings_through_in_arrival_order_on_an_idle_loop() -> None:
    gate = QuietGate.of_this_loop()
    order: list[int] = []
    turns = [gate.wait() for _ in range(5)]
    for i, turn in enumerate(turns):
        turn.add_done_callback(lambda _, i=i: order.append(i))
    await asyncio.wait_for(asyncio.gather(*turns), 2)
    assert order == [0, 1, 2, 3, 4]
    assert gate.waiting == 0


async def test_quiet_gate_holds_endings_while_the_loop_is_busy() -> None:
    gate = QuietGate.of_this_loop()
    async with busy_loop():
        turns = [gate.wait() for _ in range(3)]
        await asyncio.sleep(0.3)
        assert not any(turn.done() for turn in turns), "let through while the loop was busy"
    await asyncio.wait_for(asyncio.gather(*turns), 2)


async def test_quiet_gate_lets_endings_through_after_max_wait_however_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_quiet, "MAX_WAIT", 0.1)
    gate = QuietGate.of_this_loop()
    async with busy_loop():
        turns = [gate.wait() for _ in range(3)]
        started = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*turns), 2)
        waited = time.monotonic() - started
    assert 0.1 <= waited < 1.0


async def test_quiet_gate_skips_an_ending_given_up() -> None:
    gate = QuietGate.of_this_loop()
    turns = [gate.wait() for _ in range(3)]
    turns[1].cancel()
    await asyncio.wait_for(asyncio.gather(turns[0], turns[2]), 2)
    assert turns[1].cancelled()
    assert gate.waiting == 0

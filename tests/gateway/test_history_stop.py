"""The gateway's shutdown ends its history sampler even when a cancel is swallowed mid-sample
(redis-py 8.1 can lose one: shutdown then waited for the sampler forever)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.history import History


async def test_history_stop_ends_the_sampler_when_a_cancel_is_swallowed(
    redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost: list[int] = []
    in_command = asyncio.Event()

    async def sample_losing_one_cancel(self: History) -> None:
        in_command.set()
        try:
            await asyncio.Event().wait()  # a Redis command in flight until the cancel lands
        except asyncio.CancelledError:
            if lost:
                raise
            lost.append(1)  # what redis-py does: the command completes, the cancel is gone
            asyncio.current_task().uncancel()  # type: ignore[union-attr]

    monkeypatch.setattr(History, "sample", sample_losing_one_cancel)
    history = History(redis, [], interval=0.001)
    history.start()
    # Stop once the sampler is inside a command, so the first cancel is the one swallowed
    # (a cancel that lands between samples would end it at once and prove nothing).
    await asyncio.wait_for(in_command.wait(), timeout=5)
    stopping = asyncio.create_task(history.stop())
    done, _ = await asyncio.wait({stopping}, timeout=3)
    assert done, "the sampler outlived its stop"
    assert lost == [1] and history._task is not None and history._task.done()

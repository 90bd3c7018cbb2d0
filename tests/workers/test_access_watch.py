"""The access watch around a generation, alone: the generation runs in the caller's task, a
refusal stops it even when a cancel is swallowed, a cancel from elsewhere passes through, and a
generation shorter than the re-check makes no watcher task. The access is read from the real
Redis (``genq_services.access``); the generations are plain coroutines."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis

from genq import TerminalJobError
from genq_services.access import Access, CachedAccess
from workers.access_watch import AccessWatch

pytestmark = pytest.mark.timeout(30)

EVERY = 0.05


def watch_for(redis: aioredis.Redis, prefix: str) -> tuple[Access, AccessWatch]:
    access = Access(redis, f"{prefix}-watch")
    return access, AccessWatch(CachedAccess(access, ttl=0), "cafef00d", "acme", EVERY)


async def test_a_generation_runs_in_the_callers_task_and_a_short_one_makes_no_watcher(
    redis: aioredis.Redis, prefix: str
) -> None:
    _, watch = watch_for(redis, prefix)
    caller = asyncio.current_task()
    seen: list[Any] = []

    async def generation() -> dict[str, Any]:
        seen.append(asyncio.current_task())
        seen.append(sorted(t.get_name() for t in asyncio.all_tasks()))
        return {"text": "done"}

    assert await watch.run(generation()) == {"text": "done"}
    assert seen[0] is caller
    assert "genq-access-watch" not in seen[1]


async def test_a_refusal_stops_a_generation_that_swallowed_the_first_cancel(
    redis: aioredis.Redis, prefix: str
) -> None:
    access, watch = watch_for(redis, prefix)
    swallowed = 0
    watched: list[str] = []

    async def generation() -> dict[str, Any]:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(0.01)
                watched.extend(t.get_name() for t in asyncio.all_tasks())
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed == 1:
                    continue  # as redis-py's wait_for can: the generation carries on
                raise

    async def revoke_later() -> None:
        await asyncio.sleep(3 * EVERY)
        await access.revoke_key_ids(["cafef00d"])

    revoking = asyncio.create_task(revoke_later())
    with pytest.raises(TerminalJobError, match="cafef00d was revoked; the generation was stopped"):
        await watch.run(generation())
    await revoking
    assert swallowed == 2
    assert "genq-access-watch" in watched
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # its cancels were taken back


async def test_a_cancel_from_elsewhere_passes_through_as_a_cancel(
    redis: aioredis.Redis, prefix: str
) -> None:
    _, watch = watch_for(redis, prefix)
    started = asyncio.Event()

    async def generation() -> dict[str, Any]:
        started.set()
        await asyncio.sleep(30)
        return {}

    task = asyncio.create_task(watch.run(generation()))
    await started.wait()
    await asyncio.sleep(3 * EVERY)  # the watcher has checked a few times, all allowed
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_a_generation_that_ends_despite_the_stop_keeps_its_result(
    redis: aioredis.Redis, prefix: str
) -> None:
    """Refused, but the generation ended with a result all the same (the stop reached it as it
    finished): the result stands, as the provider's answer was complete."""
    access, watch = watch_for(redis, prefix)
    await access.disable_tenant("acme")

    async def generation() -> dict[str, Any]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return {"text": "kept"}
        return {}

    assert await watch.run(generation()) == {"text": "kept"}
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0

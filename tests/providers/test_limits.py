"""The 429 bookkeeping: a shared cooldown on the provider's queue, and a counter."""

from __future__ import annotations

from typing import Any

import pytest

from genq import Queue, RetryJobError
from genq_contract.keys import provider_429_counter
from providers.errors import RateLimitedError
from providers.limits import DEFAULT_MAX_COOLDOWN, note_rate_limit


@pytest.fixture
def queue(redis: Any, prefix: str) -> Queue:
    return Queue(redis, prefix=f"{prefix}-gen:openai")


async def counted(queue: Queue) -> int:
    return int(await queue.redis.get(provider_429_counter(queue)) or 0)


async def test_provider_wide_429_pauses_the_queue_for_every_worker(queue: Queue) -> None:
    remaining = await note_rate_limit(queue, RateLimitedError("429", 3.0, provider_wide=True))
    assert remaining == pytest.approx(3.0, abs=0.1)
    assert 2.5 < await queue.cooldown_remaining() <= 3.0
    assert await counted(queue) == 1


async def test_shorter_429_keeps_the_longer_cooldown(queue: Queue) -> None:
    await note_rate_limit(queue, RateLimitedError("429", 5.0, provider_wide=True))
    await note_rate_limit(queue, RateLimitedError("429", 1.0, provider_wide=True))
    assert await queue.cooldown_remaining() > 4.0
    assert await counted(queue) == 2


async def test_caller_only_or_waitless_429_does_not_pause(queue: Queue) -> None:
    assert await note_rate_limit(queue, RateLimitedError("429", 3.0, provider_wide=False)) is None
    assert await note_rate_limit(queue, RateLimitedError("429", None, provider_wide=True)) is None
    assert await queue.cooldown_remaining() == 0
    assert await counted(queue) == 2  # still counted


async def test_other_errors_are_ignored(queue: Queue) -> None:
    assert await note_rate_limit(queue, RetryJobError("500", retry_after=3)) is None
    assert await queue.cooldown_remaining() == 0
    assert await counted(queue) == 0


async def test_one_429_pauses_the_queue_no_longer_than_the_ceiling(queue: Queue) -> None:
    huge = RateLimitedError("429", 86_400.0, provider_wide=True)
    assert await note_rate_limit(queue, huge, max_cooldown=2.0) == pytest.approx(2.0, abs=0.1)
    assert await queue.cooldown_remaining() <= 2.0
    assert await note_rate_limit(queue, huge) == pytest.approx(DEFAULT_MAX_COOLDOWN, abs=0.1)
    await queue.clear_cooldown()
    assert await note_rate_limit(queue, huge, max_cooldown=0) is None
    assert await queue.cooldown_remaining() == 0
    assert huge.retry_after == 86_400.0  # the job itself still waits the whole Retry-After

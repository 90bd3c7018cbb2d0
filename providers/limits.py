"""Per-provider limits: how many generations run at once, and the cooldown after a 429.

Concurrency: each provider has its own queue and the worker process runs one ``genq.Worker``
per queue with ``concurrency = ProviderConfig.concurrency``. That is the limit, and it is
enforced where it matters: a worker at its limit reserves nothing more, so the jobs it cannot
run stay in Redis for another process instead of waiting behind a semaphore under a lease.

Cooldown: a provider-wide 429 with a Retry-After pauses that provider's queue through Redis
(``Queue.cooldown``, on the server clock), so no worker anywhere reserves its jobs until the
wait is over, while other providers' queues keep flowing. A longer cooldown already in force
is kept. No single 429 pauses the queue for more than ``max_cooldown`` (``GENQ_MAX_COOLDOWN``,
:data:`DEFAULT_MAX_COOLDOWN` by default), whatever Retry-After it carried: the job that got the
429 still waits the whole Retry-After, but one answer (a garbled header, a provider bug, a
request that provoked it) cannot stop every tenant's jobs for hours. An admin clears a cooldown
early with ``DELETE /v1/queues/{name}/cooldown`` (``genq cooldown clear``). Every 429 is also
counted under the queue (``genq_contract.keys.PROVIDER_429S``) for metrics.
"""

from __future__ import annotations

import logging

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from genq import Queue
from genq_contract.keys import PROVIDER_429S
from providers.errors import RateLimitedError
from providers.telemetry import note_cooldown

log = logging.getLogger("providers.limits")


DEFAULT_MAX_COOLDOWN = 300.0
"""Seconds: the longest queue-wide pause one 429 can cause (``GENQ_MAX_COOLDOWN``)."""


LANE_COOLDOWN_FACTOR = 2.0
"""A provider's batch lane pauses this many times as long as its interactive queue after a
429 there, so batch lines resume last (``GENQ_BATCH_SHARE``, ``genq_contract.lanes``)."""


async def note_rate_limit(
    queue: Queue,
    error: BaseException,
    max_cooldown: float = DEFAULT_MAX_COOLDOWN,
    lane: Queue | None = None,
) -> float | None:
    """After a 429: counts it and, if provider-wide with a Retry-After, pauses ``queue`` for
    that long, at most ``max_cooldown`` seconds (0 = never pause), and the provider's batch
    ``lane`` (when given) :data:`LANE_COOLDOWN_FACTOR` times as long. A 429 of a batch line
    (``queue`` is the lane) pauses the lane alone: interactive work keeps its turn.

    Returns the cooldown now in force (None if none was set). Never raises: a Redis blip here
    must not replace the provider error the job settles with, and the job's own retry is
    scheduled no sooner than the Retry-After either way.
    """
    if not isinstance(error, RateLimitedError):
        return None
    note_cooldown(error)
    try:
        async for attempt in _redis_retrying():
            with attempt:
                await queue.count(PROVIDER_429S)
        pause = min(error.retry_after or 0.0, max_cooldown)
        if not error.provider_wide or pause <= 0:
            return None
        async for attempt in _redis_retrying():
            with attempt:
                remaining = await queue.cooldown(pause)
                if lane is not None:
                    await lane.cooldown(pause * LANE_COOLDOWN_FACTOR)
    except Exception as exc:
        log.warning("could not record the 429 on %s (%s); only this job waits", queue, exc)
        return None
    log.info("%s cooling down for %.2fs after a 429", queue, remaining)
    return float(remaining)


def _redis_retrying() -> AsyncRetrying:
    """A few quick, jittered retries for a Redis blip. A repeated cooldown is harmless; a
    repeated INCR at worst over-counts a metric."""
    return AsyncRetrying(
        retry=retry_if_exception_type((RedisConnectionError, RedisTimeoutError, OSError)),
        stop=stop_after_attempt(4) | stop_after_delay(3.0),
        wait=wait_random_exponential(multiplier=0.05, max=0.5),
        reraise=True,
    )

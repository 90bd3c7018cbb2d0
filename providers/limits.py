"""Per-provider limits: how many generations run at once, and the cooldown after a 429.

Concurrency: each provider has its own queue and the worker process runs one ``genq.Worker``
per queue with ``concurrency = ProviderConfig.concurrency``. That is the limit, and it is
enforced where it matters: a worker at its limit reserves nothing more, so the jobs it cannot
run stay in Redis for another process instead of waiting behind a semaphore under a lease.

Cooldown: a provider-wide 429 with a Retry-After pauses that provider's queue through Redis
(``Queue.cooldown``, on the server clock), so no worker anywhere reserves its jobs until the
wait is over, while other providers' queues keep flowing. A longer cooldown already in force
is kept. Every 429 is also counted under the queue (``RATE_LIMITED_COUNTER``) for metrics.
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
from providers.errors import RateLimitedError

log = logging.getLogger("providers.limits")


RATE_LIMITED_COUNTER = "metrics:provider_429_total"
"""``queue.keys.extra(...)`` name of the count of 429s; the gateway's ``/metrics`` reads it."""


async def note_rate_limit(queue: Queue, error: BaseException) -> float | None:
    """After a 429: counts it and, if provider-wide with a Retry-After, pauses ``queue``.

    Returns the cooldown now in force (None if none was set). Never raises: a Redis blip here
    must not replace the provider error the job settles with, and the job's own retry is
    scheduled no sooner than the Retry-After either way.
    """
    if not isinstance(error, RateLimitedError):
        return None
    try:
        async for attempt in _redis_retrying():
            with attempt:
                await queue.redis.incr(queue.keys.extra(RATE_LIMITED_COUNTER))
        if not error.provider_wide or not error.retry_after:
            return None
        async for attempt in _redis_retrying():
            with attempt:
                remaining = await queue.cooldown(error.retry_after)
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

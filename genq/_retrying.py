"""Retries for infrastructure hiccups (a dropped connection, a failover), never for jobs.

Only operations that are safe to run twice go through here: every mutating script carries a
lease token, nonce or sequence number for that reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    ConnectionError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_random_exponential,
)

TRANSIENT = (
    ConnectionError,
    TimeoutError,
    BusyLoadingError,
    TryAgainError,
    OSError,
    # Redis Cluster: CLUSTERDOWN while a master is failing or failing over, and a slot with no
    # known owner while the client's slot map is being rebuilt. Both heal by themselves.
    ClusterDownError,
    SlotNotCoveredError,
)


def infra_retry(within: float) -> AsyncRetrying:
    """Retries transient Redis errors with jittered backoff for at most ``within`` seconds."""
    return AsyncRetrying(
        retry=retry_if_exception_type(TRANSIENT),
        stop=stop_after_delay(within),
        wait=wait_random_exponential(multiplier=0.05, max=2.0),
        reraise=True,
    )


T = TypeVar("T")


async def with_retry(call: Callable[[], Awaitable[T]], within: float) -> T:
    """Runs ``call``; after a transient error, retries it through :func:`infra_retry`.

    The first try goes straight through: tenacity's bookkeeping costs more than an EVALSHA on
    loopback, and it is only needed once something went wrong.
    """
    try:
        return await call()
    except TRANSIENT:
        pass
    async for attempt in infra_retry(within):
        with attempt:
            return await call()
    raise AssertionError("unreachable: infra_retry reraises")

"""Retries for infrastructure hiccups (a dropped connection, a failover), never for jobs.

Only operations that are safe to run twice go through here: every mutating script carries a
lease token, nonce or sequence number for that reason.
"""

from __future__ import annotations

from redis.exceptions import BusyLoadingError, ConnectionError, TimeoutError, TryAgainError
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_random_exponential,
)

TRANSIENT = (ConnectionError, TimeoutError, BusyLoadingError, TryAgainError, OSError)


def infra_retry(within: float) -> AsyncRetrying:
    """Retries transient Redis errors with jittered backoff for at most ``within`` seconds."""
    return AsyncRetrying(
        retry=retry_if_exception_type(TRANSIENT),
        stop=stop_after_delay(within),
        wait=wait_random_exponential(multiplier=0.05, max=2.0),
        reraise=True,
    )

"""The settings every genq process shares, read from ``GENQ_`` environment variables.

The gateway's ``Settings``, the worker's ``WorkerSettings`` and the CLI's Redis commands all
inherit :class:`CommonSettings`, so one variable means one thing everywhere: the gateway
enqueues with the attempts and retention the workers settle with, and ``genq keys`` writes to
the Redis the gateway reads.
"""

from __future__ import annotations

from pydantic import Field

from .routing import RoutingSettings

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


class CommonSettings(RoutingSettings):
    """The routing (:class:`RoutingSettings`), plus where Redis is and how long jobs live."""

    redis_url: str = DEFAULT_REDIS_URL
    """GENQ_REDIS_URL: ``redis://``, ``rediss://``, ``unix://`` or ``redis+cluster://h1:p1,h2:p2``
    (see ``genq.connect``)."""
    result_ttl: float = Field(default=3600.0, gt=0)
    """GENQ_RESULT_TTL: seconds a finished generation (record, output, idempotency key) stays
    readable."""
    dead_ttl: float = Field(default=14 * 86400.0, gt=0)
    """GENQ_DEAD_TTL: seconds a dead-lettered job (record, output, dead-set entry) is kept,
    apart from GENQ_RESULT_TTL. Running and scheduled jobs never expire, whatever both say."""
    max_attempts: int = Field(default=3, ge=1)
    """GENQ_MAX_ATTEMPTS: attempts of a job enqueued without its own count."""

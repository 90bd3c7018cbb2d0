"""The gateway's shared Redis client. Each shared tail's dedicated reader comes from the core
(:func:`genq.reader_links`), given the same URL."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from genq.connection import connect, is_cluster_url

from .settings import Settings

POOL_WAIT_SECONDS = 5.0


def open_shared(settings: Settings) -> Redis | RedisCluster:
    """The client every request shares. On a single node the pool is bounded and blocking: a
    burst of viewers waits for a connection instead of opening more."""
    options: dict[str, Any] = {
        "max_connections": settings.redis_max_connections,
        "client_name": f"genq-gateway:{settings.queue_namespace}",
    }
    if not is_cluster_url(settings.redis_url):
        options["pool_timeout"] = POOL_WAIT_SECONDS
    return connect(settings.redis_url, **options)

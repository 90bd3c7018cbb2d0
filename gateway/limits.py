"""Per-tenant limits: an enqueue rate (token bucket, in Redis) and a cap on jobs in flight.

Both are shared by every gateway process, since they live in Redis. The in-flight set holds the
tenant's unfinished job ids; it is pruned of finished jobs only when it looks full, so the
common path costs one round trip.
"""

from __future__ import annotations

import asyncio
import time
from importlib import resources
from typing import Any

from genq import TERMINAL

from .errors import NotFound, RateLimited
from .queues import Queues
from .settings import Settings

IN_FLIGHT_KEY_TTL = 86_400
RESERVATION_GRACE_MS = 60_000
"""A reserved id without a job record is an enqueue still under way, unless it is this old."""


class Limiter:
    def __init__(self, redis: Any, settings: Settings, queues: Queues) -> None:
        self.redis = redis
        self.settings = settings
        self.queues = queues
        source = (resources.files("gateway") / "lua" / "token_bucket.lua").read_text()
        self._token_bucket = redis.register_script(source)

    async def take_enqueue_token(self, tenant: str) -> None:
        rate, burst, _ = self.settings.limits_for(tenant)
        allowed, wait_ms = await self._token_bucket(
            keys=[self.settings.key(f"rate:{tenant}")], args=[rate, burst]
        )
        if not int(allowed):
            raise RateLimited(
                f"enqueue rate limit reached ({rate:g}/s, bursts of {burst}); retry later",
                retry_after=int(wait_ms) / 1000,
            )

    async def hold_slot(self, tenant: str, job_id: str) -> None:
        """Counts ``job_id`` against the tenant's in-flight cap, or raises RateLimited."""
        _, _, cap = self.settings.limits_for(tenant)
        key = self.settings.key(f"inflight:{tenant}")
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zadd(key, {job_id: int(time.time() * 1000)})
            pipe.zcard(key)
            pipe.expire(key, IN_FLIGHT_KEY_TTL)
            _, count, _ = await pipe.execute()
        if count > cap:
            count = await self._prune(key)
        if count > cap:
            await self.redis.zrem(key, job_id)
            raise RateLimited(
                f"{cap} generations already in flight for this tenant; wait for one to finish",
                retry_after=1,
            )

    async def release(self, tenant: str, job_id: str) -> None:
        await self.redis.zrem(self.settings.key(f"inflight:{tenant}"), job_id)

    async def _prune(self, key: str) -> int:
        members = await self.redis.zrange(key, 0, -1, withscores=True)
        now_ms = time.time() * 1000
        checks = [self._finished(_text(m), score, now_ms) for m, score in members]
        finished = [
            _text(m)
            for (m, _), done in zip(members, await asyncio.gather(*checks), strict=True)
            if done
        ]
        if finished:
            await self.redis.zrem(key, *finished)
        return int(await self.redis.zcard(key))

    async def _finished(self, job_id: str, reserved_ms: float, now_ms: float) -> bool:
        try:
            _, queue = self.queues.locate(job_id)
        except NotFound:
            return True
        job = await queue.get(job_id)
        if job is None:
            return now_ms - reserved_ms > RESERVATION_GRACE_MS
        return job.status in TERMINAL


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value

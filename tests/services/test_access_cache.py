"""CachedAccess: a snapshot of the revoked key ids and disabled tenants at most ``ttl`` old,
read again in the background past half its ``ttl`` so that a check seldom waits for Redis."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as aioredis

from genq_contract.refusals import disabled_reason, revoked_reason
from genq_services.access import Access, CachedAccess, Snapshot

pytestmark = pytest.mark.timeout(30)

TTL = 0.4
KEY_ID = "cafef00d"


class HeldAccess(Access):
    """Redis's snapshot, counted; each read's answer held until ``go`` is set (set by
    default), so a held read answers what Redis held before; failing while ``failing``."""

    def __init__(self, redis: aioredis.Redis, namespace: str) -> None:
        super().__init__(redis, namespace)
        self.reads = 0
        self.go = asyncio.Event()
        self.go.set()
        self.failing = False

    async def snapshot(self) -> Snapshot:
        self.reads += 1
        if self.failing:
            raise ConnectionError("redis is away")
        read = await super().snapshot()
        await self.go.wait()
        return read


async def settled(cache: CachedAccess) -> None:
    """Waits for the background read under way, if any (it raises nothing: it logs)."""
    if cache._refresh is not None:
        await asyncio.wait_for(cache._refresh, 5)


async def age_past(seconds: float, since: float) -> None:
    await asyncio.sleep(max(0.0, since + seconds - time.monotonic()))


async def checked_once(
    redis: aioredis.Redis, prefix: str
) -> tuple[HeldAccess, CachedAccess, float]:
    """A cache of ``TTL`` over a fresh namespace, after its first check (allowed): when that
    snapshot was read."""
    access = HeldAccess(redis, prefix)
    cache = CachedAccess(access, ttl=TTL)
    read_at = time.monotonic()
    assert await cache.refusal(KEY_ID, "acme") is None
    return access, cache, read_at


async def test_past_half_its_ttl_a_check_answers_at_once_and_the_snapshot_is_read_again(
    redis: aioredis.Redis, prefix: str
) -> None:
    access, cache, read_at = await checked_once(redis, prefix)
    assert access.reads == 1
    await access.revoke_key_ids([KEY_ID])
    assert await cache.refusal(KEY_ID, "acme") is None  # young: the snapshot, no read
    await asyncio.sleep(0.01)  # nor one ahead
    assert access.reads == 1
    await age_past(TTL / 2, read_at)
    access.go.clear()  # the read ahead is held: the check must not wait for it
    async with asyncio.timeout(1):
        assert await cache.refusal(KEY_ID, "acme") is None
        assert await cache.refusal(KEY_ID, "acme") is None  # one read ahead, not one each
        await asyncio.sleep(0.01)  # the read ahead begins, and is held
        assert await cache.refusal(KEY_ID, "acme") is None
    assert access.reads == 2
    access.go.set()
    await settled(cache)
    assert time.monotonic() - read_at < TTL  # the first snapshot would still have answered
    assert await cache.refusal(KEY_ID, "acme") == revoked_reason(KEY_ID)
    assert access.reads == 2


async def test_a_snapshot_ttl_old_is_never_used(redis: aioredis.Redis, prefix: str) -> None:
    access, cache, read_at = await checked_once(redis, prefix)
    await access.disable_tenant("acme")
    await age_past(TTL, read_at)  # no check in between: nothing was read ahead
    assert await cache.refusal(KEY_ID, "acme") == disabled_reason("acme")
    assert access.reads == 2


async def test_a_read_under_way_when_the_cache_is_told_to_forget_is_not_kept(
    redis: aioredis.Redis, prefix: str
) -> None:
    access, cache, read_at = await checked_once(redis, prefix)
    await age_past(TTL / 2, read_at)
    access.go.clear()
    assert await cache.refusal(KEY_ID, "acme") is None  # starts the read ahead, held
    await asyncio.sleep(0.01)
    assert access.reads == 2
    await access.revoke_key_ids([KEY_ID])  # as the gateway does, then it forgets
    cache.forget()
    access.go.set()
    # the held read began before the revocation; the check after forget reads again
    assert await cache.refusal(KEY_ID, "acme") == revoked_reason(KEY_ID)
    await settled(cache)
    assert await cache.refusal(KEY_ID, "acme") == revoked_reason(KEY_ID)


async def test_a_failed_read_ahead_keeps_the_snapshot_and_the_expired_check_raises(
    redis: aioredis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    access, cache, read_at = await checked_once(redis, prefix)
    await age_past(TTL / 2, read_at)
    access.failing = True
    with caplog.at_level("DEBUG", logger="genq_services.access"):
        assert await cache.refusal(KEY_ID, "acme") is None
        await settled(cache)
    assert "reading the access snapshot ahead failed" in caplog.text
    assert access.reads == 2
    await age_past(TTL, read_at)
    with pytest.raises(ConnectionError):
        await cache.refusal(KEY_ID, "acme")
    access.failing = False
    assert await cache.refusal(KEY_ID, "acme") is None


async def test_with_no_ttl_every_check_reads(redis: aioredis.Redis, prefix: str) -> None:
    access = HeldAccess(redis, prefix)
    cache = CachedAccess(access, ttl=0)
    assert await cache.refusal(KEY_ID, "acme") is None
    await access.revoke_key_ids([KEY_ID])
    assert await cache.refusal(KEY_ID, "acme") == revoked_reason(KEY_ID)
    assert access.reads == 2
    assert cache._refresh is None


async def test_a_check_whose_own_read_was_forgotten_reads_again(
    redis: aioredis.Redis, prefix: str
) -> None:
    access = HeldAccess(redis, prefix)
    cache = CachedAccess(access, ttl=TTL)
    access.go.clear()
    check = asyncio.create_task(cache.refusal(KEY_ID, "acme"))
    await asyncio.sleep(0.01)  # its read answered from Redis, and is held
    await access.revoke_key_ids([KEY_ID])
    cache.forget()
    access.go.set()
    assert await check == revoked_reason(KEY_ID)
    assert access.reads == 2

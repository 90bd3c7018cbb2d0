"""The per-tenant daily quota: generations accepted per UTC day, shared in Redis."""

from __future__ import annotations

import math
import time
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from gateway.admission.limits import utc_day
from gateway.settings import Settings
from genq_contract.keys import GatewayKeys
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, client_for, make_settings

BODY = {"model": "demo/fast", "prompt": "x", "delay_ms": 60_000}


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    return make_settings(
        redis_url,
        prefix,
        tenant_daily_quota=2,
        tenant_limits={"beta": {"daily_quota": 4}, "ops": {"daily_quota": 0}},
    )


async def _post(client: httpx.AsyncClient, key: str | None = None, **extra: Any) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return await client.post("/v1/generations", json={**BODY, **extra}, headers=headers)


async def test_daily_quota_reached_is_429_until_the_next_utc_midnight(
    alpha: httpx.AsyncClient, redis: aioredis.Redis, prefix: str
) -> None:
    assert [(await _post(alpha)).status_code for _ in range(2)] == [202, 202]
    before = time.time()
    refused = await _post(alpha)
    after = time.time()
    assert refused.status_code == 429
    assert "daily quota" in refused.json()["detail"]
    _, midnight = utc_day(before)
    retry_after = int(refused.headers["Retry-After"])
    assert math.ceil(midnight - after) - 1 <= retry_after <= math.ceil(midnight - before) + 1
    # The count is one key of that UTC day, which expires after the day (plus a margin).
    day, day_ends = utc_day(after)
    key = GatewayKeys(prefix).daily_count("alpha", day)
    assert int(await redis.get(key) or -1) == 2
    assert 0 < await redis.ttl(key) <= day_ends - before + 3600 + 1
    # A refused request is not charged: still refused, the count unchanged.
    assert (await _post(alpha)).status_code == 429
    assert int(await redis.get(key) or -1) == 2


async def test_daily_quota_replays_are_free(alpha: httpx.AsyncClient) -> None:
    first = await _post(alpha, key="k-1")
    assert first.status_code == 202
    replays = [await _post(alpha, key="k-1") for _ in range(5)]
    assert {r.status_code for r in replays} == {200}
    assert {r.json()["id"] for r in replays} == {first.json()["id"]}
    assert (await _post(alpha, key="k-2")).status_code == 202  # the second of two
    assert (await _post(alpha, key="k-3")).status_code == 429
    # Past the quota, a replay is still answered with its job.
    late = await _post(alpha, key="k-1")
    assert (late.status_code, late.json()["id"]) == (200, first.json()["id"])


async def test_daily_quota_per_tenant_override_and_other_tenants_unaffected(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    assert [(await _post(alpha)).status_code for _ in range(3)] == [202, 202, 429]
    # beta's override is 4; alpha's exhausted quota does not touch it.
    assert [(await _post(beta)).status_code for _ in range(5)] == [202] * 4 + [429]
    # ops has "daily_quota": 0: no quota at all.
    assert {(await _post(admin)).status_code for _ in range(5)} == {202}
    # An operator enqueueing on alpha's behalf spends alpha's quota (its limits apply).
    on_behalf = await admin.post("/v1/queues/demo/jobs", json={**BODY, "tenant": "alpha"})
    assert on_behalf.status_code == 429
    assert "Retry-After" in on_behalf.headers


async def test_daily_quota_batch_items_are_charged_one_by_one(beta: httpx.AsyncClient) -> None:
    items = [{**BODY, "idempotency_key": f"b-{i}"} for i in range(5)]
    answer = await beta.post("/v1/generations:batch", json={"items": items})
    assert answer.status_code == 207
    statuses = [item.get("error", {}).get("status", 202) for item in answer.json()["items"]]
    assert statuses == [202] * 4 + [429]


async def test_daily_quota_charge_is_given_back_when_the_in_flight_cap_refuses(
    redis_url: str, prefix: str
) -> None:
    settings = make_settings(
        redis_url, prefix, tenant_limits={"alpha": {"daily_quota": 2, "max_in_flight": 1}}
    )
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            first = await _post(alpha)
            assert first.status_code == 202
            assert (await _post(alpha)).status_code == 429  # in flight: not charged
            await alpha.post(f"/v1/generations/{first.json()['id']}/cancel")
            assert (await _post(alpha)).status_code == 202  # the second of two
            assert "daily quota" in (await _post(alpha)).json()["detail"]

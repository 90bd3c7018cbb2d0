"""Replays racing their original are never charged a tenant limit (issue 17, finding 8)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import httpx

from tests.gateway.conftest import KEY_ALPHA, LiveGateway, client_for, make_settings

CLIENTS = 50


async def test_idempotent_replays_never_charged(redis, redis_url: str, prefix: str) -> None:
    # One enqueue allowed (burst 1, no refill to speak of) and one job in flight.
    settings = make_settings(
        redis_url, prefix, tenant_rate=0.001, tenant_burst=1, tenant_max_in_flight=1
    )
    body = {"model": "demo/fast", "prompt": "bill me once", "delay_ms": 60_000}
    go = asyncio.Event()
    with LiveGateway(settings) as live:
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(client_for(live, KEY_ALPHA)) for _ in range(CLIENTS)
            ]
            for client in clients:  # connected first, so the posts leave together
                assert (await client.get("/healthz")).status_code == 200

            async def post(client: httpx.AsyncClient) -> httpx.Response:
                await go.wait()
                headers = {"Idempotency-Key": "race-1"}
                return await client.post("/v1/generations", json=body, headers=headers)

            tasks = [asyncio.create_task(post(c)) for c in clients]
            await asyncio.sleep(0.05)
            go.set()
            answers = await asyncio.gather(*tasks)

            statuses = Counter(a.status_code for a in answers)
            assert statuses == {202: 1, 200: CLIENTS - 1}, [a.text for a in answers[:3]]
            assert len({a.json()["id"] for a in answers}) == 1
            # The limits were really that tight: another key is refused.
            other = await clients[0].post(
                "/v1/generations", json=body, headers={"Idempotency-Key": "race-2"}
            )
            assert other.status_code == 429
    jobs = [k async for k in redis.scan_iter(match=f"{{{prefix}:demo}}:job:*")]
    assert len(jobs) == 1
    claims = [k async for k in redis.scan_iter(match=f"{prefix}:gateway:idem-claim:*")]
    assert claims == []  # every claim was released

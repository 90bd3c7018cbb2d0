"""The same Idempotency-Key from 50 clients at once, and again after a gateway restart.

Fifty separate HTTP clients (fifty connections) post the same generation with the same key at
the same instant against a live gateway. Exactly one request creates the job (202); the other
49 get that job (200, ``deduplicated``); Redis holds one job and one bound key; no tenant slot
stays held by a loser. The gateway is then stopped and a new one started: 50 more at once all
get the same job, while it runs and after it completed. The job runs once.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest

from genq import ActiveJob, Queue
from tests.faults.invariants import check_invariants
from tests.faults.support import Viewer
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, client_for, make_settings

pytestmark = pytest.mark.timeout(45)

CLIENTS = 50
BODY = {"model": "demo/fast", "prompt": "bill me once", "metadata": {"chunks": 40}}
KEY = "checkout-7f3a-retry"


async def storm(live: LiveGateway, body: dict[str, Any] = BODY) -> list[httpx.Response]:
    """CLIENTS clients, each with its own connection, post at the same instant."""
    go = asyncio.Event()
    async with contextlib.AsyncExitStack() as stack:
        http = [
            await stack.enter_async_context(client_for(live, KEY_ALPHA)) for _ in range(CLIENTS)
        ]
        for client in http:  # connect first, so the posts leave together
            assert (await client.get("/healthz")).status_code == 200

        async def post(client: httpx.AsyncClient) -> httpx.Response:
            await go.wait()
            return await client.post("/v1/generations", json=body, headers={"Idempotency-Key": KEY})

        tasks = [asyncio.create_task(post(client)) for client in http]
        await asyncio.sleep(0.05)
        go.set()
        return list(await asyncio.gather(*tasks))


async def test_same_idempotency_key_from_50_clients_and_after_a_gateway_restart(
    redis, redis_url: str, prefix: str
) -> None:
    settings = make_settings(redis_url, prefix)
    queue = Queue(redis, f"{prefix}:demo", result_ttl=30.0)
    runs: list[str] = []

    async def handler(job: ActiveJob) -> dict[str, Any]:
        runs.append(job.id)
        text = ""
        for n in range(int(job.payload["metadata"]["chunks"])):
            await asyncio.sleep(0.02)
            await job.emit(f"tok{n} ")
            text += f"tok{n} "
        return {"text": text}

    async with queue.worker(handler, concurrency=4):
        with LiveGateway(settings) as first:
            replies = await storm(first)
        statuses = sorted(r.status_code for r in replies)
        assert statuses == [200] * (CLIENTS - 1) + [202], [r.text for r in replies][:3]
        ids = {r.json()["id"] for r in replies}
        assert len(ids) == 1
        job_id = ids.pop()
        assert [r.json()["deduplicated"] for r in replies if r.status_code == 202] == [False]
        viewer = Viewer(queue, job_id)

        with LiveGateway(settings) as second:  # a restarted gateway: new process state
            while_running = await storm(second)
            await viewer.finished(20)
            after_done = await storm(second)
            async with client_for(second, KEY_ALPHA) as http:
                other = await http.post(
                    "/v1/generations",
                    json={**BODY, "prompt": "another body"},
                    headers={"Idempotency-Key": KEY},
                )
        for reply in while_running + after_done:
            assert reply.status_code == 200, reply.text
            assert reply.json()["id"] == job_id and reply.json()["deduplicated"]
        assert other.status_code == 422
        assert "different request body" in other.json()["detail"]

    assert runs == [job_id]  # billed once
    assert int(await redis.get(queue.keys.seq)) == 1  # one job was ever created
    jobs = [k async for k in redis.scan_iter(match=f"{{{prefix}:demo}}:job:*")]
    assert len(jobs) == 1
    in_flight = await redis.zrange(settings.keys.in_flight("alpha"), 0, -1)
    assert [m.decode() for m in in_flight] in ([], [job_id])  # no loser's slot left held
    await check_invariants(queue, [job_id], views={job_id: [viewer.events]})

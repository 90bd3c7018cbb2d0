"""Issue 17, finding 6: what one tenant may hold open (streams, waits), for how long, and how
slowly it may read. Each test runs its own gateway with small limits."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import redis.asyncio as aioredis

from genq import ActiveJob
from genq_client import AsyncClient
from tests.gateway.conftest import (
    KEY_ALPHA,
    KEY_BETA,
    LiveGateway,
    Script,
    client_for,
    create,
    make_settings,
    queue_for,
    read_stream,
    wait_until,
)


@contextlib.asynccontextmanager
async def gateway_with(redis_url: str, prefix: str, **settings: Any) -> AsyncIterator[LiveGateway]:
    with LiveGateway(make_settings(redis_url, prefix, **settings)) as live:
        yield live


async def open_streams(client: httpx.AsyncClient, job_id: str, n: int) -> list[asyncio.Task[Any]]:
    return [asyncio.create_task(read_stream(client, job_id, timeout=30)) for _ in range(n)]


async def test_stream_limits_cap_open_streams_per_tenant_and_free_every_slot(
    redis_url: str, prefix: str, script: Script
) -> None:
    async with gateway_with(redis_url, prefix, tenant_max_streams=3) as live:
        held = live.gateway.streams
        async with client_for(live, KEY_ALPHA) as alpha, client_for(live, KEY_BETA) as beta:
            job = await create(alpha, delay_ms=60_000)
            for _ in range(2):  # open N, close them, open N again: no slot leaks
                streams = await open_streams(alpha, job["id"], 3)
                await wait_until(lambda: held.held("alpha") == 3)
                refused = await alpha.get(f"/v1/generations/{job['id']}/events")
                assert refused.status_code == 429
                assert refused.headers["Retry-After"] == "1"
                assert "3 event streams already open" in refused.json()["detail"]

                other = await create(beta, delay_ms=60_000)  # another tenant is not counted
                theirs = await open_streams(beta, other["id"], 1)
                await wait_until(lambda: held.held("beta") == 1)

                for task in [*streams, *theirs]:
                    task.cancel()
                await asyncio.gather(*streams, *theirs, return_exceptions=True)
                await wait_until(lambda: held.held("alpha") == 0 and held.held("beta") == 0)


async def test_stream_limits_cap_result_waits_per_tenant_and_free_every_slot(
    redis_url: str, prefix: str, script: Script
) -> None:
    async with gateway_with(redis_url, prefix, tenant_max_waits=2) as live:
        held = live.gateway.waits
        async with client_for(live, KEY_ALPHA) as alpha:
            job = await create(alpha, delay_ms=60_000)
            url = f"/v1/generations/{job['id']}/result"
            for _ in range(2):
                waits = [
                    asyncio.create_task(alpha.get(url, params={"timeout": 30})) for _ in range(2)
                ]
                await wait_until(lambda: held.held("alpha") == 2)
                refused = await alpha.get(url, params={"timeout": 30})
                assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
                assert "2 result waits already open" in refused.json()["detail"]
                for task in waits:  # the clients hang up
                    task.cancel()
                await asyncio.gather(*waits, return_exceptions=True)
                await wait_until(lambda: held.held("alpha") == 0)
            # A wait that ends by its timeout frees its slot too.
            assert (await alpha.get(url, params={"timeout": 0.2})).status_code == 202
            assert held.held("alpha") == 0


async def test_stream_limits_max_duration_ends_the_stream_and_the_client_resumes_exactly(
    redis_url: str, prefix: str, script: Script
) -> None:
    settings = {"sse_max_duration": 0.4, "sse_retry_ms": 100}
    async with (
        gateway_with(redis_url, prefix, **settings) as live,
        client_for(live, KEY_ALPHA) as alpha,
    ):
        job = await create(alpha, metadata={"chunks": 12, "delay_ms": 100})
        cut = await read_stream(alpha, job["id"])
        assert cut.ended and cut.events and not any(e.event == "completed" for e in cut.events), (
            "the stream was not cut before the job ended"
        )

        connections = 0

        async def count(request: httpx.Request) -> None:
            nonlocal connections
            connections += request.url.path.endswith("/events")

        async with AsyncClient(live.url, KEY_ALPHA) as client:
            client._http.event_hooks["request"].append(count)
            events = [e async for e in client.stream(job["id"])]
        ids = [e.id for e in events]
        assert [e.type for e in events] == ["chunk"] * 12 + ["completed"]
        assert [e.data for e in events[:12]] == [f"t{i} " for i in range(12)]
        assert len(set(ids)) == len(ids) == 13
        assert connections >= 2, "the client never had to resume"
        await wait_until(lambda: live.gateway.streams.held("alpha") == 0)


async def test_stream_limits_send_timeout_drops_a_client_that_never_reads(
    redis_url: str, prefix: str, redis: aioredis.Redis
) -> None:
    """200 clients that never read held 44 MB of send buffers until their jobs ended."""
    big = "x" * 65536

    async def flood(job: ActiveJob) -> str:
        for _ in range(300):  # ~20 MB: well past every socket buffer on the way
            await job.emit(big)
        return "done"

    async with gateway_with(redis_url, prefix, sse_send_timeout=0.5) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            job = await create(alpha)  # it waits: no worker runs yet
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", live.port))
            request = (
                f"GET /v1/generations/{job['id']}/events HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {KEY_ALPHA}\r\n\r\n"
            )
            sock.sendall(request.encode())
            await wait_until(lambda: live.gateway.streams.held("alpha") == 1)
            async with queue_for(redis, prefix).worker(flood, concurrency=1):
                # Never read: the gateway gives up on this client, not on its job.
                await wait_until(lambda: live.gateway.streams.held("alpha") == 0, timeout=30)
                assert live.gateway.tails["demo"].viewers == 0

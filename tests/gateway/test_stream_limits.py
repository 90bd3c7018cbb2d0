"""Issue 17, finding 6: what one tenant may hold open (streams, waits), for how long, and how
slowly it may read; Hardening II, items 2 and 3: the same on the OpenAI routes, decided before
anything is enqueued. Each test runs its own gateway with small limits."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from gateway.openai.objects import job_id_of
from genq import ActiveJob
from genq_client import AsyncClient
from tests.gateway.conftest import (
    KEY_ALPHA,
    KEY_BETA,
    SSE,
    LiveGateway,
    Script,
    client_for,
    create,
    make_settings,
    queue_for,
    read_stream,
    sse_blocks,
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
        held = live.gateway.open_streams
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
        held = live.gateway.open_waits
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
        await wait_until(lambda: live.gateway.open_streams.held("alpha") == 0)


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
            await wait_until(lambda: live.gateway.open_streams.held("alpha") == 1)
            async with queue_for(redis, prefix).worker(flood, concurrency=1):
                # Never read: the gateway gives up on this client, not on its job.
                await wait_until(lambda: live.gateway.open_streams.held("alpha") == 0, timeout=30)
                assert live.gateway.tails["demo"].viewers == 0


# -- Hardening II, items 2 and 3: the OpenAI routes hold the same slots, taken before enqueueing

USER = [{"role": "user", "content": "hi"}]


@dataclass(frozen=True)
class OpenAIStream:
    """One OpenAI streaming route: how a client opens a stream of a generation held at a gate."""

    name: str
    method: str
    creates: bool
    """Whether opening the stream enqueues a generation."""

    async def request(self, client: httpx.AsyncClient, gate: str) -> httpx.Request:
        if self.name == "chat":
            body = {"model": "demo/fast", "messages": USER, "stream": True}
            return client.build_request("POST", "/v1/chat/completions", json=gated(body, gate))
        if self.name == "responses":
            body = {"model": "demo/fast", "input": "hi", "stream": True}
            return client.build_request("POST", "/v1/responses", json=gated(body, gate))
        body = {"model": "demo/fast", "input": "hi", "background": True}
        created = await client.post("/v1/responses", json=gated(body, gate))
        assert created.status_code == 200, created.text
        url = f"/v1/responses/{created.json()['id']}"
        return client.build_request("GET", url, params={"stream": "true"})


OPENAI_STREAMS = [
    OpenAIStream("chat", "POST", creates=True),
    OpenAIStream("responses", "POST", creates=True),
    OpenAIStream("retrieve", "GET", creates=False),
]


def gated(body: dict[str, Any], gate: str) -> dict[str, Any]:
    """``body`` for a generation the scripted worker holds until ``script.gate(gate)`` opens."""
    return {**body, "metadata": {"gate": gate}}


async def generations_of(client: httpx.AsyncClient) -> int:
    listed = await client.get("/v1/generations", params={"limit": 200})
    assert listed.status_code == 200, listed.text
    return len(listed.json()["generations"])


def assert_openai_429(response: httpx.Response, what: str) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["Retry-After"] == "1"
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
    assert what in error["message"]


@pytest.mark.parametrize("route", OPENAI_STREAMS, ids=lambda r: r.name)
async def test_stream_limits_cap_openai_streams_per_tenant_before_enqueueing(
    redis_url: str, prefix: str, script: Script, route: OpenAIStream
) -> None:
    limits = {"alpha": {"max_streams": 2}}
    async with gateway_with(redis_url, prefix, tenant_limits=limits) as live:
        held = live.gateway.open_streams
        async with (
            client_for(live, KEY_ALPHA) as alpha,
            client_for(live, KEY_BETA) as beta,
            contextlib.AsyncExitStack() as opened,
        ):

            async def open_stream(client: httpx.AsyncClient) -> httpx.Response:
                request = await route.request(client, "held")
                response = await client.send(request, stream=True)
                opened.push_async_callback(response.aclose)
                assert response.status_code == 200, (await response.aread()).decode()
                assert response.headers["content-type"].startswith("text/event-stream")
                return response

            first = await open_stream(alpha)
            await open_stream(alpha)
            await wait_until(lambda: held.held("alpha") == 2)
            made = await generations_of(alpha)

            refused = await alpha.send(await route.request(alpha, "held"))
            assert_openai_429(refused, "2 event streams already open")
            assert await generations_of(alpha) == made + (0 if route.creates else 1), (
                "the refused stream enqueued a generation"
            )

            await open_stream(beta)  # another tenant is not counted
            await wait_until(lambda: held.held("beta") == 1)

            await first.aclose()  # the client hangs up: its slot is free again
            await wait_until(lambda: held.held("alpha") == 1, timeout=15)
            await open_stream(alpha)
            await wait_until(lambda: held.held("alpha") == 2)
        await wait_until(lambda: held.held("alpha") == 0 and held.held("beta") == 0, timeout=15)


async def read_until_closed(response: httpx.Response) -> list[SSE]:
    events: list[SSE] = []
    async for event, _ in sse_blocks(response):
        if event is not None:
            events.append(event)
    return events


@pytest.mark.parametrize("route", OPENAI_STREAMS, ids=lambda r: r.name)
async def test_stream_limits_max_duration_ends_openai_streams_and_says_so(
    redis_url: str, prefix: str, script: Script, route: OpenAIStream
) -> None:
    async with (
        gateway_with(redis_url, prefix, sse_max_duration=0.5) as live,
        client_for(live, KEY_ALPHA) as alpha,
    ):
        request = await route.request(alpha, "never")
        async with asyncio.timeout(20):  # the generation never ends: only the cut can end this
            response = await alpha.send(request, stream=True)
            try:
                assert response.status_code == 200
                events = await read_until_closed(response)
            finally:
                await response.aclose()
        last = events[-1]
        if route.name == "chat":  # a chat stream's error: data {"error": {...}}
            error = last.data["error"]
        else:  # a Responses stream's: an "error" event
            assert last.event == last.data["type"] == "error", events
            error = last.data
        assert error["code"] == "stream_cut"
        assert "GENQ_SSE_MAX_DURATION" in error["message"]
        await wait_until(lambda: live.gateway.open_streams.held("alpha") == 0, timeout=15)


async def test_stream_limits_max_duration_cancels_an_unbound_chat_and_keeps_a_bound_one(
    redis_url: str, prefix: str, script: Script
) -> None:
    async with (
        gateway_with(redis_url, prefix, sse_max_duration=0.5) as live,
        client_for(live, KEY_ALPHA) as alpha,
    ):
        body = gated({"model": "demo/fast", "messages": USER, "stream": True}, "cut")
        ids = {}
        for bound, headers in ((False, {}), (True, {"Idempotency-Key": "cut-chat"})):
            async with alpha.stream(
                "POST", "/v1/chat/completions", json=body, headers=headers
            ) as r:
                events = await asyncio.wait_for(read_until_closed(r), 20)
            ids[bound] = job_id_of(events[0].data["id"])
            assert events[-1].data["error"]["code"] == "stream_cut"

        async def status(job_id: str) -> str:
            return str((await alpha.get(f"/v1/generations/{job_id}")).json()["status"])

        async with asyncio.timeout(10):
            while await status(ids[False]) != "cancelled":
                await asyncio.sleep(0.02)
        assert await status(ids[True]) in ("waiting", "active")

        # The bound one resumes: the same key re-attaches and gets the rest once it ends.
        script.gate("cut").set()
        resumed = await alpha.post(
            "/v1/chat/completions",
            json={**body, "stream": False},
            headers={"Idempotency-Key": "cut-chat"},
        )
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["choices"][0]["message"]["content"] == "t0 t1 t2 "


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
async def test_stream_limits_send_timeout_drops_an_openai_client_that_never_reads(
    redis_url: str, prefix: str, redis: aioredis.Redis, path: str
) -> None:
    big = "x" * 65536

    async def flood(job: ActiveJob) -> str:
        for _ in range(300):  # ~20 MB: well past every socket buffer on the way
            await job.emit(big)
        return "done"

    if path.endswith("completions"):
        body = {"model": "demo/fast", "messages": USER, "stream": True}
    else:
        body = {"model": "demo/fast", "input": "hi", "stream": True}
    payload = json.dumps(body).encode()
    async with gateway_with(redis_url, prefix, sse_send_timeout=0.5) as live:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", live.port))
            head = (
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nAuthorization: Bearer {KEY_ALPHA}\r\n\r\n"
            )
            sock.sendall(head.encode() + payload)
            await wait_until(lambda: live.gateway.open_streams.held("alpha") == 1, timeout=15)
            async with queue_for(redis, prefix).worker(flood, concurrency=1):
                # Never read: the gateway gives up on this client (and, since the request had
                # no Idempotency-Key, on its generation).
                await wait_until(lambda: live.gateway.open_streams.held("alpha") == 0, timeout=30)
                assert live.gateway.tails["demo"].viewers == 0


async def test_stream_limits_refused_openai_wait_enqueues_nothing_and_spends_no_limit(
    redis_url: str, prefix: str, script: Script
) -> None:
    """24 of 24 refused waits had been enqueued, ran and billed; the SDKs retry each 429."""
    # Two generations in the day and the burst: a refused wait that spent either would leave
    # the last request below refused.
    limits = {"alpha": {"max_waits": 1, "burst": 2, "rate": 0.001, "daily_quota": 2}}
    chat = {"model": "demo/fast", "messages": USER}
    response = {"model": "demo/fast", "input": "hi"}
    async with (
        gateway_with(redis_url, prefix, tenant_limits=limits) as live,
        client_for(live, KEY_ALPHA) as alpha,
    ):
        held = live.gateway.open_waits
        waiting = asyncio.create_task(alpha.post("/v1/chat/completions", json=gated(chat, "wait")))
        await wait_until(lambda: held.held("alpha") == 1, timeout=15)
        for path, body in [("/v1/chat/completions", chat), ("/v1/responses", response)] * 3:
            assert_openai_429(await alpha.post(path, json=body), "1 result waits already open")
        assert await generations_of(alpha) == 1, "a refused wait enqueued a generation"

        script.gate("wait").set()
        assert (await waiting).status_code == 200
        await wait_until(lambda: held.held("alpha") == 0, timeout=15)
        last = await alpha.post("/v1/responses", json=response)
        assert last.status_code == 200, last.text
        assert last.json()["status"] == "completed"
        assert await generations_of(alpha) == 2

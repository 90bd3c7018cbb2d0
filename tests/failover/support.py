"""What the failover tests share: a worker-like client, a wait for a blocked command on a
server, and an SSE viewer that reconnects with ``Last-Event-ID`` as a browser does."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from genq.connection import RedisClient, connect
from tests.failover.local_sentinel import LocalSentinel
from tests.gateway.conftest import SSE, sse_blocks

TERMINAL = {"completed", "failed", "cancelled"}


def worker_client(url: str) -> RedisClient:
    """The client ``python -m workers`` builds (workers.run.connect): retries over a failover."""
    retry = Retry(ExponentialWithJitterBackoff(base=0.1, cap=1.0), retries=8)
    return connect(url, retry=retry, client_name="genq-worker")


async def wait_blocked(setup: LocalSentinel, command: str, timeout: float = 15.0) -> None:
    """Until the current primary shows a client blocked in ``command`` (BLPOP, XREAD...)."""
    assert setup.primary is not None
    primary = setup.primary

    def blocked() -> bool:
        with setup.client(primary) as client:
            return any(
                c.get("cmd") == command and "b" in c.get("flags", "") for c in client.client_list()
            )

    async with asyncio.timeout(timeout):
        while True:
            with contextlib.suppress(redis.RedisError):
                if await asyncio.to_thread(blocked):
                    return
            await asyncio.sleep(0.1)


async def follow(http: httpx.AsyncClient, job_id: str, seen: list[SSE]) -> list[SSE]:
    """A generation's events until a terminal one, reconnecting after a dropped stream."""
    while not seen or seen[-1].event not in TERMINAL:
        headers = {"Last-Event-ID": seen[-1].id} if seen and seen[-1].id else {}
        with contextlib.suppress(httpx.HTTPError):
            url = f"/v1/generations/{job_id}/events"
            async with http.stream("GET", url, headers=headers) as response:
                if response.status_code != 200:
                    await asyncio.sleep(0.2)
                    continue
                async for event, _ in sse_blocks(response):
                    if event is not None:
                        seen.append(event)
        await asyncio.sleep(0.2)
    return seen


def text_of(events: list[SSE]) -> str:
    text = ""
    for event in events:
        if event.event == "restarted":
            text = ""
        elif event.event == "chunk":
            text += str(event.data)
    return text


def as_dict(value: Any) -> dict[str, Any]:
    return dict(value)

"""The real processes on ``GENQ_REDIS_URL=redis+sentinel://...``: a gateway (uvicorn) serving an
SSE viewer and ``python -m workers`` running the demo model, while the primary is SIGKILLed
mid-generation. The worker's writes, the gateway's shared tail and the viewer's stream carry
on against the promoted replica, and a generation submitted afterwards runs too."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.e2e.browser import DEV_KEY, running_stack
from tests.failover.local_sentinel import LocalSentinel
from tests.failover.support import follow, text_of, wait_blocked
from tests.gateway.conftest import SSE

pytestmark = pytest.mark.timeout(120)

SLOW = {"demo_tokens": 40, "demo_delay_ms": 150}


async def test_gateway_and_worker_processes_carry_on_across_a_primary_kill(
    fresh: LocalSentinel, request: pytest.FixtureRequest
) -> None:
    with running_stack(fresh.url(), request.node.name) as stack:
        headers = {"Authorization": f"Bearer {DEV_KEY}"}
        async with httpx.AsyncClient(base_url=stack.base_url, headers=headers, timeout=40) as http:
            body = {"model": "demo/fast", "prompt": "failover", "params": SLOW}
            created = (await http.post("/v1/generations", json=body)).json()
            seen: list[SSE] = []
            viewer = asyncio.create_task(follow(http, created["id"], seen))
            async with asyncio.timeout(60):  # the worker imports LiteLLM first
                while sum(e.event == "chunk" for e in seen) < 3:
                    await asyncio.sleep(0.05)
            await wait_blocked(fresh, "blpop")  # the worker's doorbell, on the first primary

            fresh.kill_primary()
            started = time.monotonic()
            await asyncio.to_thread(fresh.wait_failover)
            print(f"failover took {time.monotonic() - started:.2f}s")

            events = await asyncio.wait_for(viewer, 60)
            assert events[-1].event == "completed", [e.event for e in events]
            result = await http.get(f"/v1/generations/{created['id']}/result")
            assert result.status_code == 200, result.text
            assert text_of(events) == result.json()["text"]
            assert len(result.json()["text"].split()) == SLOW["demo_tokens"]

            await wait_blocked(fresh, "blpop")  # the doorbell found the new primary
            again = (await http.post("/v1/generations", json=body)).json()
            after = await asyncio.wait_for(follow(http, again["id"], []), 60)
            assert after[-1].event == "completed"
            assert text_of(after).startswith("Echo: failover")

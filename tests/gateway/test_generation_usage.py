"""A generation's usage and cost as the API shows them: the record's totals and attempts, and
the ``usage`` event that precedes the terminal event on the stream."""

from __future__ import annotations

import asyncio

import httpx

from genq_client import AsyncClient
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, Script, create, read_stream


def usage(prompt: int, completion: int, nanos_per_token: int) -> dict[str, object]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_tokens": 0,
        "total_tokens": prompt + completion,
        "cost_usd": (prompt + completion) * nanos_per_token / 1e9,
        "estimated": False,
    }


async def test_a_completed_generation_shows_its_usage_everywhere(
    alpha: httpx.AsyncClient, script: Script, live: LiveGateway
) -> None:
    created = await create(alpha, metadata={"meter": 1000})
    record = (await alpha.get(f"/v1/generations/{created['id']}/result")).json()
    assert record["usage"] == usage(2, 3, 1000)
    assert record["answered_by"] == "demo/fast"
    (attempt,) = record["attempts"]
    assert (attempt["outcome"], attempt["model"]) == ("completed", "demo/fast")
    assert attempt["usage"] == usage(2, 3, 1000)

    stream = await read_stream(alpha, created["id"])
    assert [e.event for e in stream.events] == ["chunk", "chunk", "chunk", "usage", "completed"]
    totals, terminal = stream.events[-2:]
    assert totals.data == usage(2, 3, 1000) and totals.id is None
    assert terminal.id is not None

    async with AsyncClient(live.url, KEY_ALPHA) as client:
        events = [e async for e in client.stream(created["id"])]
    assert [e.type for e in events] == ["chunk", "chunk", "chunk", "completed"]
    assert events[-1].usage == usage(2, 3, 1000) and events[0].usage is None


async def test_a_restarted_generation_costs_both_attempts(
    alpha: httpx.AsyncClient, script: Script
) -> None:
    created = await create(alpha, metadata={"meter": 10, "retry_once": True})
    record = (await alpha.get(f"/v1/generations/{created['id']}/result")).json()
    assert [(a["outcome"], a["usage"]) for a in record["attempts"]] == [
        ("retry", usage(2, 1, 10)),
        ("completed", usage(2, 3, 10)),
    ]
    assert record["usage"] == usage(4, 4, 10)


async def test_a_stopped_generation_reports_what_it_generated(
    alpha: httpx.AsyncClient, script: Script
) -> None:
    created = await create(alpha, metadata={"meter": 5, "gate": "never", "gate_at": 2})
    await asyncio.wait_for(script.at_gate_event(created["id"]).wait(), 5)
    assert (await alpha.post(f"/v1/generations/{created['id']}/cancel")).status_code == 200
    await asyncio.wait_for(script.cancelled_event(created["id"]).wait(), 5)
    stream = await read_stream(alpha, created["id"])
    assert [e.event for e in stream.events][-2:] == ["usage", "cancelled"]
    assert stream.events[-2].data == usage(2, 2, 5)
    record = (await alpha.get(f"/v1/generations/{created['id']}")).json()
    assert record["status"] == "cancelled" and record["usage"] == usage(2, 2, 5)

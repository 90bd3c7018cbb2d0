"""GET /v1/generations/{id}/result: a server-side wait for the terminal record."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.gateway.conftest import LiveGateway, Script, create, wait_until


async def test_result_waits_for_the_text(alpha: httpx.AsyncClient, script: Script) -> None:
    created = await create(alpha, metadata={"gate": "g"})
    waiting = asyncio.create_task(
        alpha.get(f"/v1/generations/{created['id']}/result", params={"timeout": 10})
    )
    await asyncio.wait_for(script.started_event(created["id"]).wait(), 5)
    assert not waiting.done()
    script.gate("g").set()
    response = await asyncio.wait_for(waiting, 10)
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["text"]) == ("completed", "t0 t1 t2 ")
    assert body["usage"] == {
        "prompt_tokens": 0,
        "completion_tokens": 3,
        "cached_tokens": 0,
        "total_tokens": 3,
        "cost_usd": 0.0,
        "estimated": False,
    }  # the result's usage, in the one shape every reader shows


async def test_result_of_a_finished_job_answers_at_once(
    alpha: httpx.AsyncClient, script: Script
) -> None:
    created = await create(alpha)
    await alpha.get(f"/v1/generations/{created['id']}/result", params={"timeout": 10})
    started = time.monotonic()
    again = await alpha.get(f"/v1/generations/{created['id']}/result", params={"timeout": 10})
    assert again.status_code == 200 and again.json()["text"] == "t0 t1 t2 "
    assert time.monotonic() - started < 1


async def test_result_not_finished_in_time_is_202_with_the_record(
    alpha: httpx.AsyncClient, script: Script, live: LiveGateway
) -> None:
    created = await create(alpha, metadata={"gate": "g"})
    await asyncio.wait_for(script.started_event(created["id"]).wait(), 5)
    started = time.monotonic()
    response = await alpha.get(f"/v1/generations/{created['id']}/result", params={"timeout": 0.3})
    assert 0.25 < time.monotonic() - started < 3
    assert response.status_code == 202
    assert response.json()["status"] == "active"
    assert response.json()["text"] is None
    await wait_until(lambda: live.gateway.tails["demo"].viewers == 0)


async def test_result_of_failed_and_cancelled_jobs_is_an_answer(
    alpha: httpx.AsyncClient, script: Script
) -> None:
    failing = await create(alpha, metadata={"fail": "model refused"})
    stopped = await create(alpha, delay_ms=60_000)
    await alpha.post(f"/v1/generations/{stopped['id']}/cancel")

    failed = await alpha.get(f"/v1/generations/{failing['id']}/result", params={"timeout": 10})
    cancelled = await alpha.get(f"/v1/generations/{stopped['id']}/result", params={"timeout": 10})
    assert failed.status_code == 200
    assert failed.json()["status"] == "failed"
    assert "model refused" in failed.json()["error"]
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"


async def test_result_timeout_out_of_range_is_422(alpha: httpx.AsyncClient) -> None:
    too_long = await alpha.get("/v1/generations/demo.x/result", params={"timeout": 99999})
    negative = await alpha.get("/v1/generations/demo.x/result", params={"timeout": -1})
    assert (too_long.status_code, negative.status_code) == (422, 422)

"""Two tenants on every job route: nothing crosses; watch tokens are bound, signed, short-lived."""

from __future__ import annotations

import time

import httpx

from gateway.access.auth import WatchTokens
from tests.gateway.conftest import SECRET, Script, create, read_stream

NOT_FOUND = {"detail": "generation not found"}


async def test_tenants_cannot_touch_each_others_generations(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, script: Script
) -> None:
    mine = await create(alpha, metadata={"gate": "g"})
    job = mine["id"]
    unknown = "demo." + "0" * 32

    for target in (job, unknown):  # another tenant's job looks exactly like no job
        routes = [
            await beta.get(f"/v1/generations/{target}"),
            await beta.get(f"/v1/generations/{target}/events"),
            await beta.post(f"/v1/generations/{target}/cancel"),
            await beta.get(f"/v1/generations/{target}/result", params={"timeout": 0}),
            await beta.post(f"/v1/generations/{target}/token"),
        ]
        assert [r.status_code for r in routes] == [404] * 5, target
        assert all(r.json() == NOT_FOUND for r in routes)

    # beta's attempts changed nothing: alpha's generation runs to the end.
    script.gate("g").set()
    result = (await alpha.get(f"/v1/generations/{job}/result", params={"timeout": 10})).json()
    assert result["status"] == "completed"


async def test_tenants_cannot_use_a_watch_token_across_jobs(
    alpha: httpx.AsyncClient, anon: httpx.AsyncClient, beta: httpx.AsyncClient
) -> None:
    first = await create(alpha, delay_ms=60_000)
    second = await create(alpha, delay_ms=60_000)
    theirs = await create(beta, delay_ms=60_000)
    stolen = first["watch_token"]
    for target in (second["id"], theirs["id"]):
        events = await anon.get(f"/v1/generations/{target}/events", params={"token": stolen})
        cancel = await anon.post(f"/v1/generations/{target}/cancel", params={"token": stolen})
        assert (events.status_code, cancel.status_code) == (401, 401)
    assert (await beta.get(f"/v1/generations/{theirs['id']}")).json()["status"] == "scheduled"


async def test_tenants_expired_and_forged_watch_tokens_are_refused(
    alpha: httpx.AsyncClient, anon: httpx.AsyncClient
) -> None:
    created = await create(alpha, delay_ms=60_000)
    job = created["id"]
    expired, _ = WatchTokens(SECRET, ttl=60).issue("alpha", job, now=time.time() - 3600)
    foreign, _ = WatchTokens("some-other-secret-0123456789", ttl=60).issue("alpha", job)
    body, signature = created["watch_token"].split(".")
    flipped = f"{body}.{signature[:-1]}{'A' if signature[-1] != 'A' else 'B'}"

    for token in (expired, foreign, flipped, "garbage"):
        events = await anon.get(f"/v1/generations/{job}/events", params={"token": token})
        cancel = await anon.post(f"/v1/generations/{job}/cancel", params={"token": token})
        assert (events.status_code, cancel.status_code) == (401, 401), token
        assert "watch token" in events.json()["detail"]
    assert (await alpha.get(f"/v1/generations/{job}")).json()["cancel_requested"] is False


async def test_tenants_watch_token_reads_watches_and_cancels_only_its_job(
    alpha: httpx.AsyncClient, anon: httpx.AsyncClient
) -> None:
    created = await create(alpha, delay_ms=60_000)
    job, token = created["id"], created["watch_token"]
    record = await anon.get(f"/v1/generations/{job}", params={"token": token})
    assert record.status_code == 200 and record.json()["status"] == "scheduled"
    result = await anon.get(f"/v1/generations/{job}/result", params={"token": token})
    new_token = await anon.post(f"/v1/generations/{job}/token", params={"token": token})
    assert (result.status_code, new_token.status_code) == (401, 401)

    refreshed = (await alpha.post(f"/v1/generations/{job}/token")).json()
    cancel = await anon.post(
        f"/v1/generations/{job}/cancel", params={"token": refreshed["watch_token"]}
    )
    assert cancel.json() == {"cancelled": True, "status": "cancelled"}
    stream = await read_stream(anon, job, params={"token": token})
    assert [e.event for e in stream.events] == ["cancelled"]


async def test_tenants_only_admin_keys_operate_queues(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, anon: httpx.AsyncClient
) -> None:
    assert (await anon.get("/v1/queues")).status_code == 401
    forbidden = await alpha.get("/v1/queues")
    assert forbidden.status_code == 403
    assert "admin" in forbidden.json()["detail"]
    assert (await admin.get("/v1/queues")).status_code == 200

"""GET /v1/generations: the caller's own generations across every provider queue."""

from __future__ import annotations

from typing import Any

import httpx

from tests.gateway.conftest import Script, create

LATER = 60_000


async def every_page(client: httpx.AsyncClient, between: Any = None, **params: Any) -> list[str]:
    """The ids of every page, in order; ``between()`` runs after each page."""
    seen: list[str] = []
    cursor = None
    for _ in range(50):
        query = {**params, **({"cursor": cursor} if cursor else {})}
        answer = await client.get("/v1/generations", params=query)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert len(page["generations"]) <= int(params.get("limit", 20))
        seen += [g["id"] for g in page["generations"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
        if between is not None:
            await between()
    raise AssertionError("the listing never ended")


async def test_generation_list_shows_only_the_callers_own_across_queues(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    a1 = await create(alpha, delay_ms=LATER, metadata={"n": 1})
    b1 = await create(beta, delay_ms=LATER)
    a2 = await create(alpha, model="other/model", delay_ms=LATER)
    b2 = await create(beta, model="other/model", delay_ms=LATER)

    mine = (await alpha.get("/v1/generations")).json()
    assert [g["id"] for g in mine["generations"]] == [a2["id"], a1["id"]]  # newest first
    assert mine["next_cursor"] is None
    first = mine["generations"][1]
    assert (first["model"], first["status"], first["metadata"]) == (
        "demo/fast",
        "scheduled",
        {"n": 1},
    )
    assert first["retry_in"] > 50 and "tenant" not in first
    theirs = (await beta.get("/v1/generations")).json()
    assert [g["id"] for g in theirs["generations"]] == [b2["id"], b1["id"]]
    assert (await admin.get("/v1/generations")).json()["generations"] == []  # its own tenant
    assert (await alpha.get(f"/v1/generations/{b1['id']}")).status_code == 404


async def test_generation_list_pages_across_queues_while_jobs_change(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient
) -> None:
    models = ["demo/fast", "other/model", "demo/fast", "demo/fast", "other/model", "other/model"]
    original = [(await create(alpha, model=m, delay_ms=LATER))["id"] for m in models * 2]
    await create(beta, delay_ms=LATER)
    cancelled = original[3]

    async def meanwhile() -> None:
        await create(alpha, delay_ms=LATER)  # newer: on no later page
        await create(alpha, model="other/model", delay_ms=LATER)
        await alpha.post(f"/v1/generations/{cancelled}/cancel")  # keeps its place

    seen = await every_page(alpha, meanwhile, limit=5)
    assert len(seen) == len(set(seen))
    assert seen == list(reversed(original))

    scheduled = await every_page(alpha, status="scheduled", limit=3)
    assert cancelled not in scheduled
    assert [i for i in scheduled if i in original] == [
        i for i in reversed(original) if i != cancelled
    ]
    assert (await every_page(alpha, status="cancelled")) == [cancelled]


async def test_generation_list_filters_by_status(alpha: httpx.AsyncClient, script: Script) -> None:
    done = await create(alpha, metadata={"chunks": 1})
    failed = await create(alpha, model="other/model", metadata={"fail": "boom"})
    for job in (done, failed):
        await alpha.get(f"/v1/generations/{job['id']}/result", params={"timeout": 10})
    completed = (await alpha.get("/v1/generations", params={"status": "completed"})).json()
    assert [(g["id"], g["text"]) for g in completed["generations"]] == [(done["id"], "t0 ")]
    dead = (await alpha.get("/v1/generations", params={"status": "dead"})).json()
    assert [(g["id"], g["error"]) for g in dead["generations"]] == [(failed["id"], "boom")]


async def test_generation_list_refuses_bad_input(
    alpha: httpx.AsyncClient, anon: httpx.AsyncClient
) -> None:
    bogus = await alpha.get("/v1/generations", params={"status": "bogus"})
    assert bogus.status_code == 400 and "status" in bogus.json()["detail"]
    cursor = await alpha.get("/v1/generations", params={"cursor": "nope"})
    assert cursor.status_code == 400 and "cursor" in cursor.json()["detail"]
    assert (await alpha.get("/v1/generations", params={"limit": 0})).status_code == 422
    assert (await alpha.get("/v1/generations", params={"limit": 201})).status_code == 422
    assert (await anon.get("/v1/generations")).status_code == 401

"""/v1/queues (admin): stats and dead letters (list, retry, purge)."""

from __future__ import annotations

import asyncio

import httpx

from tests.gateway.conftest import Script, create, read_stream


async def test_queues_stats_count_waiting_and_scheduled(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    await create(alpha, delay_ms=60_000)
    await create(alpha, delay_ms=60_000)
    stats = (await admin.get("/v1/queues/demo")).json()
    assert (stats["name"], stats["scheduled"], stats["waiting"], stats["dead"]) == ("demo", 2, 0, 0)
    assert stats["cooldown_remaining"] == 0
    every = (await admin.get("/v1/queues")).json()
    # each provider's queue and its batch lane (genq_contract.lanes)
    assert sorted(q["name"] for q in every) == ["demo", "demo.batch", "other", "other.batch"]


async def test_queues_dead_letters_list_retry_and_purge(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, script: Script
) -> None:
    doomed = [await create(alpha, metadata={"fail": f"bad input {i}"}) for i in range(3)]
    for job in doomed:
        result = await alpha.get(f"/v1/generations/{job['id']}/result", params={"timeout": 10})
        assert result.json()["status"] == "failed"

    dead = (await admin.get("/v1/queues/demo/dead")).json()
    assert dead["total"] == 3
    assert {e["id"] for e in dead["entries"]} == {j["id"] for j in doomed}
    assert all(e["reason"] == "terminal" and "bad input" in e["error"] for e in dead["entries"])

    healed = doomed[0]["id"]
    script.healed.add(healed)
    assert (await admin.post(f"/v1/queues/demo/dead/{healed}/retry")).json() == {"ok": True}
    result = await alpha.get(f"/v1/generations/{healed}/result", params={"timeout": 10})
    assert (result.json()["status"], result.json()["text"]) == ("completed", "t0 t1 t2 ")

    purged = await admin.post("/v1/queues/demo/dead/purge", json={"ids": [doomed[1]["id"]]})
    assert purged.json() == {"count": 1}
    assert (await alpha.get(f"/v1/generations/{doomed[1]['id']}")).status_code == 404
    empty = await admin.post("/v1/queues/demo/dead/purge", json={})
    assert empty.status_code == 422  # an empty body never means "everything"
    rest = await admin.post("/v1/queues/demo/dead/purge", json={"all": True})
    assert rest.json() == {"count": 1}
    assert (await admin.get("/v1/queues/demo/dead")).json()["total"] == 0

    audit = (await admin.get("/v1/audit")).json()["entries"]
    assert [(e["action"], e["count"]) for e in audit] == [("purge", 1), ("purge", 1), ("retry", 1)]
    assert audit[2]["ids"] == [healed]
    assert all(e["actor"].startswith("ops (key ") and e["queue"] == "demo" for e in audit)


async def test_queues_bulk_retry_of_selected_or_all_dead(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, script: Script
) -> None:
    doomed = [await create(alpha, metadata={"fail": "nope"}) for _ in range(3)]
    for job in doomed:
        await alpha.get(f"/v1/generations/{job['id']}/result", params={"timeout": 10})
        script.healed.add(job["id"])

    one = await admin.post("/v1/queues/demo/dead/retry", json={"ids": [doomed[0]["id"]]})
    assert one.json() == {"count": 1}
    rest = await admin.post("/v1/queues/demo/dead/retry", json={"all": True})
    assert rest.json() == {"count": 2}
    for job in doomed:
        result = await alpha.get(f"/v1/generations/{job['id']}/result", params={"timeout": 10})
        assert result.json()["status"] == "completed"
    audit = (await admin.get("/v1/audit", params={"limit": 2})).json()["entries"]
    assert [(e["action"], e["count"]) for e in audit] == [("retry", 2), ("retry", 1)]


async def test_queues_admin_sees_any_tenants_job_and_can_follow_it(
    beta: httpx.AsyncClient, admin: httpx.AsyncClient, anon: httpx.AsyncClient, script: Script
) -> None:
    created = await create(beta, prompt="what beta asked", metadata={"chunks": 2})
    job = (await admin.get(f"/v1/queues/demo/jobs/{created['id']}")).json()
    assert (job["tenant"], job["queue"], job["model"]) == ("beta", "demo", "demo/fast")
    assert job["payload"]["messages"] == [{"role": "user", "content": "what beta asked"}]
    stream = await read_stream(anon, created["id"], params={"token": job["watch_token"]})
    assert [e.event for e in stream.events][-1] == "completed"
    done = (await admin.get(f"/v1/queues/demo/jobs/{created['id']}")).json()
    assert [(a["attempt"], a["outcome"], a["error"]) for a in done["attempts"]] == [
        (1, "completed", None)
    ]
    assert done["attempts"][0]["started_at"] <= done["attempts"][0]["ended_at"]
    wrong_queue = await admin.get(f"/v1/queues/other/jobs/{created['id']}")
    assert wrong_queue.status_code == 404


async def test_queues_history_shows_the_current_peak(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    for _ in range(3):
        await create(alpha, delay_ms=60_000)
    async with asyncio.timeout(5):  # the gateway samples every 0.1 s in these tests
        while True:
            history = (await admin.get("/v1/queues/demo/history")).json()
            if history["buckets"][-1]["peak_depth"] == 3:
                break
            await asyncio.sleep(0.05)
    assert history["step"] == 1800 and len(history["buckets"]) == 48
    starts = [b["start"] for b in history["buckets"]]
    assert starts == sorted(starts) and starts[1] - starts[0] == 1800
    assert history["buckets"][-1]["peak_depth"] == 3
    assert history["buckets"][0]["peak_depth"] == 0


async def test_queues_unknown_names_and_ids_are_404(admin: httpx.AsyncClient) -> None:
    assert (await admin.get("/v1/queues/nope")).status_code == 404
    missing = await admin.post("/v1/queues/demo/dead/demo.nothing/retry")
    assert missing.status_code == 404
    assert "no dead generation" in missing.json()["detail"]


async def test_queues_dead_letters_page_with_a_cursor(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, script: Script
) -> None:
    doomed = [await create(alpha, metadata={"fail": f"bad input {i}"}) for i in range(3)]
    for job in doomed:
        await alpha.get(f"/v1/generations/{job['id']}/result", params={"timeout": 10})

    first = (await admin.get("/v1/queues/demo/dead", params={"count": 2})).json()
    assert (len(first["entries"]), first["total"]) == (2, 3)
    assert first["next_cursor"]
    purged = first["entries"][-1]["id"]  # the cursor's own entry goes away meanwhile
    assert (await admin.post("/v1/queues/demo/dead/purge", json={"ids": [purged]})).is_success
    params = {"count": 2, "cursor": first["next_cursor"]}
    second = (await admin.get("/v1/queues/demo/dead", params=params)).json()
    assert second["next_cursor"] is None
    listed = [e["id"] for e in first["entries"] + second["entries"]]
    assert sorted(listed) == sorted(j["id"] for j in doomed)

    bad = await admin.get("/v1/queues/demo/dead", params={"cursor": "not-a-cursor"})
    assert bad.status_code == 400 and "cursor" in bad.json()["detail"]

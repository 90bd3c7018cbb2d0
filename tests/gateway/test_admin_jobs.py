"""/v1/queues/{name}/jobs (admin): list and search, one-job and bulk actions, enqueue on a
tenant's behalf, and the audit entries they write."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from gateway.settings import Settings
from tests.gateway.conftest import Script, create, make_settings

LATER = 60_000
"""delay_ms that keeps a generation scheduled for the whole test (no worker takes it)."""


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    """Two models on the demo queue (for the model filter) and a tenant allowed one job."""
    return make_settings(
        redis_url,
        prefix,
        models=["demo/fast", "demo/slow", "other/model"],
        tenant_limits={"gamma": {"max_in_flight": 1}},
    )


async def listing(admin: httpx.AsyncClient, queue: str = "demo", **params: Any) -> dict[str, Any]:
    response = await admin.get(f"/v1/queues/{queue}/jobs", params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def ids_of(page: dict[str, Any]) -> list[str]:
    return [row["id"] for row in page["jobs"]]


async def audit(admin: httpx.AsyncClient, limit: int = 1) -> list[dict[str, Any]]:
    return list((await admin.get("/v1/audit", params={"limit": limit})).json()["entries"])


async def finished(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    answer = await client.get(f"/v1/generations/{job_id}/result", params={"timeout": 10})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


# -- listing -----------------------------------------------------------------------------------


async def test_admin_jobs_list_rows_counts_and_filters(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    a1 = await create(alpha, delay_ms=LATER, metadata={"n": 1})
    a2 = await create(alpha, model="demo/slow", delay_ms=LATER)
    b1 = await create(beta, delay_ms=LATER)
    await create(alpha, model="other/model", delay_ms=LATER)  # another queue

    page = await listing(admin)
    assert ids_of(page) == [b1["id"], a2["id"], a1["id"]]  # newest first
    assert page["queue"] == "demo" and page["next_cursor"] is None
    assert page["counts"] == {
        "waiting": 0, "scheduled": 3, "active": 0, "completed": 0, "failed": 0, "cancelled": 0,
    }  # fmt: skip
    row = page["jobs"][2]
    assert (row["tenant"], row["queue"], row["model"], row["status"]) == (
        "alpha", "demo", "demo/fast", "scheduled",
    )  # fmt: skip
    assert row["metadata"] == {"n": 1} and row["events_url"].endswith(f"{a1['id']}/events")
    assert row["retry_in"] > 50

    of_alpha = await listing(admin, tenant="alpha")
    assert ids_of(of_alpha) == [a2["id"], a1["id"]]
    assert of_alpha["counts"]["scheduled"] == 2  # counts follow the tenant filter
    assert ids_of(await listing(admin, status="scheduled", tenant="beta")) == [b1["id"]]
    assert ids_of(await listing(admin, status="waiting")) == []
    assert ids_of(await listing(admin, model="demo/slow")) == [a2["id"]]
    assert ids_of(await listing(admin, model="demo/fast", tenant="alpha")) == [a1["id"]]
    assert ids_of(await listing(admin, model="nope/none")) == []
    other = await listing(admin, "other")
    assert [r["model"] for r in other["jobs"]] == ["other/model"]
    # Empty parameters (a form's blank fields) mean no filter.
    assert len(ids_of(await listing(admin, status="", tenant="", model="", q=""))) == 3


async def test_admin_jobs_model_filter_pages_without_repeats(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    made = [
        await create(alpha, model="demo/slow" if i % 3 == 0 else "demo/fast", delay_ms=LATER)
        for i in range(7)
    ]
    fast = [made[i]["id"] for i in reversed(range(7)) if i % 3]
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        more: dict[str, Any] = {"cursor": cursor} if cursor else {}
        page = await listing(admin, model="demo/fast", limit=2, **more)
        assert len(page["jobs"]) <= 2
        seen += ids_of(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == fast


async def test_admin_jobs_pages_while_the_list_changes(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    original = [await create(alpha if i % 2 else beta, delay_ms=LATER) for i in range(9)]
    ids = [job["id"] for job in original]
    seen: list[str] = []
    page = await listing(admin, limit=3)
    seen += ids_of(page)
    # Meanwhile: newer jobs arrive, a job already shown is deleted, an unseen one is
    # cancelled (it changes status but keeps its place in the unfiltered listing).
    await create(alpha, delay_ms=LATER)
    await admin.post(f"/v1/queues/demo/jobs/{seen[0]}/cancel")
    assert (await admin.delete(f"/v1/queues/demo/jobs/{seen[0]}")).status_code == 200
    unseen = ids[2]
    assert (await admin.post(f"/v1/queues/demo/jobs/{unseen}/cancel")).json()["ok"] is True
    while page["next_cursor"]:
        page = await listing(admin, limit=3, cursor=page["next_cursor"])
        seen += ids_of(page)
        await create(beta, delay_ms=LATER)
    assert len(seen) == len(set(seen))  # no job twice
    assert seen == list(reversed(ids))  # none skipped, newest first

    # Filtered by status: the job that changed status leaves; every other one comes once.
    seen = []
    cursor = None
    while True:
        params: dict[str, Any] = {"status": "scheduled", "limit": 2}
        params |= {"cursor": cursor} if cursor else {}
        page = await listing(admin, **params)
        seen += ids_of(page)
        if len(seen) == 2:
            await admin.post(f"/v1/queues/demo/jobs/{ids[4]}/cancel")
        cursor = page["next_cursor"]
        if cursor is None:
            break
    kept = [i for i in reversed(ids) if i not in (ids[8], ids[2], ids[4])]
    assert [i for i in seen if i in ids] == kept


async def test_admin_jobs_search_by_id_or_idempotency_key(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    keyed = await create(alpha, key="order-42", delay_ms=LATER)
    await create(beta, key="order-42", delay_ms=LATER)  # the same key, another tenant
    elsewhere = await create(alpha, model="other/model", delay_ms=LATER)

    assert ids_of(await listing(admin, q=keyed["id"])) == [keyed["id"]]
    by_key = await listing(admin, q="order-42", tenant="alpha")
    assert ids_of(by_key) == [keyed["id"]] and by_key["jobs"][0]["idempotency_key"] == "order-42"
    assert ids_of(await listing(admin, q="order-42", tenant="nobody")) == []
    assert ids_of(await listing(admin, q=keyed["id"], status="completed")) == []  # filters hold
    assert ids_of(await listing(admin, q=elsewhere["id"])) == []  # an id, of another queue
    no_tenant = await admin.get("/v1/queues/demo/jobs", params={"q": "order-42"})
    assert no_tenant.status_code == 400 and "tenant" in no_tenant.json()["detail"]


async def test_admin_jobs_list_refuses_bad_input(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    async def status_of(path: str = "/v1/queues/demo/jobs", **params: Any) -> tuple[int, Any]:
        answer = await admin.get(path, params=params)
        return answer.status_code, answer.json()["detail"]

    code, detail = await status_of(status="bogus")
    assert code == 400 and "status must be one of" in detail
    code, detail = await status_of(cursor="not-a-cursor")
    assert code == 400 and "cursor" in detail
    assert (await status_of(tenant="a{b}"))[0] == 400
    assert (await status_of(limit=0))[0] == 422
    assert (await status_of(limit=201))[0] == 422
    code, detail = await status_of("/v1/queues/nope/jobs")
    assert code == 404 and "nope" in detail
    assert (await alpha.get("/v1/queues/demo/jobs")).status_code == 403


# -- one job -----------------------------------------------------------------------------------


async def test_admin_jobs_cancel_retry_delete_one(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, script: Script
) -> None:
    job = await create(alpha, delay_ms=LATER)
    url = f"/v1/queues/demo/jobs/{job['id']}"

    cancelled = await admin.post(f"{url}/cancel", json={"reason": "customer asked"})
    assert cancelled.json() == {"ok": True, "status": "cancelled"}
    again = await admin.post(f"{url}/cancel")  # no body at all
    assert again.json() == {"ok": False, "status": "cancelled"}

    assert (await admin.post(f"{url}/retry", json={"reason": "try again"})).json() == {"ok": True}
    assert (await finished(alpha, job["id"]))["text"] == "t0 t1 t2 "  # same id, run for real
    conflict = await admin.post(f"{url}/retry")
    assert conflict.status_code == 409 and "completed" in conflict.json()["detail"]

    deleted = await admin.delete(url, params={"reason": "GDPR request"})
    assert deleted.json() == {"ok": True}
    assert (await alpha.get(f"/v1/generations/{job['id']}")).status_code == 404
    assert (await admin.delete(url)).status_code == 404
    assert (await admin.post(f"{url}/cancel")).status_code == 404

    entries = await audit(admin, 5)
    assert [(e["action"], e["count"], e["ids"], e["reason"]) for e in entries] == [
        ("delete", 1, [job["id"]], "GDPR request"),
        ("retry", 1, [job["id"]], "try again"),
        ("cancel", 0, [job["id"]], None),
        ("cancel", 1, [job["id"]], "customer asked"),
    ]
    assert all(e["actor"].startswith("ops (key ") and e["queue"] == "demo" for e in entries)


async def test_admin_jobs_running_job_cancels_and_cannot_be_deleted(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, script: Script
) -> None:
    job = await create(alpha, metadata={"gate": "g"})
    await asyncio.wait_for(script.at_gate_event(job["id"]).wait(), 10)
    url = f"/v1/queues/demo/jobs/{job['id']}"
    busy = await admin.delete(url)
    assert busy.status_code == 409 and "cancel it first" in busy.json()["detail"]
    stopping = await admin.post(f"{url}/cancel")
    assert stopping.json()["ok"] is True
    await asyncio.wait_for(script.cancelled_event(job["id"]).wait(), 10)
    assert (await finished(alpha, job["id"]))["status"] == "cancelled"
    assert (await admin.delete(url)).json() == {"ok": True}


async def test_admin_jobs_one_job_refuses_bad_input(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    job = await create(alpha, delay_ms=LATER)
    url = f"/v1/queues/demo/jobs/{job['id']}"
    assert (await admin.post(f"/v1/queues/other/jobs/{job['id']}/cancel")).status_code == 404
    assert (await admin.post("/v1/queues/demo/jobs/demo.nothing/retry")).status_code == 404
    assert (await admin.post(f"/v1/queues/nope/jobs/{job['id']}/retry")).status_code == 404
    long = await admin.post(f"{url}/cancel", json={"reason": "x" * 501})
    assert long.status_code == 422
    assert (await admin.post(f"{url}/cancel", json={"why": "x"})).status_code == 422
    assert (await admin.delete(url, params={"reason": "x" * 501})).status_code == 422
    waiting = await admin.post(f"{url}/retry")
    assert waiting.status_code == 409 and "scheduled" in waiting.json()["detail"]
    assert (await alpha.post(f"{url}/cancel")).status_code == 403
    assert (await alpha.get(f"/v1/generations/{job['id']}")).json()["status"] == "scheduled"


# -- many jobs ---------------------------------------------------------------------------------


async def test_admin_jobs_bulk_with_ids(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, script: Script
) -> None:
    jobs = [(await create(alpha, delay_ms=LATER))["id"] for _ in range(3)]
    elsewhere = (await create(alpha, model="other/model", delay_ms=LATER))["id"]
    selection = [jobs[0], jobs[1], jobs[0], "demo.nothing", elsewhere, "not an id"]

    cancel = await admin.post("/v1/queues/demo/jobs/cancel", json={"ids": selection})
    assert cancel.json() == {"count": 2, "matched": 2}  # distinct ids of this queue's jobs
    again = await admin.post("/v1/queues/demo/jobs/cancel", json={"ids": jobs, "reason": "r"})
    assert again.json() == {"count": 1, "matched": 3}  # two had finished already

    retry = await admin.post("/v1/queues/demo/jobs/retry", json={"ids": [jobs[0], jobs[1]]})
    assert retry.json() == {"count": 2, "matched": 2}
    for job_id in jobs[:2]:
        assert (await finished(alpha, job_id))["status"] == "completed"

    delete = await admin.post("/v1/queues/demo/jobs/delete", json={"ids": jobs})
    assert delete.json() == {"count": 3, "matched": 3}
    gone = [(await alpha.get(f"/v1/generations/{job_id}")).status_code for job_id in jobs]
    assert gone == [404, 404, 404]
    assert (await alpha.get(f"/v1/generations/{elsewhere}")).json()["status"] == "scheduled"

    entries = await audit(admin, 4)
    assert [(e["action"], e["count"], e["reason"]) for e in entries] == [
        ("delete", 3, None), ("retry", 2, None), ("cancel", 1, "r"), ("cancel", 2, None),
    ]  # fmt: skip
    assert entries[0]["ids"] == jobs and entries[2]["ids"] == [jobs[2]]


async def test_admin_jobs_bulk_all_acts_on_the_matching_snapshot(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    of_alpha = [(await create(alpha, delay_ms=LATER))["id"] for _ in range(3)]
    of_beta = [(await create(beta, delay_ms=LATER))["id"] for _ in range(2)]

    body = {"all": True, "status": "scheduled", "tenant": "beta", "reason": "beta paused"}
    cancel = await admin.post("/v1/queues/demo/jobs/cancel", json=body)
    assert cancel.json() == {"count": 2, "matched": 2}
    counts = (await listing(admin))["counts"]
    assert (counts["scheduled"], counts["cancelled"]) == (3, 2)  # alpha's untouched

    scheduled = {"all": True, "status": "scheduled"}
    everyone = await admin.post("/v1/queues/demo/jobs/cancel", json=scheduled)
    assert everyone.json() == {"count": 3, "matched": 3}
    cancelled = {"all": True, "status": "cancelled"}
    delete = await admin.post("/v1/queues/demo/jobs/delete", json=cancelled)
    assert delete.json() == {"count": 5, "matched": 5}
    assert (await listing(admin))["jobs"] == []

    entries = await audit(admin, 3)
    assert [(e["action"], e["count"], e["reason"]) for e in entries] == [
        ("delete", 5, None), ("cancel", 3, None), ("cancel", 2, "beta paused"),
    ]  # fmt: skip
    assert sorted(entries[2]["ids"]) == sorted(of_beta)
    assert sorted(entries[0]["ids"]) == sorted(of_alpha + of_beta)


async def test_admin_jobs_bulk_retry_all_failed_of_a_tenant(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, admin: httpx.AsyncClient, script: Script
) -> None:
    failing = [await create(alpha, metadata={"fail": "boom"}) for _ in range(2)]
    theirs = await create(beta, metadata={"fail": "boom"})
    for job in [*failing, theirs]:
        assert (await finished(alpha if job in failing else beta, job["id"]))["status"] == "failed"
        script.healed.add(job["id"])
    body = {"all": True, "status": "dead", "tenant": "alpha"}
    retry = await admin.post("/v1/queues/demo/jobs/retry", json=body)
    assert retry.json() == {"count": 2, "matched": 2}
    for job in failing:
        assert (await finished(alpha, job["id"]))["status"] == "completed"
    assert (await beta.get(f"/v1/generations/{theirs['id']}")).json()["status"] == "failed"
    assert (await admin.get("/v1/queues/demo/dead")).json()["total"] == 1


async def test_admin_jobs_bulk_refuses_bad_selections(admin: httpx.AsyncClient) -> None:
    async def post(action: str, body: Any) -> httpx.Response:
        return await admin.post(f"/v1/queues/demo/jobs/{action}", json=body)

    bodies: list[dict[str, Any]] = [
        {},  # an empty body never means "everything"
        {"all": True},  # all needs a status
        {"ids": ["demo.x"], "all": True, "status": "failed"},
        {"ids": ["demo.x"], "status": "failed"},  # status selects with all only
        {"ids": ["demo.x"] * 1001},
        {"ids": [], "reason": "x" * 501},
        {"all": True, "status": "failed", "tenant": "no spaces"},
    ]
    for body in bodies:
        answer = await post("retry", body)
        assert answer.status_code == 422, body
        assert answer.json()["detail"]
    wrong = await post("cancel", {"all": True, "status": "completed"})
    assert wrong.status_code == 400 and "waiting, scheduled, active" in wrong.json()["detail"]
    assert (await post("delete", {"all": True, "status": "active"})).status_code == 400
    assert (await post("retry", {"all": True, "status": "bogus"})).status_code == 400
    assert (await admin.post("/v1/queues/nope/jobs/delete", json={"ids": []})).status_code == 404
    assert (await post("retry", {"ids": []})).json() == {"count": 0, "matched": 0}


# -- enqueue on a tenant's behalf --------------------------------------------------------------


async def test_admin_jobs_enqueue_for_a_tenant(
    alpha: httpx.AsyncClient,
    beta: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    anon: httpx.AsyncClient,
    script: Script,
) -> None:
    body = {"model": "demo/fast", "prompt": "hi", "tenant": "beta", "reason": "seed 001"}
    created = await admin.post("/v1/queues/demo/jobs", json=body, headers={"Idempotency-Key": "k"})
    assert created.status_code == 202, created.text
    job = created.json()
    assert set(job) == {
        "id", "status", "deduplicated", "events_url", "result_url", "watch_token",
        "watch_token_expires_at", "warnings",
    }  # fmt: skip
    assert job["warnings"] == []  # a key acts as beta
    assert created.headers["Location"] == f"/v1/generations/{job['id']}"
    assert (await finished(beta, job["id"]))["text"] == "t0 t1 t2 "  # the tenant's own job
    assert (await alpha.get(f"/v1/generations/{job['id']}")).status_code == 404
    watched = await anon.get(f"/v1/generations/{job['id']}", params={"token": job["watch_token"]})
    assert watched.status_code == 200  # the watch token is the tenant's
    replay = await admin.post("/v1/queues/demo/jobs", json=body, headers={"Idempotency-Key": "k"})
    assert (replay.status_code, replay.json()["id"]) == (200, job["id"])
    same = {"model": "demo/fast", "prompt": "hi"}
    mine = await beta.post("/v1/generations", json=same, headers={"Idempotency-Key": "k"})
    assert mine.json()["id"] == job["id"]  # the key is scoped to that tenant, as its own

    entries = await audit(admin, 2)
    assert [(e["action"], e["count"], e["ids"], e["reason"]) for e in entries] == [
        ("enqueue", 0, [job["id"]], "seed 001"),
        ("enqueue", 1, [job["id"]], "seed 001"),
    ]


async def test_admin_jobs_enqueue_refuses_bad_input_and_applies_limits(
    admin: httpx.AsyncClient,
) -> None:
    async def post(queue: str = "demo", **fields: Any) -> httpx.Response:
        body = {"model": "demo/fast", "prompt": "hi", "tenant": "gamma", **fields}
        return await admin.post(f"/v1/queues/{queue}/jobs", json=body)

    wrong_queue = await post("other")
    assert wrong_queue.status_code == 400 and "'demo'" in wrong_queue.json()["detail"]
    assert (await post(model="nope/none")).status_code == 422
    assert (await post(tenant="a b")).status_code == 422
    no_tenant = {"model": "demo/fast", "prompt": "hi"}
    assert (await admin.post("/v1/queues/demo/jobs", json=no_tenant)).status_code == 422
    assert (await post(priority=10)).status_code == 422
    assert (await post("nope")).status_code == 404
    assert (await post(delay_ms=LATER)).status_code == 202
    limited = await post(delay_ms=LATER)  # gamma may hold one generation in flight
    assert limited.status_code == 429 and limited.json()["detail"]


# -- the other audited actions take a reason too -----------------------------------------------


async def test_admin_jobs_dead_letter_and_cooldown_actions_keep_the_reason(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, script: Script
) -> None:
    job = await create(alpha, metadata={"fail": "boom"})
    await finished(alpha, job["id"])
    retried = await admin.post(f"/v1/queues/demo/dead/{job['id']}/retry", json={"reason": "one"})
    assert retried.json() == {"ok": True}
    await finished(alpha, job["id"])
    purge = await admin.post("/v1/queues/demo/dead/purge", json={"all": True, "reason": "two"})
    assert purge.json() == {"count": 1}
    await admin.delete("/v1/queues/demo/cooldown", params={"reason": "three"})
    entries = await audit(admin, 3)
    assert [(e["action"], e["reason"]) for e in entries] == [
        ("clear_cooldown", "three"), ("purge", "two"), ("retry", "one"),
    ]  # fmt: skip

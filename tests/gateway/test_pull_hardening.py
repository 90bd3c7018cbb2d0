"""Pull/ack hardening: typed results and chunks, readers that survive a bad record, redacted
nack errors, receipts bound to the key that pulled. A live gateway, real Redis."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gateway.access.auth import hash_key
from gateway.settings import Settings
from genq import JobStatus

from .conftest import (
    TENANT_KEYS,
    create,
    key_client,
    make_settings,
    queue_for,
    read_stream,
)
from .test_pull import KEY_WORKER, post, pull

pytestmark = pytest.mark.timeout(60)

KEY_SECOND_WORKER = "key-worker-second-5c02"
BAD_RESULTS: list[tuple[Any, list[str]]] = [
    ({"text": {"a": 1}}, ["body", "result", "text"]),
    ({"text": 5}, ["body", "result", "text"]),
    ({"text": "x", "finish_reason": 123}, ["body", "result", "finish_reason"]),
    ({"text": "x", "model": ["m"]}, ["body", "result", "model"]),
    ({"text": "x", "usage": {"completion_tokens": "x"}}, ["body", "result", "usage"]),
    ({"text": "x", "usage": {"prompt_tokens": True}}, ["body", "result", "usage"]),
    ({"text": "x", "usage": {"completion_tokens": -1}}, ["body", "result", "usage"]),
    ({"text": "x", "surprise": 1}, ["body", "result", "surprise"]),
    ({"model": "demo/fast"}, ["body", "result", "text"]),
    ("just text", ["body", "result"]),
]


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    """Two worker keys of the demo queue, the tenants' keys and an admin key."""
    worker = {"worker": True, "queues": ["demo"]}
    return make_settings(
        redis_url,
        prefix,
        api_keys={
            **TENANT_KEYS,
            f"sha256:{hash_key(KEY_WORKER)}": {"tenant": "gpu", **worker},
            f"sha256:{hash_key(KEY_SECOND_WORKER)}": {"tenant": "gpu", **worker},
        },
    )


worker = key_client("worker", KEY_WORKER)
second_worker = key_client("second_worker", KEY_SECOND_WORKER)


async def readers_answer(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, job_id: str
) -> dict[str, Any]:
    """Every reader of the record answers 200; returns the tenant's view of it."""
    record = await alpha.get(f"/v1/generations/{job_id}")
    assert record.status_code == 200, record.text
    result = await alpha.get(f"/v1/generations/{job_id}/result", params={"timeout": 0})
    assert result.status_code in (200, 202), result.text
    listing = await alpha.get("/v1/generations")
    assert listing.status_code == 200, listing.text
    assert job_id in [g["id"] for g in listing.json()["generations"]]
    jobs = await admin.get("/v1/queues/demo/jobs")
    assert jobs.status_code == 200, jobs.text
    assert job_id in [j["id"] for j in jobs.json()["jobs"]]
    one = await admin.get(f"/v1/queues/demo/jobs/{job_id}")
    assert one.status_code == 200, one.text
    response = await alpha.get(f"/v1/responses/resp_{job_id}")
    assert response.status_code == 200, response.text
    return dict(record.json())


async def test_pull_ack_with_a_mistyped_result_is_422_naming_the_field(
    alpha, admin, worker, redis, prefix
):
    created = await create(alpha)
    (job,) = await pull(worker, visibility=30)
    for result, loc in BAD_RESULTS:
        reply = await post(worker, job, "ack", result=result)
        assert reply.status_code == 422, (result, reply.text)
        assert loc in [problem["loc"][: len(loc)] for problem in reply.json()["detail"]], (
            result,
            reply.text,
        )
    assert (await queue_for(redis, prefix).get(created["id"])).status is JobStatus.ACTIVE
    await readers_answer(alpha, admin, created["id"])
    usage = {"prompt_tokens": 4, "completion_tokens": 2}
    reply = await post(worker, job, "ack", result={"text": "ok", "usage": usage})
    assert reply.json() == {"status": "completed"}
    record = await readers_answer(alpha, admin, created["id"])
    assert record["text"] == "ok"
    assert record["usage"] == {
        "prompt_tokens": 4,
        "completion_tokens": 2,
        "cached_tokens": 0,
        "total_tokens": 6,
        "cost_usd": 0.0,
        "estimated": False,
    }


async def test_pull_events_chunk_data_must_be_text(alpha, worker, redis, prefix):
    created = await create(alpha)
    (job,) = await pull(worker, visibility=30)
    for data in ({"a": 1}, 5, None, ["x"]):
        events = [{"type": "chunk", "data": "fine"}, {"type": "chunk", "data": data}]
        reply = await post(worker, job, "events", events=events)
        assert reply.status_code == 422, (data, reply.text)
        locs = [problem["loc"] for problem in reply.json()["detail"]]
        assert ["body", "events", 1, "chunk", "data"] in locs, reply.text
    reply = await post(worker, job, "events", events=[{"type": "progress", "data": True}])
    assert reply.status_code == 422
    assert await queue_for(redis, prefix).last_event(created["id"]) is None  # nothing appended


async def test_readers_tolerate_a_mistyped_result_in_a_record(alpha, admin, redis, prefix):
    """A record written before results were checked, or directly on a genq.Queue."""
    good = await create(alpha, prompt="good")
    bad = await create(alpha, prompt="bad")
    queue = queue_for(redis, prefix)
    pulled = {job.id: job for job in await queue.pull(2, 30)}
    await queue.push_events(bad["id"], pulled[bad["id"]].receipt, [("chunk", {"a": 1})])
    bad_result = {
        "text": {"a": 1},
        "model": 7,
        "finish_reason": 123,
        "usage": {"completion_tokens": "x"},
    }
    assert await queue.ack(bad["id"], pulled[bad["id"]].receipt, bad_result) == "completed"
    good_result = {"text": "fine", "model": "demo/fast", "finish_reason": "stop", "usage": None}
    assert await queue.ack(good["id"], pulled[good["id"]].receipt, good_result) == "completed"

    record = await readers_answer(alpha, admin, bad["id"])
    assert (record["status"], record["text"], record["answered_by"]) == ("completed", None, None)
    assert (record["finish_reason"], record["usage"]) == (None, None)
    listing = (await alpha.get("/v1/generations")).json()["generations"]
    shown = {g["id"]: g for g in listing}
    assert shown[good["id"]]["text"] == "fine" and shown[good["id"]]["answered_by"] == "demo/fast"
    response = (await alpha.get(f"/v1/responses/resp_{bad['id']}")).json()
    assert response["status"] == "completed" and response["output"][0]["content"][0]["text"] == ""


async def test_readers_tolerate_a_bare_text_result(alpha, admin, redis, prefix):
    created = await create(alpha)
    queue = queue_for(redis, prefix)
    (job,) = await queue.pull(1, 30)
    await queue.ack(job.id, job.receipt, "plain text")
    record = await readers_answer(alpha, admin, created["id"])
    assert record["text"] == "plain text"
    response = (await alpha.get(f"/v1/responses/resp_{created['id']}")).json()
    assert response["output"][0]["content"][0]["text"] == "plain text"


async def test_pull_nack_error_is_redacted(alpha, worker, redis, prefix):
    created = await create(alpha)
    (job,) = await pull(worker, visibility=30)
    secrets = ("sk-live0123456789abcdef", "eyJhbGciOiJIUzI1NiJ9", "hunter2pass", "qwertyuiop123")
    error = (
        f"upstream said: Incorrect API key provided: {secrets[0]}; "
        f"sent Authorization: Bearer {secrets[1]} to https://user:{secrets[2]}@proxy.test "
        f"with api_key={secrets[3]}"
    )
    reply = await post(worker, job, "nack", error=error, terminal=True)
    assert reply.json() == {"status": "failed"}
    record = await alpha.get(f"/v1/generations/{created['id']}")
    stream = await read_stream(alpha, created["id"])
    for shown in (record.text, str([e.data for e in stream.events])):
        assert "[REDACTED]" in shown
        for secret in secrets:
            assert secret not in shown
    assert record.json()["error"].startswith("upstream said: Incorrect API key provided: sk-")
    assert secrets[0] not in (await queue_for(redis, prefix).get(created["id"])).error


async def test_pull_receipt_works_only_for_the_key_that_pulled(
    alpha, admin, worker, second_worker, redis, prefix
):
    created = await create(alpha)
    (job,) = await pull(worker, visibility=30)
    queue = queue_for(redis, prefix)
    before = await queue.get(created["id"])
    actions = (
        ("events", {"events": [{"type": "chunk", "data": "x"}]}),
        ("extend", {"visibility": 3600}),
        ("ack", {"result": {"text": "stolen"}}),
        ("nack", {"error": "boom", "terminal": True}),
    )
    for client in (second_worker, admin):
        for action, body in actions:
            reply = await post(client, job, action, **body)
            assert reply.status_code == 403, (action, reply.text)
            assert "pulled by another key" in reply.json()["detail"]
    after = await queue.get(created["id"])
    assert (after.status, after.attempt) == (JobStatus.ACTIVE, before.attempt)
    assert await queue.last_event(created["id"]) is None
    # The key that pulled still may; a job an admin key pulled is the admin key's alone.
    assert (await post(worker, job, "ack", result={"text": "mine"})).json() == {
        "status": "completed"
    }
    other = await create(alpha, prompt="other")
    (held,) = await pull(admin, visibility=30)
    assert held["id"] == other["id"]
    assert (await post(worker, held, "ack", result={"text": "x"})).status_code == 403
    assert (await post(admin, held, "ack", result={"text": "x"})).status_code == 200

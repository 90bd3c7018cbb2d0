"""Pull/ack over HTTP: a live gateway, real Redis, no built-in worker on the queue."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from gateway.access.auth import hash_key
from gateway.pull.schemas import MAX_EVENTS_PER_CALL, MAX_PULL_JOBS, MAX_PULL_WAIT
from gateway.settings import Settings
from genq import JobStatus, visible_text
from genq_contract.api_keys import key_id_of
from genq_services.access import Access

from .conftest import (
    KEY_ADMIN,
    KEY_ALPHA,
    TENANT_KEYS,
    client_for,
    create,
    key_client,
    make_settings,
    queue_for,
    read_stream,
)

pytestmark = pytest.mark.timeout(60)

KEY_WORKER = "key-worker-9e1d77"
KEY_OTHER_WORKER = "key-worker-other-31aa"


def worker_key_settings(redis_url: str, prefix: str) -> Settings:
    """The gateway tests' settings, plus a worker key for each provider queue."""
    return make_settings(
        redis_url,
        prefix,
        api_keys={
            **TENANT_KEYS,
            f"sha256:{hash_key(KEY_WORKER)}": {
                "tenant": "gpu",
                "worker": True,
                "queues": ["demo"],
            },
            f"sha256:{hash_key(KEY_OTHER_WORKER)}": {
                "tenant": "gpu2",
                "worker": True,
                "queues": ["other"],
            },
        },
    )


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    return worker_key_settings(redis_url, prefix)


worker = key_client("worker", KEY_WORKER)


async def pull(client: httpx.AsyncClient, queue: str = "demo", **body: Any) -> list[dict[str, Any]]:
    response = await client.post(f"/v1/queues/{queue}/pull", json=body)
    assert response.status_code == 200, response.text
    return list(response.json()["jobs"])


async def post(client: httpx.AsyncClient, job: dict[str, Any], action: str, **body: Any):
    body.setdefault("receipt", job["receipt"])
    return await client.post(f"/v1/queues/demo/jobs/{job['id']}/{action}", json=body)


async def test_pull_streams_to_the_viewer_and_acks(alpha, worker):
    created = await create(alpha, prompt="one two three")
    (job,) = await pull(worker, max=5, visibility=30)
    assert (job["id"], job["attempt"]) == (created["id"], 1)
    assert job["payload"]["messages"][0]["content"] == "one two three"
    for word in ("one ", "two ", "three"):
        reply = await post(worker, job, "events", events=[{"type": "chunk", "data": word}])
        assert reply.status_code == 200 and reply.json() == {"cancel_requested": False}
    reply = await post(worker, job, "events", events=[{"type": "progress", "data": 1}])
    assert reply.status_code == 200
    result = {"text": "one two three", "model": "demo/fast", "finish_reason": "stop"}
    reply = await post(worker, job, "ack", result=result)
    assert reply.status_code == 200 and reply.json() == {"status": "completed"}
    stream = await read_stream(alpha, created["id"])
    assert [e.event for e in stream.events] == ["chunk"] * 3 + ["progress", "completed"]
    assert "".join(e.data for e in stream.events if e.event == "chunk") == "one two three"
    generation = (await alpha.get(f"/v1/generations/{created['id']}")).json()
    assert generation["status"] == "completed"


async def test_pull_events_resent_with_seq_append_once(alpha, worker):
    created = await create(alpha, prompt="x")
    (job,) = await pull(worker, visibility=30)
    events = [{"type": "chunk", "data": "one "}, {"type": "chunk", "data": "two"}]
    for _ in range(2):  # a client that timed out sends the same call again
        reply = await post(worker, job, "events", events=events, seq=1)
        assert reply.status_code == 200, reply.text
    assert (await post(worker, job, "events", events=events, seq=0)).status_code == 422
    reply = await post(worker, job, "ack", result={"text": "one two"})
    assert reply.status_code == 200
    stream = await read_stream(alpha, created["id"])
    assert "".join(e.data for e in stream.events if e.event == "chunk") == "one two"


async def test_pull_stale_receipt_is_409_and_changes_nothing(alpha, worker, redis, prefix):
    created = await create(alpha)
    (job,) = await pull(worker, visibility=30)
    queue = queue_for(redis, prefix)
    before = await queue.get(created["id"])
    inner, _, rest = job["receipt"].partition("~")
    _token, _, vis = inner.partition(".")
    forged = f"{'0' * 32}.{vis}~{rest}"  # a wrong token under the old signature
    for receipt in (forged, job["receipt"] + "x", "nonsense"):
        for action, body in (
            ("events", {"events": [{"type": "chunk", "data": "x"}]}),
            ("extend", {"visibility": 10}),
            ("ack", {"result": {"text": "x"}}),
            ("nack", {"error": "boom", "terminal": True}),
        ):
            reply = await post(worker, job, action, receipt=receipt, **body)
            assert reply.status_code == 409, (action, reply.text)
            assert "stale receipt" in reply.json()["detail"]
    after = await queue.get(created["id"])
    assert after.status is JobStatus.ACTIVE and after.attempt == before.attempt
    assert await queue.last_event(created["id"]) is None
    # A receipt is bound to its job: another job's id with it is stale too.
    other = await create(alpha, prompt="other")
    (second,) = await pull(worker)
    reply = await worker.post(
        f"/v1/queues/demo/jobs/{second['id']}/ack", json={"receipt": job["receipt"]}
    )
    assert reply.status_code == 409 and second["id"] == other["id"]
    assert (await post(worker, job, "ack", result={"text": "ok"})).json() == {"status": "completed"}
    assert (await post(worker, job, "ack", result={"text": "ok"})).json() == {"status": "completed"}


async def test_pull_unknown_queue_or_job_is_404(worker, admin):
    assert (await admin.post("/v1/queues/nope/pull", json={})).status_code == 404
    fake = {"id": "demo." + "0" * 32, "receipt": "r"}
    reply = await post(worker, fake, "ack")
    assert reply.status_code == 404 and "detail" in reply.json()


async def test_pull_expired_visibility_redelivers_with_restarted(alpha, worker):
    created = await create(alpha)
    (first,) = await pull(worker, visibility=1)
    await post(worker, first, "events", events=[{"type": "chunk", "data": "lost "}])
    await asyncio.sleep(1.2)
    late = await post(worker, first, "events", events=[{"type": "chunk", "data": "late"}])
    assert late.status_code == 409
    (second,) = await pull(worker, visibility=30)
    assert (second["id"], second["attempt"]) == (created["id"], 2)
    assert (await post(worker, first, "ack", result={"text": "zombie"})).status_code == 409
    await post(worker, second, "events", events=[{"type": "chunk", "data": "kept"}])
    assert (await post(worker, second, "ack", result={"text": "kept"})).status_code == 200
    stream = await read_stream(alpha, created["id"])
    assert [e.event for e in stream.events] == ["restarted", "chunk", "completed"]


async def test_pull_extend_holds_and_nack_retries(alpha, worker):
    created = await create(alpha)
    (job,) = await pull(worker, visibility=1)
    for _ in range(3):
        await asyncio.sleep(0.5)
        reply = await post(worker, job, "extend", visibility=1)
        assert reply.status_code == 200 and reply.json() == {"cancel_requested": False}
    reply = await post(worker, job, "nack", error="GPU busy", retry_after=0)
    assert reply.status_code == 200 and reply.json() == {"status": "scheduled"}
    (again,) = await pull(worker, wait=5)
    assert (again["id"], again["attempt"]) == (created["id"], 2)
    reply = await post(worker, again, "nack", error="bad input", terminal=True)
    assert reply.json() == {"status": "failed"}
    generation = (await alpha.get(f"/v1/generations/{created['id']}")).json()
    assert generation["status"] == "failed" and generation["error"] == "bad input"


async def test_pull_cancel_is_reported_to_the_puller(alpha, worker):
    created = await create(alpha)
    (job,) = await pull(worker)
    assert (await alpha.post(f"/v1/generations/{created['id']}/cancel")).status_code in (200, 202)
    reply = await post(worker, job, "events", events=[{"type": "chunk", "data": "x"}])
    assert reply.json() == {"cancel_requested": True}
    assert (await post(worker, job, "ack", result={"text": "x"})).json() == {"status": "cancelled"}


async def test_pull_long_poll_wakes_on_enqueue(live, alpha, worker, redis):
    started = time.monotonic()
    waiting = asyncio.create_task(pull(worker, wait=15))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    enqueued_at = time.monotonic()
    created = await create(alpha)
    (job,) = await asyncio.wait_for(waiting, 5)
    woke_after = time.monotonic() - enqueued_at
    assert job["id"] == created["id"]
    # Far below the 15 s wait (and the listener's 2 s BLPOP), wide for a loaded CI machine.
    assert woke_after < 3.0, f"the long poll answered {woke_after:.2f}s after the enqueue"
    assert time.monotonic() - started < 8
    # Nothing ready: the poll answers [] at the end of its wait, not before.
    started = time.monotonic()
    assert await pull(worker, wait=0.6) == []
    assert 0.55 <= time.monotonic() - started < 3


async def test_pull_long_polls_share_one_redis_connection(live, alpha, worker, redis):
    waiting = [asyncio.create_task(pull(worker, wait=10)) for _ in range(20)]
    # Sampled while the 20 requests wait: the listener re-issues its BLPOP every couple of
    # seconds, so one sample may fall between two; never more than one connection blocks.
    seen = []
    for _ in range(60):
        seen.append(sum(c["cmd"] == "blpop" for c in await redis.client_list()))
        await asyncio.sleep(0.05)
    assert max(seen) == 1, seen
    created = [await create(alpha, prompt=f"p{i}") for i in range(20)]
    results = await asyncio.wait_for(asyncio.gather(*waiting), 8)
    got = sorted(job["id"] for jobs in results for job in jobs)
    assert got == sorted(c["id"] for c in created)  # each job to exactly one puller


async def test_pull_limits_are_enforced(worker):
    url = "/v1/queues/demo/pull"
    for body in (
        {"max": 0},
        {"max": MAX_PULL_JOBS + 1},
        {"visibility": 0.5},
        {"visibility": 3601},
        {"wait": MAX_PULL_WAIT + 1},
        {"wait": -1},
        {"surprise": 1},
    ):
        reply = await worker.post(url, json=body)
        assert reply.status_code == 422, body
        assert "detail" in reply.json()
    job = {"id": "demo." + "0" * 32, "receipt": "r"}
    too_many = [{"type": "chunk", "data": "x"}] * (MAX_EVENTS_PER_CALL + 1)
    for action, body in (
        ("events", {"events": too_many}),
        ("events", {"events": []}),
        ("events", {"events": [{"type": "shout", "data": "x"}]}),
        ("extend", {"visibility": 7200}),
        ("nack", {"error": "x" * 2001}),
        ("nack", {"error": ""}),
        ("nack", {"error": "x", "retry_after": -1}),
    ):
        assert (await post(worker, job, action, **body)).status_code == 422, (action, body)
    huge = {"events": [{"type": "chunk", "data": "x" * 300_000}]}
    assert (await post(worker, job, "events", **huge)).status_code == 413


async def test_pull_progress_out_of_range_is_422(alpha, worker):
    await create(alpha)
    (job,) = await pull(worker)
    reply = await post(worker, job, "events", events=[{"type": "progress", "data": 2}])
    assert reply.status_code == 422


async def test_worker_key_only_pulls_its_queues(live, alpha, worker, admin, beta):
    created = await create(alpha)
    forbidden = [
        ("POST", "/v1/generations", {"model": "demo/fast", "prompt": "x"}),
        ("GET", f"/v1/generations/{created['id']}", None),
        ("GET", f"/v1/generations/{created['id']}/events", None),
        ("GET", "/v1/generations", None),
        ("GET", "/v1/queues", None),
        ("POST", "/v1/chat/completions", {"model": "demo/fast", "messages": []}),
        ("POST", "/v1/responses", {"model": "demo/fast", "input": "x"}),
        ("POST", "/v1/queues/other/pull", {}),
    ]
    for method, url, body in forbidden:
        reply = await worker.request(method, url, json=body)
        assert reply.status_code == 403, (method, url, reply.text)
        assert "worker key" in reply.text  # {"detail"}, or the OpenAI routes' {"error"}
    # A user key may not pull; an admin key may.
    assert (await beta.post("/v1/queues/demo/pull", json={})).status_code == 403
    (job,) = await pull(admin)
    assert job["id"] == created["id"]
    async with client_for(live, KEY_OTHER_WORKER) as other:
        assert (await post(other, job, "ack")).status_code == 403  # not its queue


async def test_pull_receipts_stop_at_once_when_revoked(live, alpha, worker, redis, prefix):
    first = await create(alpha, prompt="a")
    second = await create(alpha, prompt="b")
    jobs = await pull(worker, max=2)
    by_id = {job["id"]: job for job in jobs}
    access = Access(redis, prefix)
    await access.disable_tenant("gpu")
    reply = await post(worker, by_id[first["id"]], "ack", result={"text": "x"})
    assert reply.status_code == 403 and "disabled" in reply.json()["detail"]
    await access.enable_tenant("gpu")
    await access.revoke_key_ids([key_id_of(hash_key(KEY_WORKER))])
    # Even sent with an admin key: the key that pulled is revoked.
    async with client_for(live, KEY_ADMIN) as admin:
        reply = await post(admin, by_id[second["id"]], "ack", result={"text": "x"})
    assert reply.status_code == 403 and "revoked" in reply.json()["detail"]
    queue = queue_for(redis, prefix)
    assert (await queue.get(second["id"])).status is JobStatus.ACTIVE
    assert visible_text([e async for e in _events(queue, second["id"])]) == ""


async def _events(queue, job_id):
    entries = await queue.redis.xrange(queue.keys.events(job_id))
    from genq import decode_entry

    for entry_id, fields in entries:
        yield decode_entry(entry_id, fields, queue.result_codec)


async def test_pull_never_hands_out_a_revoked_keys_generation(alpha, worker, redis, prefix):
    created = [await create(alpha, prompt=f"p{i}") for i in range(2)]
    queue = queue_for(redis, prefix)
    key_id = key_id_of(hash_key(KEY_ALPHA))
    assert (await queue.get(created[0]["id"])).payload["key_id"] == key_id
    # Revoked without the sweep, as a gateway still caching the key would have accepted them.
    await Access(redis, prefix).revoke_key_ids([key_id])
    assert await pull(worker, max=5) == []
    for generation in created:
        record = await queue.get(generation["id"])
        assert record.status is JobStatus.FAILED
        assert record.error == f"API key {key_id} was revoked; the generation was not run"

"""POST/GET /v1/generations against a live gateway: validation, idempotency, tenant limits."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime

import httpx
import redis.asyncio as aioredis

from tests.gateway.conftest import (
    KEY_ADMIN,
    KEY_ALPHA,
    KEY_BETA,
    LiveGateway,
    Script,
    client_for,
    create,
    make_settings,
    queue_for,
)


async def test_generation_enqueue_then_read_the_record(
    alpha: httpx.AsyncClient, script: Script
) -> None:
    response = await alpha.post(
        "/v1/generations",
        json={"model": "demo/fast", "prompt": "hi", "metadata": {"gate": "g", "order": 7}},
    )
    assert response.status_code == 202
    created = response.json()
    assert created["id"].startswith("demo.")
    assert created["status"] == "waiting"
    assert created["deduplicated"] is False
    assert created["events_url"] == f"/v1/generations/{created['id']}/events"
    assert created["watch_token"]
    assert response.headers["location"] == f"/v1/generations/{created['id']}"

    await asyncio.wait_for(script.started_event(created["id"]).wait(), 5)
    record = (await alpha.get(f"/v1/generations/{created['id']}")).json()
    assert record["status"] == "active"
    assert record["model"] == "demo/fast"
    assert record["metadata"] == {"gate": "g", "order": 7}
    assert record["text"] is None
    assert record["progress"] is None  # the handler has reported none: not 0
    assert "tenant" not in record and "messages" not in record

    script.gate("g").set()
    done = (await alpha.get(f"/v1/generations/{created['id']}/result?timeout=5")).json()
    assert (done["status"], done["text"], done["finish_reason"]) == (
        "completed",
        "t0 t1 t2 ",
        "stop",
    )
    assert done["progress"] == 1.0


async def test_generation_scheduled_record_says_when_it_may_start(
    alpha: httpx.AsyncClient,
) -> None:
    created = await create(alpha, delay_ms=30_000)
    record = (await alpha.get(f"/v1/generations/{created['id']}")).json()
    assert record["status"] == "scheduled"
    assert 25 < record["retry_in"] <= 30
    assert record["run_at"] > record["created_at"] + 29


async def test_generation_run_at_schedules_at_an_absolute_instant(
    alpha: httpx.AsyncClient,
) -> None:
    instant = time.time() + 30
    as_text = datetime.fromtimestamp(instant, UTC).isoformat().replace("+00:00", "Z")
    for run_at in (as_text, instant):
        created = await create(alpha, run_at=run_at)
        assert created["status"] == "scheduled"
        record = (await alpha.get(f"/v1/generations/{created['id']}")).json()
        assert record["status"] == "scheduled"
        # Never before the instant (ms truncation aside); later by the time the request took.
        assert instant - 0.001 <= record["run_at"] < instant + 2
        assert 25 < record["retry_in"] <= 30


async def test_generation_days_ahead_is_scheduled_up_to_30_days(
    alpha: httpx.AsyncClient,
) -> None:
    day = 86_400
    in_two_days = time.time() + 2 * day
    for ahead in ({"delay_ms": 2 * day * 1000}, {"run_at": in_two_days}):
        response = await alpha.post(
            "/v1/generations", json={"model": "demo/fast", "prompt": "x", **ahead}
        )
        assert response.status_code == 202, (ahead, response.text)
        created = response.json()
        assert created["status"] == "scheduled"
        record = (await alpha.get(f"/v1/generations/{created['id']}")).json()
        assert record["status"] == "scheduled"
        assert abs(record["run_at"] - in_two_days) < 60
        assert 2 * day - 60 < record["retry_in"] <= 2 * day

    too_far = time.time() + 30 * day + 60
    for ahead, field in (
        ({"delay_ms": 30 * day * 1000 + 1}, "delay_ms"),
        ({"run_at": too_far}, "run_at"),
    ):
        response = await alpha.post(
            "/v1/generations", json={"model": "demo/fast", "prompt": "x", **ahead}
        )
        assert response.status_code == 422, (ahead, response.text)
        assert response.json()["detail"].startswith(f"{field} must be at most"), response.text


async def test_generation_run_at_in_the_past_starts_now(
    alpha: httpx.AsyncClient, script: Script
) -> None:
    created = await create(alpha, run_at="2001-02-03T04:05:06+02:00")
    assert created["status"] == "waiting"
    done = (await alpha.get(f"/v1/generations/{created['id']}/result?timeout=5")).json()
    assert done["status"] == "completed"


async def test_generation_run_at_is_fingerprinted_as_an_instant(
    alpha: httpx.AsyncClient,
) -> None:
    instant = int(time.time()) + 60
    first = await create(alpha, key="at", run_at=instant)
    same = await create(alpha, key="at", run_at=datetime.fromtimestamp(instant, UTC).isoformat())
    assert (same["id"], same["deduplicated"]) == (first["id"], True)
    later = await alpha.post(
        "/v1/generations",
        json={"model": "demo/fast", "prompt": "hello", "run_at": instant + 1},
        headers={"Idempotency-Key": "at"},
    )
    assert later.status_code == 422


async def test_generation_replay_with_same_key_and_body_returns_the_same_job(
    alpha: httpx.AsyncClient,
) -> None:
    body = {"model": "demo/fast", "messages": [{"role": "user", "content": "hi"}]}
    first = await alpha.post("/v1/generations", json=body, headers={"Idempotency-Key": "k-1"})
    # The same request in another form: key order, whitespace, prompt for one user message.
    replay = await alpha.post(
        "/v1/generations",
        content=json.dumps({"prompt": "hi", "model": "demo/fast"}, indent=2),
        headers={"Idempotency-Key": "k-1", "Content-Type": "application/json"},
    )
    assert (first.status_code, replay.status_code) == (202, 200)
    assert replay.json()["id"] == first.json()["id"]
    assert replay.json()["deduplicated"] is True
    record = (await alpha.get(f"/v1/generations/{first.json()['id']}")).json()
    assert record["idempotency_key"] == "k-1"


async def test_generation_same_key_with_another_body_is_422(alpha: httpx.AsyncClient) -> None:
    await create(alpha, prompt="one", key="k-2")
    other_prompt = await alpha.post(
        "/v1/generations",
        json={"model": "demo/fast", "prompt": "two"},
        headers={"Idempotency-Key": "k-2"},
    )
    other_model = await alpha.post(  # another provider, so another queue
        "/v1/generations",
        json={"model": "other/model", "prompt": "one"},
        headers={"Idempotency-Key": "k-2"},
    )
    other_attempts = await alpha.post(  # even the default's value: it was not asked for
        "/v1/generations",
        json={"model": "demo/fast", "prompt": "one", "max_attempts": 3},
        headers={"Idempotency-Key": "k-2"},
    )
    for response in (other_prompt, other_model, other_attempts):
        assert response.status_code == 422
        assert "different request body" in response.json()["detail"]


async def test_generation_keys_are_per_tenant(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient
) -> None:
    mine = await create(alpha, key="shared-key")
    theirs = await create(beta, key="shared-key")
    assert mine["id"] != theirs["id"]
    assert not theirs["deduplicated"]


async def test_generation_cancelled_job_releases_its_key(alpha: httpx.AsyncClient) -> None:
    first = await create(alpha, key="k-3", delay_ms=60_000)
    cancel = await alpha.post(f"/v1/generations/{first['id']}/cancel")
    assert cancel.json() == {"cancelled": True, "status": "cancelled"}
    again = await create(alpha, key="k-3", delay_ms=60_000)
    assert again["id"] != first["id"] and not again["deduplicated"]


async def test_generation_concurrent_posts_with_one_key_make_one_job(
    alpha: httpx.AsyncClient, redis: aioredis.Redis, prefix: str
) -> None:
    body = {"model": "demo/fast", "prompt": "once", "delay_ms": 60_000}
    headers = {"Idempotency-Key": "burst"}
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(
        base_url=str(alpha.base_url), headers=alpha.headers, limits=limits, timeout=30
    ) as client:
        responses = await asyncio.gather(
            *(client.post("/v1/generations", json=body, headers=headers) for _ in range(200))
        )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 199 + [202]
    assert len({r.json()["id"] for r in responses}) == 1
    stats = await queue_for(redis, prefix).stats()
    assert (stats.waiting, stats.scheduled) == (0, 1)


async def test_generation_max_attempts_is_per_request(
    alpha: httpx.AsyncClient, script: Script
) -> None:
    # attempt 1 asks for a retry: with one attempt it is dead, with the default it completes
    once = await create(alpha, max_attempts=1, metadata={"retry_once": True})
    default = await create(alpha, metadata={"retry_once": True})
    ceiling = await create(alpha, max_attempts=10, metadata={"retry_once": True})

    failed = (await alpha.get(f"/v1/generations/{once['id']}/result?timeout=5")).json()
    assert (failed["status"], failed["attempt"], failed["max_attempts"]) == ("failed", 1, 1)
    for created, expected in ((default, 3), (ceiling, 10)):
        done = (await alpha.get(f"/v1/generations/{created['id']}/result?timeout=5")).json()
        assert (done["status"], done["attempt"], done["max_attempts"]) == (
            "completed",
            2,
            expected,
        )


async def test_generation_max_attempts_ceiling_is_configured(redis_url: str, prefix: str) -> None:
    settings = make_settings(redis_url, prefix, max_attempts_ceiling=2)
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            body = {"model": "demo/fast", "prompt": "x"}
            above = await alpha.post("/v1/generations", json={**body, "max_attempts": 3})
            assert above.status_code == 422
            assert above.json()["detail"] == "max_attempts must be at most 2"
            at = await alpha.post("/v1/generations", json={**body, "max_attempts": 2})
            assert at.status_code == 202, at.text


async def test_generation_bad_input_is_a_clear_4xx(alpha: httpx.AsyncClient) -> None:
    cases = [
        ({"model": "nope/model", "prompt": "x"}, 422, "not available"),
        ({"model": "demo/fast"}, 422, "exactly one"),
        (
            {"model": "demo/fast", "prompt": "x", "messages": [{"role": "user", "content": "x"}]},
            422,
            "exactly one",
        ),
        ({"model": "demo/fast", "prompt": "x", "priority": 10}, 422, "less than or equal"),
        ({"model": "demo/fast", "prompt": "x", "priority": -1}, 422, "greater than"),
        ({"model": "demo/fast", "prompt": "x", "delay_ms": 2_592_000_001}, 422, "delay_ms"),
        ({"model": "demo/fast", "prompt": "x", "max_attempts": 11}, 422, "at most 10"),
        ({"model": "demo/fast", "prompt": "x", "run_at": 1, "delay_ms": 0}, 422, "not both"),
        ({"model": "demo/fast", "prompt": "x", "run_at": "2030-01-01T09:00:00"}, 422, "offset"),
        ({"model": "demo/fast", "prompt": "x", "run_at": "soon"}, 422, "RFC 3339"),
        ({"model": "demo/fast", "prompt": "x", "run_at": True}, 422, "epoch seconds"),
        ({"model": "demo/fast", "prompt": "x", "run_at": 4_102_444_800}, 422, "from now"),
        ({"model": "demo/fast", "prompt": "x", "max_attempts": 0}, 422, "greater than"),
        (
            {"model": "demo/fast", "prompt": "x", "params": {"api_base": "http://evil"}},
            422,
            "unsupported params",
        ),
        ({"model": "demo/fast", "prompt": "x", "surprise": 1}, 422, "Extra inputs"),
        ({"model": "demo/fast", "messages": [{"role": "wizard", "content": "x"}]}, 422, "role"),
    ]
    for body, status, hint in cases:
        response = await alpha.post("/v1/generations", json=body)
        assert response.status_code == status, (body, response.text)
        assert hint in json.dumps(response.json()["detail"]), (body, response.text)

    not_json = await alpha.post(
        "/v1/generations", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    nan = await alpha.post(
        "/v1/generations",
        content=b'{"model": "demo/fast", "prompt": "x", "metadata": {"n": NaN}}',
        headers={"Content-Type": "application/json"},
    )
    bad_key = await alpha.post(
        "/v1/generations",
        json={"model": "demo/fast", "prompt": "x"},
        headers={"Idempotency-Key": "has space"},
    )
    assert (not_json.status_code, nan.status_code, bad_key.status_code) == (422, 422, 422)


async def test_generation_oversized_body_is_413(alpha: httpx.AsyncClient) -> None:
    big = {"model": "demo/fast", "prompt": "x" * (300 * 1024)}
    declared = await alpha.post("/v1/generations", json=big)
    assert declared.status_code == 413
    assert "limit" in declared.json()["detail"]

    async def chunks():  # no Content-Length: the limit is enforced while reading
        yield b'{"model": "demo/fast", "prompt": "'
        for _ in range(40):
            yield b"y" * 8192
        yield b'"}'

    streamed = await alpha.post(
        "/v1/generations", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert streamed.status_code == 413
    assert "limit" in streamed.json()["detail"]


async def test_generation_without_a_valid_key_is_401(anon: httpx.AsyncClient) -> None:
    missing = await anon.post("/v1/generations", json={"model": "demo/fast", "prompt": "x"})
    wrong = await anon.post(
        "/v1/generations",
        json={"model": "demo/fast", "prompt": "x"},
        headers={"Authorization": "Bearer not-a-key"},
    )
    for response in (missing, wrong):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["detail"]


async def test_generation_enqueue_rate_is_limited_per_tenant(redis_url: str, prefix: str) -> None:
    settings = make_settings(redis_url, prefix, tenant_rate=0.2, tenant_burst=2)
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha, client_for(live, KEY_BETA) as beta:
            codes = [
                (await alpha.post("/v1/generations", json={"model": "demo/fast", "prompt": "x"}))
                for _ in range(3)
            ]
            assert [r.status_code for r in codes] == [202, 202, 429]
            assert 1 <= int(codes[2].headers["retry-after"]) <= 5
            assert "rate limit" in codes[2].json()["detail"]
            other = await beta.post("/v1/generations", json={"model": "demo/fast", "prompt": "x"})
            assert other.status_code == 202
            async with client_for(live, KEY_ADMIN) as admin:
                metrics = (await admin.get("/metrics")).text
            assert 'genq_requests_limited_total{limit="rate"} 1.0' in metrics


async def test_generation_jobs_in_flight_are_capped_per_tenant(redis_url: str, prefix: str) -> None:
    settings = make_settings(redis_url, prefix, tenant_max_in_flight=2)
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            body = {"model": "demo/fast", "prompt": "x", "delay_ms": 60_000}
            first = await alpha.post("/v1/generations", json=body)
            second = await alpha.post("/v1/generations", json=body)
            third = await alpha.post("/v1/generations", json=body)
            assert [r.status_code for r in (first, second, third)] == [202, 202, 429]
            assert "in flight" in third.json()["detail"]
            assert third.headers["retry-after"] == "1"

            await alpha.post(f"/v1/generations/{first.json()['id']}/cancel")
            fourth = await alpha.post("/v1/generations", json=body)
            assert fourth.status_code == 202


async def test_generation_is_queued_under_its_tenant_for_the_fair_share(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, redis: aioredis.Redis, prefix: str
) -> None:
    """Each tenant's jobs wait in the tenant's own line of the provider queue."""
    body = {"model": "demo/fast", "prompt": "hi", "delay_ms": 60_000}
    a = (await alpha.post("/v1/generations", json=body)).json()["id"]
    b = (await beta.post("/v1/generations", json=body)).json()["id"]
    queue = queue_for(redis, prefix)
    assert [(await queue.get(job_id)).tenant for job_id in (a, b)] == ["alpha", "beta"]  # type: ignore[union-attr]

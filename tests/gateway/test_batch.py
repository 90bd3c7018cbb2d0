"""POST /v1/generations:batch: each item accepted as a single POST would be, in order."""

from __future__ import annotations

import httpx
import pytest
import redis.asyncio as aioredis

from genq_client import APIError, AsyncClient, Client, Created
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, client_for, make_settings, queue_for

BATCH = "/v1/generations:batch"


def item(prompt: str, key: str | None = None, **extra: object) -> dict[str, object]:
    body: dict[str, object] = {"model": "demo/fast", "prompt": prompt, **extra}
    if key is not None:
        body["idempotency_key"] = key
    return body


async def test_batch_mixed_items_answer_in_order_with_207(alpha: httpx.AsyncClient) -> None:
    items = [
        item("one", "k-1"),
        item("bad model", model="nope/none"),
        {"model": "demo/fast"},  # neither prompt nor messages
        item("scheduled", priority=9, delay_ms=60_000),
        item("bad key", key="has space"),
    ]
    answer = await alpha.post(BATCH, json={"items": items})
    assert answer.status_code == 207, answer.text
    out = answer.json()["items"]
    assert len(out) == 5
    assert out[0]["status"] == "waiting" and not out[0]["deduplicated"]
    assert out[3]["status"] == "scheduled"
    for ok in (out[0], out[3]):
        assert ok["events_url"] == f"/v1/generations/{ok['id']}/events" and ok["watch_token"]
        record = await alpha.get(f"/v1/generations/{ok['id']}")
        assert record.status_code == 200
    assert [out[i]["error"]["status"] for i in (1, 2, 4)] == [422, 422, 422]
    assert "error" not in out[0] and "id" not in out[1]
    async with httpx.AsyncClient(base_url=str(alpha.base_url)) as anonymous:
        by_token = await anonymous.get(
            f"/v1/generations/{out[0]['id']}", params={"token": out[0]["watch_token"]}
        )
    assert by_token.status_code == 200  # the item's watch token is for its own generation


async def test_batch_all_valid_is_200_and_not_captured_by_the_id_route(
    alpha: httpx.AsyncClient,
) -> None:
    answer = await alpha.post(BATCH, json={"items": [item(f"p{n}") for n in range(100)]})
    assert answer.status_code == 200, answer.text
    ids = [i["id"] for i in answer.json()["items"]]
    assert len(set(ids)) == 100
    # The batch path is its own route: GET on it is not a generation lookup.
    assert (await alpha.get(BATCH)).status_code == 405


async def test_batch_over_100_items_or_empty_is_422(alpha: httpx.AsyncClient) -> None:
    over = await alpha.post(BATCH, json={"items": [item(f"p{n}") for n in range(101)]})
    assert over.status_code == 422
    assert (await alpha.post(BATCH, json={"items": []})).status_code == 422


async def test_batch_idempotency_key_replays_within_across_and_with_single_post(
    alpha: httpx.AsyncClient,
) -> None:
    first = await alpha.post(BATCH, json={"items": [item("same", "r-1"), item("same", "r-1")]})
    a, b = first.json()["items"]
    assert first.status_code == 200 and a["id"] == b["id"]
    assert (a["deduplicated"], b["deduplicated"]) == (False, True)
    again = await alpha.post(BATCH, json={"items": [item("same", "r-1"), item("new", "r-2")]})
    c, d = again.json()["items"]
    assert c["id"] == a["id"] and c["deduplicated"] and not d["deduplicated"]
    single = await alpha.post(
        "/v1/generations", json=item("same"), headers={"Idempotency-Key": "r-1"}
    )
    assert single.status_code == 200 and single.json()["id"] == a["id"]
    other_body = await alpha.post(BATCH, json={"items": [item("different", "r-1")]})
    assert other_body.status_code == 207
    assert other_body.json()["items"][0]["error"]["status"] == 422


async def test_batch_idempotency_keys_are_per_tenant(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient
) -> None:
    mine = (await alpha.post(BATCH, json={"items": [item("x", "shared")]})).json()["items"][0]
    theirs = (await beta.post(BATCH, json={"items": [item("x", "shared")]})).json()["items"][0]
    assert theirs["id"] != mine["id"] and not theirs["deduplicated"]
    assert (await beta.get(f"/v1/generations/{mine['id']}")).status_code == 404


async def test_batch_items_pay_the_tenant_limits_and_replays_do_not(
    redis_url: str, prefix: str
) -> None:
    settings = make_settings(
        redis_url, prefix, tenant_rate=0.001, tenant_burst=3, tenant_max_in_flight=100
    )
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as client:
            items = [item(f"p{n}", f"k{n}") for n in range(4)] + [item("p0", "k0")]
            answer = await client.post(BATCH, json={"items": items})
            assert answer.status_code == 207
            out = answer.json()["items"]
            assert [("id" in o) for o in out] == [True, True, True, False, True]
            assert out[3]["error"]["status"] == 429
            assert out[4]["id"] == out[0]["id"] and out[4]["deduplicated"]


async def test_batch_in_flight_cap_applies_per_item(redis_url: str, prefix: str) -> None:
    settings = make_settings(redis_url, prefix, tenant_max_in_flight=2)
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as client:
            answer = await client.post(BATCH, json={"items": [item(f"p{n}") for n in range(3)]})
            statuses = [o.get("error", {}).get("status", 202) for o in answer.json()["items"]]
            assert statuses == [202, 202, 429]


async def test_batch_client_generate_many_chunks_and_reports_per_item(live: LiveGateway) -> None:
    items = [item(f"p{n}", delay_ms=60_000) for n in range(150)]
    items[120] = item("bad", model="nope/none")
    items[149] = item("p0", "c-0", delay_ms=60_000)
    async with AsyncClient(live.url, KEY_ALPHA) as client:
        first = await client.generate("demo/fast", "p0", delay_ms=60_000, idempotency_key="c-0")
        out = await client.generate_many(items)
    assert len(out) == 150
    assert isinstance(out[120], APIError) and out[120].status == 422
    created = [o for o in out if isinstance(o, Created)]
    assert len(created) == 149 and len({c.id for c in created}) == 149
    assert out[149].id == first.id and out[149].deduplicated  # type: ignore[union-attr]


def test_batch_client_sync_generate_many(live: LiveGateway) -> None:
    with Client(live.url, KEY_ALPHA) as client:
        out = client.generate_many([item("a", "s-1"), item("a", "s-1")])
        assert isinstance(out[0], Created) and isinstance(out[1], Created)
        assert out[1].id == out[0].id and out[1].deduplicated
    with Client(live.url, "not-a-key") as stranger, pytest.raises(APIError) as refused:
        stranger.generate_many([item("a")])
    assert refused.value.status == 401


async def test_batch_of_100_keyed_items_is_a_few_enqueue_calls(
    alpha: httpx.AsyncClient, redis: aioredis.Redis, prefix: str
) -> None:
    sha = queue_for(redis, prefix).scripts.enqueue.sha.encode()
    old_threshold = (await redis.config_get("slowlog-log-slower-than"))["slowlog-log-slower-than"]
    old_len = (await redis.config_get("slowlog-max-len"))["slowlog-max-len"]
    await redis.config_set("slowlog-max-len", 100_000)
    await redis.config_set("slowlog-log-slower-than", 0)  # every command, with its arguments
    try:
        await redis.slowlog_reset()
        answer = await alpha.post(
            BATCH, json={"items": [item(f"p{n}", f"o-{n}") for n in range(100)]}
        )
        log = await redis.slowlog_get(100_000)
    finally:
        await redis.config_set("slowlog-log-slower-than", old_threshold)
        await redis.config_set("slowlog-max-len", old_len)
    assert answer.status_code == 200, answer.text
    out = answer.json()["items"]
    assert len({o["id"] for o in out}) == 100 and not any(o["deduplicated"] for o in out)
    enqueues = [
        entry
        for entry in log
        if entry["command"].startswith(b"EVALSHA " + sha) and prefix.encode() in entry["command"]
    ]
    assert 1 < len(enqueues) <= 10  # enqueue.lua per chunk of items, not per item
    for o in out:
        assert (await alpha.get(f"/v1/generations/{o['id']}")).json()["status"] == "waiting"


async def test_batch_replayed_whole_answers_200_with_the_same_generations(
    alpha: httpx.AsyncClient,
) -> None:
    items = [item(f"p{n}", f"again-{n}") for n in range(100)]
    first = await alpha.post(BATCH, json={"items": items})
    again = await alpha.post(BATCH, json={"items": items})
    assert (first.status_code, again.status_code) == (200, 200)
    before, after = first.json()["items"], again.json()["items"]
    assert [o["id"] for o in after] == [o["id"] for o in before]
    assert all(o["deduplicated"] for o in after) and not any(o["deduplicated"] for o in before)


async def test_batch_past_the_in_flight_cap_refuses_the_rest_and_refunds_their_quota(
    redis_url: str, prefix: str, redis: aioredis.Redis
) -> None:
    settings = make_settings(
        redis_url, prefix, tenant_limits={"alpha": {"daily_quota": 3, "max_in_flight": 2}}
    )
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as client:
            answer = await client.post(BATCH, json={"items": [item(f"p{n}") for n in range(4)]})
            out = answer.json()["items"]
            assert answer.status_code == 207
            assert [o.get("error", {}).get("status", 202) for o in out] == [202, 202, 429, 429]
            # One after another, items 3 and 4 meet the full cap (not the quota): each was
            # charged and refunded, so the day counts the two accepted only.
            assert all("in flight" in o["error"]["detail"] for o in out[2:])
            await client.post(f"/v1/generations/{out[0]['id']}/cancel")
            last = await client.post("/v1/generations", json=item("third"))
            assert last.status_code == 202, last.text
            assert "daily quota" in (await client.post("/v1/generations", json=item("x"))).text

"""A keyed ``POST /v1/generations`` with every tenant limit on (rate, in-flight, daily quota,
budget) makes one Redis round trip on a single server (issue 39): the replay lookup, the key's
claim, the limits and the budget reservation in one script, written together with the enqueue
and the claim's release. A refused one makes the same one, and enqueues nothing.

A round trip is counted where the gateway writes to a Redis socket (``asyncio.StreamWriter``):
a pipeline or calls written together are one write, whatever packed them. Only writes made
while the POST is being served count (a context variable set around the request: the tasks it
starts inherit it), not the gateway's background readers and sweeps.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from genq_contract.spend import DEMO_PRICE, prices_key
from tests.gateway import conftest
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, client_for, make_settings

SERVING = contextvars.ContextVar("serving", default=False)
BODY = {"model": "demo/fast", "prompt": "count me", "params": {"max_tokens": 16}}
SERVED = ("/v1/generations", "/v1/chat/completions")


class Served:
    """The gateway's app, marking the requests to ``/v1/generations`` as being served."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in SERVED:
            SERVING.set(True)  # this request's task (and what it starts) only
        await self.app(scope, receive, send)


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """Every Redis write made while a POST was served (its first bytes)."""
    seen: list[bytes] = []
    write, writelines = asyncio.StreamWriter.write, asyncio.StreamWriter.writelines

    def counted_write(self: asyncio.StreamWriter, data: Any) -> None:
        if SERVING.get():
            seen.append(bytes(data)[:120])
        write(self, data)

    def counted_writelines(self: asyncio.StreamWriter, data: Any) -> None:
        chunks = [bytes(chunk) for chunk in data]
        if SERVING.get():
            seen.append(b"".join(chunks)[:120])
        writelines(self, chunks)

    monkeypatch.setattr(asyncio.StreamWriter, "write", counted_write)
    monkeypatch.setattr(asyncio.StreamWriter, "writelines", counted_writelines)
    made = conftest.create_app
    monkeypatch.setattr(conftest, "create_app", lambda settings: Served(made(settings)))
    yield seen


async def test_admission_keyed_post_with_every_limit_takes_one_round_trip(
    redis_url: str, redis: aioredis.Redis, prefix: str, writes: list[bytes]
) -> None:
    await redis.hset(prices_key(prefix), "demo/fast", json.dumps(DEMO_PRICE.as_json()))
    settings = make_settings(
        redis_url,
        prefix,
        tenant_daily_quota=1000,
        tenant_budgets={"alpha": {"daily_usd": 1000.0}},
        key_cache_seconds=60,  # the default's kind: keys and revocations cached, not read per call
    )
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha:

            async def post(key: str) -> httpx.Response:
                return await alpha.post(
                    "/v1/generations", json=BODY, headers={"Idempotency-Key": key}
                )

            for n in range(2):  # the scripts loaded, the price seen
                assert (await post(f"warm-{n}")).status_code == 202
            writes.clear()
            answer = await post("counted")
            assert answer.status_code == 202, answer.text
            trips = list(writes)
            writes.clear()
            replayed = await post("counted")
    assert replayed.status_code == 200 and replayed.json()["id"] == answer.json()["id"]
    assert len(trips) == 1, trips
    # Every limit was charged: the daily count and the budget reservation are there.
    assert int(await redis.get(settings.keys.daily_count("alpha", _today())) or 0) == 3
    account = await redis.hgetall(settings.keys.budget("alpha"))
    assert f"r:{answer.json()['id']}".encode() in account
    assert await redis.zscore(settings.keys.in_flight("alpha"), answer.json()["id"]) is not None


async def test_admission_refused_post_takes_one_round_trip_and_enqueues_nothing(
    redis_url: str, redis: aioredis.Redis, prefix: str, writes: list[bytes]
) -> None:
    settings = make_settings(redis_url, prefix, tenant_daily_quota=1, key_cache_seconds=60)
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            assert (await alpha.post("/v1/generations", json=BODY)).status_code == 202
            listed = (await alpha.get("/v1/generations")).json()["generations"]
            writes.clear()
            refused = await alpha.post(
                "/v1/generations", json=BODY, headers={"Idempotency-Key": "over-quota"}
            )
            trips = list(writes)
            after = (await alpha.get("/v1/generations")).json()["generations"]
    assert refused.status_code == 429, refused.text
    assert len(trips) == 1, trips
    assert [g["id"] for g in after] == [g["id"] for g in listed]  # nothing enqueued
    assert int(await redis.get(settings.keys.daily_count("alpha", _today())) or 0) == 1
    claim = settings.keys.idempotency_claim("alpha:over-quota")
    assert await redis.exists(claim) == 0  # nor the key's claim left held


async def test_admission_resent_after_the_server_forgot_its_scripts_is_one_new_job(
    redis_url: str, redis: aioredis.Redis, prefix: str
) -> None:
    # The release script unknown to the server (a restart, a SCRIPT FLUSH), the admission and
    # the enqueue known: they ran, and the whole write is sent again once the release is loaded.
    settings = make_settings(redis_url, prefix, key_cache_seconds=60)
    with LiveGateway(settings) as live:
        gateway = live.gateway
        async with client_for(live, KEY_ALPHA) as alpha:
            assert (await alpha.post("/v1/generations", json=BODY)).status_code == 202
            await redis.script_flush()
            release = gateway.limiter.release_claim_script
            await redis.script_load(gateway.admission._script.script)
            await redis.script_load(gateway.queues.by_provider("demo").scripts.enqueue.script)
            assert (await redis.script_exists(release.sha)) == [False]
            answer = await alpha.post(
                "/v1/generations", json=BODY, headers={"Idempotency-Key": "resent"}
            )
            listed = (await alpha.get("/v1/generations")).json()["generations"]
    assert answer.status_code == 202, answer.text  # its own job: not a replay of it
    assert len(listed) == 2 and answer.json()["id"] in {g["id"] for g in listed}
    assert await redis.exists(settings.keys.idempotency_claim("alpha:resent")) == 0


async def test_chat_stream_reads_its_new_job_in_the_admissions_round_trip(
    redis_url: str, prefix: str, writes: list[bytes]
) -> None:
    """A streamed chat completion's first chunk needs its job's record (its id, creation, model):
    read in the same write as the admission and the enqueue, not in a round trip of its own
    (``genq.enqueue_admitted``'s ``read_back``). Counted up to the first chunk: the writes that
    run a script are one, and none reads the record on its own (``Queue.get``: HGETALL)."""
    settings = make_settings(redis_url, prefix, key_cache_seconds=60)
    body = {"model": "demo/fast", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha:

            async def first_chunk(key: str) -> dict[str, Any]:
                headers = {"Idempotency-Key": key}
                async with alpha.stream(
                    "POST", "/v1/chat/completions", json=body, headers=headers
                ) as answer:
                    assert answer.status_code == 200
                    async for line in answer.aiter_lines():
                        if line.startswith("data: "):
                            return dict(json.loads(line.removeprefix("data: ")))
                raise AssertionError("no chunk")

            await first_chunk("warm")  # the scripts loaded
            writes.clear()
            chunk = await first_chunk("counted")
            trips = list(writes)
    scripted = [w for w in trips if b"EVALSHA" in w]
    assert len(scripted) == 1, trips
    assert not [w for w in trips if w.startswith(b"*2\r\n$7\r\nHGETALL")], trips
    assert chunk["object"] == "chat.completion.chunk" and chunk["model"] == "demo/fast"
    assert chunk["choices"][0]["delta"]["role"] == "assistant"


def _today() -> str:
    import time

    return time.strftime("%Y-%m-%d", time.gmtime())

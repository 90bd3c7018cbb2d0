"""Durable acceptance through the gateway (GENQ_DURABLE_REPLICAS): 202 once a real replica holds
the generation, 503 with a clear detail when it does not confirm in time, and the retry with
the same Idempotency-Key returning the same generation once it is back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import redis.asyncio as aioredis

from gateway.errors import error_response
from gateway.openai.errors import openai_error_response
from genq import ReplicationTimeoutError
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, client_for, make_settings, queue_for
from tests.replicas import ReplicatedRedis

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def durable_live(pair: ReplicatedRedis, prefix: str) -> Iterator[LiveGateway]:
    settings = make_settings(pair.url, prefix, durable_replicas=1, durable_timeout=1.0)
    with LiveGateway(settings) as gateway:
        yield gateway


@pytest.fixture
async def client(durable_live: LiveGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(durable_live, KEY_ALPHA) as http:
        yield http


BODY = {"model": "demo/fast", "prompt": "keep me"}


async def test_durable_post_is_202_with_the_replica_and_503_then_same_id_without_it(
    pair: ReplicatedRedis, client: httpx.AsyncClient, primary: aioredis.Redis, prefix: str
) -> None:
    accepted = await client.post("/v1/generations", json=BODY, headers={"Idempotency-Key": "a"})
    assert accepted.status_code == 202, accepted.text
    with pair.replica_client() as replica:
        assert replica.exists(queue_for(primary, prefix).keys.job(accepted.json()["id"]))

    pair.stop_replica()
    refused = await client.post("/v1/generations", json=BODY, headers={"Idempotency-Key": "b"})
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "1"
    detail = refused.json()["detail"]
    assert "0 of 1 Redis replicas confirmed" in detail and "same Idempotency-Key" in detail
    written = await queue_for(primary, prefix).find("alpha:b")
    assert written is not None  # on the primary all the same

    await asyncio.to_thread(pair.restart_replica)
    again = await client.post("/v1/generations", json=BODY, headers={"Idempotency-Key": "b"})
    assert again.status_code == 200, again.text  # a replay: the generation the 503 wrote
    assert again.json()["id"] == written.id
    assert (await queue_for(primary, prefix).job_counts())["waiting"] == 2


async def test_durable_batch_items_answer_503_with_the_detail(
    pair: ReplicatedRedis, client: httpx.AsyncClient
) -> None:
    pair.stop_replica()
    items = [{**BODY, "idempotency_key": f"k-{n}"} for n in range(2)]
    answer = await client.post("/v1/generations:batch", json={"items": items})
    assert answer.status_code == 207, answer.text
    for entry in answer.json()["items"]:
        assert entry["error"]["status"] == 503
        assert "replicas confirmed" in entry["error"]["detail"]


async def test_durable_openai_route_answers_503_in_openais_shape(
    pair: ReplicatedRedis, client: httpx.AsyncClient
) -> None:
    pair.stop_replica()
    body = {"model": "demo/fast", "messages": [{"role": "user", "content": "hi"}]}
    answer = await client.post("/v1/chat/completions", json=body)
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["type"] == "server_error"
    assert "0 of 1 Redis replicas confirmed" in error["message"]


def test_replication_timeout_maps_to_one_503() -> None:
    exc = ReplicationTimeoutError(2, 1, ["demo.0123"])
    native = error_response(exc)
    assert native.status_code == 503 and b"1 of 2 Redis replicas" in bytes(native.body)
    assert openai_error_response(exc).status_code == 503

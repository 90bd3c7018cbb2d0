"""Batches survive their processes: a worker SIGKILLed in the middle of a batch, and a
gateway SIGKILLed in the middle of admitting one, lose no line and run none twice to
completion (live gateway and worker processes, the official ``openai`` SDK)."""

from __future__ import annotations

import io
import json
from typing import Any

import openai
import pytest
import redis
import redis.asyncio as aioredis

from genq import Queue
from genq_contract.keys import GatewayKeys
from genq_contract.lanes import batch_lane
from tests.e2e.browser import DEV_KEY, Stack, running_stack, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ENV = {
    "GENQ_LEASE": "2",
    "GENQ_BACKOFF": "0.05",
    "GENQ_MAX_BACKOFF": "0.2",
    "GENQ_MODELS": "demo/slow,demo/instant",
    "GENQ_PROVIDER_CONCURRENCY": json.dumps({"demo": 8}),
    "GENQ_BATCH_SHARE": "1",
    "GENQ_BATCH_POLL": "0.1",
}


def sdk(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key=DEV_KEY, max_retries=2)


def create(client: openai.OpenAI, model: str, count: int, params: dict[str, Any]) -> str:
    lines = [
        {
            "custom_id": f"line-{n}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": model, "messages": [{"role": "user", "content": f"n{n}"}], **params},
        }
        for n in range(count)
    ]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    upload = client.files.create(file=("b.jsonl", io.BytesIO(content)), purpose="batch")
    batch = client.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    return batch.id


def counts(client: openai.OpenAI, batch_id: str) -> tuple[str, int, int, int]:
    batch = client.batches.retrieve(batch_id)
    c = batch.request_counts
    assert c is not None
    return batch.status, c.total, c.completed, c.failed


async def lane_jobs(stack: Stack) -> dict[str, int]:
    redis = aioredis.from_url(stack.redis_url)
    try:
        lane = Queue(redis, prefix=batch_lane(f"{stack.namespace}:demo"))
        return await lane.job_counts()
    finally:
        await redis.aclose()


def output_rows(client: openai.OpenAI, file_id: str) -> list[dict[str, Any]]:
    content = client.files.content(file_id).content
    return [json.loads(row) for row in content.splitlines() if row.strip()]


async def test_batch_survives_a_killed_worker_with_every_line_completed_once(
    redis_url: str, request: pytest.FixtureRequest
) -> None:
    with running_stack(redis_url, request.node.name, **ENV) as stack:
        client = sdk(stack)
        batch_id = create(client, "demo/slow", 40, {"demo_tokens": 6, "demo_delay_ms": 100})
        wait_until(lambda: counts(client, batch_id)[2] >= 5, 60, "no line completed")
        stack.workers[0].kill()  # mid-batch: lines running, lines waiting
        stack.start_worker()
        wait_until(lambda: counts(client, batch_id)[0] == "completed", 120, stack.logs())
        assert counts(client, batch_id) == ("completed", 40, 40, 0)

        batch = client.batches.retrieve(batch_id)
        assert batch.output_file_id and batch.error_file_id is None
        rows = output_rows(client, batch.output_file_id)
        assert sorted(r["custom_id"] for r in rows) == sorted(f"line-{n}" for n in range(40))
        restarted = 0
        redis = aioredis.from_url(stack.redis_url)
        try:
            lane = Queue(redis, prefix=batch_lane(f"{stack.namespace}:demo"))
            for row in rows:
                job = await lane.get(row["response"]["request_id"])
                assert job is not None
                outcomes = [a.outcome for a in job.history]
                assert outcomes.count("completed") == 1, outcomes  # once to completion
                restarted += job.attempt > 1
                n = row["custom_id"].removeprefix("line-")
                text = row["response"]["body"]["choices"][0]["message"]["content"]
                assert text.startswith(f"Echo: n{n}") and text.count("Echo:") == 1
        finally:
            await redis.aclose()
        assert restarted >= 1, "the kill hit no running line"
        assert (await lane_jobs(stack)).get("completed") == 40


async def test_batch_survives_a_killed_gateway_mid_admission_with_no_line_twice(
    redis_url: str, request: pytest.FixtureRequest
) -> None:
    lines = 3000
    with running_stack(redis_url, request.node.name, **ENV) as stack:
        client = sdk(stack)
        batch_id = create(client, "demo/instant", lines, {"demo_tokens": 2})

        record = GatewayKeys(stack.namespace).batch(batch_id)
        plain = redis.Redis.from_url(stack.redis_url)

        def admitted() -> int:
            return int(plain.hget(record, "admitted") or 0)

        wait_until(lambda: admitted() > 0, 60, "admission did not start")
        assert stack.gateway is not None
        stack.gateway.kill()
        assert 0 < admitted() < lines, "the gateway was not killed mid-admission"
        plain.close()
        stack.start_gateway()
        client = sdk(stack)
        # the dead gateway's lease on the batch lapses, then the new one takes it over
        wait_until(lambda: counts(client, batch_id)[0] == "completed", 120, stack.logs())
        assert counts(client, batch_id) == ("completed", lines, lines, 0)
        jobs = await lane_jobs(stack)
        assert jobs.get("completed") == lines, jobs  # no line admitted twice
        rows = output_rows(client, client.batches.retrieve(batch_id).output_file_id or "")
        assert len({r["custom_id"] for r in rows}) == len(rows) == lines

"""GET /v1/usage: the queues' usage counters summed per day, tenant and model, with auth."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from genq import ActiveJob, Queue, RetryJobError
from tests.gateway.conftest import PROVIDERS, create

NANOS = 1_000_000_000


async def metered(job: ActiveJob) -> dict[str, Any]:
    """Meters what the request's metadata says; ``retry_once``: a first attempt that fails
    after using tokens (it counts too)."""
    meta = job.payload.get("metadata") or {}
    counts = {
        "prompt_tokens": int(meta.get("prompt", 0)),
        "completion_tokens": int(meta.get("completion", 0)),
        "cached_tokens": int(meta.get("cached", 0)),
        "cost_nanos": int(meta.get("cost_nanos", 0)),
    }
    if "reasoning" in meta:  # a worker meters reasoning tokens only when a provider reported some
        counts["reasoning_tokens"] = int(meta["reasoning"])
    job.meter(job.payload["model"], counts, estimated=bool(meta.get("estimated")))
    if meta.get("retry_once") and job.attempt == 1:
        raise RetryJobError("again", retry_after=0)
    await job.emit("ok")
    return {"text": "ok", "model": job.payload["model"], "finish_reason": "stop"}


@pytest.fixture
async def workers(redis: aioredis.Redis, prefix: str) -> AsyncIterator[dict[str, Queue]]:
    queues = {
        p: Queue(redis, prefix=f"{prefix}:{p}", backoff=0.01, max_backoff=0.02) for p in PROVIDERS
    }
    async with contextlib.AsyncExitStack() as stack:
        for queue in queues.values():
            await stack.enter_async_context(queue.worker(metered, concurrency=8))
        yield queues


async def run(client: httpx.AsyncClient, queues: dict[str, Queue], model: str, **meta: Any) -> str:
    job_id = (await create(client, model=model, metadata=meta))["id"]
    queue = queues[job_id.split(".")[0]]
    async with asyncio.timeout(10):
        while (job := await queue.get(job_id)) is None or job.finished_at is None:
            await asyncio.sleep(0.02)
    return str(job_id)


@pytest.fixture
async def spent(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, workers: dict[str, Queue]
) -> None:
    """alpha: two demo/fast generations (one retried: two attempts) and one other/model;
    beta: one demo/fast, estimated."""
    await run(alpha, workers, "demo/fast", prompt=10, completion=20, cost_nanos=300)
    await run(alpha, workers, "demo/fast", prompt=1, completion=2, cached=1, cost_nanos=40,
              retry_once=True)  # fmt: skip
    await run(alpha, workers, "other/model", prompt=100, completion=5, cost_nanos=5_000)
    await run(beta, workers, "demo/fast", prompt=7, completion=7, cost_nanos=70, estimated=True)


def counts(row: dict[str, Any]) -> tuple[Any, ...]:
    return (
        row["prompt_tokens"],
        row["completion_tokens"],
        row["cached_tokens"],
        round(row["cost_usd"] * NANOS),
        row["attempts"],
        row["estimated_attempts"],
    )


async def test_usage_of_the_callers_tenant_by_model_with_total(
    alpha: httpx.AsyncClient, spent: None
) -> None:
    answer = await alpha.get("/v1/usage")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    assert (body["tenant"], body["from"], body["to"], body["group_by"]) == (
        "alpha", today, today, ["model"]
    )  # fmt: skip
    rows = {row["model"]: row for row in body["data"]}
    assert set(rows) == {"demo/fast", "other/model"}
    assert (rows["demo/fast"]["day"], rows["demo/fast"]["tenant"]) == (None, None)
    assert counts(rows["demo/fast"]) == (12, 24, 2, 380, 3, 0)  # the retried attempt counts
    assert counts(rows["other/model"]) == (100, 5, 0, 5_000, 1, 0)
    assert counts(body["total"]) == (112, 29, 2, 5_380, 4, 0)


async def test_usage_grouped_by_day_and_tenant_for_admins(
    admin: httpx.AsyncClient, spent: None
) -> None:
    today = datetime.datetime.now(datetime.UTC).date()
    params = {
        "tenant": "*",
        "group_by": "day,tenant",
        "from": (today - datetime.timedelta(days=3)).isoformat(),
        "to": today.isoformat(),
    }
    body = (await admin.get("/v1/usage", params=params)).json()
    assert body["group_by"] == ["day", "tenant"]
    assert [(r["day"], r["tenant"], r["model"]) for r in body["data"]] == [
        (today.isoformat(), "alpha", None),
        (today.isoformat(), "beta", None),
    ]
    assert counts(body["data"][1]) == (7, 7, 0, 70, 1, 1)
    assert counts(body["total"]) == (119, 36, 2, 5_450, 5, 1)
    beta = await admin.get("/v1/usage", params={"tenant": "beta", "group_by": "tenant,model"})
    assert [(r["tenant"], r["model"]) for r in beta.json()["data"]] == [("beta", "demo/fast")]
    past = {"from": "2020-01-01", "to": "2020-01-31", "tenant": "*"}
    empty = (await admin.get("/v1/usage", params=past)).json()
    assert empty["data"] == [] and counts(empty["total"]) == (0, 0, 0, 0, 0, 0)


async def test_usage_sums_reasoning_tokens_where_providers_reported_them(
    alpha: httpx.AsyncClient, workers: dict[str, Queue]
) -> None:
    await run(alpha, workers, "demo/fast", prompt=3, completion=40, reasoning=25, cost_nanos=90)
    await run(alpha, workers, "demo/fast", prompt=2, completion=9, reasoning=4, cost_nanos=20,
              retry_once=True)  # fmt: skip
    await run(alpha, workers, "other/model", prompt=5, completion=5, cost_nanos=10)
    body = (await alpha.get("/v1/usage")).json()
    rows = {row["model"]: row for row in body["data"]}
    # Part of the completion tokens, not more of them: the retried attempt's count too.
    assert rows["demo/fast"]["reasoning_tokens"] == 25 + 4 + 4
    assert rows["demo/fast"]["completion_tokens"] == 40 + 9 + 9
    assert rows["other/model"]["reasoning_tokens"] == 0
    assert body["total"]["reasoning_tokens"] == 33


async def test_usage_of_another_tenant_is_for_admins_only(
    alpha: httpx.AsyncClient, anon: httpx.AsyncClient
) -> None:
    assert (await alpha.get("/v1/usage", params={"tenant": "beta"})).status_code == 403
    assert (await alpha.get("/v1/usage", params={"tenant": "*"})).status_code == 403
    assert (await alpha.get("/v1/usage", params={"tenant": "alpha"})).status_code == 200
    assert (await anon.get("/v1/usage")).status_code == 401


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"from": "2026-13-01"}, "from must be a date"),
        ({"to": "yesterday"}, "to must be a date"),
        ({"from": "2026-02-02", "to": "2026-02-01"}, "before"),
        ({"from": "2024-01-01", "to": "2026-01-01"}, "at most 400 days"),
        ({"group_by": "model,week"}, "group_by takes"),
    ],
)
async def test_usage_bad_query_is_422_with_detail(
    alpha: httpx.AsyncClient, params: dict[str, str], needle: str
) -> None:
    answer = await alpha.get("/v1/usage", params=params)
    assert answer.status_code == 422
    assert needle in answer.json()["detail"]

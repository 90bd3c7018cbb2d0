"""Tokens and cost on ``/metrics``: the queues' usage counters in Redis, read at each scrape.

Usage is metered the way a worker meters it (``ActiveJob.meter`` in a genq worker of each
provider's queue, settled by the queue), so the figures are what the queue counted; the
helpers here are shared with the CLI and browser tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from gateway.settings import Settings
from genq import ActiveJob, Queue, RetryJobError
from tests.gateway.conftest import KEY_ADMIN, LiveGateway, client_for

NANOS = 1_000_000_000


@dataclass(frozen=True)
class Metered:
    """One job whose attempts each meter ``counts`` under ``model`` as ``tenant``'s."""

    tenant: str
    model: str
    counts: dict[str, int] = field(default_factory=dict)
    provider: str = "demo"
    attempts: int = 1
    """Attempts before it completes: each one meters the counts again."""


async def _meter(job: ActiveJob) -> dict[str, Any]:
    meter = job.payload["meter"]
    job.meter(meter["model"], meter["counts"])
    if job.attempt < meter["attempts"]:
        raise RetryJobError("metered, try again", retry_after=0)
    return {"text": "metered"}


async def settle_usage(redis: aioredis.Redis, namespace: str, items: Iterable[Metered]) -> None:
    """Runs one job per item through a genq worker of its provider's queue, to the end."""
    items = list(items)
    async with contextlib.AsyncExitStack() as stack:
        queues: dict[str, Queue] = {}
        for provider in sorted({item.provider for item in items}):
            queue = Queue(redis, prefix=f"{namespace}:{provider}", backoff=0.01, max_backoff=0.05)
            await stack.enter_async_context(queue.worker(_meter, concurrency=8))
            queues[provider] = queue
        jobs = []
        for item in items:
            queue = queues[item.provider]
            meter = {"model": item.model, "counts": item.counts, "attempts": item.attempts}
            enqueued = await queue.enqueue({"meter": meter}, tenant=item.tenant)
            jobs.append((queue, enqueued.id))
        for queue, job_id in jobs:
            await queue.wait(job_id, timeout=15)


def tokens(prompt: int, completion: int, cached: int = 0, cost_usd: float = 0.0) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_tokens": cached,
        "cost_nanos": round(cost_usd * NANOS),
    }


async def scrape(url: str) -> dict[str, dict[tuple[str, ...], float]]:
    """``/metrics`` as {sample name: {label values: value}} for the usage families."""
    async with client_for_url(url) as http:
        response = await http.get("/metrics")
    assert response.status_code == 200, response.text
    samples: dict[str, dict[tuple[str, ...], float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name in ("genq_tokens_total", "genq_cost_usd_total"):
                keys = (
                    ("tenant", "model", "kind") if "kind" in sample.labels else ("tenant", "model")
                )
                labels = tuple(sample.labels[k] for k in keys)
                samples.setdefault(sample.name, {})[labels] = sample.value
    return samples


def client_for_url(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY_ADMIN}"})


async def test_usage_metrics_sum_every_queue_and_attempt(
    live: LiveGateway, settings: Settings, redis: aioredis.Redis, prefix: str
) -> None:
    before = await scrape(live.url)
    assert before.get("genq_tokens_total", {}) == {}

    await settle_usage(
        redis,
        prefix,
        [
            Metered("alpha", "demo/fast", tokens(10, 20, 0, 0.000_04)),
            Metered("alpha", "demo/fast", tokens(5, 7, 2, 0.000_01), attempts=2),
            Metered("beta", "other/model", tokens(100, 1, 50, 0.25), provider="other"),
            # The same tenant and model counted by two queues (a relay): one series, summed.
            Metered("beta", "other/model", tokens(1, 1, 0, 0.5), provider="demo"),
        ],
    )
    metrics = await scrape(live.url)
    assert metrics["genq_tokens_total"] == {
        ("alpha", "demo/fast", "prompt"): 10 + 2 * 5,
        ("alpha", "demo/fast", "completion"): 20 + 2 * 7,
        ("alpha", "demo/fast", "cached"): 2 * 2,
        ("beta", "other/model", "prompt"): 101,
        ("beta", "other/model", "completion"): 2,
        ("beta", "other/model", "cached"): 50,
    }
    assert metrics["genq_cost_usd_total"] == {
        ("alpha", "demo/fast"): 0.000_06,
        ("beta", "other/model"): 0.75,
    }

    # Read from Redis: another gateway process reports the same, having served nothing.
    with LiveGateway(settings) as other:
        assert await scrape(other.url) == metrics


async def test_usage_metrics_cap_their_series_and_keep_them(
    live: LiveGateway, redis: aioredis.Redis, prefix: str
) -> None:
    live.gateway.metrics.usage.limit = 2
    await settle_usage(
        redis,
        prefix,
        [
            Metered("alpha", "demo/fast", tokens(1, 1, 0, 0.3)),
            Metered("beta", "demo/fast", tokens(2, 2, 0, 0.2)),
            Metered("gamma", "demo/fast", tokens(4, 4, 0, 0.1)),
        ],
    )
    first = await scrape(live.url)
    # The two biggest spenders get series; the rest is summed under _other.
    assert first["genq_cost_usd_total"] == {
        ("alpha", "demo/fast"): 0.3,
        ("beta", "demo/fast"): 0.2,
        ("_other", "_other"): 0.1,
    }
    assert first["genq_tokens_total"][("_other", "_other", "prompt")] == 4

    # A newcomer that spends more does not take a series: each series only ever grows.
    await settle_usage(redis, prefix, [Metered("delta", "demo/fast", tokens(8, 8, 0, 5.0))])
    second = await scrape(live.url)
    assert second["genq_cost_usd_total"] == {
        ("alpha", "demo/fast"): 0.3,
        ("beta", "demo/fast"): 0.2,
        ("_other", "_other"): 5.1,
    }
    assert second["genq_tokens_total"][("_other", "_other", "completion")] == 12


async def test_usage_metrics_need_an_admin_key(live: LiveGateway) -> None:
    async with client_for(live, None) as anon:
        assert (await anon.get("/metrics")).status_code == 401

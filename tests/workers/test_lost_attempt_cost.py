"""What a killed attempt cost: a real worker process SIGKILLed mid-generation, its attempt
metered from what it streamed, charged to the tenant's budget and shown by the gateway.

Two ``python -m workers`` processes and a live gateway (in a thread) on one queue namespace: the
first streams 12 of a 40-token demo generation and is killed; the second takes the job over
(the first's presence lapses), meters the lost attempt and runs the job to its end.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from genq import Job, Queue, visible_text
from genq_contract.spend import DEMO_PRICE
from genq_services import budget
from genq_services.prices import publish_prices
from providers.costs import estimate_usage
from tests.faults.invariants import check_invariants
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, client_for, make_settings
from tests.workers.processes import WorkerChild, worker_children

pytestmark = pytest.mark.timeout(120)

MODEL = "demo/fast"
PROMPT = "tell a story"
TOKENS, KILLED_AFTER = 40, 12
BUDGET = {"alpha": {"daily_usd": 1.0, "monthly_usd": 10.0}}


@pytest.fixture
def namespace(prefix: str) -> str:
    return f"{prefix}-gen"


@pytest.fixture
def live(redis_url: str, namespace: str) -> Iterator[LiveGateway]:
    settings = make_settings(redis_url, namespace, models=[MODEL], tenant_budgets=BUDGET)
    with LiveGateway(settings) as gateway:
        yield gateway


@pytest.fixture
async def spawn(redis_url: str, prefix: str) -> AsyncIterator[Any]:
    env = {"GENQ_DEMO_FAULTS": "1", "GENQ_TENANT_BUDGETS": json.dumps(BUDGET)}
    async with worker_children(redis_url, prefix, **env) as start_child:

        async def start() -> WorkerChild:
            child = await start_child(GENQ_LEASE="30")  # the presence lapse is the takeover
            await child.wait_for_log("serving provider demo")
            return child

        yield start


async def streamed_tokens(queue: Queue, job_id: str, count: int) -> str:
    """Waits until the job's stream shows ``count`` tokens; returns that text."""
    events = []
    async with asyncio.timeout(30):
        async for event in queue.watch(job_id):
            events.append(event)
            if len(visible_text(events).split()) >= count:
                return visible_text(events)
    raise AssertionError("the stream ended early")


async def metered_lost(queue: Queue, job_id: str) -> Job:
    async with asyncio.timeout(20):
        while True:
            job = await queue.get(job_id)
            if job and job.finished_at and job.history and job.history[0].usage:
                return job
            await asyncio.sleep(0.1)


async def test_worker_killed_after_12_of_40_tokens_its_attempt_is_metered_charged_and_shown(
    spawn, live: LiveGateway, redis: aioredis.Redis, namespace: str
) -> None:
    await publish_prices(redis, namespace, {MODEL: DEMO_PRICE})
    queue = Queue(redis, prefix=f"{namespace}:demo")
    first = await spawn()
    async with client_for(live, KEY_ALPHA) as http:
        params = {"demo_tokens": TOKENS, "demo_delay_ms": 20, "demo_fault": "hang"}
        response = await http.post(
            "/v1/generations",
            json={"model": MODEL, "prompt": PROMPT, "params": {**params, "demo_after": 12}},
        )
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        lost_text = await streamed_tokens(queue, job_id, KILLED_AFTER)
        first.proc.send_signal(signal.SIGKILL)
        await first.wait_exit(5)
        await spawn()
        job = await metered_lost(queue, job_id)

        lost, last = job.history
        assert (lost.outcome, last.outcome) == ("lease_expired", "completed")
        messages = [{"role": "user", "content": PROMPT}]
        expected = estimate_usage(MODEL, messages, lost_text)
        assert lost.usage is not None and lost.usage["estimated"] is True
        assert lost.usage["completion_tokens"] == expected.completion_tokens
        assert KILLED_AFTER <= lost.usage["completion_tokens"] <= 2 * KILLED_AFTER
        assert lost.usage["prompt_tokens"] == expected.prompt_tokens > 0
        assert last.usage is not None
        for name in ("prompt_tokens", "completion_tokens", "cost_nanos"):
            assert job.usage is not None
            assert job.usage[name] == lost.usage[name] + last.usage[name] > 0

        report = (await http.get("/v1/usage")).json()["total"]
        assert (report["attempts"], report["estimated_attempts"]) == (2, 2)
        assert report["completion_tokens"] == job.usage["completion_tokens"]
        assert report["cost_usd"] == pytest.approx(job.usage["cost_nanos"] / 1e9)

    account = await budget.read_account(redis, namespace, "alpha")
    assert account.spent_day_nanos == lost.usage["cost_nanos"] + last.usage["cost_nanos"]
    assert (account.reserved_nanos, account.reservations) == (0, 0)
    await check_invariants(queue, [job_id])

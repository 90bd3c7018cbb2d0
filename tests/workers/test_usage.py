"""Usage and cost of every attempt, exactly once, and budget holds (workers/metering.py).

A real worker runs each generation against the fake OpenAI-compatible server (which reports
usage) or the demo provider (which does not); the tests read what settled in Redis: the job's
record and history, its terminal event, the queue's counters and the tenant's budget account.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from genq import Job, JobCancelledError, JobFailedError, Queue
from genq_contract.budget_limits import Limits
from genq_contract.payload import GenerationPayload
from genq_contract.spend import DEMO_PRICE, Price, Usage, max_cost_nanos
from genq_services import budget
from genq_services.prices import read_prices
from providers._litellm import litellm
from providers.costs import FREE, PriceBook, estimate_usage
from tests.fakes.openai_server import FakeOpenAI, Reply, reasoning_deltas
from tests.workers.conftest import events_of

OPENAI = "openai/gpt-4o-mini"
DEMO = "demo/fast"
TENANT = "acme"


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def gpt_4o_mini() -> Price:
    """The price in LiteLLM's bundled cost map, read here without the code under test."""
    entry = litellm.model_cost["gpt-4o-mini"]
    return Price(
        entry["input_cost_per_token"],
        entry["output_cost_per_token"],
        entry["cache_read_input_token_cost"],
    )


def counts(usage: dict[str, Any] | None) -> dict[str, int]:
    """A record's or an attempt's usage without its ``estimated`` flag."""
    assert usage is not None
    return {k: v for k, v in usage.items() if k != "estimated"}


def summed(*usages: Usage) -> dict[str, int]:
    return {k: sum(u.counts()[k] for u in usages) for k in usages[0].counts()}


class CachingOpenAI(FakeOpenAI):
    """The fake server, reporting ``cached`` of the prompt tokens as read from its cache
    (``usage.prompt_tokens_details.cached_tokens``, as OpenAI does)."""

    cached = 0

    async def _stream(self, record: Any, receive: Any, send: Any) -> None:
        async def send_with_cache(message: dict[str, Any]) -> None:
            body = message.get("body", b"")
            if message["type"] == "http.response.body" and b'"usage"' in body:
                chunk = json.loads(body.removeprefix(b"data: "))
                chunk["usage"]["prompt_tokens_details"] = {"cached_tokens": self.cached}
                message = {**message, "body": b"data: " + json.dumps(chunk).encode() + b"\n\n"}
            await send(message)

        await super()._stream(record, receive, send_with_cache)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with CachingOpenAI(default_tokens=5) as server:
        yield server


async def settled(queue: Queue, job_id: str) -> Job:
    await events_of(queue, job_id)
    job = await queue.get(job_id)
    assert job is not None
    return job


async def test_reported_usage_is_exact_with_cached_tokens_and_priced_from_the_cost_map(
    start_workers, fake_openai: CachingOpenAI
) -> None:
    fake_openai.cached = 2
    fake_openai.plan(Reply.stream(["The", " answer", " is", " 42."]))
    queue = (await start_workers()).queues["openai"]
    messages = user("what is the answer")  # the fake counts 4 prompt tokens (words)
    job = await queue.enqueue({"model": OPENAI, "messages": messages}, tenant=TENANT)
    events = await events_of(queue, job.id)
    record = await queue.get(job.id)
    assert record is not None

    price = gpt_4o_mini()
    cost = price.cost_nanos(4, 4, cached=2)
    assert cost == round((2 * 1.5e-7 + 2 * 7.5e-8 + 4 * 6e-7) * 1e9)  # the map's own numbers
    expected = Usage(4, 4, cached_tokens=2, cost_nanos=cost)
    assert record.result["usage"] == expected.as_json()
    assert record.usage == {**expected.counts(), "estimated": False}
    [attempt] = record.history
    assert attempt.label == OPENAI and attempt.outcome == "completed"
    assert attempt.usage == {**expected.counts(), "estimated": False}
    assert events[-1].type == "completed" and events[-1].usage == record.usage
    [row] = await queue.usage_totals(TENANT)
    assert (row.tenant, row.label) == (TENANT, OPENAI)
    assert row.counts == {**expected.counts(), "attempts": 1}


async def test_reasoning_tokens_are_charged_as_completion_tokens_and_shown(
    start_workers, fake_openai: CachingOpenAI
) -> None:
    thought = reasoning_deltas("First the units, then the sum.", piece=5)
    deltas = [*thought, {"content": "It is"}, {"content": " 7."}]
    fake_openai.plan(Reply.deltas_of(deltas, reasoning_tokens=5))
    queue = (await start_workers()).queues["openai"]
    job = await queue.enqueue(
        {"model": OPENAI, "messages": user("add three and four")}, tenant=TENANT
    )
    events = await events_of(queue, job.id)
    record = await queue.get(job.id)
    assert record is not None

    # The fake reports one completion token per delta it sent, the reasoning among them, and
    # 5 of them as reasoning: what is charged is the completion tokens, nothing on top.
    completion = len(deltas)
    cost = gpt_4o_mini().cost_nanos(4, completion)
    expected = Usage(4, completion, cost_nanos=cost, reasoning_tokens=5)
    assert record.result["reasoning"] == "First the units, then the sum."
    assert expected.counts()["reasoning_tokens"] == 5
    assert record.result["usage"] == expected.as_json()
    assert record.result["usage"]["reasoning_tokens"] == 5
    assert record.usage == {**expected.counts(), "estimated": False}
    assert record.history[0].usage == record.usage
    assert events[-1].type == "completed" and events[-1].usage == record.usage
    [row] = await queue.usage_totals(TENANT)
    assert row.counts == {**expected.counts(), "attempts": 1}


async def test_demo_usage_is_estimated_and_costs_the_demo_price(start_workers) -> None:
    queue = (await start_workers()).queues["demo"]
    params = {"demo_tokens": 30, "demo_delay_ms": 1}
    job = await queue.enqueue({"model": DEMO, "prompt": "count me", "params": params})
    result = await queue.wait(job.id, timeout=20)
    record = await queue.get(job.id)
    assert record is not None

    prompt = litellm.token_counter(model=DEMO, messages=user("count me"))
    completion = litellm.token_counter(model=DEMO, text=result["text"], count_response_tokens=True)
    assert prompt > 0 and completion >= 30
    cost = DEMO_PRICE.cost_nanos(prompt, completion)
    assert cost == round((prompt * 0.5e-6 + completion * 1.5e-6) * 1e9)
    expected = Usage(prompt, completion, cost_nanos=cost, estimated=True)
    assert result["usage"] == expected.as_json()
    assert record.usage == {**expected.counts(), "estimated": True}
    assert record.history[0].usage == record.usage


async def test_stop_meters_what_was_generated_before_it(start_workers, fake_openai) -> None:
    fake_openai.plan(Reply.stream([f"w{i} " for i in range(1000)], delay=0.02))
    queue = (await start_workers()).queues["openai"]
    job = await queue.enqueue({"model": OPENAI, "prompt": "a long story"}, tenant=TENANT)
    seen = 0
    async for event in queue.watch(job.id):
        seen += event.type == "chunk"
        if seen == 3:
            break
    assert await queue.cancel(job.id)
    with pytest.raises(JobCancelledError):
        await queue.wait(job.id, timeout=10)
    events = await events_of(queue, job.id)
    record = await queue.get(job.id)
    assert record is not None and record.usage is not None

    request = fake_openai.requests[0]
    assert await asyncio.to_thread(request.wait_disconnected, 3)
    watched = "".join(e.data for e in events if e.type == "chunk")
    sent = "".join(f"w{i} " for i in range(request.tokens_sent))
    low = estimate_usage(OPENAI, user("a long story"), watched)
    high = estimate_usage(OPENAI, user("a long story"), sent)
    # The provider never reported usage (no final chunk): the worker counted what arrived,
    # at least what watchers saw, at most what the provider sent.
    assert record.usage["estimated"] is True
    assert record.usage["prompt_tokens"] == low.prompt_tokens > 0
    assert low.completion_tokens <= record.usage["completion_tokens"] <= high.completion_tokens
    assert low.completion_tokens > 0
    price = gpt_4o_mini()
    assert record.usage["cost_nanos"] == price.cost_nanos(
        record.usage["prompt_tokens"], record.usage["completion_tokens"]
    )
    [attempt] = record.history
    assert attempt.outcome == "cancelled" and attempt.usage == record.usage
    assert events[-1].type == "cancelled" and events[-1].usage == record.usage
    [row] = await queue.usage_totals(TENANT)
    assert row.counts == {**counts(record.usage), "attempts": 1, "estimated_attempts": 1}


async def test_every_attempt_is_metered_once_and_the_counters_sum_them(
    start_workers, fake_openai
) -> None:
    fake_openai.plan(Reply.error(500))  # refused before any output: not billed
    fake_openai.plan(Reply.drop(after=3))  # three tokens, then the connection breaks
    fake_openai.plan(Reply.stream(["Fine", " now."]))
    queue = (await start_workers(max_attempts=3)).queues["openai"]
    job = await queue.enqueue({"model": OPENAI, "prompt": "try hard"}, tenant=TENANT)
    record = await settled(queue, job.id)
    assert record.result["text"] == "Fine now."
    assert fake_openai.count() == 3

    price = gpt_4o_mini()
    refused, dropped, done = record.history
    assert [a.outcome for a in record.history] == ["retry", "retry", "completed"]
    assert all(a.label == OPENAI for a in record.history)
    assert refused.usage == {**Usage().counts(), "estimated": False}
    estimate = estimate_usage(OPENAI, user("try hard"), "tok0 tok1 tok2 ")
    first = Usage(
        estimate.prompt_tokens,
        estimate.completion_tokens,
        cost_nanos=price.cost_nanos(estimate.prompt_tokens, estimate.completion_tokens),
        estimated=True,
    )
    assert dropped.usage == {**first.counts(), "estimated": True}
    last = Usage(2, 2, cost_nanos=price.cost_nanos(2, 2))  # the fake counts words
    assert done.usage == {**last.counts(), "estimated": False}
    assert record.result["usage"] == last.as_json()  # the result: the attempt that answered

    total = summed(first, last)
    assert record.usage == {**total, "estimated": True}
    [row] = await queue.usage_totals(TENANT)
    assert row.counts == {**total, "attempts": 3, "estimated_attempts": 1}


async def test_prices_are_published_at_start(redis, start_workers, prefix: str) -> None:
    await start_workers()
    prices = await read_prices(redis, f"{prefix}-gen", [OPENAI, DEMO, "demo/slow"])
    assert prices == {OPENAI: gpt_4o_mini(), DEMO: DEMO_PRICE, "demo/slow": DEMO_PRICE}


# -- budgets ----------------------------------------------------------------------------------


async def test_a_refused_hold_fails_the_job_at_once(
    redis, start_workers, fake_openai, prefix: str
) -> None:
    workers = await start_workers(tenant_budgets={TENANT: {"daily_usd": 0.0001}})
    queue = workers.queues["openai"]
    params = {"max_tokens": 1000}  # at most $0.0006 at gpt-4o-mini's price: past $0.0001
    job = await queue.enqueue({"model": OPENAI, "prompt": "hi", "params": params}, tenant=TENANT)
    with pytest.raises(JobFailedError, match="budget exceeded") as failed:
        await queue.wait(job.id, timeout=10)
    assert "daily budget" in str(failed.value)
    record = await queue.get(job.id)
    assert record is not None and record.attempt == 1  # terminal: no retry either
    # The request went out beside the hold (tests/workers/test_hold_beside_call.py): the
    # attempt costs its prompt at most, and nothing is charged to the budget it did not hold.
    assert fake_openai.count() == 1
    assert record.usage is not None and record.usage["completion_tokens"] == 0
    account = await budget.read_account(redis, f"{prefix}-gen", TENANT)
    assert (account.reservations, account.spent_day_nanos) == (0, 0)


async def test_each_attempt_is_charged_in_place_of_its_hold(
    redis, start_workers, fake_openai, prefix: str
) -> None:
    namespace = f"{prefix}-gen"
    workers = await start_workers(tenant_budgets={TENANT: {"daily_usd": 1.0}})
    queue = workers.queues["openai"]
    fake_openai.plan(Reply.drop(after=2))
    fake_openai.plan(Reply.stream(["Paid", " for."], delay=0.3))
    payload = {"model": OPENAI, "prompt": "charge me", "params": {"max_tokens": 50}}
    # The gateway reserves at enqueue; the first attempt adopts that reservation.
    hold = max_cost_nanos(GenerationPayload.parse(payload), gpt_4o_mini())
    job_id = f"openai.{time.time_ns():x}"
    limits = Limits.from_usd(1.0, None)
    await budget.reserve(redis, namespace, TENANT, job_id, hold, limits)
    await queue.enqueue(payload, job_id=job_id, tenant=TENANT)

    # The second attempt's first chunk is out: its hold (which runs beside the request) was
    # granted, and the attempt still streams.
    await asyncio.to_thread(fake_openai.wait_requests, 2, 10)
    async with asyncio.timeout(10):
        while "chunk" not in _after_restart(await queue.events_range(job_id)):
            await asyncio.sleep(0.01)
    account = await budget.read_account(redis, namespace, TENANT)
    assert account.reservations == 1 and account.reserved_nanos == hold  # the second attempt

    record = await settled(queue, job_id)
    assert record.usage is not None and len(record.history) == 2
    account = await budget.read_account(redis, namespace, TENANT)
    assert account.reservations == 0 and account.reserved_nanos == 0
    assert account.spent_day_nanos == record.usage["cost_nanos"] > 0
    assert record.usage["cost_nanos"] == sum(a.usage["cost_nanos"] for a in record.history)


def _after_restart(entries: list[Any]) -> list[str]:
    """The types of the events after the last ``restarted``: the latest attempt's."""
    types = [entry.type for entry in entries]
    if "restarted" not in types:
        return []
    return types[len(types) - types[::-1].index("restarted") :]


def test_a_model_without_a_price_costs_nothing_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    book = PriceBook()
    with caplog.at_level(logging.WARNING, logger="providers"):
        assert book.price("openai/no-such-model") == FREE
        assert book.price("openai/no-such-model") == FREE
    assert [r.getMessage() for r in caplog.records] == [
        "no price known for model openai/no-such-model: its usage costs 0"
    ]
    assert book.prices(["openai/no-such-model", OPENAI]) == {OPENAI: gpt_4o_mini()}

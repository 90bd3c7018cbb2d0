"""The budget hold runs beside the provider call, and gates the first delta (workers/metering.py,
workers/handler.py).

A real worker runs each generation against the fake OpenAI-compatible server. Where the test
needs the hold to be slow, the read of the tenant's limits (``budget.limits_for``, the hold's
first await) sleeps first: the provider call must go out meanwhile, and nothing of its stream
may reach the job's events before the hold is granted; a refused one fails the attempt with
the stream closed and nothing passed on; a hold granted after its attempt ended is charged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from genq import Job, Queue
from genq_services import budget
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.workers.conftest import events_of

OPENAI = "openai/gpt-4o-mini"
TENANT = "acme"
TOKENS = ["Held", " beside", " the", " call."]
HOLD_DELAY = 0.3


@dataclass
class SlowHold:
    """The hold's limits read, delayed; what the test saw when the delay ended."""

    queue: Queue
    fake: FakeOpenAI
    job_id: str = ""
    requests: int | None = None
    """Provider requests received when the delay ended."""
    tokens: int | None = None
    """Tokens the provider had sent when the delay ended."""
    chunks: int | None = None
    """Chunks in the job's stream when the delay ended."""
    done: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
def slow_hold(
    monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI
) -> Callable[[Queue], SlowHold]:
    """Makes the hold's first Redis read wait ``HOLD_DELAY`` seconds before it runs."""
    original: Callable[..., Awaitable[Any]] = budget.limits_for

    def make(queue: Queue) -> SlowHold:
        seen = SlowHold(queue, fake_openai)

        async def slow(redis: Any, settings: Any, tenant: str) -> Any:
            await asyncio.sleep(HOLD_DELAY)
            seen.requests = fake_openai.count()
            seen.tokens = sum(r.tokens_sent for r in fake_openai.requests)
            entries = await queue.events_range(seen.job_id)
            seen.chunks = sum(1 for e in entries if e.type == "chunk")
            try:
                return await original(redis, settings, tenant)
            finally:
                seen.done.set()

        monkeypatch.setattr(budget, "limits_for", slow)
        return seen

    return make


async def generate(queue: Queue, seen: SlowHold | None = None) -> Job:
    payload = {"model": OPENAI, "prompt": "hold me", "params": {"max_tokens": 50}}
    job = await queue.enqueue(payload, tenant=TENANT)
    if seen is not None:
        seen.job_id = job.id
    await events_of(queue, job.id)
    record = await queue.get(job.id)
    assert record is not None
    return record


async def test_hold_beside_call_sends_the_request_meanwhile_and_emits_only_after_it(
    redis: Any, start_workers: Any, fake_openai: FakeOpenAI, slow_hold: Any, prefix: str
) -> None:
    workers = await start_workers(tenant_budgets={TENANT: {"daily_usd": 1.0}})
    queue = workers.queues["openai"]
    seen = slow_hold(queue)
    fake_openai.plan(Reply.stream(TOKENS))  # all at once: well inside the hold's delay
    record = await generate(queue, seen)

    assert seen.requests == 1  # the provider had the request before the hold was done
    assert seen.tokens is not None and seen.tokens >= 1  # and had begun its answer
    assert seen.chunks == 0  # none of which was passed on before the hold was granted
    assert record.status.value == "completed", record.error
    assert record.result["text"] == "".join(TOKENS)
    # Granted: charged in place of the hold, exactly as before.
    account = await budget.read_account(redis, f"{prefix}-gen", TENANT)
    assert (account.reservations, account.reserved_nanos) == (0, 0)
    assert record.usage is not None
    assert account.spent_day_nanos == record.usage["cost_nanos"] > 0


async def test_hold_beside_call_refused_fails_closes_the_stream_and_emits_nothing(
    redis: Any, start_workers: Any, fake_openai: FakeOpenAI, prefix: str
) -> None:
    workers = await start_workers(tenant_budgets={TENANT: {"daily_usd": 0.0001}})
    queue = workers.queues["openai"]
    fake_openai.plan(Reply.hang(after=2))  # two tokens, then open until the worker leaves
    payload = {"model": OPENAI, "prompt": "hi", "params": {"max_tokens": 1000}}  # past $0.0001
    job = await queue.enqueue(payload, tenant=TENANT)
    events = await events_of(queue, job.id)

    record = await queue.get(job.id)
    assert record is not None and record.status.value == "failed"
    assert record.attempt == 1  # terminal: no retry
    assert record.error is not None
    assert record.error.startswith("budget exceeded: the tenant's daily budget is exhausted")
    assert [e.type for e in events] == ["failed"]  # nothing of the stream was passed on
    [request] = fake_openai.requests
    assert request.wait_disconnected(5)  # the upstream was closed, not left hanging
    # The provider had begun its answer: the attempt costs its prompt, charged to no budget.
    usage = record.usage
    assert usage is not None and usage["estimated"] is True
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] == 0
    account = await budget.read_account(redis, f"{prefix}-gen", TENANT)
    assert (account.reservations, account.spent_day_nanos) == (0, 0)


async def test_hold_beside_call_refused_wins_over_an_earlier_provider_error(
    start_workers: Any, fake_openai: FakeOpenAI, slow_hold: Any
) -> None:
    workers = await start_workers(tenant_budgets={TENANT: {"daily_usd": 0.0001}})
    queue = workers.queues["openai"]
    seen = slow_hold(queue)
    fake_openai.plan(Reply.error(500))  # retryable, and answered long before the hold
    payload = {"model": OPENAI, "prompt": "hi", "params": {"max_tokens": 1000}}
    job = await queue.enqueue(payload, tenant=TENANT)
    seen.job_id = job.id
    await events_of(queue, job.id)

    record = await queue.get(job.id)
    assert record is not None and record.status.value == "failed"
    assert record.attempt == 1  # the refusal, terminal, decided: the 500 was not retried
    assert record.error is not None and record.error.startswith("budget exceeded:")
    assert fake_openai.count() == 1
    assert record.usage is not None and record.usage["prompt_tokens"] == 0  # refused request


async def test_hold_beside_call_granted_after_a_stop_is_charged(
    redis: Any, start_workers: Any, fake_openai: FakeOpenAI, slow_hold: Any, prefix: str
) -> None:
    workers = await start_workers(tenant_budgets={TENANT: {"daily_usd": 1.0}})
    queue = workers.queues["openai"]
    seen = slow_hold(queue)
    fake_openai.plan(Reply.hang())  # no token: the stop lands before any delta
    payload = {"model": OPENAI, "prompt": "stop me", "params": {"max_tokens": 50}}
    job = await queue.enqueue(payload, tenant=TENANT)
    seen.job_id = job.id
    await asyncio.to_thread(fake_openai.wait_requests, 1, 10)
    assert not seen.done.is_set()  # the hold is still under way
    await queue.cancel(job.id)
    await events_of(queue, job.id)

    record = await queue.get(job.id)
    assert record is not None and record.status.value == "cancelled"
    assert record.usage is not None and record.usage["cost_nanos"] > 0  # the prompt, sent
    # The hold finished after its attempt was stopped (the stop does not wait for it): what it
    # reserved is charged all the same, not left open.
    await asyncio.wait_for(seen.done.wait(), 5)
    account = await charged(redis, f"{prefix}-gen")
    assert (account.reservations, account.reserved_nanos) == (0, 0)
    assert account.spent_day_nanos == record.usage["cost_nanos"]


async def charged(redis: Any, namespace: str, timeout: float = 5.0) -> budget.Account:
    """The tenant's account once something was charged to it (or as it is at ``timeout``)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        account = await budget.read_account(redis, namespace, TENANT)
        if account.spent_day_nanos or asyncio.get_running_loop().time() > deadline:
            return account
        await asyncio.sleep(0.01)

"""A provider that ignores ``max_tokens`` cannot overrun a budget: the worker stops the running
generation once its spend passes its hold plus ``GENQ_BUDGET_OVERRUN`` (workers/metering.py).

The demo provider plays that provider (its ``overrun`` fault, on only where the worker turns
faults on); a real worker runs it in this process, and the tests read what settled in Redis and
what the demo's stream did.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from genq import Job, JobFailedError, Queue
from genq_contract.payload import GenerationPayload
from genq_contract.spend import DEMO_PRICE, max_cost_nanos
from genq_services import budget
from providers import demo
from providers.costs import estimate_usage
from tests.workers.conftest import events_of

DEMO = "demo/fast"
TENANT = "acme"
PROMPT = "spend it all"
TOKENS = 400
PARAMS = {"max_tokens": 5, "demo_tokens": TOKENS, "demo_delay_ms": 1}
"""Far more tokens than ``max_tokens``: what a provider ignoring it would send."""
OVERRUN = {**PARAMS, "demo_fault": "overrun"}


@dataclass
class DemoStream:
    """One stream the demo provider opened: tokens it yielded, whether it was closed."""

    yielded: int = 0
    closed: bool = False


@pytest.fixture
def demo_streams(monkeypatch: pytest.MonkeyPatch) -> list[DemoStream]:
    """Every demo stream of the test, watched where LiteLLM calls the provider."""
    streams: list[DemoStream] = []
    original = demo.DemoLLM.astreaming

    async def watched(self: demo.DemoLLM, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        stream = DemoStream()
        streams.append(stream)
        try:
            async with contextlib.aclosing(original(self, *args, **kwargs)) as chunks:
                async for chunk in chunks:
                    stream.yielded += 1
                    yield chunk
        finally:
            stream.closed = True

    monkeypatch.setattr(demo.DemoLLM, "astreaming", watched)
    return streams


def held(params: dict[str, Any]) -> int:
    """What the budget holds for the generation (its most, were max_tokens obeyed)."""
    payload = GenerationPayload.parse({"model": DEMO, "prompt": PROMPT, "params": params})
    return max_cost_nanos(payload, DEMO_PRICE)


def cost_of(text: str) -> int:
    """What the worker meters for an attempt that streamed ``text`` (the demo reports none)."""
    usage = estimate_usage(DEMO, [{"role": "user", "content": PROMPT}], text)
    return DEMO_PRICE.cost_nanos(usage.prompt_tokens, usage.completion_tokens)


async def run(queue: Queue, params: dict[str, Any], tenant: str = TENANT) -> tuple[Job, str]:
    """Enqueues a generation, waits for its end: its record and the text watchers saw."""
    job = await queue.enqueue({"model": DEMO, "prompt": PROMPT, "params": params}, tenant=tenant)
    events = await events_of(queue, job.id, timeout=30)
    record = await queue.get(job.id)
    assert record is not None
    return record, "".join(e.data for e in events if e.type == "chunk")


@pytest.mark.parametrize("margin", [0.10, 0.5])
async def test_budget_overrun_stops_the_stream_fails_the_job_and_charges_what_it_spent(
    redis: Any, start_workers: Any, prefix: str, demo_streams: list[DemoStream], margin: float
) -> None:
    workers = await start_workers(
        tenant_budgets={TENANT: {"daily_usd": 1.0}}, demo_faults=True, budget_overrun=margin
    )
    queue = workers.queues["demo"]
    record, text = await run(queue, OVERRUN)

    assert record.status.value == "failed" and record.attempt == 1  # terminal: no retry
    assert record.error is not None and record.error.startswith("budget overrun:")
    assert "GENQ_BUDGET_OVERRUN" in record.error and "max_tokens" in record.error
    with pytest.raises(JobFailedError, match="budget overrun"):
        await queue.wait(record.id, timeout=5)
    # Stopped at the first delta past the ceiling: the text without it was within.
    ceiling = held(OVERRUN) * (1 + margin)
    assert record.usage is not None and record.usage["estimated"] is True
    spent = record.usage["cost_nanos"]
    assert spent == cost_of(text) > ceiling
    before_last = text[: text.rstrip(" ").rfind(" ") + 1]
    assert cost_of(before_last) <= ceiling
    # The budget was charged what was spent, and holds nothing any more.
    account = await budget.read_account(redis, f"{prefix}-gen", TENANT)
    assert (account.reservations, account.reserved_nanos) == (0, 0)
    assert account.spent_day_nanos == spent
    # The provider's stream was closed there, far from its end.
    [stream] = demo_streams
    assert stream.closed
    assert len(text.split()) <= stream.yielded < TOKENS


async def test_budget_overrun_spares_unbudgeted_and_bounded_generations(
    start_workers: Any, demo_streams: list[DemoStream]
) -> None:
    workers = await start_workers(
        tenant_budgets={TENANT: {"daily_usd": 1.0}}, demo_faults=True, budget_overrun=0.0
    )
    queue = workers.queues["demo"]
    # No budget, nothing held: no ceiling, whatever the provider sends.
    free, text = await run(queue, OVERRUN, tenant="unbudgeted")
    assert free.status.value == "completed"
    assert len(text.split()) == TOKENS
    # A budgeted generation whose provider stops at max_tokens stays within its hold.
    bounded, text = await run(queue, PARAMS)
    assert bounded.status.value == "completed", bounded.error
    assert bounded.result["finish_reason"] == "length"
    assert bounded.usage is not None and bounded.usage["cost_nanos"] <= held(PARAMS)
    assert [s.yielded for s in demo_streams] == [TOKENS + 1, PARAMS["max_tokens"] + 1]

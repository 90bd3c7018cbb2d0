"""Generations that return more than text: reasoning and tool calls, from a provider's stream
(the fake OpenAI server through LiteLLM) to the job's events and its record's result, which
fold to the same thing, also when the worker is killed in the middle of a call's arguments."""

from __future__ import annotations

import asyncio
import json
import signal
from typing import Any

import pytest

from genq import Event, Queue, visible_text
from genq_contract.transcript import Transcript
from tests.fakes.openai_server import FakeOpenAI, Reply, reasoning_deltas, tool_call_deltas
from tests.faults.invariants import check_invariants
from tests.workers.conftest import events_of
from tests.workers.processes import worker_children

OPENAI = "openai/gpt-4o-mini"
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("get_weather", "get_time")
]
THOUGHT = "Two cities: I need the weather of each, so two calls at once."
WEATHER = json.dumps({"city": "Paris", "days": list(range(30)), "note": 'naïve "quotes"'})
TIME = json.dumps({"zone": "Europe/Oslo"})
CALLS = [
    {"id": "call_w", "name": "get_weather", "arguments": WEATHER},
    {"id": "call_t", "name": "get_time", "arguments": TIME},
]


def answer(delay: float = 0.0) -> Reply:
    """Reasoning, a line of text, then two parallel tool calls in small pieces."""
    deltas = [*reasoning_deltas(THOUGHT), {"content": "Checking "}, {"content": "both."}]
    deltas += tool_call_deltas([(c["id"], c["name"], c["arguments"]) for c in CALLS], piece=2)
    return Reply.deltas_of(deltas, delay=delay, finish_reason="tool_calls", reasoning_tokens=21)


def payload() -> dict[str, Any]:
    messages = [{"role": "user", "content": "Weather in Paris, time in Oslo?"}]
    return {"model": OPENAI, "messages": messages, "params": {"tools": TOOLS}}


def since_last_restart(events: list[Event]) -> list[Event]:
    starts = [n for n, e in enumerate(events) if e.type == "restarted"]
    return events[starts[-1] + 1 :] if starts else events


def assert_one_whole_done_per_call(events: list[Event]) -> None:
    done = [e.data for e in since_last_restart(events) if e.type == "tool_done"]
    assert [(d["index"], d["id"], d["arguments"]) for d in done] == [
        (0, "call_w", WEATHER),
        (1, "call_t", TIME),
    ]


async def test_generation_with_reasoning_and_tool_calls_ends_in_its_result(
    start_workers, fake_openai: FakeOpenAI
) -> None:
    fake_openai.plan(answer())
    workers = await start_workers()
    queue = workers.queues["openai"]
    job = await queue.enqueue(payload())
    result = await queue.wait(job.id, timeout=20)
    assert result["tool_calls"] == CALLS
    assert result["reasoning"] == THOUGHT
    assert result["text"] == "Checking both."
    assert result["finish_reason"] == "tool_calls"
    assert result["usage"]["reasoning_tokens"] == 21

    events = await events_of(queue, job.id)
    folded = Transcript.of(events).as_json()
    assert {k: folded[k] for k in ("text", "reasoning", "tool_calls", "finish_reason")} == {
        "text": result["text"],
        "reasoning": result["reasoning"],
        "tool_calls": result["tool_calls"],
        "finish_reason": "tool_calls",
    }
    assert folded["usage"] == result["usage"]
    assert visible_text(events) == result["text"]
    assert_one_whole_done_per_call(events)
    pieces = sum(1 for e in events if e.type == "tool_args")
    assert pieces < (len(WEATHER) + len(TIME)) / 2  # argument pieces were merged
    assert fake_openai.requests[0].body["tools"] == TOOLS


async def test_text_only_result_keeps_its_shape(start_workers, fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(Reply.stream(["plain", " text"]))
    workers = await start_workers()
    queue = workers.queues["openai"]
    job = await queue.enqueue({"model": OPENAI, "prompt": "hi"})
    result = await queue.wait(job.id, timeout=20)
    assert set(result) == {"text", "model", "finish_reason", "usage"}
    events = await events_of(queue, job.id)
    types = [e.type for e in events]  # text events only (the first token may go out alone)
    assert types[-1] == "completed" and set(types[:-1]) == {"chunk"}
    assert visible_text(events) == "plain text"


@pytest.mark.timeout(90)
async def test_worker_killed_inside_a_calls_arguments_completes_each_call_once(
    redis: Any, redis_url: str, prefix: str, fake_openai: FakeOpenAI
) -> None:
    fake_openai.plan(answer(delay=0.02), times=2)
    env = {
        "GENQ_MODELS": OPENAI,
        "GENQ_PROVIDER_API_BASES": f"openai={fake_openai.base_url}",
        "GENQ_PROVIDER_API_KEY_ENVS": "openai=GENQ_TEST_OPENAI_KEY",
        "GENQ_TEST_OPENAI_KEY": "sk-test-worker-0123456789",
        "GENQ_LEASE": "2",
    }
    queue = Queue(redis, prefix=f"{prefix}-gen:openai")
    async with worker_children(redis_url, prefix, **env) as start:
        first = await start()
        await first.wait_for_log("serving provider openai")
        job = await queue.enqueue(payload())
        async with asyncio.timeout(30):  # a call's arguments have started, not ended
            async for event in queue.watch(job.id):
                if event.type == "tool_args" and event.data["index"] == 0:
                    break
        first.proc.send_signal(signal.SIGKILL)
        await first.wait_exit(5)
        so_far = [entry.type for entry in await queue.events_range(job.id)]
        assert "tool_args" in so_far and "tool_done" not in so_far

        second = await start()
        await second.wait_for_log("serving provider openai")
        events = await events_of(queue, job.id, timeout=40)

    result = events[-1].data
    assert events[-1].type == "completed"
    assert [e.type for e in events].count("restarted") == 1
    assert result["tool_calls"] == CALLS and result["reasoning"] == THOUGHT
    folded = Transcript.of(events)
    assert [c.model_dump() for c in folded.tool_calls] == CALLS
    assert (folded.text, folded.reasoning) == (result["text"], THOUGHT)
    assert_one_whole_done_per_call(events)
    assert (await queue.get(job.id)).attempt == 2
    await check_invariants(queue, [job.id], views={job.id: [events]})

"""The cross-provider proof: an Anthropic model's stream (Messages SSE: a ``thinking`` block, a
text block and a ``tool_use`` block whose input arrives as ``input_json_delta`` pieces, served
by respx) comes out of LiteLLM, the adapter and a worker as the same genq events, fold and
result as the same answer from the OpenAI-compatible fake. Anthropic's stream format:
https://docs.anthropic.com/en/docs/build-with-claude/streaming."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from genq import Event, Queue
from genq_contract.transcript import Transcript
from providers.litellm_adapter import Delta, stream_chat
from tests.fakes.openai_server import FakeOpenAI, Reply, tool_call_deltas
from tests.providers.test_typed_deltas import calls_of
from tests.workers.conftest import events_of
from workers.run import WorkerProcess
from workers.settings import WorkerSettings

ANTHROPIC = "anthropic/claude-sonnet-4-5"
OPENAI = "openai/gpt-4o-mini"
ANTHROPIC_BASE = "http://anthropic.test"
MESSAGES = [{"role": "user", "content": "What is the weather in Paris this week?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The forecast of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
THOUGHT = ["The user wants ", "a forecast: ", "I call get_weather."]
TEXT = "Let me check."
CALL_ID = "toolu_01A09q90qw90lq917835lq9"
ARGS = json.dumps({"city": "Paris", "days": [1, 2, 3], "note": 'quotes " and ünïcode'})
PIECE = 7


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def _block_delta(index: int, delta: dict[str, Any]) -> str:
    return _event(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


def anthropic_sse() -> bytes:
    """The answer as Anthropic streams it: thinking (with its signature), text, then the tool
    call, ``stop_reason: tool_use`` and the output tokens in ``message_delta``."""
    message = {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-sonnet-4-5",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 25, "output_tokens": 1},
    }
    out = [_event("message_start", {"type": "message_start", "message": message})]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
        (
            {"type": "thinking", "thinking": ""},
            [{"type": "thinking_delta", "thinking": p} for p in THOUGHT]
            + [
                {
                    "type": "signature_delta",
                    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl",
                }
            ],
        ),
        ({"type": "text", "text": ""}, [{"type": "text_delta", "text": TEXT}]),
        (
            {"type": "tool_use", "id": CALL_ID, "name": "get_weather", "input": {}},
            [
                {"type": "input_json_delta", "partial_json": ARGS[at : at + PIECE]}
                for at in range(0, len(ARGS), PIECE)
            ],
        ),
    ]
    for index, (start, deltas) in enumerate(blocks):
        block = {"type": "content_block_start", "index": index, "content_block": start}
        out.append(_event("content_block_start", block))
        out.extend(_block_delta(index, delta) for delta in deltas)
        out.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": "tool_use", "stop_sequence": None}
    out.append(
        _event(
            "message_delta",
            {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 89}},
        )
    )
    out.append(_event("message_stop", {"type": "message_stop"}))
    return "".join(out).encode()


def openai_answer() -> Reply:
    """The same answer from the OpenAI-compatible fake."""
    deltas = [{"reasoning_content": p} for p in THOUGHT] + [{"content": TEXT}]
    deltas += tool_call_deltas([(CALL_ID, "get_weather", ARGS)], piece=PIECE)
    return Reply.deltas_of(deltas, finish_reason="tool_calls")


@contextlib.contextmanager
def anthropic_served() -> Any:
    """respx answers Anthropic's Messages endpoint; every other request (the fake OpenAI
    server, on 127.0.0.1) goes through."""
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(f"{ANTHROPIC_BASE}/v1/messages").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=anthropic_sse()
            )
        )
        mock.route(host="127.0.0.1").pass_through()
        yield route


async def collect(model: str, api_base: str) -> list[Delta]:
    stream = stream_chat(
        model, MESSAGES, {"tools": TOOLS}, api_base=api_base, api_key="sk-test-0123456789"
    )
    async with contextlib.aclosing(stream):
        return [d async for d in stream]


def answer_of(deltas: list[Delta]) -> dict[str, Any]:
    """What a client puts together from the deltas: text, reasoning, calls, finish reason."""
    return {
        "text": "".join(d.text for d in deltas),
        "reasoning": "".join(d.reasoning for d in deltas),
        "tool_calls": calls_of(deltas),
        "finish_reason": [d.finish_reason for d in deltas if d.finish_reason],
    }


EXPECTED = {
    "text": TEXT,
    "reasoning": "".join(THOUGHT),
    "tool_calls": {0: {"id": CALL_ID, "name": "get_weather", "arguments": ARGS}},
    "finish_reason": ["tool_calls"],
}


async def test_anthropic_tool_call_streams_through_the_adapter_as_openais_does(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.plan(openai_answer())
    from_openai = await collect(OPENAI, fake_openai.base_url)
    with anthropic_served() as route:
        from_anthropic = await collect(ANTHROPIC, ANTHROPIC_BASE)

    assert answer_of(from_openai) == EXPECTED
    assert answer_of(from_anthropic) == EXPECTED
    assert len([d for d in from_anthropic if d.tool_calls]) > 5  # streamed, not given at the end
    [usage] = [d.usage for d in from_anthropic if d.usage]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (25, 89)
    # LiteLLM sent the Chat-format tools in Anthropic's own format.
    sent = json.loads(route.calls[0].request.content)
    assert sent["stream"] is True
    assert [(t["name"], t["input_schema"]) for t in sent["tools"]] == [
        ("get_weather", TOOLS[0]["function"]["parameters"])
    ]


@pytest.fixture
async def worker(
    redis: Any,
    redis_url: str,
    prefix: str,
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[WorkerProcess]:
    """A worker in this event loop serving both models: OpenAI's from the fake, Anthropic's
    from respx."""
    monkeypatch.setenv("GENQ_TEST_OPENAI_KEY", "sk-test-worker-0123456789")
    monkeypatch.setenv("GENQ_TEST_ANTHROPIC_KEY", "sk-ant-test-worker-0123456789")
    settings = WorkerSettings(
        redis_url=redis_url,
        queue_namespace=f"{prefix}-gen",
        models=[OPENAI, ANTHROPIC],
        provider_api_bases={"openai": fake_openai.base_url, "anthropic": ANTHROPIC_BASE},
        provider_api_key_envs={
            "openai": "GENQ_TEST_OPENAI_KEY",
            "anthropic": "GENQ_TEST_ANTHROPIC_KEY",
        },
        lease=10.0,
        backoff=0.05,
        max_backoff=0.2,
        silence_timeout=5.0,
        drain_deadline=2.0,
    )
    process = WorkerProcess.build(settings, redis)
    await process.start()
    try:
        yield process
    finally:
        await process.stop(deadline=0)


async def generate(queue: Queue, model: str) -> tuple[dict[str, Any], list[Event]]:
    job = await queue.enqueue({"model": model, "messages": MESSAGES, "params": {"tools": TOOLS}})
    result = await queue.wait(job.id, timeout=20)
    return result, await events_of(queue, job.id)


def kinds(events: list[Event]) -> list[str]:
    """The event types in order, a run of one type counted once (coalescing may merge pieces
    differently from one run to the next)."""
    runs: list[str] = []
    for event in events:
        if not runs or runs[-1] != event.type:
            runs.append(event.type)
    return runs


async def test_anthropic_tool_call_through_a_worker_gives_the_same_events_and_result(
    worker: WorkerProcess, fake_openai: FakeOpenAI
) -> None:
    fake_openai.plan(openai_answer())
    openai_result, openai_events = await generate(worker.queues["openai"], OPENAI)
    with anthropic_served() as route:
        anthropic_result, anthropic_events = await generate(worker.queues["anthropic"], ANTHROPIC)
    assert route.call_count == 1

    call = {"id": CALL_ID, "name": "get_weather", "arguments": ARGS}
    for result in (openai_result, anthropic_result):
        assert result["tool_calls"] == [call]
        assert json.loads(result["tool_calls"][0]["arguments"]) == json.loads(ARGS)
        assert result["reasoning"] == "".join(THOUGHT)
        assert result["text"] == TEXT
        assert result["finish_reason"] == "tool_calls"
    assert anthropic_result["model"] == ANTHROPIC
    usage = anthropic_result["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["estimated"]) == (
        25,
        89,
        False,
    )

    shown = ("text", "reasoning", "tool_calls", "finish_reason")
    openai_fold = Transcript.of(openai_events).as_json()
    anthropic_fold = Transcript.of(anthropic_events).as_json()
    assert {k: anthropic_fold[k] for k in shown} == {k: openai_fold[k] for k in shown}
    assert {k: anthropic_fold[k] for k in shown} == {k: anthropic_result.get(k) for k in shown}
    assert kinds(anthropic_events) == kinds(openai_events) == [
        "reasoning", "chunk", "tool_call", "tool_args", "tool_done", "completed"
    ]  # fmt: skip
    done = [e.data for e in anthropic_events if e.type == "tool_done"]
    assert done == [{"index": 0, **call}]

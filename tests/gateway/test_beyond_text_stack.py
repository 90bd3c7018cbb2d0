"""The native route beyond text against real processes: a gateway and a worker whose ``openai``
provider is the fake OpenAI server. A tool-call reply reaches the record, ``/result`` and the SSE
stream exactly; the worker publishes its models' capabilities and the gateway refuses, before
queueing, what a model is known not to take."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from genq_services.capabilities import capabilities_key
from tests.e2e.browser import DEV_KEY, Stack, fake_openai_env, running_stack
from tests.fakes.openai_server import (
    FakeOpenAI,
    Reply,
    function_tools,
    reasoning_deltas,
    tool_call_deltas,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

MODEL = "openai/gpt-4o-mini"
TOOLS = function_tools("get_weather", "get_time")
WEATHER = json.dumps({"city": "Paris", "note": 'naïve "quotes" {x}'})
TIME = json.dumps({"zone": "Europe/Oslo"})
THOUGHT = "Two tools, then an answer."


@pytest.fixture(scope="module")
def stack(redis_url: str, fake: FakeOpenAI, request: pytest.FixtureRequest) -> Iterator[Stack]:
    env = fake_openai_env(fake.base_url)
    with running_stack(redis_url, f"gateway-{request.module.__name__}", **env) as running:
        wait_for_capabilities(redis_url, running.namespace)
        yield running


def wait_for_capabilities(redis_url: str, namespace: str) -> None:
    """Until the worker published its models' capabilities: it serves right after."""
    with redis.Redis.from_url(redis_url) as client:
        deadline = time.monotonic() + 90
        while not client.hexists(capabilities_key(namespace), "demo/fast"):
            assert time.monotonic() < deadline, "the worker published no capabilities"
            time.sleep(0.1)


@pytest.fixture
def http(stack: Stack) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {DEV_KEY}"}
    with httpx.Client(base_url=stack.base_url, headers=headers, timeout=30) as client:
        yield client


def sse_events(http: httpx.Client, job_id: str, cursor: str | None = None) -> list[dict[str, Any]]:
    """The generation's SSE events until the stream ends: ``{id, event, data}`` each."""
    return list(sse_stream(http, job_id, cursor))


def sse_stream(
    http: httpx.Client, job_id: str, cursor: str | None = None
) -> Iterator[dict[str, Any]]:
    """The generation's SSE events as they arrive, until the stream ends (a test can act
    between two of them)."""
    headers = {"Last-Event-ID": cursor} if cursor else {}
    block: dict[str, Any] = {}
    with http.stream("GET", f"/v1/generations/{job_id}/events", headers=headers) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line:
                name, _, value = line.partition(":")
                block[name] = value.removeprefix(" ")
                continue
            if "data" in block:
                data = json.loads(block["data"])
                yield {"id": block.get("id"), "event": block["event"], "data": data}
            block = {}


def test_generation_tool_call_reply_shows_exactly_in_record_result_and_stream(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    deltas = [
        *reasoning_deltas(THOUGHT, piece=5),
        *tool_call_deltas([("call_w", "get_weather", WEATHER), ("call_t", "get_time", TIME)], 4),
    ]
    fake.plan(Reply.deltas_of(deltas, finish_reason="tool_calls", reasoning_tokens=7))
    messages = [{"role": "user", "content": "Weather in Paris, time in Oslo?"}]
    body = {"model": MODEL, "messages": messages, "params": {"tools": TOOLS}}
    created = http.post("/v1/generations", json=body)
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    result = http.get(f"/v1/generations/{job_id}/result", params={"timeout": 60})
    assert result.status_code == 200, result.text
    calls = [
        {"id": "call_w", "name": "get_weather", "arguments": WEATHER},
        {"id": "call_t", "name": "get_time", "arguments": TIME},
    ]
    for shown in (result.json(), http.get(f"/v1/generations/{job_id}").json()):
        assert shown["status"] == "completed"
        assert shown["tool_calls"] == calls
        assert shown["reasoning"] == THOUGHT
        assert shown["finish_reason"] == "tool_calls"
        assert shown["usage"]["reasoning_tokens"] == 7
    with fake._lock:
        sent = fake.requests[-1].body
    assert sent["tools"] == TOOLS

    events = sse_events(http, job_id)
    kinds = {e["event"] for e in events}
    assert {"reasoning", "tool_call", "tool_args", "tool_done", "completed"} <= kinds
    assert "".join(e["data"] for e in events if e["event"] == "reasoning") == THOUGHT
    done = [e["data"] for e in events if e["event"] == "tool_done"]
    assert [(d["id"], d["name"], d["arguments"]) for d in done] == [
        (c["id"], c["name"], c["arguments"]) for c in calls
    ]
    # Resumed from inside the first call's arguments: exactly the rest.
    inside = [i for i, e in enumerate(events) if e["event"] == "tool_args"][1]
    assert sse_events(http, job_id, events[inside]["id"]) == events[inside + 1 :]


def test_worker_published_capabilities_refuse_before_queueing(
    http: httpx.Client, stack: Stack, redis_url: str
) -> None:
    with redis.Redis.from_url(redis_url) as client:
        published = json.loads(client.hget(capabilities_key(stack.namespace), MODEL) or "{}")
    assert published["function_calling"] is True
    before = http.get("/v1/generations").json()["generations"]
    response = http.post(
        "/v1/generations", json={"model": "demo/fast", "prompt": "x", "params": {"tools": TOOLS}}
    )
    assert response.status_code == 400, response.text
    assert response.json()["detail"].startswith("params.tools: model 'demo/fast'")
    assert http.get("/v1/generations").json()["generations"] == before

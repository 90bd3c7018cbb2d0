"""The AI SDK's own client (npm ``ai``, pinned in tests/node's lockfile) against real processes:
a gateway, a worker whose ``openai`` provider is the fake OpenAI server, and ``demo/slow``.

``DefaultChatTransport.sendMessages``, ``reconnectToStream`` and ``readUIMessageStream`` read a
whole answer; resume after an aborted connection with the whole text once; Stop, which ends the
stream within a second and closes the provider's connection; a tool call and its output sent
back; a worker SIGKILLed mid-answer. ``make test`` installs the package (``npm ci``); a missing
install fails here, it never skips."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.browser import DEV_KEY, Stack, fake_openai_env, running_stack
from tests.fakes.openai_server import FakeOpenAI, Reply, function_tools, tool_call_deltas

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
MODEL = "openai/gpt-4o-mini"
SLOW = "demo/slow"
WEATHER = json.dumps({"city": "Paris"})
STACK_ENV = {"GENQ_LEASE": "2", "GENQ_BACKOFF": "0.05", "GENQ_MAX_BACKOFF": "0.2"}


@pytest.fixture(scope="module")
def stack(redis_url: str, fake: FakeOpenAI, request: pytest.FixtureRequest) -> Iterator[Stack]:
    env = {**fake_openai_env(fake.base_url), **STACK_ENV}
    with running_stack(redis_url, f"gateway-{request.module.__name__}", **env) as running:
        yield running


def run_ai_sdk(
    stack: Stack,
    scenario: str,
    options: dict[str, Any],
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Runs tests/node/ui_chat.mjs; its progress lines go to ``on_progress`` as they come."""
    node = shutil.which("node")
    assert node, "node is not installed (Node 20+ is needed for the npm `ai` tests)"
    assert (NODE_DIR / "node_modules" / "ai").is_dir(), (
        "the npm `ai` package is not installed: run `npm ci --prefix tests/node` (make test does)"
    )
    args = [node, str(NODE_DIR / "ui_chat.mjs"), stack.base_url, DEV_KEY, scenario]
    with subprocess.Popen(
        [*args, json.dumps(options)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        lines = []
        for line in process.stdout:
            said = json.loads(line)
            if "progress" in said and on_progress is not None:
                on_progress(said)
            lines.append(said)
        errors = process.stderr.read()
        assert process.wait(120) == 0, f"ui_chat.mjs {scenario} failed:\n{errors}"
    return dict(lines[-1])


def chunk_text(stack: Stack, generation_id: str) -> str:
    """The text of the generation's events (the native SSE stream), which a Stop leaves."""
    with stack.client() as client:
        body = client.get(f"/v1/generations/{generation_id}/events", timeout=30).text
    lines = body.split("\n")
    return "".join(
        json.loads(lines[i + 1].removeprefix("data: "))
        for i, line in enumerate(lines)
        if line == "event: chunk"
    )


def generation_of(message: dict[str, Any]) -> str:
    return str(message["metadata"]["genq"]["generationId"])


def test_ai_sdk_reads_a_whole_answer_and_reconnect_is_null_after(stack: Stack) -> None:
    out = run_ai_sdk(
        stack, "whole", {"chatId": "node-whole", "model": "demo/fast", "prompt": "hi from ai"}
    )
    message = out["message"]
    generation = generation_of(message)
    assert message["id"] == generation and message["role"] == "assistant"
    assert out["text"].startswith("Echo: hi from ai")
    assert out["text"] == stack.result(generation)["text"]
    assert out["types"][:3] == ["start", "start-step", "text-start"]
    assert out["types"][-3:] == ["text-end", "finish-step", "finish"]
    assert message["metadata"]["genq"]["status"] == "completed"
    assert message["metadata"]["genq"]["usage"]["completion_tokens"] > 0
    assert [p["type"] for p in message["parts"]] == ["step-start", "text"]
    assert out["reconnected"] is False, "reconnectToStream is null once it completed (204)"


def test_ai_sdk_resume_after_an_aborted_connection_has_the_whole_text_once(
    stack: Stack,
) -> None:
    options = {
        "chatId": "node-resume",
        "model": SLOW,
        "prompt": "resume me",
        "params": {"demo_tokens": 30, "demo_delay_ms": 60},
        "abortAfter": 20,
    }
    out = run_ai_sdk(stack, "resume", options)
    generation = generation_of(out["message"])
    record = stack.result(generation)
    assert len(out["before"]) >= 20 and out["text"].startswith(out["before"])
    assert out["text"] == record["text"], "the replay holds the whole text, once"
    assert out["text"].count("Echo: resume me") == 1
    assert record["attempt"] == 1, "the dropped connection cancelled nothing"
    assert [p["type"] for p in out["message"]["parts"]] == ["step-start", "text"]
    assert out["reconnected"] is False


def test_ai_sdk_stop_ends_the_stream_within_a_second_and_the_provider_call(
    stack: Stack, fake: FakeOpenAI
) -> None:
    fake.plan(Reply.stream([f"w{i} " for i in range(400)], delay=0.05))
    before = fake.count()
    options = {"chatId": "node-stop", "model": MODEL, "prompt": "go on", "stopAfter": 3}
    out = run_ai_sdk(stack, "stop", options)

    generation = generation_of(out["message"])
    assert out["stopped"]["status"] == 200
    assert out["stopped"]["body"] == {
        "generationId": generation,
        "cancelled": True,
        "status": "cancelled",
    }
    assert out["endedMs"] < 1000, out["endedMs"]
    assert out["types"][-2:] == ["abort", "finish"]
    assert out["message"]["metadata"]["genq"]["status"] == "cancelled"
    assert out["reconnected"] is False, "a resume after Stop is 204"
    assert fake.count() == before + 1
    assert fake.requests[-1].wait_disconnected(2), "the provider's connection was closed"
    assert stack.record(generation)["status"] == "cancelled"
    partial = chunk_text(stack, generation)
    assert partial.startswith(out["text"]) and len(out["text"]) >= len("w0 w1 w2 ")


def test_ai_sdk_tool_call_is_a_tool_part_and_its_output_goes_back(
    stack: Stack, fake: FakeOpenAI
) -> None:
    fake.plan(
        Reply.deltas_of(tool_call_deltas([("call_ui1", "get_weather", WEATHER)]), 0, "tool_calls")
    )
    fake.plan(Reply.stream(["It is ", "clear."]))
    options = {
        "chatId": "node-tool",
        "model": MODEL,
        "prompt": "Weather in Paris?",
        "tools": function_tools("get_weather"),
    }
    out = run_ai_sdk(stack, "tool", options)

    assert {"tool-input-start", "tool-input-delta", "tool-input-available"} <= set(out["first"])
    call = out["call"]
    assert (call["type"], call["toolCallId"], call["state"]) == (
        "tool-get_weather",
        "call_ui1",
        "input-available",
    )
    assert call["input"] == {"city": "Paris"}
    message = out["message"]
    kinds = [p["type"] for p in message["parts"]]
    assert kinds == ["step-start", "tool-get_weather", "step-start", "text"]
    assert message["parts"][1]["state"] == "output-available"
    assert message["parts"][-1]["text"] == "It is clear."
    assert message["id"] == out["message"]["id"]
    sent = fake.requests[-1].body["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == "call_ui1"
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert json.loads(sent[-2]["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert sent[-1]["role"] == "tool" and sent[-1]["tool_call_id"] == "call_ui1"
    assert json.loads(sent[-1]["content"]) == {"sky": "clear", "degrees": 21}


def test_ai_sdk_worker_killed_mid_answer_assembles_one_clean_text(stack: Stack) -> None:
    options = {
        "chatId": "node-restart",
        "model": SLOW,
        "prompt": "survive this",
        "params": {"demo_tokens": 24, "demo_delay_ms": 100},
        "readyAfter": 4,
    }

    def kill_the_worker(progress: dict[str, Any]) -> None:
        stack.workers[-1].kill()
        stack.start_worker()

    out = run_ai_sdk(stack, "restart", options, on_progress=kill_the_worker)

    generation = generation_of(out["message"])
    record = stack.result(generation)
    assert record["attempt"] == 2
    assert "reset-step" in out["types"] and "data-genq-restarted" in out["types"]
    texts = [p for p in out["message"]["parts"] if p["type"] == "text"]
    assert len(texts) == 1, out["message"]["parts"]
    assert out["text"] == record["text"]
    assert out["text"].count("Echo: survive this") == 1


def test_ai_sdk_routes_answer_the_transport_errors_it_shows(stack: Stack) -> None:
    with httpx.Client(base_url=stack.base_url, timeout=10) as anonymous:
        assert anonymous.post("/v1/ui/chat", json={}).status_code == 401
    with stack.client() as client:
        refused = client.post("/v1/ui/chat", json={"id": "x", "messages": [], "model": SLOW})
    assert refused.status_code == 422
    assert "messages" in json.dumps(refused.json()["detail"])

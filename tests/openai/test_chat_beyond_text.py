"""The official ``openai`` Python SDK against a live gateway + worker whose ``openai`` provider
is the fake OpenAI server: Chat Completions relays tool calls, tool answers, images,
structured output and reasoning, both ways."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from gateway.openai.objects import job_id_of
from tests.e2e.browser import DEV_KEY, Stack, fake_openai_env, running_stack
from tests.fakes.openai_server import (
    FakeOpenAI,
    Reply,
    function_tools,
    reasoning_deltas,
    tool_call_deltas,
)
from tests.openai.conftest import sdk_client
from tests.openai.test_node_sdk import run_node

pytestmark = pytest.mark.slow

MODEL = "openai/gpt-4o-mini"
REASONER = "openai/o3-mini"
USER = [{"role": "user", "content": "Weather in Paris, time in Oslo?"}]
TOOLS: list[Any] = function_tools("get_weather", "get_time", described=True)
WEATHER = json.dumps({"city": "Paris", "days": list(range(12)), "note": 'naïve "quotes" {x}'})
TIME = json.dumps({"zone": "Europe/Oslo"})
THOUGHT = "The user wants two things; I will call both tools."


@pytest.fixture(scope="module")
def stack(redis_url: str, fake: FakeOpenAI, request: pytest.FixtureRequest) -> Iterator[Stack]:
    env = fake_openai_env(fake.base_url)
    models = {"GENQ_MODELS": f"demo/fast,{MODEL},{REASONER}"}
    with running_stack(redis_url, f"openai-{request.module.__name__}", **env, **models) as running:
        yield running


@pytest.fixture
def client(stack: Stack) -> Iterator[openai.OpenAI]:
    with sdk_client(stack) as sdk:
        yield sdk


def tool_reply(calls: list[tuple[str, str, str]], piece: int = 3, **kwargs: Any) -> Reply:
    return Reply.deltas_of(
        tool_call_deltas(calls, piece=piece), finish_reason="tool_calls", **kwargs
    )


def reassembled(chunks: list[Any]) -> dict[int, dict[str, str]]:
    """The calls a client rebuilds from ``delta.tool_calls``: by index, id and name from the
    first piece, the arguments concatenated."""
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for piece in choice.delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                if piece.id:
                    assert not call["id"], "the id comes once, with the first piece"
                    call["id"], call["name"] = piece.id, piece.function.name
                    assert piece.type == "function"
                call["arguments"] += piece.function.arguments or ""
    return calls


def last_request(fake: FakeOpenAI) -> dict[str, Any]:
    with fake._lock:
        return dict(fake.requests[-1].body)


def test_chat_stream_relays_a_tool_call_that_reassembles_exactly(
    client: openai.OpenAI, fake: FakeOpenAI, stack: Stack
) -> None:
    fake.plan(tool_reply([("call_w1", "get_weather", WEATHER)]))
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=USER,
            tools=TOOLS,
            tool_choice="auto",
            parallel_tool_calls=False,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert reassembled(chunks) == {
        0: {"id": "call_w1", "name": "get_weather", "arguments": WEATHER}
    }
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None
    sent = last_request(fake)
    assert sent["tools"] == TOOLS
    assert (sent["tool_choice"], sent["parallel_tool_calls"]) == ("auto", False)
    native = stack.result(job_id_of(chunks[0].id))
    assert native["tool_calls"] == [{"id": "call_w1", "name": "get_weather", "arguments": WEATHER}]


def test_chat_stream_helper_and_two_parallel_calls(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    fake.plan(tool_reply([("call_a", "get_weather", WEATHER), ("call_b", "get_time", TIME)], 2))
    with client.chat.completions.stream(model=MODEL, messages=USER, tools=TOOLS) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("call_a", "get_weather", WEATHER),
        ("call_b", "get_time", TIME),
    ]


def test_chat_completion_without_stream_has_message_tool_calls(
    client: openai.OpenAI, fake: FakeOpenAI
) -> None:
    deltas = reasoning_deltas(THOUGHT) + tool_call_deltas(
        [("call_a", "get_weather", WEATHER), ("call_b", "get_time", TIME)]
    )
    fake.plan(Reply.deltas_of(deltas, finish_reason="tool_calls", reasoning_tokens=17))
    completion = client.chat.completions.create(model=MODEL, messages=USER, tools=TOOLS)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert [c.model_dump() for c in choice.message.tool_calls or []] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "get_weather", "arguments": WEATHER},
        },
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": TIME}},
    ]
    assert getattr(choice.message, "reasoning_content", None) == THOUGHT
    assert completion.usage is not None and completion.usage.completion_tokens_details is not None
    assert completion.usage.completion_tokens_details.reasoning_tokens == 17


def test_chat_stream_sends_reasoning_apart_from_the_text(
    client: openai.OpenAI, fake: FakeOpenAI
) -> None:
    answer = ["It ", "is ", "sunny."]
    deltas = [*reasoning_deltas(THOUGHT), *({"content": t} for t in answer)]
    fake.plan(Reply.deltas_of(deltas, reasoning_tokens=9))
    chunks = list(
        client.chat.completions.create(
            model=REASONER,
            messages=USER,
            reasoning_effort="low",
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    deltas_out = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = [getattr(d, "reasoning_content", None) for d in deltas_out]
    assert "".join(r for r in reasoning if r) == THOUGHT
    assert "".join(d.content or "" for d in deltas_out) == "".join(answer)
    assert not any(r and d.content for r, d in zip(reasoning, deltas_out, strict=True)), (
        "reasoning and text share no delta"
    )
    assert last_request(fake)["reasoning_effort"] == "low"
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 9


def test_chat_tool_result_round_trip_reaches_the_provider(
    client: openai.OpenAI, fake: FakeOpenAI
) -> None:
    fake.plan(Reply.stream(["It is ", "sunny."]))
    call = {
        "id": "call_w1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": WEATHER},
    }
    messages: list[Any] = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_w1", "content": '{"sky": "clear"}'},
    ]
    completion = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    assert completion.choices[0].message.content == "It is sunny."
    sent = last_request(fake)["messages"]
    assert sent[1]["tool_calls"] == [call]
    assert sent[2] == {"role": "tool", "tool_call_id": "call_w1", "content": '{"sky": "clear"}'}


def test_chat_image_data_url_and_json_schema_reach_the_provider_unchanged(
    client: openai.OpenAI, fake: FakeOpenAI
) -> None:
    fake.plan(Reply.stream(['{"colour": ', '"red"}']))
    image = bytes(range(256)) * 8
    url = "data:image/png;base64," + base64.b64encode(image).decode()
    parts: list[Any] = [
        {"type": "text", "text": "What colour?"},
        {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
    ]
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "colour",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {"colour": {"type": "string"}},
                "required": ["colour"],
                "additionalProperties": False,
            },
        },
    }
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": parts}],
        response_format=schema,  # type: ignore[arg-type]
    )
    assert json.loads(completion.choices[0].message.content or "") == {"colour": "red"}
    sent = last_request(fake)
    assert sent["messages"][0]["content"] == parts
    got = sent["messages"][0]["content"][1]["image_url"]["url"]
    assert base64.b64decode(got.partition(",")[2]) == image
    assert sent["response_format"] == schema


def test_chat_stream_resumed_inside_a_calls_arguments_sends_exactly_the_rest(
    fake: FakeOpenAI, stack: Stack
) -> None:
    fake.plan(tool_reply([("call_r", "get_weather", WEATHER)], piece=2, delay=0.01))
    body = {"model": MODEL, "messages": USER, "tools": TOOLS, "stream": True}
    headers = {"Authorization": f"Bearer {DEV_KEY}", "Idempotency-Key": f"t-{time.time_ns()}"}
    url = f"{stack.base_url}/v1/chat/completions"
    with httpx.Client(timeout=30) as http:
        whole = sse_frames(http, url, body, headers)
        cut = next(n for n, (_, d) in enumerate(whole) if arguments_of(d) and n > 5)
        rest = sse_frames(http, url, body, {**headers, "Last-Event-ID": whole[cut][0]})
    assert [d for _, d in rest] == [d for _, d in whole[cut + 1 :]]
    args = "".join(arguments_of(d) for _, d in whole[: cut + 1]) + "".join(
        arguments_of(d) for _, d in rest
    )
    assert args == WEATHER


def sse_frames(
    http: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]
) -> list[tuple[str, str]]:
    """``(id, data)`` of each ``data:`` frame of a streamed chat completion that has an id."""
    frames: list[tuple[str, str]] = []
    entry_id = ""
    with http.stream("POST", url, json=body, headers=headers) as answer:
        assert answer.status_code == 200, answer.read()
        for line in answer.iter_lines():
            if line.startswith("id: "):
                entry_id = line[4:]
            elif line.startswith("data: "):
                if entry_id:
                    frames.append((entry_id, line[6:]))
                entry_id = ""
    return frames


def arguments_of(data: str) -> str:
    if data == "[DONE]":
        return ""
    choices = json.loads(data).get("choices") or []
    pieces = [p for c in choices for p in c["delta"].get("tool_calls") or []]
    return "".join(p["function"].get("arguments") or "" for p in pieces)


REFUSALS = [
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"function_call": "auto"}, "function_call"),
    ({"web_search_options": {}}, "web_search_options"),
    ({"audio": {"voice": "alloy"}}, "audio"),
    ({"prediction": {"type": "content", "content": "x"}}, "prediction"),
    ({"tools": [{"type": "web_search"}]}, "tools.0.type"),
    ({"tools": [{"type": "function", "function": {"name": "no spaces"}}]}, "tools.0.function.name"),
    (
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]},
        "tools.0.function.parameters",
    ),
    ({"tools": TOOLS * 65}, "tools"),
    ({"response_format": {"type": "yaml"}}, "response_format.type"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.tool_call_id"),
    ({"messages": [{"role": "user", "content": None}]}, "messages.0.content"),
]


@pytest.mark.parametrize(("extra", "param"), REFUSALS, ids=[p for _, p in REFUSALS])
def test_chat_refuses_what_it_cannot_relay_naming_the_field(
    client: openai.OpenAI, fake: FakeOpenAI, extra: dict[str, Any], param: str
) -> None:
    before = fake.count()
    body: dict[str, Any] = {"model": MODEL, "messages": USER, **extra}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(**body)
    assert refused.value.body["param"] == param
    assert fake.count() == before


def test_chat_refuses_images_over_the_cap_naming_the_part(
    client: openai.OpenAI, fake: FakeOpenAI
) -> None:
    before = fake.count()
    url = "data:image/png;base64," + base64.b64encode(bytes(150 * 1024)).decode()
    parts: list[Any] = [{"type": "image_url", "image_url": {"url": url}}]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": parts}])
    assert refused.value.body["param"] == "messages.0.content.0.image_url.url"
    assert fake.count() == before


def test_chat_refuses_more_than_one_choice(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=MODEL, messages=USER, n=2)
    assert refused.value.body["param"] == "n"


def test_node_sdk_reassembles_a_streamed_tool_call(fake: FakeOpenAI, stack: Stack) -> None:
    calls = [("call_n1", "get_weather", WEATHER), ("call_n2", "get_time", TIME)]
    fake.plan(tool_reply(calls, piece=2), times=2)
    out = run_node("chat_tool_call.mjs", stack)
    expected = [{"id": i, "name": n, "arguments": a} for i, n, a in calls]
    assert out["calls"] == expected
    assert out["final_calls"] == expected
    assert out["finish_reasons"] == ["tool_calls"]
    assert stack.result(job_id_of(out["ids"][0]))["tool_calls"] == expected

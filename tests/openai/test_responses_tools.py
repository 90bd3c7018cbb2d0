"""The official ``openai`` Python SDK against a live gateway + worker + the fake OpenAI server:
Responses with function calls and reasoning, their stream resumed inside a call's arguments,
a function call's output sent back, and ``previous_response_id``.

What the provider received is read from the fake server's records, so each check covers the
whole way: the SDK's request, genq's translation to the Chat format, LiteLLM, and back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from gateway.openai.objects import job_id_of
from tests.e2e.browser import Stack, running_stack
from tests.fakes.openai_server import FakeOpenAI, Reply, reasoning_deltas, tool_call_deltas
from tests.openai.conftest import STACK_ENV, sdk_client
from tests.openai.test_node_sdk import run_node

pytestmark = pytest.mark.slow

MODEL = "openai/gpt-4o-mini"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
ARGUMENTS = json.dumps({"city": "Paris", "days": list(range(12)), "note": 'naïve "quotes"'})
THOUGHT = "The user wants the weather: one call to get_weather."


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default_tokens=5) as server:
        yield server


@pytest.fixture(scope="module")
def stack(redis_url: str, fake: FakeOpenAI, request: pytest.FixtureRequest) -> Iterator[Stack]:
    env = {
        **STACK_ENV,
        "GENQ_MODELS": f"demo/fast,{MODEL}",
        "GENQ_PROVIDER_API_BASES": f"openai={fake.base_url}",
        "GENQ_PROVIDER_API_KEY_ENVS": "openai=GENQ_TEST_OPENAI_KEY",
        "GENQ_TEST_OPENAI_KEY": "sk-fake",
    }
    with running_stack(redis_url, f"openai-{request.module.__name__}", **env) as running:
        yield running


@pytest.fixture
def client(stack: Stack) -> Iterator[openai.OpenAI]:
    with sdk_client(stack) as sdk:
        yield sdk


def call_reply(delay: float = 0.0, call_id: str = "call_w") -> Reply:
    """Reasoning, a line of text, then one call to get_weather in pieces of 3 characters."""
    deltas = [*reasoning_deltas(THOUGHT), {"content": "Let me check."}]
    deltas += tool_call_deltas([(call_id, "get_weather", ARGUMENTS)], piece=3)
    return Reply.deltas_of(deltas, delay=delay, finish_reason="tool_calls", reasoning_tokens=12)


def poll_done(client: openai.OpenAI, response_id: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        response = client.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress"):
            return response
        assert time.monotonic() < deadline, f"{response_id} stayed {response.status}"
        time.sleep(0.05)


def last_request(fake: FakeOpenAI) -> dict[str, Any]:
    return fake.requests[-1].body


def test_responses_background_function_call_polls_to_one_function_call_item(
    client: openai.OpenAI, fake: FakeOpenAI, stack: Stack
) -> None:
    fake.plan(
        Reply.deltas_of(
            tool_call_deltas([("call_1", "get_weather", ARGUMENTS)]), finish_reason="tool_calls"
        )
    )
    created = client.responses.create(
        model=MODEL,
        input="Weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,
        background=True,
    )
    done = poll_done(client, created.id)
    assert done.status == "completed"
    assert [item.type for item in done.output] == ["function_call"]
    call = done.output[0]
    assert (call.call_id, call.name, call.arguments) == ("call_1", "get_weather", ARGUMENTS)
    assert call.status == "completed"
    assert done.tools[0].name == "get_weather"  # type: ignore[union-attr]
    sent = last_request(fake)
    assert sent["tools"] == [
        {"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}
    ]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["parallel_tool_calls"] is False
    native = stack.result(job_id_of(created.id))
    assert native["tool_calls"] == [{"id": "call_1", "name": "get_weather", "arguments": ARGUMENTS}]


def test_responses_stream_resumed_inside_the_arguments_gives_exactly_the_rest(
    client: openai.OpenAI, fake: FakeOpenAI, stack: Stack
) -> None:
    fake.plan(call_reply(delay=0.03))
    created = client.responses.create(
        model=MODEL,
        input="Weather?",
        tools=[WEATHER],
        reasoning={"effort": "low", "summary": "auto"},
        background=True,  # type: ignore[list-item]
    )
    first: list[Any] = []
    with client.responses.retrieve(created.id, stream=True) as stream:
        for event in stream:
            first.append(event)
            if sum(e.type == "response.function_call_arguments.delta" for e in first) == 4:
                break
    cut = first[-1].sequence_number
    rest = list(client.responses.retrieve(created.id, stream=True, starting_after=cut))
    replay = list(client.responses.retrieve(created.id, stream=True))
    numbers = [e.sequence_number for e in first + rest]
    assert numbers == sorted(set(numbers)) == [e.sequence_number for e in replay]
    assert [e.to_dict() for e in first + rest] == [e.to_dict() for e in replay]
    kinds = [e.type for e in replay]
    arguments = "".join(
        e.delta for e in replay if e.type == "response.function_call_arguments.delta"
    )
    reasoning = "".join(
        e.delta for e in replay if e.type == "response.reasoning_summary_text.delta"
    )
    assert arguments == ARGUMENTS and reasoning == THOUGHT
    done = [e for e in replay if e.type == "response.function_call_arguments.done"]
    assert [(e.arguments, e.item_id) for e in done] == [
        (ARGUMENTS, replay[kinds.index("response.function_call_arguments.delta")].item_id)
    ]
    assert "response.reasoning_summary_text.done" in kinds and kinds[-1] == "response.completed"
    final = replay[-1].response
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]
    assert final.output[0].summary[0].text == THOUGHT
    assert final.output_text == "Let me check."
    assert final.output[2].arguments == ARGUMENTS
    assert final.usage is not None and final.usage.output_tokens_details.reasoning_tokens == 12
    # LiteLLM passes the effort on to the models that take it (gpt-4o-mini does not): the
    # response shows what its generation holds.
    assert final.reasoning is not None and final.reasoning.effort == "low"


def test_responses_stream_helper_accumulates_a_function_call(
    client: openai.OpenAI, fake: FakeOpenAI
) -> None:
    fake.plan(call_reply())
    with client.responses.stream(model=MODEL, input="Weather?", tools=[WEATHER]) as stream:  # type: ignore[list-item]
        added = [e.item.type for e in stream if e.type == "response.output_item.added"]
        final = stream.get_final_response()
    assert added == ["message", "reasoning", "function_call"]
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.call_id, c.arguments) for c in calls] == [("call_w", ARGUMENTS)]


def test_responses_node_sdk_streams_one_function_call(fake: FakeOpenAI, stack: Stack) -> None:
    """npm ``openai``: the stream helper's final response and the raw stream's
    ``response.completed`` hold one ``function_call`` item, exact; its argument deltas join to
    the arguments; sequence numbers grow by one from 0."""
    fake.plan(call_reply(delay=0.03), times=2)  # slower than the worker's coalescing window
    out = run_node("responses_tool_call.mjs", stack)
    for name in ("helper", "raw"):
        seen = out[name]
        assert seen["calls"] == [
            {
                "call_id": "call_w",
                "name": "get_weather",
                "arguments": ARGUMENTS,
                "status": "completed",
            }
        ], name
        assert seen["output_types"] == ["reasoning", "message", "function_call"], name
        assert "".join(seen["arguments_deltas"]) == ARGUMENTS, name
        assert len(seen["arguments_deltas"]) > 1, name  # it did stream in pieces
        assert seen["done"] == [ARGUMENTS], name
        assert seen["numbers"] == list(range(len(seen["numbers"]))), name
        assert seen["types"][-1] == "response.completed", name
        assert stack.result(job_id_of(seen["id"]))["tool_calls"] == [
            {"id": "call_w", "name": "get_weather", "arguments": ARGUMENTS}
        ], name
    assert out["helper"]["id"] != out["raw"]["id"]


def test_responses_function_call_output_reaches_the_provider_as_a_tool_message(
    client: openai.OpenAI, fake: FakeOpenAI
) -> None:
    fake.plan(Reply.stream(["It is ", "sunny."]))
    response = client.responses.create(
        model=MODEL,
        tools=[WEATHER],  # type: ignore[list-item]
        input=[
            {"role": "user", "content": "Weather in Paris?"},
            {
                "type": "function_call",
                "call_id": "call_9",
                "name": "get_weather",
                "arguments": ARGUMENTS,
            },
            {"type": "function_call_output", "call_id": "call_9", "output": '{"sky": "clear"}'},
        ],
    )
    assert response.output_text == "It is sunny."
    assert last_request(fake)["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",  # content null: LiteLLM leaves it out
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ARGUMENTS},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": '{"sky": "clear"}'},
    ]


def test_responses_previous_response_id_chains_its_history_and_is_404_across_tenants(
    client: openai.OpenAI, fake: FakeOpenAI, stack: Stack
) -> None:
    fake.plan(call_reply(call_id="call_c"))
    first = client.responses.create(
        model=MODEL,
        instructions="Be brief.",
        input="Weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert [item.type for item in first.output] == ["reasoning", "message", "function_call"]
    fake.plan(Reply.stream(["Sunny."]))
    second = client.responses.create(
        model=MODEL,
        instructions="Answer in one word.",
        previous_response_id=first.id,
        tools=[WEATHER],  # type: ignore[list-item]
        input=[{"type": "function_call_output", "call_id": "call_c", "output": "sunny"}],
    )
    assert second.output_text == "Sunny." and second.previous_response_id == first.id
    call = {
        "id": "call_c",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ARGUMENTS},
    }
    assert last_request(fake)["messages"] == [
        {"role": "system", "content": "Answer in one word."},  # not the first one's instructions
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_c", "content": "sunny"},
    ]
    with stack.client(admin=True) as admin:  # a response of another tenant
        other = admin.post(
            "/v1/queues/demo/jobs",
            json={"model": "demo/fast", "prompt": "mine", "tenant": "someone-else"},
        )
    assert other.status_code == 202, other.text
    requests_before = len(fake.requests)
    for foreign in ("resp_" + other.json()["id"], "resp_openai.00000000000000000000000000000000"):
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model=MODEL, previous_response_id=foreign, input="and then?")
        assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]
    assert len(fake.requests) == requests_before


def test_responses_hosted_tools_and_file_ids_are_refused_by_name(client: openai.OpenAI) -> None:
    refused: list[tuple[dict[str, Any], str]] = [
        ({"tools": [{"type": "web_search"}]}, "tools.0.type"),
        ({"tool_choice": {"type": "file_search"}}, "tool_choice"),
        (
            {
                "input": [
                    {"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}
                ]
            },
            "input.0.content.0.file_id",
        ),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input.0.type"),
        ({"tools": [{**WEATHER, "name": "no spaces allowed"}]}, "tools.0.function.name"),
    ]
    for body, param in refused:
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(**{"model": MODEL, "input": "x", **body})
        assert caught.value.body["param"] == param, body  # type: ignore[index]

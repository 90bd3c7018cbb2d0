"""The adapter beyond text: tool calls and reasoning streamed by an OpenAI-compatible server,
through LiteLLM, arrive as deltas that reassemble exactly; tool params reach the provider."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from providers.litellm_adapter import Delta, stream_chat
from tests.fakes.openai_server import FakeOpenAI, Reply, reasoning_deltas, tool_call_deltas

MODEL = "openai/gpt-4o-mini"
MESSAGES = [{"role": "user", "content": "what is the weather in Paris and Oslo?"}]
KEY = "sk-test-0123456789abcdefghij"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
PARIS = json.dumps({"city": "Paris", "unit": "celsius", "note": 'quotes " and ünïcode'})
OSLO = json.dumps({"city": "Oslo"})


async def collect(server: FakeOpenAI, params: dict[str, Any], model: str = MODEL) -> list[Delta]:
    stream = stream_chat(model, MESSAGES, params, api_base=server.base_url, api_key=KEY)
    async with contextlib.aclosing(stream):
        return [d async for d in stream]


def calls_of(deltas: list[Delta]) -> dict[int, dict[str, str]]:
    """Tool calls put together from the pieces, by index, as a client would."""
    calls: dict[int, dict[str, str]] = {}
    for delta in deltas:
        for piece in delta.tool_calls:
            call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = call["id"] or (piece.id or "")
            call["name"] = call["name"] or (piece.name or "")
            call["arguments"] += piece.arguments
    return calls


async def test_a_streamed_tool_call_reassembles_to_its_name_and_arguments(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.plan(
        Reply.deltas_of(
            tool_call_deltas([("call_1", "get_weather", PARIS)]), finish_reason="tool_calls"
        )
    )
    params = {"tools": [WEATHER], "tool_choice": "auto", "parallel_tool_calls": True}
    deltas = await collect(fake_openai, params)
    assert calls_of(deltas) == {0: {"id": "call_1", "name": "get_weather", "arguments": PARIS}}
    assert len([d for d in deltas if d.tool_calls]) > 10  # streamed in pieces, not at the end
    assert [d.finish_reason for d in deltas if d.finish_reason] == ["tool_calls"]
    assert "".join(d.text for d in deltas) == ""
    body = fake_openai.requests[0].body
    assert body["tools"] == [WEATHER]
    assert (body["tool_choice"], body["parallel_tool_calls"]) == ("auto", True)


async def test_two_parallel_tool_calls_keep_their_indexes(fake_openai: FakeOpenAI) -> None:
    deltas = tool_call_deltas([("call_a", "get_weather", PARIS), ("call_b", "get_weather", OSLO)])
    fake_openai.plan(Reply.deltas_of(deltas, finish_reason="tool_calls"))
    got = await collect(fake_openai, {"tools": [WEATHER]})
    assert calls_of(got) == {
        0: {"id": "call_a", "name": "get_weather", "arguments": PARIS},
        1: {"id": "call_b", "name": "get_weather", "arguments": OSLO},
    }


async def test_reasoning_arrives_apart_from_the_text(fake_openai: FakeOpenAI) -> None:
    thought = "The user greets me; a short greeting back is right."
    answer = [{"content": "Hello"}, {"content": " there"}]
    fake_openai.plan(Reply.deltas_of(reasoning_deltas(thought) + answer, reasoning_tokens=12))
    # A reasoning model: LiteLLM drops reasoning_effort for a model that takes none.
    deltas = await collect(fake_openai, {"reasoning_effort": "low"}, model="openai/o4-mini")
    assert "".join(d.reasoning for d in deltas) == thought
    assert "".join(d.text for d in deltas) == "Hello there"
    assert not any(d.reasoning and d.text for d in deltas)
    usage = [d.usage for d in deltas if d.usage][-1]
    assert usage["reasoning_tokens"] == 12
    assert fake_openai.requests[0].body["reasoning_effort"] == "low"


async def test_structured_output_params_reach_the_provider(fake_openai: FakeOpenAI) -> None:
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "answer",
            "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            "strict": True,
        },
    }
    fake_openai.plan(Reply.stream(['{"city": "Paris"}']))
    deltas = await collect(fake_openai, {"response_format": schema})
    assert "".join(d.text for d in deltas) == '{"city": "Paris"}'
    assert fake_openai.requests[0].body["response_format"] == schema


async def test_a_text_delta_carries_no_parts(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(Reply.stream(["a", "b"]))
    deltas = await collect(fake_openai, {})
    texts = [d for d in deltas if d.text]
    # The empty tuple (not a list, which == () would refuse): nothing allocated per token.
    assert texts and all(d.tool_calls == () and d.reasoning == "" for d in texts)

"""Tools, tool history, content parts, structured output and reasoning in a generation's payload:
taken as the Chat format has them, refused past the limits with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from genq import TerminalJobError
from genq_contract.chat import MAX_TOOLS
from genq_contract.payload import GenerationPayload
from genq_contract.routing import InvalidParamError, Routing


def tool(name: str = "get_weather", parameters: Any = None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "description": "Weather in a city"}
    function["parameters"] = {"type": "object"} if parameters is None else parameters
    return {"type": "function", "function": function}


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
HISTORY = [
    {"role": "user", "content": [{"type": "text", "text": "Weather here?"}, IMAGE]},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
]
NO_ID = {"function": {"name": "f", "arguments": "{}"}}
OBJECT_ARGS = {"id": "c", "function": {"name": "f", "arguments": {}}}


def payload(params: dict[str, Any], messages: list[dict[str, Any]] | None = None) -> Any:
    messages = messages or [{"role": "user", "content": "hi"}]
    return {"model": "openai/gpt-4o-mini", "messages": messages, "params": params}


def test_chat_format_a_full_request_is_taken_as_it_is() -> None:
    params = {
        "tools": [tool(f"f_{i}") for i in range(MAX_TOOLS)],
        "tool_choice": {"type": "function", "function": {"name": "f_0"}},
        "parallel_tool_calls": False,
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {}}},
        "reasoning_effort": "high",
    }
    parsed = GenerationPayload.parse(payload(params, HISTORY))
    assert parsed.params == params and parsed.messages == HISTORY
    Routing.build(["openai/*"]).check_params("openai/gpt-4o-mini", params)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"tools": [tool(f"f_{i}") for i in range(MAX_TOOLS + 1)]}, "params.tools"),
        ({"tools": [tool(), tool("bad name")]}, "params.tools.1.function.name"),
        ({"tools": [tool("x" * 65)]}, "params.tools.0.function.name"),
        (
            {"tools": [tool(parameters=["not", "an", "object"])]},
            "params.tools.0.function.parameters",
        ),
        ({"tools": [{"type": "web_search"}]}, "params.tools.0.type"),
        ({"tools": {"get_weather": {}}}, "params.tools"),
        ({"tool_choice": "always"}, "params.tool_choice"),
        ({"parallel_tool_calls": "yes"}, "params.parallel_tool_calls"),
        ({"response_format": {"type": "xml"}}, "params.response_format.type"),
        ({"reasoning_effort": 3}, "params.reasoning_effort"),
    ],
)
def test_chat_format_refuses_a_bad_param_naming_it(params: dict[str, Any], field: str) -> None:
    with pytest.raises(TerminalJobError) as refused:
        GenerationPayload.parse(payload(params))
    assert f"{field}: " in str(refused.value)
    with pytest.raises(InvalidParamError) as by_routing:  # the gateway's check: a 422
        Routing.build(["openai/*"]).check_params("openai/gpt-4o-mini", params)
    assert by_routing.value.field == field


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "tool", "content": "sunny"}, "messages.0.tool_call_id"),
        ({"role": "user", "tool_calls": []}, "messages.0.tool_calls"),
        ({"role": "assistant", "tool_calls": [NO_ID]}, "messages.0.tool_calls.0.id"),
        ({"role": "assistant", "tool_calls": [OBJECT_ARGS]},
         "messages.0.tool_calls.0.function.arguments"),
        ({"role": "user", "content": [{"text": "no type"}]}, "messages.0.content.0"),
    ],
)  # fmt: skip
def test_chat_format_refuses_a_bad_message_naming_it(message: dict[str, Any], field: str) -> None:
    with pytest.raises(TerminalJobError) as refused:
        GenerationPayload.parse(payload({}, [message]))
    assert f"{field}: " in str(refused.value)

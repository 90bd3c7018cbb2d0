"""UIMessages as the Chat messages a generation carries (gateway.ui_chat.chat_messages): text,
files, an assistant's steps with answered tool calls, what is not sent, and problems named by
the request's own fields."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.ui_chat.chat_messages import check_images, conversation
from gateway.ui_chat.schemas import UIMessage
from genq_contract.chat import ChatFormatError

PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0x"


def messages(*raw: dict[str, Any]) -> list[UIMessage]:
    return [UIMessage.model_validate(m) for m in raw]


def said(*raw: dict[str, Any], system: str | None = None) -> list[dict[str, Any]]:
    return conversation(messages(*raw), system).messages


def test_ui_messages_text_alone_is_plain_and_the_system_comes_first() -> None:
    out = said(
        {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "Hi", "state": "done"}]},
        system="You are genq.",
    )
    assert out == [
        {"role": "system", "content": "You are genq."},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]


def test_ui_messages_files_become_image_and_file_parts() -> None:
    parts = [
        {"type": "text", "text": "Compare"},
        {"type": "file", "mediaType": "image/png", "url": PNG},
        {"type": "file", "mediaType": "image/jpeg", "url": "https://example.com/a.jpg"},
        {"type": "file", "mediaType": "application/pdf", "url": PDF, "filename": "a.pdf"},
        {"type": "data-note", "data": {"x": 1}},
        {"type": "source-url", "sourceId": "s", "url": "https://example.com"},
    ]
    (out,) = said({"id": "u", "role": "user", "parts": parts})
    assert out == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Compare"},
            {"type": "image_url", "image_url": {"url": PNG}},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
            {"type": "file", "file": {"file_data": PDF, "filename": "a.pdf"}},
        ],
    }


def test_ui_messages_assistant_steps_send_text_and_answered_tool_calls() -> None:
    parts = [
        {"type": "step-start"},
        {"type": "reasoning", "text": "I should look it up."},
        {"type": "text", "text": "Let me look."},
        {
            "type": "tool-get_weather",
            "toolCallId": "call_1",
            "state": "output-available",
            "input": {"city": "Paris"},
            "output": {"sky": "clear"},
        },
        {"type": "tool-get_time", "toolCallId": "call_2", "state": "input-available", "input": {}},
        {"type": "step-start"},
        {"type": "text", "text": "Sunny. "},
        {
            "type": "dynamic-tool",
            "toolName": "lookup",
            "toolCallId": "call_3",
            "state": "output-error",
            "input": {"q": "x"},
            "errorText": "no network",
        },
        {
            "type": "tool-echo",
            "toolCallId": "call_4",
            "state": "output-available",
            "input": None,
            "output": "plain text",
        },
    ]
    out = said(
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "Weather?"}]},
        {"id": "a", "role": "assistant", "parts": parts},
    )
    call = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ]
    calls = [
        {
            "id": "call_3",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"q": "x"}'},
        },
        {"id": "call_4", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
    ]
    assert out[1:] == [
        {"role": "assistant", "content": "Let me look.", "tool_calls": call},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "clear"}'},
        {"role": "assistant", "content": "Sunny. ", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_3", "content": "no network"},
        {"role": "tool", "tool_call_id": "call_4", "content": "plain text"},
    ]


def test_ui_messages_an_assistant_message_with_nothing_to_send_is_left_out() -> None:
    out = said(
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "Hi"}]},
        {"id": "a", "role": "assistant", "parts": [{"type": "reasoning", "text": "hmm"}]},
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Well?"}]},
    )
    assert [m["role"] for m in out] == ["user", "user"]


def test_ui_messages_problems_name_the_request_field() -> None:
    with pytest.raises(ChatFormatError) as refused:
        said({"id": "a", "role": "assistant", "parts": [{"type": "reasoning", "text": "x"}]})
    assert refused.value.field == "messages"
    image = {"type": "file", "mediaType": "image/png", "url": PNG}
    out = conversation(
        messages(
            {"id": "u", "role": "user", "parts": [{"type": "text", "text": "a"}]},
            {"id": "a", "role": "assistant", "parts": [{"type": "text", "text": "b"}]},
            {"id": "v", "role": "user", "parts": [{"type": "text", "text": "c"}, image, image]},
        ),
        "sys",
    )
    with pytest.raises(ChatFormatError) as over:
        check_images(out, 10)
    assert over.value.field == "messages.2.parts.2"
    assert out.ui_field("messages.3.content.1: no vision") == "messages.2.parts.1: no vision"
    assert out.ui_field("messages.0.content: x") == "system: x"
    assert out.ui_field("params.tools.0.type: y") == "tools.0.type: y"
    assert out.ui_field("params.reasoning_effort: z") == "params.reasoning_effort: z"
    assert out.ui_field("model: w") == "model: w"

"""A generation's stream entries as UI message chunks (gateway.ui_chat.ui_parts), entry by entry:
what each kind becomes, the parts it opens and ends, and what shows nothing."""

from __future__ import annotations

import json
from typing import Any

from gateway.streaming.frames import DONE
from gateway.ui_chat.ui_parts import UIParts
from genq import StreamEntry


def chunks_of(entries: list[tuple[str, Any]], usage: dict[str, int] | None = None) -> list[Any]:
    """The chunks (and ``id:`` lines, as ``("id", ...)``) a stream of ``entries`` makes."""
    parts = UIParts("demo.0123")
    raw = parts.opening("demo.0123")
    for n, (kind, data) in enumerate(entries, start=1):
        counts = json.dumps(usage) if usage and n == len(entries) else None
        raw += parts.frames(StreamEntry(f"1000-{n}", kind, json.dumps(data), counts))
    out: list[Any] = []
    for line in raw.decode().split("\n"):
        if line.startswith("id: "):
            out.append(("id", line[4:]))
        elif line.startswith("data: "):
            out.append(json.loads(line[6:]))
    return out


def test_ui_parts_text_then_reasoning_then_text_open_and_end_their_parts() -> None:
    out = chunks_of(
        [
            ("chunk", "Hel"),
            ("chunk", "lo"),
            ("reasoning", "hmm"),
            ("progress", 0.5),
            ("chunk", {"not": "text"}),
            ("chunk", "!"),
            ("completed", {"text": "Hello!", "finish_reason": "length"}),
        ]
    )
    assert out == [
        {
            "type": "start",
            "messageId": "demo.0123",
            "messageMetadata": {"genq": {"generationId": "demo.0123"}},
        },
        {"type": "start-step"},
        {"type": "text-start", "id": "text-1"},
        ("id", "1000-1"),
        {"type": "text-delta", "id": "text-1", "delta": "Hel"},
        ("id", "1000-2"),
        {"type": "text-delta", "id": "text-1", "delta": "lo"},
        {"type": "text-end", "id": "text-1"},
        {"type": "reasoning-start", "id": "reasoning-2"},
        ("id", "1000-3"),
        {"type": "reasoning-delta", "id": "reasoning-2", "delta": "hmm"},
        {"type": "reasoning-end", "id": "reasoning-2"},
        {"type": "text-start", "id": "text-3"},
        ("id", "1000-6"),
        {"type": "text-delta", "id": "text-3", "delta": "!"},
        {"type": "text-end", "id": "text-3"},
        ("id", "1000-7"),
        {"type": "finish-step"},
        {
            "type": "finish",
            "finishReason": "length",
            "messageMetadata": {"genq": {"generationId": "demo.0123", "status": "completed"}},
        },
    ]


def test_ui_parts_a_tool_call_whose_arguments_are_not_json_is_an_input_error() -> None:
    out = chunks_of(
        [
            ("tool_call", {"index": 0, "id": "c1", "name": "f"}),
            ("tool_args", {"index": 0, "delta": "{oops"}),
            ("tool_done", {"index": 0, "id": "c1", "name": "f", "arguments": "{oops"}),
            ("tool_done", {"index": 1, "id": "c2", "name": "g", "arguments": '{"a": [1]}'}),
            ("tool_args", {"index": 7, "delta": "no such call"}),
        ]
    )
    chunks = [c for c in out if isinstance(c, dict)][2:]
    assert chunks == [
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "f"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{oops"},
        {
            "type": "tool-input-error",
            "toolCallId": "c1",
            "toolName": "f",
            "input": "{oops",
            "errorText": "the model's arguments are not JSON",
        },
        {"type": "tool-input-start", "toolCallId": "c2", "toolName": "g"},
        {"type": "tool-input-available", "toolCallId": "c2", "toolName": "g", "input": {"a": [1]}},
    ]


def test_ui_parts_restart_resets_the_step_and_new_parts_get_fresh_ids() -> None:
    out = chunks_of(
        [
            ("chunk", "lost "),
            ("restarted", {"model": "openai/gpt-4o-mini", "reason": "rate limited"}),
            ("chunk", "kept"),
            ("failed", "the provider broke"),
        ],
        usage={"prompt_tokens": 3, "completion_tokens": 2},
    )
    chunks = [c for c in out if isinstance(c, dict)]
    kinds = [c["type"] for c in chunks]
    assert kinds[2:] == [
        "text-start",
        "text-delta",
        "reset-step",
        "data-genq-restarted",
        "text-start",
        "text-delta",
        "text-end",
        "error",
        "finish",
    ]
    restarted = chunks[5]
    assert restarted["data"] == {
        "generationId": "demo.0123",
        "model": "openai/gpt-4o-mini",
        "reason": "rate limited",
    }
    assert chunks[2]["id"] != chunks[6]["id"], "the new attempt's part has a fresh id"
    assert chunks[-2] == {"type": "error", "errorText": "the provider broke"}
    finish = chunks[-1]
    assert finish["finishReason"] == "error"
    assert finish["messageMetadata"]["genq"]["usage"]["completion_tokens"] == 2
    assert finish["messageMetadata"]["genq"]["status"] == "failed"


def test_ui_parts_a_stop_ends_with_abort_and_the_end_is_done() -> None:
    parts = UIParts("demo.0123")
    parts.frames(StreamEntry("1-1", "chunk", '"partial"'))
    ending = parts.frames(StreamEntry("1-2", "cancelled", "null")).decode()
    kinds = [
        json.loads(line[6:])["type"] for line in ending.split("\n") if line.startswith("data:")
    ]
    assert kinds == ["text-end", "abort", "finish"]
    assert ending.startswith("data: {") and DONE not in ending.encode(), "[DONE] is the route's"

"""The chat deltas of a generation's events: what a ``tool_done`` adds, also after a resume."""

from __future__ import annotations

import json
from typing import Any

from gateway.openai.chat_deltas import ChatDeltas
from genq import StreamEntry


def entries(*events: tuple[str, Any]) -> list[StreamEntry]:
    return [StreamEntry(f"1-{n}", kind, json.dumps(data)) for n, (kind, data) in enumerate(events)]


START = ("tool_call", {"index": 0, "id": "call_1", "name": "f"})
DONE = ("tool_done", {"index": 0, "id": "call_1", "name": "f", "arguments": '{"a": 1}'})


def deltas_of(events: list[StreamEntry], deltas: ChatDeltas | None = None) -> list[Any]:
    deltas = deltas or ChatDeltas()
    return [d for d in (deltas.delta(e) for e in events) if d is not None]


def test_chat_deltas_a_tool_done_after_its_pieces_adds_nothing() -> None:
    pieces = [
        ("tool_args", {"index": 0, "delta": '{"a"'}),
        ("tool_args", {"index": 0, "delta": ": 1}"}),
    ]
    sent = deltas_of(entries(START, *pieces, DONE))
    assert [d["tool_calls"][0]["function"]["arguments"] for d in sent] == ["", '{"a"', ": 1}"]
    assert sent[0]["tool_calls"][0] == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": ""},
    }


def test_chat_deltas_a_tool_done_alone_sends_the_whole_call() -> None:
    assert deltas_of(entries(DONE)) == [
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": 1}'},
                }
            ]
        }
    ]


def test_chat_deltas_resumed_after_a_piece_send_only_the_rest_of_a_tool_done() -> None:
    before = entries(START, ("tool_args", {"index": 0, "delta": '{"a"'}))
    resumed = ChatDeltas()
    resumed.prime(before)
    assert deltas_of(entries(DONE), resumed) == [
        {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}
    ]


def test_chat_deltas_keep_reasoning_apart_and_forget_calls_on_restart() -> None:
    events = entries(("reasoning", "hm"), ("chunk", "hi"), START, ("restarted", None), DONE)
    sent = deltas_of(events)
    assert sent[:2] == [{"reasoning_content": "hm"}, {"content": "hi"}]
    assert sent[3]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}', (
        "after a restart the call starts over, whole"
    )

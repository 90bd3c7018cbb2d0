"""The fold of a generation's events: one rule for text, reasoning and tool calls, started over
on `restarted`, never failing on a bad entry; and the result that holds the same."""

from __future__ import annotations

from typing import Any

from genq import Event, visible_text
from genq_contract.events import EVENT_TYPES
from genq_contract.parts import PART_TYPES
from genq_contract.result import GenerationResult, read_result
from genq_contract.transcript import Transcript

ARGS = '{"city": "Paris"}'
RESULT = {
    "text": "Sure.",
    "model": "openai/o4-mini",
    "finish_reason": "tool_calls",
    "usage": {"prompt_tokens": 3, "completion_tokens": 9, "reasoning_tokens": 4},
}
STREAM: list[tuple[str, Any]] = [
    ("chunk", "dropped"),
    ("tool_call", {"index": 0, "id": "old", "name": "old"}),
    ("restarted", None),
    ("reasoning", "Weather "),
    ("reasoning", "first."),
    ("chunk", "Sure."),
    ("tool_call", {"index": 0, "id": "c1", "name": "get_weather"}),
    ("tool_args", {"index": 0, "delta": '{"city": '}),
    ("tool_args", {"index": 0, "delta": '"Paris"}'}),
    ("tool_call", {"index": 1, "id": "c2", "name": "get_time"}),
    ("tool_done", {"index": 0, "id": "c1", "name": "get_weather", "arguments": ARGS}),
    ("tool_args", {"index": 1, "delta": "{}"}),
    ("progress", 0.5),
    ("completed", RESULT),
]


def events(stream: list[tuple[str, Any]]) -> list[Event]:
    return [Event(f"1-{n}", kind, data) for n, (kind, data) in enumerate(stream)]


def test_transcript_folds_every_kind_and_starts_over_on_restarted() -> None:
    folded = Transcript.of(events(STREAM))
    assert folded.as_json() == {
        "text": "Sure.",
        "reasoning": "Weather first.",
        "tool_calls": [
            {"id": "c1", "name": "get_weather", "arguments": ARGS},
            {"id": "c2", "name": "get_time", "arguments": "{}"},
        ],
        "finish_reason": "tool_calls",
        "usage": {
            "prompt_tokens": 3,
            "completion_tokens": 9,
            "cached_tokens": 0,
            "total_tokens": 12,
            "cost_usd": 0.0,
            "estimated": False,
            "reasoning_tokens": 4,
        },
    }
    assert folded.text == visible_text(events(STREAM))  # the text rule, unchanged


def test_transcript_skips_what_does_not_validate() -> None:
    bad = [
        ("chunk", {"not": "text"}),
        ("reasoning", 7),
        ("tool_call", {"index": -1, "id": "x", "name": "f"}),
        ("tool_call", {"index": 0, "id": 5, "name": "f"}),
        ("tool_args", {"index": 3, "delta": "no call 3"}),
        ("tool_call", {"index": 0, "id": "c", "name": "f"}),
        ("tool_args", {"index": 0, "delta": ["x"]}),
        ("tool_args", {"index": 0, "delta": "{}"}),
        ("tool_done", "garbage"),
        ("completed", ["not", "a", "result"]),
    ]
    folded = Transcript.of(events(bad))
    assert folded.as_json() == {
        "text": "",
        "reasoning": None,
        "tool_calls": [{"id": "c", "name": "f", "arguments": "{}"}],
        "finish_reason": None,
        "usage": None,
    }


def test_transcript_takes_a_later_tool_done_as_the_whole_call() -> None:
    stream = [
        ("tool_call", {"index": 0, "id": "c", "name": "f"}),
        ("tool_args", {"index": 0, "delta": '{"a"'}),
        ("tool_done", {"index": 0, "id": "c", "name": "f", "arguments": '{"a"'}),
        ("tool_args", {"index": 0, "delta": ": 1}"}),  # the provider came back to it
        ("tool_done", {"index": 0, "id": "c", "name": "f", "arguments": '{"a": 1}'}),
    ]
    assert Transcript.of(events(stream)).tool_calls[0].arguments == '{"a": 1}'


def test_events_vocabulary_holds_the_parts() -> None:
    assert set(PART_TYPES) <= set(EVENT_TYPES)
    assert len(set(EVENT_TYPES)) == len(EVENT_TYPES)


def test_result_holds_reasoning_and_tool_calls_only_when_there_are_any() -> None:
    plain = GenerationResult(text="hi").as_json()
    assert set(plain) == {"text", "model", "finish_reason", "usage"}
    call = {"id": "c1", "name": "get_weather", "arguments": ARGS}
    full = GenerationResult.model_validate(
        {"text": "", "reasoning": "hm", "tool_calls": [call]}
    ).as_json()
    assert (full["reasoning"], full["tool_calls"]) == ("hm", [call])
    stored = read_result({**full, "tool_calls": [call, {"id": 1}, "junk"], "reasoning": 5})
    assert [c.model_dump() for c in stored.tool_calls] == [call]  # the bad ones left out
    assert stored.reasoning is None
    assert read_result("bare").tool_calls == []


def test_transcript_the_clients_copy_folds_the_same() -> None:
    from genq_client import Generation

    full_usage = {**RESULT, "usage": Transcript.of(events(STREAM)).usage}  # as workers write it
    bad = [("tool_call", {"index": 0, "id": 5, "name": "f"}), ("tool_args", {"index": 9})]
    done = ("completed", full_usage)
    for stream in ([*STREAM[:-1], done], STREAM[:7], [*STREAM[:-1], *bad, done]):
        mine = Generation()
        for event in events(stream):
            mine.add(event.type, event.data)
        theirs = Transcript.of(events(stream)).as_json()
        assert mine.as_json() == theirs, stream

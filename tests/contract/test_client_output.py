"""The pull client's checks of what a handler emits and returns (``genq_client``'s copy, since
the client imports none of genq's packages) held equal to what the gateway checks them with:
its events route's types (``gateway.pull.schemas.EventIn``, over ``genq_contract.parts``) and
``genq_contract.result.GenerationResult``. Each case is taken by both or refused by both, and
what the client sends is what the gateway stores. Then the ack's result and the events before
it agree: folded as every reader folds them, the events give the result's text, reasoning and
tool calls."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from gateway.pull.schemas import EventIn, event_data
from genq_client import OutputError, PulledJob, ToolCall
from genq_client._output import EMIT_TYPES, check_part, check_result
from genq_client._pulled_job import result_of
from genq_contract.parts import PART_TYPES
from genq_contract.result import GenerationResult
from genq_contract.transcript import Transcript

START = {"index": 0, "id": "c", "name": "f"}
CALL = {"id": "c", "name": "f", "arguments": '{"a": 1}'}
PART_CASES: list[tuple[str, Any]] = [
    ("chunk", "text"),
    ("chunk", ""),
    ("chunk", 5),
    ("chunk", None),
    ("reasoning", "hm"),
    ("reasoning", ["hm"]),
    ("tool_call", START),
    ("tool_call", {**START, "index": 1023, "type": "function"}),  # a key of no meaning: dropped
    ("tool_call", {**START, "index": 1024}),
    ("tool_call", {**START, "index": -1}),
    ("tool_call", {**START, "index": True}),
    ("tool_call", {**START, "index": "0"}),
    ("tool_call", {**START, "index": 1.0}),
    ("tool_call", {"index": 0, "name": "f"}),
    ("tool_call", {**START, "id": 7}),
    ("tool_call", "garbage"),
    ("tool_call", ["index", "id", "name"]),
    ("tool_args", {"index": 0, "delta": '{"a"'}),
    ("tool_args", {"index": 0, "delta": ""}),
    ("tool_args", {"index": 0, "delta": 7}),
    ("tool_args", {"index": 0}),
    ("tool_done", {"index": 2, **CALL}),
    ("tool_done", {**START}),
    ("tool_done", {**START, "arguments": None}),
    ("finish", "stop"),
    ("completed", {"text": ""}),
    ("Chunk", "x"),
]


def gateway_part(kind: str, data: Any) -> Any:
    """What the gateway stores for the event, or ValidationError."""
    return event_data(TypeAdapter(EventIn).validate_python({"type": kind, "data": data}))


def test_client_emit_types_are_the_generations_parts() -> None:
    assert ("chunk", *PART_TYPES) == EMIT_TYPES


@pytest.mark.parametrize(("kind", "data"), PART_CASES)
def test_client_part_check_is_the_gateways(kind: str, data: Any) -> None:
    try:
        theirs = gateway_part(kind, data)
    except ValidationError:
        with pytest.raises(OutputError):
            check_part(kind, data)
        return
    assert check_part(kind, data) == theirs


RESULT_CASES: list[dict[str, Any]] = [
    {},
    {"text": "x", "model": None, "finish_reason": "stop", "reasoning": "r", "tool_calls": [CALL]},
    {"reasoning": None, "tool_calls": []},
    {"tool_calls": [{**CALL, "type": "function"}]},
    {"tool_calls": [CALL] * 1024},
    {"tool_calls": [CALL] * 1025},
    {"tool_calls": None},
    {"tool_calls": "c"},
    {"tool_calls": [{"id": "c", "name": "f"}]},
    {"tool_calls": [{**CALL, "id": 1}]},
    {"tool_calls": ["junk"]},
    {"reasoning": 5},
    {"model": 3},
    {"finish_reason": ["stop"]},
    {"text": None},
    {"txt": "x"},
    {"usage": None},
    {"usage": {"prompt_tokens": 1}},  # what is inside usage, the gateway checks (see _output)
    {"usage": 5},
]


@pytest.mark.parametrize("raw", RESULT_CASES)
def test_client_result_check_is_the_gateways(raw: dict[str, Any]) -> None:
    sent = json.loads(json.dumps({"text": "", **raw}))  # as the ack's body arrives
    try:
        theirs = GenerationResult.model_validate(sent).as_json()
    except ValidationError:
        with pytest.raises(OutputError):
            check_result(raw)
        return
    mine = GenerationResult.model_validate({"text": "", **check_result(raw)}).as_json()
    assert mine == theirs


def test_client_result_takes_its_own_tool_calls() -> None:
    checked = check_result({"tool_calls": [ToolCall("c", "f", "{}")]})
    assert checked["tool_calls"] == [{"id": "c", "name": "f", "arguments": "{}"}]


def pulled(model: str = "m") -> PulledJob:
    body = {"id": "j", "receipt": "r", "attempt": 1, "max_attempts": 1, "payload": {"model": model}}
    return PulledJob("q", body, 30)


def acked(job: PulledJob, returned: object) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """The ack's result and every event the job would post, in order."""
    result = result_of(job, returned)
    return result, [(event["type"], event["data"]) for event in job._pending]


def assert_adds_up(events: list[tuple[str, Any]], result: dict[str, Any]) -> None:
    folded = Transcript()
    for kind, data in events:
        folded.add(kind, data)
    assert folded.text == result["text"]
    assert folded.reasoning == result.get("reasoning")
    assert [call.model_dump() for call in folded.tool_calls] == result.get("tool_calls", [])
    GenerationResult.model_validate(result)  # and the gateway takes it


async def test_client_ack_closes_the_calls_emitted_and_defaults_to_what_was_emitted() -> None:
    job = pulled()
    job.emit("Thin", type="reasoning")
    job.emit("king.", type="reasoning")
    job.emit("Hel")
    job.emit(START, type="tool_call")
    job.emit({"index": 0, "delta": '{"a"'}, type="tool_args")
    job.emit({"index": 0, "delta": ": 1}"}, type="tool_args")
    result, events = acked(job, "Hello")
    assert result == {
        "text": "Hello",
        "model": "m",
        "finish_reason": "tool_calls",
        "usage": None,
        "reasoning": "Thinking.",
        "tool_calls": [CALL],
    }
    assert events == [  # adjacent text of one kind (and call) joined
        ("reasoning", "Thinking."),
        ("chunk", "Hel"),
        ("tool_call", START),
        ("tool_args", {"index": 0, "delta": '{"a": 1}'}),
        ("chunk", "lo"),  # the rest of the returned text
        ("tool_done", {"index": 0, **CALL}),
    ]
    assert_adds_up(events, result)


async def test_client_ack_adds_the_calls_only_the_result_has_at_free_indexes() -> None:
    job = pulled()
    job.emit({**START, "index": 0}, type="tool_call")
    job.emit({"index": 0, **CALL}, type="tool_done")
    job.emit({"index": 1, "id": "d", "name": "g"}, type="tool_call")
    other = {"id": "e", "name": "h", "arguments": "{}"}
    changed = {"id": "d", "name": "g", "arguments": "[]"}
    result, events = acked(job, {"tool_calls": [CALL, changed, other], "finish_reason": "x"})
    assert events[3:] == [  # call 0 was closed already with the same fields
        ("tool_done", {"index": 1, **changed}),
        ("tool_done", {"index": 2, **other}),
    ]
    assert result["finish_reason"] == "x"
    assert_adds_up(events, result)


async def test_client_ack_warns_when_the_result_drops_what_was_emitted(caplog) -> None:
    job = pulled()
    job.emit("so", type="reasoning")
    job.emit({"index": 3, **CALL}, type="tool_done")
    with caplog.at_level(logging.WARNING, logger="genq_client.puller"):
        result, events = acked(job, {"reasoning": "other", "tool_calls": []})
    assert (result["reasoning"], "tool_calls" in result, result["finish_reason"]) == (
        "other",
        False,
        "stop",
    )
    assert len(events) == 2  # nothing can take back what was streamed: warned instead
    assert "does not continue the reasoning" in caplog.text
    assert "leaves out tool calls" in caplog.text


async def test_client_emit_refuses_a_bad_part_and_sends_nothing() -> None:
    job = pulled()
    with pytest.raises(OutputError, match="a tool_args part's delta is a str, not int"):
        job.emit({"index": 0, "delta": 7}, type="tool_args")
    with pytest.raises(OutputError, match="not 'progress'"):
        job.emit(0.5, type="progress")
    with pytest.raises(TypeError):  # as emit(non-text) always raised
        job.emit(b"bytes")
    assert not job._pending and job.text == "" and job.tool_calls == []


async def test_client_empty_text_is_no_event() -> None:
    job = pulled()
    job.emit("")
    job.emit("", type="reasoning")
    result, events = acked(job, {"reasoning": None})
    assert events == [] and job.reasoning is None and "reasoning" not in result

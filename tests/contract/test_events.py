"""The event vocabulary, the visible-text rule and the fold of a generation's parts: one
definition, the same in the pages."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from genq import Event, JobStatus, visible_text
from genq_contract.events import EVENT_TYPES, TERMINAL_EVENTS
from genq_contract.parts import ToolCall
from genq_contract.result import GenerationResult, ResultUsage
from genq_contract.transcript import Transcript

API_JS = Path(__file__).resolve().parents[2] / "web" / "api.js"

# A retried attempt: its text is dropped at `restarted`, progress changes nothing.
STREAM = [
    ("chunk", "Hel"),
    ("chunk", "lo"),
    ("restarted", None),
    ("chunk", "Hi"),
    ("progress", 0.5),
    ("chunk", " there, "),
    ("chunk", "wörld ✓"),
    ("completed", {"text": "Hi there, wörld ✓"}),
]


def _run_api_js(expression: str) -> Any:
    """Evaluates ``expression`` with ``api`` bound to web/api.js (as the pages import it)."""
    node = shutil.which("node")
    assert node, "node is not installed (Node 20+ checks the pages' shared module)"
    script = f"const api = await import({json.dumps(API_JS.as_uri())});\n"
    script += f"process.stdout.write(JSON.stringify({expression}));"
    done = subprocess.run(
        [node, "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(done.stdout)


def test_events_terminal_ones_are_the_final_statuses() -> None:
    assert set(EVENT_TYPES) >= TERMINAL_EVENTS
    assert {JobStatus(t) for t in TERMINAL_EVENTS} == {
        JobStatus.COMPLETED,
        JobStatus.FAILED,
        JobStatus.CANCELLED,
    }


def test_events_pages_share_the_servers_vocabulary() -> None:
    pages = _run_api_js("{types: api.EVENT_TYPES, terminal: [...api.TERMINAL]}")
    assert pages["types"] == list(EVENT_TYPES)
    assert set(pages["terminal"]) == TERMINAL_EVENTS


def test_events_pages_show_the_text_the_server_rule_gives() -> None:
    events = [Event(f"1-{i}", kind, data) for i, (kind, data) in enumerate(STREAM)]
    expected = visible_text(events)
    assert expected == "Hi there, wörld ✓"
    stream = json.dumps([{"type": kind, "data": data} for kind, data in STREAM])
    assert _run_api_js(f"api.visibleText({stream})") == expected


# Every kind of part, a retried attempt, a tool_done replacing its pieces and entries that do
# not validate; the result as a worker completes a generation with it.
WORKER_RESULT = GenerationResult(
    text="Sure.",
    model="openai/o4-mini",
    finish_reason="tool_calls",
    usage=ResultUsage(prompt_tokens=3, completion_tokens=9, total_tokens=12, reasoning_tokens=4),
    reasoning="Weather first.",
    tool_calls=[ToolCall(id="c1", name="get_weather", arguments='{"city": "Paris"}')],
).as_json()
PARTS_STREAM: list[tuple[str, Any]] = [
    ("chunk", "dropped"),
    ("reasoning", "dropped too"),
    ("tool_call", {"index": 0, "id": "old", "name": "old"}),
    ("restarted", None),
    ("reasoning", "Weather "),
    ("reasoning", 7),
    ("reasoning", "first."),
    ("chunk", "Sure."),
    ("chunk", {"not": "text"}),
    ("tool_call", {"index": 0, "id": "c1", "name": "get_weather"}),
    ("tool_call", {"index": -1, "id": "x", "name": "f"}),
    ("tool_call", {"index": 1024, "id": "x", "name": "f"}),
    ("tool_call", {"index": 2, "id": 5, "name": "f"}),
    ("tool_args", {"index": 3, "delta": "no call 3"}),
    ("tool_args", {"index": 0, "delta": '{"city": '}),
    ("tool_args", {"index": 0, "delta": ["x"]}),
    ("tool_args", {"index": 0, "delta": '"Par'}),
    ("tool_call", {"index": 1, "id": "c2", "name": "get_time"}),
    (
        "tool_done",
        {"index": 0, "id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
    ),
    ("tool_args", {"index": 0, "delta": "ignored: the call is whole"}),
    ("tool_done", "garbage"),
    ("tool_done", {"index": 4, "id": "c4", "name": "late"}),
    ("tool_args", {"index": 1, "delta": "{}"}),
    ("tool_done", {"index": 5, "id": "c5", "name": "whole_at_once", "arguments": "[]"}),
    ("progress", 0.5),
    ("completed", WORKER_RESULT),
]


def _fold_in_pages(stream: list[tuple[str, Any]]) -> Any:
    recorded = json.dumps([{"type": kind, "data": data} for kind, data in stream])
    return _run_api_js(
        f"(() => {{ const t = new api.Transcript();"
        f" for (const e of {recorded}) t.add(e.type, e.data); return t.asJSON(); }})()"
    )


def test_events_pages_fold_a_generation_as_the_server_does() -> None:
    expected = Transcript.of(
        Event(f"1-{n}", kind, data) for n, (kind, data) in enumerate(PARTS_STREAM)
    ).as_json()
    assert expected["reasoning"] == "Weather first."
    assert [c["name"] for c in expected["tool_calls"]] == [
        "get_weather",
        "get_time",
        "whole_at_once",
    ]
    assert expected["usage"] is not None
    assert _fold_in_pages(PARTS_STREAM) == expected
    for cut in (3, 4, 8, 17, 19):  # what a page shows at any point of the stream
        head = PARTS_STREAM[:cut]
        server = Transcript.of(Event(f"1-{n}", k, d) for n, (k, d) in enumerate(head)).as_json()
        assert _fold_in_pages(head) == server, f"after {cut} events"


def test_events_pages_fold_of_a_bad_completed_is_empty() -> None:
    stream: list[tuple[str, Any]] = [("completed", ["not", "a", "result"])]
    expected = Transcript.of([Event("1-0", "completed", stream[0][1])]).as_json()
    assert _fold_in_pages(stream) == expected


def test_events_pages_keep_a_fold_across_a_refresh() -> None:
    """What the page saves (a call still streaming included) restores to the same fold, which
    takes the rest of the stream as if it had never stopped."""
    cut = 17
    recorded = json.dumps([{"type": k, "data": d} for k, d in PARTS_STREAM])
    restored = _run_api_js(
        f"(() => {{ const events = {recorded}; const t = new api.Transcript();"
        f" for (const e of events.slice(0, {cut})) t.add(e.type, e.data);"
        " const saved = JSON.parse(JSON.stringify(t.save()));"
        " const back = api.Transcript.restore(saved);"
        f" for (const e of events.slice({cut})) back.add(e.type, e.data);"
        " return {saved, back: back.asJSON()}; })()"
    )
    assert restored["saved"]["tool_calls"] == [
        {"index": 0, "id": "c1", "name": "get_weather", "arguments": '{"city": "Par', "done": False}
    ]
    assert restored["back"] == _fold_in_pages(PARTS_STREAM)

"""The event vocabulary and the visible-text rule: one definition, the same in the pages."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from genq import Event, JobStatus, visible_text
from genq_contract.events import EVENT_TYPES, TERMINAL_EVENTS

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

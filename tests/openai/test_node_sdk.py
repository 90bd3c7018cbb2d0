"""The official ``openai`` npm package, run by Node against a live gateway + demo worker.

The scripts live in ``tests/node/`` with their ``package.json`` and lockfile; ``make test``
installs them (``npm ci --prefix tests/node``). A missing install fails here, it never skips.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gateway.openai.objects import job_id_of
from tests.e2e.browser import DEV_KEY, Stack

pytestmark = pytest.mark.slow

NODE_DIR = Path(__file__).resolve().parents[1] / "node"


def run_node(script: str, stack: Stack) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "node is not installed (Node 20+ is needed for the npm SDK tests)"
    assert (NODE_DIR / "node_modules" / "openai").is_dir(), (
        "the npm SDK is not installed: run `npm ci --prefix tests/node` (make test does)"
    )
    done = subprocess.run(
        [node, str(NODE_DIR / script), stack.base_url, DEV_KEY],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_node_sdk_streams_a_chat_completion(stack: Stack) -> None:
    out = run_node("chat_stream.mjs", stack)
    assert len(out["ids"]) == 1
    native = stack.result(job_id_of(out["ids"][0]))
    assert out["text"] == native["text"]
    assert out["text"].startswith("Echo: hello from node")
    assert out["roles"] == ["assistant"] and out["finish_reasons"] == ["stop"]
    assert out["usage"]["completion_tokens"] == native["usage"]["completion_tokens"]


def test_node_sdk_resumes_a_background_response_with_starting_after(stack: Stack) -> None:
    out = run_node("resume_response.mjs", stack)
    numbers = [e["n"] for e in out["first"] + out["rest"]]
    assert out["created_status"] == "queued"
    assert numbers == list(range(len(numbers))), "no gap, no duplicate"
    assert out["rest"][-1]["type"] == "response.completed"
    native = stack.result(job_id_of(out["id"]))
    assert out["text"] == native["text"] == out["final"]["output"][0]["content"][0]["text"]

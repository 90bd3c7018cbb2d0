"""A worker warms LiteLLM's call path before its first job (``warm_calls``), so the first
generation after a start does not import LiteLLM's lazily loaded modules on its way to the
provider, and the warming itself sends no request."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter: the modules a first call imports are only seen in one that made none.
FIRST_CALL = """
import asyncio, json, sys
from tests.fakes.openai_server import FakeOpenAI
from providers.litellm_adapter import stream_chat, warm_calls

async def main(base, server):
    if sys.argv[1] == "warm":
        await warm_calls(["openai/gpt-4o-mini", "openai/gpt-4o", "demo/fast"])
    before, warm_requests = set(sys.modules), server.count()
    async for _ in stream_chat("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}],
                               api_base=base, api_key="sk-test"):
        pass
    loaded = sorted(m for m in set(sys.modules) - before if m.startswith("litellm"))
    print(json.dumps({"loaded": loaded, "warm_requests": warm_requests,
                      "requests": server.count()}))

with FakeOpenAI(default_tokens=3) as server:
    asyncio.run(main(server.base_url, server))
"""


def first_call(mode: str) -> dict[str, object]:
    return script_answer(FIRST_CALL, mode)


def script_answer(code: str, mode: str) -> dict[str, Any]:
    """Runs ``code`` in a fresh interpreter (given ``mode``); its last line of output, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", code, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


# The bulk of a cold first call's imports (hundreds of milliseconds): the proxy's types and
# providers' transformations. A few small ones (LiteLLM's service logger, the chunk builder's
# types) load on the real request's own path, which a mock answer does not take.
HEAVY = ("litellm.proxy", "litellm.llms")


def heavy(loaded: object) -> list[str]:
    assert isinstance(loaded, list)
    return [m for m in loaded if m.startswith(HEAVY)]


def test_the_first_call_after_warming_skips_the_heavy_imports_and_warming_sends_nothing() -> None:
    cold, warm = first_call("cold"), first_call("warm")
    # What a cold first call loads, so this test fails if warming stops covering it.
    assert heavy(cold["loaded"]), "a cold first call imported nothing heavy: nothing to warm"
    assert heavy(warm["loaded"]) == []
    assert warm["warm_requests"] == 0
    assert warm["requests"] == 1

"""Workers anywhere, proven in another language: ``tests/node/pull_worker.mjs`` (plain Node 20
``fetch``, no npm package) works the demo queue of a live gateway, and a viewer follows the
generation on the gateway's SSE route, as a browser would.

Killed mid-job (SIGKILL), the Node worker's job is redelivered once its visibility passes to a
second Node worker; the viewer sees ``restarted`` and exactly one final text.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.settings import Settings
from genq import Event, visible_text

from .conftest import create, read_stream
from .test_pull import KEY_WORKER, worker_key_settings

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[1] / "node" / "pull_worker.mjs"
PROMPT = "the quick brown fox jumps over the lazy dog"


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    return worker_key_settings(redis_url, prefix)


class NodeWorker:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.markers: list[dict[str, Any]] = []

    async def expect(self, ev: str, timeout: float = 15.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    stderr = await self.proc.stderr.read() if self.proc.stderr else b""
                    raise AssertionError(f"node exited before {ev}: {stderr.decode()[-2000:]}")
                marker = json.loads(line)
                self.markers.append(marker)
                if marker["ev"] == ev:
                    return marker


@asynccontextmanager
async def node_worker(base_url: str, *options: str) -> AsyncIterator[NodeWorker]:
    node = shutil.which("node")
    assert node, "node (20+) is not installed"
    proc = await asyncio.create_subprocess_exec(
        node, str(SCRIPT), base_url, KEY_WORKER, "demo", *options,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield NodeWorker(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


def as_events(stream: Any) -> list[Event]:
    return [Event(e.id or "", e.event, e.data) for e in stream.events]


async def test_node_worker_streams_and_acks(live, alpha):
    created = await create(alpha, prompt=PROMPT)
    viewer = asyncio.create_task(read_stream(alpha, created["id"], timeout=30))
    async with node_worker(live.url, "--jobs", "1", "--delay-ms", "20") as worker:
        acked = await worker.expect("acked")
        assert await asyncio.wait_for(worker.proc.wait(), 10) == 0
    assert acked == {"ev": "acked", "id": created["id"], "attempt": 1, "status": "completed"}
    stream = await viewer
    events = as_events(stream)
    assert [e.type for e in events].count("chunk") == len(PROMPT.split())
    assert visible_text(events) == PROMPT
    assert events[-1].type == "completed" and events[-1].data["text"] == PROMPT
    generation = (await alpha.get(f"/v1/generations/{created['id']}")).json()
    assert generation["status"] == "completed"


async def test_node_worker_killed_mid_job_is_redelivered(live, alpha):
    created = await create(alpha, prompt=PROMPT)
    viewer = asyncio.create_task(read_stream(alpha, created["id"], timeout=40))
    async with node_worker(live.url, "--visibility", "2", "--hang-after", "3") as first:
        hanging = await first.expect("hanging")
        assert (hanging["id"], hanging["attempt"], hanging["chunks"]) == (created["id"], 1, 3)
        first.proc.send_signal(signal.SIGKILL)
        await first.proc.wait()
    async with node_worker(live.url, "--visibility", "2", "--jobs", "1", "--wait", "5") as second:
        pulled = await second.expect("pulled")
        assert (pulled["id"], pulled["attempt"]) == (created["id"], 2)
        acked = await second.expect("acked")
        assert acked["status"] == "completed"
    events = as_events(await viewer)
    types = [e.type for e in events]
    assert types[:3] == ["chunk"] * 3  # the first worker's words, seen live
    assert types.count("restarted") == 1 and types.count("completed") == 1
    assert types[-1] == "completed"
    assert visible_text(events) == PROMPT  # one final text, nothing doubled
    assert events[-1].data["text"] == PROMPT

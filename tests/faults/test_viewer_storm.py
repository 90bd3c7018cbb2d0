"""VIEWERS SSE viewers dropped at once mid-generation, reconnecting at once with Last-Event-ID.

The gateway runs as its own process (uvicorn, as deployed); the viewers are httpx streams in
this process, spread over JOBS generations that a genq worker here streams, each with a retried
first attempt (so every viewer also lives through a ``restarted``). All viewers connect before
the generations start. When the reference viewer has seen the second attempt's first chunks,
every connection is dropped at once; all reconnect at once with ``Last-Event-ID``. Then each
viewer's events, both connections together, must be exactly the reference's: no gap, no
duplicate, the result's text once. Meanwhile ``CLIENT LIST`` is sampled: the gateway's Redis
connections stay within its pool size, whatever the number of viewers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.access.auth import hash_key
from genq import TERMINAL_EVENTS, ActiveJob, Event, Queue, RetryJobError, visible_text
from tests.faults.invariants import check_invariants
from tests.faults.support import ROOT, Viewer
from tests.ports import free_port
from workers.lifetime import die_with_parent

VIEWERS = int(os.environ.get("GENQ_FAULTS_VIEWERS", "1000"))
JOBS = 10
FIRST_ATTEMPT_CHUNKS = 8
CHUNKS = 30
CHUNK_EVERY = 0.1
POOL = 16  # the gateway's GENQ_REDIS_MAX_CONNECTIONS
API_KEY = "storm-key-0123456789"


class GatewayProcess:
    """``uvicorn gateway.app:create_app --factory`` on a free port; dies with this process."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        args = [sys.executable, "-m", "uvicorn", "gateway.app:create_app", "--factory"]
        args += ["--host", "127.0.0.1", "--port", str(self.port), "--backlog", "4096"]
        args += ["--log-level", "warning", "--no-access-log"]
        with self.log.open("wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                *args,
                cwd=ROOT,
                env={**os.environ, **self.env},
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
                preexec_fn=die_with_parent,
            )
        async with httpx.AsyncClient(base_url=self.url) as client, asyncio.timeout(20):
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/readyz")).status_code == 200:
                        return
                if self.proc.returncode is not None:
                    raise AssertionError(f"gateway exited: {self.log.read_text()[-2000:]}")
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.terminate()
        try:
            async with asyncio.timeout(5):
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


@pytest.fixture
async def gateway(
    servers, prefix: str, tmp_path: Path
) -> AsyncIterator[tuple[Any, GatewayProcess]]:
    server = servers(maxclients="10000")
    process = GatewayProcess(
        {
            "GENQ_REDIS_URL": server.url,
            "GENQ_QUEUE_NAMESPACE": prefix,
            "GENQ_SECRET": "storm-secret-0123456789abcdef",
            "GENQ_API_KEYS": json.dumps({f"sha256:{hash_key(API_KEY)}": "storm"}),
            "GENQ_MODELS": "demo/fast",
            "GENQ_REDIS_MAX_CONNECTIONS": str(POOL),
            "GENQ_TENANT_RATE": "1000",
            "GENQ_TENANT_BURST": "1000",
            "GENQ_SSE_RETRY_MS": "200",
        },
        tmp_path / "gateway.log",
    )
    await process.start()
    try:
        yield server, process
    finally:
        await process.stop()


class SSEViewer:
    """One EventSource-like viewer: its events over all its connections."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.events: list[Event] = []
        self.ended = False
        self.resumed = 0
        """Connections that ended cleanly before the terminal event (the gateway's pool found
        no connection for a backfill in the storm), each followed by a resume."""
        self.answered = False

    async def follow(self, http: httpx.AsyncClient, connected: asyncio.Semaphore | None) -> None:
        for _ in range(20):
            if await self._follow_once(http, connected):
                return
        raise AssertionError(f"{self.job_id}: twenty connections ended before the end")

    async def _follow_once(
        self, http: httpx.AsyncClient, connected: asyncio.Semaphore | None
    ) -> bool:
        """One connection, read to its end: True once the terminal event came. False when the
        gateway answered 503 (its pool waited too long for Redis in the storm), after waiting
        its Retry-After, or ended the stream before the terminal event, after its ``retry:``:
        as an EventSource, or genq's clients, would."""
        headers = {"Last-Event-ID": self.events[-1].id} if self.events else {}
        url = f"/v1/generations/{self.job_id}/events"
        retry_ms = 0
        async with http.stream("GET", url, headers=headers) as response:
            if response.status_code == 503:
                await asyncio.sleep(float(response.headers["Retry-After"]))
                return False
            assert response.status_code == 200, response.status_code
            if connected is not None and not self.answered:
                connected.release()  # once per viewer, whichever connection was answered first
            self.answered = True
            block: dict[str, str] = {}
            async for line in response.aiter_lines():
                if line:
                    name, _, value = line.partition(": ")
                    block[name] = value
                    continue
                if "id" in block:
                    data = json.loads(block["data"])
                    self.events.append(Event(block["id"], block["event"], data))
                elif "retry" in block:
                    retry_ms = int(block["retry"])
                block = {}
        if self.events and self.events[-1].type in TERMINAL_EVENTS:
            self.ended = True
            return True
        self.resumed += 1
        await asyncio.sleep(retry_ms / 1000)
        return False


async def count_gateway_connections(redis: Any) -> int:
    clients = await redis.client_list()
    return sum(1 for c in clients if c.get("name", "").startswith("genq-"))


async def test_viewers_dropped_at_once_reconnect_without_gap_or_duplicate(
    gateway, clients, prefix: str
) -> None:
    server, process = gateway
    redis = clients(server.url)
    queue = Queue(redis, f"{prefix}:demo", backoff=0.01, max_backoff=0.02, result_ttl=30.0)
    start = asyncio.Event()

    async def handler(job: ActiveJob) -> dict[str, Any]:
        await start.wait()
        count = FIRST_ATTEMPT_CHUNKS if job.attempt == 1 else CHUNKS
        text = ""
        for n in range(count):
            await asyncio.sleep(CHUNK_EVERY)
            piece = f"#{job.attempt}:tok{n} "
            await job.emit(piece)
            text += piece
        if job.attempt == 1:
            raise RetryJobError("first attempt is cut short", retry_after=0)
        return {"text": text}

    limits = httpx.Limits(max_connections=VIEWERS + 50, max_keepalive_connections=0)
    timeout = httpx.Timeout(30.0)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with (
        httpx.AsyncClient(
            base_url=process.url, limits=limits, timeout=timeout, headers=headers
        ) as http,
        queue.worker(handler, concurrency=JOBS),
    ):
        ids = []
        for i in range(JOBS):
            created = await http.post(
                "/v1/generations", json={"model": "demo/fast", "prompt": f"{i}"}
            )
            assert created.status_code == 202, created.text
            ids.append(created.json()["id"])
        references = {job_id: Viewer(queue, job_id) for job_id in ids}
        viewers = [SSEViewer(ids[i % JOBS]) for i in range(VIEWERS)]
        peak = 0
        sampling = True

        async def sample() -> None:
            nonlocal peak
            while sampling:
                peak = max(peak, await count_gateway_connections(redis))
                await asyncio.sleep(0.1)

        sampler = asyncio.create_task(sample())
        connected = asyncio.Semaphore(0)
        began = time.monotonic()
        first = [asyncio.create_task(v.follow(http, connected)) for v in viewers]
        async with asyncio.timeout(30):
            for _ in range(VIEWERS):
                await connected.acquire()
        connect_seconds = time.monotonic() - began
        start.set()

        # Drop everyone at once, while the second attempts stream.
        async with asyncio.timeout(30):
            while not all(second_attempt_started(r.events) for r in references.values()):
                await asyncio.sleep(0.02)
        for task in first:
            task.cancel()
        results = await asyncio.gather(*first, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results), [
            r for r in results if not isinstance(r, asyncio.CancelledError)
        ][:3]
        dropped_with = [len(v.events) for v in viewers]

        began = time.monotonic()
        second = [asyncio.create_task(v.follow(http, None)) for v in viewers]
        async with asyncio.timeout(40):
            await asyncio.gather(*second)
        reconnect_seconds = time.monotonic() - began
        sampling = False
        await sampler

    for reference in references.values():
        await reference.finished(5)
    expected = {j: [(e.id, e.type) for e in r.events] for j, r in references.items()}
    broken = [
        v
        for v in viewers
        if [(e.id, e.type) for e in v.events] != expected[v.job_id] or not v.ended
    ]
    assert not broken, (
        f"{len(broken)} of {VIEWERS} viewers differ from the reference; first: "
        f"{[(e.id, e.type) for e in broken[0].events][:8]}..."
    )
    assert min(dropped_with) > FIRST_ATTEMPT_CHUNKS  # all were dropped mid-second-attempt
    assert max(dropped_with) < CHUNKS + FIRST_ATTEMPT_CHUNKS + 2
    for viewer in viewers[:JOBS]:
        assert visible_text(viewer.events) == viewer.events[-1].data["text"]
    # One pool plus one tail reader (plus the history sampler's), for any number of viewers.
    assert 0 < peak <= POOL + 2, peak
    print(
        f"\n{VIEWERS} viewers: connected in {connect_seconds:.1f}s, reconnected and finished in "
        f"{reconnect_seconds:.1f}s; gateway Redis connections peak {peak}; streams ended "
        f"early and resumed {sum(v.resumed for v in viewers)}"
    )
    await check_invariants(
        queue, ids, views={v.job_id: [v.events] for v in viewers}, text_of=lambda r: r["text"]
    )


def second_attempt_started(events: list[Event]) -> bool:
    types = [e.type for e in events]
    return "restarted" in types and types.count("chunk") >= FIRST_ATTEMPT_CHUNKS + 3

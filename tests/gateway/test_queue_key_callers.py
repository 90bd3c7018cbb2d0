"""Only genq touches a queue's keys: one end-to-end run (a live gateway, an HTTP worker pulling
``demo``, a genq worker on ``other``) records the module behind every Redis command on a key
under a queue's hash tag, and every one must be genq's.

The record is taken where a command is written to the socket (``asyncio.StreamWriter``),
whatever path packed it (a client call, a pipeline, a streamed script call), and where redis-py
packs one (its own write path writes in a task of its own, without the caller on the stack). The
module is the innermost frame of this repository on the stack: a gateway function calling genq
is genq's command; a gateway function building a queue's key itself is the gateway's.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio.connection import AbstractConnection

from gateway.settings import Settings
from genq import ActiveJob, Queue, connect

from .conftest import LiveGateway, create, key_client, read_stream, wait_until
from .test_pull import KEY_WORKER, pull, worker_key_settings

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = ("/.venv/", "/site-packages/", "/lib/python")


def caller(frame: Any) -> str:
    """The repository path of the innermost frame of this repository that is not a method of
    a Redis connection (genq's own write path is the wire, not a caller), or '?'."""
    while frame is not None:
        name = frame.f_code.co_filename
        wire = isinstance(frame.f_locals.get("self"), AbstractConnection)
        if name.startswith(str(ROOT)) and not wire and not any(p in name for p in OUTSIDE):
            return Path(name).relative_to(ROOT).as_posix()
        frame = frame.f_back
    return "?"


class Recorder:
    """Every write to a Redis socket naming a key of the test's queues, by calling module."""

    def __init__(self, prefix: str) -> None:
        # Keys a layer built on a queue keeps in its slot (``Queue.extra_key``, ``:x:``: the
        # gateway's history chart) are that layer's data, not the queue's layout.
        self.tag = re.compile(rb"\{" + re.escape(prefix.encode()) + rb":[^}]*\}(:x:)?")
        self.callers: dict[str, int] = {}

    def note(self, data: bytes) -> None:
        found = self.tag.findall(data)
        module = caller(sys._getframe(2))
        if module != "?" and any(not extra for extra in found):  # "?": packed in the stack
            self.callers[module] = self.callers.get(module, 0) + 1

    def outside_genq(self) -> dict[str, int]:
        return {m: n for m, n in self.callers.items() if not m.startswith("genq/")}


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    return worker_key_settings(redis_url, prefix).model_copy(update={"tenant_max_in_flight": 3})


worker = key_client("worker", KEY_WORKER)


@pytest.fixture
def recorder(prefix: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    recording = Recorder(prefix)
    write, writelines = asyncio.StreamWriter.write, asyncio.StreamWriter.writelines
    pack = AbstractConnection.pack_command

    def recorded_pack(self: AbstractConnection, *args: Any) -> list[bytes]:
        packed = pack(self, *args)
        recording.note(b"".join(bytes(chunk) for chunk in packed))
        return packed

    def recorded_write(self: asyncio.StreamWriter, data: Any) -> None:
        recording.note(bytes(data))
        write(self, data)

    def recorded_writelines(self: asyncio.StreamWriter, data: Any) -> None:
        chunks = list(data)
        recording.note(b"".join(bytes(chunk) for chunk in chunks))
        writelines(self, chunks)

    monkeypatch.setattr(asyncio.StreamWriter, "write", recorded_write)
    monkeypatch.setattr(asyncio.StreamWriter, "writelines", recorded_writelines)
    monkeypatch.setattr(AbstractConnection, "pack_command", recorded_pack)
    yield recording


async def run_everything(
    live: LiveGateway, alpha: httpx.AsyncClient, admin: httpx.AsyncClient,
    worker: httpx.AsyncClient,
) -> None:  # fmt: skip
    """Idempotent replays, long-polled pulls, lost leases, in-flight caps, bulk actions,
    metrics, history, streams: the gateway paths that read or wake a queue."""
    waiting = asyncio.create_task(pull(worker, max=1, visibility=30, wait=5))
    await wait_until(lambda: sum(w.waiting for w in pull_waiters(live)) == 1)
    first = await create(alpha, prompt="one", key="k-1")
    assert (await create(alpha, prompt="one", key="k-1"))["id"] == first["id"]
    (job,) = await waiting
    reply = await worker.post(
        f"/v1/queues/demo/jobs/{job['id']}/events",
        json={"receipt": job["receipt"], "events": [{"type": "chunk", "data": "one"}]},
    )
    assert reply.status_code == 200, reply.text
    ack = {"receipt": job["receipt"], "result": {"text": "one"}}
    assert (await worker.post(f"/v1/queues/demo/jobs/{job['id']}/ack", json=ack)).is_success
    lost = {"receipt": job["receipt"], "visibility": 10}  # settled: its lease is gone
    reply = await worker.post(f"/v1/queues/demo/jobs/{job['id']}/extend", json=lost)
    assert reply.status_code == 409, reply.text
    assert [e.event for e in (await read_stream(alpha, first["id"])).events][-1] == "completed"
    # past the in-flight cap (3) at the fourth: the finished first job is pruned, so it fits
    second, third = await create(alpha, prompt="two"), await create(alpha, prompt="three")
    other = await create(alpha, model="other/model", prompt="four")
    assert [e.event for e in (await read_stream(alpha, other["id"])).events][-1] == "completed"
    body = {"ids": [second["id"], third["id"], "demo.missing"]}
    reply = await admin.post("/v1/queues/demo/jobs/cancel", json=body)
    assert reply.status_code == 200 and reply.json()["matched"] == 2, reply.text
    assert (await admin.get("/metrics")).status_code == 200
    assert (await admin.get("/v1/queues/demo/history")).status_code == 200


def pull_waiters(live: LiveGateway) -> list[Any]:
    return list(live.gateway.pull_waiters.values())


async def test_queue_keys_are_touched_only_by_genq(
    recorder: Recorder, live: LiveGateway, alpha: Any, admin: Any, worker: Any, redis_url: str,
    prefix: str,
) -> None:  # fmt: skip
    async def handler(job: ActiveJob) -> dict[str, str]:
        await job.emit("four")
        return {"text": "four"}

    redis = connect(redis_url)  # genq's client, as the worker processes make it
    try:
        async with Queue(redis, prefix=f"{prefix}:other").worker(handler):
            await run_everything(live, alpha, admin, worker)
    finally:
        await redis.aclose()
    # the run went through the paths this test guards (genq answered them)
    guarded = {
        "genq/_lookups.py",
        "genq/_doorbell.py",
        "genq/_queue_records.py",
        "genq/_queue_pacing.py",
    }
    assert guarded <= recorder.callers.keys(), recorder.callers
    assert recorder.outside_genq() == {}, recorder.callers

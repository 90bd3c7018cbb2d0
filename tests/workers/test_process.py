"""The worker as a process: killed mid-generation, and drained by SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from genq import Queue, visible_text
from providers.demo import DemoScript
from tests.faults.invariants import check_invariants
from tests.workers.conftest import events_of
from tests.workers.processes import WorkerChild, worker_children

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def spawn(
    redis_url: str, prefix: str
) -> AsyncIterator[Callable[..., Awaitable[WorkerChild]]]:
    async with worker_children(redis_url, prefix) as start_child:

        async def start(**env: str) -> WorkerChild:
            child = await start_child(**env)
            await child.wait_for_log("serving provider demo")
            return child

        yield start


async def first_chunk(queue: Queue, job_id: str) -> None:
    async with asyncio.timeout(20):
        async for event in queue.watch(job_id):
            if event.type == "chunk":
                return


def generation(tokens: int, delay_ms: int, prompt: str = "story") -> dict[str, Any]:
    return {
        "model": "demo/fast",
        "prompt": prompt,
        "params": {"demo_tokens": tokens, "demo_delay_ms": delay_ms},
    }


def script(payload: dict[str, Any]) -> str:
    messages = [{"role": "user", "content": payload["prompt"]}]
    return DemoScript.from_request(payload["model"], messages, payload["params"]).text


async def test_killed_worker_generation_finishes_on_another_process(
    spawn, demo_queue: Queue
) -> None:
    first = await spawn(GENQ_LEASE="2")
    payload = generation(150, 20)
    job = await demo_queue.enqueue(payload)
    await first_chunk(demo_queue, job.id)
    first.proc.send_signal(signal.SIGKILL)
    await first.wait_exit(5)

    await spawn(GENQ_LEASE="2")
    events = await events_of(demo_queue, job.id, timeout=30)
    assert [e.type for e in events].count("restarted") == 1
    assert events[-1].type == "completed"
    assert visible_text(events) == script(payload) == events[-1].data["text"]
    assert (await demo_queue.get(job.id)).attempt == 2
    await check_invariants(demo_queue, [job.id], views={job.id: [events]})


async def test_sigterm_drains_then_hands_back_what_is_left(
    spawn, demo_queue: Queue, start_workers
) -> None:
    # A 30 s lease: a job that came back quicker than that was handed back, not reclaimed.
    child = await spawn(GENQ_LEASE="30", GENQ_DRAIN_DEADLINE="1.5")
    short_payload, long_payload = generation(20, 20, "short"), generation(200, 20, "long")
    short = await demo_queue.enqueue(short_payload)
    long = await demo_queue.enqueue(long_payload)
    await first_chunk(demo_queue, short.id)
    await first_chunk(demo_queue, long.id)

    signalled = time.monotonic()
    child.proc.send_signal(signal.SIGTERM)
    await child.wait_for_log("draining", timeout=5)
    late = await demo_queue.enqueue(generation(5, 0, "late"))
    assert await child.wait_exit(timeout=8) == 0
    assert time.monotonic() - signalled < 1.5 + 2.5

    assert (await demo_queue.get(short.id)).status.value == "completed"  # finished in time
    long_record = await demo_queue.get(long.id)
    assert long_record.status.value == "waiting"  # handed back at once, not after the lease
    assert (await demo_queue.get(late.id)).status.value == "waiting"  # never reserved

    workers = await start_workers(lease=30.0)  # another worker picks both up
    queue = workers.queues["demo"]
    events = await events_of(queue, long.id, timeout=30)
    assert [e.type for e in events].count("restarted") == 1
    assert visible_text(events) == script(long_payload)
    assert (await queue.wait(late.id, timeout=10))["text"].startswith("Echo: late")
    await check_invariants(queue, [short.id, long.id, late.id], views={long.id: [events]})

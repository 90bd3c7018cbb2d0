"""``genq worker --processes 2`` as a real process: two children share the queue, a killed one
comes back, SIGTERM drains running generations to the end, and a killed supervisor leaves none.

Each provider runs one generation at a time per process here (``demo=1``), so two generations
running at once prove that two children serve the queue.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from genq import Job, Queue
from tests.workers.conftest import events_of
from tests.workers.processes import WorkerChild, worker_children
from tests.workers.test_process import first_chunk

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

SUPERVISOR = ("-m", "genq_cli", "worker", "--processes", "2")
STARTED = re.compile(r"worker process (\d) started \(pid (\d+)\)")
SERVING = "serving provider demo"


@pytest.fixture
async def supervisor(
    redis_url: str, prefix: str
) -> AsyncIterator[Callable[..., Awaitable[WorkerChild]]]:
    # Killing the supervisor (SIGKILL) at the end kills its children with it.
    children = worker_children(
        redis_url, prefix, args=SUPERVISOR, GENQ_PROVIDER_CONCURRENCY="demo=1"
    )
    async with children as start:
        yield start


def generation(prompt: str, tokens: int = 20, delay_ms: int = 100) -> dict[str, Any]:
    return {
        "model": "demo/slow",
        "prompt": prompt,
        "params": {"demo_tokens": tokens, "demo_delay_ms": delay_ms},
    }


def child_pids(supervisor: WorkerChild) -> dict[int, int]:
    """Slot -> pid of the latest child the supervisor started there (from its log)."""
    return {int(m[1]): int(m[2]) for line in supervisor.lines if (m := STARTED.search(line))}


async def both_run_at_once(queue: Queue, prompt: str) -> list[Job]:
    """Enqueues two generations of ~2 s; asserts both stream before either ends."""
    jobs = [await queue.enqueue(generation(f"{prompt}-{n}")) for n in (1, 2)]
    await asyncio.gather(*(first_chunk(queue, job.id) for job in jobs))
    records = [await queue.get(job.id) for job in jobs]
    assert [r.status.value for r in records] == ["active", "active"]
    return jobs


def gone(pid: int) -> bool:
    """No such process, or a zombie (dead, not yet reaped by init)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def test_supervisor_children_share_the_queue_and_a_killed_one_is_restarted(
    supervisor, demo_queue: Queue
) -> None:
    sup = await supervisor(GENQ_LEASE="2")
    await sup.wait_for_log(SERVING, nth=2)
    first, second = await both_run_at_once(demo_queue, "before")

    killed = child_pids(sup)[0]
    os.kill(killed, signal.SIGKILL)
    await sup.wait_for_log(f"(pid {killed}) exited (SIGKILL); restarting", timeout=5)
    await sup.wait_for_log("worker process 0 started", nth=2, timeout=10)
    assert child_pids(sup)[0] != killed
    await sup.wait_for_log(SERVING, nth=3)

    # the killed child's generation is reclaimed and finished; the new child takes work
    for job in (first, second):
        assert (await events_of(demo_queue, job.id, timeout=20))[-1].type == "completed"
    assert {(await demo_queue.get(j.id)).attempt for j in (first, second)} == {1, 2}
    after = await both_run_at_once(demo_queue, "after")
    for job in after:
        assert (await events_of(demo_queue, job.id, timeout=20))[-1].type == "completed"
    assert sup.proc.returncode is None


async def test_supervisor_sigterm_finishes_running_generations_then_exits_0(
    supervisor, demo_queue: Queue
) -> None:
    sup = await supervisor()  # the default drain deadline (10 minutes)
    await sup.wait_for_log(SERVING, nth=2)
    running = await both_run_at_once(demo_queue, "deploy")

    sup.proc.send_signal(signal.SIGTERM)
    await sup.wait_for_log("SIGTERM: forwarding to 2 worker processes", timeout=5)
    late = await demo_queue.enqueue(generation("late", tokens=1))
    assert await sup.wait_exit(timeout=20) == 0
    assert "all worker processes drained" in sup.log

    for job in running:
        events = await events_of(demo_queue, job.id, timeout=5)
        assert "restarted" not in [e.type for e in events]  # not cut, not handed back
        record = await demo_queue.get(job.id)
        assert (record.status.value, record.attempt) == ("completed", 1)
    assert (await demo_queue.get(late.id)).status.value == "waiting"  # nothing new started


async def test_supervisor_sigkilled_leaves_no_child(supervisor) -> None:
    sup = await supervisor()
    await sup.wait_for_log("worker process 1 started")
    await sup.wait_for_log("worker process 0 started")
    pids = list(child_pids(sup).values())
    assert len(pids) == 2 and not any(gone(pid) for pid in pids)

    sup.proc.send_signal(signal.SIGKILL)
    await sup.wait_exit(timeout=5)
    deadline = time.monotonic() + 5
    while not all(gone(pid) for pid in pids):
        assert time.monotonic() < deadline, f"children {pids} outlived the supervisor"
        await asyncio.sleep(0.05)

"""Redis at ``maxmemory`` (``noeviction``): new work is refused clearly, running work ends well.

The memory is "filled" by lowering ``maxmemory`` below what the server uses, so every write
that may grow memory is refused with OOM from that instant. Then:

- the gateway answers an enqueue with 503 and a ``detail`` that says why; the queue refuses
  it whole (no record, no counter bumped);
- a running job that returns settles ``completed``; a running job that is cancelled hears it at
  once and settles ``cancelled``; a waiting job is cancelled (these scripts run at OOM);
- a job that emits while memory is full loses that attempt (its output cannot be stored) and
  runs again once memory is available, with ``restarted`` and its text once.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import pytest
from redis.exceptions import OutOfMemoryError

from genq import ActiveJob, JobStatus, Queue
from tests.faults.invariants import check_invariants
from tests.faults.support import Viewer, eventually
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, client_for, make_settings

pytestmark = pytest.mark.timeout(45)

LEASE = 2.0  # heartbeats every 0.5 s: several of them meet the full memory


async def test_redis_at_maxmemory_refuses_enqueue_with_503_and_lets_running_jobs_end(
    servers, clients, prefix: str
) -> None:
    server = servers(maxmemory_policy="noeviction")
    redis = clients(server.url)
    namespace = f"{prefix}-gw"
    queue = Queue(redis, f"{namespace}:demo", lease=LEASE, result_ttl=30.0)
    worker_queue = Queue(
        clients(server.url), f"{namespace}:demo", lease=LEASE, backoff=0.05, max_backoff=0.1
    )
    gates: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
    interrupted: dict[str, float] = {}

    async def handler(job: ActiveJob) -> dict[str, Any]:
        kind = job.payload["metadata"]["kind"]
        if kind == "stream":  # emits all along: meets the full memory mid-stream
            text = ""
            for n in range(60):
                await asyncio.sleep(0.05)
                piece = f"#{job.attempt}:tok{n} "
                await job.emit(piece)
                text += piece
            return {"text": text}
        await job.emit("thinking ")
        try:
            await gates[job.id].wait()  # a quiet provider call: only heartbeats keep the lease
        except asyncio.CancelledError:
            interrupted[job.id] = time.monotonic()
            raise
        return {"text": "thinking "}

    settings = make_settings(server.url, namespace)
    worker = await worker_queue.worker(handler, concurrency=4).start()
    try:
        with LiveGateway(settings) as live:
            async with client_for(live, KEY_ALPHA) as http:

                async def create(kind: str, **fields: Any) -> str:
                    body = {"model": "demo/fast", "prompt": kind, "metadata": {"kind": kind}}
                    response = await http.post("/v1/generations", json={**body, **fields})
                    assert response.status_code == 202, response.text
                    return str(response.json()["id"])

                finishing = await create("quiet")
                stopping = await create("quiet")
                streaming = await create("stream")
                waiting = await create("quiet", delay_ms=60_000)
                viewers = {i: Viewer(queue, i) for i in (finishing, stopping, streaming, waiting)}
                for job_id in (finishing, stopping, streaming):
                    await eventually(lambda j=job_id: has_chunk(viewers[j]), 10)
                seq_before = await redis.get(queue.keys.seq)

                await redis.config_set("maxmemory", "1")  # full, from now on
                refused = await http.post(
                    "/v1/generations", json={"model": "demo/fast", "prompt": "one more"}
                )
                assert refused.status_code == 503, refused.text
                assert "memory" in refused.json()["detail"].lower()
                assert refused.headers.get("retry-after")
                with pytest.raises(OutOfMemoryError):
                    await queue.enqueue({"direct": True})
                assert await redis.get(queue.keys.seq) == seq_before  # refused whole
                await asyncio.sleep(LEASE)  # a lease's worth of heartbeats at full memory

                # Running jobs can still settle and be cancelled.
                gates[finishing].set()
                assert await queue.wait(finishing, timeout=5) == {"text": "thinking "}
                cancelled_at = time.monotonic()
                stop = await http.post(f"/v1/generations/{stopping}/cancel")
                assert stop.status_code == 200 and stop.json()["cancelled"] is True
                await eventually(lambda: is_status(queue, stopping, JobStatus.CANCELLED), 5)
                assert interrupted[stopping] - cancelled_at < 1.0
                stop_waiting = await http.post(f"/v1/generations/{waiting}/cancel")
                assert stop_waiting.json() == {"cancelled": True, "status": "cancelled"}
                assert (await queue.get(streaming)).status is not JobStatus.COMPLETED

                await redis.config_set("maxmemory", "0")  # memory available again
                await viewers[streaming].finished(30)
                accepted = await http.post(
                    "/v1/generations", json={"model": "demo/fast", "prompt": "x"}
                )
                assert accepted.status_code == 202, accepted.text
                await queue.cancel(accepted.json()["id"])
                for viewer in viewers.values():
                    await viewer.finished(10)

    finally:
        for gate in gates.values():  # whatever happened, no handler is left waiting
            gate.set()
        await worker.stop(deadline=1.0)

    streamed = viewers[streaming].events
    assert [e.type for e in streamed].count("restarted") >= 1  # the OOM-hit attempt is redone
    assert streamed[-1].type == "completed"
    await check_invariants(
        queue,
        [*viewers, accepted.json()["id"]],
        views={job_id: [v.events] for job_id, v in viewers.items()},
    )


async def has_chunk(viewer: Viewer) -> bool:
    return any(e.type == "chunk" for e in viewer.events)


async def is_status(queue: Queue, job_id: str, status: JobStatus) -> bool:
    job = await queue.get(job_id)
    return job is not None and job.status is status

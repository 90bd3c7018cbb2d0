"""Pull/ack under faults, with real processes: the gateway (uvicorn) killed during long polls,
and a puller process that takes jobs and vanishes. No job is lost: each is either returned to
a puller or still waiting, or redelivered once its visibility passes."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.access.auth import hash_key
from genq import Queue
from tests.faults.invariants import check_invariants
from tests.faults.test_viewer_storm import GatewayProcess

pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]

WORKER_KEY = "fault-worker-key-0123456789"
QUEUE = "demo"


@pytest.fixture
async def stack(servers, clients, prefix: str, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """A redis-server, a gateway process factory (all stopped at the end), the demo queue."""
    server = servers()
    env = {
        "GENQ_REDIS_URL": server.url,
        "GENQ_QUEUE_NAMESPACE": prefix,
        "GENQ_SECRET": "pull-fault-secret-0123456789",
        "GENQ_API_KEYS": json.dumps(
            {f"sha256:{hash_key(WORKER_KEY)}": {"tenant": "gpu", "worker": True, "queues": [QUEUE]}}
        ),
        "GENQ_MODELS": "demo/fast",
    }
    started: list[GatewayProcess] = []

    async def gateway() -> GatewayProcess:
        process = GatewayProcess(env, tmp_path / f"gateway-{len(started)}.log")
        await process.start()
        started.append(process)
        return process

    queue = Queue(clients(server.url), prefix=f"{prefix}:{QUEUE}")
    try:
        yield {"gateway": gateway, "queue": queue, "server": server}
    finally:
        for process in started:
            await process.stop()


def http(url: str) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {WORKER_KEY}"}
    return httpx.AsyncClient(base_url=url, headers=headers, timeout=30)


async def enqueue(queue: Queue, text: str) -> str:
    job_id = f"{QUEUE}.{uuid.uuid4().hex}"
    await queue.enqueue({"model": "demo/fast", "prompt": text}, job_id=job_id)
    return job_id


async def work(client: httpx.AsyncClient, job: dict[str, Any]) -> None:
    """Streams the prompt's words and acks, as any HTTP worker would."""
    base = f"/v1/queues/{QUEUE}/jobs/{job['id']}"
    words = job["payload"]["prompt"].split(" ")
    pieces = [w + " " for w in words[:-1]] + [words[-1]]
    events = [{"type": "chunk", "data": piece} for piece in pieces]
    reply = await client.post(f"{base}/events", json={"receipt": job["receipt"], "events": events})
    assert reply.status_code == 200, reply.text
    result = {"text": "".join(pieces)}
    reply = await client.post(f"{base}/ack", json={"receipt": job["receipt"], "result": result})
    assert reply.json() == {"status": "completed"}, reply.text


async def drain(url: str, want: set[str], within: float) -> dict[str, int]:
    """Pulls (long polls) and works jobs until every id in ``want`` is done; id -> attempt."""
    done: dict[str, int] = {}
    async with http(url) as client, asyncio.timeout(within):
        while not want <= done.keys():
            reply = await client.post(
                f"/v1/queues/{QUEUE}/pull", json={"max": 10, "visibility": 30, "wait": 5}
            )
            for job in reply.json()["jobs"]:
                await work(client, job)
                done[job["id"]] = job["attempt"]
    return done


async def long_poll(url: str) -> list[dict[str, Any]] | BaseException:
    try:
        async with http(url) as client:
            reply = await client.post(
                f"/v1/queues/{QUEUE}/pull", json={"max": 5, "visibility": 2, "wait": 20}
            )
            return list(reply.json()["jobs"])
    except httpx.HTTPError as exc:
        return exc


async def test_gateway_killed_during_long_polls_loses_no_job(stack):
    queue: Queue = stack["queue"]
    start: Callable[[], Any] = stack["gateway"]
    accepted: list[str] = []
    returned: list[dict[str, Any]] = []
    rng = random.Random(7)
    for round_no in range(3):
        gateway = await start()
        polls = [asyncio.create_task(long_poll(gateway.url)) for _ in range(4)]
        await asyncio.sleep(0.5)  # the polls are waiting on the doorbell
        if round_no == 0:
            gateway.proc.send_signal(signal.SIGKILL)  # killed while nothing was ready
            await gateway.proc.wait()
            accepted.append(await enqueue(queue, "after the kill"))
        else:
            # Jobs arrive as the gateway dies: some may be handed out, some caught half-way.
            async def arrive(n: int = round_no) -> None:
                for i in range(3):
                    accepted.append(await enqueue(queue, f"round {n} job {i}"))
                    await asyncio.sleep(rng.uniform(0, 0.01))

            arrivals = asyncio.create_task(arrive())
            await asyncio.sleep(rng.uniform(0, 0.02))
            gateway.proc.send_signal(signal.SIGKILL)
            await arrivals
            await gateway.proc.wait()
        for outcome in await asyncio.gather(*polls):
            if isinstance(outcome, list):
                returned.extend(outcome)  # answered before the kill: ours now, never acked
    survivor = await start()
    # Jobs handed out or caught between claim and answer come back after their visibility
    # (or the 10 s claim); the others are still waiting.
    done = await drain(survivor.url, set(accepted), within=45)
    assert set(done) == set(accepted)
    for job in returned:
        assert done[job["id"]] >= 2  # a job returned once is redelivered, not lost
    await check_invariants(queue, accepted)


PULL_AND_VANISH = """
import httpx, sys, time
url, key = sys.argv[1], sys.argv[2]
reply = httpx.post(url + "/v1/queues/demo/pull", json={"max": 5, "visibility": 2},
                   headers={"Authorization": "Bearer " + key}, timeout=30)
print(reply.text, flush=True)
time.sleep(600)
"""


async def test_puller_that_vanishes_loses_nothing(stack):
    queue: Queue = stack["queue"]
    gateway = await stack["gateway"]()
    accepted = [await enqueue(queue, f"job {i} of the vanished puller") for i in range(5)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PULL_AND_VANISH, gateway.url, WORKER_KEY,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        taken = json.loads(line)["jobs"]
        assert sorted(job["id"] for job in taken) == sorted(accepted)
    finally:
        proc.kill()
        await proc.wait()
    async with http(gateway.url) as client:
        reply = await client.post(f"/v1/queues/{QUEUE}/pull", json={"max": 5})
        assert reply.json() == {"jobs": []}  # still invisible: held by the vanished puller
    done = await drain(gateway.url, set(accepted), within=30)
    assert done == {job_id: 2 for job_id in accepted}  # redelivered after the visibility
    await check_invariants(queue, accepted)

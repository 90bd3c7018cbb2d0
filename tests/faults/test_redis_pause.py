"""Redis unresponsive for longer than a lease: frozen (SIGSTOP), and ``CLIENT PAUSE``.

Leases run on the server's clock, and that clock keeps going while the server is frozen or
paused: when it answers again, every lease it held has expired. What comes first, a holder's
emit (renewing the lease it still holds) or another worker's pick (reclaiming it), is a race;
either way there must be one holder at a time, no stale write, one settle, and no duplicated
text. Workers here use what production uses: a socket timeout and redis-py's retries, so
their calls fail and are re-sent while the server does not answer.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from genq import Queue
from tests.faults.invariants import check_invariants, result_writer, tag
from tests.faults.support import Viewer, tagged_handler

pytestmark = pytest.mark.timeout(45)

LEASE = 2.0
OUTAGE = LEASE * 1.75
JOBS = 6


def worker_client(clients: Any, url: str) -> Any:
    """A client configured like ``workers.run.connect``: timeouts, retries with backoff."""
    return clients(
        url,
        socket_timeout=1.0,
        socket_connect_timeout=1.0,
        retry=Retry(ExponentialWithJitterBackoff(base=0.1, cap=1.0), retries=8),
    )


async def run_outage(servers, clients, prefix: str, outage: Any) -> dict[str, int]:
    server = servers()
    redis = clients(server.url)
    queue = Queue(redis, prefix, lease=LEASE, backoff=0.05, max_backoff=0.2, max_attempts=5)
    queues = [
        Queue(
            worker_client(clients, server.url), prefix, lease=LEASE, backoff=0.05, max_backoff=0.2
        )
        for _ in ("A", "B")
    ]
    ids = [(await queue.enqueue({"chunks": 40})).id for _ in range(JOBS)]
    viewers = [Viewer(queue, job_id) for job_id in ids]
    async with (
        queues[0].worker(tagged_handler("A", delay=0.03), concurrency=JOBS // 2),
        queues[1].worker(tagged_handler("B", delay=0.03), concurrency=JOBS // 2),
    ):
        while sum(e.type == "chunk" for v in viewers for e in v.events) < JOBS * 3:
            await asyncio.sleep(0.02)
        paused_at = time.monotonic()
        await outage(server, redis)
        resumed_at = time.monotonic()
        assert resumed_at - paused_at >= OUTAGE * 0.9
        for viewer in viewers:
            await viewer.finished(30)  # nothing hangs
    audit = await check_invariants(
        queue,
        ids,
        views={v.job_id: [v.events] for v in viewers},
        writer_of=tag,
        result_writer=result_writer,
    )
    assert audit.count("completed") == JOBS
    attempts = [int(audit.records[j]["attempt"]) for j in ids]
    return {"reclaimed": sum(a > 1 for a in attempts), "max_attempt": max(attempts)}


async def test_redis_frozen_longer_than_a_lease_keeps_one_holder_and_one_settle(
    servers, clients, prefix: str
) -> None:
    async def freeze(server: Any, redis: Any) -> None:
        server.send_signal(signal.SIGSTOP)
        await asyncio.sleep(OUTAGE)
        server.send_signal(signal.SIGCONT)

    outcome = await run_outage(servers, clients, prefix, freeze)
    assert outcome["max_attempt"] <= 3, outcome


async def test_client_pause_longer_than_a_lease_keeps_one_holder_and_one_settle(
    servers, clients, prefix: str
) -> None:
    async def pause(server: Any, redis: Any) -> None:
        # WRITE mode: reads go on (viewers keep reading), every script call waits.
        await redis.execute_command("CLIENT", "PAUSE", int(OUTAGE * 1000), "WRITE")
        await asyncio.sleep(OUTAGE)

    outcome = await run_outage(servers, clients, prefix, pause)
    assert outcome["max_attempt"] <= 3, outcome

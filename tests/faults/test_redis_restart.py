"""Redis killed (SIGKILL) and restarted: with an append-only file, and with no persistence.

With ``appendfsync always`` every reply the server sent is on disk, so nothing a producer was
told is lost; the restarted server has an empty script cache (redis-py reloads on NOSCRIPT);
leases that ran out while it was down are reclaimed, and their old holders are fenced.
With no persistence everything is gone after the restart: then nothing may hang, and every
viewer must get a clear end instead of waiting forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from genq import JobLeaseLostError, JobNotFoundError, Queue
from tests.faults.invariants import check_invariants, result_writer, tag
from tests.faults.support import BLIPS, Viewer, eventually
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, client_for, make_settings

pytestmark = pytest.mark.timeout(45)

LEASE = 2.0


async def enqueue_until_accepted(queue: Queue, key: str, payload: Any) -> str:
    """A producer that retries after a Redis error with the same Idempotency-Key."""
    async with asyncio.timeout(30):
        while True:
            try:
                return (await queue.enqueue(payload, idempotency_key=key)).id
            except BLIPS:
                await asyncio.sleep(0.05)


async def test_redis_killed_with_aof_loses_no_accepted_job_and_fences_old_holders(
    servers, clients, worker_processes, prefix: str
) -> None:
    server = servers(appendonly="yes", appendfsync="always")
    redis = clients(server.url)
    queue = Queue(redis, prefix, lease=LEASE, result_ttl=30.0)
    a = await worker_processes("A", server.url, prefix, lease=LEASE, delay=0.05, concurrency=4)

    accepted = [
        await queue.enqueue({"chunks": 10}, idempotency_key=f"before-{i}") for i in range(12)
    ]
    ids = [e.id for e in accepted]
    viewers = [Viewer(queue, job_id) for job_id in ids]
    held = {(await a.expect("emit", n=2))["id"]}
    held |= {m["id"] for m in a.saw("start")}
    run_id_before = (await redis.info("server"))["run_id"]

    server.kill()  # SIGKILL: no shutdown, no final fsync beyond appendfsync always
    a.signal(signal.SIGSTOP)  # A holds leases it cannot renew while the server is gone
    producer = asyncio.gather(
        *[enqueue_until_accepted(queue, f"during-{i}", {"chunks": 5}) for i in range(8)]
    )
    await asyncio.sleep(LEASE + 0.5)  # every lease A held runs out meanwhile
    await asyncio.to_thread(server.start)
    ids += await producer
    viewers += [Viewer(queue, job_id) for job_id in ids[12:]]

    assert (await redis.info("server"))["run_id"] != run_id_before, "the server did not restart"
    # The script cache died with the process: every script is loaded again on first use.
    assert await redis.script_exists(queue.scripts.settle.sha) == [False]
    for i in range(12):  # every job accepted before the crash is still there, under its key
        again = await queue.enqueue({"chunks": 10}, idempotency_key=f"before-{i}")
        assert again.deduplicated and again.id == ids[i]

    b = await worker_processes("B", server.url, prefix, lease=LEASE, delay=0.01, concurrency=4)
    for job_id in held:  # B takes over every job A held (their leases expired in the outage)
        await b.expect("start", id=job_id, attempt=2)
    a.signal(signal.SIGCONT)
    for job_id in held:
        await viewers[ids.index(job_id)].finished(20)
    a.signal(signal.SIGTERM)
    assert await a.exit_code(20) == 0
    b.signal(signal.SIGTERM)
    assert await b.exit_code(20) == 0
    for viewer in viewers:
        await viewer.finished(20)

    # A, thawed, was fenced: its next write met the lease B holds now (or, if its retries
    # ran out first, its settle was refused); it finished none of the jobs B took over.
    fenced = {m["id"] for m in a.saw("lost")}
    assert fenced or "lease lost" in a.stderr.read_text(), a.markers[-10:]
    assert held.isdisjoint(m["id"] for m in a.saw("returned"))
    await check_invariants(
        queue,
        ids,
        views={v.job_id: [v.events] for v in viewers},
        writer_of=tag,
        result_writer=result_writer,
    )
    for job_id in held:
        record = await queue.get(job_id)
        assert record is not None and record.result["worker"] == "B" and record.attempt == 2
    assert len(set(ids)) == 20
    # One record per key: a retried enqueue whose first reply was lost made no second job.
    assert int(await redis.get(queue.keys.seq)) == 20


async def test_redis_restarted_empty_ends_viewers_and_nothing_hangs(
    servers, clients, prefix: str, tmp_path: Path
) -> None:
    server = servers()  # no persistence: the restart loses everything
    redis = clients(server.url)
    namespace = f"{prefix}-gw"
    queue = Queue(redis, f"{namespace}:demo", lease=LEASE, result_ttl=30.0)
    settings = make_settings(server.url, namespace, tail_idle_check=0.5)
    lost_lease: list[str] = []

    async def slow(job: Any) -> dict[str, Any]:
        text = ""
        try:
            for n in range(int(job.payload["metadata"]["chunks"])):
                await asyncio.sleep(0.02)
                piece = f"w#{job.attempt}:tok{n} "
                await job.emit(piece)
                text += piece
        except (JobLeaseLostError, asyncio.CancelledError):
            # Its next emit is refused, or the worker's heartbeat finds the lease gone first
            # and stops the handler (seen on a loaded machine): either way the worker let go.
            lost_lease.append(job.id)
            raise
        return {"text": text, "writer": f"w#{job.attempt}"}

    worker_client = clients(server.url)
    worker_queue = Queue(worker_client, f"{namespace}:demo", lease=LEASE)
    with LiveGateway(settings) as live:
        async with (
            worker_queue.worker(slow, concurrency=2),
            client_for(live, KEY_ALPHA) as http,
        ):
            created = await http.post(
                "/v1/generations",
                json={"model": "demo/fast", "prompt": "doomed", "metadata": {"chunks": 400}},
            )
            assert created.status_code == 202, created.text
            job_id = created.json()["id"]
            viewer = Viewer(queue, job_id)
            waiter = asyncio.create_task(queue.wait(job_id, timeout=30))
            sse_events: list[str] = []
            sse = asyncio.create_task(read_sse_until_closed(http, job_id, sse_events))
            await eventually(lambda: has_chunks(viewer, 3), 10)

            server.kill()
            await asyncio.to_thread(server.start)  # empty
            async with asyncio.timeout(15):  # a clear end for everyone, no hang
                await viewer.finished(15)
                sse_status = await sse
                with pytest.raises((JobNotFoundError, RedisConnectionError)):
                    await waiter
            assert viewer.vanished and not any(e.terminal for e in viewer.events)
            assert sse_status == "closed" and sse_events  # the stream ended, not hung

            # Its reconnect (EventSource sends Last-Event-ID) is told the job is gone. (Right
            # after the restart a request can land on a pooled connection the restart broke and
            # get 503, "retry shortly", as the readiness probe below can: it is retried.)
            async def gone() -> bool:
                again = await http.get(
                    f"/v1/generations/{job_id}/events", headers={"Last-Event-ID": sse_events[-1]}
                )
                assert again.status_code in (404, 503), again.text
                return again.status_code == 404

            await eventually(gone, 5)
            await eventually(lambda: lost(lost_lease, job_id), 10)  # the worker let go of it

            # The system works again at once: scripts reloaded, a new job runs to its end.
            # (A probe may land on a pooled connection the restart broke: it is polled, as an
            # orchestrator polls it.)
            async def ready() -> bool:
                return (await http.get("/readyz")).status_code == 200

            await eventually(ready, 5)
            # The same holds for the first requests after it: a 503 says "retry shortly", and a
            # client retries (with its Idempotency-Key, so that a retry makes one job only).
            answers: list[httpx.Response] = []

            async def accepted() -> bool:
                answers.append(
                    await http.post(
                        "/v1/generations",
                        headers={"Idempotency-Key": f"{prefix}-after"},
                        json={"model": "demo/fast", "prompt": "after", "metadata": {"chunks": 5}},
                    )
                )
                return answers[-1].status_code != 503

            await eventually(accepted, 5)
            created = answers[-1]
            assert created.status_code in (200, 202), created.text  # 200: a retry's replay
            after = created.json()["id"]
            new_viewer = Viewer(queue, after)
            await new_viewer.finished(30)
            assert new_viewer.events[-1].type == "completed"
    assert not await redis.exists(queue.keys.job(job_id), queue.keys.events(job_id))
    await check_invariants(
        queue,
        [after],
        views={after: [new_viewer.events]},
        writer_of=tag,
        result_writer=result_writer,
    )


async def has_chunks(viewer: Viewer, n: int) -> bool:
    return sum(e.type == "chunk" for e in viewer.events) >= n


async def lost(lost_lease: list[str], job_id: str) -> bool:
    return job_id in lost_lease


async def read_sse_until_closed(http: httpx.AsyncClient, job_id: str, ids: list[str]) -> str:
    """Reads the SSE route until the server closes it; collects the ``id:`` lines."""
    with contextlib.suppress(httpx.HTTPError):
        async with http.stream("GET", f"/v1/generations/{job_id}/events") as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("id: "):
                    ids.append(line[4:])
            return "closed"
    return "error"

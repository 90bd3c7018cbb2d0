"""bench/queue.py's "apart" section: every system's worker in a process of its own, as it runs in
production, each system on the plain client a newcomer passes (``redis.asyncio.Redis.from_url``
for genq, as the README's first example does, and for SAQ; arq's and taskiq's own pools), on
the default asyncio loop, in the producer and in the worker.

The producer (bench/queue.py) starts ``python bench/queue.py --serve SPEC`` for each run; the
worker process imports and connects, says ``ready`` on stdout, and:
  drain    waits for ``go`` on stdin (the queue already holds the jobs), starts its worker, and
           answers the seconds (and its own CPU seconds) from ``go`` until every job settled
           (genq: ``Worker.stop`` has sent the last settle; SAQ: its ``after_process`` hook
           ran; arq: its burst ended; taskiq: the handler ran, as its list broker has nothing
           to settle)
  latency  starts its worker, idles 0.2 s, says ``ready``, and answers each job's handler start
           (``time.perf_counter``: CLOCK_MONOTONIC, one clock for every process of the machine)
           once it has seen them all; the producer takes the instant before each enqueue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from bench.server_cpu import server_cpu

QUEUE_PY = Path(__file__).resolve().parent / "queue.py"
SYSTEMS = ("genq", "saq", "arq", "taskiq")


def arq_pool(url: str, name: str) -> Any:
    from arq.connections import ArqRedis

    return ArqRedis(aioredis.ConnectionPool.from_url(url), default_queue_name=name)


def taskiq_broker(url: str, name: str) -> Any:
    """taskiq-redis's list broker (LPUSH, BRPOP: at most once), as its README starts."""
    from taskiq_redis import ListQueueBroker

    return ListQueueBroker(url, queue_name=name)


class Producer:
    """One system's enqueue, on the producer's side."""

    def __init__(self, system: str, url: str, name: str) -> None:
        self.system, self.url, self.name = system, url, name
        self.closers: list[Callable[[], Awaitable[Any]]] = []
        self.arq_ids: list[str] = []

    async def open(self) -> Callable[[dict[str, Any]], Awaitable[Any]]:
        system, url, name = self.system, self.url, self.name
        if system == "genq":
            from genq import Queue

            client = aioredis.Redis.from_url(url)
            self.closers.append(client.aclose)
            q = Queue(client, prefix=name)
            return lambda payload: q.enqueue(payload)
        if system == "saq":
            from saq.queue.redis import RedisQueue

            client = aioredis.Redis.from_url(url)
            self.closers.append(client.aclose)
            saq = RedisQueue(client, name=name)
            await saq.connect()
            return lambda payload: saq.enqueue("noop", **payload)
        if system == "arq":
            pool = arq_pool(url, name)
            self.closers.append(pool.aclose)

            async def arq_enqueue(payload: dict[str, Any]) -> None:
                job = await pool.enqueue_job("noop", payload)
                self.arq_ids.append(job.job_id)

            return arq_enqueue
        from taskiq.kicker import AsyncKicker

        broker = taskiq_broker(url, name)
        await broker.startup()
        self.closers.append(broker.shutdown)
        kicker: Any = AsyncKicker(task_name="noop", broker=broker, labels={})
        return lambda payload: kicker.kiq(payload)

    async def close(self) -> None:
        for close in self.closers:
            await close()


async def run_worker(system: str, url: str, name: str, concurrency: int, n: int, mode: str) -> None:
    """The worker process: see the module's docstring."""
    handled = 0
    starts: dict[int, float] = {}
    all_seen = asyncio.Event()

    def seen(payload: dict[str, Any]) -> None:
        nonlocal handled
        if mode == "latency":
            starts[payload["i"]] = time.perf_counter()
        handled += 1
        if handled == n:
            all_seen.set()

    async def say(message: str) -> None:
        sys.stdout.write(message + "\n")
        sys.stdout.flush()

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    start: Callable[[], Awaitable[Any]]
    finish: Callable[[], Awaitable[Any]]
    if system == "genq":
        from genq import ActiveJob, Queue, Worker

        client = aioredis.Redis.from_url(url)
        queue = Queue(client, prefix=name)
        worker: Worker | None = None

        async def genq_noop(job: ActiveJob) -> None:
            seen(job.payload)

        async def genq_start() -> None:
            nonlocal worker
            worker = await queue.worker(genq_noop, concurrency=concurrency).start()

        async def genq_finish() -> None:
            assert worker is not None
            await all_seen.wait()
            await worker.stop()  # waits for the last settles
            await client.aclose()

        start, finish = genq_start, genq_finish
    elif system == "saq":
        from saq import Worker as SaqWorker
        from saq.queue.redis import RedisQueue

        client = aioredis.Redis.from_url(url)
        saq = RedisQueue(client, name=name)
        settled = 0
        all_settled = asyncio.Event()

        async def saq_noop(ctx: Any, **payload: Any) -> None:
            seen(payload)

        async def after(ctx: Any) -> None:  # runs once the job's finish is written
            nonlocal settled
            settled += 1
            if settled == n:
                all_settled.set()

        saq_worker = SaqWorker(
            saq, [("noop", saq_noop)], concurrency=concurrency, after_process=after
        )
        saq_worker.SIGNALS = []
        saq_task: asyncio.Task[Any] | None = None

        async def saq_start() -> None:
            nonlocal saq_task
            await saq.connect()
            saq_task = asyncio.create_task(saq_worker.start())

        async def saq_finish() -> None:
            await all_settled.wait()
            await saq_worker.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await saq_task  # type: ignore[misc]

        start, finish = saq_start, saq_finish
    elif system == "arq":
        from arq.worker import Worker as ArqWorker
        from arq.worker import func

        pool = arq_pool(url, name)

        async def arq_noop(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
            seen(payload)

        arq_worker = ArqWorker(
            functions=[func(arq_noop, name="noop")],
            redis_pool=pool,
            burst=mode == "drain",
            queue_name=name,
            max_jobs=concurrency,
            handle_signals=False,
        )
        arq_task: asyncio.Task[Any] | None = None

        async def arq_start() -> None:
            nonlocal arq_task
            arq_task = asyncio.create_task(arq_worker.main())

        async def arq_finish() -> None:
            assert arq_task is not None
            if mode == "drain":
                await arq_task  # the burst ends when the queue is empty
            else:
                await all_seen.wait()
                arq_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await arq_task

        start, finish = arq_start, arq_finish
    else:
        from taskiq.api import run_receiver_task

        broker = taskiq_broker(url, name)

        @broker.task(task_name="noop")
        async def taskiq_noop(payload: dict[str, Any]) -> None:
            seen(payload)

        receiver: asyncio.Task[Any] | None = None

        async def taskiq_start() -> None:
            nonlocal receiver
            receiver = asyncio.create_task(
                run_receiver_task(broker, max_async_tasks=concurrency, run_startup=True)
            )

        async def taskiq_finish() -> None:
            assert receiver is not None
            await all_seen.wait()
            receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await receiver
            await broker.shutdown()

        start, finish = taskiq_start, taskiq_finish

    if mode == "drain":
        await say("ready")
        await reader.readline()  # go
        began, cpu = time.perf_counter(), time.process_time()
        await start()
        await finish()
        elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
        await say(json.dumps({"elapsed": elapsed, "cpu": cpu, "handled": handled}))
    else:
        await start()
        await asyncio.sleep(0.2)  # idle: blocked in its wait for work
        await say("ready")
        finishing = asyncio.create_task(finish())
        await all_seen.wait()
        await say(json.dumps({"starts": starts}))
        await finishing


def serve(spec: str) -> int:
    """Entry of the worker process (``bench/queue.py --serve SPEC``); SPEC is JSON."""
    logging.basicConfig(level=logging.ERROR)
    s = json.loads(spec)
    asyncio.run(run_worker(s["system"], s["url"], s["name"], s["concurrency"], s["n"], s["mode"]))
    return 0


class Apart:
    """The producer's side of one run: starts worker processes, fills queues, times."""

    def __init__(self, url: str, tag: str) -> None:
        self.url, self.tag = url, tag
        self.runs = 0
        self.producers: list[Producer] = []

    def name(self, system: str, what: str) -> str:
        self.runs += 1
        if system == "genq":
            return f"{self.tag}-apart-{what}-{self.runs}"
        return f"{self.tag}:apart-{system}-{what}-{self.runs}"

    async def spawn(self, system: str, name: str, concurrency: int, n: int, mode: str) -> Any:
        spec = json.dumps(
            {
                "system": system,
                "url": self.url,
                "name": name,
                "concurrency": concurrency,
                "n": n,
                "mode": mode,
            }
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(QUEUE_PY),
            "--serve",
            spec,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        if line.strip() != b"ready":
            raise RuntimeError(f"{system} worker process did not start: {line!r}")
        return proc

    async def answer(self, proc: Any, timeout: float) -> dict[str, Any]:
        line = await asyncio.wait_for(proc.stdout.readline(), timeout)
        await asyncio.wait_for(proc.wait(), 30)
        if not line:
            raise RuntimeError(f"a worker process ended without an answer ({proc.returncode})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def producer(self, system: str, name: str) -> Callable[[dict[str, Any]], Awaitable[Any]]:
        p = Producer(system, self.url, name)
        self.producers.append(p)
        return await p.open()

    async def drain(
        self, system: str, n: int, concurrency: int, payload: dict[str, Any]
    ) -> tuple[float, float, float]:
        """``n`` no-op jobs queued, then one worker process drains them: (jobs/s, the worker
        process's CPU time per job in µs: what a loaded machine moves much less than a rate,
        the server's CPU time per job in µs over the drain, from its ``INFO cpu``: with the
        producer idle meanwhile, the server's part of a job's cost)."""
        name = self.name(system, f"drain{concurrency}")
        enqueue = await self.producer(system, name)

        async def lane(start: int) -> None:
            for _ in range(start, n, 32):
                await enqueue(payload)

        await asyncio.gather(*(lane(s) for s in range(32)))
        proc = await self.spawn(system, name, concurrency, n, "drain")
        async with aioredis.Redis.from_url(self.url) as server:
            before = await server_cpu(server)
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
            answer = await self.answer(proc, 300)
            served = await server_cpu(server) - before
        return n / float(answer["elapsed"]), float(answer["cpu"]) / n * 1e6, served / n * 1e6

    async def latency(
        self, system: str, gaps: list[float], concurrency: int, payload: dict[str, Any]
    ) -> list[float]:
        """ms from the instant before each enqueue to its handler's start, in the worker
        process, the jobs arriving ``gaps`` apart at an idle worker."""
        name = self.name(system, "latency")
        enqueue = await self.producer(system, name)
        proc = await self.spawn(system, name, concurrency, len(gaps), "latency")
        sent = []
        for i, gap in enumerate(gaps):
            await asyncio.sleep(gap)
            sent.append(time.perf_counter())
            await enqueue({**payload, "i": i})
        starts = (await self.answer(proc, 60))["starts"]
        return [(starts[str(i)] - t) * 1000 for i, t in enumerate(sent)]

    async def close(self, own_server: bool) -> None:
        for p in self.producers:
            await p.close()
        if own_server:
            return
        client = aioredis.Redis.from_url(self.url)
        patterns = [f"{{{self.tag}-apart-*", f"saq:*{self.tag}:apart-*", f"{self.tag}:apart-*"]
        for pattern in patterns:
            async for key in client.scan_iter(match=pattern):
                await client.unlink(key)
        arq_keys = [
            f"arq:{kind}:{i}"
            for p in self.producers
            for i in p.arq_ids
            for kind in ("job", "result", "retry", "in-progress")
        ]
        for first in range(0, len(arq_keys), 500):
            await client.unlink(*arq_keys[first : first + 500])
        await client.aclose()

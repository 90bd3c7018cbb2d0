"""What durable acceptance costs: enqueue latency and throughput with ``durable_replicas`` 0 and 1.

One run starts a local primary and one replica (embedded Valkey, ``REPLICAOF``, both on
loopback), then measures the same work on the same queue code with durable acceptance off and
on, rounds alternating, best round kept:

  sequential  one producer awaiting ``Queue.enqueue`` back to back: latency p50/p99, jobs/s
  concurrent  --concurrency producers (32) enqueueing at once: latency p50/p99, jobs/s
  batch       ``Queue.enqueue_many`` of --batch (100) items, back to back: jobs/s

    python bench/durable.py            # --jobs 3000 per section and round
    python bench/durable.py --quick    # --jobs 600

On loopback a replica confirms in well under a millisecond; across hosts add one network round
trip between primary and replica to every durable figure.
"""

# ruff: noqa: E402  (the sys.path fix below must run before the imports)
from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this directory comes first on sys.path and bench/queue.py would shadow the
# standard library's ``queue``, which redis-py imports.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import redis
import redis.asyncio as aioredis

from genq import EnqueueItem, Queue
from genq_cli.embedded_redis import EmbeddedRedis


@dataclass
class Figures:
    p50_ms: float
    p99_ms: float
    jobs_per_s: float

    def line(self) -> str:
        return (
            f"p50 {self.p50_ms:7.3f} ms  p99 {self.p99_ms:7.3f} ms  {self.jobs_per_s:9,.0f} jobs/s"
        )


def figures(latencies: list[float], jobs: int, elapsed: float) -> Figures:
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    return Figures(cuts[49] * 1000, cuts[98] * 1000, jobs / elapsed)


def start_pair() -> tuple[EmbeddedRedis, EmbeddedRedis]:
    primary = EmbeddedRedis(repl_diskless_sync_delay="0").start()
    replica = EmbeddedRedis().start()
    with redis.Redis(port=replica.port) as client:
        client.execute_command("REPLICAOF", "127.0.0.1", primary.port)
    with redis.Redis(port=primary.port) as client:
        deadline = time.monotonic() + 20
        while True:  # until the replica confirms a write
            client.set("bench:ready", 1)
            if int(client.execute_command("WAIT", 1, 100)) >= 1:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the replica never confirmed a write")
    return primary, replica


async def sequential(queue: Queue, jobs: int) -> Figures:
    latencies = []
    started = time.perf_counter()
    for n in range(jobs):
        before = time.perf_counter()
        await queue.enqueue({"n": n})
        latencies.append(time.perf_counter() - before)
    return figures(latencies, jobs, time.perf_counter() - started)


async def concurrent(queue: Queue, jobs: int, producers: int) -> Figures:
    latencies: list[float] = []

    async def produce(count: int) -> None:
        for n in range(count):
            before = time.perf_counter()
            await queue.enqueue({"n": n})
            latencies.append(time.perf_counter() - before)

    started = time.perf_counter()
    await asyncio.gather(*(produce(jobs // producers) for _ in range(producers)))
    return figures(latencies, len(latencies), time.perf_counter() - started)


async def batches(queue: Queue, jobs: int, size: int) -> Figures:
    latencies = []
    started = time.perf_counter()
    for _ in range(max(1, jobs // size)):
        before = time.perf_counter()
        await queue.enqueue_many([EnqueueItem({"n": n}) for n in range(size)])
        latencies.append(time.perf_counter() - before)
    elapsed = time.perf_counter() - started
    return figures(latencies, len(latencies) * size, elapsed)


async def main(args: argparse.Namespace) -> None:
    primary, replica = start_pair()
    client = aioredis.Redis.from_url(primary.url, socket_timeout=5)
    try:
        sections: dict[str, Callable[[Queue], Awaitable[Figures]]] = {
            "sequential": lambda q: sequential(q, args.jobs),
            "concurrent": lambda q: concurrent(q, args.jobs, args.concurrency),
            "batch": lambda q: batches(q, args.jobs, args.batch),
        }
        best: dict[tuple[str, str], Figures] = {}
        for _ in range(args.rounds):
            for mode, replicas in (("off", 0), ("on", 1)):
                queue = Queue(
                    client, f"bench-durable-{uuid.uuid4().hex[:8]}", durable_replicas=replicas
                )
                await queue.enqueue({"warm": True})  # loads the script
                for name, run in sections.items():
                    result = await run(queue)
                    kept = best.get((name, mode))
                    if kept is None or result.jobs_per_s > kept.jobs_per_s:
                        best[(name, mode)] = result
                await client.flushall()
        print(f"durable acceptance, primary + 1 replica on loopback, best of {args.rounds} rounds")
        for name in sections:
            off, on = best[(name, "off")], best[(name, "on")]
            print(f"{name:<11} off  {off.line()}")
            print(f"{'':<11} on   {on.line()}")
            print(
                f"{'':<11} on/off: p50 x{on.p50_ms / off.p50_ms:.2f}, "
                f"p99 x{on.p99_ms / off.p99_ms:.2f}, jobs/s x{on.jobs_per_s / off.jobs_per_s:.2f}"
            )
    finally:
        await client.aclose()
        replica.stop()
        primary.stop()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="--jobs 600")
    args = parser.parse_args()
    if args.quick:
        args.jobs = 600
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))

"""A genq worker as a real process, for the process-level tests (single node and cluster).

The handler streams ``<name>:tok1 ``, ``<name>:tok2 ``... (``payload["chunks"]`` of them, one
every ``--delay`` seconds), waits ``--linger`` seconds, and returns ``{"worker", "attempt",
"text"}``. Every step is reported on stdout as one JSON line, so a test waits for an event
instead of sleeping:

    {"ev": "ready"}                     the worker is running
    {"ev": "start", "id", "attempt"}    the handler started a job
    {"ev": "emit", "id", "attempt", "n"}  chunk n was emitted (the emit returned)
    {"ev": "dying", "id", "attempt"}    --die-after: about to SIGKILL itself
    {"ev": "stalled", "id", "attempt"}  --stall-after: holds the job mid-stream from here on
    {"ev": "lost", "id", "attempt", "n"}  emit n raised JobLeaseLostError
    {"ev": "interrupted", "id", "attempt"}  the handler's task was cancelled
    {"ev": "cleaned", "id", "attempt"}  --cleanup: done cleaning up after a loss or cancel
    {"ev": "returned", "id", "attempt"}  the handler returned its result
    {"ev": "stopping"}                  SIGTERM: stop() called, no new job is taken from here
    {"ev": "exit"}                      stop() returned; the process exits 0

Run from the repository root, as a module, so that ``genq`` is this checkout's:
``python -m tests.genq.worker_process --redis-url URL --prefix P --name A [options]``; a
``redis+cluster://`` URL runs it on a Redis Cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from typing import Any

import redis.asyncio as aioredis

from genq import PRESENCE_SECONDS, ActiveJob, JobLeaseLostError, Queue
from genq.connection import RedisClient, connect, is_cluster_url


def report(ev: str, **fields: Any) -> None:
    print(json.dumps({"ev": ev, "pid": os.getpid(), **fields}), flush=True)


def client_for(url: str) -> RedisClient:
    """genq's cluster client for a cluster URL; for a single node redis-py's own client, the
    one an application hands to ``Queue``."""
    if is_cluster_url(url):
        return connect(url)
    return aioredis.Redis.from_url(url)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--redis-url", required=True, help="redis:// or redis+cluster://")
    p.add_argument("--prefix", required=True)
    p.add_argument("--name", required=True, help="tags every chunk and the result")
    p.add_argument("--lease", type=float, default=2.0)
    p.add_argument("--heartbeat", type=float, default=None)
    p.add_argument("--presence", type=float, default=PRESENCE_SECONDS)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--delay", type=float, default=0.05, help="seconds between chunks")
    p.add_argument("--linger", type=float, default=0.0, help="seconds from last chunk to return")
    p.add_argument(
        "--cleanup",
        type=float,
        default=0.0,
        help="seconds spent cleaning up after a lost lease or a cancel, not interruptible "
        "(like closing a provider stream)",
    )
    p.add_argument(
        "--die-after", type=int, default=0, help="SIGKILL itself after emitting N chunks (0: never)"
    )
    p.add_argument(
        "--stall-after",
        type=int,
        default=0,
        help="after emitting N chunks, hold the job (its lease renewed) until killed or "
        "cancelled, so a kill lands mid-stream however late it comes (0: never)",
    )
    return p.parse_args(argv)


async def main(args: argparse.Namespace) -> None:
    client = client_for(args.redis_url)
    queue = Queue(client, prefix=args.prefix, lease=args.lease)

    async def clean_up(ids: dict[str, Any]) -> None:
        if args.cleanup <= 0:
            return
        done = asyncio.ensure_future(asyncio.sleep(args.cleanup))
        while not done.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(done)
        report("cleaned", **ids)

    async def handler(job: ActiveJob) -> dict[str, Any]:
        ids = {"id": job.id, "attempt": job.attempt}
        report("start", **ids)
        chunks: list[str] = []
        try:
            for n in range(1, int(job.payload["chunks"]) + 1):
                await asyncio.sleep(args.delay)
                chunk = f"{args.name}:tok{n} "
                try:
                    await job.emit(chunk)
                except JobLeaseLostError:
                    report("lost", n=n, **ids)
                    raise
                chunks.append(chunk)
                report("emit", n=n, **ids)
                if n == args.die_after:
                    report("dying", **ids)
                    os.kill(os.getpid(), signal.SIGKILL)
                if n == args.stall_after:
                    report("stalled", **ids)
                    await asyncio.Event().wait()  # never set
            await asyncio.sleep(args.linger)
        except asyncio.CancelledError:
            report("interrupted", **ids)
            await clean_up(ids)
            raise
        except JobLeaseLostError:
            await clean_up(ids)
            raise
        report("returned", **ids)
        return {"worker": args.name, "attempt": job.attempt, "text": "".join(chunks)}

    worker = queue.worker(
        handler,
        concurrency=args.concurrency,
        lease=args.lease,
        heartbeat=args.heartbeat,
        presence=args.presence,
    )
    stopper: list[asyncio.Task[None]] = []

    async def stop() -> None:
        task = asyncio.create_task(worker.stop())
        await asyncio.sleep(0)  # stop() has started: the worker takes no new job from here on
        report("stopping")
        await task

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: stopper.append(asyncio.create_task(stop())))
    try:
        await worker.start()
        report("ready")
        await worker.run()
        await asyncio.gather(*stopper)
    finally:
        await client.aclose()
    report("exit")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    asyncio.run(main(parse()))

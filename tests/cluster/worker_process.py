"""A genq worker as a real process, connected to a Redis Cluster, for the worker-kill test.

The handler streams ``<name>:tok1 ``, ``<name>:tok2 ``... (``payload["chunks"]`` of them, one
every ``--delay`` seconds) and returns ``{"worker", "attempt", "text"}``. Each step is one JSON
line on stdout, so the test waits for an event instead of sleeping:

    {"ev": "ready"}                       the worker is running
    {"ev": "start", "id", "attempt"}      the handler started a job
    {"ev": "emit", "id", "attempt", "n"}  chunk n was emitted (the emit returned)
    {"ev": "interrupted", "id", "attempt"}  the handler's task was cancelled
    {"ev": "returned", "id", "attempt"}   the handler returned its result
    {"ev": "exit"}                        SIGTERM: the worker stopped gracefully

Run from the repository root: ``python -m tests.cluster.worker_process --url
redis+cluster://127.0.0.1:PORT --prefix P --name A [options]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any

from genq import ActiveJob, Queue
from genq.connection import connect


def report(ev: str, **fields: Any) -> None:
    print(json.dumps({"ev": ev, "pid": os.getpid(), **fields}), flush=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True, help="a redis+cluster:// URL")
    p.add_argument("--prefix", required=True)
    p.add_argument("--name", required=True, help="tags every chunk and the result")
    p.add_argument("--lease", type=float, default=2.0)
    p.add_argument("--delay", type=float, default=0.05, help="seconds between chunks")
    return p.parse_args(argv)


async def main(args: argparse.Namespace) -> None:
    client = connect(args.url)
    queue = Queue(client, prefix=args.prefix, lease=args.lease)

    async def handler(job: ActiveJob) -> dict[str, Any]:
        ids = {"id": job.id, "attempt": job.attempt}
        report("start", **ids)
        chunks: list[str] = []
        try:
            for n in range(1, int(job.payload["chunks"]) + 1):
                await asyncio.sleep(args.delay)
                chunk = f"{args.name}:tok{n} "
                await job.emit(chunk)
                chunks.append(chunk)
                report("emit", n=n, **ids)
        except asyncio.CancelledError:
            report("interrupted", **ids)
            raise
        report("returned", **ids)
        return {"worker": args.name, "attempt": job.attempt, "text": "".join(chunks)}

    worker = queue.worker(handler, concurrency=1, lease=args.lease)
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []
    loop.add_signal_handler(
        signal.SIGTERM, lambda: stopping.append(loop.create_task(worker.stop()))
    )
    try:
        await worker.start()
        report("ready")
        await worker.run()
        await asyncio.gather(*stopping)
    finally:
        await client.aclose()
    report("exit")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    asyncio.run(main(parse()))

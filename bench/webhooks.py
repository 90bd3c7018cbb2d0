"""Webhook events: what the pending sweep costs, and how long an event takes from its
generation's end to the receiver, in process on an embedded Redis (or ``GENQ_BENCH_REDIS_URL``).

    python -m bench.webhooks

- sweep: ``PendingSweeper.sweep()`` over N pending generations that are all still running (so
  every one is read and none published: the steady cost), mean of 5 sweeps, for N = 1,000 and
  10,000. The sweep runs once per ``GENQ_WEBHOOK_SWEEP_EVERY`` across all worker processes.
- latency: 50 generations of a tenant with one endpoint (a local HTTP receiver), completed one
  by one by a genq worker while a ``WebhookDeliveries`` (sweep every 0.5 s, the default) runs:
  seconds from each job's ``finished_at`` (Redis clock) to the POST's arrival, median and p90.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import redis.asyncio as aioredis

from genq import ActiveJob, EnqueueItem, Queue
from genq_cli.embedded_redis import EmbeddedRedis
from genq_contract.webhooks import RESPONSE_COMPLETED, WebhookKeys, deliveries_prefix
from genq_services import webhook_endpoints as store
from genq_services.webhook_endpoints import PendingGeneration
from workers.webhook_delivery import PendingSweeper, WebhookDeliveries

TENANT = "bench"


async def sweep_cost(redis: Any, ns: str) -> dict[str, float]:
    await store.create(redis, ns, TENANT, "n", "https://93.184.215.14/", [RESPONSE_COMPLETED])
    queue = Queue(redis, f"{ns}:demo")
    costs: dict[str, float] = {}
    for count in (1_000, 10_000):
        await redis.delete(WebhookKeys(ns).pending)
        jobs = await queue.enqueue_many(
            [EnqueueItem({"n": i}, tenant=TENANT) for i in range(count)]
        )
        now = time.time() * 1000
        async with redis.pipeline(transaction=False) as pipe:
            for job in jobs:
                member = PendingGeneration("response", TENANT, queue.prefix, job.id, job.id)
                pipe.zadd(WebhookKeys(ns).pending, {member.member(): now})
            await pipe.execute()
        sweeper = PendingSweeper(redis, ns, every=1, grace=60)
        await sweeper.sweep()
        started = time.perf_counter()
        for _ in range(5):
            await sweeper.sweep()
        costs[str(count)] = round((time.perf_counter() - started) / 5 * 1000, 1)
    return costs


class Arrivals:
    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        arrivals = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                arrivals.at[json.loads(body)["data"]["id"]] = time.time()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"


async def latency(redis: Any, ns: str, count: int = 50) -> dict[str, float]:
    arrivals = Arrivals()
    await store.create(redis, f"{ns}l", TENANT, "n", arrivals.url, [RESPONSE_COMPLETED])
    ns = f"{ns}l"
    queue = Queue(redis, f"{ns}:demo")
    deliveries = WebhookDeliveries(
        redis, ns, Queue(redis, deliveries_prefix(ns)), allow_private=True, block=0.5
    )
    await deliveries.start()

    async def complete(job: ActiveJob) -> dict[str, Any]:
        return {"text": "done", "finish_reason": "stop"}

    ids = []
    async with queue.worker(complete, concurrency=1):
        for i in range(count):
            made = await queue.enqueue({"n": i}, tenant=TENANT)
            member = PendingGeneration("generation", TENANT, queue.prefix, made.id, made.id)
            await store.note_pending(redis, ns, member)
            ids.append(made.id)
            await asyncio.sleep(0.05)
        deadline = time.monotonic() + 60
        while len(arrivals.at) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    await deliveries.stop()
    arrivals.server.shutdown()
    lags = []
    for job_id in ids:
        ended = await queue.get(job_id)
        assert ended is not None and ended.finished_at is not None
        lags.append(arrivals.at[job_id] - ended.finished_at)
    lags.sort()
    return {
        "events": len(lags),
        "median_s": round(statistics.median(lags), 3),
        "p90_s": round(lags[int(len(lags) * 0.9)], 3),
    }


async def main(url: str) -> None:
    redis = aioredis.Redis.from_url(url)
    ns = f"benchwh{os.getpid()}"
    try:
        print(json.dumps({"sweep_ms_by_pending": await sweep_cost(redis, ns)}))
        print(json.dumps({"end_to_post": await latency(redis, ns)}))
    finally:
        await redis.aclose()


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n", 1)[0]).parse_args()
    url = os.environ.get("GENQ_BENCH_REDIS_URL")
    if url:
        asyncio.run(main(url))
    else:
        with EmbeddedRedis() as server:
            asyncio.run(main(server.url))

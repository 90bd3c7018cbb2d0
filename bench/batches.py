"""Lines per second of an OpenAI-style batch (``/v1/batches``) against the drain rate of the
same generations enqueued directly, measured side by side in one run.

One gateway process and one worker process (``python -m workers``, concurrency ``--slots``
for the demo provider) on a Redis-protocol server of their own (an embedded Valkey started
here, or ``GENQ_BENCH_REDIS_URL``); ``--lines`` (10,000) chat generations on ``demo/instant``
(``demo_tokens`` 4), each mode on a fresh queue namespace, ``--rounds`` (2) rounds
interleaved:

  direct  the generations, with the payload the gateway makes, enqueued on the provider's
          queue with ``Queue.enqueue_many`` (100 a call) from this process, then drained by
          the worker: lines/s = lines / (last one finished - first enqueue).
  batch   the same lines uploaded as a JSONL file (``POST /v1/files``), ``POST /v1/batches``,
          then polled: the gateway's runner admits the lines onto the provider's batch lane,
          where the worker runs them in ``GENQ_BATCH_SHARE`` (``--share``, 0.5) of its slots:
          lines/s to the last line finished, and to the batch ``completed`` (its output and
          error files made, which reads every line's record once).

The issue's target: batch lines/s within 80% of the direct drain rate. Both modes wait for
the worker's per-generation cost (LiteLLM), so on a small machine the figures move from run
to run while the ratio moves less.

    .venv/bin/python -m bench.batches [--lines 10000] [--slots 16] [--share 0.5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import redis.asyncio as aioredis

from genq import EnqueueItem, JobStatus, Queue, job_states
from genq_cli.embedded_redis import EmbeddedRedis, free_port
from genq_contract.lanes import batch_lane
from genq_contract.payload import GenerationPayload
from workers.lifetime import die_with_parent

KEY = "genq-dev-key"
MODEL = "demo/instant"
TARGET = 0.8


def env(redis_url: str, namespace: str, slots: int, share: float) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
    return {
        **base,
        "GENQ_DEV": "1",
        "GENQ_REDIS_URL": redis_url,
        "GENQ_QUEUE_NAMESPACE": namespace,
        "GENQ_MODELS": MODEL,
        "GENQ_PROVIDER_CONCURRENCY": json.dumps({"demo": slots}),
        "GENQ_BATCH_SHARE": str(share),
        "GENQ_TENANT_MAX_IN_FLIGHT": "1000000",
        "GENQ_LOG_LEVEL": "WARNING",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


@contextlib.contextmanager
def processes(redis_url: str, namespace: str, slots: int, share: float) -> Iterator[str]:
    port = free_port()
    variables = env(redis_url, namespace, slots, share)
    gateway = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "gateway.app:create_app", "--factory"),
            *("--port", str(port), "--log-level", "warning"),
        ],
        env=variables,
        preexec_fn=die_with_parent,
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "workers"], env=variables, preexec_fn=die_with_parent
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for child in (worker, gateway):
            child.send_signal(signal.SIGTERM)
        for child in (worker, gateway):
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


async def ready(client: httpx.AsyncClient, redis: aioredis.Redis, namespace: str) -> None:
    """The gateway answers and the worker published its models (it is serving)."""
    for _ in range(1200):
        with contextlib.suppress(httpx.HTTPError):
            if (await client.get("/readyz")).status_code == 200 and await redis.keys(
                f"{namespace}:*price*"
            ):
                return
        await asyncio.sleep(0.05)
    raise TimeoutError("the gateway or the worker did not get ready")


def body(n: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"bench line {n}"}],
        "demo_tokens": 4,
    }


async def last_finished(queue: Queue, ids: list[str]) -> float:
    """When the last of ``ids`` finished (server clock); waits until all did."""
    while True:
        states = await job_states([(queue, job_id) for job_id in ids])
        if all(s is not None and s.status is JobStatus.COMPLETED for s in states):
            return max(s.finished_at or 0.0 for s in states if s is not None)
        await asyncio.sleep(0.1)


async def direct(redis: aioredis.Redis, namespace: str, lines: int) -> dict[str, float]:
    queue = Queue(redis, prefix=f"{namespace}:demo")
    items = [
        EnqueueItem(
            GenerationPayload(
                tenant="dev",
                model=MODEL,
                messages=body(n)["messages"],
                params={"demo_tokens": 4},
            ).model_dump(),
            job_id=f"demo.{uuid.uuid4().hex}",
            tenant="dev",
        )
        for n in range(lines)
    ]
    start = await queue.server_time()
    ids: list[str] = []
    for offset in range(0, lines, 100):
        ids += [e.id for e in await queue.enqueue_many(items[offset : offset + 100])]
    end = await last_finished(queue, ids)
    return {"lines/s": lines / (end - start)}


async def batch(
    client: httpx.AsyncClient, redis: aioredis.Redis, namespace: str, lines: int
) -> dict[str, float]:
    content = "".join(
        json.dumps(
            {"custom_id": f"l{n}", "method": "POST", "url": "/v1/chat/completions", "body": body(n)}
        )
        + "\n"
        for n in range(lines)
    ).encode()
    files = {"file": ("bench.jsonl", io.BytesIO(content)), "purpose": (None, "batch")}
    uploaded = (await client.post("/v1/files", files=files)).json()
    lane = Queue(redis, prefix=batch_lane(f"{namespace}:demo"))
    start = await lane.server_time()
    created = await client.post(
        "/v1/batches",
        json={
            "input_file_id": uploaded["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        },
    )
    batch_id = created.json()["id"]
    while True:
        answer = (await client.get(f"/v1/batches/{batch_id}")).json()
        if answer["status"] in ("completed", "failed", "expired", "cancelled"):
            break
        await asyncio.sleep(0.05)
    completed = await lane.server_time()
    if answer["status"] != "completed" or answer["request_counts"]["completed"] != lines:
        raise RuntimeError(f"the batch ended {answer['status']}: {answer['request_counts']}")
    records = await redis.hgetall(f"{namespace}:gateway:batch:{batch_id}:lines")
    ids = [json.loads(v)["job"] for v in records.values()]
    end = await last_finished(lane, ids)
    return {"lines/s": lines / (end - start), "to completed": lines / (completed - start)}


async def run(args: argparse.Namespace) -> None:
    server = None
    url = os.environ.get("GENQ_BENCH_REDIS_URL")
    if url is None:
        server = EmbeddedRedis().start()
        url = server.url
    redis = aioredis.from_url(url)
    results: dict[str, list[dict[str, float]]] = {"direct": [], "batch": []}
    try:
        for round_ in range(args.rounds):
            for mode in ("direct", "batch"):
                namespace = f"bb{uuid.uuid4().hex[:8]}"
                with processes(url, namespace, args.slots, args.share) as base:
                    async with httpx.AsyncClient(
                        base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=120
                    ) as client:
                        await ready(client, redis, namespace)
                        if mode == "direct":
                            figures = await direct(redis, namespace, args.lines)
                        else:
                            figures = await batch(client, redis, namespace, args.lines)
                results[mode].append(figures)
                shown = ", ".join(f"{k} {v:,.0f}" for k, v in figures.items())
                print(f"round {round_ + 1} {mode:6}: {shown}", flush=True)
    finally:
        await redis.aclose()
        if server is not None:
            server.stop()
    best_direct = max(r["lines/s"] for r in results["direct"])
    best_batch = max(r["lines/s"] for r in results["batch"])
    best_done = max(r["to completed"] for r in results["batch"])
    print(
        f"\n{args.lines:,} lines on {MODEL}, {args.slots} slots, batch share {args.share}:\n"
        f"  direct drain   {best_direct:,.0f} lines/s\n"
        f"  batch          {best_batch:,.0f} lines/s to the last line "
        f"({best_batch / best_direct:.0%} of direct; target {TARGET:.0%}), "
        f"{best_done:,.0f} lines/s to completed ({best_done / best_direct:.0%})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--share", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

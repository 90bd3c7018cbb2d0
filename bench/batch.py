"""Generations accepted per second through ``POST /v1/generations:batch`` against single POSTs
and against ``Queue.enqueue_many`` alone, measured side by side in one run.

One gateway process (uvicorn, its defaults: uvloop and httptools when installed) on a
Redis-protocol server of its own (an embedded Valkey started here, or ``GENQ_BENCH_REDIS_URL``);
one client in this process, sequential requests on one connection, every item with its own
idempotency key (as ``genq_client``'s ``generate_many`` sends them):

  single   ``POST /v1/generations`` with an ``Idempotency-Key`` header, one after another
  batch    ``POST /v1/generations:batch`` with ``--batch`` (100) items each, one after another
  many     ``Queue.enqueue_many`` in batches of ``--batch`` from this process, with the payload
           and options the gateway sends (its floor: no HTTP, no checks, no limits)

``--limits`` picks what each accepted item pays besides its idempotency claim and replay lookup:
``base`` the rate token and the in-flight slot (every tenant pays those), ``all`` also a daily
quota and a budget reservation (a price is published for the model). Each mode runs ``--rounds``
(3) times, interleaved, on fresh queues; the figures are items/s, each round's and the best,
and the ratios of the bests. The gateway runs pinned to CPU 0, the client and the server share
the rest: on a small shared machine the absolute numbers move, the ratios less.

    .venv/bin/python -m bench.batch [--items 3000] [--batch 100] [--rounds 3]
                                    [--limits base,all]

``BATCH_PROFILE=/tmp/gw.prof`` writes a cProfile of the gateway process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import redis.asyncio as aioredis

from bench.lifespan_profile import profile_when_asked
from genq import EnqueueItem, Queue
from genq_cli.embedded_redis import EmbeddedRedis, free_port
from genq_contract.api_keys import hash_key
from genq_contract.payload import GenerationPayload
from genq_contract.spend import DEMO_PRICE
from genq_services.prices import publish_prices

API_KEY = "bench-batch-key"
SECRET = "bench-batch-secret-0123456789abcdef"
TENANT = "bench"
MODEL = "demo/fast"
SERVE_ENV = "BATCH_SERVE"
TARGET = 30_000
"""Items per second from one producer, the issue's target for the batch."""


# -- the gateway process ------------------------------------------------------------------------


def gateway_settings(redis_url: str, namespace: str, limits: str) -> Any:
    from gateway.settings import Settings

    extra: dict[str, Any] = {}
    if limits == "all":
        extra = {
            "tenant_daily_quota": 1_000_000_000,
            "tenant_budgets": {TENANT: {"daily_usd": 1e9, "monthly_usd": 1e9}},
        }
    values: dict[str, Any] = {
        "dev": False,
        "redis_url": redis_url,
        "queue_namespace": namespace,
        "secret": SECRET,
        "models": [MODEL],
        "api_keys": {f"sha256:{hash_key(API_KEY)}": TENANT},
        "tenant_rate": 1e9,
        "tenant_burst": 1_000_000_000,
        "tenant_max_in_flight": 1_000_000_000,
        "budget_sweep_interval": 3600,
        **extra,
    }
    return Settings(_env_file=None, **values)


def bench_app() -> Any:
    """The gateway's app (uvicorn calls this factory in the ``serve`` process)."""
    from gateway.app import create_app

    conf = json.loads(os.environ[SERVE_ENV])
    app = create_app(gateway_settings(conf["redis_url"], conf["namespace"], conf["limits"]))
    return profile_when_asked(app, "BATCH_PROFILE")


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {0})
    os.environ[SERVE_ENV] = json.dumps(
        {"redis_url": args.redis_url, "namespace": args.namespace, "limits": args.limits}
    )
    uvicorn.run(
        "bench.batch:bench_app",
        factory=True,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
    )


@contextlib.contextmanager
def gateway_process(redis_url: str, namespace: str, limits: str) -> Iterator[str]:
    port = free_port()
    args = [sys.executable, "-m", "bench.batch", "serve", "--redis-url", redis_url]
    args += ["--namespace", namespace, "--limits", limits, "--port", str(port)]
    child = subprocess.Popen(args)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


async def wait_ready(client: httpx.AsyncClient) -> None:
    for _ in range(400):
        with contextlib.suppress(httpx.HTTPError):
            if (await client.get("/readyz")).status_code == 200:
                return
        await asyncio.sleep(0.05)
    raise TimeoutError("the gateway did not get ready")


# -- the producers ------------------------------------------------------------------------------


def body(n: int) -> dict[str, Any]:
    return {"model": MODEL, "prompt": f"bench prompt {n}", "params": {"max_tokens": 16}}


async def single(client: httpx.AsyncClient, count: int) -> float:
    run = uuid.uuid4().hex[:8]
    start = time.perf_counter()
    for n in range(count):
        answer = await client.post(
            "/v1/generations", json=body(n), headers={"Idempotency-Key": f"{run}-{n}"}
        )
        if answer.status_code != 202:
            raise RuntimeError(f"single POST answered {answer.status_code}: {answer.text}")
    return count / (time.perf_counter() - start)


async def batch(client: httpx.AsyncClient, count: int, size: int) -> float:
    run = uuid.uuid4().hex[:8]
    requests = [
        {"items": [{**body(n), "idempotency_key": f"{run}-{n}"} for n in range(s, s + size)]}
        for s in range(0, count, size)
    ]
    start = time.perf_counter()
    for request in requests:
        answer = await client.post("/v1/generations:batch", json=request)
        if answer.status_code != 200:
            raise RuntimeError(f"batch answered {answer.status_code}: {answer.text[:300]}")
    return count / (time.perf_counter() - start)


async def many(redis: aioredis.Redis, namespace: str, count: int, size: int) -> float:
    """What the gateway's items cost ``enqueue_many`` alone: the same payloads and options."""
    queue = Queue(redis, prefix=f"{namespace}:bench-many")
    run = uuid.uuid4().hex[:8]
    items = [
        EnqueueItem(
            GenerationPayload(
                tenant=TENANT,
                model=MODEL,
                messages=[{"role": "user", "content": f"p {n}"}],
                params={"max_tokens": 16},
                fingerprint=uuid.uuid4().hex,
            ).model_dump(),
            idempotency_key=f"{TENANT}:{run}-{n}",
            job_id=f"demo.{uuid.uuid4().hex}",
            tenant=TENANT,
        )
        for n in range(count)
    ]
    start = time.perf_counter()
    for s in range(0, count, size):
        await queue.enqueue_many(items[s : s + size])
    return count / (time.perf_counter() - start)


async def run_mode(redis_url: str, limits: str, args: argparse.Namespace) -> dict[str, float]:
    namespace = f"bench-batch-{uuid.uuid4().hex[:6]}"
    redis = aioredis.Redis.from_url(redis_url)
    await publish_prices(redis, namespace, {MODEL: DEMO_PRICE})
    rates: dict[str, float] = {}
    try:
        with gateway_process(redis_url, namespace, limits) as url:
            headers = {"Authorization": f"Bearer {API_KEY}"}
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
                await wait_ready(client)
                await single(client, 50)  # warm up: connections, scripts, caches
                await batch(client, args.batch, args.batch)
                rates["single"] = await single(client, args.items // 4)
                rates["batch"] = await batch(client, args.items, args.batch)
        rates["many"] = await many(redis, namespace, args.items, args.batch)
    finally:
        await redis.aclose()
    return rates


async def orchestrate(args: argparse.Namespace) -> int:
    server: EmbeddedRedis | None = None
    redis_url = os.environ.get("GENQ_BENCH_REDIS_URL")
    if not redis_url:
        server = EmbeddedRedis().start()
        redis_url = server.url
    try:
        modes = args.limits.split(",")
        seen: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
        for _ in range(args.rounds):
            for mode in modes:
                seen[mode].append(await run_mode(redis_url, mode, args))
    finally:
        if server is not None:
            server.stop()
    print(f"\nitems/s, {args.items} items per kind, batches of {args.batch}, one client")
    for mode, rounds in seen.items():
        best = {kind: max(r[kind] for r in rounds) for kind in ("single", "batch", "many")}
        for kind in ("single", "batch", "many"):
            shown = ", ".join(f"{r[kind]:,.0f}" for r in rounds)
            print(f"  limits={mode:<5} {kind:<7} best {best[kind]:>9,.0f}   rounds: {shown}")
        print(
            f"  limits={mode:<5} batch/single {best['batch'] / best['single']:.1f}x, "
            f"batch/many {best['batch'] / best['many']:.2f}, "
            f"batch/target {best['batch'] / TARGET:.2f} (target {TARGET:,}/s)"
        )
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("role", nargs="?", default="run", choices=["run", "serve"])
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limits", default="base,all")
    parser.add_argument("--redis-url", default="")
    parser.add_argument("--namespace", default="")
    parser.add_argument("--port", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.role == "serve":
        serve(args)
        return 0
    return asyncio.run(orchestrate(args))


if __name__ == "__main__":
    sys.exit(main())

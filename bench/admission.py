"""Admission at proxy speed: keyed ``POST /v1/generations`` with every limit on, against a bare
FastAPI app that validates the same body and runs one ``EVALSHA``, measured in the same run.

Processes: a Redis-protocol server (an embedded Valkey started here, or
``GENQ_BENCH_REDIS_URL``), and for each round one of

  gateway  the genq gateway (``gateway.app:create_app`` under uvicorn, one worker process, the
           options ``genq serve`` passes), with every tenant limit set high but on: the enqueue
           rate, the in-flight cap, a daily quota and a budget (a price is published for the
           model, so each POST reserves against it)
  bare     a FastAPI app whose route takes the same body model (``GenerationRequest``), runs one
           ``EVALSHA`` of a one-line script and answers 202, under the same uvicorn options

driven by ``wrk`` (a C load tool: a Python client cannot drive a server to its limit on two
cores), ``--connections`` (32) keep-alive connections from one thread, every request with an
``Idempotency-Key`` of its own (made by wrk's Lua, ``ADMISSION_WRK_LUA`` below: a replay is not
an admission). The kinds take turns for ``--rounds`` (3) rounds of ``--seconds`` (5) each, each
round on a fresh process. It prints each round's requests/s, the best of each kind and their
ratio (the target: gateway >= 0.5x bare), each app process's CPU per request (user + system,
from ``/proc``: on a shared machine it moves far less than requests/s), and the Redis commands
per POST (``INFO
commandstats`` deltas over the round divided by its requests; a pipeline's commands count one
each, so this is an upper bound of round trips).

``wrk`` is the Debian package (``apt-get install -y wrk``); ``.ci/run`` installs it.

    .venv/bin/python -m bench.admission [--rounds 3] [--seconds 5] [--connections 32]
                                        [--base /tmp/h1-base]

``--base DIR`` adds a third kind, the gateway of another checkout (``git worktree add --detach
DIR REF``), in the same rounds: before and after side by side.

``ADMISSION_PROFILE=/tmp/gw.prof`` writes a cProfile of each gateway process (the last wins).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import redis

from bench.lifespan_profile import profile_when_asked
from gateway.admission.schemas import GenerationRequest
from genq_cli.embedded_redis import EmbeddedRedis, free_port
from genq_contract.api_keys import hash_key
from genq_contract.spend import DEMO_PRICE

API_KEY = "bench-admission-key"
SECRET = "bench-admission-secret-0123456789abcdef"
TENANT = "bench"
MODEL = "demo/fast"
SERVE_ENV = "ADMISSION_SERVE"
TARGET = 0.5
"""The gateway's requests/s over the bare app's that issue 39 asks for."""
BODY = {"model": MODEL, "prompt": "bench prompt", "params": {"max_tokens": 16}}

ADMISSION_WRK_LUA = """
-- Each request a unique Idempotency-Key: <run>-<thread>-<n>.
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
function init(args)
  run = args[1]
  body = args[2]
  auth = args[3]
  n = 0
end
function request()
  n = n + 1
  local headers = {
    ["Content-Type"] = "application/json",
    ["Authorization"] = auth,
    ["Idempotency-Key"] = run .. "-" .. tid .. "-" .. n,
  }
  return wrk.format("POST", "/v1/generations", headers, body)
end
"""


# -- the served apps ----------------------------------------------------------------------------


def gateway_settings(redis_url: str, namespace: str) -> Any:
    from gateway.settings import Settings

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
        "tenant_daily_quota": 1_000_000_000,
        "tenant_budgets": {TENANT: {"daily_usd": 1e9, "monthly_usd": 1e9}},
        "budget_sweep_interval": 3600,
    }
    return Settings(_env_file=None, **values)


def gateway_app() -> Any:
    """The gateway's app (uvicorn calls this factory in the ``serve`` process)."""
    from gateway.app import create_app

    conf = json.loads(os.environ[SERVE_ENV])
    app = create_app(gateway_settings(conf["redis_url"], conf["namespace"]))
    return profile_when_asked(app, "ADMISSION_PROFILE")


def bare_app() -> Any:
    """The peer: the same body model validated, one EVALSHA, 202."""
    import redis.asyncio as aioredis
    from fastapi import FastAPI

    conf = json.loads(os.environ[SERVE_ENV])
    clients: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = aioredis.Redis.from_url(conf["redis_url"])
        clients["script"] = client.register_script("return redis.call('INCR', KEYS[1])")
        yield
        await client.aclose()

    app = FastAPI(lifespan=lifespan)
    counter = f"{conf['namespace']}:bare"

    @app.post("/v1/generations", status_code=202)
    async def create(body: GenerationRequest) -> dict[str, Any]:
        n = await clients["script"](keys=[counter])
        return {"id": f"{body.model}.{n}", "status": "waiting"}

    return app


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    from gateway.server_options import uvicorn_options

    os.environ[SERVE_ENV] = json.dumps({"redis_url": args.redis_url, "namespace": args.namespace})
    settings = gateway_settings(args.redis_url, args.namespace)
    uvicorn.run(  # what ``genq serve`` runs, for both apps
        f"bench.admission:{args.app}_app",
        factory=True,
        host="127.0.0.1",
        port=args.port,
        workers=1,
        log_level="warning",
        timeout_graceful_shutdown=10,
        **uvicorn_options(settings),
    )


@contextlib.contextmanager
def app_process(kind: str, redis_url: str, namespace: str, base: str) -> Iterator[tuple[str, int]]:
    """The app of ``kind`` in a process of its own; ``base``: the gateway of another checkout
    (its directory: it runs with that tree first on ``sys.path``, this file copied into it)."""
    port = free_port()
    app = "gateway" if kind == "base" else kind
    args = [sys.executable, "-m", "bench.admission", "serve", "--app", app]
    args += ["--redis-url", redis_url, "--namespace", namespace, "--port", str(port)]
    cwd = None
    if kind == "base":
        cwd = base
        shutil.copy(__file__, os.path.join(base, "bench", "admission.py"))
    child = subprocess.Popen(args, cwd=cwd)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, child)
        yield url, child.pid
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def wait_ready(url: str, child: subprocess.Popen[bytes]) -> None:
    headers = {"Authorization": f"Bearer {API_KEY}", "Idempotency-Key": uuid.uuid4().hex}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"the app process exited ({child.returncode})")
        with contextlib.suppress(httpx.HTTPError):
            answer = httpx.post(f"{url}/v1/generations", json=BODY, headers=headers, timeout=5)
            if answer.status_code == 202:
                return
            raise RuntimeError(f"the app answered {answer.status_code}: {answer.text}")
        time.sleep(0.05)
    raise TimeoutError("the app did not get ready")


# -- load and counts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    kind: str
    requests: int
    per_second: float
    commands_per_request: float
    cpu_us_per_request: float
    """The app process's CPU (user + system) per request: what load on the machine moves
    least."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def commands(client: redis.Redis) -> int:
    """Every command the server ran so far, but the ``INFO`` calls that count them."""
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


def run_wrk(url: str, args: argparse.Namespace, script: str, tag: str) -> tuple[int, float]:
    """``wrk`` against ``url``; (requests, requests/s). Raises on any non-2xx answer."""
    auth = f"Bearer {API_KEY}"
    command = ["wrk", "-t1", f"-c{args.connections}", f"-d{args.seconds}s", "-s", script, url]
    command += ["--", tag, json.dumps(BODY), auth]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failed requests:\n{out}")
    total = re.search(r"(\d+) requests in", out)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if total is None or rate is None:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    return int(total[1]), float(rate[1])


def one_round(kind: str, redis_url: str, args: argparse.Namespace, script: str) -> Round:
    namespace = f"bench-adm-{uuid.uuid4().hex[:6]}"
    client = redis.Redis.from_url(redis_url)
    try:
        if kind != "bare":
            from genq_contract.spend import prices_key

            client.hset(prices_key(namespace), MODEL, json.dumps(DEMO_PRICE.as_json()))
        with app_process(kind, redis_url, namespace, args.base) as (url, pid):
            run_wrk(url, argparse.Namespace(**{**vars(args), "seconds": 1}), script, "warm")
            before, cpu = commands(client), cpu_seconds(pid)
            requests, per_second = run_wrk(url, args, script, uuid.uuid4().hex[:8])
            during, cpu = commands(client) - before, cpu_seconds(pid) - cpu
    finally:
        client.close()
    per = max(1, requests)
    return Round(kind, requests, per_second, during / per, cpu * 1e6 / per)


def orchestrate(args: argparse.Namespace) -> int:
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install -y wrk", file=sys.stderr)
        return 2
    server: EmbeddedRedis | None = None
    redis_url = os.environ.get("GENQ_BENCH_REDIS_URL")
    if not redis_url:
        server = EmbeddedRedis().start()
        redis_url = server.url
    rounds: list[Round] = []
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(ADMISSION_WRK_LUA)
        script.flush()
        try:
            kinds = ["gateway", "bare", *(["base"] if args.base else [])]
            for n in range(args.rounds):
                for kind in kinds if n % 2 == 0 else kinds[::-1]:
                    done = one_round(kind, redis_url, args, script.name)
                    rounds.append(done)
                    print(
                        f"round {n + 1} {kind:<8} {done.per_second:>9,.0f} req/s "
                        f"({done.requests} requests, {done.cpu_us_per_request:,.0f} µs of its "
                        f"CPU and {done.commands_per_request:.2f} Redis commands each)",
                        flush=True,
                    )
        finally:
            if server is not None:
                server.stop()
    best = {k: max(r.per_second for r in rounds if r.kind == k) for k in kinds}
    ratio = best["gateway"] / best["bare"]
    per_post = min(r.commands_per_request for r in rounds if r.kind == "gateway")
    print(
        f"\nkeyed POST /v1/generations, every limit on, wrk -t1 -c{args.connections} "
        f"-d{args.seconds}s, {args.rounds} rounds alternating"
    )
    cpu = {k: min(r.cpu_us_per_request for r in rounds if r.kind == k) for k in kinds}
    print(f"  gateway  best {best['gateway']:>9,.0f} req/s, {cpu['gateway']:,.0f} µs CPU/request")
    print(
        f"  bare     best {best['bare']:>9,.0f} req/s, {cpu['bare']:,.0f} µs CPU/request "
        "(FastAPI + pydantic + one EVALSHA)"
    )
    print(
        f"  ratio    {ratio:.2f}x (target >= {TARGET}x); CPU per request, bare / gateway "
        f"{cpu['bare'] / cpu['gateway']:.2f}x"
    )
    print(f"  Redis commands per gateway POST: {per_post:.2f} (those run by scripts included)")
    if args.base:
        base_ratio = best["base"] / best["bare"]
        print(
            f"  base     best {best['base']:>9,.0f} req/s, {cpu['base']:,.0f} µs CPU/request "
            f"({args.base}: {base_ratio:.2f}x bare)"
        )
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("role", nargs="?", default="run", choices=["run", "serve"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--app", default="gateway", choices=["gateway", "bare"])
    parser.add_argument("--base", default="", help="a checkout whose gateway runs beside")
    parser.add_argument("--redis-url", default="")
    parser.add_argument("--namespace", default="")
    parser.add_argument("--port", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.role == "serve":
        serve(args)
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())

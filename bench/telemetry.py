"""What OpenTelemetry costs per generation, on and off, measured side by side in one run.

Starts an embedded Valkey and, for each mode in turn, a real gateway (uvicorn) and a real
worker (``python -m workers``), as ``genq serve`` and ``genq worker`` run them:

- ``off``: no OTLP endpoint (the default): no SDK provider, the API's no-ops;
- ``on``: ``OTEL_EXPORTER_OTLP_ENDPOINT`` set to a sink in this process (it answers every
  export 200 and counts the spans), every span sampled, the batch processor's defaults.

Each wave POSTs ``--jobs`` ``demo/instant`` generations of ``--tokens`` tokens through the
gateway (``--concurrency`` requests at once) and waits for all to complete; the gateway's and
the worker's CPU time (``/proc/<pid>/stat``) over the wave, divided by the generations, is
the CPU per generation. A warm-up wave per process is not measured; the modes take turns
``--repeat`` times and each mode's best wave is shown (other processes on a shared machine
only ever slow a wave down). It prints CPU per generation in each process, the difference
on - off, and the spans exported per generation.

    .venv/bin/python bench/telemetry.py [--jobs 200] [--tokens 20] [--repeat 3]

``--off-path`` measures instead, in this process and with tracing off, what the telemetry
code adds to a generation's path: the worker's per-attempt wrapper (``TracedHandler``) and
per-provider-call record (``ProviderCall``), each timed against the same work without it,
interleaved; the per-token checks the stream loop gained; the gateway's enqueue span and
viewer wrapper. Figures to set against a generation's cost (``bench/workers.py``: CPU per
token times tokens).

    .venv/bin/python bench/telemetry.py --off-path
"""

# ruff: noqa: E402  (the sys.path fix below must run before the imports)
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

import argparse
import asyncio
import contextlib
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from genq_cli.embedded_redis import EmbeddedRedis, free_port

DEV_KEY = "genq-dev-key"
TICKS = os.sysconf("SC_CLK_TCK")


class Sink:
    """An OTLP/HTTP endpoint that answers 200 and counts the spans it was sent."""

    def __init__(self) -> None:
        self.spans = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.endswith("/v1/traces"):
                    request = ExportTraceServiceRequest.FromString(body)
                    sink.spans += sum(
                        len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans
                    )
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


@dataclass
class Stack:
    mode: str
    redis_url: str
    sink: Sink
    gateway: subprocess.Popen[bytes] | None = None
    worker: subprocess.Popen[bytes] | None = None
    port: int = 0

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GENQ_", "OTEL_"))}
        env |= {
            "GENQ_DEV": "1",
            "GENQ_REDIS_URL": self.redis_url,
            "GENQ_QUEUE_NAMESPACE": f"bench{uuid.uuid4().hex[:8]}",
            "GENQ_MODELS": "demo/instant",
            "GENQ_LOG_LEVEL": "WARNING",
            "GENQ_TENANT_RATE": "100000",
            "GENQ_TENANT_BURST": "100000",
            "GENQ_TENANT_MAX_IN_FLIGHT": "100000",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        if self.mode == "on":
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = self.sink.endpoint
        return env

    def start(self) -> None:
        self.port = free_port()
        env = self.env()
        uvicorn = [sys.executable, "-m", "uvicorn", "gateway.app:create_app", "--factory"]
        args = [*uvicorn, "--port", str(self.port), "--log-level", "warning"]
        quiet = subprocess.DEVNULL
        self.gateway = subprocess.Popen(args, env=env, cwd=HERE.parent, stdout=quiet, stderr=quiet)
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "workers"], env=env, cwd=HERE.parent, stdout=quiet, stderr=quiet
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)
        raise TimeoutError("the gateway did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        for process in (self.worker, self.gateway):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def cpu(self) -> tuple[float, float]:
        assert self.gateway is not None and self.worker is not None
        return cpu_seconds(self.gateway.pid), cpu_seconds(self.worker.pid)


async def wave(stack: Stack, jobs: int, tokens: int, concurrency: int) -> float:
    """Runs ``jobs`` generations to completion; returns the wave's wall time."""
    headers = {"Authorization": f"Bearer {DEV_KEY}"}
    body = {"model": "demo/instant", "prompt": "bench", "params": {"demo_tokens": tokens}}
    limit = asyncio.Semaphore(concurrency)
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=120) as client:

        async def one() -> None:
            async with limit:
                created = await client.post("/v1/generations", json=body)
                created.raise_for_status()
                job_id = created.json()["id"]
                while True:
                    done = await client.get(f"/v1/generations/{job_id}/result?timeout=30")
                    if done.status_code == 200:
                        assert done.json()["status"] == "completed", done.text
                        return

        await asyncio.gather(*(one() for _ in range(jobs)))
    return time.monotonic() - started


@dataclass
class Sample:
    gateway_us: float
    worker_us: float
    seconds: float
    spans: float


def measure(stack: Stack, args: argparse.Namespace) -> Sample:
    spans_before = stack.sink.spans
    gateway_before, worker_before = stack.cpu()
    seconds = asyncio.run(wave(stack, args.jobs, args.tokens, args.concurrency))
    time.sleep(6)  # the batch processor's 5 s schedule: this wave's spans leave before the count
    gateway_after, worker_after = stack.cpu()
    per = 1e6 / args.jobs
    return Sample(
        (gateway_after - gateway_before) * per,
        (worker_after - worker_before) * per,
        seconds,
        (stack.sink.spans - spans_before) / args.jobs,
    )


@contextlib.contextmanager
def running(mode: str, redis_url: str, sink: Sink, args: argparse.Namespace) -> Iterator[Stack]:
    stack = Stack(mode, redis_url, sink)
    try:
        stack.start()
        asyncio.run(wave(stack, min(args.jobs, 50), args.tokens, args.concurrency))  # warm-up
        yield stack
    finally:
        stack.stop()


def off_path() -> None:
    """Microseconds the telemetry code adds with tracing off (see the module docstring)."""
    import timeit

    from gateway.telemetry import enqueue_span, viewed
    from genq_services.telemetry import tracing_on
    from providers.litellm_adapter import Delta
    from providers.telemetry import ProviderCall
    from workers.telemetry import TracedHandler

    assert not tracing_on()

    class Job:
        id, attempt, max_attempts, tenant, waited, history = "j", 1, 3, "t", 0.01, ()
        payload: dict[str, Any] = {}

        class signal:
            @staticmethod
            def is_set() -> bool:
                return False

    async def handler(job: Any) -> None:
        return None

    traced = TracedHandler(handler, "bench:q")
    job = Job()
    loop = asyncio.new_event_loop()
    n = 20_000

    def direct() -> None:
        for _ in range(n):
            loop.run_until_complete(handler(job))

    def wrapped() -> None:
        for _ in range(n):
            loop.run_until_complete(traced(job))  # type: ignore[arg-type]

    def call() -> None:
        chunk = type("Chunk", (), {"id": "r", "model": "m"})()
        for _ in range(n):
            record = ProviderCall("openai/gpt-4o-mini", {})
            record.first_chunk(chunk)
            record.last_steps("stop", {"prompt_tokens": 10, "completion_tokens": 20})
            record.end(None)

    delta = Delta("token")
    first = False

    def checks() -> None:
        for _ in range(n):
            if first:
                pass
            if delta.finish_reason or delta.usage is not None:
                pass

    def bare() -> None:
        for _ in range(n):
            pass

    payload: dict[str, Any] = {}

    def enqueue() -> None:
        for _ in range(n):
            with enqueue_span("q", [("j", payload)], "t"):
                pass

    async def nothing() -> Any:
        yield b""

    def view() -> None:
        for _ in range(n):
            viewed(job, "q", nothing())  # type: ignore[arg-type]

    best: dict[str, float] = {}
    for _ in range(5):
        for name, run in (
            ("direct", direct),
            ("wrapped", wrapped),
            ("call", call),
            ("checks", checks),
            ("bare", bare),
            ("enqueue", enqueue),
            ("view", view),
        ):
            seconds = timeit.timeit(run, number=1) / n * 1e6
            best[name] = min(best.get(name, seconds), seconds)
    loop.close()
    print("tracing off: what the telemetry code adds (best of 5 interleaved, us)")
    print(f"  worker, per attempt (TracedHandler):   {best['wrapped'] - best['direct']:6.2f}")
    print(f"  worker, per provider call (ProviderCall): {best['call']:6.2f}")
    print(f"  worker, per token (two checks):          {best['checks'] - best['bare']:6.3f}")
    print(f"  gateway, per enqueue (enqueue_span):     {best['enqueue'] - best['bare']:6.2f}")
    print(f"  gateway, per viewer (viewed):            {best['view'] - best['bare']:6.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--off-path", action="store_true")
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--tokens", type=int, default=20)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    if args.off_path:
        off_path()
        return
    best: dict[str, Sample] = {}
    # A sink each: the on stack's last exports may land during the off stack's wave.
    with (
        EmbeddedRedis() as server,
        running("off", server.url, Sink(), args) as off,
        running("on", server.url, Sink(), args) as on,
    ):
        for _ in range(args.repeat):
            for mode, stack in (("off", off), ("on", on)):
                sample = measure(stack, args)
                kept = best.get(mode)
                if kept is None or sample.gateway_us + sample.worker_us < (
                    kept.gateway_us + kept.worker_us
                ):
                    best[mode] = sample
    print(f"{args.jobs} generations x {args.tokens} tokens (demo/instant), best of {args.repeat}")
    print(
        f"{'mode':6} {'gateway CPU/gen':>16} {'worker CPU/gen':>15} {'wave':>7} {'spans/gen':>10}"
    )
    for mode, s in best.items():
        print(
            f"{mode:6} {s.gateway_us:13.0f} us {s.worker_us:12.0f} us {s.seconds:6.2f}s "
            f"{s.spans:10.1f}"
        )
    off, on = best["off"], best["on"]
    print(
        f"on - off: gateway {on.gateway_us - off.gateway_us:+.0f} us, "
        f"worker {on.worker_us - off.worker_us:+.0f} us per generation "
        f"({(on.gateway_us + on.worker_us) / (off.gateway_us + off.worker_us) - 1:+.1%})"
    )


if __name__ == "__main__":
    main()

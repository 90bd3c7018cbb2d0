"""Worker streaming cost: one emit per token vs batched emits, measured side by side.

One worker (this process, pinned to one CPU when there are two or more) runs ``--jobs``
concurrent demo generations through LiteLLM, first emitting every delta in its own Redis
round trip, then with the emit batcher (``workers/coalesce.py``), in two scenarios:

- ``full speed``: ``demo/instant``, no pause between tokens; the worker CPU is the limit.
- ``paced``: ``demo/fast`` at 20 ms per token (50 tokens/s per stream, a hosted model's pace).

A dedicated Redis-protocol server (pinned to another CPU) serves every run, so its counters
belong to this benchmark alone. For each run it prints: tokens/s delivered to the job streams;
worker CPU per token; the worker's round trips per token (a pipeline counts one) and commands
sent per token (a script call counts one); commands Redis executed per token (including those
inside scripts) and Redis CPU per token; the delay from the provider handing a token to the
worker until the token is in its job's stream (from the stream entry id, i.e. the Redis
server clock at 1 ms resolution): median, p99, max; and the longest event-loop stall of the
run (LiteLLM's per-stream start and finish work, garbage collection). A buffered token waits
through a stall and an already sent one does not, so the batched tail exceeds the window.

With LiteLLM as the source, each scenario also runs batched with genq's LiteLLM patches off
(``providers/_litellm_patches.py``: ``set_patched(False)``, LiteLLM's own methods, as on an
untested LiteLLM release), interleaved with the other runs, and prints the ratio on / off:
tokens/s and worker CPU per token, measured in the same run.

``--source openai`` streams ``openai/...`` generations from the tests' fake OpenAI-compatible
server instead (``tests/fakes/openai_server.py``, in its own process pinned beside Redis):
LiteLLM's path for a real hosted model, the openai SDK's parsing and a usage report included.
The server is Python too and may limit tokens/s; worker CPU per token is the figure to read.
``--source raw`` replaces LiteLLM by a bare token generator, to show the emit path alone.

    .venv/bin/python bench/workers.py [--jobs 64] [--tokens 300] [--window-ms 10] [--repeat 3]

``--processes N`` measures the real worker processes instead: ``genq worker --processes 1``,
then ``genq worker --processes N`` (the supervisor and its ``python -m workers`` children),
against one Redis-protocol server, nothing pinned: ``--jobs`` full-speed demo generations per
worker process (so every process has a full load), batched emits. It prints the aggregate
tokens/s of each (the wave's time on the server's clock: the first job's creation to the last
job's end), the ratio N processes / 1 process measured in the same run, and where the
CPU went: worker CPU per token, how busy the worker processes and Redis were (% of one core),
how much CPU the machine left idle and how much other processes on it took. A process's first
generations pay LiteLLM's one-time setup (seconds), so each run starts with a warm-up wave that
is not measured.

    .venv/bin/python bench/workers.py --processes 2 [--jobs 64] [--tokens 1000] [--repeat 3]

Each mode runs ``--repeat`` times and the fastest run is shown (other processes on a shared
machine only ever slow a run down); the modes of a scenario, and 1 and N processes, take turns,
so a disturbance lasting a while hits each of them alike.
"""

# ruff: noqa: E402  (the sys.path fix below must run before the imports)
from __future__ import annotations

import sys
from pathlib import Path

# Run as a script (``python bench/workers.py``, as ``make bench`` does), this file's directory
# comes first on sys.path and this module would shadow the ``workers`` package it measures.
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio import Connection

from bench.server_cpu import server_cpu
from genq import EnqueueItem, Queue, connect
from genq.connection import hiredis_packing
from genq_cli.embedded_redis import EmbeddedRedis
from providers._litellm_patches import set_patched
from providers.litellm_adapter import Delta
from workers import handler as handler_module
from workers.run import WorkerProcess, freeze_heap, pool_size
from workers.settings import WorkerSettings

POLL = 0.005
TOKENS = 300  # per full-speed generation
# With --processes, a wave of 64 x 300 tokens per process lasted about a second and its ramp-up,
# its tail and any passing disturbance weighed on the ratio (1.41x-2.11x between runs of the same
# code on one quiet morning); 1,000 tokens make each timed wave a few seconds.
PROCESS_TOKENS = 1000
# A wave's time is read off the server's clock (the jobs' records), so the bench need not poll
# often for it: at POLL it took 5-7% of a core, which with N = the cores is the workers' share.
DRAIN_POLL = 0.1
OPENAI_MODEL = "openai/gpt-4o-mini"


class Sent:
    commands = 0
    round_trips = 0


class CountingConnection(hiredis_packing(Connection)):  # type: ignore[misc]
    """The worker's connections (genq's connection class), counting the commands they send and
    their round trips: writes (one command, a pipeline's, or a batch written call by call)
    followed by reading their replies count one."""

    wrote = False

    def pack_command(self, *args: Any) -> list[bytes]:
        Sent.commands += 1  # a pipeline packs each of its commands through here too
        return super().pack_command(*args)  # type: ignore[no-any-return]

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        await super().send_packed_command(command, check_health)
        self.wrote = True

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        if self.wrote:
            self.wrote = False
            Sent.round_trips += 1
        return await super().read_response(*args, **kwargs)


def counting_client(url: str, settings: WorkerSettings) -> Any:
    """A client as ``genq.connect`` makes it for a worker process of ``settings`` (its pool's
    size included), on :class:`CountingConnection`."""
    client = connect(url, max_connections=pool_size(settings))
    client.connection_pool.connection_class = CountingConnection
    return client


PRODUCED: dict[str, list[float]] = {}
"""prompt -> wall-clock time each token left the provider stream (for the latency figures)."""


def timed(source: Callable[..., AsyncIterator[Delta]]) -> Callable[..., AsyncIterator[Delta]]:
    async def stream(
        model: str, messages: list[dict[str, Any]], params: Any, **kwargs: Any
    ) -> AsyncIterator[Delta]:
        times = PRODUCED.setdefault(messages[-1]["content"], [])
        async with contextlib.aclosing(source(model, messages, params, **kwargs)) as inner:
            async for delta in inner:
                if delta.text:
                    times.append(time.time())
                yield delta

    return stream


async def raw_source(
    model: str, messages: list[dict[str, Any]], params: dict[str, Any], **_: Any
) -> AsyncIterator[Delta]:
    """Tokens with no provider and no LiteLLM: isolates the cost of streaming into Redis."""
    count = int(params.get("demo_tokens", 100))
    delay = float(params.get("demo_delay_ms", 0)) / 1000
    for i in range(count):
        await asyncio.sleep(delay)
        yield Delta(text=f"tok{i} ")
    yield Delta(finish_reason="stop", usage={"completion_tokens": count})


@dataclass
class Run:
    label: str
    tokens: int
    seconds: float
    cpu: float
    sent: int
    trips: int
    executed: int
    redis_cpu: float
    latencies: list[float]
    stall: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds

    def latency(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def watch_loop(stalls: list[float]) -> None:
    """Records how late a 5 ms sleep wakes up: the event loop's lag (LiteLLM work, GC)."""
    while True:
        started = time.perf_counter()
        await asyncio.sleep(0.005)
        stalls.append(time.perf_counter() - started - 0.005)


async def server_counters(client: Any) -> tuple[int, float]:
    stats = await client.info("stats")
    return int(stats["total_commands_processed"]), await server_cpu(client)


async def token_latencies(queue: Queue, job_id: str, produced: list[float]) -> list[float]:
    """Per token: stream entry time (server ms) - time the provider handed the token over."""
    out: list[float] = []
    index = 0
    async for event in queue.watch(job_id):
        if event.type != "chunk":
            continue
        visible = int(event.id.split("-")[0]) / 1000
        for _ in event.data.split():
            out.append(visible - produced[index])
            index += 1
    assert index == len(produced), (index, len(produced))
    return out


async def run_once(
    url: str,
    label: str,
    window_ms: float,
    jobs: int,
    tokens: int,
    model: str,
    delay_ms: float,
    lean: bool = True,
    api_base: str | None = None,
) -> Run:
    """One worker serving ``jobs`` generations of ``model`` (a ``demo/...`` one, or one served
    at ``api_base``); ``lean=False``: with LiteLLM's own stream methods (the patches of
    ``providers/_litellm_patches.py`` off)."""
    set_patched(lean)
    try:
        return await _run_once(url, label, window_ms, jobs, tokens, model, delay_ms, api_base)
    finally:
        set_patched(True)


async def _run_once(
    url: str,
    label: str,
    window_ms: float,
    jobs: int,
    tokens: int,
    model: str,
    delay_ms: float,
    api_base: str | None,
) -> Run:
    provider = model.split("/", 1)[0]
    settings = WorkerSettings(
        redis_url=url,
        queue_namespace=f"bench-{uuid.uuid4().hex[:8]}",
        models=[f"{provider}/*"],
        provider_concurrency={provider: jobs},
        provider_api_bases={provider: api_base} if api_base else {},
        coalesce_window_ms=window_ms,
        lease=120.0,
    )
    worker_client = counting_client(url, settings)
    client = aioredis.Redis.from_url(url)
    try:
        process = WorkerProcess.build(settings, worker_client)
        queue = Queue(client, prefix=process.queues[provider].prefix)
        # The fake OpenAI server streams as many tokens as it was started with.
        params = {"demo_tokens": tokens, "demo_delay_ms": delay_ms} if provider == "demo" else {}
        prompts = {
            (await queue.enqueue({"model": model, "prompt": p, "params": params})).id: p
            for p in (f"bench {uuid.uuid4().hex}" for _ in range(jobs))
        }
        executed0, redis_cpu0 = await server_counters(client)
        sent0, trips0 = Sent.commands, Sent.round_trips
        cpu0, wall0 = time.process_time(), time.perf_counter()
        stalls: list[float] = []
        lag_watch = asyncio.create_task(watch_loop(stalls))
        await process.start()
        await wait_drained(client, queue)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        sent, trips = Sent.commands - sent0, Sent.round_trips - trips0
        lag_watch.cancel()
        executed1, redis_cpu1 = await server_counters(client)
        polls_and_infos = 2 + 3 * round(wall / POLL)  # approximate; tiny next to the rest
        await process.stop()

        latencies: list[float] = []
        for job_id, prompt in prompts.items():
            job = await queue.get(job_id)
            assert job is not None and job.status.value == "completed", job
            assert len(job.result["text"].split()) == tokens
            latencies += await token_latencies(queue, job_id, PRODUCED.pop(prompt))
        return Run(
            label=label,
            tokens=jobs * tokens,
            seconds=wall,
            cpu=cpu,
            sent=sent,
            trips=trips,
            executed=max(0, executed1 - executed0 - polls_and_infos),
            redis_cpu=redis_cpu1 - redis_cpu0,
            latencies=latencies,
            stall=max(stalls, default=0.0),
        )
    finally:
        await worker_client.aclose()
        await client.aclose()


def pin(pid: int, cpu: int) -> None:
    with contextlib.suppress(AttributeError, OSError):
        if len(os.sched_getaffinity(0)) >= 2:
            os.sched_setaffinity(pid, {cpu})


def report(title: str, runs: list[Run]) -> None:
    print(f"\n{title}")
    header = (
        f"{'emits':<22}{'tokens/s':>9}{'CPU/token':>12}{'trips/token':>12}{'sent/token':>12}"
        f"{'executed/token':>16}"
        f"{'Redis CPU/token':>17}{'token->stream p50':>19}{'p99':>9}{'max':>9}"
        f"{'loop stall':>12}"
    )
    print(header)
    print("-" * len(header))
    for r in runs:
        print(
            f"{r.label:<22}{r.tokens_per_s:>9.0f}{r.cpu / r.tokens * 1e6:>9.1f} us"
            f"{r.trips / r.tokens:>12.3f}{r.sent / r.tokens:>12.3f}{r.executed / r.tokens:>16.2f}"
            f"{r.redis_cpu / r.tokens * 1e6:>14.1f} us{r.latency(0.5) * 1e3:>16.1f} ms"
            f"{r.latency(0.99) * 1e3:>6.1f} ms{max(r.latencies) * 1e3:>6.1f} ms"
            f"{r.stall * 1e3:>9.0f} ms"
        )
    base, coal = runs[:2]
    print(
        f"  batched vs one per token: {coal.tokens_per_s / base.tokens_per_s:.1f}x tokens/s, "
        f"{(base.cpu / base.tokens) / (coal.cpu / coal.tokens):.1f}x less worker CPU per token, "
        f"{base.trips / max(coal.trips, 1):.0f}x fewer round trips, "
        f"{base.sent / max(coal.sent, 1):.0f}x fewer commands sent, "
        f"{(base.redis_cpu / base.tokens) / max(coal.redis_cpu / coal.tokens, 1e-12):.0f}x less "
        f"Redis CPU per token; added delay per token: "
        f"p50 {(coal.latency(0.5) - base.latency(0.5)) * 1e3:+.1f} ms, "
        f"p99 {(coal.latency(0.99) - base.latency(0.99)) * 1e3:+.1f} ms"
    )
    if len(runs) == 3:
        stock = runs[2]
        print(
            f"  LiteLLM patches on vs off (batched): "
            f"{coal.tokens_per_s / stock.tokens_per_s:.2f}x tokens/s, "
            f"{(stock.cpu / stock.tokens) / (coal.cpu / coal.tokens):.2f}x less worker CPU per "
            f"token (best of the runs interleaved with each other)"
        )


@contextlib.contextmanager
def fake_openai(
    tokens: int, delay_ms: float, tokens_by_model: dict[str, int] | None = None
) -> Iterator[str]:
    """The tests' fake OpenAI-compatible server, in a process of its own (pinned beside Redis),
    streaming ``tokens`` tokens ``delay_ms`` apart to every request (``tokens_by_model[model]``
    for the models it names); yields its base URL."""
    code = (
        "import sys\n"
        "from tests.fakes.openai_server import FakeOpenAI\n"
        f"with FakeOpenAI(default_tokens={tokens}, default_delay={delay_ms / 1000}, "
        f"tokens_by_model={tokens_by_model or {}!r}) as s:\n"
        "    print(s.base_url, flush=True)\n"
        "    sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=HERE.parent, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        base_url = proc.stdout.readline().decode().strip()
        if not base_url:
            raise RuntimeError("the fake OpenAI server did not start")
        pin(proc.pid, 0)
        yield base_url
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # its cue to stop
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def main(args: argparse.Namespace) -> None:
    source = raw_source if args.source == "raw" else handler_module.stream_chat
    handler_module.stream_chat = timed(source)  # type: ignore[assignment]
    demo = args.source != "openai"
    scenarios = [
        ("full speed", "demo/instant" if demo else OPENAI_MODEL, 0.0, args.tokens or TOKENS),
        ("paced, 20 ms per token", "demo/fast" if demo else OPENAI_MODEL, 20.0, args.paced_tokens),
    ]
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-0123456789abcdef")  # the fake checks none
    freeze_heap()  # as the worker process does
    with EmbeddedRedis() as server:
        assert server.pid is not None
        pin(server.pid, 0)
        pin(0, 1)
        await run_once(server.url, "warm-up", args.window_ms, 4, 20, "demo/instant", 0)
        for title, model, delay_ms, tokens in scenarios:
            modes = [
                ("one per token", 0.0, True),
                (f"batched {args.window_ms:g} ms", args.window_ms, True),
            ]
            if args.source != "raw":
                modes.append(("batched, patches off", args.window_ms, False))
            tries: dict[str, list[Run]] = {label: [] for label, _, _ in modes}
            with contextlib.ExitStack() as stack:
                api_base = None if demo else stack.enter_context(fake_openai(tokens, delay_ms))
                for _ in range(args.repeat):  # interleaved: a disturbance hits every mode alike
                    for label, window, lean in modes:
                        run = await run_once(
                            server.url,
                            label,
                            window,
                            args.jobs,
                            tokens,
                            model,
                            delay_ms,
                            lean,
                            api_base,
                        )
                        tries[label].append(run)
            # The least disturbed run of each mode.
            runs = [max(tries[label], key=lambda r: r.tokens_per_s) for label, _, _ in modes]
            report(
                f"{title}: {args.jobs} generations x {tokens} tokens, source={args.source}", runs
            )


@dataclass
class ProcessRun:
    processes: int
    tokens: int
    seconds: float  # the server's clock: the first job's creation to the last one's end
    window: float  # the wall time the CPU counters below span
    worker_cpu: float
    redis_cpu: float
    idle_cpu: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def machine_idle() -> float:
    """CPU seconds the whole machine has spent idle (all cores), from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return (int(fields[4]) + int(fields[5])) / TICKS  # idle + iowait


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


async def wait_drained(client: aioredis.Redis, queue: Queue, poll: float = POLL) -> None:
    k = queue.keys
    while True:
        await asyncio.sleep(poll)
        async with client.pipeline(transaction=False) as pipe:
            pipe.zcard(k.ready).zcard(k.leases).zcard(k.scheduled).llen(k.intake)
            if sum(await pipe.execute()) == 0:
                return


async def enqueue_wave(queue: Queue, jobs: int, tokens: int) -> list[str]:
    params = {"demo_tokens": tokens, "demo_delay_ms": 0}
    items = [
        EnqueueItem({"model": "demo/instant", "prompt": f"bench {i}", "params": params})
        for i in range(jobs)
    ]
    return [e.id for e in await queue.enqueue_many(items)]  # one round trip


async def run_processes(
    url: str, processes: int, jobs: int, tokens: int, window_ms: float
) -> ProcessRun:
    """``genq worker --processes N`` serving ``jobs`` generations per process, timed."""
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "GENQ_REDIS_URL": url,
        "GENQ_QUEUE_NAMESPACE": namespace,
        "GENQ_MODELS": "demo/*",
        "GENQ_PROVIDER_CONCURRENCY": f"demo={jobs}",
        "GENQ_COALESCE_WINDOW_MS": f"{window_ms:g}",
        "GENQ_LEASE": "120",
        "GENQ_LOG_LEVEL": "INFO",
    }
    settings = WorkerSettings(
        redis_url=url, queue_namespace=namespace, models=["demo/*"], lease=120.0
    )
    prefix = settings.routing().providers["demo"].queue_prefix
    genq = Path(sys.executable).with_name("genq")
    proc = await asyncio.create_subprocess_exec(
        str(genq),
        "worker",
        "--processes",
        str(processes),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    client = aioredis.Redis.from_url(url)
    try:
        assert proc.stderr is not None
        ready = 0
        async with asyncio.timeout(120):  # importing LiteLLM takes seconds per process
            while ready < processes:
                line = (await proc.stderr.readline()).decode(errors="replace")
                if not line:
                    raise RuntimeError(f"genq worker exited (code {await proc.wait()})")
                ready += "serving provider demo" in line
        drain_log = asyncio.create_task(proc.stderr.read())  # keep the pipe from filling up
        queue = Queue(client, prefix=prefix)
        pids = children(proc.pid) if processes > 1 else [proc.pid]
        assert len(pids) == processes, pids

        # Warm-up, not measured: every process's first streams pay LiteLLM's one-time setup.
        await enqueue_wave(queue, jobs * processes, 20)
        await wait_drained(client, queue)

        _, redis_cpu0 = await server_counters(client)
        cpu0, idle0 = sum(process_cpu(p) for p in pids), machine_idle()
        wall0 = time.perf_counter()
        ids = await enqueue_wave(queue, jobs * processes, tokens)
        await wait_drained(client, queue, DRAIN_POLL)
        window = time.perf_counter() - wall0
        cpu, idle = sum(process_cpu(p) for p in pids) - cpu0, machine_idle() - idle0
        _, redis_cpu1 = await server_counters(client)
        done = [await queue.get(job_id) for job_id in ids]
        for job in done:
            assert job is not None and job.status.value == "completed", job
            assert len(job.result["text"].split()) == tokens
        first = min(job.created_at for job in done if job)
        last = max(job.finished_at or 0.0 for job in done if job)
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            await proc.wait()
        drain_log.cancel()
        return ProcessRun(
            processes=processes,
            tokens=len(ids) * tokens,
            seconds=last - first,
            window=window,
            worker_cpu=cpu,
            redis_cpu=redis_cpu1 - redis_cpu0,
            idle_cpu=idle,
        )
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await client.aclose()


def report_processes(runs: list[ProcessRun], jobs: int, tokens: int) -> None:
    cores = len(os.sched_getaffinity(0))
    print(
        f"\nworker processes (genq worker --processes N), {jobs} generations x {tokens} tokens "
        f"per process, batched emits, {cores} cores, nothing pinned"
    )
    header = (
        f"{'processes':<11}{'tokens/s':>10}{'per process':>13}{'CPU/token':>12}"
        f"{'workers busy':>14}{'Redis busy':>12}{'Redis CPU/token':>17}{'idle':>7}{'others':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in runs:
        idle = r.idle_cpu / r.window
        others = cores - idle - (r.worker_cpu + r.redis_cpu) / r.window
        print(
            f"{r.processes:<11}{r.tokens_per_s:>10.0f}{r.tokens_per_s / r.processes:>13.0f}"
            f"{r.worker_cpu / r.tokens * 1e6:>9.1f} us"
            f"{r.worker_cpu / r.window * 100:>13.0f}%{r.redis_cpu / r.window * 100:>11.0f}%"
            f"{r.redis_cpu / r.tokens * 1e6:>14.1f} us{idle * 100:>6.0f}%{others * 100:>7.0f}%"
        )
    one, many = runs
    print(
        f"  {many.processes} processes vs 1: {many.tokens_per_s / one.tokens_per_s:.2f}x tokens/s "
        f"(CPU seconds per wall second, 100% = one core; idle: the machine's idle CPU; "
        f"others: what other processes on the machine took)"
    )


async def main_processes(args: argparse.Namespace) -> None:
    tokens = args.tokens or PROCESS_TOKENS
    with EmbeddedRedis() as server:
        counts = (1, args.processes)
        tries: list[list[ProcessRun]] = [[] for _ in counts]
        for _ in range(args.repeat):  # 1 and N processes take turns, as the scenarios do
            for count, runs in zip(counts, tries, strict=True):
                runs.append(
                    await run_processes(server.url, count, args.jobs, tokens, args.window_ms)
                )
        best = [max(runs, key=lambda r: r.tokens_per_s) for runs in tries]  # least disturbed
        report_processes(best, args.jobs, tokens)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=64)
    p.add_argument(
        "--tokens",
        type=int,
        default=0,
        help=f"tokens per generation, full speed (default {TOKENS}; "
        f"{PROCESS_TOKENS} with --processes)",
    )
    p.add_argument("--paced-tokens", type=int, default=100, help="tokens per paced generation")
    p.add_argument("--window-ms", type=float, default=10.0)
    p.add_argument(
        "--source",
        choices=("litellm", "openai", "raw"),
        default="litellm",
        help="litellm: demo models; openai: an OpenAI-compatible server (the tests' fake); "
        "raw: no LiteLLM",
    )
    p.add_argument("--repeat", type=int, default=3, help="runs per mode; the fastest is shown")
    p.add_argument(
        "--processes",
        type=int,
        default=0,
        help="compare N real worker processes with 1 (genq worker --processes N) instead",
    )
    return p.parse_args()


if __name__ == "__main__":
    arguments = parse()
    asyncio.run(main_processes(arguments) if arguments.processes else main(arguments))

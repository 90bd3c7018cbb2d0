"""genq against arq and against a bare EVALSHA loop, measured side by side in one run.

Every number comes from the same process, the same event loop and the same Redis-protocol server
(an embedded Valkey started here, or ``GENQ_BENCH_REDIS_URL``), so the ratios mean something
even where the absolute numbers depend on the machine.

    python bench/queue.py            # full run (~1 min)
    python bench/queue.py --quick    # smaller sizes (~15 s)
    python bench/queue.py --profile artifacts/prof   # also cProfile every genq section

What is measured (both systems get the same work, in-process, default asyncio loop):
  enqueue   one producer, sequential awaits: genq ``Queue.enqueue`` vs arq ``enqueue_job``.
            Also ``Queue.enqueue_many`` in batches of --batch (100), sequential batches: jobs/s
            against the 30,000/s target, the bare EVALSHA loop and single ``enqueue``.
  drain     N no-op jobs already queued, one worker with concurrency C (arq: ``max_jobs=C``,
            ``burst=True``, default ``poll_delay`` 0.5 s unless --arq-poll-delay), timed from
            worker start until every job has settled.
  latency   an idle worker (concurrency C); one producer enqueues N jobs one after another at
            random intervals (exponential, mean --latency-gap), so arrivals fall at random
            phases of arq's poll; latency = handler start - the instant before enqueue.
  emit      ``job.emit`` calls/s from handlers (1 job; 64 concurrent jobs) vs a bare EVALSHA
            loop of ``return 1`` at the same concurrency. "1 conn" routes every command through
            a single connection (a blocking pool of one; the worker's cancel listener gets a
            second connection of its own); "pool" uses the client's default pool.
  raw       the bare EVALSHA loop, sequential, one connection: the ceiling for one producer.
"""

# ruff: noqa: E402  (the sys.path fix below must run before the imports)
from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path and this module would shadow
# the standard library's ``queue``, which redis-py imports.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import argparse
import asyncio
import contextlib
import cProfile
import io
import os
import platform
import pstats
import random
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import redis as redis_sync
import redis.asyncio as aioredis

sys.path.insert(0, str(HERE.parent))

from genq import ActiveJob, EnqueueItem, Queue
from genq_cli.embedded_redis import EmbeddedRedis

PAYLOAD = {"prompt": "Write a haiku about queues.", "model": "demo"}
TOKEN = "tok "


# -- options ------------------------------------------------------------------------------------


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    p.add_argument("--redis-url", default=os.environ.get("GENQ_BENCH_REDIS_URL"))
    p.add_argument("--enqueue", type=int, help="enqueues per round and system (1500; quick 400)")
    p.add_argument("--drain", type=int, help="jobs to drain (10000; quick 2000)")
    p.add_argument("--batch", type=int, default=100, help="items per enqueue_many call (100)")
    p.add_argument("--concurrency", type=int, default=50, help="worker concurrency / max_jobs")
    p.add_argument("--latency", type=int, help="jobs in the latency run (200; quick 60)")
    p.add_argument("--latency-gap", type=float, default=0.05, help="mean seconds between jobs")
    p.add_argument("--emits", type=int, help="emits by the single job per round (1500; quick 400)")
    p.add_argument("--emit-jobs", type=int, default=64, help="concurrent jobs in the emit run")
    p.add_argument(
        "--emits-per-job", type=int, help="emits per concurrent job per round (100; quick 30)"
    )
    p.add_argument(
        "--rounds", type=int, help="best of R alternating rounds: enqueue/emit/raw (5; quick 3)"
    )
    p.add_argument("--arq-poll-delay", type=float, default=0.5, help="arq's poll_delay (0.5)")
    p.add_argument("--only", nargs="*", choices=("enqueue", "drain", "latency", "emit"))
    p.add_argument("--profile", type=Path, help="write cProfile stats of genq's sections here")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args(argv)
    full = {
        "enqueue": 1500,
        "drain": 10_000,
        "latency": 200,
        "emits": 1500,
        "emits_per_job": 100,
        "rounds": 5,
    }
    quick = {
        "enqueue": 400,
        "drain": 2000,
        "latency": 60,
        "emits": 400,
        "emits_per_job": 30,
        "rounds": 3,
    }
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


# -- results ------------------------------------------------------------------------------------


@dataclass
class Row:
    metric: str
    genq: float
    other: float | None  # arq, or the bare loop for emit rows
    other_name: str
    unit: str
    target: str
    ok: bool | None
    ratio: str


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:.2f}" if value < 10 else f"{value:.0f}"
    return f"{value:,.0f}"


def table(rows: list[Row]) -> str:
    head = ("metric", "genq", "vs", "other", "ratio", "target", "")
    lines = [
        (
            r.metric,
            fmt(r.genq, r.unit),
            r.other_name,
            fmt(r.other, r.unit),
            r.ratio,
            r.target,
            "" if r.ok is None else ("PASS" if r.ok else "MISS"),
        )
        for r in rows
    ]
    widths = [max(len(str(x[i])) for x in [head, *lines]) for i in range(len(head))]
    right = {1, 3, 4}

    def render(cells: tuple[str, ...]) -> str:
        out = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([render(head), rule, *(render(line) for line in lines)])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# -- plumbing -----------------------------------------------------------------------------------


class Bench:
    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self.url = url
        self.args = args
        self.tag = f"bench-{uuid.uuid4().hex[:8]}"
        self.arq_ids: list[str] = []
        self.arq_queues: list[str] = []
        self.clients: list[Any] = []

    def client(self, **kwargs: Any) -> aioredis.Redis:
        c = aioredis.Redis.from_url(self.url, **kwargs)
        self.clients.append(c)
        return c

    def one_connection_client(self, connections: int = 1) -> aioredis.Redis:
        pool = aioredis.BlockingConnectionPool.from_url(self.url, max_connections=connections)
        c = aioredis.Redis(connection_pool=pool)
        self.clients.append(c)
        return c

    def arq_pool(self, queue_name: str) -> Any:
        from arq.connections import ArqRedis

        pool = ArqRedis(aioredis.ConnectionPool.from_url(self.url), default_queue_name=queue_name)
        self.clients.append(pool)
        self.arq_queues.append(queue_name)
        return pool

    def prefix(self, section: str) -> str:
        return f"{self.tag}-{section}"

    @contextlib.contextmanager
    def profiled(self, section: str, first: bool = True) -> Iterator[None]:
        if self.args.profile is None or not first:
            yield
            return
        prof = cProfile.Profile()
        prof.enable()
        try:
            yield
        finally:
            prof.disable()
            self.args.profile.mkdir(parents=True, exist_ok=True)
            path = self.args.profile / f"genq-{section}.prof"
            prof.dump_stats(path)
            out = io.StringIO()
            stats = pstats.Stats(prof, stream=out).strip_dirs().sort_stats("tottime")
            stats.print_stats(14)
            print(f"\n== cProfile genq {section} (by own time; full stats in {path})")
            print("\n".join(out.getvalue().splitlines()[6:]))

    async def close(self, own_server: bool) -> None:
        if not own_server:  # a shared server: delete exactly what this run wrote
            c = self.client()
            async for key in c.scan_iter(match=f"{{{self.tag}-*"):
                await c.unlink(key)
            arq_keys = [
                f"arq:{kind}:{i}"
                for i in self.arq_ids
                for kind in ("job", "result", "retry", "in-progress")
            ]
            arq_keys += self.arq_queues + [f"{q}:health-check" for q in self.arq_queues]
            for start in range(0, len(arq_keys), 500):
                await c.unlink(*arq_keys[start : start + 500])
        for c in self.clients:
            await c.aclose()


async def timed(n: int, step: Callable[[int], Awaitable[Any]]) -> float:
    """Runs ``step(i)`` n times in sequence; returns calls/s."""
    start = time.perf_counter()
    for i in range(n):
        await step(i)
    return n / (time.perf_counter() - start)


async def concurrently(tasks: int, per_task: int, step: Callable[[], Awaitable[Any]]) -> float:
    async def run() -> None:
        for _ in range(per_task):
            await step()

    start = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(tasks)))
    return tasks * per_task / (time.perf_counter() - start)


async def fill(n: int, enqueue: Callable[[int], Awaitable[Any]], parallel: int = 32) -> None:
    """Queues n jobs quickly (not timed)."""

    async def lane(start: int) -> None:
        for i in range(start, n, parallel):
            await enqueue(i)

    await asyncio.gather(*(lane(s) for s in range(parallel)))


@contextlib.asynccontextmanager
async def arq_worker(pool: Any, functions: list[Any], **options: Any) -> AsyncIterator[Any]:
    from arq.worker import Worker as ArqWorker

    worker = ArqWorker(
        functions=functions,
        redis_pool=pool,
        queue_name=pool.default_queue_name,
        handle_signals=False,
        **options,
    )
    task = asyncio.create_task(worker.main())
    try:
        yield worker
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# -- sections -----------------------------------------------------------------------------------


async def bench_raw(b: Bench) -> float:
    c = b.one_connection_client()
    script = c.register_script("return 1")
    key = f"{{{b.prefix('raw')}}}:k"
    await timed(200, lambda i: script(keys=[key]))
    rounds = [await timed(b.args.emits, lambda i: script(keys=[key])) for _ in range(b.args.rounds)]
    return max(rounds)


async def bench_enqueue(b: Bench, raw: float) -> list[Row]:
    n = b.args.enqueue
    q = Queue(b.client(), prefix=b.prefix("enqueue"))
    arq = b.arq_pool(f"{b.tag}:arq-enqueue")

    async def arq_enqueue(i: int) -> None:
        job = await arq.enqueue_job("noop", PAYLOAD)
        b.arq_ids.append(job.job_id)

    size = b.args.batch
    batches = max(1, 10 * n // size)  # 10x the single-enqueue jobs: a batch is that much cheaper

    def enqueue_batch(i: int) -> Awaitable[Any]:
        return q.enqueue_many([EnqueueItem(PAYLOAD) for _ in range(size)])

    await timed(100, lambda i: q.enqueue(PAYLOAD))
    await timed(100, arq_enqueue)
    await timed(5, enqueue_batch)
    genq = other = many = 0.0
    for r in range(b.args.rounds):  # alternating, best of each: the box's noise hits all
        with b.profiled("enqueue", first=r == 0):
            genq = max(genq, await timed(n, lambda i: q.enqueue(PAYLOAD)))
        other = max(other, await timed(n, arq_enqueue))
        with b.profiled("enqueue_many", first=r == 0):
            many = max(many, size * await timed(batches, enqueue_batch))
    return [
        Row(
            "enqueue jobs/s",
            genq,
            other,
            "arq",
            "/s",
            ">= 3x arq",
            genq >= 3 * other,
            f"{genq / other:.1f}x",
        ),
        Row("enqueue vs raw loop", genq, raw, "raw", "/s", "", None, f"{genq / raw:.0%}"),
        Row(
            f"enqueue_many jobs/s (x{size})",
            many,
            raw,
            "raw",
            "/s",
            ">= 30,000/s",
            many >= 30_000,
            f"{many / raw:.1f}x",
        ),
        Row(
            "enqueue_many vs enqueue", many, genq, "enqueue", "/s", "", None, f"{many / genq:.1f}x"
        ),
    ]


async def bench_drain(b: Bench) -> list[Row]:
    from arq.worker import func

    n, conc = b.args.drain, b.args.concurrency
    q = Queue(b.client(), prefix=b.prefix("drain"))
    await fill(n, lambda i: q.enqueue(PAYLOAD))
    done = 0
    all_done = asyncio.Event()

    async def noop(job: ActiveJob) -> None:
        nonlocal done
        done += 1
        if done == n:
            all_done.set()

    with b.profiled("drain"):
        start = time.perf_counter()
        worker = await q.worker(noop, concurrency=conc).start()
        await all_done.wait()
        await worker.stop()  # waits for the last settles
        genq = n / (time.perf_counter() - start)
    stats = await q.stats()
    assert (stats.waiting, stats.active, done) == (0, 0, n), (stats, done)

    pool = b.arq_pool(f"{b.tag}:arq-drain")

    async def arq_enqueue(i: int) -> None:
        job = await pool.enqueue_job("noop", PAYLOAD)
        b.arq_ids.append(job.job_id)

    async def arq_noop(ctx: dict[str, Any], payload: Any) -> None:
        return None

    await fill(n, arq_enqueue)
    from arq.worker import Worker as ArqWorker

    w = ArqWorker(
        functions=[func(arq_noop, name="noop")],
        redis_pool=pool,
        burst=True,
        queue_name=pool.default_queue_name,
        max_jobs=conc,
        poll_delay=b.args.arq_poll_delay,
        handle_signals=False,
    )
    start = time.perf_counter()
    await w.main()
    other = n / (time.perf_counter() - start)
    assert w.jobs_complete == n, (w.jobs_complete, w.jobs_failed)
    return [
        Row(
            f"drain {n:,} no-op jobs/s (c={conc})",
            genq,
            other,
            "arq",
            "/s",
            ">= 4x arq",
            genq >= 4 * other,
            f"{genq / other:.1f}x",
        )
    ]


async def bench_latency(b: Bench) -> list[Row]:
    from arq.worker import func

    n, gap = b.args.latency, b.args.latency_gap
    rng = random.Random(b.args.seed)
    gaps = [rng.expovariate(1 / gap) for _ in range(n)]

    async def measure(
        enqueue: Callable[[int], Awaitable[Any]], starts: dict[int, float]
    ) -> list[float]:
        sent: dict[int, float] = {}
        for i in range(n):
            await asyncio.sleep(gaps[i])
            sent[i] = time.perf_counter()
            await enqueue(i)
        async with asyncio.timeout(30):
            while len(starts) < n:
                await asyncio.sleep(0.01)
        return [(starts[i] - sent[i]) * 1000 for i in range(n)]

    genq_starts: dict[int, float] = {}

    async def probe(job: ActiveJob) -> None:
        genq_starts[job.payload["i"]] = time.perf_counter()

    q = Queue(b.client(), prefix=b.prefix("latency"))
    async with q.worker(probe, concurrency=b.args.concurrency):
        await asyncio.sleep(0.2)  # idle: blocked on the doorbell
        with b.profiled("latency"):
            genq = await measure(lambda i: q.enqueue({**PAYLOAD, "i": i}), genq_starts)

    arq_starts: dict[int, float] = {}

    async def arq_probe(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
        arq_starts[payload["i"]] = time.perf_counter()

    pool = b.arq_pool(f"{b.tag}:arq-latency")

    async def arq_enqueue(i: int) -> None:
        job = await pool.enqueue_job("probe", {**PAYLOAD, "i": i})
        b.arq_ids.append(job.job_id)

    async with arq_worker(
        pool,
        [func(arq_probe, name="probe")],
        max_jobs=b.args.concurrency,
        poll_delay=b.args.arq_poll_delay,
    ):
        await asyncio.sleep(0.2)
        other = await measure(arq_enqueue, arq_starts)

    g50, a50 = statistics.median(genq), statistics.median(other)
    g99, a99 = pct(genq, 0.99), pct(other, 0.99)
    return [
        Row(
            f"latency p50 ms (n={n})",
            g50,
            a50,
            "arq",
            "ms",
            "<= 1/50 arq",
            g50 * 50 <= a50,
            f"1/{a50 / g50:.0f}",
        ),
        Row(f"latency p99 ms (n={n})", g99, a99, "arq", "ms", "", None, f"1/{a99 / g99:.0f}"),
    ]


async def emit_rate(
    b: Bench, client: Any, jobs: int, per_job: int, section: str, first: bool = True
) -> float:
    """emit/s from ``jobs`` handlers running at once, timed from when all of them are running."""
    q = Queue(client, prefix=b.prefix(section))
    running = 0
    everyone_in, everyone_out = asyncio.Event(), asyncio.Event()
    finished: list[float] = []

    async def handler(job: ActiveJob) -> None:
        nonlocal running
        running += 1
        if running == jobs:
            everyone_in.set()
        await everyone_in.wait()
        for _ in range(per_job):
            await job.emit(TOKEN)
        finished.append(time.perf_counter())
        if len(finished) == jobs:
            everyone_out.set()
        # No slot frees before every job is done emitting: a free slot sends the worker's
        # fetcher into BLPOP, which on a one-connection pool would hold the emitters' connection.
        await everyone_out.wait()

    ids = [(await q.enqueue(PAYLOAD)).id for _ in range(jobs)]
    with b.profiled(section, first):
        async with q.worker(handler, concurrency=jobs):
            await everyone_in.wait()
            start = time.perf_counter()
            async with asyncio.timeout(120):
                while len(finished) < jobs:
                    await asyncio.sleep(0.005)
            rate = jobs * per_job / (max(finished) - start)
    lengths = {await client.xlen(q.keys.events(i)) for i in ids}
    assert lengths == {per_job + 1}, lengths  # the chunks and the completed event
    return rate


async def bare_rate(client: Any, tasks: int, per_task: int, key: str) -> float:
    script = client.register_script("return 1")
    await script(keys=[key])
    return await concurrently(tasks, per_task, lambda: script(keys=[key]))


async def bench_emit(b: Bench) -> list[Row]:
    jobs, per_job, single = b.args.emit_jobs, b.args.emits_per_job, b.args.emits
    key = f"{{{b.prefix('bare')}}}:k"
    rows = []
    # Worker clients get 2 connections: one is held by the cancel listener (pub/sub), every
    # other command (reserve, emit, settle) shares the second. The bare loop gets that one.
    cases = [
        ("emit/s, 1 job (1 conn)", 1, single, True),
        (f"emit/s, {jobs} jobs (1 conn)", jobs, per_job, True),
        (f"emit/s, {jobs} jobs (pool)", jobs, per_job, False),
    ]
    for label, n_jobs, per, one_conn in cases:
        section = f"emit-{n_jobs}-{'one' if one_conn else 'pool'}"
        worker_client = b.one_connection_client(2) if one_conn else b.client()
        bare_client = b.one_connection_client(1) if one_conn else b.client()
        await bare_rate(bare_client, n_jobs, 50, key)  # warm up connections
        genq = bare = 0.0
        for r in range(b.args.rounds):
            rate = await emit_rate(b, worker_client, n_jobs, per, f"{section}-{r}", r == 0)
            genq = max(genq, rate)
            bare = max(bare, await bare_rate(bare_client, n_jobs, per, key))
        target = ">= 50% bare" if one_conn else ""
        rows.append(
            Row(
                label,
                genq,
                bare,
                "bare",
                "/s",
                target,
                genq >= 0.5 * bare if one_conn else None,
                f"{genq / bare:.0%}",
            )
        )
    return rows


# -- main ---------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, url: str, own_server: bool) -> int:
    b = Bench(url, args)
    sections = args.only or ["enqueue", "drain", "latency", "emit"]
    rows: list[Row] = []
    t0 = time.perf_counter()
    try:
        raw = await bench_raw(b)
        if "enqueue" in sections:
            rows += await bench_enqueue(b, raw)
        if "drain" in sections:
            rows += await bench_drain(b)
        if "latency" in sections:
            rows += await bench_latency(b)
        if "emit" in sections:
            rows += await bench_emit(b)
        rows.append(Row("raw EVALSHA loop (1 conn)", raw, None, "", "/s", "", None, ""))
    finally:
        await b.close(own_server)
    with redis_sync.Redis.from_url(url) as sync_client:
        info = sync_client.info("server")
    server = (
        f"{info.get('server_name', 'redis')} {info.get('valkey_version') or info['redis_version']}"
    )
    import arq.version

    print(
        f"\ngenq queue bench: {server} at {url} ({'embedded' if own_server else 'external'}); "
        f"Python {platform.python_version()}, redis-py {redis_sync.__version__}, "
        f"arq {arq.version.VERSION}, {os.cpu_count()} CPUs; {'quick' if args.quick else 'full'} "
        f"run, {time.perf_counter() - t0:.0f} s"
    )
    print(
        f"arq: in-process Worker(max_jobs={args.concurrency}, poll_delay={args.arq_poll_delay}, "
        f"burst for the drain), default pickle serializer and keep_result; genq: default "
        f"Queue options, worker concurrency={args.concurrency}; latency: open-loop arrivals, "
        f"mean gap {args.latency_gap * 1000:.0f} ms; enqueue/emit/raw: best of {args.rounds}\n"
    )
    if args.profile:
        print("cProfile was on for genq's sections: their numbers (and ratios) are depressed\n")
    print(table(rows))
    missed = [r.metric for r in rows if r.ok is False]
    print(f"\n{len(missed)} target(s) missed" + (f": {', '.join(missed)}" if missed else ""))
    return 1 if missed and args.strict else 0


def main() -> int:
    args = parse()
    random.seed(args.seed)
    if args.redis_url:
        return asyncio.run(run(args, args.redis_url, own_server=False))
    with EmbeddedRedis() as server:
        return asyncio.run(run(args, server.url, own_server=True))


if __name__ == "__main__":
    sys.exit(main())

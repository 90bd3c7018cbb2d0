"""genq against SAQ, arq, taskiq (with every worker apart) and a bare EVALSHA loop, side by side.

Every number comes from one run (all but the apart section's from one process and one event
loop) and the same Redis-protocol server (an embedded Valkey started here, or
``GENQ_BENCH_REDIS_URL``), so the ratios mean something even where the absolute numbers depend
on the machine.

    python bench/queue.py            # full run (~2 min)
    python bench/queue.py --quick    # smaller sizes (~40 s)
    python bench/queue.py --uvloop   # every system on uvloop's event loop instead of asyncio's
    python bench/queue.py --profile artifacts/prof   # also cProfile every genq section

What is measured (every system gets the same work, in-process, one producer, one worker):
  enqueue   one producer, sequential awaits: genq ``Queue.enqueue`` vs SAQ's ``RedisQueue.enqueue``
            vs arq ``enqueue_job`` vs the bare loop, taking turns of --block (50) calls each
            within a round (the first system of each turn rotating), so that the machine's
            noise, which comes in bursts longer than a turn, falls on every system alike; a
            system's rate in a round is its calls over the sum of its turns' times, best of
            --rounds; the targets set genq's against SAQ's, arq's and the bare loop's from
            these same turns, and genq's ratio to the bare loop is also printed round by round
            and against the standalone bare loop (the last row), which ran at another time. Also
            ``Queue.enqueue_many`` in batches of
            --batch (100), sequential batches, against the 30,000/s target. "bare enqueue.lua"
            sends genq's own script with arguments made before the clock starts, through
            genq's script call on genq's client (as ``Queue.enqueue`` sends it): the floor
            of the server's and the wire's share, so genq's ratio to it is its Python's
            share. "least enqueue" (in the same turns): a script that only writes a record
            (the payload) and a list entry, sent the same way, its arguments premade: what
            any durable enqueue costs at least, so the premade script's ratio to it is what
            genq's own steps cost (the existence check, clock, sequence, rank, intake entry,
            doorbell). "server µs per enqueue": the server's own
            time per enqueue (``INFO commandstats`` before and after each turn, outside its
            timing, least of the rounds; arq's is its MULTI/EXEC of several commands), so the
            gap to a peer splits into what the server does and what the client does.
  drain     N no-op jobs already queued, one worker with concurrency C, timed from worker start
            until every job has settled. arq: ``max_jobs=C``, ``burst=True``, ``poll_delay``
            0.5 s unless --arq-poll-delay. SAQ: ``Worker(concurrency=C)``, its defaults (C tasks
            each blocked in BLMOVE, upkeep timers), settled = its ``after_process`` hook ran.
            "fair" spreads the jobs over --tenants tenants (genq's per-tenant round robin on;
            SAQ has no tenants, so its one figure is the peer of both genq lines). genq and SAQ:
            best of --drain-rounds (3), alternating; arq once.
  latency   an idle worker (concurrency C); one producer enqueues N jobs one after another at
            random intervals (exponential, mean --latency-gap), so arrivals fall at random
            phases of arq's poll; latency = handler start - the instant before enqueue. The
            targets count round trips: RTT = the p50 of one bare EVALSHA sent after each of the
            same gaps (an idle client and server wake as they do for a job); the back-to-back
            loop's RTT is printed beside it.
  fairness  a worker (--fair-concurrency 8, handler sleeps --fair-sleep 20 ms). Tenant B
            enqueues --fair-jobs (10) jobs one by one, --fair-gap apart, (a) into an idle queue,
            (b) right after tenant A enqueued --backlog (5,000) jobs; B's wait (enqueue ->
            handler start) p50/p99 in both, and A's drain time against its floor
            (backlog x sleep / concurrency). FIFO would make B wait out A's whole backlog.
  emit      ``job.emit`` calls/s from handlers (1 job; 64 concurrent jobs) vs a bare EVALSHA
            loop of ``return 1`` at the same concurrency. "1 conn" routes every command through
            a single connection (the bare loop: a blocking pool of one; the worker: one more
            than the three its cancel listener, presence and doorbell hold); "pool" uses the
            client's default pool.
  patches   what genq's patches of redis-py buy (genq/_redis_patches.py): ``Queue.enqueue`` and
            ``Queue.enqueue_many`` (x--batch) with them on and off (redis-py's own pool,
            connections, ``AsyncScript`` and pipeline, as on an untested redis-py), in
            alternating turns as in "enqueue", best of --rounds. Run with ``--only patches``.
  apart     each system's worker in a process of its own (``--serve``), plain clients, the
            default asyncio loop (not --uvloop): drains of --apart-drain jobs at each
            --apart-concurrency (8, 50), with the worker's and the server's CPU per job, and
            the enqueue-to-handler latency of an idle worker (c=8), against SAQ, arq and
            taskiq (taskiq-redis's list broker); targets: drain
            >= 2x the best peer, latency p50 <= the best peer's, p99 <= 2x. Run it alone with
            ``--only apart`` (bench/queue_apart.py).
  bare      EVALSHA of ``return 1``, sequential, on the producers' kind of client (the default
            pool): the ceiling for one producer, best of every round it ran in.
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
import inspect
import io
import logging
import os
import platform
import pstats
import random
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import redis as redis_sync
import redis.asyncio as aioredis

sys.path.insert(0, str(HERE.parent))

from bench.queue_apart import SYSTEMS, Apart, serve
from genq import HELD_CONNECTIONS, ActiveJob, EnqueueItem, Queue, _redis_patches, connect
from genq._cluster import Call
from genq._enqueue import enqueue_call
from genq._scripts import Script
from genq_cli.embedded_redis import EmbeddedRedis

PAYLOAD = {"prompt": "Write a haiku about queues.", "model": "demo"}
LEAST = """redis.call('HSET', KEYS[1], 'payload', ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1"""
"""The least a durable enqueue does: write a record and a list entry, in one script call."""
TOKEN = "tok "

# Set once genq's fair share is there (``Queue.enqueue(..., tenant=...)``).
HAS_TENANTS = "tenant" in inspect.signature(Queue.enqueue).parameters


# -- options ------------------------------------------------------------------------------------


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    p.add_argument("--uvloop", action="store_true", help="run everything on uvloop")
    p.add_argument("--redis-url", default=os.environ.get("GENQ_BENCH_REDIS_URL"))
    p.add_argument("--enqueue", type=int, help="enqueues per round and system (1500; quick 400)")
    p.add_argument("--drain", type=int, help="jobs to drain (4000; quick 2000)")
    p.add_argument("--batch", type=int, default=100, help="items per enqueue_many call (100)")
    p.add_argument("--concurrency", type=int, default=50, help="worker concurrency / max_jobs")
    p.add_argument("--tenants", type=int, default=8, help="tenants in the fair drain (8)")
    p.add_argument("--drain-rounds", type=int, help="best of R drains, genq and SAQ (3; quick 1)")
    p.add_argument("--latency", type=int, help="jobs in the latency run (80; quick 60)")
    p.add_argument("--latency-gap", type=float, default=0.03, help="mean seconds between jobs")
    p.add_argument("--backlog", type=int, help="tenant A's backlog (5000; quick 1000)")
    p.add_argument("--fair-jobs", type=int, default=10, help="tenant B's jobs (10)")
    p.add_argument("--fair-gap", type=float, default=0.005, help="seconds between B's jobs")
    p.add_argument("--fair-concurrency", type=int, default=8, help="worker concurrency (8)")
    p.add_argument("--fair-sleep", type=float, default=0.02, help="handler's sleep (0.02)")
    p.add_argument("--emits", type=int, help="emits by the single job per round (1500; quick 400)")
    p.add_argument("--emit-jobs", type=int, default=64, help="concurrent jobs in the emit run")
    p.add_argument(
        "--emits-per-job", type=int, help="emits per concurrent job per round (100; quick 30)"
    )
    p.add_argument(
        "--rounds", type=int, help="best of R alternating rounds: enqueue/emit/bare (4; quick 3)"
    )
    p.add_argument(
        "--block", type=int, default=50, help="calls per system's turn in the enqueue rounds (50)"
    )
    p.add_argument("--arq-poll-delay", type=float, default=0.5, help="arq's poll_delay (0.5)")
    p.add_argument(
        "--only",
        nargs="*",
        choices=("enqueue", "drain", "latency", "fairness", "emit", "patches", "apart"),
    )
    p.add_argument(
        "--apart-drain", type=int, help="jobs per drain, worker apart (4000; quick 2000)"
    )
    p.add_argument(
        "--apart-concurrency",
        default="8,50",
        help="worker concurrencies of the drains apart (8,50)",
    )
    p.add_argument(
        "--apart-latency", type=int, help="jobs per latency run, worker apart (150; quick 80)"
    )
    p.add_argument(
        "--apart-rounds", type=int, help="alternating rounds of the apart section (2; quick 1)"
    )
    p.add_argument(
        "--apart-systems",
        default=",".join(SYSTEMS),
        help=f"systems in the apart section ({','.join(SYSTEMS)})",
    )
    p.add_argument("--serve", help=argparse.SUPPRESS)  # a worker process of the apart section
    p.add_argument("--profile", type=Path, help="write cProfile stats of genq's sections here")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args(argv)
    full = {
        "enqueue": 1500,
        "drain": 4000,
        "drain_rounds": 3,
        "latency": 80,
        "backlog": 5000,
        "emits": 1500,
        "emits_per_job": 100,
        "rounds": 4,
        "apart_drain": 4000,
        "apart_latency": 150,
        "apart_rounds": 2,
    }
    quick = {
        "enqueue": 400,
        "drain": 2000,
        "drain_rounds": 1,
        "latency": 60,
        "backlog": 1000,
        "emits": 400,
        "emits_per_job": 30,
        "rounds": 3,
        "apart_drain": 2000,
        "apart_latency": 80,
        "apart_rounds": 1,
    }
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


# -- results ------------------------------------------------------------------------------------


@dataclass
class Target:
    text: str
    ok: bool


@dataclass
class Row:
    """One metric: genq's figure, its peers' (None: not measured) and the targets on it.

    ``unit`` is "/s" (higher is better), "ms" (lower is better; the bare column then holds
    one bare round trip), "µs" (the server's time per call: lower is better) or "s".
    """

    metric: str
    unit: str
    genq: float
    saq: float | None = None
    arq: float | None = None
    bare: float | None = None
    targets: list[Target] = field(default_factory=list)
    note: str = ""


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:.2f}" if value < 10 else f"{value:,.0f}"
    if unit == "s" or unit == "µs":
        return f"{value:.1f}"
    return f"{value:,.0f}"


def ratio(genq: float, peer: float | None, unit: str, bare: bool = False) -> str:
    """genq against a peer: "1.30x" (throughput, or a latency 1.3 times the peer's), "1/12.0"
    (a latency 12 times lower), "3.1 RTT" (a latency in bare round trips), "44%" (of bare)."""
    if peer is None or peer <= 0 or genq <= 0:
        return ""
    if unit == "/s":
        return f"{genq / peer:.0%}" if bare else f"{genq / peer:.2f}x"
    if unit == "ms" and bare:
        return f"{genq / peer:.1f} RTT"
    if unit == "ms":
        return f"1/{peer / genq:.1f}" if genq <= peer else f"{genq / peer:.1f}x"
    if unit == "µs":
        return f"{genq / peer:.1f}x"
    return ""


def table(rows: list[Row]) -> str:
    head = ("metric", "genq", "saq", "arq", "bare", "vs saq", "vs arq", "vs bare", "target", "", "")
    lines = [
        (
            r.metric,
            fmt(r.genq, r.unit),
            fmt(r.saq, r.unit),
            fmt(r.arq, r.unit),
            fmt(r.bare, r.unit),
            ratio(r.genq, r.saq, r.unit),
            ratio(r.genq, r.arq, r.unit),
            ratio(r.genq, r.bare, r.unit, bare=True),
            ", ".join(t.text for t in r.targets),
            " ".join("PASS" if t.ok else "MISS" for t in r.targets),
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(str(x[i])) for x in [head, *lines]) for i in range(len(head))]
    right = set(range(1, 8))

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
        self.bare = 0.0  # the bare loop's best rate so far (calls/s)
        self.bare_script: Any = None

    def client(self, **kwargs: Any) -> aioredis.Redis:
        c = aioredis.Redis.from_url(self.url, **kwargs)
        self.clients.append(c)
        return c

    def genq_client(self) -> Any:
        """genq's own client (``genq.connect``: hiredis packing), for genq and the bare loop."""
        c = connect(self.url)
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

    def saq_queue(self, section: str) -> Any:
        """SAQ's Redis queue with its defaults, on a client of its own (default pool)."""
        from saq.queue.redis import RedisQueue

        return RedisQueue(self.client(), name=f"{self.tag}-saq-{section}")

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
            for pattern in (f"{{{self.tag}-*", f"saq:*{self.tag}-saq-*"):
                async for key in c.scan_iter(match=pattern):
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


async def server_usec(admin: Any) -> float:
    """The server's own time spent in commands so far (µs, ``INFO commandstats``, INFO left out)."""
    stats = await admin.info("commandstats")
    return float(sum(v["usec"] for k, v in stats.items() if k != "cmdstat_info"))


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


@contextlib.asynccontextmanager
async def saq_worker(queue: Any, functions: list[Any], **options: Any) -> AsyncIterator[Any]:
    """SAQ's own Worker (its defaults unless ``options``), started in the background."""
    from saq import Worker as SaqWorker

    worker = SaqWorker(queue, functions, **options)
    worker.SIGNALS = []  # the bench keeps Ctrl-C
    task = asyncio.create_task(worker.start())
    try:
        yield worker
    finally:
        await worker.stop()  # cancels the tasks blocked in BLMOVE
        with contextlib.suppress(asyncio.CancelledError):
            await task


# -- sections -----------------------------------------------------------------------------------


def bare_call(b: Bench) -> Callable[[int], Awaitable[Any]]:
    """One call of the bare loop: ``return 1`` (registered once), on the default pool."""
    if b.bare_script is None:
        b.bare_script = b.client().register_script("return 1")
    script, key = b.bare_script, f"{{{b.prefix('bare')}}}:k"
    return lambda i: script(keys=[key])


async def bare_loop(b: Bench, n: int) -> float:
    """The bare loop (sequential); keeps the best rate in b.bare."""
    call = bare_call(b)
    await timed(200, call)
    rate = await timed(n, call)
    b.bare = max(b.bare, rate)
    return rate


async def interleaved(
    steps: dict[str, Callable[[int], Awaitable[Any]]], n: int, block: int, admin: Any
) -> dict[str, tuple[float, float]]:
    """Runs each system's ``n`` sequential calls in blocks of ``block``, one block of each
    system after another (the first of each turn rotating), so that a burst of the machine's
    noise falls on all of them alike. Returns each system's calls/s (its calls over the sum of
    its blocks' times) and the server's own µs per call (``INFO commandstats`` around each
    block, outside the timing)."""
    elapsed = dict.fromkeys(steps, 0.0)
    server = dict.fromkeys(steps, 0.0)
    names = list(steps)
    mark = await server_usec(admin)  # one reading between turns: each turn's end, the next's start
    for turn, start in enumerate(range(0, n, block)):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            step, began = steps[name], time.perf_counter()
            for i in range(start, min(start + block, n)):
                await step(i)
            elapsed[name] += time.perf_counter() - began
            before, mark = mark, await server_usec(admin)
            server[name] += mark - before
    return {name: (n / elapsed[name], server[name] / n) for name in names}


async def bench_bare(b: Bench) -> None:
    for _ in range(b.args.rounds):
        await bare_loop(b, b.args.emits)


async def bench_enqueue(b: Bench) -> list[Row]:
    n = b.args.enqueue
    q = Queue(b.genq_client(), prefix=b.prefix("enqueue"))
    arq = b.arq_pool(f"{b.tag}:arq-enqueue")
    saq = b.saq_queue("enqueue")
    await saq.connect()

    async def arq_enqueue(i: int) -> None:
        job = await arq.enqueue_job("noop", PAYLOAD)
        b.arq_ids.append(job.job_id)

    def saq_enqueue(i: int) -> Any:
        return saq.enqueue("noop", **PAYLOAD)

    size = b.args.batch
    batches = max(1, 10 * n // size)  # 10x the single-enqueue jobs: a batch is that much cheaper

    def enqueue_batch(i: int) -> Awaitable[Any]:
        return q.enqueue_many([EnqueueItem(PAYLOAD) for _ in range(size)])

    # genq's own script with its arguments made before the clock starts, sent the way genq
    # sends it (its script call on its client): what is left when genq's Python costs nothing
    # (the server's script time and the wire's).
    script_client = b.genq_client()  # the same client kind (hiredis packing) as genq's
    enqueue_script = q.scripts.enqueue

    def prepared() -> list[Call]:
        return [enqueue_call(q, EnqueueItem(PAYLOAD)) for _ in range(n)]

    # The least any durable enqueue does: one script that writes a record (the payload) and one
    # list entry, sent as genq's premade script is (genq's script call on genq's client, its
    # keys and arguments made before the clock starts). The gap from it to genq's premade
    # script is what genq's own steps cost the server and the wire.
    least_script = Script(script_client, LEAST)
    least_prefix = b.prefix("least")
    encoded = q.codec.encode(PAYLOAD)

    def least_calls() -> list[Call]:
        ids = [os.urandom(16).hex() for _ in range(n)]
        return [
            ([f"{{{least_prefix}}}:job:{i}", f"{{{least_prefix}}}:list"], [encoded, i]) for i in ids
        ]

    def least(calls: list[Call]) -> Callable[[int], Awaitable[Any]]:
        return lambda i: least_script(*calls[i])

    await q.enqueue(PAYLOAD)  # loads the script
    bare = bare_call(b)
    warm_up = prepared()[:100]
    await timed(100, lambda i: q.enqueue(PAYLOAD))
    await timed(100, saq_enqueue)
    await timed(100, arq_enqueue)
    await timed(200, bare)
    await timed(100, lambda i: enqueue_script(*warm_up[i], client=script_client))
    await timed(100, least(least_calls()))
    await timed(5, enqueue_batch)
    best = dict.fromkeys(("genq", "saq", "arq", "bare", "script", "least"), 0.0)  # calls/s
    server = dict.fromkeys(best, float("inf"))  # the server's µs per call, least of rounds
    many = 0.0
    admin = b.client()
    paired: list[float] = []  # genq's rate over the bare loop's in the same round

    for r in range(b.args.rounds):  # best of each; within a round, interleaved in blocks
        calls = prepared()
        rates = await interleaved(
            {
                "genq": lambda i: q.enqueue(PAYLOAD),
                "saq": saq_enqueue,
                "arq": arq_enqueue,
                "bare": bare,
                "script": lambda i, calls=calls: enqueue_script(*calls[i], client=script_client),
                "least": least(least_calls()),
            },
            n,
            b.args.block,
            admin,
        )
        for name, (rate, usec) in rates.items():
            best[name] = max(best[name], rate)
            server[name] = min(server[name], usec)
        paired.append(rates["genq"][0] / rates["bare"][0])
        if b.args.profile is not None and r == 0:
            with b.profiled("enqueue"):  # a pass of genq's alone, not timed
                await timed(n, lambda i: q.enqueue(PAYLOAD))
        with b.profiled("enqueue_many", first=r == 0):
            many = max(many, size * await timed(batches, enqueue_batch))
    b.bare = max(b.bare, best["bare"])
    genq, saq_rate, arq_rate, script = best["genq"], best["saq"], best["arq"], best["script"]
    # The bare loop's turns in the same rounds, as SAQ's and arq's: the machine's noise fell on
    # them as on genq's. The standalone loop (the last row) ran at another time.
    bare_rate = best["bare"]
    return [
        Row(
            "enqueue jobs/s (one at a time)",
            "/s",
            genq,
            saq_rate,
            arq_rate,
            bare_rate,
            [
                Target(">= 1.2x saq", genq >= 1.2 * saq_rate),
                Target(">= 85% bare", genq >= 0.85 * bare_rate),
                Target(">= 3x arq", genq >= 3 * arq_rate),
            ],
            note="vs bare, round by round: "
            + ", ".join(f"{r:.0%}" for r in paired)
            + f"; vs the standalone bare loop (last row): {genq / b.bare:.0%}",
        ),
        Row(
            "server µs per enqueue",
            "µs",
            server["genq"],
            server["saq"],
            server["arq"],
            server["bare"],
            note="Redis's own time per call (INFO commandstats): the bare column is `return 1`",
        ),
        Row(
            "bare enqueue.lua (args premade)",
            "/s",
            script,
            bare=bare_rate,
            note=f"genq's enqueue = {genq / script:.0%} of it (the rest: genq's Python)",
        ),
        Row(
            "least enqueue: HSET + RPUSH",
            "/s",
            best["least"],
            bare=bare_rate,
            note=f"genq's premade script = {script / best['least']:.0%} of it "
            "(the rest: genq's own steps)",
        ),
        Row(
            f"enqueue_many jobs/s (x{size})",
            "/s",
            many,
            bare=bare_rate,
            targets=[Target(">= 30,000/s", many >= 30_000)],
        ),
    ]


async def genq_drain(b: Bench, section: str, tenants: int) -> float:
    """Jobs/s draining --drain no-op jobs with one genq worker; ``tenants`` > 0 spreads them."""
    n: int = b.args.drain
    conc: int = b.args.concurrency
    q = Queue(b.genq_client(), prefix=b.prefix(section))
    if tenants:
        names = [f"t{i}" for i in range(tenants)]
        await fill(n, lambda i: q.enqueue(PAYLOAD, tenant=names[i % tenants]))
    else:
        await fill(n, lambda i: q.enqueue(PAYLOAD))
    done = 0
    all_done = asyncio.Event()

    async def noop(job: ActiveJob) -> None:
        nonlocal done
        done += 1
        if done == n:
            all_done.set()

    with b.profiled(section):
        start = time.perf_counter()
        worker = await q.worker(noop, concurrency=conc).start()
        await all_done.wait()
        await worker.stop()  # waits for the last settles
        rate = n / (time.perf_counter() - start)
    stats = await q.stats()
    assert (stats.waiting, stats.active, done) == (0, 0, n), (stats, done)
    return rate


async def saq_drain(b: Bench, section: str) -> float:
    n: int = b.args.drain
    conc: int = b.args.concurrency
    saq = b.saq_queue(section)
    await saq.connect()
    await fill(n, lambda i: saq.enqueue("noop", **PAYLOAD))
    settled = 0
    all_done = asyncio.Event()

    async def noop(ctx: Any, **payload: Any) -> None:
        return None

    async def after(ctx: Any) -> None:  # runs once the job's finish is written
        nonlocal settled
        settled += 1
        if settled == n:
            all_done.set()

    start = time.perf_counter()
    async with saq_worker(saq, [("noop", noop)], concurrency=conc, after_process=after):
        await all_done.wait()
        rate = n / (time.perf_counter() - start)
    assert (await saq.count("queued"), await saq.count("active")) == (0, 0)
    return rate


async def arq_drain(b: Bench) -> float:
    from arq.worker import Worker as ArqWorker
    from arq.worker import func

    n: int = b.args.drain
    conc: int = b.args.concurrency
    pool = b.arq_pool(f"{b.tag}:arq-drain")

    async def arq_enqueue(i: int) -> None:
        job = await pool.enqueue_job("noop", PAYLOAD)
        b.arq_ids.append(job.job_id)

    async def arq_noop(ctx: dict[str, Any], payload: Any) -> None:
        return None

    await fill(n, arq_enqueue)
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
    rate = n / (time.perf_counter() - start)
    assert w.jobs_complete == n, (w.jobs_complete, w.jobs_failed)
    return rate


async def bench_drain(b: Bench) -> list[Row]:
    n, conc, tenants = b.args.drain, b.args.concurrency, b.args.tenants
    genq = fair = saq = 0.0
    for r in range(b.args.drain_rounds):  # alternating, best of each (arq, far behind: once)
        genq = max(genq, await genq_drain(b, f"drain-{r}", 0))
        saq = max(saq, await saq_drain(b, f"drain-{r}"))
        if HAS_TENANTS:
            fair = max(fair, await genq_drain(b, f"drain-fair-{r}", tenants))
    arq = await arq_drain(b)
    rows = [
        Row(
            f"drain {n:,} no-op jobs/s (c={conc})",
            "/s",
            genq,
            saq,
            arq,
            targets=[Target(">= 4x arq", genq >= 4 * arq)],
        )
    ]
    if HAS_TENANTS:
        rows.append(
            Row(
                f"  same, fair share on ({tenants} tenants)",
                "/s",
                fair,
                saq,
                targets=[Target(">= 2x saq", fair >= 2 * saq)],
            )
        )
    return rows


async def bench_latency(b: Bench) -> list[Row]:
    from arq.worker import func

    n, gap, conc = b.args.latency, b.args.latency_gap, b.args.concurrency
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

    q = Queue(b.genq_client(), prefix=b.prefix("latency"))
    async with q.worker(probe, concurrency=conc):
        await asyncio.sleep(0.2)  # idle: blocked on the doorbell
        with b.profiled("latency"):
            genq = await measure(lambda i: q.enqueue({**PAYLOAD, "i": i}), genq_starts)

    saq_starts: dict[int, float] = {}

    async def saq_probe(ctx: Any, **payload: Any) -> None:
        saq_starts[payload["i"]] = time.perf_counter()

    saq = b.saq_queue("latency")
    await saq.connect()
    async with saq_worker(saq, [("probe", saq_probe)], concurrency=conc):
        await asyncio.sleep(0.2)  # idle: every task blocked in BLMOVE
        other = await measure(lambda i: saq.enqueue("probe", **PAYLOAD, i=i), saq_starts)

    arq_starts: dict[int, float] = {}

    async def arq_probe(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
        arq_starts[payload["i"]] = time.perf_counter()

    pool = b.arq_pool(f"{b.tag}:arq-latency")

    async def arq_enqueue(i: int) -> None:
        job = await pool.enqueue_job("probe", {**PAYLOAD, "i": i})
        b.arq_ids.append(job.job_id)

    async with arq_worker(
        pool, [func(arq_probe, name="probe")], max_jobs=conc, poll_delay=b.args.arq_poll_delay
    ):
        await asyncio.sleep(0.2)
        arq = await measure(arq_enqueue, arq_starts)

    # The unit of the targets: one bare round trip made after each of the same gaps, so both
    # processes wake from an idle wait as they do for a job (a back-to-back loop runs hot).
    key = f"{{{b.prefix('bare')}}}:k"
    idle: list[float] = []
    for i in range(n):
        await asyncio.sleep(gaps[i])
        sent = time.perf_counter()
        await b.bare_script(keys=[key])
        idle.append((time.perf_counter() - sent) * 1000)
    rtt, hot = statistics.median(idle), 1000 / b.bare
    g50, g99 = statistics.median(genq), pct(genq, 0.99)
    note = f"RTT = idle bare p50; {{:.0f}} back-to-back RTTs ({hot:.3f} ms)"
    return [
        Row(
            f"latency p50 ms (n={n}, idle worker)",
            "ms",
            g50,
            statistics.median(other),
            statistics.median(arq),
            rtt,
            [
                Target("<= 4 RTT", g50 <= 4 * rtt),
                Target("<= 1/50 arq", g50 * 50 <= statistics.median(arq)),
            ],
            note.format(g50 / hot),
        ),
        Row(
            f"latency p99 ms (n={n}, idle worker)",
            "ms",
            g99,
            pct(other, 0.99),
            pct(arq, 0.99),
            rtt,
            [Target("<= 10 RTT", g99 <= 10 * rtt)],
            note.format(g99 / hot),
        ),
    ]


async def bench_fairness(b: Bench) -> list[Row]:
    """Tenant B's wait for a slot, alone and right behind tenant A's backlog."""
    if not HAS_TENANTS:
        print("fairness: skipped, this genq has no Queue.enqueue(..., tenant=...) yet")
        return []
    a = b.args
    conc, sleep, jobs, gap, backlog = (
        a.fair_concurrency,
        a.fair_sleep,
        a.fair_jobs,
        a.fair_gap,
        a.backlog,
    )

    async def case(section: str, backlog: int) -> tuple[list[float], float]:
        q = Queue(b.genq_client(), prefix=b.prefix(section))
        started: dict[int, float] = {}
        a_left = backlog
        a_done = asyncio.Event()

        async def handler(job: ActiveJob) -> None:
            nonlocal a_left
            if job.payload["t"] == "B":
                started[job.payload["i"]] = time.perf_counter()
            await asyncio.sleep(sleep)
            if job.payload["t"] == "A":
                a_left -= 1
                if a_left == 0:
                    a_done.set()

        sent: dict[int, float] = {}
        async with q.worker(handler, concurrency=conc):
            await asyncio.sleep(0.2)  # idle
            a_start = time.perf_counter()
            for first in range(0, backlog, 500):
                await q.enqueue_many(
                    EnqueueItem({**PAYLOAD, "t": "A", "i": i}, tenant="A")
                    for i in range(first, min(backlog, first + 500))
                )
            for i in range(jobs):
                sent[i] = time.perf_counter()
                await q.enqueue({**PAYLOAD, "t": "B", "i": i}, tenant="B")
                await asyncio.sleep(gap)
            async with asyncio.timeout(30 + 3 * backlog * sleep / conc):
                while len(started) < jobs:
                    await asyncio.sleep(0.005)
                if backlog:
                    await a_done.wait()
            a_drain = time.perf_counter() - a_start
        return [(started[i] - sent[i]) * 1000 for i in range(jobs)], a_drain

    alone, _ = await case("fair-idle", 0)
    behind, a_drain = await case("fair-backlog", backlog)
    floor = backlog * sleep / conc
    where = f"c={conc}, {sleep * 1000:.0f} ms jobs"
    return [
        Row(f"B wait p50 ms, idle queue ({where})", "ms", statistics.median(alone)),
        Row(f"B wait p99 ms, idle queue ({where})", "ms", pct(alone, 0.99)),
        Row(
            f"B wait p50 ms, behind A's {backlog:,}",
            "ms",
            statistics.median(behind),
            note=f"FIFO would be ~{floor * 1000:,.0f} ms",
        ),
        Row(f"B wait p99 ms, behind A's {backlog:,}", "ms", pct(behind, 0.99)),
        Row(
            f"A's {backlog:,} jobs drained in s",
            "s",
            a_drain,
            note=f"floor {floor:.1f} s ({floor / a_drain:.0%} of it)",
        ),
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
        # fetcher to reserve, on the emitters' connection, while they are timed.
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
    key = f"{{{b.prefix('bare-emit')}}}:k"
    rows = []
    # Worker clients get 4 connections: the cancel listener (pub/sub), the presence and the
    # doorbell hold one each (genq.HELD_CONNECTIONS); every other command (reserve,
    # emit, settle) shares the fourth. The bare loop gets one.
    cases = [
        ("emit/s, 1 job (1 conn)", 1, single, True),
        (f"emit/s, {jobs} jobs (1 conn)", jobs, per_job, True),
        (f"emit/s, {jobs} jobs (pool)", jobs, per_job, False),
    ]
    for label, n_jobs, per, one_conn in cases:
        section = f"emit-{n_jobs}-{'one' if one_conn else 'pool'}"
        worker_client = b.one_connection_client(HELD_CONNECTIONS + 1) if one_conn else b.client()
        bare_client = b.one_connection_client(1) if one_conn else b.genq_client()
        await bare_rate(bare_client, n_jobs, 50, key)  # warm up connections
        genq = bare = 0.0
        for r in range(b.args.rounds):
            rate = await emit_rate(b, worker_client, n_jobs, per, f"{section}-{r}", r == 0)
            genq = max(genq, rate)
            bare = max(bare, await bare_rate(bare_client, n_jobs, per, key))
        targets = [Target(">= 50% bare", genq >= 0.5 * bare)] if one_conn else []
        rows.append(Row(label, "/s", genq, bare=bare, targets=targets))
    return rows


async def bench_apart(b: Bench, own_server: bool) -> str:
    """Each system's worker in its own process, plain clients, the default loop (see
    bench/queue_apart.py): drains at each --apart-concurrency and the latency of an idle
    worker, the systems taking turns, best drain and pooled latencies over --apart-rounds.
    Returns the printed table."""
    a = b.args
    systems = [s for s in a.apart_systems.split(",") if s]
    peers = [s for s in systems if s != "genq"]
    concurrencies = [int(c) for c in a.apart_concurrency.split(",")]
    rng = random.Random(a.seed + 1)
    apart = Apart(b.url, b.tag)
    drains = {(s, c): 0.0 for s in systems for c in concurrencies}
    cpu = {(s, c): float("inf") for s in systems for c in concurrencies}
    server = {(s, c): float("inf") for s in systems for c in concurrencies}
    waits: dict[str, list[float]] = {s: [] for s in systems}
    try:
        for r in range(a.apart_rounds):
            turn = systems[r % len(systems) :] + systems[: r % len(systems)]
            for c in concurrencies:
                for system in turn:
                    rate, used, served = await apart.drain(system, a.apart_drain, c, PAYLOAD)
                    drains[system, c] = max(drains[system, c], rate)
                    cpu[system, c] = min(cpu[system, c], used)
                    server[system, c] = min(server[system, c], served)
            gaps = [rng.expovariate(1 / a.latency_gap) for _ in range(a.apart_latency)]
            for system in turn:
                if system == "arq":  # it polls (poll_delay 0.5 s): a few jobs tell that
                    waits[system] += await apart.latency(system, gaps[:20], 8, PAYLOAD)
                else:
                    waits[system] += await apart.latency(system, gaps, 8, PAYLOAD)
    finally:
        await apart.close(own_server)

    head = ["metric", *systems, "best peer", "genq / best", "target", ""]
    lines: list[list[str]] = []
    for c in concurrencies:
        best = max(peers, key=lambda p: drains[p, c]) if peers else None
        cells = [f"drain {a.apart_drain:,} no-op jobs/s (c={c})"]
        cells += [fmt(drains[s, c], "/s") for s in systems]
        if best and "genq" in systems:
            x = drains["genq", c] / drains[best, c]
            cells += [best, f"{x:.2f}x", ">= 2x best peer", "PASS" if x >= 2 else "MISS"]
        lines.append(cells)
    # Steadier than the rates on a shared machine; lower is better. The worker's and the
    # server's CPU per job say which side of a drain's round trips a system spends its time on.
    for label, used in (("worker", cpu), ("server", server)):
        for c in concurrencies:
            least = min(peers, key=lambda p: used[p, c]) if peers else None
            cells = [f"  {label} CPU µs per job (c={c})"]
            cells += [f"{used[s, c]:,.0f}" for s in systems]
            if least and "genq" in systems:
                cells += [least, f"{used['genq', c] / used[least, c]:.2f}x"]
            lines.append(cells)
    for label, q, factor in (("p50", 0.5, 1), ("p99", 0.99, 2)):
        value = {s: pct(waits[s], q) for s in systems if waits[s]}
        best = min(peers, key=lambda p: value[p]) if peers else None
        cells = [f"latency {label} ms (idle worker, c=8, n={len(waits[systems[0]])})"]
        cells += [fmt(value.get(s), "ms") for s in systems]
        if best and "genq" in systems:
            x = value["genq"] / value[best]
            target = "<= best peer" if factor == 1 else f"<= {factor}x best peer"
            cells += [best, f"{x:.2f}x", target, "PASS" if x <= factor else "MISS"]
        lines.append(cells)
    rows = [head, ["-" * len(h) for h in head], *lines]
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(head))]
    text = [
        "  ".join(
            (c.ljust if i == 0 else c.rjust)(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=False))
        )
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in text)


# -- main ---------------------------------------------------------------------------------------


async def bench_patches(b: Bench) -> list[Row]:
    """``Queue.enqueue`` and ``enqueue_many`` with genq's redis-py patches on and off, taking
    turns: the rows say what the patches buy (the public path is what another redis-py gets)."""
    n, size = b.args.enqueue, b.args.batch
    on = Queue(b.genq_client(), prefix=b.prefix("patches-on"))
    _redis_patches.set_patched(False)
    try:
        off = Queue(b.genq_client(), prefix=b.prefix("patches-off"))
    finally:
        _redis_patches.set_patched(True)

    def patched_path(queue: Queue, many: bool, patched: bool) -> Callable[[int], Awaitable[Any]]:
        async def step(i: int) -> None:
            _redis_patches.set_patched(patched)
            try:
                if many:
                    await queue.enqueue_many([EnqueueItem(PAYLOAD) for _ in range(size)])
                else:
                    await queue.enqueue(PAYLOAD)
            finally:
                _redis_patches.set_patched(True)

        return step

    admin = b.client()
    best: dict[str, float] = {}
    for _ in range(b.args.rounds):
        steps = {
            "on": patched_path(on, False, True),
            "off": patched_path(off, False, False),
            "many on": patched_path(on, True, True),
            "many off": patched_path(off, True, False),
        }
        single = await interleaved({k: steps[k] for k in ("on", "off")}, n, b.args.block, admin)
        batches = max(1, n // size)
        many = await interleaved({k: steps[k] for k in ("many on", "many off")}, batches, 1, admin)
        for name, (rate, _) in {**single, **many}.items():
            rate *= size if name.startswith("many") else 1
            best[name] = max(best.get(name, 0.0), rate)
    return [
        Row("enqueue, redis-py patches off", "/s", best["off"], note="redis-py's public path"),
        Row(
            "enqueue, redis-py patches on",
            "/s",
            best["on"],
            note=f"{best['on'] / best['off']:.2f}x the public path",
        ),
        Row(f"enqueue_many jobs/s (x{size}), patches off", "/s", best["many off"]),
        Row(
            f"enqueue_many jobs/s (x{size}), patches on",
            "/s",
            best["many on"],
            note=f"{best['many on'] / best['many off']:.2f}x the public path",
        ),
    ]


async def run(args: argparse.Namespace, url: str, own_server: bool) -> int:
    b = Bench(url, args)
    sections = args.only or ["enqueue", "drain", "latency", "fairness", "emit", "apart"]
    rows: list[Row] = []
    apart = ""
    t0 = time.perf_counter()
    try:
        await bench_bare(b)
        if "enqueue" in sections:
            rows += await bench_enqueue(b)
        if "drain" in sections:
            rows += await bench_drain(b)
        if "latency" in sections:
            rows += await bench_latency(b)
        if "fairness" in sections:
            rows += await bench_fairness(b)
        if "emit" in sections:
            rows += await bench_emit(b)
        if "patches" in sections:
            rows += await bench_patches(b)
        if "apart" in sections:
            apart = await bench_apart(b, own_server)
        rows.append(
            Row("bare EVALSHA loop (return 1)", "/s", b.bare, note="one producer's ceiling")
        )
    finally:
        await b.close(own_server)
    with redis_sync.Redis.from_url(url) as sync_client:
        info = sync_client.info("server")
    server = (
        f"{info.get('server_name', 'redis')} {info.get('valkey_version') or info['redis_version']}"
    )
    import arq.version
    import saq

    loop = type(asyncio.get_running_loop())
    print(
        f"\ngenq queue bench: {server} at {url} ({'embedded' if own_server else 'external'}); "
        f"Python {platform.python_version()}, {loop.__module__}.{loop.__name__}, "
        f"redis-py {redis_sync.__version__}, SAQ {saq.__version__}, arq {arq.version.VERSION}, "
        f"{os.cpu_count()} CPUs; {'quick' if args.quick else 'full'} run, "
        f"{time.perf_counter() - t0:.0f} s"
    )
    print(
        f"SAQ: in-process RedisQueue and Worker(concurrency={args.concurrency}), its defaults "
        f"(JSON, BLMOVE per task, upkeep timers). arq: Worker(max_jobs={args.concurrency}, "
        f"poll_delay={args.arq_poll_delay}, burst for the drain), pickle, keep_result. genq: "
        f"default Queue options, worker concurrency={args.concurrency}. latency: open-loop "
        f"arrivals, mean gap {args.latency_gap * 1000:.0f} ms. enqueue/emit/bare: best of "
        f"{args.rounds}, alternating (enqueue: in turns of {args.block} calls). "
        f"RTT = 1 / bare rate = {1000 / b.bare:.3f} ms\n"
    )
    if args.profile:
        print("cProfile was on for genq's sections: their numbers (and ratios) are depressed\n")
    print(table(rows))
    missed = [f"{r.metric} ({t.text})" for r in rows for t in r.targets if not t.ok]
    if apart:
        import taskiq

        print(
            f"\nWorker apart: each system's worker in a process of its own, the producer here; "
            f"plain clients (redis.asyncio.Redis.from_url for genq and SAQ, arq's and "
            f"taskiq-redis's own pools), the default asyncio loop in both processes; taskiq "
            f"{taskiq.__version__} with taskiq-redis's ListQueueBroker; drains best of "
            f"{args.apart_rounds}, latencies pooled "
            f"over the rounds (arq: 20 jobs a round, it polls every 0.5 s)\n"
        )
        print(apart)
        missed += [
            f"apart: {line.split('  ')[0]}" for line in apart.splitlines() if line.endswith("MISS")
        ]
    print(f"\n{len(missed)} target(s) missed" + (f": {'; '.join(missed)}" if missed else ""))
    return 1 if missed and args.strict else 0


def main() -> int:
    args = parse()
    if args.serve:
        return serve(args.serve)
    random.seed(args.seed)
    logging.getLogger("saq").setLevel(logging.ERROR)  # its shutdown warns about BLMOVE tasks
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if args.uvloop:
        import uvloop

        factory = uvloop.new_event_loop

    def go(url: str, own_server: bool) -> int:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(run(args, url, own_server))

    if args.redis_url:
        return go(args.redis_url, own_server=False)
    with EmbeddedRedis() as server:
        return go(server.url, own_server=True)


if __name__ == "__main__":
    sys.exit(main())

"""Soak: demo generations through real worker processes that keep getting killed.

``--workers`` worker processes (``python -m workers``, demo provider) serve ``--jobs``
generations that this process enqueues at ``--rate`` per second, each followed from its first
event by a viewer (``Queue.watch``). Every ``--kill-every`` seconds (+-50% jitter) one worker,
picked at random, is SIGKILLed and a new one started in its place, until every job has ended.

At the end every job is audited in Redis and against its viewer, and this prints:

- jobs accepted, completed, failed, lost (accepted but missing or unfinished at the end);
- jobs settled more than once (more than one terminal event in the stream);
- viewers that saw duplicated text (what they show != the result's text) or a wrong text;
- provider calls per job (the attempts the record counts: one provider call each);
- spend: the total cost the records report, the share of it spent on discarded attempts (every
  attempt but the one that completed), of which the attempts lost with a killed worker (metered
  from what they streamed, estimated: ``workers.lost_attempts``; the run waits, the workers
  still up, until none is left unmetered), the attempts with no usage (and of them the lost
  attempts still unmetered), and whether the queue's usage counters equal the sum of the
  records (no attempt counted twice, none missed);
- takeover after a kill, p50/p99, for the killed worker's jobs that had streamed output (a
  ``restarted`` marker): from the kill to the next attempt's start. A SIGKILLed worker cannot
  hand anything back; its presence lapses (``--presence``, default 1.2 s) and a surviving worker
  takes its jobs, whatever the lease (default 60 s, as in production). The killer picks any
  worker, one still starting too, so a kill can leave no worker serving: that kill's jobs wait
  for a replacement's start, not for a takeover, and are counted apart (how many, the longest
  wait), with the workers left serving after each kill, the kills of a worker still starting
  and a worker's start (spawn to its "serving" line: LiteLLM's import, mostly).

Targets: 0 lost, 0 settled twice, 0 duplicates, counters equal to the records, takeover p99
within 2 s of the kill where a worker was left serving.

    .venv/bin/python bench/soak.py [--jobs 1000] [--workers 4] [--kill-every 3] [--lease 60]
                                   [--presence 1.5]
                                   [--tokens 30] [--delay-ms 20] [--rate 40] [--timeout 600]

Exit status 1 when a correctness target (lost, double settle, duplicate, wrong text, counters)
is missed.
"""

# ruff: noqa: E402  (the sys.path fix below must run before the imports)
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # bench/queue.py
sys.path.insert(0, str(ROOT))

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from genq import PRESENCE_SECONDS, Event, JobNotFoundError, Queue, visible_text
from genq_cli.embedded_redis import EmbeddedRedis
from genq_contract.money import NANOS_PER_USD
from genq_contract.spend import COUNT_NAMES, Usage
from workers.lifetime import die_with_parent

MODEL = "demo/fast"
# Seconds from a kill to the orphaned job's next attempt, p99, where a worker was left serving.
TAKEOVER_TARGET = 2.0
TERMINAL = ("completed", "failed", "cancelled")


@dataclass
class Kill:
    at_ms: float  # server clock
    held: dict[str, float]  # job id -> lease expiry (ms, server clock) at the kill
    victim_started: bool  # the killed worker was serving (not still importing)
    serving_after: int  # workers left serving: the ones that can take the victim's jobs


@dataclass
class Worker:
    """One ``python -m workers`` child; its log is kept (last lines) and scanned."""

    proc: asyncio.subprocess.Process
    name: str
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=200))
    tracebacks: int = 0
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None
    spawned_at: float = field(default_factory=time.monotonic)
    start_seconds: float | None = None
    """From the spawn to its "serving" log line (LiteLLM's import, mostly)."""

    async def read(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            text = line.decode(errors="replace").rstrip()
            self.lines.append(text)
            if "Traceback" in text:
                self.tracebacks += 1
            if "serving provider demo" in text and not self.ready.is_set():
                self.start_seconds = time.monotonic() - self.spawned_at
                self.ready.set()


class Soak:
    def __init__(self, args: argparse.Namespace, redis_url: str) -> None:
        self.args = args
        self.redis_url = redis_url
        self.namespace = f"soak-{uuid.uuid4().hex[:8]}"
        self.redis = aioredis.Redis.from_url(redis_url, max_connections=4096)
        self.queue = Queue(self.redis, f"{self.namespace}:demo", lease=args.lease)
        self.workers: list[Worker] = []
        self.retired: list[Worker] = []
        self.kills: list[Kill] = []
        self.views: dict[str, list[Event]] = {}
        self.view_errors: Counter[str] = Counter()
        self.accepted: list[str] = []
        self.done = asyncio.Event()
        self.spawned = 0

    # -- processes -------------------------------------------------------------------------------

    async def spawn(self) -> Worker:
        self.spawned += 1
        env = {
            **os.environ,
            "GENQ_REDIS_URL": self.redis_url,
            "GENQ_QUEUE_NAMESPACE": self.namespace,
            "GENQ_MODELS": "demo/*",
            "GENQ_LEASE": str(self.args.lease),
            "GENQ_PRESENCE": str(self.args.presence),
            "GENQ_PROVIDER_CONCURRENCY": f"demo={self.args.concurrency}",
            "GENQ_BACKOFF": "0.1",
            "GENQ_MAX_BACKOFF": "1",
            "GENQ_DRAIN_DEADLINE": "5",
            "GENQ_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "workers",
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=die_with_parent,
        )
        worker = Worker(proc, f"w{self.spawned}")
        worker.reader = asyncio.create_task(worker.read())
        return worker

    async def start_fleet(self) -> None:
        self.workers = [await self.spawn() for _ in range(self.args.workers)]
        async with asyncio.timeout(120):
            await asyncio.gather(*(w.ready.wait() for w in self.workers))

    async def killer(self) -> None:
        rng = random.Random(self.args.seed)
        while not self.done.is_set():
            pause = self.args.kill_every * rng.uniform(0.5, 1.5)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self.done.wait()
            if self.done.is_set():
                return
            victim = rng.choice(self.workers)
            victim.proc.send_signal(signal.SIGKILL)
            seconds, micros = await self.redis.time()
            at_ms = int(seconds) * 1000 + int(micros) / 1000
            await victim.proc.wait()
            leases = await self.redis.zrange(self.queue.keys.leases, 0, -1, withscores=True)
            self.workers.remove(victim)
            serving = sum(w.ready.is_set() for w in self.workers)
            held = {m.decode(): score for m, score in leases}
            self.kills.append(Kill(at_ms, held, victim.ready.is_set(), serving))
            self.retired.append(victim)
            self.workers.append(await self.spawn())

    async def stop_fleet(self) -> None:
        for worker in self.workers:
            if worker.proc.returncode is None:
                worker.proc.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                async with asyncio.timeout(15):
                    await worker.proc.wait()
            except TimeoutError:
                worker.proc.kill()
                await worker.proc.wait()
        for worker in self.workers + self.retired:
            if worker.reader is not None:
                await worker.reader

    # -- producing and viewing -------------------------------------------------------------------

    async def view(self, job_id: str) -> None:
        events = self.views[job_id]
        while True:
            after = events[-1].id if events else None
            try:
                async for event in self.queue.watch(job_id, after=after):
                    events.append(event)
                    if event.terminal:
                        return
                self.view_errors["vanished"] += 1
                return
            except JobNotFoundError:
                self.view_errors["not found"] += 1
                return
            except Exception as exc:  # a blip: resume after the last event, as a page would
                self.view_errors[type(exc).__name__] += 1
                await asyncio.sleep(0.1)

    async def produce(self) -> list[asyncio.Task[None]]:
        viewers = []
        params = {"demo_tokens": self.args.tokens, "demo_delay_ms": self.args.delay_ms}
        interval = 1 / self.args.rate
        started = time.monotonic()
        for i in range(self.args.jobs):
            await asyncio.sleep(max(0.0, started + i * interval - time.monotonic()))
            payload = {"model": MODEL, "prompt": f"soak {i}", "params": params}
            job = await self.queue.enqueue(payload, max_attempts=self.args.max_attempts)
            self.accepted.append(job.id)
            self.views[job.id] = []
            viewers.append(asyncio.create_task(self.view(job.id)))
        return viewers

    # -- the run ---------------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        print(f"starting {self.args.workers} workers (LiteLLM imports take a few seconds)...")
        await self.start_fleet()
        began = time.monotonic()
        killer = asyncio.create_task(self.killer())
        viewers = await self.produce()
        print(f"{len(self.accepted)} jobs enqueued in {time.monotonic() - began:.1f}s")
        try:
            async with asyncio.timeout(self.args.timeout):
                await asyncio.gather(*viewers)
        except TimeoutError:
            print(f"!! not every job ended within {self.args.timeout}s")
        elapsed = time.monotonic() - began
        self.done.set()
        await killer
        unmetered = await self.lost_metered()
        await self.stop_fleet()
        report = await self.audit()
        report["spend"].unmetered = unmetered
        report["elapsed"] = elapsed
        for viewer in viewers:
            viewer.cancel()
        return report

    async def lost_metered(self, within: float = 15.0) -> int:
        """Waits (the fleet still running) until the workers metered every attempt lost with a
        killed worker; returns how many were left unmetered."""
        deadline = time.monotonic() + within
        while (left := len(await self.queue.lost_attempts(1000))) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        return left

    async def audit(self) -> dict[str, Any]:
        k = self.queue.keys
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in self.accepted:
                pipe.hgetall(k.job(job_id))
                pipe.xrange(k.events(job_id))
            replies = await pipe.execute()
        statuses: Counter[str] = Counter()
        lost, doubles, duplicates, wrong, attempts = [], [], [], [], []
        spend = Spend()
        for i, job_id in enumerate(self.accepted):
            record = {a.decode(): b.decode() for a, b in replies[2 * i].items()}
            stream = [f[b"type"].decode() for _, f in replies[2 * i + 1]]
            status = record.get("status", "missing")
            statuses[status] += 1
            if status not in TERMINAL:
                lost.append(job_id)
                continue
            attempts.append(int(record["attempt"]))
            spend.add(record)
            if sum(t in TERMINAL for t in stream) > 1:
                doubles.append(job_id)
            view = self.views[job_id]
            if sum(e.terminal for e in view) != 1 or view[-1].type != status:
                doubles.append(job_id)
            if status != "completed":
                continue
            result = self.queue.result_codec.decode(record["result"])
            if visible_text(view) != result["text"]:
                duplicates.append(job_id)
            words = result["text"].split()
            if len(words) != self.args.tokens or words[:3] != ["Echo:", "soak", str(i)]:
                wrong.append(job_id)
        recovered, unmatched = self.recoveries()
        from_kill = [seconds for seconds, kill in recovered if kill.serving_after]
        no_survivor = [seconds for seconds, kill in recovered if not kill.serving_after]
        counted: Counter[str] = Counter()
        for row in await self.queue.usage_totals():
            counted.update(row.counts)
        spend.counters_match = (
            all(counted[name] == spend.totals[name] for name in COUNT_NAMES)
            and counted["attempts"] == spend.metered
        )
        return {
            "spend": spend,
            "accepted": len(self.accepted),
            "statuses": statuses,
            "lost": lost,
            "doubles": sorted(set(doubles)),
            "duplicates": duplicates,
            "wrong": wrong,
            "attempts": attempts,
            "from_kill": from_kill,
            "no_survivor": no_survivor,
            "unmatched": unmatched,
        }

    def recoveries(self) -> tuple[list[tuple[float, Kill]], int]:
        """For each ``restarted`` a viewer saw: how long the job waited since the kill that
        orphaned it (the last kill before it whose lease snapshot holds the job), and that
        kill."""
        recovered: list[tuple[float, Kill]] = []
        unmatched = 0
        for job_id, events in self.views.items():
            for event in events:
                if event.type != "restarted":
                    continue
                at = int(event.id.split("-")[0])
                kill = next(
                    (c for c in reversed(self.kills) if c.at_ms <= at and job_id in c.held), None
                )
                if kill is None:
                    unmatched += 1
                    continue
                recovered.append(((at - kill.at_ms) / 1000, kill))
        return recovered, unmatched


@dataclass
class Spend:
    """What the records say was spent, and whether the queue's counters agree."""

    totals: Counter[str] = field(default_factory=Counter)
    discarded_nanos: int = 0
    lost: int = 0
    """Attempts lost with a killed worker, metered from what they streamed (estimated)."""
    lost_nanos: int = 0
    unmetered: int = 0
    """Lost attempts the workers had not metered when the run ended."""
    metered: int = 0
    attempts: int = 0
    counters_match: bool = False

    def add(self, record: dict[str, str]) -> None:
        self.totals.update(Usage.from_counts(json.loads(record.get("usage") or "{}")).counts())
        history = json.loads(record.get("history") or "[]")
        self.attempts += int(record["attempt"])
        for entry in history:
            if entry.get("usage") is None:
                continue
            self.metered += 1
            cost = int(entry["usage"].get("cost_nanos", 0))
            if entry["outcome"] != "completed":
                self.discarded_nanos += cost
            if entry["outcome"] == "lease_expired":
                self.lost += 1
                self.lost_nanos += cost

    def rows(self) -> list[tuple[str, Any]]:
        total = self.totals["cost_nanos"]
        share = self.discarded_nanos / total if total else 0.0
        return [
            ("total cost (records)", f"${total / NANOS_PER_USD:.6f}"),
            ("cost of discarded attempts",
             f"${self.discarded_nanos / NANOS_PER_USD:.6f} ({share:.1%} of the total)"),
            ("of which lost with a killed worker (estimated)",
             f"${self.lost_nanos / NANOS_PER_USD:.6f} ({self.lost} attempts)"),
            ("attempts with no usage (lost attempts unmetered)",
             f"{self.attempts - self.metered} ({self.unmetered})"),
            ("usage counters = sum of the records", _met(self.counters_match)),
        ]  # fmt: skip


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def print_report(report: dict[str, Any], soak: Soak, args: argparse.Namespace) -> bool:
    statuses = report["statuses"]
    attempts = report["attempts"]
    histogram = ", ".join(f"{n}: {c}" for n, c in sorted(Counter(attempts).items()))
    tracebacks = sum(w.tracebacks for w in soak.workers + soak.retired)
    lease = args.lease
    serving = [k.serving_after for k in soak.kills]
    no_survivor = report["no_survivor"]
    starts = [w.start_seconds for w in soak.workers + soak.retired if w.start_seconds is not None]
    rows = [
        ("jobs accepted", report["accepted"]),
        ("completed / failed / cancelled", "{} / {} / {}".format(
            statuses["completed"], statuses["failed"], statuses["cancelled"])),
        ("lost (missing or unfinished)", len(report["lost"])),
        ("settled more than once", len(report["doubles"])),
        ("viewers that saw duplicate text", len(report["duplicates"])),
        ("results with a wrong text", len(report["wrong"])),
        ("provider calls per job: mean / max", "{:.3f} / {}".format(
            statistics.fmean(attempts) if attempts else float("nan"),
            max(attempts, default=0))),
        ("provider calls per job: histogram", histogram),
        *report["spend"].rows(),
        ("workers killed / started", f"{len(soak.kills)} / {soak.spawned}"),
        ("jobs restarted after a kill", len(report["from_kill"]) + len(no_survivor)),
        ("takeover from the kill, a worker left serving: p50 / p99 / max",
         "{:.2f}s / {:.2f}s / {:.2f}s (lease {:.1f}s, presence {:.1f}s)".format(
             pct(report["from_kill"], 0.5), pct(report["from_kill"], 0.99),
             max(report["from_kill"], default=float("nan")), lease, args.presence)),
        ("restarts not matched to a kill", report["unmatched"]),
        ("restarts after a kill that left none serving: jobs / longest wait",
         f"{len(no_survivor)} / {max(no_survivor, default=0.0):.2f}s"),
        ("workers serving after a kill: min / median", "{} / {}".format(
             min(serving, default="-"), statistics.median(serving) if serving else "-")),
        ("kills of a worker still starting", sum(not k.victim_started for k in soak.kills)),
        ("worker start, spawn to serving: p50 / max", "{:.1f}s / {:.1f}s".format(
             pct(starts, 0.5), max(starts, default=float("nan")))),
        ("viewer reconnects", dict(soak.view_errors) or 0),
        ("worker tracebacks logged", tracebacks),
        ("wall time", f"{report['elapsed']:.1f}s"),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    print()
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    ok = not (report["lost"] or report["doubles"] or report["duplicates"] or report["wrong"])
    ok = ok and report["spend"].counters_match
    recovered = pct(report["from_kill"], 0.99) <= TAKEOVER_TARGET if report["from_kill"] else True
    print()
    print(
        "  correctness targets (0 lost, 0 double settles, 0 duplicates, counters = records):"
        f" {_met(ok)}"
    )
    print(
        f"  takeover p99 within {TAKEOVER_TARGET:g}s of the kill, a worker left serving:"
        f" {_met(recovered)}"
    )
    for name in ("lost", "doubles", "duplicates", "wrong"):
        if report[name]:
            print(f"  {name}: {report[name][:10]}")
    return ok


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument(
        "--concurrency",
        type=int,
        default=16,
        help="generations per worker (room for a killed worker's jobs: takeover, not queueing)",
    )
    p.add_argument("--kill-every", type=float, default=3.0, help="seconds between kills (+-50%%)")
    p.add_argument("--lease", type=float, default=60.0)
    p.add_argument("--presence", type=float, default=PRESENCE_SECONDS)
    p.add_argument("--tokens", type=int, default=30, help="tokens per generation")
    p.add_argument("--delay-ms", type=int, default=20, help="ms between tokens")
    p.add_argument("--rate", type=float, default=40.0, help="enqueues per second")
    p.add_argument("--max-attempts", type=int, default=10)
    p.add_argument("--timeout", type=float, default=600.0, help="give up after (s)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--redis-url", default=os.environ.get("GENQ_SOAK_REDIS_URL"))
    return p.parse_args(argv)


async def main(args: argparse.Namespace) -> int:
    server = None
    url = args.redis_url
    if url is None:
        server = EmbeddedRedis(maxclients="10000").start()
        url = server.url
    soak = Soak(args, url)
    try:
        report = await soak.run()
        ok = print_report(report, soak, args)
    finally:
        for worker in soak.workers:
            if worker.proc.returncode is None:
                worker.proc.kill()
        await soak.redis.aclose()
        if server is not None:
            server.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))

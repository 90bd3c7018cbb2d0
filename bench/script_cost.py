"""What genq's scripts cost the server, counted in instructions: a figure that does not move
with the machine's load, where a time on a shared 2-core box moves by half.

It starts a Redis-protocol server (the embedded Valkey, or ``--server`` such as
``/usr/bin/redis-server``) under valgrind's callgrind, sends the same call N times, and reads
the instructions the server executed between two dumps (``callgrind_control``), divided by N.
Everything the server does for a call is in it: reading and parsing the command, the script,
the reply.

  return 1              ``EVALSHA`` of ``return 1`` with enqueue.lua's keys and arguments
  helpers of S          every helper script S reaches (genq/_scripts.py), then ``return 1``: what
                        a call that runs S to its end pays for them (each is made where S first
                        needs it, so one that returns early pays less); "every helper" is
                        _lib.lua whole
  enqueue.lua           one enqueue as ``Queue.enqueue`` sends it (the shape for one new job),
                        no idempotency key, default tenant, into a growing queue
  enqueue.lua - X       the same with one of its server calls left out (the script then does
                        less than an enqueue: a measure of that call's share, nothing more)
  admit.lua, per job    one admission of --calls jobs from the intake (8 tenants), divided by
                        them: what each enqueue's job costs the pick that admits it
  a fold of N          fold_usage.lua adding a day's usage journal of N attempts (N: how many
                        a settle folds at once, USAGE_FOLD_AT), each of a tenant and label of
                        its own (a fold's worst case), into a day's new counters and into
                        counters that already hold many fields: the whole call, not per job,
                        to set beside admit.lua's per job times 1,000 (ADMIT_MAX)
  job life, by step     --calls jobs live one whole life, each step sent for all of them
                        before the next (as a worker's batches do): enqueue (as Queue.enqueue
                        sends it), pick (--pick at a time, admitting the intake first), activate,
                        one emit, settle (complete), each step's instructions divided by the
                        jobs; in three shapes: one tenant and nothing metered (a bare job), 8
                        tenants and nothing metered (the generation's row less it is what
                        metering costs), and 8 tenants and a metered attempt (a generation: 3
                        counts, as the workers meter tokens; its settle column includes a
                        reader's fold of what the settles left in the usage journal); and a
                        lone job (--calls, at most 60, one after another into an empty queue
                        at an idle worker), twice: woken by the
                        doorbell and reserved by a pick (where the pick takes the ring's job
                        id it activates the job itself, and the activate column is 0), and
                        handed off (the worker's offer listed before its wait: the enqueue
                        starts the job, the pick column is the offer and the BLPOP)
  per emit              a worker runs jobs that emit --emits chunks each; the server's
                        instructions for the whole run (pick, activate, emits, settle, the
                        worker's presence) divided by the emits

    python bench/script_cost.py                      # embedded Valkey, ~2 min
    python bench/script_cost.py --server /usr/bin/redis-server
"""

# ruff: noqa: E402  (the sys.path fix below must run before the imports)
from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this directory comes first on sys.path and bench/queue.py would shadow the
# standard library's ``queue``, which redis-py imports.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import argparse
import asyncio
import inspect
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis
import redis.asyncio as aioredis

from genq import ActiveJob, EnqueueItem, Queue
from genq._calls import activate_call, fold_usage_call, settle_call
from genq._cluster import Call
from genq._enqueue import enqueue_call
from genq._reserve import HandOff, make_offer
from genq._scripts import helpers, lua_constant, reached, source
from genq._usage import encode_meter
from genq_cli.embedded_redis import free_port, valkey_binary
from workers.lifetime import die_with_parent

PAYLOAD = {"model": "demo/fast", "prompt": "hello world"}

LEFT_OUT = {
    # name: (text in enqueue.lua's path for one new job, what replaces it)
    "existence check": (
        "  if redis.call('HGET', job, 'status') then\n"
        "    return {0, id, math.min(redis.call('LLEN', KEYS[5]), 1)}\n  end\n",
        "",
    ),
    "clock": (
        "local created, priority, tenant = now_digits(),",
        "local created, priority, tenant = '1764600000000',",
    ),
    "sequence": ("rank_of(priority, redis.call('INCR', KEYS[3]))", "rank_of(priority, 5)"),
    "record": (
        "  redis.call('HSET', job, unpack(record(id, id, 'waiting', ARGV[2], ARGV[3], rank, "
        "created, key,\n    ARGV[7], priority, tenant)))\n",
        "",
    ),
    "intake": (
        "  redis.call('RPUSH', KEYS[1], intake_entry(pad_ms(created), tenant, rank, id))\n",
        "",
    ),
    "doorbell": ("  if ring_doorbell(KEYS[2], 1, id) == 1 then\n", "  if false then\n"),
}


class Counted:
    """A server under callgrind; ``instructions()`` returns what it executed since the last."""

    def __init__(self, server: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="genq-script-cost-"))
        self.port = free_port()
        out = self.dir / "callgrind.%p"
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", server]
        # hz 1: the server's timers (10 runs a second by default) run in every window between
        # two dumps, and a dump takes a while under callgrind: they would be counted as calls.
        command += ["--port", str(self.port), "--save", "", "--appendonly", "no", "--hz", "1"]
        # tied to this process: a bench stopped by a signal leaves no server under callgrind
        # running on (it holds most of a core and skews every timing taken after it)
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        self.redis = redis.Redis(port=self.port)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.redis.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"{server} did not start under callgrind") from None
                time.sleep(0.2)
        self.instructions()

    def instructions(self) -> int:
        pid = str(self.process.pid)
        subprocess.run(["callgrind_control", "--dump", pid], capture_output=True, check=True)
        dumps = sorted(self.dir.glob(f"callgrind.{pid}.*"), key=lambda p: int(p.suffix[1:]))
        found = re.search(r"^summary: (\d+)", dumps[-1].read_text(), re.MULTILINE)
        if found is None:
            raise RuntimeError(f"no summary line in {dumps[-1]}")
        return int(found.group(1))

    def close(self) -> None:
        self.process.terminate()
        self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def counted(server: str) -> Iterator[Counted]:
    c = Counted(server)
    try:
        yield c
    finally:
        c.close()


def per_call(c: Counted, script: str, calls: list[Call]) -> float:
    """Instructions per call of ``script`` over ``calls`` (the first 20 warm up, uncounted)."""
    sha = c.redis.script_load(script)
    for keys, args in calls[:20]:
        c.redis.evalsha(sha, len(keys), *keys, *args)
    c.instructions()
    for keys, args in calls[20:]:
        c.redis.evalsha(sha, len(keys), *keys, *args)
    return c.instructions() / (len(calls) - 20)


def worst_fold(c: Counted, queue: Queue, attempts: int, tag: str) -> float:
    """Instructions of one fold_usage.lua call over a journal of ``attempts`` attempts, each of
    a tenant and label of its own (``tag`` tells rounds apart: the counters keep the fields of
    the rounds before)."""
    k, day = queue.keys, "2026-12-07"
    for i in range(attempts):
        label = f"model-{tag}-{i}"
        c.redis.rpush(k.usage_journal(day), f"tenant-{tag}-{i}\0" + METERED.replace(LABEL, label))
    c.redis.sadd(k.usage_journals, day)
    keys, args = fold_usage_call(queue, [day])
    sha = c.redis.script_load(source("fold_usage"))
    c.instructions()
    if c.redis.evalsha(sha, len(keys), *keys, *args) != attempts:
        raise RuntimeError("the fold did not take every attempt")
    return c.instructions()


def per_admitted(c: Counted, queue: Queue, jobs: int) -> float:
    """Instructions per job of one ``admit.lua`` call that admits ``jobs`` (8 tenants; at most
    1,000, what one call admits)."""
    sha = c.redis.script_load(source("enqueue"))
    for n in range(jobs):
        keys, args = enqueue_call(queue, EnqueueItem(PAYLOAD, tenant=f"t{n % 8}"))
        c.redis.evalsha(sha, len(keys), *keys, *args)
    k = queue.keys
    keys = [k.intake, k.ready, *k.books]
    admit = c.redis.script_load(source("admit"))
    c.instructions()
    assert c.redis.evalsha(admit, len(keys), *keys) == [jobs, 0]
    return c.instructions() / jobs


def helpers_of(name: str) -> str:
    """Every helper script ``name`` reaches, made one after another, then ``return 1``: what
    a call that runs the whole script pays for them (one that returns early pays for fewer)."""
    lead, pieces = helpers()
    needed = reached(source(name))
    return "#!lua\n" + lead + "".join(p for n, p in pieces.items() if n in needed) + "\nreturn 1"


def every_helper() -> str:
    lead, pieces = helpers()
    return "#!lua\n" + lead + "".join(pieces.values()) + "\nreturn 1"


def without(script: str, name: str) -> str:
    text, replacement = LEFT_OUT[name]
    if text not in script:
        raise SystemExit(f"enqueue.lua changed: update LEFT_OUT[{name!r}] in {__file__}")
    return script.replace(text, replacement, 1)


LIFE = ("enqueue", "pick", "activate", "emit", "settle")
LABEL = "openai/gpt-4o-mini"
METERED = encode_meter(
    LABEL, {"input_tokens": 12, "output_tokens": 200, "requests": 1},
    estimated=False, counted=True,
)  # fmt: skip


def lone_lives(c: Counted, queue: Queue, jobs: int, offered: bool) -> dict[str, float]:
    """Instructions per job of ``jobs`` lone jobs, one after another, each enqueued into an
    empty queue at an idle worker. ``offered``: the worker waits as genq's does, its offer
    listed (an RPUSH) before its BLPOP, and the enqueue hands the job off to it, started; the
    pick column is then the offer and the BLPOP, and there is no activation. Otherwise (no
    offer: the worker of a genq before hand-offs, or one whose offer was not listed yet) the
    BLPOP takes the doorbell's ring and a pick of one follows, given the id the ring named
    where genq's pick takes it (it activates the job itself), else a pick and then an
    activation. Then one emit and a settle, as in :func:`job_life`."""
    sha = {name: c.redis.script_load(source(name)) for name in LIFE}
    hinted = "hint" in inspect.signature(queue.pick_call).parameters
    cost = dict.fromkeys(LIFE, 0.0)
    k = queue.keys
    queue.offers_seen = offered  # what the last enqueue's reply said: the shape sent
    for _ in range(jobs):
        if offered:
            c.redis.rpush(k.idle, make_offer(queue, "bench-holder", 600.0))
            cost["pick"] += c.instructions()
        keys, args = enqueue_call(queue, EnqueueItem(PAYLOAD))
        c.instructions()
        job_id = c.redis.evalsha(sha["enqueue"], len(keys), *keys, *args)[1].decode()
        cost["enqueue"] += c.instructions()
        _, ring = c.redis.blpop([k.handoffs, k.signal], 1)
        cost["pick"] += c.instructions()
        if offered:
            token = HandOff.parse(ring).token
        else:
            token = f"token-{job_id}"
            if hinted:
                keys, args = queue.pick_call(1, 600.0, "bench-holder", (job_id, token, 600.0))
            else:
                keys, args = queue.pick_call(1, 600.0, "bench-holder")
            reply = c.redis.evalsha(sha["pick"], len(keys), *keys, *args)
            cost["pick"] += c.instructions()
            if not (hinted and reply[4] and reply[4][0] == 0):
                keys, args = activate_call(queue, job_id, token, 600.0)
                assert c.redis.evalsha(sha["activate"], len(keys), *keys, *args)[0] == 0
                cost["activate"] += c.instructions()
        emit = [job_id, token, 1, "chunk", '"hello"', 600000, 10000, ""]
        assert c.redis.evalsha(sha["emit"], 3, k.job(job_id), k.events(job_id), k.leases, *emit)
        cost["emit"] += c.instructions()
        keys, args = settle_call(queue, job_id, token, "", "complete", '"done"')
        assert c.redis.evalsha(sha["settle"], len(keys), *keys, *args)[0] == 0
        cost["settle"] += c.instructions()
    return {step: total / jobs for step, total in cost.items()}


def job_life(
    c: Counted, queue: Queue, jobs: int, pick: int, tenants: int, metered: str
) -> dict[str, float]:
    """Instructions per job of each step of ``jobs`` whole job lives (see the module's doc)."""
    sha = {name: c.redis.script_load(source(name)) for name in LIFE}
    cost: dict[str, float] = {}

    def run(name: str, calls: list[Call]) -> list[object]:
        return [c.redis.evalsha(sha[name], len(k), *k, *a) for k, a in calls]

    def counted_step(name: str, calls: list[Call]) -> list[object]:
        c.instructions()
        replies = run(name, calls)
        cost[name] = c.instructions() / jobs
        failed = [r for r in replies if r[0] != 0]  # type: ignore[index]
        if failed:  # a step that did not happen would make the figures a lie
            raise RuntimeError(f"{name}: {len(failed)} calls refused, e.g. {failed[0]!r}")
        return replies

    names = [f"tenant-{n}" for n in range(tenants)]
    queue.offers_seen = False  # no worker waits: the enqueue's reply said so after the first
    counted_step(
        "enqueue",
        [
            enqueue_call(
                queue, EnqueueItem(PAYLOAD, tenant=names[n % tenants] if tenants > 1 else "")
            )
            for n in range(jobs)
        ],
    )
    claimed: list[str] = []
    c.instructions()
    while len(claimed) < jobs:
        keys, args = queue.pick_call(pick, 600.0, "bench-holder")
        ids, _, _, admitting = c.redis.evalsha(sha["pick"], len(keys), *keys, *args)[:4]
        claimed += [i.decode() for i in ids]
        if not ids and not admitting:
            raise RuntimeError("pick claimed nothing while jobs wait")
    cost["pick"] = c.instructions() / jobs
    tokens = {i: f"token-{i}" for i in claimed}
    counted_step("activate", [activate_call(queue, i, tokens[i], 600.0) for i in claimed])
    k = queue.keys
    counted_step(
        "emit",
        [
            (
                [k.job(i), k.events(i), k.leases],
                [i, tokens[i], 1, "chunk", '"hello"', 600000, 10000, ""],
            )
            for i in claimed
        ],
    )
    counted_step(
        "settle",
        [
            settle_call(queue, i, tokens[i], "", "complete", '"done"', metered=metered)
            for i in claimed
        ],
    )
    if metered:
        # The attempts the settles left in the day's journal (fewer than a fold's worth) are
        # folded as a reader folds them, on the settles' account: all that counting costs.
        c.instructions()
        days = sorted(day.decode() for day in c.redis.smembers(k.usage_journals))
        keys, args = fold_usage_call(queue, days)
        c.redis.evalsha(c.redis.script_load(source("fold_usage")), len(keys), *keys, *args)
        cost["settle"] += c.instructions() / jobs
    return cost


async def per_emit(c: Counted, jobs: int, emits: int) -> float:
    queue = Queue(aioredis.Redis(port=c.port), prefix="bench-emit")

    async def handler(job: ActiveJob) -> str:
        for i in range(emits):
            await job.emit(f"token {i} ")
        return "done"

    # presence 30 s: under callgrind the server runs tens of times slower than usual
    async with queue.worker(handler, concurrency=1, presence=30):
        await queue.wait((await queue.enqueue(PAYLOAD)).id, timeout=600)
        c.instructions()
        for job in [(await queue.enqueue(PAYLOAD)).id for _ in range(jobs)]:
            await queue.wait(job, timeout=600)
        total = c.instructions()
    await queue.redis.aclose()
    return total / (jobs * emits)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--server", default=str(valkey_binary()), help="server binary (embedded Valkey)")
    p.add_argument("--calls", type=int, default=400, help="calls per figure (400)")
    p.add_argument("--jobs", type=int, default=3, help="jobs in the emit figure (3)")
    p.add_argument("--emits", type=int, default=200, help="emits per job (200)")
    p.add_argument("--pick", type=int, default=50, help="jobs per pick in the job life (50)")
    p.add_argument("--only-life", action="store_true", help="only the job life rows")
    args = p.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("needs valgrind (callgrind and callgrind_control) on PATH")

    rows: list[tuple[str, float]] = []
    with counted(args.server) as c:
        info = c.redis.info("server")
        name = "valkey" if "valkey_version" in info else "redis"
        version = info.get("valkey_version") or info["redis_version"]
        queue = Queue(aioredis.Redis(port=c.port), prefix="bench-enqueue")
        queue.offers_seen = False  # no worker waits: after its first, a producer's enqueue
        # sends the offers list alone (the hand-off's 19 keys only while offers are listed)

        def fresh(n: int) -> list[Call]:
            return [enqueue_call(queue, EnqueueItem(PAYLOAD)) for _ in range(n)]

        same = fresh(1) * (args.calls + 20)
        rows.append(("return 1", per_call(c, "return 1", same)))
        if not args.only_life:
            rows.append(("every helper", per_call(c, every_helper(), same)))
            for script in ("enqueue", "pick", "activate", "emit", "settle"):
                rows.append((f"helpers of {script}.lua", per_call(c, helpers_of(script), same)))
            enqueue = source("enqueue")
            rows.append(("enqueue.lua", per_call(c, enqueue, fresh(args.calls + 20))))
            for left_out in LEFT_OUT:
                c.redis.flushall()
                script = without(enqueue, left_out)
                rows.append(
                    (f"enqueue.lua - {left_out}", per_call(c, script, fresh(args.calls + 20)))
                )
            c.redis.flushall()
            rows.append(("admit.lua, per job", per_admitted(c, queue, min(args.calls, 1000))))
            c.redis.flushall()
            n = lua_constant("USAGE_FOLD_AT")
            rows.append((f"a fold of {n}, new counters", worst_fold(c, queue, n, "new")))
            rows.append((f"a fold of {n}, many fields", worst_fold(c, queue, n, "again")))
            c.redis.flushall()
            rows.append(("per emit", asyncio.run(per_emit(c, args.jobs, args.emits))))
        lives = []
        for label, tenants, metered in (
            ("a bare job: 1 tenant, not metered", 1, ""),
            ("8 tenants, not metered", 8, ""),
            ("a generation: 8 tenants, metered", 8, METERED),
        ):
            c.redis.flushall()
            lives.append((label, job_life(c, queue, args.calls, args.pick, tenants, metered)))
        lone = min(args.calls, 60)
        for label, offered in (("doorbell, pick", False), ("handed off", True)):
            c.redis.flushall()
            lives.append((f"a lone job, {label} (x{lone})", lone_lives(c, queue, lone, offered)))

    base = dict(rows)["return 1"]
    print(f"server instructions per call: {name} {version} under callgrind, {args.calls} calls")
    if not args.only_life:
        full = dict(rows)["enqueue.lua"]
        print(f"{'call':34s} {'instructions':>12s} {'vs return 1':>11s} {'its share':>10s}")
        for label, count in rows:
            share = f"{full - count:+,.0f}" if label.startswith("enqueue.lua - ") else ""
            print(f"{label:34s} {count:12,.0f} {count / base:10.1f}x {share:>10s}")
        print("(its share: enqueue.lua minus the row, what the call left out cost)")
    print(f"\nserver instructions per job life, by step ({args.calls} jobs, picks of {args.pick})")
    print(f"{'job':36s} " + " ".join(f"{step:>9s}" for step in LIFE) + f" {'total':>9s}")
    for label, cost in lives:
        cells = " ".join(f"{cost[step]:9,.0f}" for step in LIFE)
        print(f"{label:36s} {cells} {sum(cost.values()):9,.0f}")
    floor = " ".join(f"{base if step != 'pick' else base / args.pick:9,.0f}" for step in LIFE)
    print(f"{'floor: return 1 per call':36s} {floor} {base * 4 + base / args.pick:9,.0f}")


if __name__ == "__main__":
    main()

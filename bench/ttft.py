"""Time to first token: straight to a provider vs through genq, measured side by side.

One provider, the tests' fake OpenAI-compatible server (``tests/fakes/openai_server.py``, in a
process of its own), streams ``--tokens`` tokens ``--delay-ms`` apart to every request (the
first one after ``--delay-ms`` too). A Redis-protocol server, a gateway process and the worker
processes ``genq worker`` runs by default (one per usable core, each ``python -m workers``;
``--workers N`` for another count), whose ``openai`` provider points at the fake, make the genq
side. The official ``openai`` SDK (``AsyncOpenAI``) and genq's own client make ``--calls``
calls of each kind, one at a time, the kinds taking turns call by call so a disturbance hits
each alike:

- ``straight``: ``chat.completions.create(stream=True)`` to the fake server itself.
- ``chat``: the same call to genq's ``/v1/chat/completions`` (model ``openai/gpt-4o-mini``).
- ``native``: ``POST /v1/generations``, then its SSE events (``GET .../events``) with
  ``genq_client.AsyncClient``, until the first ``chunk``.

Time to first token runs from the call to the first piece of text the caller holds. Each call
reads its stream to the end, so the next one starts on an idle stack. It prints p50 / p99 of
each kind and what genq adds: p50 and p99 of genq minus straight (the figures of one run).

``--concurrent K`` keeps K other streams through genq's chat route running meanwhile (from a
process of their own, read as bytes), a loaded worker and gateway. Each of those replies is
``--background-tokens`` tokens long (500: ten seconds at 20 ms), their starts spread over that
time, and the measured calls begin once all of them run: K streams at any moment, about K / 10
starting each second, as in a chat service, rather than K new generations every few hundred
milliseconds.

    .venv/bin/python bench/ttft.py [--calls 300] [--tokens 10] [--delay-ms 20] [--concurrent 0]
        [--background-tokens 500] [--workers N]

Results on the development machine are in ``docs/WORKERS.md``.
"""

# ruff: noqa: E402  (the sys.path fix below must run before the imports)
from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path and ``bench/workers.py`` would
# shadow the ``workers`` package the stack runs.
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

import argparse
import asyncio
import contextlib
import multiprocessing
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from openai import AsyncOpenAI
from redis import asyncio as aioredis

import genq
from bench.workers import fake_openai
from genq_cli.embedded_redis import EmbeddedRedis
from genq_cli.main import usable_cores
from genq_client import AsyncClient
from tests.e2e.browser import DEV_KEY, LOGS, Stack, fake_openai_env

MODEL = "gpt-4o-mini"
GENQ_MODEL = f"openai/{MODEL}"
BACKGROUND_MODEL = "openai/gpt-4o-mini-background"
"""The ``--concurrent`` streams' model: the fake provider streams it ``--background-tokens``
tokens, so they stay running streams, not a flood of new generations."""
WARM_UP = 5  # calls of each kind not measured: the worker's first ones pay LiteLLM's setup
MESSAGES: list[Any] = [{"role": "user", "content": "How long until the first token?"}]

Call = Callable[[], Awaitable[float]]


def chat_call(
    client: AsyncOpenAI, model: str, kind: str, moments: list[Moments], events: Events | None = None
) -> Call:
    """A streamed chat completion; returns its time to first token, having read it all. Each
    call's message carries its kind and number (the fake provider's record of it is found by
    it) and its instants are kept. Through genq (``events``: the Redis holding the queue's
    streams, and the queue's prefix), the first chunk's id names the job: its record's instants
    and the moment its stream first held text are kept too."""

    async def call() -> float:
        messages = [{"role": "user", "content": marker(kind, len(moments))}]
        started = time.monotonic()
        moment = Moments(called=started)
        first: float | None = None
        written: asyncio.Task[float] | None = None
        job_id = ""
        stream = await client.chat.completions.create(model=model, messages=messages, stream=True)
        moment.answered = time.monotonic()
        async for chunk in stream:
            if events is not None and written is None:
                job_id = chunk.id.removeprefix("chatcmpl-")
                written = asyncio.create_task(first_written(events[0], events[1].events(job_id)))
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                moment.received = time.monotonic()
                first = moment.received - started
        if first is None:
            raise RuntimeError(f"{model}: the stream had no text")
        if events is not None and written is not None:
            moment.written = await asyncio.wait_for(written, 5)
            await record_moments(events[0], events[1], job_id, moment)
        moments.append(moment)
        return first

    return call


Events = tuple[Any, genq.Keys]


async def record_moments(redis: Any, keys: genq.Keys, job_id: str, moment: Moments) -> None:
    """The record's created_at and started_at (whole milliseconds), onto the monotonic clock."""
    created, started = await redis.hmget(keys.job(job_id), "created_at", "started_at")
    moment.created = int(created) / 1000 - WALL_TO_MONOTONIC
    moment.started = int(started) / 1000 - WALL_TO_MONOTONIC


def marker(kind: str, number: int) -> str:
    return f"{MESSAGES[0]['content']} ({kind} #{number})"


@dataclass
class Moments:
    """Where one call's time went: ``time.monotonic()`` instants (one clock for every
    process of the machine), the record's two in wall milliseconds turned onto it."""

    called: float
    answered: float = 0.0  # the call's response headers came (a chat call's)
    created: float = 0.0  # the record's created_at: the enqueue script ran
    started: float = 0.0  # the record's started_at: a worker picked and activated it
    provider_called: float = 0.0  # the fake provider received the worker's request
    provider_first: float = 0.0  # the fake provider sent the first content chunk
    written: float = 0.0  # an XREAD of the job's stream, blocked beside it, saw the chunk
    received: float = 0.0  # genq's client held the first ``chunk`` from the SSE route


STEPS = (
    ("enqueue", "called", "created"),
    ("pick", "created", "started"),
    ("provider call start", "started", "provider_called"),
    ("first chunk at provider", "provider_called", "provider_first"),
    ("written to Redis", "provider_first", "written"),
    ("read by tail, sent, parsed", "written", "received"),
)
CHAT_STEPS = (
    ("answered (headers)", "called", "answered"),
    ("enqueue", "called", "created"),
    *STEPS[1:],
)
STRAIGHT_STEPS = (
    ("provider call start", "called", "provider_called"),
    ("first chunk at provider", "provider_called", "provider_first"),
    ("received by the SDK", "provider_first", "received"),
)
WALL_TO_MONOTONIC = time.time() - time.monotonic()


async def first_written(redis: Any, key: str) -> float:
    """The instant the stream at ``key`` first holds a ``chunk`` entry (blocking reads)."""
    cursor = "0-0"
    while True:
        answer = await redis.xread({key: cursor}, block=500)
        for _, entries in answer:
            for entry_id, fields in entries:
                cursor = entry_id
                if fields.get(b"type") == b"chunk":
                    return time.monotonic()


def native_call(client: AsyncClient, redis: Any, queue_prefix: str, moments: list[Moments]) -> Call:
    """``POST /v1/generations`` then its events; time to the first ``chunk``. Each call's
    message carries its number, so the fake provider's record of it can be found."""

    async def call() -> float:
        number = len(moments)
        messages = [{"role": "user", "content": marker("native", number)}]
        started = time.monotonic()
        moment = Moments(called=started)
        first: float | None = None
        created = await client.generate(GENQ_MODEL, messages=messages)
        key = genq.Keys(queue_prefix).events(created.id)
        written = asyncio.create_task(first_written(redis, key))
        async for event in client.stream(created.id):
            if first is None and event.type == "chunk":
                moment.received = time.monotonic()
                first = moment.received - started
        if first is None:
            raise RuntimeError(f"{created.id}: no chunk")
        moment.written = await asyncio.wait_for(written, 5)
        record = await client.get(created.id)
        moment.created = float(record["created_at"]) - WALL_TO_MONOTONIC
        moment.started = float(record["started_at"]) - WALL_TO_MONOTONIC
        moments.append(moment)
        return first

    return call


async def provider_moments(fake_url: str, kinds: dict[str, list[Moments]]) -> None:
    """Fills in each call's two instants at the fake provider, found by its marker."""
    async with httpx.AsyncClient() as http:
        answer = (await http.get(f"{fake_url.removesuffix('/v1')}/_timings")).json()
    by_marker = {r["marker"]: r for r in answer["requests"]}
    for kind, moments in kinds.items():
        for number, moment in enumerate(moments):
            seen = by_marker[marker(kind, number)]
            moment.provider_called = seen["received_at"]
            moment.provider_first = seen["first_sent_at"]


def wait_serving(worker: Any, since: int, timeout: float = 60.0) -> None:
    """Until the worker process logs that it serves its queues (its start done: prices and
    capabilities published, the token counter and LiteLLM's call path warmed), so the first
    call measures a ready worker, not its start. ``since``: the log's size before the start
    (the log file is appended to, run after run)."""
    deadline = time.monotonic() + timeout
    while b"serving provider" not in worker.log_path.read_bytes()[since:]:
        if time.monotonic() > deadline or not worker.alive:
            raise RuntimeError(f"the worker did not start serving:\n{worker.log_tail()}")
        time.sleep(0.05)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def background(base_url: str, streams: int, seconds: float, stop: Any) -> None:
    """``streams`` chat streams through genq (model :data:`BACKGROUND_MODEL`: long replies,
    about ``seconds`` each), one after another each, until ``stop`` is set. Their starts are
    spread over ``seconds``, so about ``streams / seconds`` begin each second, as in a service,
    not all at once and again each time they end together. Read as bytes: the load is genq's to
    carry, not this process's, which shares the machine's cores with it."""

    async def one(http: httpx.AsyncClient, number: int) -> None:
        await asyncio.sleep(seconds * number / streams)
        body = {"model": BACKGROUND_MODEL, "messages": MESSAGES, "stream": True}
        while not stop.is_set():
            with contextlib.suppress(Exception):  # a failed stream only lightens the load
                async with http.stream("POST", "/v1/chat/completions", json=body) as answer:
                    async for _ in answer.aiter_raw():
                        pass

    async def run() -> None:
        limits = httpx.Limits(max_connections=streams)
        headers = {"Authorization": f"Bearer {DEV_KEY}"}
        async with httpx.AsyncClient(
            base_url=base_url, headers=headers, limits=limits, timeout=None
        ) as http:
            await asyncio.gather(*(one(http, number) for number in range(streams)))

    asyncio.run(run())


async def measure(
    args: argparse.Namespace, stack: Stack, fake_url: str, kinds: dict[str, list[Moments]]
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Each kind's measured times to first token, and its very first call's (the stack's
    first after its start: the worker's first generation, a new connection)."""
    straight = AsyncOpenAI(base_url=fake_url, api_key="sk-bench-ttft", max_retries=0)
    genq_chat = AsyncOpenAI(base_url=f"{stack.base_url}/v1", api_key=DEV_KEY, max_retries=0)
    redis = aioredis.Redis.from_url(stack.redis_url)
    async with AsyncClient(stack.base_url, DEV_KEY) as native, redis:
        keys = genq.Keys(stack.queue_prefix("openai"))
        calls = {
            "straight": chat_call(straight, MODEL, "straight", kinds["straight"]),
            "chat": chat_call(genq_chat, GENQ_MODEL, "chat", kinds["chat"], (redis, keys)),
            "native": native_call(native, redis, stack.queue_prefix("openai"), kinds["native"]),
        }
        first = {kind: await call() for kind, call in calls.items()}
        for _ in range(WARM_UP - 1):
            for call in calls.values():
                await call()
        times: dict[str, list[float]] = {kind: [] for kind in calls}
        for _ in range(args.calls):  # interleaved, call by call
            for kind, call in calls.items():
                times[kind].append(await call())
    await provider_moments(fake_url, kinds)
    for moments in kinds.values():
        del moments[:WARM_UP]
    return times, first


def report_breakdown(kinds: dict[str, list[Moments]]) -> None:
    """Each step of the chat and native calls, and of the straight ones for comparison: mean
    and p50 of its span. The record's instants are whole milliseconds, so the steps that end or
    start at one are right on average (the mean), not call by call."""
    ms = 1000.0

    def line(name: str, spans: list[float]) -> str:
        mean, p50 = statistics.fmean(spans) * ms, statistics.median(spans) * ms
        return f"  {name:27} mean {mean:6.2f} ms   p50 {p50:6.2f} ms"

    for kind, steps in (("chat", CHAT_STEPS), ("native", STEPS), ("straight", STRAIGHT_STEPS)):
        moments = kinds[kind]
        print(f"where a {kind} call's time to first token went ({len(moments)} calls):")
        for name, start, end in steps:
            print(line(name, [getattr(m, end) - getattr(m, start) for m in moments]))


def report(
    times: dict[str, list[float]], first: dict[str, float], args: argparse.Namespace
) -> None:
    load = f", {args.concurrent} other streams meanwhile" if args.concurrent else ""
    print(
        f"time to first token, {args.calls} calls of each kind, interleaved; provider: "
        f"{args.tokens} tokens {args.delay_ms:g} ms apart{load}; "
        f"{args.workers} worker process{'es' if args.workers > 1 else ''}"
    )
    ms = 1000.0
    straight = times["straight"]
    for kind, values in times.items():
        p50, p99 = statistics.median(values), percentile(values, 0.99)
        line = f"  {kind:9} p50 {p50 * ms:7.1f} ms   p99 {p99 * ms:7.1f} ms"
        if kind != "straight":
            added_p50 = p50 - statistics.median(straight)
            added_p99 = p99 - percentile(straight, 0.99)
            line += f"   added: p50 {added_p50 * ms:+.1f} ms, p99 {added_p99 * ms:+.1f} ms"
        print(line)
    firsts = ", ".join(f"{kind} {value * ms:.1f} ms" for kind, value in first.items())
    print(f"  the first call of each kind, after the stack started: {firsts}")


def main(args: argparse.Namespace) -> None:
    with (
        EmbeddedRedis() as server,
        fake_openai(
            args.tokens,
            args.delay_ms,
            {BACKGROUND_MODEL.removeprefix("openai/"): args.background_tokens},
        ) as fake_url,
    ):
        stack = Stack(
            redis_url=server.url,
            log_dir=LOGS / "bench-ttft",
            extra_env={
                **fake_openai_env(fake_url),
                "GENQ_MODELS": f"{GENQ_MODEL},{BACKGROUND_MODEL}",
                "GENQ_COALESCE_WINDOW_MS": f"{args.window_ms:g}",
                # The bench is one tenant: no enqueue rate limit, and a slot for every stream,
                # so a measured call never waits its turn behind the background ones.
                "GENQ_TENANT_RATE": "100000",
                "GENQ_TENANT_BURST": "100000",
                "GENQ_DEFAULT_CONCURRENCY": str(args.concurrent + 8),
                # At the default pool (32), 200 streams starting together got 503s.
                "GENQ_REDIS_MAX_CONNECTIONS": str(args.concurrent + 32),
            },
        )
        load: multiprocessing.process.BaseProcess | None = None
        stop = multiprocessing.get_context("spawn").Event()
        try:
            stack.start_gateway()
            for number in range(1, args.workers + 1):
                log_path = stack.log_dir / f"worker{number}.log"
                since = log_path.stat().st_size if log_path.exists() else 0
                wait_serving(stack.start_worker(), since)
            if args.concurrent:
                seconds = args.background_tokens * args.delay_ms / 1000
                load = multiprocessing.get_context("spawn").Process(
                    target=background,
                    args=(stack.base_url, args.concurrent, seconds, stop),
                    daemon=True,
                )
                load.start()
                time.sleep(seconds + 1)  # measured once all of them are streaming
            kinds: dict[str, list[Moments]] = {"straight": [], "chat": [], "native": []}
            times, first = asyncio.run(measure(args, stack, fake_url, kinds))
        except BaseException:
            print(stack.logs())
            raise
        finally:
            stop.set()
            if load is not None:
                load.join(30)
                if load.is_alive():
                    load.kill()
            stack.stop()
    report(times, first, args)
    report_breakdown(kinds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=300, help="measured calls of each kind")
    parser.add_argument("--tokens", type=int, default=10, help="tokens per reply")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="between tokens, and first")
    parser.add_argument(
        "--concurrent", type=int, default=0, help="other streams through genq meanwhile"
    )
    parser.add_argument(
        "--background-tokens",
        type=int,
        default=500,
        help="tokens per reply of the --concurrent streams (each runs that many times --delay-ms)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=usable_cores(),
        help="worker processes (default: as genq worker, one per usable core)",
    )
    parser.add_argument(
        "--window-ms", type=float, default=10.0, help="the worker's GENQ_COALESCE_WINDOW_MS"
    )
    main(parser.parse_args())

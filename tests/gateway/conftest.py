"""Gateway fixtures: a live uvicorn on a free port, three API keys, a scripted genq worker.

The gateway runs in a thread with its own event loop, as a real server would; the test, its
HTTP clients and the worker share the test's loop. Queues live under the test's random prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
import redis.asyncio as aioredis
import uvicorn

from gateway.access.auth import hash_key
from gateway.app import create_app
from gateway.settings import Settings
from gateway.state import Gateway
from genq import ActiveJob, Queue, RetryJobError, TerminalJobError
from tests.fakes.fixtures import fake
from tests.ports import free_port

SECRET = "test-secret-for-watch-tokens-0123456789"
KEY_ALPHA = "key-alpha-7f3a9c"
KEY_BETA = "key-beta-51d0e2"
KEY_ADMIN = "key-admin-c4e8b1"
MODELS = ["demo/fast", "other/model"]
PROVIDERS = ("demo", "other")
TENANT_KEYS: dict[str, Any] = {
    f"sha256:{hash_key(KEY_ALPHA)}": "alpha",
    f"sha256:{hash_key(KEY_BETA)}": "beta",
    f"sha256:{hash_key(KEY_ADMIN)}": {"tenant": "ops", "admin": True},
}
"""The API keys every gateway test has: two tenants' and an admin's (GENQ_API_KEYS' form)."""


def make_settings(redis_url: str, namespace: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "dev": False,
        "redis_url": redis_url,
        "queue_namespace": namespace,
        "secret": SECRET,
        "models": MODELS,
        "api_keys": TENANT_KEYS,
        "tenant_rate": 1000.0,
        "tenant_burst": 1000,
        "tenant_max_in_flight": 1000,
        "sse_retry_ms": 200,
        "key_cache_seconds": 0,
        "history_interval": 0.1,
        "gc_tuning": False,  # process-wide: not in the test process
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


class LiveGateway:
    """``create_app(settings)`` served by uvicorn on a free port, in a thread of its own."""

    def __init__(self, settings: Settings, port: int | None = None, **config: Any) -> None:
        self.settings = settings
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = {"log_level": "warning", "access_log": False, **config}
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> LiveGateway:
        self.app = create_app(self.settings)
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, timeout_graceful_shutdown=0.5, **self.config
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("gateway did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self.server and self.thread:
            self.server.should_exit = True
            self.thread.join(15)
            assert not self.thread.is_alive(), "gateway did not stop"

    @property
    def gateway(self) -> Gateway:
        """The running app's state (read from the test thread: counters only)."""
        return self.app.state.gateway

    def __enter__(self) -> LiveGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    return make_settings(redis_url, prefix)


@pytest.fixture
def live(settings: Settings) -> Iterator[LiveGateway]:
    with LiveGateway(settings) as gateway:
        yield gateway


@dataclass
class RedisUser:
    """A Redis ACL user with every right, for a gateway to log in as, whose commands a test takes
    away (:meth:`deny`) and gives back while the gateway runs: a real refusal from Redis
    (``NOPERM``) at a chosen moment."""

    redis: aioredis.Redis
    name: str
    url: str

    async def deny(self, command: str) -> None:
        await self.redis.execute_command("ACL", "SETUSER", self.name, f"-{command}")

    async def allow(self, command: str) -> None:
        await self.redis.execute_command("ACL", "SETUSER", self.name, f"+{command}")


@contextlib.asynccontextmanager
async def redis_user(redis: aioredis.Redis, redis_url: str, name: str) -> AsyncIterator[RedisUser]:
    """A :class:`RedisUser` on ``redis_url``'s server, deleted at the end."""
    password = "pw-0123456789"
    await redis.execute_command("ACL", "SETUSER", name, "on", f">{password}", "~*", "&*", "+@all")
    parts = urlsplit(redis_url)
    netloc = f"{name}:{password}@{parts.hostname}:{parts.port}"
    try:
        yield RedisUser(redis, name, urlunsplit(parts._replace(netloc=netloc)))
    finally:
        await redis.execute_command("ACL", "DELUSER", name)


def client_for(live: LiveGateway, key: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(base_url=live.url, headers=headers, timeout=20)


def key_client(name: str, key: str | None) -> Any:
    """A fixture called ``name``: an HTTP client of the live gateway sending ``key`` (None:
    no Authorization header)."""

    @pytest.fixture(name=name)
    async def client(live: LiveGateway) -> AsyncIterator[httpx.AsyncClient]:
        async with client_for(live, key) as http:
            yield http

    return client


alpha = key_client("alpha", KEY_ALPHA)
beta = key_client("beta", KEY_BETA)
admin = key_client("admin", KEY_ADMIN)
anon = key_client("anon", None)


# -- the scripted worker ------------------------------------------------------------------------


PARTS = [
    ("reasoning", "Think"),
    ("reasoning", "ing."),
    ("tool_call", {"index": 0, "id": "call_1", "name": "get_weather"}),
    ("tool_args", {"index": 0, "delta": '{"city": '}),
    ("tool_args", {"index": 0, "delta": '"Paris"}'}),
    (
        "tool_done",
        {"index": 0, "id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
    ),
]
PARTS_RESULT = {
    "finish_reason": "tool_calls",
    "reasoning": "Thinking.",
    "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}],
}


@dataclass
class Script:
    """A handler steered by the request's ``metadata``:

    ``chunks`` (3) pieces ``"t<i> "``, ``delay_ms`` between them, ``gate``: wait for
    ``script.gate(name)`` before chunk ``gate_at`` (0), ``fail``: dead-letter with that message
    (unless the id is in ``healed``), ``retry_once``: attempt 1 emits ``"partial"`` then asks
    for a retry, ``meter``: every attempt meters 2 prompt tokens, a completion token per chunk
    emitted and ``meter`` nano-USD per token, ``parts``: reasoning first and a tool call
    after the text (:data:`PARTS`), in the result too.
    """

    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    started: dict[str, asyncio.Event] = field(default_factory=dict)
    at_gate: dict[str, asyncio.Event] = field(default_factory=dict)
    cancelled: dict[str, asyncio.Event] = field(default_factory=dict)
    healed: set[str] = field(default_factory=set)
    runs: dict[str, int] = field(default_factory=dict)

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    def at_gate_event(self, job_id: str) -> asyncio.Event:
        """Set when the job's handler waits at its gate (every chunk before it is emitted)."""
        return self.at_gate.setdefault(job_id, asyncio.Event())

    def started_event(self, job_id: str) -> asyncio.Event:
        return self.started.setdefault(job_id, asyncio.Event())

    def cancelled_event(self, job_id: str) -> asyncio.Event:
        return self.cancelled.setdefault(job_id, asyncio.Event())

    async def handle(self, job: ActiveJob) -> dict[str, Any]:
        meta = job.payload.get("metadata") or {}
        self.runs[job.id] = self.runs.get(job.id, 0) + 1
        self.started_event(job.id).set()
        emitted = 0
        try:
            if meta.get("retry_once") and job.attempt == 1:
                await job.emit("partial")
                emitted += 1
                raise RetryJobError("first attempt fails", retry_after=0)
            text = ""
            for i in range(int(meta.get("chunks", 3))):
                if meta.get("gate") and i == int(meta.get("gate_at", 0)):
                    self.at_gate_event(job.id).set()
                    await self.gate(str(meta["gate"])).wait()
                piece = f"t{i} "
                await job.emit(piece)
                emitted += 1
                text += piece
                if meta.get("delay_ms"):
                    await asyncio.sleep(int(meta["delay_ms"]) / 1000)
            if meta.get("fail") and job.id not in self.healed:
                raise TerminalJobError(str(meta["fail"]))
            result = {
                "text": text,
                "model": job.payload["model"],
                "finish_reason": "stop",
                "usage": {"completion_tokens": int(meta.get("chunks", 3))},
            }
            if meta.get("parts"):
                for kind, data in PARTS:
                    await job.emit(data, type=kind)
                result.update(PARTS_RESULT)
            return result
        except asyncio.CancelledError:
            self.cancelled_event(job.id).set()
            raise
        finally:
            if meta.get("meter"):
                price = int(meta["meter"])
                counts = {"prompt_tokens": 2, "completion_tokens": emitted}
                job.meter(job.payload["model"], {**counts, "cost_nanos": price * (2 + emitted)})

    def open_all_gates(self) -> None:
        for gate in self.gates.values():
            gate.set()


@pytest.fixture
async def script(redis: aioredis.Redis, prefix: str) -> AsyncIterator[Script]:
    """A worker per provider queue running :class:`Script` in the test's event loop."""
    scripted = Script()
    async with contextlib.AsyncExitStack() as stack:
        for provider in PROVIDERS:
            queue = Queue(redis, prefix=f"{prefix}:{provider}", backoff=0.05, max_backoff=0.1)
            await stack.enter_async_context(queue.worker(scripted.handle, concurrency=16))
        try:
            yield scripted
        finally:
            scripted.open_all_gates()


def queue_for(redis: aioredis.Redis, prefix: str, provider: str = "demo") -> Queue:
    return Queue(redis, prefix=f"{prefix}:{provider}")


# -- SSE on the wire ----------------------------------------------------------------------------


@dataclass
class SSE:
    id: str | None
    event: str
    data: Any


@dataclass
class Stream:
    status: int
    events: list[SSE]
    retry_ms: int | None = None
    ended: bool = False
    """The server closed the stream (rather than the reader stopping early)."""


async def sse_blocks(
    response: httpx.Response,
) -> AsyncIterator[tuple[SSE | None, int | None]]:
    """The response's SSE blocks as they arrive, each parsed by :func:`parse_block`."""
    block: list[str] = []
    async for line in response.aiter_lines():
        if line:
            block.append(line)
            continue
        yield parse_block(block)
        block = []


def parse_block(lines: list[str]) -> tuple[SSE | None, int | None]:
    fields: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.removeprefix(" "))
    retry = int(fields["retry"][0]) if "retry" in fields else None
    if "data" not in fields:
        return None, retry
    event = SSE(
        id=fields.get("id", [None])[-1],
        event=fields.get("event", ["message"])[-1],
        data=json.loads("\n".join(fields["data"])),
    )
    return event, retry


async def read_stream(
    client: httpx.AsyncClient,
    job_id: str,
    *,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    limit: int | None = None,
    timeout: float = 15,
) -> Stream:
    """Reads a generation's SSE until the server closes it (or ``limit`` events)."""
    url = f"/v1/generations/{job_id}/events"
    async with asyncio.timeout(timeout):
        async with client.stream("GET", url, params=params, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                return Stream(response.status_code, [])
            assert response.headers["content-type"].startswith("text/event-stream")
            # The response went through the middleware chain.
            assert response.headers["x-content-type-options"] == "nosniff"
            result = Stream(200, [])
            async for event, retry in sse_blocks(response):
                if retry is not None:
                    result.retry_ms = retry
                if event is not None:
                    result.events.append(event)
                    if limit is not None and len(result.events) >= limit:
                        return result
            result.ended = True
            return result


async def create(
    client: httpx.AsyncClient,
    model: str = "demo/fast",
    prompt: str = "hello",
    key: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    headers = {"Idempotency-Key": key} if key else {}
    response = await client.post(
        "/v1/generations", json={"model": model, "prompt": prompt, **fields}, headers=headers
    )
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


async def wait_until(predicate: Any, timeout: float = 5.0, interval: float = 0.01) -> None:
    """Polls state of the gateway's thread, which has its own event loop: there is no event
    this loop could await."""
    async with asyncio.timeout(timeout):
        # The state lives on another thread's loop: nothing here could be awaited.
        while not predicate():
            await asyncio.sleep(interval)


__all__ = ["fake"]  # the fake OpenAI server of the modules that stream from one

"""A small OpenAI-compatible chat server for tests: streams, fails on demand, records everything.

It speaks just enough of ``POST /v1/chat/completions`` for LiteLLM's ``openai/...`` models (and
any OpenAI SDK client) to stream from it, and it records what a provider would see, so a test can
prove that Stop really closed the upstream connection.

Usage::

    with FakeOpenAI() as server:                       # uvicorn on a free port, in a thread
        server.plan(Reply.error(429, retry_after="3"))  # the next request gets a 429 ...
        server.plan(Reply.stream(["Hello", " world"]))  # ... and the one after streams
        base = server.base_url                          # "http://127.0.0.1:<port>/v1"
        ...
        rec = server.requests[0]                        # a RequestRecord
        rec.wait_disconnected(timeout=2)                # True once the client hung up
        rec.tokens_sent_after(t)                        # content chunks sent after moment t

Replies are taken from the plan in order: first the replies planned for the request's model
(``plan(reply, model="gpt-x")``), then the shared plan, then ``default`` (a stream of
``default_tokens`` tokens, one every ``default_delay`` seconds, or ``tokens_by_model[model]``
tokens for the models it names). Kinds of reply:

- ``Reply.stream(tokens, delay)``: SSE ``chat.completion.chunk`` s, a final chunk with
  ``finish_reason``, a usage chunk when ``stream_options.include_usage`` is set, then ``[DONE]``.
- ``Reply.deltas_of(deltas, delay, finish_reason, reasoning_tokens)``: the same, each chunk's
  ``delta`` given whole (``reasoning_content``, ``tool_calls`` ...); :func:`tool_call_deltas`
  and :func:`reasoning_deltas` build them as OpenAI streams them.
- ``Reply.error(status, message, retry_after=None, headers=None)``: a JSON error body.
- ``Reply.hang(after=n)``: sends ``n`` tokens, then nothing until the client leaves;
  ``Reply.hang(deltas=[...])`` sends those deltas instead: a stream held open half-way
  through a tool call's arguments, for a kill that must land there whatever the timing.
- ``Reply.drop(after=n)``: sends ``n`` tokens, then cuts the connection with no final chunk.

All times are ``time.monotonic()`` values, comparable with the test's own clock. The server
runs its own event loop in a thread, so the records are safe to read from any thread or loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from tests.ports import free_port


@dataclass(frozen=True)
class Reply:
    """What the server does with one request; build it with the class methods."""

    kind: str
    tokens: tuple[str, ...] = ()
    delay: float = 0.0
    status: int = 200
    message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    finish_reason: str = "stop"
    deltas: tuple[dict[str, Any], ...] = ()
    reasoning_tokens: int | None = None

    @classmethod
    def deltas_of(
        cls,
        deltas: list[dict[str, Any]],
        delay: float = 0.0,
        finish_reason: str = "stop",
        reasoning_tokens: int | None = None,
    ) -> Reply:
        """Streams each of ``deltas`` as one chunk's ``delta``."""
        return cls(
            "stream",
            delay=delay,
            finish_reason=finish_reason,
            deltas=tuple(deltas),
            reasoning_tokens=reasoning_tokens,
        )

    @classmethod
    def stream(
        cls, tokens: list[str] | tuple[str, ...], delay: float = 0.0, finish_reason: str = "stop"
    ) -> Reply:
        return cls("stream", tuple(tokens), delay, finish_reason=finish_reason)

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "fake provider error",
        retry_after: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        extra = dict(headers or {})
        if retry_after is not None:
            extra["retry-after"] = retry_after
        return cls("error", status=status, message=message, headers=tuple(extra.items()))

    @classmethod
    def hang(
        cls,
        after: int = 0,
        tokens: list[str] | None = None,
        delay: float = 0.0,
        deltas: list[dict[str, Any]] | None = None,
    ) -> Reply:
        if deltas is not None:
            return cls("hang", delay=delay, deltas=tuple(deltas))
        return cls("hang", tuple((tokens or _words(after))[:after]), delay)

    @classmethod
    def drop(cls, after: int = 2, tokens: list[str] | None = None, delay: float = 0.0) -> Reply:
        return cls("drop", tuple((tokens or _words(after))[:after]), delay)


def _words(n: int) -> list[str]:
    return [f"tok{i} " for i in range(n)]


def tool_call_deltas(
    calls: list[tuple[str, str, str]], piece: int = 3, first_index: int = 0
) -> list[dict[str, Any]]:
    """The deltas of tool calls ``(id, name, arguments)`` as OpenAI streams them: one call
    after the other, by index, the id and name first, then the arguments ``piece`` characters
    at a time."""
    deltas: list[dict[str, Any]] = []
    for n, (call_id, name, arguments) in enumerate(calls):
        index = first_index + n
        start = {"index": index, "id": call_id, "type": "function"}
        deltas.append({"tool_calls": [{**start, "function": {"name": name, "arguments": ""}}]})
        for at in range(0, len(arguments), piece):
            part = {"index": index, "function": {"arguments": arguments[at : at + piece]}}
            deltas.append({"tool_calls": [part]})
    return deltas


def reasoning_deltas(text: str, piece: int = 4) -> list[dict[str, Any]]:
    """``text`` as reasoning deltas (``delta.reasoning_content``), ``piece`` characters each."""
    return [{"reasoning_content": text[at : at + piece]} for at in range(0, len(text), piece)]


@dataclass
class RequestRecord:
    """What the server saw of one request."""

    received_at: float
    body: dict[str, Any]
    headers: dict[str, str]
    reply: Reply
    sent_at: list[float] = field(default_factory=list)  # one entry per content chunk sent
    disconnected_at: float | None = None  # the client went away before the reply ended
    finished_at: float | None = None  # the reply ended (normally, by error, or by drop)
    _disconnected: threading.Event = field(default_factory=threading.Event, repr=False)
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def tokens_sent(self) -> int:
        return len(self.sent_at)

    def tokens_sent_after(self, moment: float) -> int:
        """Content chunks the server sent after ``moment`` (a ``time.monotonic()`` value)."""
        return sum(1 for t in self.sent_at if t > moment)

    def wait_disconnected(self, timeout: float) -> bool:
        return self._disconnected.wait(timeout)

    def wait_finished(self, timeout: float) -> bool:
        return self._finished.wait(timeout)

    def wait_tokens(self, count: int, timeout: float) -> bool:
        """Block until at least ``count`` content chunks were sent (polling; for thread use)."""
        deadline = time.monotonic() + timeout
        while self.tokens_sent < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True


class FakeOpenAI:
    """The server; a context manager that starts it on a free loopback port."""

    def __init__(
        self,
        default_tokens: int = 5,
        default_delay: float = 0.0,
        tokens_by_model: Mapping[str, int] | None = None,
    ) -> None:
        self.default = Reply.stream(_words(default_tokens), default_delay)
        # Requests for these models stream their own number of tokens (``default_delay``
        # apart) when nothing is planned for them: long streams beside short measured ones.
        self.default_by_model = {
            model: Reply.stream(_words(n), default_delay)
            for model, n in (tokens_by_model or {}).items()
        }
        self.requests: list[RequestRecord] = []
        self._plan: deque[Reply] = deque()
        self._plan_by_model: dict[str, deque[Reply]] = {}
        self._lock = threading.Lock()
        self._port = free_port()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._new_request = threading.Condition(self._lock)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    def plan(self, reply: Reply, model: str | None = None, times: int = 1) -> None:
        """Queue ``reply`` for the next ``times`` requests (for ``model`` only, if given)."""
        with self._lock:
            queue = self._plan if model is None else self._plan_by_model.setdefault(model, deque())
            queue.extend([reply] * times)

    def count(self, model: str | None = None) -> int:
        """Requests received so far (for ``model`` only, if given)."""
        with self._lock:
            return sum(1 for r in self.requests if model is None or r.model == model)

    def wait_requests(self, count: int, timeout: float, model: str | None = None) -> bool:
        """Block until ``count`` requests arrived; returns False on timeout."""
        deadline = time.monotonic() + timeout
        with self._new_request:
            while sum(1 for r in self.requests if model is None or r.model == model) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._new_request.wait(left)
            return True

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        config = uvicorn.Config(
            self._app,
            host="127.0.0.1",
            port=self._port,
            log_level="critical",
            lifespan="off",
            interface="asgi3",
        )
        self._server = uvicorn.Server(config)
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._stopping = asyncio.Event()
            ready.set()
            assert self._server is not None
            loop.run_until_complete(self._server.serve())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        ready.wait(5)
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake OpenAI server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        if self._loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                self._loop.call_soon_threadsafe(self._stopping.set)
        self._server.should_exit = True
        self._thread.join(10)
        self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the ASGI app ----------------------------------------------------------------------

    def _timings(self) -> list[dict[str, Any]]:
        """Each request's last message text, arrival and first content chunk, as
        ``time.monotonic()`` values (one clock for every process of the machine): the benches
        read them from another process with ``GET /_timings``."""
        with self._lock:
            records = list(self.requests)
        return [
            {
                "marker": str((r.body.get("messages") or [{}])[-1].get("content", "")),
                "received_at": r.received_at,
                "first_sent_at": r.sent_at[0] if r.sent_at else None,
            }
            for r in records
        ]

    def _next_reply(self, model: str) -> Reply:
        by_model = self._plan_by_model.get(model)
        if by_model:
            return by_model.popleft()
        if self._plan:
            return self._plan.popleft()
        return self.default_by_model.get(model, self.default)

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await _read_body(receive)
        if scope["path"] == "/_timings":
            await _send_json(send, 200, {"requests": self._timings()})
            return
        if scope["path"].rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            await _send_json(send, 404, {"error": {"message": "not found"}})
            return
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            await _send_json(send, 400, {"error": {"message": "invalid JSON"}})
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        with self._new_request:
            reply = self._next_reply(str(request.get("model", "")))
            record = RequestRecord(time.monotonic(), request, headers, reply)
            self.requests.append(record)
            self._new_request.notify_all()
        try:
            if reply.kind == "error":
                await _send_error(send, reply)
            else:
                await self._stream(record, receive, send)
        finally:
            record.finished_at = time.monotonic()
            record._finished.set()

    async def _stream(self, record: RequestRecord, receive: Any, send: Any) -> None:
        reply = record.reply
        gone = asyncio.Event()

        async def listen() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    if record.finished_at is None:
                        record.disconnected_at = time.monotonic()
                        record._disconnected.set()
                    gone.set()
                    return

        listener = asyncio.create_task(listen())
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            model = record.model
            await _send_event(send, _chunk(model, {"role": "assistant", "content": ""}))
            deltas = reply.deltas or tuple({"content": token} for token in reply.tokens)
            for delta in deltas:
                if reply.delay and await _interrupted(gone, reply.delay, self._stopping):
                    return
                if gone.is_set():
                    return
                await _send_event(send, _chunk(model, delta))
                record.sent_at.append(time.monotonic())
            if reply.kind == "hang":
                await _interrupted(gone, 3600, self._stopping)
                return
            if reply.kind == "drop":
                return  # ends the response without its last chunk: uvicorn cuts the connection
            await _send_event(send, _chunk(model, {}, finish_reason=reply.finish_reason))
            options = record.body.get("stream_options") or {}
            if options.get("include_usage"):
                await _send_event(send, _usage_chunk(model, record))
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        finally:
            listener.cancel()


async def _interrupted(gone: asyncio.Event, seconds: float, stopping: asyncio.Event | None) -> bool:
    """Sleep ``seconds``; True if the client left (or the server stops) first."""
    waits = [asyncio.ensure_future(gone.wait())]
    if stopping is not None:
        waits.append(asyncio.ensure_future(stopping.wait()))
    done, pending = await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return bool(done)


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _send_json(
    send: Any, status: int, payload: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()
) -> None:
    raw = [(b"content-type", b"application/json")]
    raw += [(k.encode(), v.encode()) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


async def _send_error(send: Any, reply: Reply) -> None:
    kind = {429: "rate_limit_error", 400: "invalid_request_error", 401: "authentication_error"}
    error = {"message": reply.message, "type": kind.get(reply.status, "server_error"), "code": None}
    await _send_json(send, reply.status, {"error": error}, reply.headers)


async def _send_event(send: Any, payload: dict[str, Any]) -> None:
    data = b"data: " + json.dumps(payload).encode() + b"\n\n"
    await send({"type": "http.response.body", "body": data, "more_body": True})


def _chunk(model: str, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _usage_chunk(model: str, record: RequestRecord) -> dict[str, Any]:
    prompt = sum(len(str(m.get("content", "")).split()) for m in record.body.get("messages", []))
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": record.tokens_sent,
        "total_tokens": prompt + record.tokens_sent,
    }
    if record.reply.reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": record.reply.reasoning_tokens}
    return {**_chunk(model, {}), "choices": [], "usage": usage}


def function_tools(*names: str, described: bool = False) -> list[Any]:
    """Chat-format function tools taking a ``city`` string, one per name (what the tests send
    and then find in the fake's recorded request)."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                **(
                    {"description": f"The {name.removeprefix('get_')} somewhere"}
                    if described
                    else {}
                ),
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
        for name in names
    ]

"""A small client for the gateway's HTTP API: ``AsyncClient`` and its blocking twin ``Client``.

    async with AsyncClient("http://127.0.0.1:8000", api_key) as genq:
        created = await genq.generate("demo/fast", prompt="Say hello")
        async for event in genq.stream(created.id):   # survives disconnects and restarts
            ...
        record = await genq.wait(created.id)          # the terminal record, with its text

``generate`` sends an Idempotency-Key (one is made up when not given) and retries a request
whose answer was lost with the same key, so a retry never bills twice; ``generate_many`` does
the same per item, 100 items per request. ``stream`` reconnects
after a dropped connection or a gateway restart with ``Last-Event-ID``, so no event is missed
or repeated; it ends after the terminal event. ``text`` follows a stream and returns the final
text, clearing what it gathered on a ``restarted`` event; ``generation`` returns everything the
model returned (text, reasoning, tool calls, finish reason, usage) the same way.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
import uuid
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx

from ._common import APIError, Created, OnPortal, created_from, generate_body, raise_for
from ._generation import Generation
from ._operations import AsyncOperations, BlockingOperations

TERMINAL_TYPES = frozenset({"completed", "failed", "cancelled"})
WAIT_SLICE = 30.0
GENERATE_ATTEMPTS = 3
BATCH_SIZE = 100
"""Items per ``POST /v1/generations:batch`` (the gateway's limit)."""


@dataclass(frozen=True)
class Event:
    id: str | None
    type: str
    data: Any
    usage: dict[str, Any] | None = None
    """On a terminal event: the generation's tokens and cost, every attempt summed (the
    ``usage`` event the gateway sends right before it)."""

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL_TYPES


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class _SSEParser:
    """Turns SSE text into events (``data:`` decoded as JSON) and keeps the server's ``retry:``.

    Lines end at ``\r\n``, ``\r`` or ``\n`` only, as the SSE spec says: httpx's
    ``aiter_lines`` also splits on U+2028, U+2029, U+0085 and other characters model output
    may carry, which would cut an event's JSON in two."""

    def __init__(self) -> None:
        self.retry: float | None = None
        self.reset()

    def reset(self) -> None:
        """Forgets a half-received event and line (a new connection starts clean)."""
        self._id: str | None = None
        self._type = "message"
        self._data: list[str] = []
        self._pending = ""
        self._usage: dict[str, Any] | None = None

    def feed_text(self, text: str) -> list[Event]:
        """The events completed by this piece of the stream."""
        text = self._pending + text
        # A final "\r" may be the first half of "\r\n": it waits for the next piece.
        held_cr = "\r" if text.endswith("\r") else ""
        lines = _LINE_BREAK.split(text[: len(text) - len(held_cr)])
        self._pending = lines.pop() + held_cr  # the last piece is an unfinished line
        events = [self.feed(line) for line in lines]
        return [e for e in events if e is not None]

    def finish(self) -> list[Event]:
        """The stream ended: a held final ``\r`` did end its line."""
        pending, self._pending = self._pending, ""
        return self.feed_text(pending[:-1] + "\n") if pending.endswith("\r") else []

    def feed(self, line: str) -> Event | None:
        """One line, without its line break."""
        if line == "":
            if not self._data:
                self._type = "message"
                return None
            raw = "\n".join(self._data)
            kind, data = self._type, json.loads(raw)
            self._type, self._data = "message", []
            if kind == "usage":  # the totals of the terminal event that follows
                self._usage = data if isinstance(data, dict) else None
                return None
            usage, self._usage = self._usage, None
            return Event(self._id, kind, data, usage if kind in TERMINAL_TYPES else None)
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value
        elif name == "id":
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry = int(value) / 1000
        return None


async def _events(response: httpx.Response, parser: _SSEParser) -> AsyncGenerator[Event, None]:
    async for text in response.aiter_text():
        for event in parser.feed_text(text):
            yield event
    for event in parser.finish():
        yield event


def _item_outcome(item: dict[str, Any]) -> Created | APIError:
    """One entry of a batch answer: the generation, or the error a single POST would raise."""
    error = item.get("error")
    if error is not None:
        return APIError(error["status"], error["detail"])
    return created_from(item)


def _stream_headers(cursor: str | None) -> dict[str, str]:
    headers = {"Accept": "text/event-stream"}
    if cursor:
        headers["Last-Event-ID"] = cursor
    return headers


def _fatal(status: int) -> bool:
    """4xx other than 429 will not change on retry."""
    return 400 <= status < 500 and status != 429


def _backoff(parser_retry: float | None, failures: int) -> float:
    base = parser_retry if parser_retry is not None else 1.0
    return min(30.0, base * 2.0 ** min(failures, 5)) * random.uniform(0.5, 1.0)


class AsyncClient(AsyncOperations):
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        max_reconnects: int = 20,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            transport=transport,
        )
        self.max_reconnects = max_reconnects

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def generate(
        self,
        model: str,
        prompt: str | None = None,
        *,
        messages: list[dict[str, str]] | None = None,
        params: dict[str, Any] | None = None,
        priority: int | None = None,
        delay_ms: int | None = None,
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Created:
        body = generate_body(
            model,
            prompt,
            messages,
            params=params,
            priority=priority,
            delay_ms=delay_ms,
            metadata=metadata,
        )
        headers = {"Idempotency-Key": idempotency_key or uuid.uuid4().hex}
        return created_from((await self._post("/v1/generations", body, headers)).json())

    async def generate_many(self, items: list[dict[str, Any]]) -> list[Created | APIError]:
        """Enqueues many generations: ``items`` are bodies of ``POST /v1/generations`` (model,
        prompt or messages, params, priority, delay_ms, metadata) plus ``idempotency_key``.

        Sent 100 per request, in order. Returns one outcome per item: its :class:`Created`,
        or the :class:`APIError` a single ``generate`` would have raised (a failed item does
        not stop the others). Items without a key get a made-up one, so a request retried
        after a lost answer never bills an item twice. A refused request raises APIError.
        """
        keyed = [{**item, "idempotency_key": item.get("idempotency_key") or uuid.uuid4().hex}
                 for item in items]  # fmt: skip
        outcomes: list[Created | APIError] = []
        for start in range(0, len(keyed), BATCH_SIZE):
            body = {"items": keyed[start : start + BATCH_SIZE]}
            response = await self._post("/v1/generations:batch", body, {})
            outcomes += [_item_outcome(item) for item in response.json()["items"]]
        return outcomes

    async def _post(self, path: str, body: Any, headers: dict[str, str]) -> httpx.Response:
        """POSTs an idempotent request, retrying a lost answer or a 503; raises for an error."""
        for attempt in range(GENERATE_ATTEMPTS):
            try:
                response = await self._http.post(path, json=body, headers=headers)
            except httpx.TransportError:
                if attempt == GENERATE_ATTEMPTS - 1:
                    raise
            else:
                if response.status_code != 503 or attempt == GENERATE_ATTEMPTS - 1:
                    raise_for(response)
                    return response
            await asyncio.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def get(self, job_id: str) -> dict[str, Any]:
        response = await self._http.get(f"/v1/generations/{job_id}")
        raise_for(response)
        return dict(response.json())

    async def cancel(self, job_id: str) -> dict[str, Any]:
        response = await self._http.post(f"/v1/generations/{job_id}/cancel")
        raise_for(response)
        return dict(response.json())

    async def wait(self, job_id: str, timeout: float | None = None) -> dict[str, Any]:
        """The terminal record (completed, failed or cancelled); TimeoutError after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = WAIT_SLICE if deadline is None else max(0.0, deadline - time.monotonic())
            slice_ = min(WAIT_SLICE, left)
            response = await self._http.get(
                f"/v1/generations/{job_id}/result",
                params={"timeout": slice_},
                timeout=slice_ + 10,
            )
            raise_for(response)
            if response.status_code == 200:
                return dict(response.json())
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"generation {job_id} not finished after {timeout}s")

    async def stream(self, job_id: str, after: str | None = None) -> AsyncGenerator[Event, None]:
        """The generation's events from ``after`` on, across reconnects; ends after the last."""
        cursor, failures, parser = after, 0, _SSEParser()
        while True:
            try:
                async with self._http.stream(
                    "GET",
                    f"/v1/generations/{job_id}/events",
                    headers=_stream_headers(cursor),
                    timeout=httpx.Timeout(10, read=60),
                ) as response:
                    if response.status_code == 204:
                        return
                    if _fatal(response.status_code):
                        await response.aread()
                        raise_for(response)
                    if response.is_success:
                        parser.reset()
                        async for event in _events(response, parser):
                            cursor, failures = event.id or cursor, 0
                            yield event
                            if event.terminal:
                                return
                        # The server ended the stream before the job (it caps a stream's
                        # duration): resume after its retry delay, not counted as a failure.
                        await asyncio.sleep(_backoff(parser.retry, 0))
                        continue
            except httpx.TransportError:
                pass
            failures += 1
            if failures > self.max_reconnects:
                raise ConnectionError(f"gave up streaming {job_id} after {failures} attempts")
            await asyncio.sleep(_backoff(parser.retry, failures - 1))

    async def text(self, job_id: str) -> str:
        """Follows the stream and returns the final text (APIError-free for failed/cancelled:
        the record says why; the text gathered so far is returned)."""
        gathered: list[str] = []
        async for event in self.stream(job_id):
            gathered = _gather(gathered, event)
            if event.type == "completed" and isinstance(event.data, dict) and "text" in event.data:
                return str(event.data["text"])
        return "".join(gathered)

    async def generation(self, job_id: str) -> tuple[str | None, Generation]:
        """Follows the stream to its end: the terminal event's type (None when the stream was
        already past it) and what the generation returned, folded from its events (text,
        reasoning, tool calls; finish reason and usage once completed)."""
        folded, status = Generation(), None
        async for event in self.stream(job_id):
            folded.add(event.type, event.data)
            if event.terminal:
                status = event.type
        return status, folded


def _gather(gathered: list[str], event: Event) -> list[str]:
    if event.type == "restarted":
        return []
    if event.type == "chunk":
        data = event.data
        piece = data.get("text", data.get("delta", "")) if isinstance(data, dict) else data
        gathered.append(str(piece))
    return gathered


class Client(OnPortal, BlockingOperations):
    """The blocking twin of :class:`AsyncClient` (see :class:`OnPortal`)."""

    _async: AsyncClient

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        max_reconnects: int = 20,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._open(
            lambda: AsyncClient(
                base_url,
                api_key,
                timeout=timeout,
                max_reconnects=max_reconnects,
                transport=transport,
            )
        )

    def generate(self, model: str, prompt: str | None = None, **options: Any) -> Created:
        """See :meth:`AsyncClient.generate`."""
        return self._portal.call(partial(self._async.generate, model, prompt, **options))

    def generate_many(self, items: list[dict[str, Any]]) -> list[Created | APIError]:
        """See :meth:`AsyncClient.generate_many`."""
        return self._portal.call(self._async.generate_many, items)

    def get(self, job_id: str) -> dict[str, Any]:
        return self._portal.call(self._async.get, job_id)

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._portal.call(self._async.cancel, job_id)

    def wait(self, job_id: str, timeout: float | None = None) -> dict[str, Any]:
        return self._portal.call(self._async.wait, job_id, timeout)

    def stream(self, job_id: str, after: str | None = None) -> Iterator[Event]:
        events = self._async.stream(job_id, after)
        try:
            while True:
                try:
                    yield self._portal.call(events.__anext__)
                except StopAsyncIteration:
                    return
        finally:
            self._portal.call(events.aclose)

    def text(self, job_id: str) -> str:
        return self._portal.call(self._async.text, job_id)

    def generation(self, job_id: str) -> tuple[str | None, Generation]:
        """See :meth:`AsyncClient.generation`."""
        return self._portal.call(self._async.generation, job_id)

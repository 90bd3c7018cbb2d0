"""The pull clients under test, driven alike: ``genq_client.AsyncPuller``, the blocking
``genq_client.Puller`` (handlers in threads) and ``examples/genq_puller.mjs`` under Node.

Each runs a handler steered by the job's ``metadata`` (:class:`Steering`; the Node one is
``tests/node/puller_driver.mjs``) and records markers: ``start`` and ``end`` of each handler
run (wall-clock ``t`` in ms, so gaps compare across processes), ``log`` lines of the puller,
and for Node ``stopped`` or ``error``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from genq_client import AsyncPuller, PulledJob, Puller, RetryJob, TerminalJob

from .conftest import wait_until

DRIVER = Path(__file__).resolve().parents[1] / "node" / "puller_driver.mjs"
KINDS = ("async", "sync", "node")
PATIENCE = 20.0


def prompt_of(payload: dict[str, Any]) -> str:
    if isinstance(payload.get("prompt"), str):
        return str(payload["prompt"])
    users = [m for m in payload["messages"] if m["role"] == "user"]
    return str(users[-1]["content"])


class Steering:
    """What a handler does, read from the job's metadata: ``mode`` is ``echo`` (default: emit
    the prompt word by word, progress 1, return nothing), ``return`` (return the prompt, emit
    nothing), ``result`` (return ``metadata.result``, a JSON text), ``parts`` (emit each
    ``[type, data]`` of ``metadata.parts``, a JSON text, then return ``metadata.result`` if
    given, else nothing), ``retry`` (attempt 1 raises
    ``RetryJob("busy", retry_after=metadata.retry_after)``), ``fail`` (an ordinary exception
    with ``metadata.message``), ``terminal`` (``TerminalJob``), ``barrier`` (wait until
    ``metadata.n`` handlers ran at once, then echo), ``hold`` (sleep ``metadata.seconds``, then
    echo), ``until_cancel`` (wait for ``job.cancelled``, then echo) and ``until_abandoned``
    (attempt 1 waits for ``job.abandoned`` and returns)."""

    def __init__(self, mark: Callable[..., None]) -> None:
        self.mark = mark
        self.in_flight = 0
        self.peak = 0
        self.lock = threading.Lock()

    def _begin(self, job: PulledJob) -> dict[str, Any]:
        self.mark("start", id=job.id, attempt=job.attempt, receipt=job.receipt)
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        return dict(job.payload.get("metadata") or {})

    def _end(self, job: PulledJob) -> None:
        with self.lock:
            self.in_flight -= 1
        self.mark(
            "end", id=job.id, attempt=job.attempt, cancelled=job.cancelled, abandoned=job.abandoned
        )

    def _raise_for(self, job: PulledJob, meta: dict[str, Any]) -> None:
        mode = meta.get("mode")
        if mode == "retry" and job.attempt == 1:
            raise RetryJob("busy", retry_after=meta["retry_after"])
        if mode == "fail":
            raise RuntimeError(meta["message"])
        if mode == "terminal":
            raise TerminalJob(meta["message"])

    def _check(self, job: PulledJob, meta: dict[str, Any]) -> Callable[[], bool] | None:
        """What the handler waits for before its output, if anything."""
        mode = meta.get("mode")
        if mode == "barrier":
            return lambda: self.peak >= int(meta["n"])
        if mode == "until_cancel":
            return lambda: job.cancelled
        if mode == "until_abandoned" and job.attempt == 1:
            return lambda: job.abandoned
        return None

    def _output(self, job: PulledJob, meta: dict[str, Any]) -> object:
        mode = meta.get("mode")
        if mode == "until_abandoned" and job.attempt == 1:
            return None
        if mode == "parts":
            for kind, data in json.loads(meta["parts"]):
                job.emit(data, type=kind)
        if mode in ("result", "parts"):
            return json.loads(meta["result"]) if "result" in meta else None
        prompt = prompt_of(job.payload)
        if mode == "return":
            return prompt
        words = prompt.split(" ")
        for i, word in enumerate(words):
            job.emit(f"{word} " if i < len(words) - 1 else word)
        job.progress(1)
        return None

    async def handle_async(self, job: PulledJob) -> object:
        meta = self._begin(job)
        try:
            self._raise_for(job, meta)
            check = self._check(job, meta)
            if check is not None:
                await wait_until(check, PATIENCE)
            if meta.get("mode") == "hold":
                await asyncio.sleep(float(meta["seconds"]))
            return self._output(job, meta)
        finally:
            self._end(job)

    def handle_sync(self, job: PulledJob) -> object:
        meta = self._begin(job)
        try:
            self._raise_for(job, meta)
            check = self._check(job, meta)
            deadline = time.monotonic() + PATIENCE
            while check is not None and not check():
                if time.monotonic() > deadline:
                    raise TimeoutError("the handler's condition did not come")
                time.sleep(0.01)
            if meta.get("mode") == "hold":
                time.sleep(float(meta["seconds"]))
            return self._output(job, meta)
        finally:
            self._end(job)


class _Markers(logging.Handler):
    def __init__(self, markers: list[dict[str, Any]]) -> None:
        super().__init__(logging.DEBUG)
        self.markers = markers

    def emit(self, record: logging.LogRecord) -> None:
        level = {"WARNING": "warning"}.get(record.levelname, record.levelname.lower())
        self.markers.append({"ev": "log", "level": level, "message": record.getMessage()})


class Runner:
    """One pull client working ``queue`` of a gateway, with its markers."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.markers: list[dict[str, Any]] = []
        self.steering = Steering(self._mark)
        self._task: asyncio.Task[Any] | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._puller: AsyncPuller | Puller | None = None
        self._log_handler: _Markers | None = None

    def _mark(self, ev: str, **fields: Any) -> None:
        self.markers.append({"ev": ev, "t": time.time() * 1000, **fields})

    async def start(self, url: str, key: str, queue: str = "demo", **options: Any) -> Runner:
        # A stop waits for the long poll in flight (a job it took must not be dropped): short
        # polls keep each test's stop short.
        options = {"concurrency": 1, "visibility": 30, "wait": 0.5, **options}
        if self.kind == "node":
            await self._start_node(url, key, queue, options)
            return self
        logger = logging.getLogger("genq_client.puller")
        self._log_handler = _Markers(self.markers)
        logger.addHandler(self._log_handler)
        logger.setLevel(logging.DEBUG)
        if self.kind == "async":
            puller = AsyncPuller(url, key)
            self._puller = puller
            self._task = asyncio.create_task(
                puller.consume(queue, self.steering.handle_async, **options)
            )
        else:
            blocking = Puller(url, key)
            self._puller = blocking
            self._task = asyncio.create_task(
                asyncio.to_thread(blocking.consume, queue, self.steering.handle_sync, **options)
            )
        return self

    async def _start_node(self, url: str, key: str, queue: str, options: dict[str, Any]) -> None:
        node = shutil.which("node")
        assert node, "node (20+) is not installed"
        self._proc = await asyncio.create_subprocess_exec(
            node, str(DRIVER), url, key, queue, json.dumps(options),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self._task = asyncio.create_task(self._read_node())

    async def _read_node(self) -> int:
        assert self._proc is not None and self._proc.stdout is not None
        async for line in self._proc.stdout:
            self.markers.append(json.loads(line))
        return await self._proc.wait()

    async def finished(self, timeout: float = 30) -> Any:
        """What the loop ended with (Node: its exit code); raises what it raised."""
        assert self._task is not None
        return await asyncio.wait_for(asyncio.shield(self._task), timeout)

    async def stop(self) -> None:
        """Stops the loop gracefully and checks that it ended cleanly."""
        if self._proc is not None:
            if self._proc.returncode is None:
                self._proc.send_signal(signal.SIGTERM)
            assert await self.finished() == 0, await self._stderr()
            assert self.markers[-1]["ev"] == "stopped", self.markers[-3:]
            return
        assert self._puller is not None
        self._puller.stop()
        await self.finished()

    async def close(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        if self._task is not None and not self._task.done():
            if self._puller is not None:
                self._puller.stop()
            await asyncio.wait({self._task}, timeout=30)
        if isinstance(self._puller, AsyncPuller):
            await self._puller.aclose()
        elif isinstance(self._puller, Puller):
            await asyncio.to_thread(self._puller.close)
        if self._log_handler is not None:
            logging.getLogger("genq_client.puller").removeHandler(self._log_handler)

    async def _stderr(self) -> str:
        assert self._proc is not None and self._proc.stderr is not None
        return (await self._proc.stderr.read()).decode()[-2000:]

    def found(self, ev: str, **match: Any) -> list[dict[str, Any]]:
        return [
            m
            for m in list(self.markers)
            if m["ev"] == ev and all(m.get(k) == v for k, v in match.items())
        ]

    async def marker(self, ev: str, timeout: float = PATIENCE, **match: Any) -> dict[str, Any]:
        """The first marker ``ev`` with these fields, once there is one."""
        try:
            await wait_until(lambda: bool(self.found(ev, **match)), timeout)
        except TimeoutError:
            raise AssertionError(f"no {ev} {match} in {self.markers[-10:]}") from None
        return self.found(ev, **match)[0]

    def logged(self, level: str, text: str) -> list[str]:
        return [m["message"] for m in self.found("log", level=level) if text in m["message"]]

    def most_at_once(self) -> int:
        """The most handlers that ran at the same time, from the order of the markers."""
        running = most = 0
        for m in list(self.markers):
            running += {"start": 1, "end": -1}.get(m["ev"], 0)
            most = max(most, running)
        return most

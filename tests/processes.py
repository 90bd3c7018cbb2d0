"""Worker processes and watchers shared by the process-level tests (single node and cluster).

A test starts ``tests/genq/worker_process.py`` (on a single node or a cluster) as real child
processes, waits for the JSON markers they print (never for a guessed time) and forces failures
with signals.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from genq import Event, Queue

ROOT = Path(__file__).resolve().parents[1]
WAIT = 15.0  # upper bound for any single awaited marker (a lease expiry plus a process start)


class WorkerProcess:
    """One ``worker_process.py`` child: its stdout markers, its signals, its exit."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str, stderr: Path) -> None:
        self.proc = proc
        self.name = name
        self.stderr = stderr
        self.markers: list[dict[str, Any]] = []

    @property
    def pid(self) -> int:
        return self.proc.pid

    def saw(self, ev: str | tuple[str, ...], **match: Any) -> list[dict[str, Any]]:
        """The markers so far of type ``ev`` (or of any type in a tuple) with the given fields."""
        evs = (ev,) if isinstance(ev, str) else ev
        return [m for m in self.markers if m["ev"] in evs and _matches(m, match)]

    async def expect(
        self, ev: str | tuple[str, ...], timeout: float = WAIT, **match: Any
    ) -> dict[str, Any]:
        """Reads markers until one of type ``ev`` (or of any type in a tuple) with the given
        fields arrives."""
        evs = (ev,) if isinstance(ev, str) else ev
        for seen in self.saw(ev, **match):
            return seen
        assert self.proc.stdout is not None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    line = await self.proc.stdout.readline()
                    if not line:
                        raise AssertionError(f"{self.name} exited before {ev} {match}")
                    marker = json.loads(line)
                    self.markers.append(marker)
                    if marker["ev"] in evs and _matches(marker, match):
                        return marker
        except (AssertionError, TimeoutError) as exc:
            raise AssertionError(
                f"{self.name}: no {ev} {match} within {timeout}s; markers {self.markers}; "
                f"stderr: {self.stderr.read_text()[-2000:]}"
            ) from exc

    async def drain(self) -> None:
        """Reads the remaining markers up to the process's exit."""
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            self.markers.append(json.loads(line))

    async def exit_code(self, timeout: float = WAIT) -> int:
        async with asyncio.timeout(timeout):
            await self.drain()
            return await self.proc.wait()

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)


def _matches(marker: dict[str, Any], match: dict[str, Any]) -> bool:
    return all(marker.get(k) == v for k, v in match.items())


Spawn = Callable[..., Awaitable[WorkerProcess]]


async def launch(
    module: str,
    name: str,
    base_args: list[str],
    options: dict[str, Any],
    stderr: Path,
    **popen: Any,
) -> WorkerProcess:
    """Starts ``python -m module --name NAME`` with ``base_args``, then each option as
    ``--option value``; its stderr goes to the file ``stderr``. Does not wait for its ready
    marker. ``popen``: more arguments for the process (``preexec_fn``)."""
    args = [sys.executable, "-m", module, "--name", name, *base_args]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    with stderr.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            **popen,
        )
    return WorkerProcess(proc, name, stderr)


@contextlib.asynccontextmanager
async def worker_processes(
    module: str, base_args: list[str], tmp_path: Path
) -> AsyncIterator[Spawn]:
    """Starts ``python -m module`` workers; whatever is still alive at the end is killed."""
    started: list[WorkerProcess] = []

    async def start(name: str, **options: Any) -> WorkerProcess:
        worker = await launch(module, name, base_args, options, tmp_path / f"{name}.stderr")
        started.append(worker)
        await worker.expect("ready")
        return worker

    try:
        yield start
    finally:
        for worker in started:
            if worker.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.kill()  # also ends a SIGSTOPped process
            await worker.proc.wait()


class Watcher:
    """Follows a job's stream from its first event, as a page opened before the job ran."""

    def __init__(self, queue: Queue, job_id: str) -> None:
        self.events: list[Event] = []
        self.task = asyncio.create_task(self._follow(queue, job_id))

    async def _follow(self, queue: Queue, job_id: str) -> None:
        async for event in queue.watch(job_id):
            self.events.append(event)

    async def finished(self, timeout: float = WAIT) -> list[Event]:
        async with asyncio.timeout(timeout):
            await self.task
        return self.events

    def cancel(self) -> None:
        self.task.cancel()


@contextlib.asynccontextmanager
async def watcher_list() -> AsyncIterator[list[Watcher]]:
    """Watchers a test starts; cancelled at its end."""
    made: list[Watcher] = []
    try:
        yield made
    finally:
        for watcher in made:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher.task


def chunks(name: str, count: int) -> list[str]:
    return [f"{name}:tok{n} " for n in range(1, count + 1)]

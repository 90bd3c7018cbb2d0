"""``python -m workers`` (or another worker command) as a real child process, for the kill,
drain and supervisor tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Importing LiteLLM takes 5-7 s on an idle 2-core machine and has taken 28 s while the suite's
# other processes start too: a bound for a start, not for a test's own work.
START_TIMEOUT = 90.0


class WorkerChild:
    """One worker process; its log lines are collected as they arrive."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._new_line = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def spawn(
        cls, env: dict[str, str], args: Sequence[str] = ("-m", "workers")
    ) -> WorkerChild:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            cwd=ROOT,
            env={**os.environ, "GENQ_LOG_LEVEL": "INFO", **env},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.lines.append(line.decode(errors="replace").rstrip())
            self._new_line.set()

    async def wait_for_log(self, text: str, timeout: float = START_TIMEOUT, nth: int = 1) -> str:
        """The ``nth`` log line containing ``text``; fails if the process exits first."""
        async with asyncio.timeout(timeout):
            while True:
                found = [line for line in self.lines if text in line]
                if len(found) >= nth:
                    return found[nth - 1]
                if self.proc.returncode is not None or self._reader.done():
                    raise AssertionError(f"worker exited before logging {text!r}: {self.log}")
                self._new_line.clear()
                await self._new_line.wait()

    @property
    def log(self) -> str:
        return "\n".join(self.lines[-30:])

    async def wait_exit(self, timeout: float) -> int:
        async with asyncio.timeout(timeout):
            code = await self.proc.wait()
            await self._reader
            return code

    async def close(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


@contextlib.asynccontextmanager
async def worker_children(
    redis_url: str, prefix: str, args: Sequence[str] = ("-m", "workers"), **base_env: str
) -> AsyncIterator[Callable[..., Awaitable[WorkerChild]]]:
    """``start(**env)``: a worker command on the test's queues (``<prefix>-gen``, the demo
    provider) with ``base_env`` and then ``env``; every child is killed at the end."""
    started: list[WorkerChild] = []

    async def start(**env: str) -> WorkerChild:
        child = await WorkerChild.spawn(
            {
                "GENQ_REDIS_URL": redis_url,
                "GENQ_QUEUE_NAMESPACE": f"{prefix}-gen",
                "GENQ_MODELS": "demo/*",
                **base_env,
                **env,
            },
            args=args,
        )
        started.append(child)
        return child

    try:
        yield start
    finally:
        for child in started:
            await child.close()

"""Ops fixtures: a live gateway (in a thread) and the scripted worker, and `genq` as a process.

The CLI runs as a real subprocess (``python -m genq_cli``, what the ``genq`` script runs),
awaited without blocking the test's loop, where the worker runs.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass

from tests.gateway.conftest import live, settings

__all__ = ["live", "settings"]  # the gateway tests' live gateway, for the CLI to talk to

GENQ = [sys.executable, "-m", "genq_cli"]


@dataclass
class Result:
    code: int
    out: str
    err: str


def cli_env(url: str, key: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
    env.update(GENQ_URL=url, COLUMNS="120", **extra)
    if key is not None:
        env["GENQ_API_KEY"] = key
    return env


async def genq(*args: str, env: dict[str, str], timeout: float = 20) -> Result:
    process = await asyncio.create_subprocess_exec(
        *GENQ,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())

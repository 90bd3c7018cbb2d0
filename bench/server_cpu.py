"""The Redis-protocol server's own CPU time, for the benchmarks that charge a run's work to
the server beside the processes they time themselves."""

from __future__ import annotations

from typing import Any


async def server_cpu(client: Any) -> float:
    """The server process's CPU seconds so far (user and system, its ``INFO cpu``)."""
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

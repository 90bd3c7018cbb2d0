"""The uvicorn options that carry the gateway's connection limits (``GENQ_HEADER_TIMEOUT``,
``GENQ_MAX_CONNECTIONS``): ``genq serve`` and ``genq dev`` pass them to uvicorn."""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
import resource
from typing import Any

import uvicorn

from .settings import Settings

log = logging.getLogger("gateway.connections")

TESTED_UVICORN = (0, 55)
"""The uvicorn release (major, minor) whose httptools protocol
:class:`gateway.connection_guard.GuardedHttpToolsProtocol` extends."""

FD_RESERVE = 256
"""File descriptors kept, besides the Redis pool, for everything that is not a client
connection: the listening socket, the shared tails' Redis connections, files, the event loop."""


def uvicorn_version(version: str | None = None) -> tuple[int, int] | None:
    """(major, minor) of the installed uvicorn (or of ``version``)."""
    match = re.match(r"(\d+)\.(\d+)", version or uvicorn.__version__)
    return (int(match[1]), int(match[2])) if match else None


def unguarded_because(version: str | None = None) -> str | None:
    """Why the guarded protocol cannot be used (None: it can). It extends uvicorn's httptools
    protocol as it is in ``TESTED_UVICORN``; another release may have moved what it overrides."""
    if importlib.util.find_spec("httptools") is None:  # what that protocol parses with
        return "httptools is not installed"
    if uvicorn_version(version) != TESTED_UVICORN:
        tested = ".".join(map(str, TESTED_UVICORN))
        return f"uvicorn {version or uvicorn.__version__} is not the tested {tested}"
    return None


def connection_cap(settings: Settings, fd_limit: int | None = None) -> int:
    """``GENQ_MAX_CONNECTIONS``, lowered to leave headroom under the process's soft
    file-descriptor limit: a process out of descriptors cannot even answer ``/healthz``."""
    if fd_limit is None:
        fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if fd_limit == resource.RLIM_INFINITY:
        return settings.max_connections
    room = max(1, fd_limit - FD_RESERVE - settings.redis_max_connections)
    if settings.max_connections <= room:
        return settings.max_connections
    log.warning(
        "GENQ_MAX_CONNECTIONS=%d does not fit under the file-descriptor limit (ulimit -n %d): "
        "capping connections at %d; raise the limit to allow more",
        settings.max_connections,
        fd_limit,
        room,
    )
    return room


def uvicorn_options(settings: Settings, version: str | None = None) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.run`` / ``uvicorn.Config``."""
    cap = connection_cap(settings)
    reason = unguarded_because(version)
    if reason is None:
        from .connection_guard import GuardedHttpToolsProtocol

        protocol = functools.partial(
            GuardedHttpToolsProtocol,
            header_timeout=settings.header_timeout,
            max_connections=cap,
        )
        return {"http": protocol}
    log.warning(
        "%s: GENQ_HEADER_TIMEOUT is not enforced, and GENQ_MAX_CONNECTIONS becomes uvicorn's "
        "limit_concurrency (503 to requests past it, connections still accepted)",
        reason,
    )
    return {"limit_concurrency": cap}

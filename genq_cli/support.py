"""What every HTTP command of ``genq`` shares: where the gateway is, and one-line errors.

The job and queue commands talk HTTP to a gateway (``GENQ_URL``, ``GENQ_API_KEY``), never to
Redis directly: the gateway enforces tenancy, limits and the admin role, and records operator
actions in its audit log, so the CLI can do nothing a key could not do over HTTP.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import httpx
import typer

from genq_client import APIError, AsyncClient

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
EXIT_ERROR = 4
"""Exit code of a command that could not do its job (HTTP error, gateway unreachable)."""


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Prints ONE line on stderr and exits non-zero (no traceback for an operational error)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def gateway_url() -> str:
    return os.environ.get("GENQ_URL", DEFAULT_URL).rstrip("/")


def api_key() -> str:
    key = os.environ.get("GENQ_API_KEY", "")
    if not key:
        fail("GENQ_API_KEY is not set (a key from `genq keys create`)")
    return key


def client() -> AsyncClient:
    return AsyncClient(gateway_url(), api_key(), timeout=30.0, max_reconnects=5)


def describe(exc: BaseException) -> str:
    if isinstance(exc, APIError):
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return f"gateway answered {exc.status}: {detail}"
    if isinstance(exc, httpx.TransportError):
        return f"cannot reach the gateway at {gateway_url()} ({type(exc).__name__}: {exc})"
    if isinstance(exc, TimeoutError):
        return str(exc) or "timed out"
    return f"{type(exc).__name__}: {exc}"


def run(make: Callable[[], Awaitable[T]]) -> T:
    """Runs a command's coroutine; known failures become one line and exit code 4."""
    try:
        return asyncio.run(_call(make))
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None
    except (APIError, httpx.HTTPError, TimeoutError, ConnectionError, OSError) as exc:
        fail(describe(exc))


async def _call(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def one_line(value: Any) -> str:
    return " ".join(str(value).split())


def http() -> httpx.AsyncClient:
    """A plain HTTP client for the admin routes (``/v1/queues``), with the key."""
    return httpx.AsyncClient(
        base_url=gateway_url(), headers={"Authorization": f"Bearer {api_key()}"}, timeout=30.0
    )


def checked(response: httpx.Response) -> Any:
    """The JSON body of a 2xx answer; :class:`APIError` otherwise."""
    if not response.is_success:
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = response.text
        raise APIError(response.status_code, detail)
    return response.json()

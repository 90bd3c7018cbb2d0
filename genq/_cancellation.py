"""Cancellation that survives redis-py.

redis-py 8.1 sometimes completes a command whose task was cancelled while it was in flight and
returns its reply, leaving the task merely "cancelling" (rare, but seen with an in-flight
EVALSHA: docs/KNOWN_LIMITS.md). Loops that must end on cancel call :func:`raise_if_cancelled`
after each Redis call, and whoever stops such a task uses :func:`cancel_and_wait`, never one
``cancel()``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

log = logging.getLogger("genq.cancellation")


def raise_if_cancelled() -> None:
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def cancel_and_wait(task: asyncio.Task[Any], patience: float = 5.0) -> None:
    """Cancels ``task`` and waits until it is done.

    One ``cancel()`` is not enough on Python 3.11: ``asyncio.wait_for`` (which redis-py uses to
    send a command when a socket timeout is set) swallows a cancel that lands just as its inner
    future completes, and the task carries on. So cancel again until it ends."""
    deadline = time.monotonic() + patience
    while not task.done() and time.monotonic() < deadline:
        task.cancel()
        await asyncio.wait({task}, timeout=0.05)
    if not task.done():
        log.error("task %s ignored cancellation for %.1fs", task.get_name(), patience)

"""Work bounded by the client's connection: a request handler that waits (the result route,
OpenAI's non-streaming calls) stops when its client hangs up, instead of holding a wait hold and a
task until its own timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import Request

from genq import cancel_and_wait

T = TypeVar("T")


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(request: Request, work: Awaitable[T]) -> tuple[bool, T | None]:
    """Runs ``work`` until it ends or the client goes: ``(True, result)`` or ``(False, None)``."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(watcher)
        if not task.done():
            await cancel_and_wait(task)
    if task.cancelled():
        return False, None
    return True, task.result()

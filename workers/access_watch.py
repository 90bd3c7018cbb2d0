"""A running generation's access, checked again while it streams: once its API key is revoked
or its tenant disabled, the generation stops (its provider stream closed) and fails with the
reason.

The generation runs in the handler's own task, so it starts in the turn the handler does; the
checks run in a task beside it, made only at the first re-check (most generations end sooner).
A refusal stops the generation with a cancel of the handler's task, repeated until the
generation has left (``genq.cancel_and_wait``'s reason: redis-py can swallow a cancel), and
turned into :class:`genq.TerminalJobError` here. A cancel from anyone else (the worker's, for a
Stop or a lost lease) passes through as it is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from genq import TerminalJobError, cancel_and_wait
from genq_services.access import CachedAccess

log = logging.getLogger(__name__)

RECANCEL = 0.05
"""Seconds between the cancels of a refused generation that has not left yet."""


class AccessWatch:
    """Runs one generation while its key and tenant stay allowed (see the module)."""

    def __init__(
        self, access: CachedAccess, key_id: str | None, tenant: str | None, every: float
    ) -> None:
        self._access = access
        self._key_id = key_id
        self._tenant = tenant
        self._every = every
        self._refusal: str | None = None
        self._running = False
        self._cancels = 0
        self._task: asyncio.Task[Any] | None = None
        self._watcher: asyncio.Task[None] | None = None

    async def run(self, generation: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
        """``generation``'s result, or TerminalJobError once its access was refused."""
        task = self._task = asyncio.current_task()
        assert task is not None
        self._running = True
        timer = asyncio.get_running_loop().call_later(self._every, self._start)
        try:
            try:
                result = await generation
            finally:
                self._running = False  # from here on the watcher cancels nothing
                timer.cancel()
                if self._watcher is not None:
                    await cancel_and_wait(self._watcher)
                for _ in range(self._cancels):
                    task.uncancel()
        except asyncio.CancelledError:
            if self._refusal is None or task.cancelling():  # someone else's cancel too
                raise
            raise self._refused() from None
        except Exception as exc:
            if self._refusal is None:
                raise
            raise self._refused() from exc
        # A refusal that came as the generation ended: it finished before the stop reached it.
        return result

    def _refused(self) -> TerminalJobError:
        return TerminalJobError(f"{self._refusal}; the generation was stopped")

    def _start(self) -> None:
        if self._running:
            self._watcher = asyncio.create_task(self._watch(), name="genq-access-watch")

    async def _watch(self) -> None:
        while self._running and self._refusal is None:
            try:
                self._refusal = await self._access.refusal(self._key_id, self._tenant)
            except Exception as exc:  # Redis away: keep going, the next check may pass
                log.warning("access check failed (%r); the generation goes on", exc)
            if self._refusal is None:
                await asyncio.sleep(self._every)
        while self._running:
            assert self._task is not None
            self._cancels += 1
            self._task.cancel()
            await asyncio.sleep(RECANCEL)

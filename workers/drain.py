"""Graceful shutdown: SIGTERM (or SIGINT) drains the worker, a second one hurries it.

On the first signal every worker stops reserving at once; running jobs get ``deadline``
seconds to finish; the ones still running then are aborted and handed back to their queue
immediately (no wait for the lease to expire, attempt not counted), so another process picks
them up and watchers see ``restarted``. A second signal skips the rest of the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence
from typing import Any

from genq import Worker

log = logging.getLogger("workers.drain")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Drain:
    """Turns stop signals into a bounded, graceful stop of a set of workers."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.requested = asyncio.Event()
        self._hurry = asyncio.Event()
        self._signals = 0

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self.request, sig)

    def uninstall(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            with contextlib.suppress(ValueError, RuntimeError):
                loop.remove_signal_handler(sig)

    def request(self, sig: int | None = None) -> None:
        """A stop was asked for (by a signal, or by code); the second request hurries it."""
        self._signals += 1
        name = signal.Signals(sig).name if sig else "request"
        if self._signals == 1:
            log.info("%s: draining (deadline %.1fs)", name, self.deadline)
            self.requested.set()
        else:
            log.warning("%s again: aborting running jobs now", name)
            self._hurry.set()

    async def stop(self, workers: Sequence[Worker]) -> None:
        """Stops ``workers`` within the deadline (sooner if hurried)."""
        graceful = asyncio.gather(*(w.stop(deadline=self.deadline) for w in workers))
        hurry = asyncio.ensure_future(self._hurry.wait())
        try:
            either: list[asyncio.Future[Any]] = [graceful, hurry]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not graceful.done():
                await asyncio.gather(*(w.stop(deadline=0) for w in workers))
                await graceful
        finally:
            hurry.cancel()

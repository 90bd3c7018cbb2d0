"""One followed job stream, as the shared tail (:mod:`genq._tail`) holds it in memory.

A :class:`Channel` keeps the entries the reader published and not yet taken by every viewer;
viewers wait on it and take what is new since their last look. Each entry is one object,
whatever the number of viewers.
"""

from __future__ import annotations

import asyncio
import time

from ._events import StreamEntry, entry_order

TRIM_AT = 512


class ViewerLagged(Exception):
    """The viewer fell too far behind the live stream; it should reconnect and resume."""


class CursorRefused(Exception):
    """Redis refused the stream's read cursor: its viewers end, the other streams read on."""


class Viewer:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class Channel:
    """The entries of one job stream read by the reader and not yet taken by all viewers.

    Until the reader published an entry, ``cursor`` is only the first viewer's cursor, not a
    position known to exist in the stream (``confirmed`` is False): a viewer that joins with
    an earlier cursor moves it back (:meth:`rewind`) rather than trusting it."""

    def __init__(self, job_id: str, cursor: str) -> None:
        self.job_id = job_id
        self.cursor = cursor
        self.cursor_order = entry_order(cursor)
        self.confirmed = False
        self.entries: list[StreamEntry] = []
        self.base = 0
        self.viewers: set[Viewer] = set()
        self.closed = False
        self.refused = False
        self.last_activity = time.monotonic()
        self.beats = 0
        self._loop = asyncio.get_running_loop()
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def end(self) -> int:
        return self.base + len(self.entries)

    def rewind(self, cursor: str) -> None:
        """Reads from the earlier ``cursor`` on; viewers skip what they already saw."""
        assert not self.confirmed
        self.cursor = cursor
        self.cursor_order = entry_order(cursor)

    def publish(self, entries: list[StreamEntry]) -> None:
        self.entries.extend(entries)
        self.cursor = entries[-1].id
        self.cursor_order = entries[-1].order
        self.confirmed = True
        self.last_activity = time.monotonic()
        if entries[-1].terminal:
            self.closed = True
        self._notify()
        if len(self.entries) > TRIM_AT:
            low = min((v.index for v in self.viewers), default=self.end)
            del self.entries[: low - self.base]
            self.base = low

    def close(self) -> None:
        self.closed = True
        self._notify()

    def refuse(self) -> None:
        """Ends the viewers with :class:`CursorRefused`."""
        self.refused = True
        self.close()

    def wake(self) -> None:
        """Wakes the viewers without news (one of them may have a deadline to check)."""
        self._notify()

    def beat(self) -> None:
        self.beats += 1
        self.last_activity = time.monotonic()
        self._notify()

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():  # a viewer cancelled while waiting
                waiter.set_result(None)

    def take(self, viewer: Viewer, max_lag: int) -> list[StreamEntry]:
        if self.refused:
            raise CursorRefused(self.job_id)
        if self.end - viewer.index > max_lag:
            raise ViewerLagged(self.job_id)
        batch = self.entries[viewer.index - self.base :]
        viewer.index = self.end
        return batch

    def changed(self) -> asyncio.Future[None]:
        """Done at the next publish, beat, wake or close.

        A bare future per waiting viewer: with a hundred viewers per entry, an
        ``asyncio.Event`` (a new one per publish, a ``wait()`` coroutine and a loop check per
        viewer) cost more than the rest of the wake-up. A viewer cancelled while waiting
        leaves a cancelled future here until the next notify (a heartbeat at the latest)."""
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        return waiter

"""One followed job stream, as the shared tail holds it in memory.

An :class:`Entry` is encoded as SSE bytes once, whatever the number of viewers. A
:class:`Channel` keeps the entries the reader published and not yet taken by every viewer;
viewers wait on it and take what is new since their last look.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from genq.status import TERMINAL_EVENTS

Order = tuple[int, int]
TRIM_AT = 512


def order_of(entry_id: str) -> Order:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def as_text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Entry:
    """One stream entry, encoded as an SSE message once and shared by every viewer."""

    __slots__ = ("data", "id", "order", "sse", "terminal", "type")

    def __init__(self, entry_id: str, kind: str, data: str) -> None:
        self.id = entry_id
        self.order = order_of(entry_id)
        self.type = kind
        self.data = data
        self.terminal = kind in TERMINAL_EVENTS
        lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
        self.sse = f"id: {entry_id}\nevent: {kind}\n{lines}\n".encode()

    @classmethod
    def from_redis(cls, entry_id: bytes | str, fields: dict[Any, Any]) -> Entry:
        values = {as_text(k): as_text(v) for k, v in fields.items()}
        return cls(as_text(entry_id), values.get("type", ""), values.get("data", "null"))

    def __repr__(self) -> str:
        return f"Entry({self.id!r}, {self.type!r})"


class ViewerLagged(Exception):
    """The viewer fell too far behind the live stream; it should reconnect and resume."""


class Viewer:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class Channel:
    """The entries of one job stream read by the reader and not yet taken by all viewers."""

    def __init__(self, job_id: str, cursor: str) -> None:
        self.job_id = job_id
        self.cursor = cursor
        self.cursor_order = order_of(cursor)
        self.entries: list[Entry] = []
        self.base = 0
        self.viewers: set[Viewer] = set()
        self.closed = False
        self.last_activity = time.monotonic()
        self.beats = 0
        self._changed = asyncio.Event()

    @property
    def end(self) -> int:
        return self.base + len(self.entries)

    def publish(self, entries: list[Entry]) -> None:
        self.entries.extend(entries)
        self.cursor = entries[-1].id
        self.cursor_order = entries[-1].order
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

    def beat(self) -> None:
        self.beats += 1
        self.last_activity = time.monotonic()
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def take(self, viewer: Viewer, max_lag: int) -> list[Entry]:
        if self.end - viewer.index > max_lag:
            raise ViewerLagged(self.job_id)
        batch = self.entries[viewer.index - self.base :]
        viewer.index = self.end
        return batch

    async def changed(self) -> None:
        await self._changed.wait()

"""Events read from a job's stream."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ._codecs import Codec
from ._errors import EventTypeError
from ._status import CHUNK, RESERVED_EVENTS, RESTARTED, TERMINAL_EVENTS

# ASCII digits only, matched in full: ``\d`` takes any Unicode digit and ``$`` matches before a
# trailing newline, and Redis refuses both.
_ENTRY_ID = re.compile(r"0|[0-9]{1,20}-[0-9]{1,20}")
_MAX_ID_PART = 2**64 - 1
_EVENT_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}")

Order = tuple[int, int]
"""A stream entry id as ``(ms, seq)``: ids compare in this order, not as text."""


@dataclass(frozen=True)
class Event:
    """One entry of a job's stream. ``id`` is the stream entry id, usable as a resume cursor."""

    id: str
    type: str
    data: Any
    usage: dict[str, Any] | None = None
    """On a terminal event: the job's usage totals (``Job.usage``), when its attempts
    reported any (:meth:`genq.ActiveJob.meter`)."""

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL_EVENTS


def as_text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def check_cursor(cursor: str) -> str:
    """Validates a resume cursor (a stream entry id) so bad input fails before Redis sees it:
    ``<ms>-<seq>`` (or ``0``), ASCII digits, each part within Redis's 64-bit range."""
    if not _ENTRY_ID.fullmatch(cursor) or any(int(p) > _MAX_ID_PART for p in cursor.split("-")):
        raise ValueError(f"invalid event id {cursor[:60]!r}: expected <ms>-<seq>")
    return cursor


def check_event_type(kind: str) -> str:
    """Validates the type of an event a handler emits (:meth:`genq.ActiveJob.emit`): a short
    lowercase name that is not one of the queue's own; raises :class:`genq.EventTypeError`."""
    if kind == CHUNK:
        return kind
    if not isinstance(kind, str) or not _EVENT_TYPE.fullmatch(kind) or kind in RESERVED_EVENTS:
        raise EventTypeError(kind)
    return kind


def entry_order(entry_id: str) -> Order:
    """The sort key of a (checked) stream entry id."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class StreamEntry:
    """One entry of a job's stream as written: ``data`` and ``usage`` are the JSON text stored,
    not decoded, so a server can pass them on as they are (:meth:`event` decodes them).

    ``framed`` is what a :class:`genq.Tail`'s ``frame`` function made of the entry: made once
    and shared by every follower (empty without one)."""

    __slots__ = ("data", "framed", "id", "order", "terminal", "type", "usage")

    def __init__(self, entry_id: str, kind: str, data: str, usage: str | None = None) -> None:
        self.id = entry_id
        self.order = entry_order(entry_id)
        self.type = kind
        self.data = data
        self.usage = usage
        self.terminal = kind in TERMINAL_EVENTS
        self.framed = b""

    def event(self, result_codec: Codec[Any]) -> Event:
        """The entry decoded: ``data`` through ``result_codec`` on ``completed``, else JSON."""
        kind, raw, usage = self.type, self.data, self.usage
        data = result_codec.decode(raw) if kind == "completed" else json.loads(raw)
        return Event(id=self.id, type=kind, data=data, usage=json.loads(usage) if usage else None)

    def __repr__(self) -> str:
        return f"StreamEntry({self.id!r}, {self.type!r})"


def read_entry(entry_id: bytes | str, fields: dict[Any, Any]) -> StreamEntry:
    """The one decoder of a raw stream entry (an XRANGE/XREAD item) of a job's stream."""
    values = {as_text(k): as_text(v) for k, v in fields.items()}
    return StreamEntry(
        as_text(entry_id), values.get("type", ""), values.get("data", "null"), values.get("usage")
    )


def decode_entry(entry_id: bytes | str, fields: dict[Any, Any], result_codec: Codec[Any]) -> Event:
    """Turns a raw stream entry into an :class:`Event`."""
    return read_entry(entry_id, fields).event(result_codec)


def visible_text(events: Iterable[Event]) -> str:
    """The text a viewer shows: chunks appended in order, cleared on ``restarted``.

    Every client of a job's stream needs exactly this; a retried attempt's ``restarted``
    drops the text of the attempt before it.
    """
    shown = ""
    for event in events:
        if event.type == RESTARTED:
            shown = ""
        elif event.type == CHUNK:
            shown += event.data
    return shown

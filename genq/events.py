"""Events read from a job's stream."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .codecs import Codec
from .status import CHUNK, RESTARTED, TERMINAL_EVENTS

# ASCII digits only, matched in full: ``\d`` takes any Unicode digit and ``$`` matches before a
# trailing newline, and Redis refuses both.
_ENTRY_ID = re.compile(r"0|[0-9]{1,20}-[0-9]{1,20}")
_MAX_ID_PART = 2**64 - 1


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


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def check_cursor(cursor: str) -> str:
    """Validates a resume cursor (a stream entry id) so bad input fails before Redis sees it:
    ``<ms>-<seq>`` (or ``0``), ASCII digits, each part within Redis's 64-bit range."""
    if not _ENTRY_ID.fullmatch(cursor) or any(int(p) > _MAX_ID_PART for p in cursor.split("-")):
        raise ValueError(f"invalid event id {cursor[:60]!r}: expected <ms>-<seq>")
    return cursor


def decode_entry(entry_id: bytes | str, fields: dict[Any, Any], result_codec: Codec[Any]) -> Event:
    """Turns a raw stream entry into an :class:`Event`."""
    values = {text(k): text(v) for k, v in fields.items()}
    kind = values.get("type", "")
    raw = values.get("data", "null")
    data = result_codec.decode(raw) if kind == "completed" else json.loads(raw)
    usage = values.get("usage")
    return Event(
        id=text(entry_id), type=kind, data=data, usage=json.loads(usage) if usage else None
    )


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

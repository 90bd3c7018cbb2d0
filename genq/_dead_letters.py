"""Dead-letter listings: entries, pages, and the cursor that pages through them.

The dead set is scored by the millisecond a job died; a listing runs newest first, as
``ZREVRANGEBYSCORE`` orders it: by score, then by member (job id) in reverse byte order. A
cursor names the last entry a page covered, ``"<died_at ms>:<job id>"``, so the next page starts
strictly after that position whatever was added or removed in between: a position, unlike an
offset, does not shift when entries before it come or go.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._events import as_text

Row = tuple[Any, float]
"""One ``WITHSCORES`` reply item: (member, score)."""


@dataclass(frozen=True)
class DeadEntry:
    id: str
    reason: str
    error: str | None
    attempts: int
    died_at: float


@dataclass(frozen=True)
class DeadPage:
    """One page of a dead-letter listing, newest first."""

    entries: list[DeadEntry]
    next_cursor: str | None
    """Pass it back for the page after this one; None once the listing is exhausted."""


def format_cursor(row: Row) -> str:
    member, score = row
    return f"{int(score)}:{as_text(member)}"


def parse_cursor(cursor: str) -> tuple[int, str]:
    """``"<ms>:<job id>"`` -> (ms, job id); ValueError for anything else. Dead-letter and job
    listings share this cursor form."""
    died, sep, job_id = cursor.partition(":")
    if not sep or not job_id or not died.isascii() or not died.isdigit():
        raise ValueError(f"invalid cursor {cursor[:60]!r}")
    return int(died), job_id


def rows_after(ties: Sequence[Row], older: Sequence[Row], job_id: str) -> list[Row]:
    """The rows that follow the cursor's position, given the rows that share its score
    (``ties``) and the rows scored below it (``older``), both newest first."""
    cut = job_id.encode()
    return [row for row in ties if as_text(row[0]).encode() < cut] + list(older)

"""A stream's cursor as a client gives it (``Last-Event-ID``, ``?after=``): checked, and the
later of two taken."""

from __future__ import annotations

from genq import check_cursor, entry_order

from ..errors import BadRequest


def parse_cursor(value: str | None, source: str) -> str | None:
    """A stream entry id (``<ms>-<seq>``, or ``0`` for the start); 400 for anything else."""
    if value is None or value == "":
        return None
    try:
        check_cursor(value)
    except ValueError:
        raise BadRequest(
            f"malformed {source} {value[:60]!r}: expected an event id '<ms>-<seq>'"
        ) from None
    return "0-0" if value == "0" else value


def later_cursor(a: str | None, b: str | None) -> str | None:
    if a is None or b is None:
        return a or b
    return a if entry_order(a) >= entry_order(b) else b

"""Reads of a job's stream by range, and the ordinals of its entries.

Ordinals: every entry numbered by its rank among all entries ever added to the stream, so
numbers only grow, across restarts too. ``XINFO STREAM`` reports ``entries-added``, which counts
every XADD and never goes down, and genq only ever trims a stream from its head (a restart
drops the earlier attempt's output with XTRIM MAXLEN 0, the stream's MAXLEN drops the oldest;
nothing deletes from the middle). So the retained entries are always the last ``length``
added: the first one's ordinal is ``entries-added - length`` and each next one's is one more.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import ResponseError

from ._events import StreamEntry, as_text, read_entry

CONSISTENT_READ_TRIES = 5


async def read_range(
    redis: Any, key: str, after: str | None, upto: str = "+", count: int | None = None
) -> list[StreamEntry]:
    """The entries of stream ``key`` strictly after ``after`` (None: from the first) up to
    ``upto`` included, at most ``count`` of them."""
    start = "-" if after is None else f"({after}"
    raw = await redis.xrange(key, start, upto, count=count)
    return [read_entry(i, f) for i, f in raw or ()]


async def _info(redis: Any, key: str) -> dict[str, Any] | None:
    try:
        info: dict[str, Any] = await redis.xinfo_stream(key)
    except ResponseError as exc:  # "no such key": nothing was written yet
        if "no such key" in str(exc).lower():
            return None
        raise
    return info


def _first_id(info: dict[str, Any]) -> str | None:
    first = info.get("first-entry")
    return as_text(first[0]) if first else None


async def read_retained(redis: Any, key: str) -> tuple[int, list[StreamEntry]] | None:
    """(the first entry's ordinal, every retained entry); ``(0, [])`` for an empty stream.

    A consistent read: the XRANGE must start at the first entry XINFO saw, else a restart or
    a trim came between and it reads again. None when the stream kept changing."""
    for _ in range(CONSISTENT_READ_TRIES):
        info = await _info(redis, key)
        first_id = _first_id(info) if info else None
        if info is None or first_id is None:
            return 0, []
        first = int(info["entries-added"]) - int(info["length"])
        entries = await read_range(redis, key, None)
        if entries and entries[0].id == first_id:
            return first, entries
    return None


async def first_ordinal(redis: Any, key: str, entry_id: str) -> int | None:
    """The ordinal of ``entry_id`` if it is (still) the stream's first retained entry."""
    info = await _info(redis, key)
    if info is None or _first_id(info) != entry_id:
        return None
    return int(info["entries-added"]) - int(info["length"])

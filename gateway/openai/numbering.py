"""Entry ordinals: every entry of a job's stream numbered by its rank among all entries ever
added, so numbers only grow, across restarts too, and a number alone says where to resume.

The ordinal comes from Redis itself. ``XINFO STREAM`` reports ``entries-added``, which counts
every XADD and never goes down, and genq only ever trims a stream from its head (a restart
drops the earlier attempt's output with XTRIM MAXLEN 0, the stream's MAXLEN drops the oldest;
nothing deletes from the middle). So the retained entries are always the last ``length``
added: the first one's ordinal is ``entries-added - length`` and each next one's is one more.
A restart's ``restarted`` entry is the first retained one at the moment it is written, which
re-anchors the count of a live follower that might have missed the dropped attempt's tail.
No change to genq's scripts is needed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from ..errors import Unavailable
from ..tail import Entry, Tail

CONSISTENT_READ_TRIES = 5


@dataclass(frozen=True)
class Numbered:
    ordinal: int
    entry: Entry


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
    if not first:
        return None
    raw = first[0]
    return raw.decode() if isinstance(raw, bytes) else str(raw)


async def retained(redis: Any, key: str) -> list[Numbered]:
    """The stream's retained entries with their ordinals (a consistent read: the XRANGE must
    start at the first entry XINFO saw, else a restart or trim came between; read again)."""
    for _ in range(CONSISTENT_READ_TRIES):
        info = await _info(redis, key)
        first_id = _first_id(info) if info else None
        if info is None or first_id is None:
            return []
        first = int(info["entries-added"]) - int(info["length"])
        raw = await redis.xrange(key, first_id, "+")
        entries = [Entry.from_redis(i, f) for i, f in raw]
        if entries and entries[0].id == first_id:
            return [Numbered(first + n, entry) for n, entry in enumerate(entries)]
    raise Unavailable("the generation's stream kept changing while it was read; retry")


async def anchored(redis: Any, key: str, entry_id: str) -> int | None:
    """The ordinal of ``entry_id`` if it is (still) the stream's first retained entry."""
    info = await _info(redis, key)
    if info is None or _first_id(info) != entry_id:
        return None
    return int(info["entries-added"]) - int(info["length"])


async def numbered(
    tail: Tail, redis: Any, key: str, job_id: str, until: float | None = None
) -> AsyncGenerator[list[Numbered], None]:
    """Every retained entry, then the live ones from the shared tail, each with its ordinal;
    ends after the terminal entry (or, without one, at ``until``: see :meth:`Tail.follow`).
    An empty batch means "nothing new" (time for a keepalive). Raises
    :class:`gateway.tail.ViewerLagged` when the viewer fell too far behind."""
    known = await retained(redis, key)
    if known:
        yield known
        if known[-1].entry.terminal:
            return
    cursor = known[-1].entry.id if known else "0-0"
    following = known[-1].ordinal + 1 if known else 0
    async with contextlib.aclosing(tail.follow(job_id, cursor, until=until)) as batches:
        async for batch in batches:
            out: list[Numbered] = []
            for entry in batch:
                if entry.type == "restarted":
                    anchor = await anchored(redis, key, entry.id)
                    following = following if anchor is None else anchor
                out.append(Numbered(following, entry))
                following += 1
            yield out
            if out and out[-1].entry.terminal:
                return

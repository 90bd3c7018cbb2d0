"""Entry ordinals: every entry of a job's stream numbered by its rank among all entries ever
added, so numbers only grow, across restarts too, and a number alone says where to resume.

The ordinals come from the core (:meth:`genq.Queue.retained_events`, from Redis's own count of
a stream's entries). A restart's ``restarted`` entry is the first retained one at the moment
it is written, which re-anchors the count of a live follower that might have missed the
dropped attempt's tail (:meth:`genq.Queue.event_ordinal`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from genq import Queue, StreamEntry, Tail

from ..errors import Unavailable


@dataclass(frozen=True)
class Numbered:
    ordinal: int
    entry: StreamEntry


async def retained(queue: Queue, job_id: str) -> list[Numbered]:
    """The job stream's retained entries with their ordinals."""
    read = await queue.retained_events(job_id)
    if read is None:
        raise Unavailable("the generation's stream kept changing while it was read; retry")
    first, entries = read
    return [Numbered(first + n, entry) for n, entry in enumerate(entries)]


async def numbered(
    tail: Tail, queue: Queue, job_id: str, until: float | None = None
) -> AsyncGenerator[list[Numbered], None]:
    """Every retained entry, then the live ones from the shared tail, each with its ordinal;
    ends after the terminal entry (or, without one, at ``until``: see :meth:`Tail.follow`).
    An empty batch means "nothing new" (time for a keepalive). Raises
    :class:`genq.ViewerLagged` when the viewer fell too far behind."""
    known = await retained(queue, job_id)
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
                    anchor = await queue.event_ordinal(job_id, entry.id)
                    following = following if anchor is None else anchor
                out.append(Numbered(following, entry))
                following += 1
            yield out
            if out and out[-1].entry.terminal:
                return

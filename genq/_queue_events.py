"""Reading a job's stream as written: its newest event, a range of entries, the retained ones
with their ordinals (:mod:`genq._stream_reads`)."""

from __future__ import annotations

from typing import Any

from ._events import Event, StreamEntry, check_cursor, decode_entry
from ._queue_base import QueueBase
from ._stream_reads import first_ordinal, read_range, read_retained


class JobEvents(QueueBase):
    """What :class:`genq.Queue` reads of a job's stream, without following it."""

    async def last_event(self, job_id: str) -> Event | None:
        """The newest event still on the job's stream; None when there is none.

        With the record's status it tells whether a finished job's stream already ended, or
        where to start following a running one.
        """
        return self._newest(await self.redis.xrevrange(self.keys.events(job_id), count=1))

    def _newest(self, reply: list[Any] | None) -> Event | None:
        """An ``XREVRANGE ... COUNT 1`` reply -> its event."""
        if not reply:
            return None
        entry_id, fields = reply[0]
        return decode_entry(entry_id, fields, self.result_codec)

    async def events_range(
        self, job_id: str, after: str | None = None, upto: str = "+", count: int | None = None
    ) -> list[StreamEntry]:
        """The job's stream entries strictly after ``after`` (None: from the first retained)
        up to the entry id ``upto`` included (``+``: the newest), at most ``count`` of them,
        undecoded (:meth:`StreamEntry.event` decodes one)."""
        cursor = None if after is None else check_cursor(after)
        return await read_range(self.redis, self.keys.events(job_id), cursor, upto, count)

    async def retained_events(self, job_id: str) -> tuple[int, list[StreamEntry]] | None:
        """(the ordinal of the first, every retained entry of the job's stream); ``(0, [])``
        for an empty stream. An entry's ordinal is its rank among all the entries ever added
        to the stream: it only grows, across restarts and trims. None when the stream kept
        changing (restarts, trims) through several consistent reads: try again later."""
        return await read_retained(self.redis, self.keys.events(job_id))

    async def event_ordinal(self, job_id: str, entry_id: str) -> int | None:
        """The ordinal of ``entry_id`` if it is (still) the first entry of the job's stream
        (a ``restarted`` entry is, when it is written); None otherwise."""
        return await first_ordinal(self.redis, self.keys.events(job_id), entry_id)

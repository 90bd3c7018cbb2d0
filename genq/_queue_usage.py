"""Reading the usage settled on a queue: per UTC day and of all time (the counters are
written by the settles, :mod:`genq._usage`, through each day's journal, which a read folds
first)."""

from __future__ import annotations

from datetime import date
from typing import Any

from ._calls import fold_usage_call
from ._events import as_text
from ._queue_base import QueueBase
from ._usage import UsageRow, days, parse_counters

FOLD_DAYS = 50
"""Days' journals folded per script call: a call's keys stay few however long nobody read."""


class UsageReads(QueueBase):
    """What :class:`genq.Queue` reads of its usage counters."""

    async def fold_usage(self) -> int:
        """Adds every day's journal of settled attempts to the usage counters (``fold_usage``
        in ``lua/_lib.lua``; the settles fold a journal themselves once it is long), and
        returns how many attempts that took. The reads below call it first, so they count
        every attempt settled before them."""
        pending = sorted(
            as_text(day) for day in await self.redis.smembers(self.keys.usage_journals)
        )
        folded = 0
        for start in range(0, len(pending), FOLD_DAYS):
            call = fold_usage_call(self, pending[start : start + FOLD_DAYS])
            folded += int(await self.scripts.fold_usage(*call))
        return folded

    async def usage(
        self, first_day: date, last_day: date, tenant: str | None = None
    ) -> list[UsageRow]:
        """The usage settled on each UTC day from ``first_day`` to ``last_day`` (at most
        ``USAGE_DAYS_KEPT`` days), per tenant (or of ``tenant``) and label, days in order."""
        span = days(first_day, last_day)
        await self.fold_usage()
        async with self.redis.pipeline(transaction=False) as pipe:
            for day in span:
                pipe.hgetall(self.keys.usage_day(day.isoformat()))
            replies: list[Any] = await pipe.execute()
        return [
            row
            for day, raw in zip(span, replies, strict=True)
            for row in parse_counters(raw, day, tenant)
        ]

    async def usage_totals(self, tenant: str | None = None) -> list[UsageRow]:
        """All the usage ever settled, per tenant (or of ``tenant``) and label."""
        await self.fold_usage()
        return parse_counters(await self.redis.hgetall(self.keys.usage_total), None, tenant)

"""Reading the usage settled on a queue: per UTC day and of all time (the counters are
written by the settles, :mod:`genq._usage`)."""

from __future__ import annotations

from datetime import date
from typing import Any

from ._queue_base import QueueBase
from ._usage import UsageRow, days, parse_counters


class UsageReads(QueueBase):
    """What :class:`genq.Queue` reads of its usage counters."""

    async def usage(
        self, first_day: date, last_day: date, tenant: str | None = None
    ) -> list[UsageRow]:
        """The usage settled on each UTC day from ``first_day`` to ``last_day`` (at most
        ``USAGE_DAYS_KEPT`` days), per tenant (or of ``tenant``) and label, days in order."""
        span = days(first_day, last_day)
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
        return parse_counters(await self.redis.hgetall(self.keys.usage_total), None, tenant)

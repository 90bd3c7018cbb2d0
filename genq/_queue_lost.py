"""Lost attempts: what an attempt whose worker was lost had streamed, kept until it is metered.

An attempt whose worker dies reports no usage, yet what it streamed was paid for. When
``reclaim.lua`` takes such an attempt back (a lease or a presence that lapsed, a pull whose
visibility passed) it files the attempt's output (its stream's entries since the attempt
started) before the next attempt's restart marker drops it from view. The core gives that
output no meaning; the layer that knows what a count is (the generation workers: tokens)
estimates the attempt's usage from it and meters it with :meth:`LostAttempts.meter_lost`,
which adds it where a settle adds an attempt's usage. Filing is decided by taking the lease
back and metering by removing the filed entry, each inside one script: an attempt is filed and
metered once, however many reclaimers and meterers race or retry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._calls import meter_lost_call
from ._events import as_text
from ._queue_base import QueueBase
from ._usage import encode_meter


@dataclass(frozen=True)
class LostAttempt:
    """An attempt taken back from a lost worker, not yet metered."""

    job_id: str
    attempt: int
    output: list[tuple[str, Any]]
    """What it streamed, in order: (event type, decoded data), its progress left out; empty
    when it streamed nothing (it may still have sent its request)."""
    tenant: str | None
    payload: Any
    """The job's payload, None when its record is gone (metering then only drops the entry)."""


def _decoded(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data


class LostAttempts(QueueBase):
    """What :class:`genq.Queue` offers about lost attempts."""

    async def lost_attempts(self, count: int = 100) -> list[LostAttempt]:
        """Up to about ``count`` lost attempts waiting to be metered (one ``HSCAN`` page and one
        read of their records)."""
        page: Any = await self.redis.hscan(self.keys.lost, 0, count=count)
        filed: dict[Any, Any] = page[1]
        entries = []
        for field, raw in filed.items():
            job_id, _, attempt = as_text(field).rpartition("\0")
            output = json.loads(raw).get("output") or []  # cjson writes an empty list as {}
            entries.append((job_id, int(attempt), [(t, _decoded(d)) for t, d in output]))
        if not entries:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id, _, _ in entries:
                pipe.hmget(self.keys.job(job_id), "payload", "tenant")
            records: list[Any] = await pipe.execute()
        return [
            LostAttempt(
                job_id,
                attempt,
                output,
                as_text(tenant) if tenant else None,
                None if payload is None else self.codec.decode(as_text(payload)),
            )
            for (job_id, attempt, output), (payload, tenant) in zip(entries, records, strict=True)
        ]

    async def meter_lost(
        self,
        job_id: str,
        attempt: int,
        label: str,
        counts: Mapping[str, int],
        *,
        estimated: bool = True,
    ) -> bool:
        """Meters a lost attempt's usage (as :meth:`genq.ActiveJob.meter` would have: on the
        record, its history entry and the usage counters). True when this call metered it;
        False when it was metered already, never filed, or its record is gone (the filed entry
        is dropped then)."""
        metered = encode_meter(label, counts, estimated=estimated, counted=True)
        reply = await self.scripts.meter_lost(*meter_lost_call(self, job_id, attempt, metered))
        return int(reply[0]) == 1

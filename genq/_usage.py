"""Metered usage: what a handler reports for an attempt, and the queue's counters of it.

A handler reports an attempt's usage with :meth:`genq.ActiveJob.meter`: a label (what answered,
such as a model) and named integer counts. The settle of that attempt adds it, in the same
script, to the job's record and to the queue's counters per UTC day and in all, keyed by tenant
and label (``meter`` in ``lua/_lib.lua``): to the counters by way of the day's journal, which
the settles fold into them in batches and every read folds first (:mod:`genq._queue_usage`).
The core gives the counts no meaning; the layers above do (tokens, cost).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta

USAGE_DAYS_KEPT = 400
"""Days a day's usage counters are kept after the last write to them."""

MAX_RANGE_DAYS = USAGE_DAYS_KEPT
_COUNT_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
_MAX_COUNT = 2**53 - 1
_MAX_COUNTS = 20


@dataclass(frozen=True)
class UsageRow:
    """The counts of one tenant and label, on one UTC day (``day`` None: of all time)."""

    day: date | None
    tenant: str
    label: str
    counts: dict[str, int]


def encode_meter(label: str, counts: Mapping[str, int], *, estimated: bool, counted: bool) -> str:
    """The checked ``metered`` argument of settle.lua; raises ValueError on bad input."""
    if not isinstance(label, str) or not 0 < len(label) <= 200 or "\0" in label:
        raise ValueError("meter label must be 1-200 characters, no NUL")
    if len(counts) > _MAX_COUNTS:
        raise ValueError(f"at most {_MAX_COUNTS} counts per attempt")
    checked: dict[str, int] = {}
    for name, n in counts.items():
        if not isinstance(name, str) or not _COUNT_NAME.fullmatch(name):
            raise ValueError(f"invalid count name {name!r}: [a-z][a-z0-9_]{{0,39}}")
        if name in ("attempts", "estimated_attempts", "estimated"):
            raise ValueError(f"count name {name!r} is reserved")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= _MAX_COUNT:
            raise ValueError(f"count {name!r} must be an integer from 0 to 2**53 - 1")
        checked[name] = n
    return json.dumps(
        {"label": label, "counts": checked, "estimated": bool(estimated), "counted": counted},
        ensure_ascii=False,
    )


def days(first: date, last: date) -> list[date]:
    """Every day from ``first`` to ``last``, both included; raises ValueError past the range."""
    if last < first:
        raise ValueError("the last day is before the first")
    span = (last - first).days + 1
    if span > MAX_RANGE_DAYS:
        raise ValueError(f"at most {MAX_RANGE_DAYS} days at once")
    return [first + timedelta(days=i) for i in range(span)]


def parse_counters(
    raw: Mapping[bytes | str, bytes | str], day: date | None, tenant: str | None
) -> list[UsageRow]:
    """A counters hash -> rows (of one tenant when ``tenant`` is given), sorted."""
    rows: dict[tuple[str, str], dict[str, int]] = {}
    for field, value in raw.items():
        name = field.decode() if isinstance(field, bytes) else field
        owner, label, count = name.split("\0", 2)
        if tenant is not None and owner != tenant:
            continue
        rows.setdefault((owner, label), {})[count] = int(value)
    return [UsageRow(day, owner, label, counts) for (owner, label), counts in sorted(rows.items())]

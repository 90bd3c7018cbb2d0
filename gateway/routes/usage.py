"""Usage: tokens and cost per UTC day, tenant and model, summed over every provider queue.

The counters are the queues' own (added once per attempt by the script that settles it), so
this route reads sums, never records. A tenant reads its own; an admin any tenant's, or all.
"""

from __future__ import annotations

import asyncio
import datetime
import re
import time
from collections.abc import Iterable
from typing import Annotated

from fastapi import APIRouter, Query

from genq import UsageRow
from genq_contract.api_keys import TENANT_PATTERN
from genq_contract.money import NANOS_PER_USD

from ..deps import GatewayDep, PrincipalDep
from ..errors import ERRORS, Forbidden, Unprocessable
from .usage_schemas import GroupBy, UsageCounts, UsageGroup, UsageReport

router = APIRouter(tags=["usage"], responses=ERRORS)

MAX_DAYS = 400
DIMENSIONS: tuple[GroupBy, ...] = ("day", "tenant", "model")
ALL_TENANTS = "*"


def _day(value: str | None, name: str, default: datetime.date) -> datetime.date:
    if value is None:
        return default
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        raise Unprocessable(f"{name} must be a date, YYYY-MM-DD (UTC), not {value!r}") from None


def _group_by(value: str) -> list[GroupBy]:
    asked = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [part for part in asked if part not in DIMENSIONS]
    if unknown:
        raise Unprocessable(
            f"group_by takes {', '.join(DIMENSIONS)} (comma separated), not {unknown[0]!r}"
        )
    return [d for d in dict.fromkeys(asked) if d in DIMENSIONS]


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for name, n in counts.items():
        into[name] = into.get(name, 0) + n


def _counts(sums: dict[str, int]) -> UsageCounts:
    return UsageCounts(
        prompt_tokens=sums.get("prompt_tokens", 0),
        completion_tokens=sums.get("completion_tokens", 0),
        cached_tokens=sums.get("cached_tokens", 0),
        reasoning_tokens=sums.get("reasoning_tokens", 0),
        cost_usd=sums.get("cost_nanos", 0) / NANOS_PER_USD,
        attempts=sums.get("attempts", 0),
        estimated_attempts=sums.get("estimated_attempts", 0),
    )


def summarize(
    rows: Iterable[UsageRow], group_by: list[GroupBy]
) -> tuple[list[UsageGroup], UsageCounts]:
    """Sums the rows per group (the dimensions not grouped by are null) and in all."""
    groups: dict[tuple[str, str, str], dict[str, int]] = {}
    total: dict[str, int] = {}
    for row in rows:
        key = (
            row.day.isoformat() if "day" in group_by and row.day else "",
            row.tenant if "tenant" in group_by else "",
            row.label if "model" in group_by else "",
        )
        _add(groups.setdefault(key, {}), row.counts)
        _add(total, row.counts)
    data = [
        UsageGroup(
            day=datetime.date.fromisoformat(day) if day else None,
            tenant=tenant if "tenant" in group_by else None,
            model=model if "model" in group_by else None,
            **_counts(sums).model_dump(),
        )
        for (day, tenant, model), sums in sorted(groups.items())
    ]
    return data, _counts(total)


@router.get("/v1/usage", response_model=UsageReport)
async def usage(
    gateway: GatewayDep,
    principal: PrincipalDep,
    from_: Annotated[
        str | None,
        Query(alias="from", max_length=20, description="First UTC day (YYYY-MM-DD); default today"),
    ] = None,
    to: Annotated[
        str | None, Query(max_length=20, description="Last UTC day, included; default today")
    ] = None,
    group_by: Annotated[
        str, Query(max_length=40, description="Comma-separated: model, day, tenant")
    ] = "model",
    tenant: Annotated[
        str | None,
        Query(max_length=64, description="A tenant, or * for all (admin only); default yours"),
    ] = None,
) -> UsageReport:
    """Tokens and cost settled in a range of UTC days (at most 400), grouped by any of model,
    day and tenant, with the total. Counted once per attempt, restarts and failures included."""
    today = datetime.datetime.fromtimestamp(time.time(), datetime.UTC).date()
    first, last = _day(from_, "from", today), _day(to, "to", today)
    if last < first:
        raise Unprocessable("to must not be before from")
    if (last - first).days + 1 > MAX_DAYS:
        raise Unprocessable(f"at most {MAX_DAYS} days at once")
    dimensions = _group_by(group_by)
    wanted = tenant or principal.tenant
    if wanted != principal.tenant and not principal.admin:
        raise Forbidden("only an admin key reads another tenant's usage")
    if wanted != ALL_TENANTS and not _valid_tenant(wanted):
        raise Unprocessable("tenant must be a tenant name or *")
    only = None if wanted == ALL_TENANTS else wanted
    per_queue = await asyncio.gather(
        *(queue.usage(first, last, only) for _, queue in gateway.queues)
    )
    data, total = summarize((row for rows in per_queue for row in rows), dimensions)
    return UsageReport(
        tenant=wanted, from_=first, to=last, group_by=dimensions, data=data, total=total
    )


def _valid_tenant(name: str) -> bool:
    return re.fullmatch(TENANT_PATTERN, name) is not None

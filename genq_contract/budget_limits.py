"""A tenant's budget as the gateway and the workers both check it: its limits per UTC day and
month, and the refusal when a generation would take the tenant past one.

The accounts these limits are checked against live in Redis (``genq_services.budget``); an
operator's limits stored there win over ``GENQ_TENANT_BUDGETS`` (:func:`configured_limits`).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Literal

from .money import nanos_to_usd, usd_to_nanos

LimitKind = Literal["daily", "monthly"]


@dataclass(frozen=True)
class Limits:
    """A tenant's budget: the most it may spend per UTC day and per UTC month (None: no limit
    of that kind)."""

    daily_nanos: int | None = None
    monthly_nanos: int | None = None

    @classmethod
    def from_usd(cls, daily_usd: float | None, monthly_usd: float | None) -> Limits:
        return cls(
            None if daily_usd is None else usd_to_nanos(daily_usd),
            None if monthly_usd is None else usd_to_nanos(monthly_usd),
        )

    @property
    def any(self) -> bool:
        return self.daily_nanos is not None or self.monthly_nanos is not None

    @property
    def daily_usd(self) -> float | None:
        return None if self.daily_nanos is None else nanos_to_usd(self.daily_nanos)

    @property
    def monthly_usd(self) -> float | None:
        return None if self.monthly_nanos is None else nanos_to_usd(self.monthly_nanos)


class BudgetExceeded(Exception):
    """A reservation refused: it would take the tenant past its ``limit`` before ``resets_at``."""

    def __init__(
        self, limit: LimitKind, remaining_nanos: int, resets_at: datetime.datetime
    ) -> None:
        self.limit = limit
        self.remaining_nanos = max(0, remaining_nanos)
        self.resets_at = resets_at
        super().__init__(
            f"the tenant's {limit} budget is exhausted: ${self.remaining_usd:.6f} left "
            f"until {resets_at.isoformat()}"
        )

    @property
    def remaining_usd(self) -> float:
        return nanos_to_usd(self.remaining_nanos)


def configured_limits(settings: Any, tenant: str) -> Limits | None:
    """The tenant's budget as ``GENQ_TENANT_BUDGETS`` gives it (None: no budget there).

    ``settings``: any ``CommonSettings`` (its ``tenant_budgets``)."""
    budget = settings.tenant_budgets.get(tenant)
    if budget is None:
        return None
    limits = Limits.from_usd(budget.daily_usd, budget.monthly_usd)
    return limits if limits.any else None

"""Bodies of the spend routes: usage (``GET /v1/usage``) and budgets (``/v1/budgets``,
``/v1/budget``). The admin page's spend view, ``genq usage`` and ``genq budgets`` read these
shapes. Costs are USD (floats); the counters behind them are exact integers of nano-USD."""

from __future__ import annotations

import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from genq_contract.money import UsdLimit

from ..access.schemas import Reason

GroupBy = Literal["model", "day", "tenant"]
Source = Literal["admin", "settings", "none"]


class UsageCounts(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = Field(
        default=0,
        description="Of the completion tokens, those spent reasoning, as providers reported them",
    )
    cost_usd: float = 0.0
    attempts: int = Field(
        default=0, description="Attempts metered, those lost with their worker included"
    )
    estimated_attempts: int = Field(
        default=0, description="Of those, attempts whose usage genq estimated (none reported)"
    )


class UsageGroup(UsageCounts):
    """One group's sums; a dimension not grouped by is null."""

    day: datetime.date | None = None
    tenant: str | None = None
    model: str | None = None


class UsageReport(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    tenant: str = Field(description="The tenant reported, or * for all of them")
    from_: datetime.date = Field(alias="from", description="First UTC day, included")
    to: datetime.date = Field(description="Last UTC day, included")
    group_by: list[GroupBy]
    data: list[UsageGroup] = Field(description="Ordered by day, tenant, model")
    total: UsageCounts


class BudgetLimits(BaseModel):
    """A tenant's budget in USD; null is no limit of that kind."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"daily_usd": 5, "monthly_usd": 100}]},
    )

    daily_usd: UsdLimit | None = Field(
        default=None, description="A JSON number (a string or a boolean is 422); null: none"
    )
    monthly_usd: UsdLimit | None = Field(
        default=None, description="A JSON number (a string or a boolean is 422); null: none"
    )
    reason: Reason = None


class BudgetOut(BaseModel):
    tenant: str
    daily_usd: float | None = Field(description="The daily limit; null: none")
    monthly_usd: float | None = Field(description="The monthly limit; null: none")
    source: Source = Field(
        description="Where the limits come from: the admin API (wins), GENQ_TENANT_BUDGETS, "
        "or nowhere (no budget)"
    )
    spent_today_usd: float = Field(description="Charged this UTC day")
    spent_month_usd: float = Field(description="Charged this UTC month")
    reserved_usd: float = Field(description="Set aside for generations not charged yet")
    reservations: int
    day_resets_at: datetime.datetime
    month_resets_at: datetime.datetime


class BudgetSet(BudgetOut):
    """``PUT /v1/budgets/{tenant}``'s answer: the budget as it now stands, and what to check."""

    warnings: list[str] = Field(
        default_factory=list,
        description="What the operator may want to check, e.g. that no API key acts as this "
        "tenant (a typo in its name?); empty when nothing",
    )


class BudgetList(BaseModel):
    budgets: list[BudgetOut]

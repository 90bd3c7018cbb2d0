"""Amounts of money as every process counts them: integers of nano-USD, so sums are exact.

The usage counters, prices, budget accounts and limits all count in nano-USD (1 USD is
1,000,000,000); USD appears only where a person reads or types an amount.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

NANOS_PER_USD = 1_000_000_000

MAX_LIMIT_USD = 1e9
UsdLimit = Annotated[float, Field(strict=True, ge=0, le=MAX_LIMIT_USD)]
"""A limit in USD as the admin API and ``GENQ_TENANT_BUDGETS`` take it: a JSON number, never a
string or a boolean (lax parsing would read ``"1"`` and ``true`` as $1: a typo must not pass
for a budget)."""


def usd_to_nanos(usd: float) -> int:
    return round(usd * NANOS_PER_USD)


def nanos_to_usd(nanos: int) -> float:
    return nanos / NANOS_PER_USD

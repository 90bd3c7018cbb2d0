"""What ``genq usage`` and ``genq budgets ...`` do, over the gateway's HTTP API.

``usage`` sums the tokens and cost that workers metered (``GET /v1/usage``): the key's own
tenant, or with an admin key ``--tenant T`` or ``--tenant '*'`` (every tenant). ``budgets``
lists, sets and clears tenants' spending limits (``/v1/budgets``, admin key); ``budgets set``
prints the gateway's warnings on stderr (no API key acts as that tenant: a typo?). Exit codes:
0 done, 4 the command failed (bad option, refused, gateway unreachable).
"""

from __future__ import annotations

import json
from typing import Any

import typer

from genq_client import UsageReport

from .support import client, fail, run

GROUPS = ("day", "tenant", "model")
COUNTS = ("prompt_tokens", "completion_tokens", "cached_tokens", "attempts")


def usage(
    first_day: str | None,
    last_day: str | None,
    group_by: str,
    tenant: str | None,
    as_json: bool,
) -> int:
    groups = [g.strip() for g in group_by.split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown or not groups:
        fail(f"--group-by takes {', '.join(GROUPS)} (comma separated), not {group_by!r}")

    async def go() -> UsageReport:
        async with client() as genq:
            return await genq.usage(first_day, last_day, group_by=groups, tenant=tenant)

    report = run(go)
    if as_json:
        answer = {
            "tenant": report.tenant,
            "from": report.first_day,
            "to": report.last_day,
            "group_by": report.group_by,
            "data": report.rows,
            "total": report.total,
        }
        typer.echo(json.dumps(answer, indent=2))
    else:
        _usage_table(report)
    return 0


def _usage_table(report: UsageReport) -> None:
    from rich.console import Console
    from rich.table import Table

    whose = "every tenant" if report.tenant == "*" else report.tenant
    days = report.first_day
    if report.last_day != report.first_day:
        days += f" to {report.last_day}"
    table = Table(title=f"usage of {whose}, {days} (UTC)", show_footer=True)
    groups = report.group_by
    for i, name in enumerate(groups):
        table.add_column(name, footer="total" if i == 0 else "")
    for name in COUNTS:
        footer = _count(report.total.get(name))
        table.add_column(name.removesuffix("_tokens"), justify="right", footer=footer)
    table.add_column("cost (USD)", justify="right", footer=usd(report.total.get("cost_usd")))
    for row in report.rows:
        table.add_row(
            *(str(row.get(g) or "") for g in groups),
            *(_count(row.get(name)) for name in COUNTS),
            usd(row.get("cost_usd")),
        )
    Console(width=160).print(table)
    estimated = report.total.get("estimated_attempts")
    if estimated:
        typer.echo(f"{estimated} attempt(s) estimated (no usage from the provider)", err=True)


def _count(value: Any) -> str:
    return "" if value is None else f"{int(value):,}"


def usd(value: Any) -> str:
    """Dollars with enough digits for a few tokens' worth: ``$0.000150``, ``$12.34``."""
    if value is None:
        return "—"
    amount = float(value)
    return f"${amount:,.2f}" if amount >= 100 else f"${amount:,.6f}"


# -- budgets (admin key) ------------------------------------------------------------------------

BUDGET_COLUMNS = (
    ("tenant", "tenant"),
    ("daily_usd", "daily limit"),
    ("spent_today_usd", "spent today"),
    ("monthly_usd", "monthly limit"),
    ("spent_month_usd", "spent this month"),
    ("reserved_usd", "reserved"),
    ("source", "set by"),
)


def budgets_list(as_json: bool) -> int:
    async def go() -> list[dict[str, Any]]:
        async with client() as genq:
            return await genq.budgets()

    rows = run(go)
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="budgets (USD, UTC days and months)")
    for name, title in BUDGET_COLUMNS:
        table.add_column(title, justify="left" if name == "tenant" else "right")
    for row in rows:
        table.add_row(*(_cell(row, name) for name, _ in BUDGET_COLUMNS))
    Console(width=160).print(table)
    if not rows:
        typer.echo("no budgets: every tenant spends without a limit", err=True)
    return 0


def _cell(row: dict[str, Any], name: str) -> str:
    return _limit(row.get(name)) if name.endswith("_usd") else str(row.get(name, ""))


def _limit(value: Any) -> str:
    return "none" if value is None else usd(value)


def budgets_set(
    tenant: str, daily_usd: float | None, monthly_usd: float | None, reason: str | None
) -> int:
    if daily_usd is None and monthly_usd is None:
        fail("give --daily-usd, --monthly-usd or both (`genq budgets clear` removes a budget)")

    async def go() -> dict[str, Any]:
        async with client() as genq:
            return await genq.set_budget(
                tenant, daily_usd=daily_usd, monthly_usd=monthly_usd, reason=reason
            )

    row = run(go)
    _summary(row)
    for warning in row.get("warnings", []):
        typer.echo(f"warning: {warning}", err=True)
    return 0


def budgets_clear(tenant: str, reason: str | None) -> int:
    async def go() -> dict[str, Any]:
        async with client() as genq:
            return await genq.clear_budget(tenant, reason=reason)

    _summary(run(go))
    return 0


def _summary(row: dict[str, Any]) -> None:
    """``alpha: daily $5.000000, monthly none (set by admin)``."""
    daily, monthly = _limit(row.get("daily_usd")), _limit(row.get("monthly_usd"))
    typer.echo(f"{row['tenant']}: daily {daily}, monthly {monthly} (set by {row.get('source')})")

"""`genq usage` and `genq budgets list|set|clear` run as processes against a live gateway; the
usage is metered by genq workers (as a provider worker meters it), the budgets are read back
from the gateway afterwards."""

from __future__ import annotations

import datetime
import json
from typing import Any

import httpx
import redis.asyncio as aioredis

from tests.gateway.conftest import KEY_ADMIN, KEY_ALPHA, LiveGateway
from tests.gateway.test_usage_metrics import Metered, settle_usage, tokens
from tests.ops.conftest import cli_env, genq


def _days() -> list[str]:
    """Yesterday to tomorrow (UTC), so a test running across midnight still sees its usage."""
    today = datetime.datetime.now(datetime.UTC).date()
    day = datetime.timedelta(days=1)
    return ["--from", str(today - day), "--to", str(today + day)]


def _cells(line: str) -> list[str]:
    """The cells of a rich table's row (empty for a rule or a title)."""
    return [cell.strip() for cell in line.split("│")[1:-1]]


async def _get(live: LiveGateway, path: str) -> Any:
    auth = {"Authorization": f"Bearer {KEY_ADMIN}"}
    async with httpx.AsyncClient(base_url=live.url, headers=auth) as http:
        response = await http.get(path)
    assert response.status_code == 200, response.text
    return response.json()


USAGE = [
    Metered("alpha", "demo/fast", tokens(10, 20, 0, 0.000_04)),
    Metered("alpha", "demo/fast", tokens(5, 7, 2, 0.000_01), attempts=2),
    Metered("alpha", "other/model", tokens(100, 50, 0, 0.5), provider="other"),
    Metered("beta", "demo/fast", tokens(1, 1, 0, 1.25)),
]


async def test_cli_usage_prints_the_tenants_usage_by_model_with_a_total(
    live: LiveGateway, redis: aioredis.Redis, prefix: str
) -> None:
    await settle_usage(redis, prefix, USAGE)
    alpha = cli_env(live.url, KEY_ALPHA)

    answer = await genq("usage", *_days(), "--json", env=alpha)
    assert answer.code == 0, answer.err
    report = json.loads(answer.out)
    assert (report["tenant"], report["group_by"]) == ("alpha", ["model"])
    by_model = {row["model"]: row for row in report["data"]}
    assert set(by_model) == {"demo/fast", "other/model"}  # beta's is not alpha's to see
    fast = by_model["demo/fast"]
    assert (fast["prompt_tokens"], fast["completion_tokens"], fast["cached_tokens"]) == (20, 34, 4)
    assert (fast["attempts"], fast["cost_usd"]) == (3, 0.000_06)
    assert report["total"]["cost_usd"] == 0.500_06
    assert report["total"]["prompt_tokens"] == 120

    table = await genq("usage", *_days(), env=alpha)
    assert table.code == 0, table.err
    assert "usage of alpha" in table.out
    rows = {cells[0]: cells[1:] for cells in map(_cells, table.out.splitlines()) if cells}
    # model | prompt | completion | cached | attempts | cost, and the footer with the total
    assert rows["demo/fast"] == ["20", "34", "4", "3", "$0.000060"], table.out
    assert rows["other/model"] == ["100", "50", "0", "1", "$0.500000"], table.out
    assert rows["total"] == ["120", "84", "4", "4", "$0.500060"], table.out

    # Not another tenant's with a tenant key; an admin's may see every tenant, by tenant.
    refused = await genq("usage", "--tenant", "beta", env=alpha)
    assert refused.code == 4 and "403" in refused.err, refused.err
    admin = cli_env(live.url, KEY_ADMIN)
    every = await genq(
        "usage", *_days(), "--tenant", "*", "--group-by", "tenant", "--json", env=admin
    )
    assert every.code == 0, every.err
    costs = {row["tenant"]: row["cost_usd"] for row in json.loads(every.out)["data"]}
    assert costs == {"alpha": 0.500_06, "beta": 1.25}
    by_day = await genq("usage", *_days(), "--tenant", "*", "--group-by", "day,tenant", env=admin)
    today = str(datetime.datetime.now(datetime.UTC).date())
    assert by_day.code == 0 and "every tenant" in by_day.out and today in by_day.out, by_day.out
    assert "$1.750060" in by_day.out

    bad_group = await genq("usage", "--group-by", "week", env=alpha)
    assert bad_group.code == 4 and "--group-by takes day, tenant, model" in bad_group.err
    bad_day = await genq("usage", "--from", "2026-13-01", env=alpha)
    assert bad_day.code == 4 and "422" in bad_day.err, bad_day.err


async def test_cli_budgets_set_list_and_clear(live: LiveGateway) -> None:
    admin = cli_env(live.url, KEY_ADMIN)
    none = await genq("budgets", "list", "--json", env=admin)
    assert (none.code, none.out) == (0, "")

    done = await genq("budgets", "set", "alpha", "--daily-usd", "5", "--reason", "pilot", env=admin)
    assert done.code == 0, done.err
    assert done.out.strip() == "alpha: daily $5.000000, monthly none (set by admin)"
    stored = await _get(live, "/v1/budgets/alpha")
    assert (stored["daily_usd"], stored["monthly_usd"], stored["source"]) == (5.0, None, "admin")

    both = await genq(
        "budgets", "set", "beta", "--daily-usd", "1.5", "--monthly-usd", "20", env=admin
    )
    assert both.code == 0, both.err
    listed = await genq("budgets", "list", "--json", env=admin)
    rows = [json.loads(line) for line in listed.out.splitlines()]
    assert [(r["tenant"], r["daily_usd"], r["monthly_usd"]) for r in rows] == [
        ("alpha", 5.0, None),
        ("beta", 1.5, 20.0),
    ]
    table = await genq("budgets", "list", env=admin)
    assert table.code == 0, table.err
    beta_line = next(line for line in table.out.splitlines() if "│ beta" in line)
    # daily limit | spent today | monthly limit | spent this month | reserved | set by
    assert _cells(beta_line)[1:] == [
        "$1.500000",
        "$0.000000",
        "$20.000000",
        "$0.000000",
        "$0.000000",
        "admin",
    ], table.out

    cleared = await genq("budgets", "clear", "alpha", "--reason", "pilot over", env=admin)
    assert cleared.code == 0, cleared.err
    assert cleared.out.strip() == "alpha: daily none, monthly none (set by none)"
    stored = await _get(live, "/v1/budgets/alpha")
    assert (stored["daily_usd"], stored["source"]) == (None, "none")

    audit = (await _get(live, "/v1/audit"))["entries"]
    assert [(a["action"], a["reason"]) for a in audit if a["reason"]][:2] == [
        ("clear_budget", "pilot over"),
        ("set_budget", "pilot"),
    ]

    # A tenant no API key acts as (a typo?): set all the same, with a warning on stderr.
    assert "warning" not in done.err
    typo = await genq("budgets", "set", "alhpa", "--daily-usd", "1", env=admin)
    assert typo.code == 0, typo.err
    assert typo.out.strip() == "alhpa: daily $1.000000, monthly none (set by admin)"
    assert "warning: no API key acts as tenant 'alhpa'" in typo.err

    nothing = await genq("budgets", "set", "alpha", env=admin)
    assert nothing.code == 4 and "--daily-usd" in nothing.err
    tenant = await genq("budgets", "list", env=cli_env(live.url, KEY_ALPHA))
    assert tenant.code == 4 and "403" in tenant.err, tenant.err

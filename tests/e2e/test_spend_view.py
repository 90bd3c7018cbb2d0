"""The dashboard's Spend section in Chromium: cost per day stacked by tenant, the table by tenant
and model, the 7/30-day range, and the budgets with their form, against the real gateway, a
demo worker and Redis. What the page shows is checked against what the server answers
(``/v1/usage``, ``/v1/budgets``), and every button's effect against the server's state."""

from __future__ import annotations

import asyncio
import datetime
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from playwright.sync_api import Locator, Page, expect

from genq import Keys
from genq_cli.usage import usd
from genq_contract.spend import prices_key
from tests.e2e.browser import (
    PHONE,
    SCREENSHOTS,
    Screenshots,
    Stack,
    admin_loaded,
    running_stack,
    wait_until,
)
from tests.gateway.test_usage_metrics import Metered, settle_usage, tokens

pytestmark = [pytest.mark.browser, pytest.mark.slow]

USAGE = [
    Metered("alpha", "demo/fast", tokens(1200, 3400, 0, 0.0057)),
    Metered("alpha", "openai/gpt-4o-mini", tokens(50_000, 20_000, 10_000, 0.0195), "openai"),
    Metered("beta", "demo/slow", tokens(900, 100, 0, 0.0006), attempts=2),
]
BUDGETS_REFRESH_MS = 5000
"""How often the admin page reloads its budgets table (``every(5000, loadBudgets)``, admin.js)."""
OLD = {"prompt_tokens": 7, "completion_tokens": 8, "cost_nanos": 2_000_000_000, "attempts": 1}
"""gamma's usage ten days ago: only the 30-day range shows it."""


def seed_past_day(stack: Stack, day: datetime.date, tenant: str, model: str) -> None:
    """Counters of a day gone by, as a settle on that day would have written them (one hash
    per UTC day, field ``tenant NUL label NUL count``: genq.Keys.usage_day)."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        key = Keys(stack.queue_prefix("demo")).usage_day(day.isoformat())
        for name, value in OLD.items():
            client.hincrby(key, f"{tenant}\0{model}\0{name}", value)
    finally:
        client.close()


def meter(stack: Stack) -> None:
    async def go() -> None:
        client = aioredis.Redis.from_url(stack.redis_url)
        try:
            await settle_usage(client, stack.namespace, USAGE)
        finally:
            await client.aclose()

    # Playwright's sync API runs a loop in this thread: the worker gets a thread of its own.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: asyncio.run(go())).result(30)


def page_range(page: Page, days: int) -> tuple[str, str]:
    """The UTC days the page asked the server for, once its total line names a range of
    ``days``: the page and the test agree on the range even when a run crosses midnight."""
    found = page.wait_for_function(
        """days => {
          const m = /from (\\d{4}-\\d\\d-\\d\\d) to (\\d{4}-\\d\\d-\\d\\d)/
            .exec(document.getElementById("spend-total").textContent);
          return m && (Date.parse(m[2]) - Date.parse(m[1])) / 86400000 === days - 1 && [m[1], m[2]];
        }""",
        arg=days,
    ).json_value()
    return found[0], found[1]


def server_usage(stack: Stack, span: tuple[str, str], group_by: str) -> dict[str, Any]:
    params = {"from": span[0], "to": span[1], "group_by": group_by, "tenant": "*"}
    with stack.client(admin=True) as client:
        response = client.get("/v1/usage", params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def server_budgets(stack: Stack) -> dict[str, dict[str, Any]]:
    with stack.client(admin=True) as client:
        response = client.get("/v1/budgets")
    assert response.status_code == 200, response.text
    return {b["tenant"]: b for b in response.json()["budgets"]}


def cells(row: Locator) -> list[str]:
    return [text.strip() for text in row.locator("td, th").all_inner_texts()]


def expected_rows(report: dict[str, Any]) -> list[list[str]]:
    """The table's rows as the server's sums say they must read."""
    counts = ("prompt_tokens", "completion_tokens", "cached_tokens", "attempts")
    return [
        [row["tenant"], row["model"], *(f"{row[c]:,}" for c in counts), usd(row["cost_usd"])]
        for row in report["data"]
    ]


def bars(page: Page) -> set[tuple[str, str, float]]:
    found = page.eval_on_selector_all(
        "#spend-chart rect.spend-bar",
        "els => els.map(e => [e.dataset.day, e.dataset.tenant, Number(e.dataset.cost)])",
    )
    return {(day, tenant, cost) for day, tenant, cost in found}


def expected_bars(report: dict[str, Any]) -> set[tuple[str, str, float]]:
    return {(r["day"], r["tenant"], r["cost_usd"]) for r in report["data"] if r["cost_usd"] > 0}


def section_screenshot(page: Page, test: str, suffix: str) -> None:
    """Only the Spend section, to look at: ``artifacts/screenshots/<test>-spend-<suffix>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#spend-section").screenshot(path=str(SCREENSHOTS / f"{test}-spend-{suffix}.png"))


def check_range(page: Page, stack: Stack, days: int) -> dict[str, Any]:
    """The page's table, total and bars equal the server's answer for the last ``days``."""
    span = page_range(page, days)
    by_model = server_usage(stack, span, "tenant,model")
    rows = page.locator("#spend-models tbody tr")
    expect(rows).to_have_count(len(by_model["data"]))
    expect(page.locator("#spend-total")).to_contain_text(usd(by_model["total"]["cost_usd"]))
    assert [cells(rows.nth(i)) for i in range(rows.count())] == expected_rows(by_model)
    total = by_model["total"]
    assert cells(page.locator("#spend-models tfoot tr")) == [
        "Total",
        *(f"{total[c]:,}" for c in ("prompt_tokens", "completion_tokens", "cached_tokens")),
        f"{total['attempts']:,}",
        usd(total["cost_usd"]),
    ]
    by_day = server_usage(stack, span, "day,tenant")
    assert bars(page) == expected_bars(by_day)
    return by_model


def test_spend_view_charts_usage_by_tenant_and_model_over_both_ranges(
    redis_url: str, page: Page, request: pytest.FixtureRequest, screenshot: Screenshots
) -> None:
    with running_stack(redis_url, request.node.name, workers=0) as stack:
        meter(stack)
        ten_days_ago = datetime.datetime.now(datetime.UTC).date() - datetime.timedelta(days=10)
        seed_past_day(stack, ten_days_ago, "gamma", "demo/fast")
        # And one real generation: the demo worker meters it (estimated, at the demo price).
        stack.start_worker()
        job = stack.submit({"model": "demo/fast", "prompt": "Count my tokens"})
        assert stack.result(job["id"])["status"] == "completed"

        page.goto(f"{stack.base_url}/admin")
        admin_loaded(page)
        seven = page.locator('#spend-range button[data-days="7"]')
        thirty = page.locator('#spend-range button[data-days="30"]')
        expect(seven).to_have_attribute("aria-pressed", "true")
        week = check_range(page, stack, 7)
        tenants = {row["tenant"] for row in week["data"]}
        assert tenants == {"alpha", "beta", "dev"}, week  # dev: the demo generation
        models = {row["model"] for row in week["data"]}
        assert models == {"demo/fast", "demo/slow", "openai/gpt-4o-mini"}
        legend = page.locator("#spend-legend [data-tenant]")
        assert set(legend.evaluate_all("els => els.map(e => e.dataset.tenant)")) == tenants
        expect(page.locator("#spend-models tbody")).not_to_contain_text("gamma")

        # Today's bar, by keyboard: the readout names each tenant's cost.
        page.focus("#spend-chart")
        page.keyboard.press("End")
        today_is = page_range(page, 7)[1]
        today = server_usage(stack, (today_is, today_is), "tenant")
        for row in today["data"]:
            expect(page.locator("#spend-readout")).to_contain_text(
                f"{row['tenant']} {usd(row['cost_usd'])}"
            )
        expect(page.locator("#spend-readout")).to_contain_text(
            f"{today_is}: {usd(today['total']['cost_usd'])}"
        )

        thirty.click()
        expect(thirty).to_have_attribute("aria-pressed", "true")
        expect(seven).to_have_attribute("aria-pressed", "false")
        expect(page.locator("#spend-models tbody")).to_contain_text("gamma")
        month = check_range(page, stack, 30)
        assert {r["tenant"] for r in month["data"]} == tenants | {"gamma"}
        assert (str(ten_days_ago), "gamma", 2.0) in bars(page)
        section_screenshot(page, screenshot.name, "desktop")

        seven.click()
        expect(page.locator("#spend-models tbody")).not_to_contain_text("gamma")
        check_range(page, stack, 7)

        page.set_viewport_size(PHONE)
        expect(page.locator("#spend-chart")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        section_screenshot(page, screenshot.name, "phone")


def price_published(stack: Stack, model: str) -> bool:
    """A worker published the model's price (the gateway needs it to reserve a budget)."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        return bool(client.hexists(prices_key(stack.namespace), model))
    finally:
        client.close()


def budget_row(page: Page, tenant: str) -> Locator:
    return page.locator(f'#budgets tbody tr[data-tenant="{tenant}"]')


def expect_budget_rows(page: Page, stack: Stack) -> dict[str, dict[str, Any]]:
    """Each budget the server lists is a row reading its limits, spend and reservations."""
    budgets = server_budgets(stack)
    for tenant, b in budgets.items():
        money = [
            "none" if b[name] is None else usd(b[name])
            for name in ("daily_usd", "spent_today_usd", "monthly_usd", "spent_month_usd")
        ]
        expect(budget_row(page, tenant).locator("td")).to_have_text(
            [tenant, *money, usd(b["reserved_usd"]), b["source"], "Edit"]
        )
    return budgets


def test_spend_view_sets_edits_and_removes_a_budget(stack: Stack, page: Page) -> None:
    page.goto(f"{stack.base_url}/admin")
    admin_loaded(page)
    expect(page.locator("#budgets tbody")).to_have_text(
        "No budgets: every tenant spends without a limit."
    )

    page.fill("#budget-tenant", "alpha")
    page.fill("#budget-daily", "5")
    page.click("#budget-save")
    expect(page.locator("#budget-status")).to_have_text("Saved the budget of alpha.")
    alpha = server_budgets(stack)["alpha"]
    assert (alpha["daily_usd"], alpha["monthly_usd"], alpha["source"]) == (5.0, None, "admin")
    expect(budget_row(page, "alpha").locator('td[data-label="Daily limit"]')).to_have_text(
        "$5.000000"
    )
    expect_budget_rows(page, stack)

    # The dev tenant's budget holds what its waiting generation may cost at most.
    page.fill("#budget-tenant", "dev")
    page.fill("#budget-daily", "")
    page.fill("#budget-monthly", "100")
    page.click("#budget-save")
    expect(page.locator("#budget-status")).to_have_text("Saved the budget of dev.")
    wait_until(lambda: price_published(stack, "demo/fast"), 30, "the worker published no prices")
    waiting = stack.submit({"model": "demo/fast", "prompt": "later", "delay_ms": 600_000})
    assert waiting["status"] == "scheduled"
    assert server_budgets(stack)["dev"]["reserved_usd"] > 0
    # Nothing on the page changed: the table shows it at its next refresh (every 5 s, later
    # when the refresh before it was slow on a loaded machine).
    expect(budget_row(page, "dev").locator('td[data-label="Reserved"]')).not_to_have_text(
        "$0.000000", timeout=BUDGETS_REFRESH_MS * 3
    )
    expect_budget_rows(page, stack)

    budget_row(page, "alpha").get_by_role("button", name="Edit").click()
    expect(page.locator("#budget-tenant")).to_have_value("alpha")
    expect(page.locator("#budget-daily")).to_have_value("5")
    expect(page.locator("#budget-monthly")).to_have_value("")
    page.fill("#budget-monthly", "50")
    page.click("#budget-save")
    expect(budget_row(page, "alpha").locator('td[data-label="Monthly limit"]')).to_have_text(
        "$50.000000"
    )
    alpha = server_budgets(stack)["alpha"]
    assert (alpha["daily_usd"], alpha["monthly_usd"]) == (5.0, 50.0)

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#budget-remove")
    expect(page.locator("#budget-status")).to_have_text("Removed the budget of alpha.")
    with stack.client(admin=True) as client:
        alpha = client.get("/v1/budgets/alpha").json()
    assert (alpha["daily_usd"], alpha["monthly_usd"], alpha["source"]) == (None, None, "none")
    expect_budget_rows(page, stack)

    # A refused edit says why and changes nothing.
    page.fill("#budget-tenant", "dev")
    page.fill("#budget-monthly", "-1")
    page.click("#budget-save")
    assert server_budgets(stack)["dev"]["monthly_usd"] == 100.0

    actions = page.locator('#audit tbody td[data-label="Action"]')
    expect(actions.filter(has_text="set_budget")).to_have_count(3)
    expect(actions.filter(has_text="clear_budget")).to_have_count(1)

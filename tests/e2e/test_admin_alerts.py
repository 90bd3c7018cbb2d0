"""The /admin Alert deliveries panel in Chromium, against real processes: dead letters written
while no worker alerts are delivered once one starts, and every attempt shows in the panel."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.browser import SCREENSHOTS, running_stack, wait_until
from tests.e2e.test_admin_page import cell, dead_letters, open_admin
from tests.ops.alert_receiver import Hooks

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(120)]

DOOMED = 10


def test_admin_alerts_panel_shows_deliveries_of_dead_letters_from_before_the_worker(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    with (
        Hooks(fail={"/ops": 1}) as hooks,
        running_stack(
            redis_url,
            request.node.name,
            workers=0,
            GENQ_BACKOFF="0.05",
            GENQ_MAX_BACKOFF="0.1",
            GENQ_ALERT_MAX_ATTEMPTS="3",
        ) as stack,
    ):
        webhooks = [
            {"name": "ops", "url": hooks.url("/ops"), "secret": "ops-secret"},
            {"name": "billing", "url": hooks.url("/billing"), "secret": "b", "queues": ["openai"]},
        ]
        stack.start_worker()  # no webhooks: this worker dead-letters, it does not alert
        doomed = dead_letters(stack, DOOMED)
        stack.workers[0].stop()

        open_admin(page, stack)
        rows = page.locator("#alerts tbody tr[data-delivery]")
        expect(page.locator("#alerts tbody")).to_have_text("No alert deliveries yet.")

        stack.start_worker(GENQ_ALERT_WEBHOOKS=json.dumps(webhooks))
        wait_until(
            lambda: len(hooks.to("/ops")) == DOOMED,
            30,
            f"the alerts were not delivered:\n{stack.logs()}",
        )
        with page.expect_request("**/v1/alerts?limit=50"):
            page.click("#alerts-refresh")
        expect(rows).to_have_count(DOOMED + 1)  # each delivered once, one retried once
        assert sorted(hooks.job_ids("/ops")) == sorted(doomed)
        assert hooks.to("/billing", None) == []  # its filter: openai only
        assert all(post.signed_with("ops-secret") for post in hooks.to("/ops", None))

        (failed,) = hooks.to("/ops", status=500)
        failed_job = failed.alert["id"]
        retrying = page.locator('#alerts tbody tr[data-attempt="1"]').filter(has_text="retrying")
        expect(retrying).to_have_count(1)
        expect(cell(retrying, "Job")).to_have_text(failed_job)
        expect(cell(retrying, "Result")).to_have_text("500")
        expect(cell(retrying, "Webhook")).to_have_text("ops")
        delivered = rows.filter(has_text="delivered")
        expect(delivered).to_have_count(DOOMED)
        retried = delivered.filter(has_text=failed_job)
        expect(cell(retried, "Attempt")).to_have_text("2")
        expect(cell(retried, "Result")).to_have_text("200")
        expect(cell(retried, "Queue")).to_have_text("demo")

        with page.expect_request("**/v1/alerts?limit=10"):
            page.select_option("#alerts-limit", "10")
        expect(rows).to_have_count(10)
        with stack.client(admin=True) as client:
            newest = client.get("/v1/alerts", params={"limit": 10}).json()["entries"]
        expect(cell(rows.first, "Job")).to_have_text(newest[0]["job_id"])
        with page.expect_request("**/v1/alerts?limit=50"):
            page.select_option("#alerts-limit", "50")
        expect(rows).to_have_count(DOOMED + 1)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#alerts-section").screenshot(path=str(SCREENSHOTS / "admin-alerts-panel.png"))

        retrying.get_by_role("link", name=failed_job).click()
        expect(page.locator("#job-id-input")).to_have_value(failed_job)
        expect(page.locator("#job-view")).to_be_visible()
        expect(page.locator("#job-record dd").first).to_have_text("failed")
        assert stack.record(failed_job)["status"] == "failed"

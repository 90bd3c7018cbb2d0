"""The operations dashboard (/admin) in Chromium, against the real gateway, worker and Redis."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Dialog, Locator, Page, expect

from tests.e2e.browser import (
    DEV_KEY,
    PHONE,
    Screenshots,
    Stack,
    admin_loaded,
    running_stack,
    wait_until,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG = 60_000  # ms


def open_admin(page: Page, stack: Stack, queue: str = "demo") -> None:
    page.goto(f"{stack.base_url}/admin")
    expect(queue_row(page, queue)).to_be_visible()
    page.select_option("#queue", queue)
    admin_loaded(page)


def queue_row(page: Page, queue: str) -> Locator:
    return page.locator("#queues tbody tr").filter(
        has=page.locator('td[data-label="Queue"]', has_text=re.compile(rf"^{re.escape(queue)}$"))
    )


def cell(row: Locator, label: str) -> Locator:
    return row.locator(f'td[data-label="{label}"]')


def dead_letters(stack: Stack, count: int) -> list[str]:
    """Generations the demo provider rejects with a 400: dead-lettered at once as terminal."""
    ids = [
        stack.submit(
            {"model": "demo/fast", "prompt": f"Doomed {i}", "params": {"demo_fault": "400"}}
        )["id"]
        for i in range(count)
    ]
    for job_id in ids:
        assert stack.result(job_id)["status"] == "failed"
    return ids


def test_admin_page_retries_and_purges_dead_letters(stack: Stack, page: Page) -> None:
    retried, purged = dead_letters(stack, 2)
    stack.workers[0].stop()  # nobody runs the retried job, so it stays back in the queue

    open_admin(page, stack)
    retried_row = page.locator(f'#dead tr[data-job-id="{retried}"]')
    purged_row = page.locator(f'#dead tr[data-job-id="{purged}"]')
    expect(cell(retried_row, "Reason")).to_have_text("terminal")
    expect(cell(retried_row, "Error")).to_contain_text("invalid request")
    expect(cell(retried_row, "Attempts")).to_have_text("1")
    expect(purged_row).to_be_visible()
    demo = queue_row(page, "demo")
    expect(cell(demo, "Dead")).to_have_text("2")

    retried_row.get_by_role("checkbox").check()
    page.click("#retry-selected")
    expect(page.locator("#dead-status")).to_have_text("Retried 1 job.")
    expect(retried_row).to_have_count(0)
    expect(cell(demo, "Dead")).to_have_text("1")
    expect(cell(demo, "Waiting")).to_have_text("1")
    assert stack.record(retried)["status"] == "waiting"

    page.once("dialog", lambda dialog: dialog.accept())
    purged_row.get_by_role("checkbox").check()
    page.click("#purge-selected")
    expect(page.locator("#dead-status")).to_have_text("Purged 1 job.")
    expect(page.locator("#dead tbody")).to_have_text("No dead letters.")
    expect(cell(demo, "Dead")).to_have_text("0")
    with stack.client() as client:
        assert client.get(f"/v1/generations/{purged}").status_code == 404

    audit = page.locator("#audit tbody tr")
    expect(audit).to_have_count(2)
    newest, oldest = audit.nth(0), audit.nth(1)
    expect(cell(newest, "Action")).to_have_text("purge")
    expect(cell(oldest, "Action")).to_have_text("retry")
    for row in (newest, oldest):
        expect(cell(row, "Jobs")).to_have_text("1")
        expect(cell(row, "Queue")).to_have_text("demo")
        expect(cell(row, "Who")).to_contain_text("dev")


def test_admin_page_select_all_retries_every_listed_dead_letter(stack: Stack, page: Page) -> None:
    doomed = dead_letters(stack, 2)
    stack.workers[0].stop()  # nobody runs the retried jobs, so they stay back in the queue

    open_admin(page, stack)
    for job_id in doomed:
        expect(page.locator(f'#dead tr[data-job-id="{job_id}"]')).to_be_visible()
    page.locator("#dead-select-all").check()
    expect(page.locator("#retry-selected")).to_have_text("Retry 2 selected")
    page.locator("#dead-select-all").uncheck()
    expect(page.locator("#retry-selected")).to_be_disabled()
    page.locator("#dead-select-all").check()
    page.click("#retry-selected")
    expect(page.locator("#dead-status")).to_have_text("Retried 2 jobs.")
    assert dead_ids(stack) == set()
    assert {stack.record(job_id)["status"] for job_id in doomed} == {"waiting"}


def dead_ids(stack: Stack, queue: str = "demo") -> set[str]:
    """The queue's dead letters, as the server has them (not as the page shows them)."""
    with stack.client(admin=True) as client:
        response = client.get(f"/v1/queues/{queue}/dead", params={"count": 100})
    assert response.status_code == 200, response.text
    return {entry["id"] for entry in response.json()["entries"]}


def test_admin_page_retries_and_purges_every_dead_letter(stack: Stack, page: Page) -> None:
    ids = dead_letters(stack, 3)
    assert dead_ids(stack) == set(ids)
    stack.workers[0].stop()  # nobody runs the retried jobs, so they stay back in the queue

    open_admin(page, stack)
    demo = queue_row(page, "demo")
    expect(cell(demo, "Dead")).to_have_text("3")
    dialogs: list[str] = []

    def accept(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    page.click("#retry-all")
    expect(page.locator("#dead-status")).to_have_text("Retried 3 jobs.")
    assert dead_ids(stack) == set()
    assert [stack.record(job_id)["status"] for job_id in ids] == ["waiting"] * 3
    expect(cell(demo, "Waiting")).to_have_text("3")

    stack.start_worker()  # the demo provider rejects them again: dead-lettered once more
    for job_id in ids:
        wait_until(
            lambda job_id=job_id: stack.record(job_id)["status"] == "failed",
            timeout=30,
            message=f"{job_id} was not dead-lettered again",
        )
    assert dead_ids(stack) == set(ids)
    expect(cell(demo, "Dead")).to_have_text("3")  # the page polls: the button is enabled again
    page.click("#purge-all")
    expect(page.locator("#dead-status")).to_have_text("Purged 3 jobs.")
    assert dead_ids(stack) == set()
    with stack.client() as client:
        for job_id in ids:
            assert client.get(f"/v1/generations/{job_id}").status_code == 404
    expect(page.locator("#dead tbody")).to_have_text("No dead letters.")
    assert len(dialogs) == 2  # one confirmation per bulk action
    assert "every dead letter" in dialogs[0] and "every dead letter" in dialogs[1]

    audit = page.locator("#audit tbody tr")
    expect(audit).to_have_count(2)
    expect(cell(audit.nth(0), "Action")).to_have_text("purge")
    expect(cell(audit.nth(1), "Action")).to_have_text("retry")
    for row in (audit.nth(0), audit.nth(1)):
        expect(cell(row, "Jobs")).to_have_text("3")


def test_admin_page_shows_a_job_and_its_events_live(
    stack: Stack, page: Page, screenshot: Screenshots
) -> None:
    (dead,) = dead_letters(stack, 1)
    live = stack.submit({"model": "demo/slow", "prompt": "Watch me"})["id"]

    open_admin(page, stack)
    dead_row = page.locator(f'#dead tr[data-job-id="{dead}"]')
    dead_row.locator("summary", has_text="Show").click()  # a dead letter's payload, in its row
    expect(dead_row.locator("pre")).to_contain_text("Doomed 0")
    expect(dead_row.locator("pre")).to_contain_text("demo_fault")
    dead_row.locator("a").click()
    record = page.locator("#job-record")
    attempts = page.locator("#job-attempts")
    expect(record).to_contain_text("failed")
    expect(attempts).to_contain_text("1 of 3")
    expect(record).to_contain_text("no progress")  # the worker never reported any: not 0%
    expect(attempts).to_contain_text("invalid request")
    history = page.locator("#job-history tbody tr")  # each attempt that ended, from the record
    expect(history).to_have_count(1)
    expect(history.first).to_contain_text("failed")
    expect(history.first).to_contain_text("invalid request")
    expect(history.first).to_contain_text("demo/fast")  # the model the attempt called
    # refused before any output: the attempt is metered, at nothing (no provider bills it)
    expect(history.first).to_contain_text("0 prompt + 0 completion tokens, $0.000000")
    expect(page.locator("#job-usage")).to_have_text(
        "0 prompt + 0 completion tokens, $0.000000, every attempt summed."
    )
    expect(page.locator("#job-events")).to_contain_text("failed")
    screenshot(page, "dead-job")

    page.fill("#job-id-input", live)
    page.click("#job-form button")
    page.wait_for_function(  # a function, not an expression: the page's CSP forbids eval
        "() => document.getElementById('job-text').textContent.trim().split(/\\s+/).length >= 5"
    )
    expect(page.locator("#job-live")).to_have_text("(live)")
    expect(record).to_contain_text("active")
    expect(page.locator("#job-events")).to_contain_text("completed", timeout=LONG)
    result = stack.result(live)
    expect(page.locator("#job-text")).to_have_text(result["text"])
    expect(page.locator("#job-result")).to_contain_text(result["text"][:40])
    expect(record).to_contain_text("completed")
    expect(record).to_contain_text("100%")
    expect(page.locator("#job-payload")).to_contain_text("Watch me")
    usage = result["usage"]  # the record's totals: the demo reports none, genq counts
    expect(page.locator("#job-usage")).to_contain_text(
        f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens, "
        f"${usage['cost_usd']:.6f} (estimated), every attempt summed. Answered by demo/slow."
    )


def test_admin_page_counts_update_live_and_fit_a_phone(
    redis_url: str, page: Page, request: pytest.FixtureRequest, screenshot: Screenshots
) -> None:
    with running_stack(redis_url, request.node.name, workers=0) as stack:
        open_admin(page, stack)
        demo = queue_row(page, "demo")
        expect(cell(demo, "Waiting")).to_have_text("0")
        expect(cell(demo, "Oldest waiting")).to_have_text("—")

        for i in range(3):
            stack.submit({"model": "demo/fast", "prompt": f"Queued {i}"})
        expect(cell(demo, "Waiting")).to_have_text("3")  # no reload: the page polls
        expect(cell(demo, "Oldest waiting")).to_have_text(re.compile(r"^\d+(\.\d+)? (ms|s)$"))
        expect(cell(queue_row(page, "openai"), "Waiting")).to_have_text("0")

        page.set_viewport_size(PHONE)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        expect(cell(demo, "Waiting")).to_be_visible()
        screenshot(page, "phone")


def test_admin_page_charts_the_last_24_hours(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    with running_stack(redis_url, request.node.name, workers=0) as stack:
        for i in range(3):
            stack.submit({"model": "demo/fast", "prompt": f"Waiting {i}"})

        def latest_peak() -> int:
            with stack.client(admin=True) as client:
                response = client.get("/v1/queues/demo/history")
            assert response.status_code == 200, (
                f"history route: {response.status_code} {response.text}"
            )
            buckets = response.json()["buckets"]
            assert len(buckets) == 48
            return int(buckets[-1]["peak_depth"])

        wait_until(
            lambda: latest_peak() >= 3, timeout=30, message="history never saw the 3 waiting jobs"
        )

        open_admin(page, stack)
        steps = page.locator("#chart .hit")
        expect(steps).to_have_count(48)
        page.focus("#chart")
        page.keyboard.press("End")  # the newest step
        expect(page.locator("#chart-readout")).to_contain_text("peak depth 3")
        steps.nth(0).hover()
        expect(page.locator("#chart-readout")).to_have_text(
            re.compile(r"^\d\d:\d\d: peak depth \d+")
        )
        page.locator("details", has=page.locator("#history-table")).locator("summary").click()
        expect(page.locator("#history-table tbody tr").first).to_be_visible()


def test_admin_page_refuses_a_key_without_the_admin_role(stack: Stack, page: Page) -> None:
    page.goto(f"{stack.base_url}/admin")
    expect(queue_row(page, "demo")).to_be_visible()  # the dev admin key, filled in dev mode
    page.click("#settings summary")
    page.fill("#admin-key", DEV_KEY)
    page.press("#admin-key", "Enter")
    expect(page.locator("#banner")).to_have_text("This key does not have the admin role.")

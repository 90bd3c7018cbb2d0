"""The generate page (/) in Chromium, against the real gateway, worker and Redis processes."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, Route, expect

from tests.e2e.browser import (
    PHONE,
    Screenshots,
    Stack,
    fake_openai_env,
    job_id_of,
    running_stack,
    seen,
)
from tests.fakes.openai_server import FakeOpenAI, Reply

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG = 60_000  # ms: a demo/slow generation (48 tokens, 200 ms each) plus a worker start-up


def open_generate(page: Page, stack: Stack) -> None:
    page.goto(f"{stack.base_url}/")
    expect(page.locator("#model")).to_be_enabled()
    expect(page.locator("#generate")).to_be_enabled()


def fill_form(page: Page, model: str, prompt: str) -> None:
    page.select_option("#model", model)
    page.fill("#prompt", prompt)


def generate(page: Page, model: str, prompt: str) -> str:
    fill_form(page, model, prompt)
    page.click("#generate")
    expect(page).to_have_url(re.compile(r"[?&]job="))
    return job_id_of(page)


def wait_for_words(page: Page, count: int) -> str:
    page.wait_for_function(
        "n => document.getElementById('output').textContent.trim().split(/\\s+/).length >= n",
        arg=count,
    )
    return str(page.locator("#output").text_content())


def output_text(page: Page) -> str:
    return str(page.locator("#output").text_content())


def assert_never_duplicated(history: list[dict[str, Any]], final: str) -> None:
    """Every text the box held was a beginning of the final text: no chunk shown twice, none
    out of order (a cleared box, after `restarted`, is the empty beginning)."""
    for state in history:
        assert final.startswith(state["text"]), (
            f"the page showed {state['text']!r}, not a prefix of {final!r}"
        )


def test_generate_page_streams_demo_text(stack: Stack, page: Page, screenshot: Screenshots) -> None:
    open_generate(page, stack)
    job_id = generate(page, "demo/fast", "Hello page")

    expect(page.locator("#status")).to_have_text("Completed")
    result = stack.result(job_id)
    final = output_text(page)
    assert result["status"] == "completed"
    assert final == result["text"]
    assert final.startswith("Echo: Hello page ")
    history = seen(page)
    partial = {s["text"] for s in history if s["text"] and s["text"] != final}
    assert len(partial) >= 5, f"the text arrived in {len(partial)} steps, not streamed"
    assert any(s["status"] == "Running" and s["text"] for s in history), (
        "never showed Running with text"
    )
    assert_never_duplicated(history, final)
    assert page.locator("#output").get_attribute("data-mismatch") is None
    expect(page.locator("#generate")).to_be_enabled()
    expect(page.locator("#stop")).to_be_disabled()

    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "phone")


def test_generate_page_refresh_resumes_without_duplicating(
    stack: Stack, page: Page, screenshot: Screenshots
) -> None:
    open_generate(page, stack)
    job_id = generate(page, "demo/slow", "Refresh me")
    before = wait_for_words(page, 8)
    screenshot(page, "before-refresh")

    page.reload()
    expect(page.locator("#status")).to_have_text("Completed", timeout=LONG)
    final = output_text(page)
    result = stack.result(job_id)
    assert job_id_of(page) == job_id
    assert len(before) < len(final), "the refresh came after the end: it resumed nothing"
    assert final == result["text"]
    assert final.startswith(before)
    assert final.count("Echo: Refresh me") == 1
    assert_never_duplicated(seen(page), final)
    assert page.locator("#output").get_attribute("data-mismatch") is None


def test_generate_page_new_tab_follows_the_same_job(
    stack: Stack, page: Page, screenshot: Screenshots
) -> None:
    open_generate(page, stack)
    job_id = generate(page, "demo/slow", "Two tabs")
    wait_for_words(page, 6)

    tab = page.context.new_page()  # no session storage: it replays the stream from the start
    tab.goto(page.url)
    expect(tab.locator("#status")).to_have_text("Completed", timeout=LONG)
    expect(page.locator("#status")).to_have_text("Completed", timeout=LONG)
    result = stack.result(job_id)
    assert output_text(tab) == result["text"]
    assert output_text(page) == result["text"]
    assert_never_duplicated(seen(tab), result["text"])
    assert tab.locator("#output").get_attribute("data-mismatch") is None
    screenshot(tab, "second-tab")


def test_generate_page_stop_closes_the_provider_connection(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    tokens = [f"word{i} " for i in range(400)]
    with FakeOpenAI() as fake:
        fake.plan(Reply.stream(tokens, delay=0.05))
        env = fake_openai_env(fake.base_url)
        with running_stack(redis_url, request.node.name, **env) as stack:
            open_generate(page, stack)
            job_id = generate(page, "openai/gpt-4o-mini", "Stop me")
            wait_for_words(page, 5)
            assert fake.wait_requests(1, timeout=5)
            upstream = fake.requests[0]
            assert upstream.disconnected_at is None

            # Generate was clicked, so keyboard focus moved on to Stop: Enter stops.
            expect(page.locator("#stop")).to_be_focused()
            clicked = time.monotonic()
            page.keyboard.press("Enter")
            expect(page.locator("#status")).to_have_text("Cancelled", timeout=10_000)
            expect(page.locator("#generate")).to_be_focused()
            assert upstream.wait_disconnected(timeout=5), "the provider kept streaming after Stop"
            assert upstream.disconnected_at is not None
            assert upstream.disconnected_at - clicked < 1.0, "the provider connection closed late"
            assert upstream.tokens_sent < len(tokens)
            assert stack.record(job_id)["status"] == "cancelled"

            shown = output_text(page)
            assert shown, "the partial text disappeared"
            assert "".join(tokens).startswith(shown)
            history = seen(page)
            first_cancelled = next(i for i, s in enumerate(history) if s["status"] == "Cancelled")
            assert {s["text"] for s in history[first_cancelled:]} == {shown}, (
                "text changed after Stop"
            )
            expect(page.locator("#stop")).to_be_disabled()
            expect(page.locator("#generate")).to_be_enabled()


def test_generate_page_survives_a_killed_worker(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    # A short lease, so the job is taken over seconds after its worker died.
    with running_stack(redis_url, request.node.name, workers=0, GENQ_LEASE="2") as stack:
        first = stack.start_worker()
        open_generate(page, stack)
        job_id = generate(page, "demo/slow", "Kill the worker")
        killed_at_text = wait_for_words(page, 6)
        first.kill()
        stack.start_worker()

        expect(page.locator("#status")).to_have_text("Completed", timeout=LONG)
        final = output_text(page)
        result = stack.result(job_id)
        assert final == result["text"]
        assert final.count("Echo: Kill the worker") == 1
        history = seen(page)
        shown_partial = next(i for i, s in enumerate(history) if s["text"] == killed_at_text)
        assert any(s["text"] == "" for s in history[shown_partial:]), (
            "the dead attempt's text was not cleared"
        )
        assert any(s["status"].startswith("Restarted") for s in history)
        assert_never_duplicated(history, final)
        assert stack.record(job_id)["attempt"] >= 2
        expect(page.locator("#attempt")).to_contain_text("attempt 2 of")


def test_generate_page_double_click_makes_one_job(stack: Stack, page: Page) -> None:
    open_generate(page, stack)
    posts: list[str] = []
    page.on(
        "request",
        lambda r: (
            posts.append(r.url)
            if r.method == "POST" and r.url.endswith("/v1/generations")
            else None
        ),
    )
    fill_form(page, "demo/fast", "Double click")
    page.dblclick("#generate")

    expect(page.locator("#status")).to_have_text("Completed")
    assert len(posts) == 1
    job_id = job_id_of(page)
    assert len(stack.job_keys("demo")) == 1
    assert output_text(page) == stack.result(job_id)["text"]


def test_generate_page_retried_post_bills_once(stack: Stack, page: Page) -> None:
    open_generate(page, stack)
    keys: list[str | None] = []
    first_answer: list[dict[str, Any]] = []

    def lose_the_first_answer(route: Any) -> None:
        keys.append(route.request.headers.get("idempotency-key"))
        if len(keys) == 1:
            first_answer.append(route.fetch().json())  # the gateway takes the job...
            route.abort("connectionreset")  # ...and its answer is lost on the way back
        else:
            route.continue_()

    page.route("**/v1/generations", lose_the_first_answer)
    fill_form(page, "demo/fast", "Flaky network")
    page.click("#generate")

    expect(page.locator("#status")).to_have_text("Completed")
    assert len(keys) == 2, f"the page sent {len(keys)} POSTs"
    assert keys[0] and keys[0] == keys[1], "the retry used another Idempotency-Key"
    assert job_id_of(page) == first_answer[0]["id"]
    assert len(stack.job_keys("demo")) == 1
    assert output_text(page) == stack.result(job_id_of(page))["text"]


def test_generate_page_works_by_keyboard_on_a_phone(
    stack: Stack, page: Page, screenshot: Screenshots
) -> None:
    page.set_viewport_size(PHONE)
    open_generate(page, stack)
    unlabelled = page.evaluate(
        """[...document.querySelectorAll('input, select, textarea')]
             .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
             .map(e => e.id)"""
    )
    assert unlabelled == []
    expect(page.locator("#output")).to_have_attribute("aria-live", "polite")
    expect(page.locator("#status")).to_have_attribute("role", "status")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]

    order = []
    for _ in range(8):  # the skip link, two nav links, then the form
        page.keyboard.press("Tab")
        order.append(page.evaluate("document.activeElement.id"))
        if order[-1] == "prompt":
            break
    assert order[-2:] == ["model", "prompt"], f"tab order: {order}"
    page.keyboard.type("Typed on a phone")
    page.keyboard.press("Control+Enter")

    expect(page.locator("#status")).to_have_text("Completed")
    assert output_text(page).startswith("Echo: Typed on a phone ")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_generate_page_shows_waiting_then_retrying_countdown(
    redis_url: str, page: Page, request: pytest.FixtureRequest, screenshot: Screenshots
) -> None:
    with running_stack(redis_url, request.node.name, workers=0) as stack:
        open_generate(page, stack)
        job_id = generate(page, "demo/fast", "Rate limited [demo:429:6]")  # 429, Retry-After 6 s
        expect(page.locator("#status")).to_have_text("Waiting in the queue")

        stack.start_worker()
        expect(page.locator("#status")).to_have_text(re.compile(r"^Retrying in [1-6] s$"))
        screenshot(page, "retrying")
        expect(page.locator("#attempt")).to_contain_text("rate limit")
        expect(page.locator("#status")).to_have_text("Completed")
        assert output_text(page) == stack.result(job_id)["text"]
        statuses = [s["status"] for s in seen(page)]
        countdown = [int(m[1]) for s in statuses if (m := re.match(r"^Retrying in (\d+) s$", s))]
        assert countdown == sorted(countdown, reverse=True), f"the countdown went up: {countdown}"


def test_generate_page_shows_a_failure(stack: Stack, page: Page) -> None:
    open_generate(page, stack)
    job_id = generate(page, "demo/fast", "Refused [demo:400]")
    expect(page.locator("#status")).to_have_text(re.compile(r"^Failed: .*invalid request"))
    assert stack.result(job_id)["status"] == "failed"
    expect(page.locator("#generate")).to_be_enabled()
    expect(page.locator("#stop")).to_be_disabled()


def test_generate_page_job_link_reopens_the_job(stack: Stack, page: Page) -> None:
    open_generate(page, stack)
    job_id = generate(page, "demo/fast", "Keep this link")
    expect(page.locator("#status")).to_have_text("Completed", timeout=LONG)
    expect(page.locator("#job-id")).to_have_text(job_id)
    href = page.locator("#job-link").get_attribute("href")

    page.locator("#job-link").click()  # the link reloads the job in place...
    expect(page).to_have_url(re.compile(rf"\?job={re.escape(job_id)}$"))
    expect(page.locator("#status")).to_have_text("Completed", timeout=LONG)
    tab = page.context.new_page()  # ...and opens it anywhere it is shared
    tab.goto(f"{stack.base_url}{href}")
    expect(tab.locator("#status")).to_have_text("Completed", timeout=LONG)
    result = stack.result(job_id)
    assert output_text(page) == result["text"]
    assert output_text(tab) == result["text"]


def test_generate_page_lists_recent_generations_and_reopens_them(stack: Stack, page: Page) -> None:
    quick = [
        stack.submit({"model": "demo/fast", "prompt": f"Quick {i}", "params": {"demo_tokens": 3}})[
            "id"
        ]
        for i in range(11)
    ]
    for job_id in quick:
        stack.result(job_id)
    slow = stack.submit(
        {"model": "demo/slow", "prompt": "Still going", "params": {"demo_tokens": 40}}
    )["id"]
    with stack.client() as client:
        listed = client.get("/v1/generations", params={"limit": 20}).json()["generations"]
    assert [g["id"] for g in listed] == [slow, *quick[::-1]]

    open_generate(page, stack)
    links = page.locator("#recent a")
    expect(links).to_have_count(10)  # one page; the server's first ten, in its order
    assert [a.get_attribute("data-job-id") for a in links.all()] == [g["id"] for g in listed[:10]]
    page.click("#recent-more")
    expect(links).to_have_count(12)
    assert [a.get_attribute("data-job-id") for a in links.all()] == [g["id"] for g in listed]
    expect(page.locator("#recent-more")).to_be_hidden()

    # A running one: the page follows it live.
    page.locator(f'#recent a[data-job-id="{slow}"]').click()
    expect(page).to_have_url(re.compile(rf"\?job={re.escape(slow)}$"))
    expect(page.locator("#status")).to_have_text("Running")
    wait_for_words(page, 3)
    assert stack.record(slow)["status"] == "active"
    expect(page.locator(f'#recent a[data-job-id="{slow}"]')).to_have_attribute(
        "aria-current", "true"
    )

    # A finished one: its text again, as the server has it.
    oldest = quick[0]
    page.locator(f'#recent a[data-job-id="{oldest}"]').click()
    expect(page).to_have_url(re.compile(rf"\?job={re.escape(oldest)}$"))
    expect(page.locator("#status")).to_have_text("Completed", timeout=LONG)
    expect(page.locator("#output")).to_have_text(stack.result(oldest)["text"])

    # Back: the running one again, resumed to its end without a duplicated word. Until its
    # watch token (held here) arrives, the other generation's text and status are gone.
    held: list[Route] = []
    page.route("**/v1/generations/*/token", lambda route: held.append(route))
    with page.expect_request("**/v1/generations/*/token"):
        page.go_back()
    expect(page).to_have_url(re.compile(rf"\?job={re.escape(slow)}$"))
    expect(page.locator("#status")).to_have_text("Connecting…")
    expect(page.locator("#output")).to_have_text("")
    assert len(held) == 1
    held[0].continue_()
    page.unroute("**/v1/generations/*/token")
    expect(page.locator("#status")).to_have_text("Completed", timeout=LONG)
    assert output_text(page) == stack.result(slow)["text"]
    expect(page.locator(f'#recent a[data-job-id="{slow}"] .badge')).to_have_text("completed")

    # The skip link, the nav links of both pages, then a refused key.
    page.locator(".skip-link").focus()  # shown only while focused
    expect(page.locator(".skip-link")).to_be_visible()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#main$"))
    page.click('nav a:has-text("Generate")')
    expect(page).to_have_url(f"{stack.base_url}/")
    expect(links).to_have_count(10)
    page.click('nav a:has-text("Operations")')
    expect(page).to_have_url(f"{stack.base_url}/admin")
    expect(page.locator("#queues tbody")).to_contain_text("demo")
    page.click('nav a:has-text("Operations")')
    expect(page.locator("#queues tbody")).to_contain_text("demo")
    page.click('nav a:has-text("Generate")')
    expect(links).to_have_count(10)
    page.click("details.settings summary")
    page.fill("#api-key", "not-a-key")
    page.press("#api-key", "Enter")
    expect(page.locator("#recent-status")).to_contain_text("Could not list your generations")
    with httpx.Client(base_url=stack.base_url) as client:
        refused = client.get("/v1/generations", headers={"Authorization": "Bearer not-a-key"})
    assert refused.status_code == 401

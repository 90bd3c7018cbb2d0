"""The generate page (/) shows a generation's reasoning and tool calls, in Chromium, against the
real gateway, worker and Redis processes and the fake OpenAI server streaming both: live,
across a refresh, cleared when a retried attempt starts over, and from the record when the
stream has expired."""

from __future__ import annotations

import json

import pytest
import redis
from playwright.sync_api import Page, expect

from genq import Keys
from tests.e2e.browser import Screenshots, fake_openai_env, running_stack, seen
from tests.e2e.test_generate_page import LONG, generate, open_generate, output_text
from tests.fakes.openai_server import FakeOpenAI, Reply, reasoning_deltas, tool_call_deltas

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MODEL = "openai/gpt-4o-mini"
FIRST_THOUGHT = "Let me look out of the window first."
FIRST_ARGS = json.dumps({"window": "north", "open": True})
THOUGHT = "Paris needs a forecast: one call to the weather tool."
ARGS = json.dumps({"city": "Paris", "days": [1, 2, 3], "units": "metric"})


def first_attempt() -> Reply:
    """Reasoning and the start of a call's arguments, then nothing until the worker dies."""
    deltas = [*reasoning_deltas(FIRST_THOUGHT, piece=6), {"content": "Looking."}]
    deltas += tool_call_deltas([("call_old", "look_outside", FIRST_ARGS)], piece=4)
    return Reply(kind="hang", deltas=tuple(deltas), delay=0.02)


def second_attempt() -> Reply:
    deltas = [*reasoning_deltas(THOUGHT, piece=5), {"content": "Checking the forecast."}]
    deltas += tool_call_deltas([("call_w", "get_weather", ARGS)], piece=4)
    return Reply.deltas_of(deltas, delay=0.05, finish_reason="tool_calls", reasoning_tokens=12)


def test_generate_page_shows_reasoning_and_tool_calls_across_refresh_and_retry(
    redis_url: str, page: Page, request: pytest.FixtureRequest, screenshot: Screenshots
) -> None:
    reasoning = page.locator("#reasoning")
    reasoning_text = page.locator("#reasoning-text")
    calls = page.locator("#tool-calls .tool-call")
    with FakeOpenAI() as fake:
        fake.plan(first_attempt())
        fake.plan(second_attempt())
        env = fake_openai_env(fake.base_url)
        # A short lease, so the job is taken over seconds after its worker died.
        with running_stack(redis_url, request.node.name, workers=0, GENQ_LEASE="2", **env) as stack:
            first = stack.start_worker()
            open_generate(page, stack)
            expect(reasoning).to_be_hidden()
            expect(page.locator("#tool-calls")).to_be_hidden()
            job_id = generate(page, MODEL, "Weather in Paris?")

            # Live: the reasoning fills a collapsed box, the call its name and arguments.
            expect(reasoning_text).to_have_text(FIRST_THOUGHT, timeout=LONG)
            expect(reasoning).to_be_visible()
            assert reasoning.get_attribute("open") is None, "the reasoning box opened itself"
            expect(calls).to_have_count(1)
            expect(calls.locator(".tool-name")).to_have_text("look_outside")
            expect(calls.locator(".tool-args")).to_have_text(FIRST_ARGS)
            expect(calls).to_have_attribute("data-done", "false")  # still streaming
            screenshot(page, "first-attempt")

            # A refresh keeps both, the call still unfinished.
            page.reload()
            expect(page.locator("#status")).to_have_text("Running")
            expect(reasoning_text).to_have_text(FIRST_THOUGHT)
            expect(calls).to_have_count(1)
            expect(calls.locator(".tool-args")).to_have_text(FIRST_ARGS)
            expect(calls).to_have_attribute("data-done", "false")

            # The worker dies inside the call; the retried attempt starts everything over.
            first.kill()
            stack.start_worker()
            expect(page.locator("#status")).to_have_text("Completed", timeout=LONG)
            result = stack.result(job_id)
            assert result["reasoning"] == THOUGHT
            assert result["tool_calls"] == [
                {"id": "call_w", "name": "get_weather", "arguments": ARGS}
            ]
            assert result["finish_reason"] == "tool_calls"
            assert result["usage"]["reasoning_tokens"] == 12
            assert stack.record(job_id)["attempt"] >= 2

            expect(reasoning_text).to_have_text(THOUGHT)
            expect(calls).to_have_count(1)
            expect(calls.locator(".tool-name")).to_have_text("get_weather")
            expect(calls).to_have_attribute("data-done", "true")
            expect(calls.locator(".tool-args")).to_have_text(json.dumps(json.loads(ARGS), indent=2))
            assert output_text(page) == result["text"] == "Checking the forecast."
            assert any(s["status"].startswith("Restarted") for s in seen(page))
            reasoning.locator("summary").click()
            expect(reasoning).to_have_attribute("open", "")
            screenshot(page, "completed")

            # A new tab replays the stream from its start and folds it to the same thing.
            tab = page.context.new_page()
            tab.goto(page.url)
            expect(tab.locator("#status")).to_have_text("Completed", timeout=LONG)
            expect(tab.locator("#reasoning-text")).to_have_text(THOUGHT)
            expect(tab.locator("#tool-calls .tool-call")).to_have_count(1)
            expect(tab.locator("#tool-calls .tool-args")).to_have_text(
                json.dumps(json.loads(ARGS), indent=2)
            )


def test_generate_page_settles_reasoning_and_tool_calls_from_the_record_when_the_stream_is_gone(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    """A generation whose event stream expired before the page opened it: the page has nothing
    to replay (the events route answers 204) and shows the record's result, parts included."""
    with FakeOpenAI() as fake:
        fake.plan(second_attempt())
        env = fake_openai_env(fake.base_url)
        with running_stack(redis_url, request.node.name, **env) as stack:
            job_id = stack.submit({"model": MODEL, "prompt": "Weather in Paris?"})["id"]
            result = stack.result(job_id)
            assert result["tool_calls"] == [
                {"id": "call_w", "name": "get_weather", "arguments": ARGS}
            ]
            events = Keys(stack.queue_prefix("openai")).events(job_id)
            with redis.Redis.from_url(redis_url) as client:
                assert client.delete(events) == 1, "the generation's stream was not where expected"

            open_generate(page, stack)
            page.goto(f"{stack.base_url}/?job={job_id}")
            expect(page.locator("#status")).to_have_text("Completed", timeout=LONG)
            expect(page.locator("#reasoning-text")).to_have_text(THOUGHT)
            calls = page.locator("#tool-calls .tool-call")
            expect(calls).to_have_count(1)
            expect(calls.locator(".tool-name")).to_have_text("get_weather")
            expect(calls).to_have_attribute("data-done", "true")
            expect(calls.locator(".tool-args")).to_have_text(json.dumps(json.loads(ARGS), indent=2))
            assert output_text(page) == result["text"] == "Checking the forecast."

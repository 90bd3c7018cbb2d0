"""Issue 17, finding 3, end to end: a provider's output carrying every line separator and
control character reaches the page (EventSource), the Python client and ``Queue.watch`` as the
provider sent it. The provider is the fake OpenAI server, behind LiteLLM in a real worker."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis.asyncio as aioredis
from playwright.sync_api import Page, expect

from genq import Queue, visible_text
from genq_client import Client
from tests.e2e.browser import DEV_KEY, fake_openai_env, job_id_of, running_stack
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.gateway.test_sse_text import PIECES, TEXT

pytestmark = [pytest.mark.browser, pytest.mark.slow]


async def watched_text(redis_url: str, prefix: str, job_id: str) -> str:
    redis = aioredis.Redis.from_url(redis_url)
    try:
        return visible_text([e async for e in Queue(redis, prefix=prefix).watch(job_id)])
    finally:
        await redis.aclose()


def test_sse_text_in_browser_every_separator_reaches_page_client_and_watch(
    redis_url: str, page: Page, request: pytest.FixtureRequest
) -> None:
    with FakeOpenAI() as fake:
        fake.plan(Reply.stream(PIECES, delay=0.01))
        env = fake_openai_env(fake.base_url)
        with running_stack(redis_url, request.node.name, **env) as stack:
            page.goto(f"{stack.base_url}/")
            expect(page.locator("#generate")).to_be_enabled()
            page.select_option("#model", "openai/gpt-4o-mini")
            page.fill("#prompt", "separators")
            page.click("#generate")
            expect(page.locator("#status")).to_have_text("Completed")
            job_id = job_id_of(page)

            assert stack.result(job_id)["text"] == TEXT  # what the provider sent
            assert page.evaluate("document.getElementById('output').textContent") == TEXT
            assert page.locator("#output").get_attribute("data-mismatch") is None
            with Client(stack.base_url, DEV_KEY) as client:
                assert client.text(job_id) == TEXT
            prefix = stack.queue_prefix("openai")
            # Playwright's loop runs on this thread: Queue.watch gets a loop of its own.
            with ThreadPoolExecutor(1) as pool:
                watched = pool.submit(asyncio.run, watched_text(redis_url, prefix, job_id))
                assert watched.result(timeout=30) == TEXT

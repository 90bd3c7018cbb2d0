"""The official ``openai`` Python SDK against a gateway whose tenants may hold 2 streams and 1
wait (Hardening II, items 2 and 3): past either cap the SDK raises its ``RateLimitError``, and
the refused request enqueued nothing, however often the SDK retried it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.browser import DEV_KEY, Stack, running_stack
from tests.openai.conftest import STACK_ENV, sdk_client
from tests.polling import waited_for

pytestmark = pytest.mark.slow

USER = [{"role": "user", "content": "hold on"}]
HANG = {"demo_fault": "hang", "demo_after": 1}
"""The demo provider sends one token, then nothing until the generation is cancelled."""


@pytest.fixture(scope="module")
def stack(redis_url: str, request: pytest.FixtureRequest) -> Iterator[Stack]:
    caps = {"GENQ_TENANT_MAX_STREAMS": "2", "GENQ_TENANT_MAX_WAITS": "1"}
    name = f"openai-{request.module.__name__}"
    with running_stack(redis_url, name, **STACK_ENV, **caps) as running:
        yield running


def generations(stack: Stack) -> list[dict[str, Any]]:
    """The dev tenant's generations, newest first."""
    with stack.client() as client:
        listed = client.get("/v1/generations", params={"limit": 200})
    listed.raise_for_status()
    return list(listed.json()["generations"])


def cancel_running(stack: Stack) -> None:
    with stack.client() as client:
        for generation in generations(stack):
            if generation["status"] in ("waiting", "active"):
                client.post(f"/v1/generations/{generation['id']}/cancel")


def counting_sdk(stack: Stack, attempts: list[int], **options: Any) -> openai.OpenAI:
    """The SDK with its default retries unless ``options`` say otherwise; each HTTP request it
    sends is counted in ``attempts``."""
    http = httpx.Client(event_hooks={"request": [lambda _: attempts.append(1)]})
    return openai.OpenAI(
        base_url=f"{stack.base_url}/v1", api_key=DEV_KEY, http_client=http, timeout=60, **options
    )


def test_limits_refused_chat_wait_enqueues_nothing_however_often_the_sdk_retries(
    stack: Stack,
) -> None:
    before = len(generations(stack))
    with sdk_client(stack) as client, ThreadPoolExecutor(1) as pool:
        held: Future[Any] = pool.submit(
            client.chat.completions.create, model="demo/fast", messages=USER, extra_body=HANG
        )
        try:
            assert waited_for(lambda: len(generations(stack)) == before + 1, 30), (
                "the first chat completion never started"
            )
            with pytest.raises(openai.RateLimitError) as once:
                client.chat.completions.create(model="demo/fast", messages=USER)
            assert once.value.code == "rate_limit_exceeded"
            assert "1 result waits already open" in once.value.message

            attempts: list[int] = []
            with counting_sdk(stack, attempts) as retrying:  # max_retries: the default, 2
                with pytest.raises(openai.RateLimitError):
                    retrying.chat.completions.create(model="demo/fast", messages=USER)
                with pytest.raises(openai.RateLimitError):
                    retrying.responses.create(model="demo/fast", input="hold on")
            assert len(attempts) == 6, "the SDK did not retry each 429 twice"
            assert len(generations(stack)) == before + 1, "a refused wait enqueued a generation"
        finally:
            cancel_running(stack)
            with contextlib.suppress(openai.APIError):
                held.result(30)  # 409: cancelled


def test_limits_third_sdk_stream_is_refused_until_one_closes_and_enqueues_nothing(
    stack: Stack,
) -> None:
    before = len(generations(stack))
    with sdk_client(stack) as client, contextlib.ExitStack() as opened:

        def open_chat() -> Any:
            stream = client.chat.completions.create(
                model="demo/fast", messages=USER, stream=True, extra_body=HANG
            )
            opened.callback(stream.close)
            assert next(stream).choices[0].delta.role == "assistant"
            return stream

        try:
            first = open_chat()
            open_chat()
            with pytest.raises(openai.RateLimitError) as refused:
                open_chat()
            assert "2 event streams already open" in refused.value.message
            attempts: list[int] = []
            with counting_sdk(stack, attempts) as retrying, pytest.raises(openai.RateLimitError):
                retrying.responses.create(model="demo/fast", input="hold on", stream=True)
            assert len(attempts) == 3
            assert len(generations(stack)) == before + 2, "a refused stream enqueued a generation"

            first.close()  # no Idempotency-Key: its generation is cancelled, its slot freed

            def reopened() -> bool:
                try:
                    open_chat()
                except openai.RateLimitError:
                    return False  # not freed yet (a refusal enqueues nothing: try again)
                return True

            assert waited_for(reopened, 30, poll=0.1), "the closed stream's slot stayed taken"
            assert len(generations(stack)) == before + 3
        finally:
            opened.close()
            cancel_running(stack)

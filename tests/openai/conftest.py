"""A live stack for the OpenAI SDK tests: the embedded Redis, a gateway process and a demo
worker process (``tests/e2e/browser.py``'s ``running_stack``), shared by a module's tests.

The worker gets a 2 s lease (a killed worker's job is taken over quickly), short backoffs and
``GENQ_DEMO_FAULTS=1`` (the demo provider fails on request: 429s here).
"""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from tests.e2e.browser import DEV_KEY, Stack, running_stack
from tests.fakes.fixtures import fake

STACK_ENV = {
    "GENQ_DEMO_FAULTS": "1",
    "GENQ_LEASE": "2",
    "GENQ_BACKOFF": "0.05",
    "GENQ_MAX_BACKOFF": "0.2",
    "GENQ_MODELS": "demo/fast,demo/slow,demo/instant",
}


@pytest.fixture(scope="module")
def stack(redis_url: str, request: pytest.FixtureRequest) -> Iterator[Stack]:
    with running_stack(redis_url, f"openai-{request.module.__name__}", **STACK_ENV) as running:
        yield running


def sdk_client(stack: Stack, key: str = DEV_KEY) -> openai.OpenAI:
    """The official SDK pointed at genq; its own retries are off so every call is one request."""
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key=key, max_retries=0, timeout=60)


@pytest.fixture
def client(stack: Stack) -> Iterator[openai.OpenAI]:
    with sdk_client(stack) as sdk:
        yield sdk


__all__ = ["fake"]  # the fake OpenAI server of the modules that stream from one

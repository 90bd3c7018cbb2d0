"""Fixtures over the fakes, shared by the test folders whose conftest re-exports them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A fake OpenAI server for the test, streaming five tokens unless told otherwise."""
    with FakeOpenAI(default_tokens=5) as server:
        yield server


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    """One fake OpenAI server for a module's tests, which plan the replies they need."""
    with FakeOpenAI() as server:
        yield server

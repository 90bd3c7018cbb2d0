from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.litellm_warnings import ignore_litellm_warnings
from tests.fakes.openai_server import FakeOpenAI


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ignore_litellm_warnings(items, Path(__file__).parent)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default_tokens=5) as server:
        yield server

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.fixtures import fake_openai
from tests.fakes.litellm_warnings import ignore_litellm_warnings

__all__ = ["fake_openai"]  # shared with the other folders that run LiteLLM


@pytest.fixture
def through_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request through LiteLLM, none on the direct OpenAI path: for a test of LiteLLM's
    own path (its patches) with an ``openai/...`` model."""
    from providers import direct_openai

    monkeypatch.setattr(direct_openai, "_enabled", False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ignore_litellm_warnings(items, Path(__file__).parent)

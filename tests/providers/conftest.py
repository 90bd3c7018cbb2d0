from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.fixtures import fake_openai
from tests.fakes.litellm_warnings import ignore_litellm_warnings

__all__ = ["fake_openai"]  # shared with the other folders that run LiteLLM


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ignore_litellm_warnings(items, Path(__file__).parent)

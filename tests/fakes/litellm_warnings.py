"""LiteLLM 1.110 warns from inside its own calls; the suite turns warnings into errors.

A LiteLLM call imports provider modules lazily (pydantic warns about ``ReadOnly`` TypedDict
items) and reads deprecated pydantic attributes on every response. Raised as errors, those
warnings would surface as provider failures. Only these known messages are ignored, only for
the tests that run LiteLLM in-process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FILTERS = (
    "ignore:.*`ReadOnly` qualifier:UserWarning",
    "ignore:Accessing the 'model_(computed_)?fields' attribute on the instance is deprecated",
)


def ignore_litellm_warnings(items: list[pytest.Item], under: Path) -> None:
    """Adds the filters to the collected tests that live under ``under``."""
    for item in items:
        if under in item.path.parents:
            for spec in FILTERS:
                item.add_marker(pytest.mark.filterwarnings(spec))

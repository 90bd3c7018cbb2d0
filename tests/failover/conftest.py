"""Fixtures for the Sentinel tests: a primary, a replica and three sentinels on loopback.

``standing`` is shared by a module's tests and never failed over; ``fresh`` is a test's own,
to kill its primary. Both have passwords on the data nodes and on the sentinels, so every test
also proves the URL carries both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.failover.local_sentinel import LocalSentinel

DATA_PASSWORD = "data-secret-3b1f"
SENTINEL_PASSWORD = "sentinel-secret-92ce"


def started(**options: Any) -> LocalSentinel:
    setup = LocalSentinel(password=DATA_PASSWORD, sentinel_password=SENTINEL_PASSWORD, **options)
    setup.start()
    try:
        return setup.wait_ready()
    except BaseException:
        setup.stop()
        raise


@pytest.fixture(scope="module")
def standing() -> Iterator[LocalSentinel]:
    setup = started()
    try:
        yield setup
    finally:
        setup.stop()


@pytest.fixture
def fresh() -> Iterator[LocalSentinel]:
    setup = started()
    try:
        yield setup
    finally:
        setup.stop()

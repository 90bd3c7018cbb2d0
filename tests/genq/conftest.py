from __future__ import annotations

import pytest

from genq import Queue


@pytest.fixture
def queue(redis, prefix) -> Queue:
    """A queue with short timings, so retries and leases play out within a test."""
    return Queue(redis, prefix, lease=5.0, backoff=0.05, max_backoff=0.2, result_ttl=60.0)

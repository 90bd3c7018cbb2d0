"""``genq worker --processes N``: each supervised process gets its own ``/metrics`` port."""

from __future__ import annotations

import pytest

from workers.telemetry import METRICS_PORT, child_environment


def test_each_supervised_process_gets_the_next_metrics_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(METRICS_PORT, "9464")
    monkeypatch.setenv("GENQ_QUEUE_NAMESPACE", "kept")
    ports = [child_environment(slot)[METRICS_PORT] for slot in range(3)]
    assert ports == ["9464", "9465", "9466"]
    assert child_environment(2)["GENQ_QUEUE_NAMESPACE"] == "kept"


@pytest.mark.parametrize("value", [None, "0", "off"])
def test_no_metrics_port_is_passed_on_unchanged(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv(METRICS_PORT, raising=False)
    else:
        monkeypatch.setenv(METRICS_PORT, value)
    assert child_environment(1).get(METRICS_PORT) == value

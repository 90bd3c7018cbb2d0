"""Retry-After in all the shapes providers send it."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from providers.retry_after import MAX_RETRY_AFTER, parse_duration, retry_after_from_headers

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "1200", "retry-after": "9"}, 1.2),  # ms is the more precise
        ({"x-ratelimit-reset-requests": "6m0s"}, 360.0),
        ({"x-ratelimit-reset-tokens": "20ms"}, 0.02),
        (
            {
                "x-ratelimit-reset-requests": "1s",
                "x-ratelimit-reset-tokens": "1m30s",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-remaining-tokens": "5000",
            },
            1.0,  # the exhausted limit decides, not the longest
        ),
        ({"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "2s"}, 2.0),
        ({"anthropic-ratelimit-requests-reset": "2027-01-15T07:59:00Z"}, None),  # in the past
        ({}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "0"}, None),
        ({"retry-after": "-4"}, None),
        ({"retry-after": "nan"}, None),
    ],
)
def test_retry_after_reads_each_header_shape(
    headers: dict[str, str], expected: float | None
) -> None:
    assert retry_after_from_headers(headers, now=NOW) == pytest.approx(expected)


def test_retry_after_http_date_is_relative_to_now() -> None:
    moment = datetime.fromtimestamp(NOW + 42, tz=UTC)
    headers = {"retry-after": format_datetime(moment, usegmt=True)}
    assert retry_after_from_headers(headers, now=NOW) == pytest.approx(42.0)


def test_retry_after_anthropic_reset_time() -> None:
    reset = datetime.fromtimestamp(NOW + 7, tz=UTC).isoformat().replace("+00:00", "Z")
    headers = {"anthropic-ratelimit-tokens-reset": reset}
    assert retry_after_from_headers(headers, now=NOW) == pytest.approx(7.0)


def test_retry_after_is_capped() -> None:
    assert retry_after_from_headers({"retry-after": "99999999"}, now=NOW) == MAX_RETRY_AFTER


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("1h2m3.5s", 3723.5),
        ("250ms", 0.25),
        ("7", 7.0),
        ("1x", None),
        ("", None),
        ("s", None),
    ],
)
def test_parse_duration_go_style(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == pytest.approx(seconds)

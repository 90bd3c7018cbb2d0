"""How long a provider asked us to wait, read from its response headers.

Providers say it in different ways; the first one present wins:

1. ``retry-after-ms``: milliseconds (OpenAI, Azure).
2. ``retry-after``: seconds, or an HTTP date (RFC 9110).
3. Rate-limit reset headers: ``x-ratelimit-reset-requests`` / ``-tokens`` as Go durations
   (``1s``, ``6m0s``, ``250ms``; OpenAI, Groq) and ``anthropic-ratelimit-*-reset`` as RFC 3339
   times. When a ``x-ratelimit-remaining-*`` header says which limit is exhausted, that limit's
   reset is used; otherwise the longest reset.

The answer is capped at :data:`MAX_RETRY_AFTER` so a garbled header cannot park a job for years.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

MAX_RETRY_AFTER = 86_400.0

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_RESET_DIMENSIONS = ("requests", "tokens")
_ANTHROPIC_RESETS = (
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-reset",
)


def retry_after_from_headers(
    headers: Mapping[str, Any] | None, now: float | None = None
) -> float | None:
    """Seconds to wait before retrying, or None when the headers don't say (or say 0)."""
    if not headers:
        return None
    h = {str(k).lower(): str(v).strip() for k, v in headers.items()}
    now = time.time() if now is None else now
    for seconds in (
        _milliseconds(h.get("retry-after-ms")),
        _seconds_or_date(h.get("retry-after"), now),
    ):
        if seconds is not None:
            return _clamp(seconds)
    return _clamp(_reset_wait(h, now))


def parse_duration(text: str) -> float | None:
    """A Go-style duration (``6m0s``, ``1.5s``, ``20ms``) or a bare number of seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def _milliseconds(value: str | None) -> float | None:
    try:
        return float(value) / 1000 if value else None
    except ValueError:
        return None


def _seconds_or_date(value: str | None, now: float) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(value).timestamp() - now
    except (TypeError, ValueError, IndexError):
        return None


def _reset_wait(h: dict[str, str], now: float) -> float | None:
    waits: dict[str, float] = {}
    for dim in _RESET_DIMENSIONS:
        reset = h.get(f"x-ratelimit-reset-{dim}")
        seconds = parse_duration(reset) if reset else None
        if seconds is not None:
            waits[dim] = seconds
    exhausted = [d for d in waits if h.get(f"x-ratelimit-remaining-{d}") == "0"]
    if exhausted:
        return max(waits[d] for d in exhausted)
    for name in _ANTHROPIC_RESETS:
        moment = _rfc3339(h.get(name))
        if moment is not None:
            waits[name] = moment - now
    return max(waits.values()) if waits else None


def _rfc3339(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _clamp(seconds: float | None) -> float | None:
    if seconds is None or seconds != seconds or seconds <= 0:  # None, NaN, past or zero
        return None
    return min(seconds, MAX_RETRY_AFTER)

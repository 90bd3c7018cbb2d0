"""Scrubs credentials out of an error before a tenant or an operator sees it.

A job's error is shown to the tenant and on the dashboard. A provider's message sometimes
quotes the key it rejected ("Incorrect API key provided: sk-...") or echoes a request URL, and
an HTTP worker's ``nack`` error may quote anything its own stack printed. Both go through
:func:`redact`: the built-in workers in ``providers.errors``, the gateway on the pull route.
Redaction is pattern-based (common key shapes, genq's own API keys, ``Bearer`` tokens,
``api_key=...``, URL passwords) plus the exact values the caller knows to be secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[REDACTED]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{6,}"), rf"\1\2{REDACTED}"),
    (re.compile(r"\bsk-[A-Za-z0-9_*-]{6,}"), f"sk-{REDACTED}"),
    (
        re.compile(
            r"(?i)\b((?:x-)?api[_-]?key|apikey|access[_-]?token|auth[_-]?token|secret|password"
            r"|token|key)(\"?'?\s*[=:]\s*[\"']?)([^\s\"',&;}]+)"
        ),
        rf"\1\2{REDACTED}",
    ),
    (re.compile(r"\bgq_[A-Za-z0-9_-]{20,}"), f"gq_{REDACTED}"),  # genq's own API keys
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), REDACTED),  # Google
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),  # AWS access key id
    (re.compile(r"\b(?:gh[pousr]|github_pat)_[A-Za-z0-9_]{20,}"), REDACTED),  # GitHub
    (re.compile(r"\b(?:xai|gsk|hf|pplx|r8)[-_][A-Za-z0-9]{16,}"), REDACTED),  # xAI, Groq, HF, ...
    (re.compile(r"(://)[^/\s:@]+:[^/\s@]+@"), rf"\1{REDACTED}@"),  # user:password@host
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with credentials replaced by ``[REDACTED]``; ``secrets`` are exact values."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text

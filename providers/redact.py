"""Scrubs credentials out of provider messages before they reach a job's error, and request
text out of logs.

A job's error is shown to the tenant and on the dashboard; provider messages sometimes quote
the key that was rejected ("Incorrect API key provided: sk-...") or echo a request URL.
Redaction is pattern-based (common key shapes, ``Bearer`` tokens, ``api_key=...``, URL
passwords) plus the exact values of the keys this process was configured with. A message can
also quote the prompt, which no pattern recognises: logs get no provider text at all (see
:class:`WithholdText` and ``workers.logs``).
"""

from __future__ import annotations

import logging
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


class WithholdText(logging.Filter):
    """Keeps a log record's level, logger and place, and drops its text and traceback.

    For loggers of code that logs request data (LiteLLM logs request params, and at DEBUG whole
    request bodies): no redaction pattern can recognise a prompt, so none of it is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = f" ({record.exc_info[0].__name__})" if record.exc_info and record.exc_info[0] else ""
        record.msg = f"[text withheld] at {record.module}:{record.lineno}{kind}"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


def withhold_text(*logger_names: str) -> None:
    """Installs :class:`WithholdText` on these loggers (once each)."""
    for name in logger_names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, WithholdText) for f in logger.filters):
            logger.addFilter(WithholdText())

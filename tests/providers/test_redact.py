"""Credentials never reach a job's error."""

from __future__ import annotations

import pytest

from providers.redact import REDACTED, redact


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Incorrect API key provided: sk-proj-AbCdEf0123456789xyz.", "AbCdEf0123456789xyz"),
        ("invalid x-api-key sk-ant-api03-QWERTYuiop1234", "QWERTYuiop1234"),
        ("header Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9"),
        ("GET https://x.test/v1?api_key=abc123secret&x=1", "abc123secret"),
        ('{"api-key": "0123456789abcdef"}', "0123456789abcdef"),
        ("key=AIzaSyA1234567890abcdefghijklmnopqrstu was rejected", "AIzaSyA1234567890"),
        ("proxy https://user:hunter2pass@proxy.test failed", "hunter2pass"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123 expired", "ghp_abcdefghijklmnop"),
    ],
)
def test_redact_removes_common_key_shapes(text: str, secret: str) -> None:
    cleaned = redact(text)
    assert secret not in cleaned
    assert REDACTED in cleaned


def test_redact_removes_configured_secrets_verbatim() -> None:
    assert redact("the key was my-odd-key-value!", secrets=["my-odd-key-value!"]) == (
        f"the key was {REDACTED}"
    )


def test_redact_keeps_ordinary_messages() -> None:
    text = "This model's maximum context length is 8192 tokens; max_tokens: 5 is fine."
    assert redact(text) == text
